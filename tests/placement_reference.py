"""Reference implementation of Baechi's memory-aware list scheduling (m-ETF, m-SCT, m-TOPO's
timing; Jeon et al., SoCC 2020): the direct formulation that re-evaluates every ready op on
every device at every step (O(V * ready * devices) numpy work). It is the code distplan
shipped before the event-queue scheduler of `distplan.formulations.placement.listsched`
(commit bc0ada8) and is kept, unchanged in behaviour, as the oracle that the fast scheduler
must reproduce exactly (tests/test_placement_heuristics.py) and as the "old" side of
`benchmarks/bench_placement.py speed`. Times in seconds, memory in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from distplan.formulations.placement.listsched_data import raise_no_fit
from distplan.models.placement_instance import PlacementInstance


@dataclass
class Schedule:
    device: np.ndarray  # (n,) device id per op
    start: np.ndarray  # (n,) seconds
    makespan: float


class _MemoryTimeline:
    """Bytes in use on one device over time (Baechi's liveness model), for placement checks.

    Events are (time, delta); at equal times frees come before allocations, as in the
    evaluator. `earliest_fit` answers: from which start time on can ``extra`` more bytes
    stay resident forever without exceeding the capacity at any later event?
    """

    def __init__(self, capacity: float):
        self.capacity = capacity * (1 + 1e-12)
        self.times: list[float] = []
        self.deltas: list[float] = []
        self.allocated = 0.0  # every byte ever allocated: a cheap sufficient check
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def add(self, time: float, delta: float) -> None:
        self.times.append(time)
        self.deltas.append(delta)
        if delta > 0:
            self.allocated += delta
        self._cache = None

    def earliest_fit(self, start: float, extra: float) -> float:
        if self.allocated + extra <= self.capacity:
            return start
        if self._cache is None:
            t = np.asarray(self.times)
            dl = np.asarray(self.deltas)
            order = np.lexsort((dl > 0, t))
            usage = np.cumsum(dl[order])
            self._cache = (t[order], np.maximum.accumulate(usage[::-1])[::-1])
        t, suffix = self._cache
        limit = self.capacity - extra
        k0 = int(np.searchsorted(t, start, side="right")) - 1
        if k0 < 0 and (suffix.size == 0 or max(0.0, float(suffix[0])) <= limit):
            return start
        k = max(k0, int(np.searchsorted(-suffix, -limit, side="left")), 0)
        if k >= t.size:
            return np.inf
        return max(start, float(t[k]))


def _adjacency(inst: PlacementInstance) -> tuple[list[np.ndarray], list[np.ndarray]]:
    n = inst.n_ops
    order = np.argsort(inst.dst, kind="stable")
    starts = np.searchsorted(inst.dst[order], np.arange(n + 1))
    in_edges = [order[starts[v] : starts[v + 1]] for v in range(n)]
    order_o = np.argsort(inst.src, kind="stable")
    starts_o = np.searchsorted(inst.src[order_o], np.arange(n + 1))
    out_edges = [order_o[starts_o[v] : starts_o[v + 1]] for v in range(n)]
    return in_edges, out_edges


def reference_list_schedule(inst: PlacementInstance, favorite: np.ndarray | None = None, assignment: np.ndarray | None = None) -> Schedule:
    """Schedule every op; raises InfeasibleError naming the op and the memory shortfall.

    ``favorite[i]`` is op i's favorite child (-1 for none); ``assignment`` fixes the device of
    every op (only the start times are chosen then).
    """
    n, nd = inst.n_ops, inst.n_devices
    in_edges, out_edges = _adjacency(inst)
    topo_pos = np.empty(n, dtype=np.int64)
    topo_pos[inst.topo_order()] = np.arange(n)
    need = inst.memory_need()
    groups = inst.colocation_groups()
    group_need = np.bincount(groups, weights=need)
    group_members: dict[int, np.ndarray] = {}
    if np.any(np.bincount(groups) > 1):
        for g in np.flatnonzero(np.bincount(groups) > 1):
            group_members[int(g)] = np.flatnonzero(groups == g)
    fixed = np.full(n, -1, dtype=np.int64)  # device forced by a placed group member
    if assignment is not None:
        fixed = np.asarray(assignment, dtype=np.int64).copy()
        group_members = {}
    used = np.zeros(nd)
    cap = inst.device_memory
    liveness = inst.memory_model == "liveness"
    timelines = [_MemoryTimeline(float(c)) for c in cap]
    allocated = np.zeros(nd)  # mirrors timelines[d].allocated
    group_persistent = np.bincount(groups, weights=inst.memory)
    transient = inst.temporary + inst.output  # allocated at an op's start (liveness)
    consumers_left = np.bincount(inst.src, minlength=n).astype(np.int64)
    group_placed = np.zeros(group_persistent.size, dtype=bool)
    last_consumer_end = np.zeros(n)
    # per-edge delay on every device pair, precomputed lazily per op
    inv_bw = 1.0 / inst.bandwidth
    lat = inst.latency

    device = np.full(n, -1, dtype=np.int64)
    start = np.zeros(n)
    end = np.zeros(n)
    remaining = np.bincount(inst.dst, minlength=n).astype(np.int64)
    dev_free = np.zeros(nd)
    reserved = np.full(nd, -1, dtype=np.int64)  # favorite child a device waits for

    ready_ids: list[int] = []  # ready ops; row k of rt_buf holds ready_ids[k]'s arrival times
    rt_buf = np.zeros((max(n, 1), nd))
    placed_groups: set[int] = set()

    channels = inst.communication == "channels"
    chan_free = np.zeros(nd)
    arrived: dict[tuple[int, int, float], float] = {}

    def channel_arrival(v: int, d: int, commit: bool) -> float:
        """Ready time of v on d when transfers queue on the per-device channels."""
        t = 0.0
        local = chan_free if commit else chan_free.copy()
        for e in in_edges[v]:
            u = int(inst.src[e])
            du = int(device[u])
            if du == d:
                t = max(t, end[u])
                continue
            key = (u, d, float(inst.edge_bytes[e]))
            if key in arrived:
                t = max(t, arrived[key])
                continue
            send = max(end[u], local[du])
            arr = max(send, local[d]) + lat[du, d] + inst.edge_bytes[e] * inv_bw[du, d]
            local[du] = local[d] = arr
            if commit:
                arrived[key] = arr
            t = max(t, arr)
        return t

    def arrival_times(v: int) -> np.ndarray:
        if channels:
            if fixed[v] >= 0:  # only its device matters
                rt = np.full(nd, np.inf)
                rt[fixed[v]] = channel_arrival(v, int(fixed[v]), False)
                return rt
            return np.array([channel_arrival(v, d, False) for d in range(nd)])
        rt = np.zeros(nd)
        for e in in_edges[v]:
            u = int(inst.src[e])
            du = device[u]
            arr = end[u] + lat[du] + inst.edge_bytes[e] * inv_bw[du]
            arr[du] = end[u]
            np.maximum(rt, arr, out=rt)
        return rt

    def add_ready(v: int) -> None:
        rt_buf[len(ready_ids)] = arrival_times(v)
        ready_ids.append(v)

    def place(v: int, d: int, at: float) -> None:
        idx = ready_ids.index(v)
        ready_at = channel_arrival(v, d, True) if channels else float(rt_buf[idx, d])
        s = max(ready_at, float(dev_free[d]), at)
        last = len(ready_ids) - 1  # swap-remove
        ready_ids[idx] = ready_ids[last]
        rt_buf[idx] = rt_buf[last]
        ready_ids.pop()
        g = int(groups[v])
        if fixed[v] < 0 or (assignment is not None and g not in placed_groups):
            placed_groups.add(g)
            used[d] += group_need[g]
            if liveness:
                timelines[d].add(s, group_persistent[g])
                allocated[d] += group_persistent[g]
                group_placed[g] = True
            if g in group_members:
                fixed[group_members[g]] = d
        device[v] = d
        start[v] = s
        end[v] = s + times[v, d]
        dev_free[d] = end[v]
        if liveness:
            timelines[d].add(s, transient[v])
            allocated[d] += transient[v]
            timelines[d].add(end[v], -inst.temporary[v])
            for e in in_edges[v]:
                u = int(inst.src[e])
                last_consumer_end[u] = max(last_consumer_end[u], end[v])
                consumers_left[u] -= 1
                if consumers_left[u] == 0:
                    timelines[int(device[u])].add(max(last_consumer_end[u], end[u]), -inst.output[u])
        if favorite is not None:
            reserved[reserved == v] = -1
        for e in out_edges[v]:
            w = int(inst.dst[e])
            remaining[w] -= 1
            if remaining[w] == 0:
                add_ready(w)
        if favorite is not None and favorite[v] >= 0:
            f = int(favorite[v])
            if remaining[f] == 0 and device[f] < 0 and f in ready_ids:
                rtf = rt_buf[ready_ids.index(f)]
                sf = np.maximum(rtf, dev_free)
                ok = (used + group_need[groups[f]] <= cap * (1 + 1e-12)) if fixed[f] < 0 else (np.arange(nd) == fixed[f])
                if ok[d] and sf[d] <= sf[ok].min() + 1e-12 and d not in set(np.flatnonzero(reserved >= 0).tolist()):
                    reserved[d] = f

    for v in np.flatnonzero(remaining == 0).tolist():
        add_ready(v)

    t = 0.0
    placed = 0
    times = inst.time
    while placed < n:
        ids = np.asarray(ready_ids, dtype=np.int64)
        if channels:  # channel state changes with every transfer: recompute
            for k, v in enumerate(ready_ids):
                rt_buf[k] = arrival_times(v)
        rt = rt_buf[: len(ready_ids)]
        sched = np.maximum(rt, dev_free[None, :])
        # memory / colocation feasibility of (op, device)
        gid = groups[ids]
        fits = np.empty_like(sched, dtype=bool)
        forced = fixed[ids]
        if liveness:
            fits[:] = True
            extra = transient[ids] + np.where(group_placed[gid] | (forced >= 0), 0.0, group_persistent[gid])
            tight = (allocated[None, :] + extra[:, None]) > cap[None, :] * (1 + 1e-12)
            if tight.any():
                for r, d in zip(*np.nonzero(tight)):
                    sched[r, d] = timelines[d].earliest_fit(float(sched[r, d]), float(extra[r]))
            fits &= np.isfinite(sched)
        else:
            ok_mem = (used[None, :] + np.where(forced[:, None] >= 0, 0.0, group_need[gid][:, None])) <= cap[None, :] * (1 + 1e-12)
            fits[:] = ok_mem
        if np.any(forced >= 0):
            rows = np.flatnonzero(forced >= 0)
            mask = np.zeros((rows.size, nd), dtype=bool)
            mask[np.arange(rows.size), forced[rows]] = True
            fits[rows] &= mask
        free_dev = dev_free <= t + 1e-15
        if favorite is not None and np.any(reserved >= 0):
            # a reservation for a child that no longer fits its device is dropped
            for d in np.flatnonzero(reserved >= 0).tolist():
                rows = np.flatnonzero(ids == reserved[d])
                if rows.size and not fits[rows[0], d]:
                    reserved[d] = -1
        if favorite is not None and np.any(reserved >= 0):
            # urgent: the latest earliest-start over devices is already due
            big = np.where(fits, sched, np.inf)
            urgent = np.where(np.isfinite(big), big, -np.inf).max(axis=1) <= t
            for d in np.flatnonzero(reserved >= 0).tolist():
                f = int(reserved[d])
                keep = (ids == f) | urgent
                fits[~keep, d] = False
            # a reserved child is not taken by other devices
            for d in np.flatnonzero(reserved >= 0).tolist():
                f = int(reserved[d])
                rows = np.flatnonzero(ids == f)
                if rows.size:
                    others = np.ones(nd, dtype=bool)
                    others[d] = False
                    fits[np.ix_(rows, others)] = False
        cand = np.where(fits & free_dev[None, :], sched, np.inf)
        if np.isfinite(cand).any():
            best_start = cand.min()
            if best_start <= t + 1e-12 * max(1.0, t):
                # smallest (start, topo position, device id)
                rows, cols = np.nonzero(cand <= best_start)
                k = np.lexsort((cols, topo_pos[ids[rows]]))[0]
                r, d = int(rows[k]), int(cols[k])
                v = int(ids[r])
                place(v, d, float(cand[r, d]))
                placed += 1
                continue
            t_next = best_start
        else:
            t_next = np.inf
        busy = dev_free[dev_free > t + 1e-15]
        if busy.size:
            t_next = min(t_next, float(busy.min()))
        if not np.isfinite(t_next):
            # nothing fits anywhere: report the smallest shortfall of a ready op
            r = int(np.argmin(topo_pos[ids]))
            v = int(ids[r])
            if liveness:  # what v would keep resident against what stays resident for good
                g = groups[v]
                want = transient[v] + (0.0 if (group_placed[g] or fixed[v] >= 0) else group_persistent[g])
                free = cap - np.array([math.fsum(tl.deltas) for tl in timelines])
            else:
                want = group_need[groups[v]]
                free = cap - used
            d = int(fixed[v]) if fixed[v] >= 0 else int(np.argmax(free))
            raise_no_fit(inst, v, d, float(want), float(free[d]), placed)  # the message's wording only
        t = t_next
        continue

    return Schedule(device=device, start=start, makespan=float(end.max()) if n else 0.0)
