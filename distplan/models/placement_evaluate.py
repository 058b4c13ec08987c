"""Operator placement: the independent evaluator (fixed-placement schedule, memory peaks, feasibility and makespan in seconds)."""

from __future__ import annotations

import heapq
import math

import numpy as np

from distplan.errors import InputError
from distplan.models.common import Check
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan

# -- the independent evaluator -----------------------------------------------------------------


def start_times_in_order(inst: PlacementInstance, device: np.ndarray, rank: np.ndarray) -> np.ndarray | None:
    """Earliest start times (seconds) under independent links when each device runs its ops
    in increasing ``rank`` (a permutation of 0..n-1), timed exactly: every op starts at the
    latest of its device's previous end and its inputs' arrivals (end + transfer delay).
    None when those orders contradict the graph (a cycle)."""
    n, nd = inst.n_ops, inst.n_devices
    times = inst.time[np.arange(n), device].tolist()
    dev = device.tolist()
    du, dv = device[inst.src], device[inst.dst]
    cross = du != dv
    # latency and transfer time apart, added in the simulator's order (end + latency + transfer)
    latency = np.where(cross, inst.latency[du, dv], 0.0).tolist()
    transfer = np.where(cross, inst.edge_bytes / inst.bandwidth[du, dv], 0.0).tolist()
    preds: list[list[tuple[int, float, float]]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v, lat, xfer in zip(inst.src.tolist(), inst.dst.tolist(), latency, transfer):
        preds[v].append((u, lat, xfer))
        succs[u].append(v)
    # each op waits for its device's previous op in rank order, then for its inputs
    following = [-1] * n
    previous = [-1] * nd
    for v in np.argsort(rank).tolist():
        if previous[dev[v]] >= 0:
            following[previous[dev[v]]] = v
        previous[dev[v]] = v
    waiting = [len(p) for p in preds]
    for v in following:
        if v >= 0:
            waiting[v] += 1
    start = [0.0] * n
    end = [0.0] * n
    free = [0.0] * nd
    ready = [v for v in range(n) if waiting[v] == 0]
    done = 0
    while ready:
        v = ready.pop()
        t = free[dev[v]]
        for u, lat, xfer in preds[v]:
            t = max(t, end[u] + lat + xfer)
        start[v] = t
        end[v] = free[dev[v]] = t + times[v]
        done += 1
        for w in [*succs[v], following[v]]:
            if w >= 0:
                waiting[w] -= 1
                if waiting[w] == 0:
                    ready.append(w)
    return np.asarray(start) if done == n else None


def schedule_fixed_placement(inst: PlacementInstance, device: np.ndarray, order_key: np.ndarray | None = None) -> np.ndarray:
    """Start times (seconds) for a fixed device per op.

    Without ``order_key``: ETF order — repeatedly start the ready op with the earliest
    possible start on its device (ties: topological position). With ``order_key``: each
    device runs its ops in increasing key order (as soon as inputs arrive). Honours the
    instance's communication model.
    """
    n, nd = inst.n_ops, inst.n_devices
    topo_pos = np.empty(n, dtype=np.int64)
    topo_pos[inst.topo_order()] = np.arange(n)
    channels = inst.communication == "channels"
    if order_key is not None and not channels:
        rank = np.empty(n, dtype=np.int64)
        rank[np.lexsort((topo_pos, np.asarray(order_key)))] = np.arange(n)
        in_order = start_times_in_order(inst, device, rank)
        if in_order is None:
            raise InputError("plan.start", "the per-device order contradicts the dependencies (deadlock)", "order ops consistently with the graph")
        return in_order
    dur = inst.time[np.arange(n), device]
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for e, (a, b) in enumerate(zip(inst.src.tolist(), inst.dst.tolist())):
        preds[b].append(e)
        succs[a].append(e)
    chan_free = np.zeros(nd)
    # channels cache: a tensor (producer op, bytes) received once on a device is reused there
    arrived: dict[tuple[int, int, float], float] = {}
    end = np.full(n, np.nan)
    start = np.full(n, np.nan)
    dev_free = np.zeros(nd)
    remaining = np.array([len(p) for p in preds])
    if order_key is not None:
        queues = [sorted(np.flatnonzero(device == d).tolist(), key=lambda v: (order_key[v], topo_pos[v])) for d in range(nd)]
        qpos = [0] * nd

    def ready_time(v: int, commit: bool) -> float:
        d = int(device[v])
        t = 0.0
        local_chan = chan_free.copy() if (channels and not commit) else chan_free
        for e in preds[v]:
            u = int(inst.src[e])
            du = int(device[u])
            if du == d:
                t = max(t, end[u])
                continue
            if channels:
                key = (u, d, float(inst.edge_bytes[e]))
                if key in arrived:
                    t = max(t, arrived[key])
                    continue
                c = inst.latency[du, d] + inst.edge_bytes[e] / inst.bandwidth[du, d]
                send = max(end[u], local_chan[du])
                recv = max(send, local_chan[d])
                arr = recv + c
                local_chan[du] = local_chan[d] = arr
                if commit:
                    arrived[key] = arr
                t = max(t, arr)
            else:
                t = max(t, end[u] + inst.latency[du, d] + inst.edge_bytes[e] / inst.bandwidth[du, d])
        return t

    done = 0
    ready = {v for v in range(n) if remaining[v] == 0}
    while done < n:
        if order_key is not None:
            cands = []
            for d in range(nd):
                if qpos[d] < len(queues[d]):
                    v = queues[d][qpos[d]]
                    if remaining[v] == 0:
                        cands.append(v)
            if not cands:
                raise InputError("plan.start", "the per-device order contradicts the dependencies (deadlock)", "order ops consistently with the graph")
        else:
            cands = list(ready)
        best = None
        for v in cands:
            s = max(ready_time(v, False), dev_free[device[v]])
            key = (s, topo_pos[v], v)
            if best is None or key < best[0]:
                best = (key, v)
        assert best is not None
        v = best[1]
        s = max(ready_time(v, True), dev_free[device[v]])
        start[v] = s
        end[v] = s + dur[v]
        dev_free[device[v]] = end[v]
        done += 1
        if order_key is not None:
            qpos[int(device[v])] += 1
        else:
            ready.discard(v)
        for e in succs[v]:
            w = int(inst.dst[e])
            remaining[w] -= 1
            if remaining[w] == 0 and order_key is None:
                ready.add(w)
    return start


def memory_peaks(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Peak bytes per device under the instance's memory model.

    Liveness: an op allocates its persistent, temporary and output bytes when it starts;
    its temporary bytes are freed when it ends, its output when its last consumer ends.
    Ops run in graph order: a consumer that the checks' tolerance lets start a little
    before its producer ends is counted both at its written start and from that end
    (`execution_starts`; the raises add up along a chain, so the peak is the larger of
    the two counts: review rev12, a 1000-op chain had moved an allocation past a free). At one
    instant, what ends there is freed before what starts there is allocated, except what
    a zero-time op holds: it runs at that instant, after the ops that start there before
    it (by start, end, then graph order, on every device) and before the ones after it,
    so its temporary bytes, and the inputs it is the last to read (on any device), are
    freed right after it runs. (Freeing them with the rest had dropped a zero-time op's
    temporary bytes and inputs from its own peak: review rev12 D3, 60 bytes reported
    where 110 are held.) This is the count of running the ops one at a time in that
    order (tests/test_placement_numerics.py)."""
    nd = inst.n_devices
    if inst.memory_model == "simple":
        return np.bincount(device, weights=inst.memory, minlength=nd)
    dur = inst.time[np.arange(inst.n_ops), device]
    written = np.asarray(start, dtype=float)
    raised = execution_starts(inst, written, dur)
    peaks = _liveness_peaks(inst, device, written, dur)
    if not np.array_equal(raised, written):  # both orders must fit: the raises add up along a chain
        peaks = np.maximum(peaks, _liveness_peaks(inst, device, raised, dur))
    return peaks


def _liveness_peaks(inst: PlacementInstance, device: np.ndarray, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """`memory_peaks` under the liveness model for these start times (seconds)."""
    n, nd = inst.n_ops, inst.n_devices
    end = start + dur
    pos = np.empty(n, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(n)
    rank = np.empty(n, dtype=np.int64)  # the ops' order at one instant
    rank[np.lexsort((pos, end, start))] = np.arange(n)
    # when each op's output is freed, as an event key (time, phase, rank, step): phase 0
    # before the instant's allocations, 1 among them (right after the zero-time reader of
    # that rank runs)
    freed: list[tuple[float, int, int, int] | None] = [None] * n
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        key = (float(end[b]), 1, int(rank[b]), 1) if dur[b] == 0 else (float(end[b]), 0, 0, 0)
        if freed[a] is None or key > freed[a]:
            freed[a] = key
    peaks = np.zeros(nd)
    for d in range(nd):
        ops = np.flatnonzero(device == d)
        events: list[tuple[tuple[float, int, int, int], float]] = []
        for v in ops.tolist():
            events.append(((float(start[v]), 1, int(rank[v]), 0), inst.memory[v] + inst.temporary[v] + inst.output[v]))
            events.append(((float(end[v]), 0, 0, 0) if dur[v] > 0 else (float(start[v]), 1, int(rank[v]), 1), -inst.temporary[v]))
            freed_at = freed[v]
            if freed_at is not None:
                events.append((freed_at, -inst.output[v]))
        events.sort(key=lambda x: x[0])
        cur = 0.0
        peak = 0.0
        for _, delta in events:
            cur += delta
            peak = max(peak, cur)
        peaks[d] = peak
    return peaks


def execution_starts(inst: PlacementInstance, start: np.ndarray, dur: np.ndarray) -> np.ndarray:
    """Start times (seconds) with no op before the end of an op it consumes: each start
    raised, in graph order, to its producers' raised ends. Equal to ``start`` for a plan
    that meets precedence exactly; otherwise raised by the slack the checks allow."""
    out = start.copy()
    if inst.n_edges == 0:
        return out
    preds: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        preds[b].append(a)
    for v in inst.topo_order().tolist():
        for u in preds[v]:
            if out[u] + dur[u] > out[v]:
                out[v] = out[u] + dur[u]
    return out


def retimed_makespan(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> float:
    """Makespan (seconds) of the earliest schedule that keeps the plan's order of ops on each
    device (`start_times_in_order`), the order being the overlap check's (start, then end,
    then id), so starts that the checks accept within their tolerance cannot shorten the
    makespan below that of a plan that meets every constraint exactly. Where those orders
    contradict the graph (ops tied within the tolerance), ops are taken by least (start,
    end, id) among those whose inputs are placed."""
    n, nd = inst.n_ops, inst.n_devices
    times = inst.time[np.arange(n), device]
    rank = np.empty(n, dtype=np.int64)
    rank[np.lexsort((np.arange(n), start + times, start))] = np.arange(n)
    in_order = start_times_in_order(inst, device, rank)
    if in_order is not None:
        return float((in_order + times).max(initial=0.0))
    delay = inst.delay(np.arange(inst.n_edges), device[inst.src], device[inst.dst])
    dev, dur = device.tolist(), times.tolist()
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for u, v, c in zip(inst.src.tolist(), inst.dst.tolist(), delay.tolist()):
        preds[v].append((u, c))
        succs[u].append(v)
    waiting = [len(p) for p in preds]
    keys = rank.tolist()
    heap = [(keys[v], v) for v in range(n) if waiting[v] == 0]
    heapq.heapify(heap)
    end = [0.0] * n
    free = [0.0] * nd
    while heap:
        _, v = heapq.heappop(heap)
        t = free[dev[v]]
        for u, c in preds[v]:
            t = max(t, end[u] + c)
        end[v] = free[dev[v]] = t + dur[v]
        for w in succs[v]:
            waiting[w] -= 1
            if waiting[w] == 0:
                heapq.heappush(heap, (keys[w], w))
    return max(end, default=0.0)


def evaluate(inst: PlacementInstance, plan: PlacementPlan) -> Check:
    """Check a plan and recompute its makespan (seconds), independently of any formulation.

    Checks: every op placed once on a known device; colocation groups together; start
    times non-negative; precedence with communication delay; no two ops overlapping on a
    device; memory per device under its capacity (instance memory model) within a relative
    `MEMORY_TOLERANCE` (`PlacementInstance.accepted_memory`). With the
    channel communication model, or when the plan has no start times, the schedule is
    re-simulated from the plan's device assignment (and per-device order). Given start
    times are checked within 1e-7 x makespan; the makespan is at least that of the exact
    earliest schedule in the plan's per-device orders (`retimed_makespan`).
    """
    n, nd = inst.n_ops, inst.n_devices
    violations: list[str] = []
    device = np.asarray(plan.device)
    if device.shape != (n,):
        return Check(False, math.inf, [f"plan has {device.size} device entries for {n} ops"])
    if np.any((device < 0) | (device >= nd)):
        k = int(np.flatnonzero((device < 0) | (device >= nd))[0])
        return Check(False, math.inf, [f"op {inst.op_names[k]!r} has invalid device id {int(device[k])}"])
    groups = inst.colocation_groups()
    n_groups = int(groups.max()) + 1 if n else 0
    lo = np.full(n_groups, nd, dtype=np.int64)
    hi = np.full(n_groups, -1, dtype=np.int64)
    np.minimum.at(lo, groups, device)
    np.maximum.at(hi, groups, device)
    for g in np.flatnonzero(lo != hi).tolist():  # O(V): only split groups are looked at
        members = np.flatnonzero(groups == g)
        violations.append(f"colocation group {inst.colocate[int(members[0])]!r} is split over several devices")
    simulated = plan.start is None or inst.communication == "channels"
    if plan.start is None:
        start = schedule_fixed_placement(inst, device)
    elif inst.communication == "channels":
        start = schedule_fixed_placement(inst, device, order_key=np.asarray(plan.start))
    else:
        start = np.asarray(plan.start, dtype=float)
        if start.shape != (n,) or not np.all(np.isfinite(start)):
            return Check(False, math.inf, ["start times missing or not finite"])
    dur = inst.time[np.arange(n), device]
    end = start + dur
    scale = max(1.0, float(np.max(end))) if n else 1.0
    tol = 1e-7 * scale
    # below ``noise`` (~4 ulp of the makespan) a shortfall is the rounding of one addition
    # in another order (the scheduler's end + latency + bytes / bandwidth against the
    # delay added here), not slack taken: no re-timing for it. Summed over any chain it
    # stays far below the 4e-9 relative margin by which bounds are rounded down.
    noise = 1e-15 * scale
    if np.any(start < -tol):
        k = int(np.flatnonzero(start < -tol)[0])
        violations.append(f"op {inst.op_names[k]!r} starts at {start[k]} < 0")
    slack_used = bool(np.any(start < -noise))  # some check passed only within its tolerance
    if not simulated and inst.n_edges:
        a, b = inst.src, inst.dst
        need_t = end[a] + inst.delay(np.arange(inst.n_edges), device[a], device[b])
        slack_used = slack_used or bool(np.any(start[b] < need_t - noise))
        late = np.flatnonzero(start[b] < need_t - tol)
        for e in late[:10].tolist():
            violations.append(
                f"edge {inst.op_names[a[e]]!r} -> {inst.op_names[b[e]]!r}: starts at {start[b[e]]:.9g} s before "
                f"its input arrives at {need_t[e]:.9g} s"
            )
        if late.size > 10:
            violations.append(f"... {late.size - 10} more precedence violations")
    for d in range(nd):
        ops = np.flatnonzero(device == d)
        if ops.size < 2:
            continue
        order = ops[np.lexsort((end[ops], start[ops]))]
        slack_used = slack_used or bool(np.any(start[order[1:]] < end[order[:-1]] - noise))
        overlap = np.flatnonzero(start[order[1:]] < end[order[:-1]] - tol)
        for k in overlap[:5].tolist():
            u, v = int(order[k]), int(order[k + 1])
            violations.append(
                f"device {inst.device_names[d]!r}: ops {inst.op_names[u]!r} [{start[u]:.9g}, {end[u]:.9g}] s and "
                f"{inst.op_names[v]!r} [{start[v]:.9g}, {end[v]:.9g}] s overlap"
            )
    peaks = memory_peaks(inst, device, start)
    accepted = inst.accepted_memory()  # capacity x (1 + MEMORY_TOLERANCE): what proofs compare with too
    for d in range(nd):
        if peaks[d] > accepted[d]:
            violations.append(
                f"device {inst.device_names[d]!r}: memory peak {int(peaks[d])} bytes exceeds its capacity "
                f"{int(inst.device_memory[d])} by {int(peaks[d] - inst.device_memory[d])} bytes"
            )
    makespan = float(end.max()) if n else 0.0
    if not simulated and slack_used:
        # the checks allow each arc and overlap 1e-7 x makespan, which could add up along a
        # chain: the objective is never below the exact earliest schedule in the plan's orders
        makespan = max(makespan, retimed_makespan(inst, device, start))
    details = {
        "makespan_seconds": makespan,
        "start": start,
        "simulated": simulated,
        "ops_per_device": np.bincount(device, minlength=nd).tolist(),
        "busy_seconds": np.bincount(device, weights=dur, minlength=nd).tolist(),
        "memory_peak_bytes": peaks.tolist(),
        "memory_capacity_bytes": inst.device_memory.tolist(),
        "cross_device_edges": int(np.sum(device[inst.src] != device[inst.dst])),
    }
    return Check(not violations, makespan, violations, details)


def describe(inst: PlacementInstance, plan: PlacementPlan, check: Check) -> list[str]:
    d = check.details
    lines = [f"{'device':<14} {'ops':>6} {'busy':>12} {'memory peak':>16} {'capacity':>16}"]
    for k, name in enumerate(inst.device_names):
        lines.append(
            f"{name:<14} {d['ops_per_device'][k]:>6} {d['busy_seconds'][k] * 1e3:>9.3f} ms "
            f"{d['memory_peak_bytes'][k] / 1e6:>13.1f} MB {d['memory_capacity_bytes'][k] / 1e6:>13.1f} MB"
        )
    lines.append(f"cross-device edges {d['cross_device_edges']} of {inst.n_edges}")
    return lines
