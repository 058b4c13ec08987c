"""Memory-aware list scheduling: the engine behind m-ETF, m-SCT and m-TOPO's timing.

Event-driven Earliest-Task-First (Hwang, Chow, Anger & Lee, SIAM J. Comput. 1989) with
Baechi's memory awareness (Jeon et al., SoCC 2020, arXiv 2301.08695): at time ``t`` every
free device proposes the ready op with the smallest (earliest start, topological position)
that fits its remaining memory; the globally smallest proposal starts if its start is
``<= t``, otherwise time jumps to the next event. Ties go to the lowest device id.

With ``favorite`` (m-SCT), a device that just ran op ``i`` reserves itself for i's
favorite child ``f`` when f is ready and this device is among f's earliest starts; a
reserved device runs only f, unless some ready op is *urgent* (its latest earliest-start
over devices is ``<= t``).

With Baechi's channel model the ready times account for transfers queued on the sender's
and receiver's channels, and received tensors are cached per device.

Memory accounting: under the simple model each device holds the sum of its ops' memory;
under the liveness model a per-device timeline holds persistent memory (a colocation
group's at its first placement), temporaries while ops run and outputs until their last
consumer finished, and an op starts only when its bytes fit from then on (when every byte
that could ever be charged fits every device, `memory_never_binds`, no check can fail and
the timelines are not kept). Colocation groups move together: the first op placed drags
its group to that device. Times in seconds, memory in bytes.

Implementation (near-linear): every device keeps its ready ops in two heaps, those whose
inputs arrive by the time the device is free (ordered by topological position) and the
others (ordered by a lower bound of their start). The free devices' ops are visited
together in order of (bound, position, device) and their exact start (channel queues,
memory timeline) is evaluated only while the bound is below the best exact start found.
The first bound is the arrival without channel contention; under the channel model an
evaluated op's entry then takes a tighter bound that stays valid as the schedule grows
(`channel_probe`), so ops that lost once are not evaluated again at every step. An entry
whose exact start is its bound is read where it stands (no later entry comes before it).
Under the independent communication model and without memory pressure the first valid op
is the answer, so one step costs O(devices · log V) and the whole schedule
O((V + E) · devices · log V). The best proposal is kept until the next placement (steps
that only advance time add the devices that became free); under uniform links an op's
arrival on every device comes from its largest and second-largest remote arrival,
O(in-degree + devices); an op with a fixed device gets its arrival there only. The plans
are the same as those of the direct formulation (every ready op on every device at every
step), which the tests keep as a reference.

The instance is read from flat lists (`listsched_data.StaticLists`: edges in CSR form;
per-op lists of in-edges only for the channel model's probes), built once per instance and
only read here, so the local search can pass one to every call; placed ops' arrival lists
are freed as they go, so new ones reuse memory still in cache.
"""

from __future__ import annotations

import heapq
import math
from array import array
from dataclasses import dataclass, replace

import numpy as np

from distplan.formulations.deadline import check as check_deadline
from distplan.formulations.placement.listsched_data import (
    MemoryTimeline,
    StaticLists,
    arrival_on,
    check_favorites,
    independent_arrival,
    memory_never_binds,
    raise_never_starts,
    raise_no_fit,
    static_lists,
    topological_positions,
)
from distplan.models.common import gc_paused
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan

__all__ = ["Schedule", "list_schedule", "topological_positions"]

_INF = math.inf
#: a device whose free time is within this many seconds after the current time t counts
#: as free at t (absolute: rounding in the sums of op and transfer times)
FREE_SLACK = 1e-15


@dataclass
class Schedule:
    device: np.ndarray  # (n,) device id per op
    start: np.ndarray  # (n,) seconds
    makespan: float


def evaluated_schedule(inst: PlacementInstance, plan: PlacementPlan) -> Schedule | None:
    """The independent evaluator's schedule of ``plan`` (`placement_evaluate.evaluate`: its
    start times and makespan, seconds); None when the plan is infeasible.

    The schedule returned is one the evaluator accepts as it stands, with that makespan.
    Its own start times are, unless they lose the per-device order it simulated: ops that
    end up at the same start on a device (zero-time ops) are read back in op order, which
    may not be the order it ran them in, and the plan made of them can hold more memory
    (liveness, channels; hypothesis seed 3404: 42 bytes became 45 on a device of 42.75).
    Then the plan's own start times are kept: the evaluator re-simulates them into the same
    schedule."""
    check = evaluate(inst, plan)
    if not check.feasible:
        return None
    device = np.asarray(plan.device)
    start = np.asarray(check.details["start"], dtype=float)
    if plan.start is not None and not np.array_equal(start, np.asarray(plan.start, dtype=float)):
        again = evaluate(inst, replace(plan, start=start))
        if not again.feasible or float(again.objective) != float(check.objective) or not np.array_equal(np.asarray(again.details["start"], dtype=float), start):
            start = np.asarray(plan.start, dtype=float)
    return Schedule(device=device, start=start, makespan=float(check.objective))


def list_schedule(
    inst: PlacementInstance,
    favorite: np.ndarray | None = None,
    assignment: np.ndarray | None = None,
    topo: tuple[list[int], list[int]] | None = None,
    static: StaticLists | None = None,
    deadline: float | None = None,
) -> Schedule:
    """Schedule every op (start times in seconds); raises NoSolutionError naming the op and
    the memory shortfall (bytes) where it stops (a greedy stop: other plans may fit), and
    `DeadlineReached` when ``deadline`` (a ``time.perf_counter()`` value) passes first
    (checked every `DEADLINE_EVERY` placements: m-ETF takes 0.09 s on 13,188 ops).

    ``favorite[i]`` is op i's favorite child (a successor of i, or -1 for none; an op is the
    favorite of at most one op, as m-SCT's rounding makes them); ``assignment`` fixes the
    device of every op (only the start times are chosen then); ``topo`` is a precomputed
    `topological_positions` result and ``static`` a precomputed ``static_lists(inst,
    with_members=assignment is None)``. The cyclic garbage collector is paused meanwhile
    (`gc_paused`: the scheduler allocates many short-lived tuples and no cycles, and the
    collections they would trigger cost 3-6% of its time).
    """
    with gc_paused():
        return _list_schedule(inst, favorite, assignment, topo, static, deadline)


#: placements between two looks at the deadline (a power of two, less one: a mask)
DEADLINE_EVERY = 255


def _list_schedule(
    inst: PlacementInstance,
    favorite: np.ndarray | None,
    assignment: np.ndarray | None,
    topo: tuple[list[int], list[int]] | None,
    static: StaticLists | None,
    deadline: float | None,
) -> Schedule:
    check_deadline(deadline, "the list scheduler")
    n, nd = inst.n_ops, inst.n_devices
    fav = None if favorite is None else check_favorites(inst, favorite)
    heappush, heappop, heapify, heapreplace = heapq.heappush, heapq.heappop, heapq.heapify, heapq.heapreplace

    # -- static data as Python lists (element access in the loop) -----------------------
    st = static_lists(inst, with_members=assignment is None) if static is None else static
    order, topo_pos = topological_positions(inst, st.ids) if topo is None else topo
    in_cut, in_src, in_bytes, out_cut, out_dst = st.in_cut, st.in_src, st.in_bytes, st.out_cut, st.out_dst
    ins, distinct, times, groups = st.ins, st.distinct, st.times, st.groups
    gneed, gpers, members, transient, temporary, output = st.gneed, st.gpers, st.members, st.transient, st.temporary, st.output
    inv_bw, lat = st.inv_bw, st.lat
    t_op, t_dev = st.t_op, st.t_dev
    if assignment is not None:
        assignment = np.asarray(assignment, dtype=np.int64)
        if assignment.shape != (n,) or (n and not 0 <= int(assignment.min()) <= int(assignment.max()) < nd):
            raise ValueError(f"list_schedule: assignment must give each of the {n} ops a device in 0..{nd - 1}, got shape {assignment.shape}")
    fixed = [-1] * n if assignment is None else assignment.tolist()
    forced_mode = assignment is not None
    cap = inst.device_memory.astype(float).tolist()
    capx = inst.accepted_memory().tolist()
    used = [0.0] * nd
    liveness = inst.memory_model == "liveness"
    loose = memory_never_binds(inst, assignment)
    track = liveness and not loose  # the timelines are read only when memory can bind
    charged = not (forced_mode and loose)  # the bytes on each device are read only when memory can bind or ops move
    timelines = [MemoryTimeline(c) for c in capx] if track else []
    tl_time, tl_delta = [tl.times for tl in timelines], [tl.deltas for tl in timelines]  # events appended directly
    consumers_left, remaining = st.consumers[:] if track else [], st.indeg[:]  # counted down: copies (``st`` is reused across calls)
    allocated = [0.0] * nd
    group_placed = [False] * len(gneed)
    last_consumer_end = [0.0] * n if track else []
    channels = inst.communication == "channels"
    devs = list(range(nd))

    # -- dynamic state ----------------------------------------------------------------------
    device = [-1] * n
    done = [False] * n  # by topological position: placed (queue entries are positions)
    start = array("d", bytes(8 * n))  # written once per op: no float object kept
    end = [0.0] * n
    dev_free = [0.0] * nd
    reserved = [-1] * nd  # favorite child a device waits for
    reserver = [-1] * n  # device that waits for an op
    no_rt: list[float] = []
    rt_lb: list[list[float]] = [no_rt] * n  # arrival per device without channel contention (dropped once placed)
    rel: list[list[int]] = [[] for _ in devs]  # ready ops (topological positions) arrived by dev_free
    pend: list[list[tuple[float, int]]] = [[] for _ in devs]  # (lower bound of the start, position)
    frel: list[list[int]] = [[] for _ in devs]  # the same for ops forced onto the device (m-SCT)
    fpend: list[list[tuple[float, int]]] = [[] for _ in devs]
    need_heap: list[tuple[float, int]] = []  # (-bytes, op) of unforced ready ops (m-SCT)
    chan_free = [0.0] * nd
    not_sent = -_INF  # (an arrival may be negative on an instance built with negative latency)
    arrived = [not_sent] * (st.n_tensors * nd) if channels else []  # arrival (s) of a tensor on a device, at its key + device
    epoch = 0  # bumped whenever the channel state changes
    no_probe = (-1, 0.0, 0.0, False)
    chan_cache = [no_probe] * (n * nd) if channels else []  # at v * nd + d: (epoch, probe, its bound, books a transfer)
    placed = 0
    t = 0.0

    def channel_commit(v: int, d: int) -> float:
        """Ready time (s) of v on d when transfers queue on the per-device channels; the
        transfers are booked (a new ``epoch`` of the channel state then)."""
        nonlocal epoch
        r = 0.0
        for u, b, k in ins[v]:
            du = device[u]
            if du == d:
                eu = end[u]
                if eu > r:
                    r = eu
                continue
            key = k + d
            a = arrived[key]
            if a != not_sent:
                if a > r:
                    r = a
                continue
            eu = end[u]
            lu = chan_free[du]
            send = eu if eu >= lu else lu
            ld = chan_free[d]
            arr = (send if send >= ld else ld) + lat[du][d] + b * inv_bw[du][d]
            chan_free[du] = chan_free[d] = arr
            arrived[key] = arr
            epoch += 1
            if arr > r:
                r = arr
        return r

    def channel_probe(v: int, d: int) -> tuple[float, float, bool]:
        """`channel_commit` without booking (s; a tensor seen twice is sent twice), a
        lower bound of it (s) that does not decrease as the schedule grows: the inputs on d
        already, each transfer's own earliest arrival, and the transfers still due queued
        back to back on d's channel (when v's tensors are distinct), and whether the commit
        would book a transfer (if not, its ready time is the probe's). Channels' free times
        only grow and a tensor's arrival, once there, is fixed; the bound is lowered by a
        relative 1e-9 against rounding (its sums are taken in another order)."""
        r = bound = 0.0
        books = False
        local: list[float] | None = None  # the channels as booked by the transfers so far (copied when first needed)
        q = chan_free[d]
        for u, b, k in ins[v]:
            du = device[u]
            if du == d:
                a = end[u]
            else:
                a = arrived[k + d]
                if a == not_sent:
                    books = True
                    eu = end[u]
                    la, ib = lat[du][d], b * inv_bw[du][d]
                    lu = chan_free[du]
                    own = (eu if eu >= lu else lu) + la + ib
                    if own > bound:
                        bound = own
                    q = q + la + ib
                    if local is None:
                        local = chan_free[:]
                    lu = local[du]
                    send = eu if eu >= lu else lu
                    ld = local[d]
                    a = (send if send >= ld else ld) + la + ib
                    local[du] = local[d] = a
                    if a > r:
                        r = a
                    continue
            if a > r:
                r = a
            if a > bound:
                bound = a
        if distinct[v] and q > bound:
            bound = q
        return r, bound - 1e-9 * abs(bound), books

    def exact(v: int, d: int, lb: float) -> float | None:
        """Exact earliest start (s) of v on d given its lower bound ``lb``; None: v does not
        fit d now; -1.0: v never fits d (simple memory model)."""
        fx = fixed[v]
        if channels:  # the probe is kept while the channel state is unchanged (``epoch``)
            c = chan_cache[v * nd + d]
            if c[0] == epoch:
                r = c[1]
            else:
                r, bound, books = channel_probe(v, d)
                chan_cache[v * nd + d] = (epoch, r, bound, books)
            f0 = dev_free[d]
            s = r if r >= f0 else f0
        else:
            s = lb
        if loose:
            return s
        if liveness:
            g = groups[v]
            extra = transient[v] + (0.0 if (group_placed[g] or fx >= 0) else gpers[g])
            if allocated[d] + extra > capx[d]:
                s = timelines[d].earliest_fit(s, extra)
                if s == _INF:
                    return None
            return s
        if used[d] + (0.0 if fx >= 0 else gneed[groups[v]]) <= capx[d]:
            return s
        return -1.0

    def sched_on(v: int, d: int) -> float | None:
        """Earliest start (s) of ready op v on device d, None if v does not fit d now."""
        fx = fixed[v]
        if fx >= 0 and fx != d:
            return None
        if channels:
            s: float | None = exact(v, d, 0.0)
        else:
            r = rt_lb[v][d]
            f0 = dev_free[d]
            s = exact(v, d, r if r >= f0 else f0)
        return None if s is None or s == -1.0 else s

    def fits(v: int, d: int) -> bool:
        """Is `sched_on` (v, d) not None, without its start: whether ready op v fits device d
        now depends on memory only (`MemoryTimeline.earliest_fit` finds a start or none
        whatever the start it is asked from)."""
        fx = fixed[v]
        if fx >= 0 and fx != d:
            return False
        if loose:
            return True
        g = groups[v]
        if liveness:
            extra = transient[v] + (0.0 if (group_placed[g] or fx >= 0) else gpers[g])
            return allocated[d] + extra <= capx[d] or timelines[d].earliest_fit(0.0, extra) != _INF
        return used[d] + (0.0 if fx >= 0 else gneed[g]) <= capx[d]

    def urgent(v: int) -> bool:
        """Is the latest earliest start of v over the devices it fits already due (<= t)?"""
        for d in devs:
            s = sched_on(v, d)
            if s is not None and s > t:
                return False
        return True

    def ready(v: int) -> bool:
        """v's inputs are all placed and v is not (no table kept: read off the cold paths)."""
        return remaining[v] == 0 and device[v] < 0

    def unforced_blocked() -> bool:
        """True when no unforced ready op can be urgent: a device busy after t fits them all."""
        while need_heap:
            _, v = need_heap[0]
            if ready(v) and fixed[v] < 0:
                break
            heappop(need_heap)
        if not need_heap:
            return True
        big = -need_heap[0][0]
        held = allocated if liveness else used
        for d in devs:  # noqa: SIM110 (a loop, not any(): no generator per call)
            if dev_free[d] > t and held[d] + big <= capx[d]:
                return True
        return False

    def propose_reserved(d: int, f: int) -> tuple[float, int] | None:
        """Device d's best (start, topological position) while it waits for its reserved
        child ``f``: f, or an urgent op due now."""
        f0 = dev_free[d]
        sf = sched_on(f, d)
        if sf is None:  # cannot happen: dropped reservations are checked before
            return None
        best_s, best_p = sf, topo_pos[f]
        r, p = (frel[d], fpend[d]) if unforced_blocked() else (rel[d], pend[d])
        while p and p[0][0] <= f0:  # released; an op placed meanwhile is dropped here
            tp = heappop(p)[1]
            if not done[tp]:
                heappush(r, tp)
        stash_r: list[int] = []
        stash_p: list[tuple[float, int]] = []
        while True:
            if r:
                tp = r[0]
                lb = f0
                from_r = True
            elif p:
                lb, tp = p[0]
                from_r = False
            else:
                break
            if lb > t or lb > best_s or (lb == best_s and tp >= best_p):
                break
            v = order[tp]
            fx = fixed[v]
            if device[v] >= 0 or (fx >= 0 and fx != d):
                heappop(r if from_r else p)  # type: ignore[arg-type, misc]
                continue
            rv = reserver[v]
            if v == f or (rv >= 0 and rv != d):
                s = None
            else:
                s = exact(v, d, lb)
                if s == -1.0:  # never fits this device again: drop it
                    heappop(r if from_r else p)  # type: ignore[arg-type, misc]
                    continue
                if s is not None and (s > t or not urgent(v)):
                    s = None
            if s is not None and (s < best_s or (s == best_s and tp < best_p)):
                best_s, best_p = s, tp
                if s == lb:
                    break
            if from_r:
                stash_r.append(heappop(r))
            else:
                stash_p.append(heappop(p))
        for x in stash_r:
            heappush(r, x)
        for y in stash_p:
            heappush(p, y)
        return best_s, best_p

    def start_on(v: int, k: int) -> float:
        """Baechi's start of v on device k in the current state (s): its ready time there
        (channel queues probed under the channel model), or the device's free time."""
        a = channel_probe(v, k)[0] if channels else rt_lb[v][k]
        f0 = dev_free[k]
        return a if a >= f0 else f0

    def add_ready(v: int) -> None:
        """Enqueue v (its predecessors all placed) on the devices it may run on."""
        tp = topo_pos[v]
        fx = fixed[v]
        if fx >= 0:
            # under the channel model the queues need only a lower bound of the start (it is
            # probed when evaluated): 0 puts v in the released queue, bounded by the free time
            a = 0.0 if channels else arrival_on(in_src[in_cut[v] : in_cut[v + 1]], in_bytes[in_cut[v] : in_cut[v + 1]], fx, device, end, st)
            rt = [_INF] * nd
            rt[fx] = a
            rt_lb[v] = rt
            if a <= dev_free[fx]:
                heappush(rel[fx], tp)
                if fav is not None:
                    heappush(frel[fx], tp)
            else:
                heappush(pend[fx], (a, tp))
                if fav is not None:
                    heappush(fpend[fx], (a, tp))
            return
        lo, hi = in_cut[v], in_cut[v + 1]
        rt = rt_lb[v] = independent_arrival(in_src[lo:hi], in_bytes[lo:hi], device, end, st)
        for d in devs:
            a = rt[d]
            if a <= dev_free[d]:
                heappush(rel[d], tp)
            else:
                heappush(pend[d], (a, tp))
        if fav is not None:
            g = groups[v]
            heappush(need_heap, (-(transient[v] + gpers[g] if liveness else gneed[g]), v))

    def place(v: int, d: int, at: float) -> None:
        f = fav[v] if fav is not None else -1  # a child of v: not ready before v is placed
        tp = topo_pos[v]  # v's entry in d's queues, usually on top: dropped now rather than as stale later
        r = rel[d]
        if r and r[0] == tp:
            heappop(r)
        else:
            q = pend[d]
            if q and q[0][1] == tp:
                heappop(q)
        if channels:  # the probe of the current channel state is the ready time when it books nothing
            c = chan_cache[v * nd + d]
            ready_at = c[1] if c[0] == epoch and not c[3] else channel_commit(v, d)
        else:
            ready_at = rt_lb[v][d]
        rt_lb[v] = no_rt  # freed: the next op's list reuses its memory
        s = ready_at
        if dev_free[d] > s:
            s = dev_free[d]
        if at > s:
            s = at
        if charged:
            g = groups[v]
            if fixed[v] < 0 or (forced_mode and not group_placed[g]):
                used[d] += gneed[g]
                if liveness:
                    allocated[d] += gpers[g]
                    if track:
                        tl_time[d].append(s)
                        tl_delta[d].append(gpers[g])
                group_placed[g] = True
                for w in members.get(g, ()) if members else ():
                    fixed[w] = d
                    if w != v and ready(w):  # already in d's main queue
                        a = rt_lb[w][d]
                        if a <= dev_free[d]:
                            heappush(frel[d], topo_pos[w])
                        else:
                            heappush(fpend[d], (a, topo_pos[w]))
        device[v] = d
        done[tp] = True
        start[v] = s
        ev = s + times[v * t_op + d * t_dev]
        end[v] = ev
        dev_free[d] = ev
        if liveness and charged:
            allocated[d] += transient[v]
        if track:
            tt, td = tl_time[d], tl_delta[d]
            tt.append(s)
            td.append(transient[v])
            tt.append(ev)
            td.append(-temporary[v])
            for u in in_src[in_cut[v] : in_cut[v + 1]]:
                if ev > last_consumer_end[u]:
                    last_consumer_end[u] = ev
                consumers_left[u] -= 1
                if consumers_left[u] == 0:
                    lc, eu = last_consumer_end[u], end[u]
                    du = device[u]
                    tl_time[du].append(lc if lc >= eu else eu)
                    tl_delta[du].append(-output[u])
        if fav is not None:
            for dd in devs:
                if reserved[dd] == v:
                    reserved[dd] = -1
            reserver[v] = -1
        for w in out_dst[out_cut[v] : out_cut[v + 1]]:
            remaining[w] -= 1
            if remaining[w] == 0:
                add_ready(w)
        if f >= 0 and reserved[d] < 0 and ready(f):
            # d waits for f when f fits d and starts there no later than on any device it
            # fits (a fixed f fits only its own device)
            fx = fixed[f]
            if fx >= 0:
                keep = fx == d
            else:
                gn = gneed[groups[f]]
                keep = used[d] + gn <= capx[d]
                if keep:
                    sd = start_on(f, d)
                    lb = rt_lb[f]  # contention-free arrivals: below the probes, which are then skipped
                    for k in devs:
                        if k != d and used[k] + gn <= capx[k]:
                            f0 = dev_free[k]
                            a = lb[k]
                            if sd > (a if a >= f0 else f0) + 1e-12 and sd > start_on(f, k) + 1e-12:
                                keep = False
                                break
            if keep:
                reserved[d] = f
                reserver[f] = d

    def released(d: int) -> tuple[float, list[int], list[tuple[float, int]]]:
        """Device d's free time (s), released ops (positions) and pending ones ((bound,
        position)), the pending entries due by then moved to the released ones and the
        entries of ops placed meanwhile dropped from the front."""
        f0 = dev_free[d]
        r, p = rel[d], pend[d]
        while p and p[0][0] <= f0:  # released; an op placed meanwhile is dropped here
            tp = heappop(p)[1]
            if not done[tp]:
                heappush(r, tp)
        while r and done[r[0]]:  # placed elsewhere (m-ETF queues every ready op on every device): dropped
            heappop(r)
        return f0, r, p

    def select(ds: list[int], bs: float, bp: int, bd: int) -> tuple[float, int, int]:
        """The smallest (start, topological position, device) of the given one and those of
        the unreserved devices ``ds``: their ready ops are merged in order of their bounds
        and evaluated only while a bound is below the best (exact start >= bound). Under the
        channel model an evaluated entry takes the bound of `channel_probe` when larger."""
        tops: list[tuple[float, int, int]] = []
        for d in ds:
            f0, r, p = released(d)
            if r:
                tops.append((f0, r[0], d))
            elif p:
                lb, tp = p[0]
                tops.append((lb, tp, d))
        heapify(tops)
        stash: list[tuple[int, int, tuple[float, int] | None]] = []
        while tops:
            lb, tp, d = tops[0]
            if lb > bs or (lb == bs and (tp > bp or (tp == bp and d > bd))):
                break
            r, p = rel[d], pend[d]
            v = order[tp]
            fx = fixed[v]
            keep = False  # else dropped: placed, bound elsewhere, or never fits this device again
            item: tuple[float, int] | None = None  # the entry's new key, when it takes a tighter bound
            if device[v] < 0 and (fx < 0 or fx == d):
                rv = reserver[v]
                keep = True
                if rv < 0 or rv == d:
                    sv = exact(v, d, lb)
                    if sv == -1.0:
                        keep = False
                    else:
                        if sv is not None and (sv < bs or (sv == bs and (tp < bp or (tp == bp and d < bd)))):
                            bs, bp, bd = sv, tp, d
                        if channels:
                            kb = chan_cache[v * nd + d][2]
                            if kb > lb and kb > dev_free[d]:
                                item = (kb, tp)
                        if sv == lb and item is None:  # the entry stays: every other one comes later
                            break
            if r:
                heappop(r)
            else:
                x = heappop(p)
                if item is None:
                    item = x
            if keep:
                stash.append((d, tp, item))
            if r:
                heapreplace(tops, (dev_free[d], r[0], d))
            elif p:
                lb, tp = p[0]
                heapreplace(tops, (lb, tp, d))
            else:
                heappop(tops)
        for d, tp, item in stash:
            if item is None:
                heappush(rel[d], tp)
            else:
                heappush(pend[d], item)
        return bs, bp, bd

    def select_one(d: int, bs: float, bp: int, bd: int) -> tuple[float, int, int]:
        """`select` for one device: its released ops (bound: its free time) by position,
        then its pending ones by (bound, position), without the merge. An entry whose exact
        start is its bound ends the scan where it stands (no later entry comes before it), so
        the usual answer, the first entry, is read without a pop and a push back."""
        f0, r, p = released(d)
        back_r: list[int] = []
        back_p: list[tuple[float, int]] = []
        while r or p:
            if r:
                lb, tp = f0, r[0]
            else:
                lb, tp = p[0]
            if lb > bs or (lb == bs and (tp > bp or (tp == bp and d > bd))):
                break
            v = order[tp]
            fx = fixed[v]
            if device[v] >= 0 or (fx >= 0 and fx != d):  # placed, or bound elsewhere: dropped
                heappop(r if r else p)  # type: ignore[arg-type, misc]
                continue
            item: tuple[float, int] | None = None  # the entry's new key, when it takes a tighter bound
            rv = reserver[v]
            if rv < 0 or rv == d:
                sv = exact(v, d, lb)
                if sv == -1.0:  # never fits this device again, dropped
                    heappop(r if r else p)  # type: ignore[arg-type, misc]
                    continue
                if sv is not None and (sv < bs or (sv == bs and (tp < bp or (tp == bp and d < bd)))):
                    bs, bp, bd = sv, tp, d
                if channels:
                    kb = chan_cache[v * nd + d][2]
                    if kb > lb and kb > f0:
                        item = (kb, tp)
                if sv == lb and item is None:  # the entry stays: later ones start no earlier, at larger positions
                    break
            if r:
                heappop(r)
                if item is None:
                    back_r.append(tp)
                else:
                    back_p.append(item)
            else:
                x = heappop(p)
                back_p.append(x if item is None else item)
        for tp in back_r:
            heappush(r, tp)
        for y in back_p:
            heappush(p, y)
        return bs, bp, bd

    for v in range(n):
        if remaining[v] == 0:
            add_ready(v)

    # the best proposal of the unreserved free devices depends on the state, not on t: it is
    # kept until the next placement or dropped reservation (a new version of the state) and
    # extended with the devices that become free as time advances (``kept``). The devices
    # free at t (ascending) and the busy ones, by their free time, are kept as they change,
    # so a step looks at the devices that changed only
    kept: tuple[float, int, int] = (_INF, n, nd)
    free_devs = sorted(set(fixed)) if forced_mode else devs[:]  # dev_free <= t + FREE_SLACK (devices without ops left out)
    busy: list[tuple[float, int]] = []  # (dev_free, device) of the others
    newly: list[int] = []  # devices freed since the last step of this version
    stale = True  # a new version: every free device proposes again
    due = 1e-12  # a start <= due starts now: t within a relative 1e-12
    free_t = FREE_SLACK  # t + FREE_SLACK at t = 0
    while placed < n:
        if fav is not None:
            for d in devs:  # a reservation for a child that no longer fits its device is dropped
                f = reserved[d]
                if f >= 0 and not fits(f, d):
                    reserved[d] = -1
                    reserver[f] = -1
                    stale = True
                    kept = (_INF, n, nd)
        fresh = []
        for d in free_devs if stale else newly:
            if (rel[d] or pend[d]) and reserved[d] < 0:  # (under m-TOPO most devices have no ready op)
                fresh.append(d)
        stale = False
        newly = []
        if fresh:
            kept = select_one(fresh[0], *kept) if len(fresh) == 1 else select(fresh, *kept)
        bs, bp, bd = kept  # the smallest (start, position, device) of all proposals
        if fav is not None:
            for d in free_devs:
                f = reserved[d]
                if f >= 0:
                    prop = propose_reserved(d, f)
                    if prop is not None and (prop[0] < bs or (prop[0] == bs and (prop[1] < bp or (prop[1] == bp and d < bd)))):
                        bs, bp, bd = prop[0], prop[1], d
        if bs <= due and bp < n:
            place(order[bp], bd, bs)
            placed += 1
            if deadline is not None and not placed & DEADLINE_EVERY:
                check_deadline(deadline, f"the list scheduler ({placed} of {n} ops placed)")
            stale = True
            kept = (_INF, n, nd)
            ev = dev_free[bd]
            if ev > free_t:
                free_devs.remove(bd)
                heappush(busy, (ev, bd))
            continue
        t_next = bs
        if busy and busy[0][0] < t_next:
            t_next = busy[0][0]
        if t_next == _INF:
            # nothing fits anywhere: report the smallest shortfall of a ready op
            v = min((u for u in range(n) if ready(u)), key=lambda u: topo_pos[u])
            if liveness:  # what v would keep resident against what stays resident for good
                g = groups[v]
                want = transient[v] + (0.0 if (group_placed[g] or fixed[v] >= 0) else gpers[g])
                free = [cap[k] - (math.fsum(timelines[k].deltas) if track else allocated[k]) for k in devs]
            else:
                want = gneed[groups[v]]
                free = [cap[k] - used[k] for k in devs]
            dd = fixed[v] if fixed[v] >= 0 else int(np.argmax(free))
            if loose or want <= free[dd]:  # memory is not what stops it
                raise_never_starts(inst, v, placed)
            raise_no_fit(inst, v, dd, want, free[dd], placed)
        t = t_next
        due = t + 1e-12 * (t if t > 1.0 else 1.0)
        free_t = t + FREE_SLACK
        while busy and busy[0][0] <= free_t:
            d = heappop(busy)[1]
            newly.append(d)
            free_devs.append(d)
        if newly:
            free_devs.sort()

    return Schedule(device=np.asarray(device, dtype=np.int64), start=np.frombuffer(start, dtype=float).copy(), makespan=max(end) if n else 0.0)
