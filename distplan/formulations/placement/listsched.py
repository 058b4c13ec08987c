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
consumer finished, and an op starts only when its bytes fit from then on. Colocation groups
move together: the first op placed drags its group to that device. Times in seconds, memory
in bytes.

Implementation (near-linear): every device keeps its ready ops in two heaps, those whose
inputs arrive by the time the device is free (ordered by topological position) and the
others (ordered by arrival time). The arrival time without channel contention is a lower
bound of the start on a device; a device's proposal is found by visiting its ops in order
of that bound and evaluating the exact start (channel queues, memory timeline) only until
the bound exceeds the best exact start found. Under the independent communication model
and without memory pressure the first valid op is the answer, so one step costs
O(devices · log V) and the whole schedule O((V + E) · devices · log V). A device's proposal
is kept until the next placement (steps that only advance time reuse it); under uniform
links an op's arrival on every device comes from its largest and second-largest remote
arrival, O(in-degree + devices). The plans are the
same as those of the direct formulation (every ready op on every device at every step),
which the tests keep as a reference.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

import numpy as np

from distplan.errors import InfeasibleError
from distplan.models.placement_instance import PlacementInstance

_INF = math.inf


@dataclass
class Schedule:
    device: np.ndarray  # (n,) device id per op
    start: np.ndarray  # (n,) seconds
    makespan: float


class _MemoryTimeline:
    """Bytes in use on one device over time (Baechi's liveness model), for placement checks.

    Events are (time [s], delta [bytes]); at equal times frees come before allocations, as
    in the evaluator. `earliest_fit` answers: from which start time on can ``extra`` more
    bytes stay resident forever without exceeding the capacity at any later event?
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
            return _INF
        return max(start, float(t[k]))


def topological_positions(inst: PlacementInstance) -> tuple[list[int], list[int]]:
    """Kahn's order with the smallest op id first among ready ops (the order of
    `PlacementInstance.topo_order`), as (order, position of each op); O((V + E) log V)."""
    n = inst.n_ops
    dst = inst.dst.tolist()
    indeg = np.bincount(inst.dst, minlength=n).tolist()
    order_e = np.argsort(inst.src, kind="stable")
    starts = np.searchsorted(inst.src[order_e], np.arange(n + 1)).tolist()
    succ_dst = [dst[e] for e in order_e.tolist()]
    heap = [v for v in range(n) if indeg[v] == 0]
    heapq.heapify(heap)
    order: list[int] = []
    pop, push = heapq.heappop, heapq.heappush
    while heap:
        v = pop(heap)
        order.append(v)
        for k in range(starts[v], starts[v + 1]):
            w = succ_dst[k]
            indeg[w] -= 1
            if indeg[w] == 0:
                push(heap, w)
    pos = [0] * n
    for k, v in enumerate(order):
        pos[v] = k
    return order, pos


def list_schedule(
    inst: PlacementInstance,
    favorite: np.ndarray | None = None,
    assignment: np.ndarray | None = None,
    topo: tuple[list[int], list[int]] | None = None,
) -> Schedule:
    """Schedule every op (start times in seconds); raises InfeasibleError naming the op and
    the memory shortfall (bytes).

    ``favorite[i]`` is op i's favorite child (a successor of i, or -1 for none; an op is the
    favorite of at most one op, as m-SCT's rounding makes them); ``assignment`` fixes the
    device of every op (only the start times are chosen then); ``topo`` is a precomputed
    `topological_positions` result.
    """
    n, nd = inst.n_ops, inst.n_devices
    if favorite is not None:
        fv = np.asarray(favorite, dtype=np.int64)
        has = np.flatnonzero(fv >= 0) if fv.shape == (n,) else np.zeros(0, dtype=np.int64)
        if (
            fv.shape != (n,)
            or np.any(fv >= n)
            or np.any(np.bincount(fv[has], minlength=1) > 1)
            or not np.all(np.isin(has * n + fv[has], inst.src * n + inst.dst))
        ):
            raise ValueError("favorite must give each op at most one favorite child (a successor's id or -1), each the favorite of at most one op")
    order, topo_pos = topological_positions(inst) if topo is None else topo
    heappush, heappop = heapq.heappush, heapq.heappop

    # -- static data as Python lists (element access in the loop) -----------------------
    src_l = inst.src.tolist()
    dst_l = inst.dst.tolist()
    bytes_l = inst.edge_bytes.astype(float).tolist()
    e_in = np.argsort(inst.dst, kind="stable").tolist()
    ins: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for e in e_in:
        ins[dst_l[e]].append((src_l[e], bytes_l[e]))
    e_out = np.argsort(inst.src, kind="stable").tolist()
    outs: list[list[int]] = [[] for _ in range(n)]
    for e in e_out:
        outs[src_l[e]].append(dst_l[e])
    times = inst.time.astype(float).tolist()
    need = inst.memory_need()
    groups_a = inst.colocation_groups()
    groups = groups_a.tolist()
    gneed = np.bincount(groups_a, weights=need).tolist()
    gsize = np.bincount(groups_a)
    members: dict[int, list[int]] = {}
    if assignment is None and np.any(gsize > 1):
        for v, g in enumerate(groups):
            if gsize[g] > 1:
                members.setdefault(g, []).append(v)
    fixed = [-1] * n if assignment is None else np.asarray(assignment, dtype=np.int64).tolist()
    forced_mode = assignment is not None
    cap = inst.device_memory.astype(float).tolist()
    capx = (inst.device_memory * (1 + 1e-12)).tolist()
    used = [0.0] * nd
    liveness = inst.memory_model == "liveness"
    timelines = [_MemoryTimeline(c) for c in cap] if liveness else []
    allocated = [0.0] * nd
    gpers = np.bincount(groups_a, weights=inst.memory).tolist()
    transient = (inst.temporary + inst.output).tolist()
    temporary = inst.temporary.astype(float).tolist()
    output = inst.output.astype(float).tolist()
    consumers_left = np.bincount(inst.src, minlength=n).tolist()
    group_placed = [False] * len(gpers)
    last_consumer_end = [0.0] * n
    inv_bw = (1.0 / inst.bandwidth).tolist()
    lat = inst.latency.astype(float).tolist()
    channels = inst.communication == "channels"
    off = ~np.eye(nd, dtype=bool)
    homogeneous = nd == 1 or (np.ptp(inst.latency[off]) == 0 and np.ptp(1.0 / inst.bandwidth[off]) == 0)
    lat0 = float(inst.latency[off][0]) if nd > 1 else 0.0
    ib0 = float((1.0 / inst.bandwidth)[off][0]) if nd > 1 else 0.0
    fav = None if favorite is None else np.asarray(favorite, dtype=np.int64).tolist()
    devs = list(range(nd))

    # -- dynamic state ----------------------------------------------------------------------
    device = [-1] * n
    start = [0.0] * n
    end = [0.0] * n
    remaining = np.bincount(inst.dst, minlength=n).tolist()
    dev_free = [0.0] * nd
    reserved = [-1] * nd  # favorite child a device waits for
    reserver = [-1] * n  # device that waits for an op
    is_ready = [False] * n
    rt_lb: list[list[float] | None] = [None] * n  # arrival per device without channel contention
    rel: list[list[int]] = [[] for _ in devs]  # ready ops (topological positions) arrived by dev_free
    pend: list[list[tuple[float, int]]] = [[] for _ in devs]  # (arrival lower bound, position)
    frel: list[list[int]] = [[] for _ in devs]  # the same for ops forced onto the device
    fpend: list[list[tuple[float, int]]] = [[] for _ in devs]
    need_heap: list[tuple[float, int]] = []  # (-bytes, op) of unforced ready ops (m-SCT)
    chan_free = [0.0] * nd
    arrived: dict[tuple[int, int, float], float] = {}
    epoch = 0  # bumped whenever the channel state changes
    chan_cache: dict[tuple[int, int], tuple[int, float]] = {}
    placed = 0
    t = 0.0

    def channel_arrival(v: int, d: int, commit: bool) -> float:
        """Ready time (s) of v on d when transfers queue on the per-device channels."""
        r = 0.0
        local = chan_free if commit else chan_free[:]
        for u, b in ins[v]:
            du = device[u]
            if du == d:
                eu = end[u]
                if eu > r:
                    r = eu
                continue
            key = (u, d, b)
            a = arrived.get(key)
            if a is not None:
                if a > r:
                    r = a
                continue
            eu = end[u]
            lu = local[du]
            send = eu if eu >= lu else lu
            ld = local[d]
            arr = (send if send >= ld else ld) + lat[du][d] + b * inv_bw[du][d]
            local[du] = local[d] = arr
            if commit:
                arrived[key] = arr
            if arr > r:
                r = arr
        return r

    def chan_rt(v: int, d: int) -> float:
        key = (v, d)
        c = chan_cache.get(key)
        if c is not None and c[0] == epoch:
            return c[1]
        r = channel_arrival(v, d, False)
        chan_cache[key] = (epoch, r)
        return r

    def independent_arrival(v: int) -> list[float]:
        """Arrival time (s) of v's last input on every device, without channel contention."""
        if homogeneous:  # one delay per tensor: the largest remote arrival and the runner-up
            loc = [0.0] * nd  # from another device than the largest
            top1 = top2 = 0.0
            dev1 = -1
            for u, b in ins[v]:
                du = device[u]
                eu = end[u]
                if eu > loc[du]:
                    loc[du] = eu
                a = eu + lat0 + b * ib0
                if a > top1:
                    if du != dev1:
                        top2 = top1
                    top1 = a
                    dev1 = du
                elif du != dev1 and a > top2:
                    top2 = a
            return [(lo if lo >= (top1 if d != dev1 else top2) else (top1 if d != dev1 else top2)) for d, lo in enumerate(loc)]
        rt = [0.0] * nd
        for u, b in ins[v]:
            du = device[u]
            eu = end[u]
            la, ib = lat[du], inv_bw[du]
            for d in devs:
                a = eu if d == du else eu + la[d] + b * ib[d]
                if a > rt[d]:
                    rt[d] = a
        return rt

    def exact(v: int, d: int, lb: float) -> float | None:
        """Exact earliest start (s) of v on d given its lower bound ``lb``; None: v does not
        fit d now; -1.0: v never fits d (simple memory model)."""
        fx = fixed[v]
        if channels:
            r = chan_rt(v, d)
            f0 = dev_free[d]
            s = r if r >= f0 else f0
        else:
            s = lb
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
            r = rt_lb[v][d]  # type: ignore[index]
            f0 = dev_free[d]
            s = exact(v, d, r if r >= f0 else f0)
        return None if s is None or s == -1.0 else s

    def urgent(v: int) -> bool:
        """Is the latest earliest start of v over the devices it fits already due (<= t)?"""
        for d in devs:
            s = sched_on(v, d)
            if s is not None and s > t:
                return False
        return True

    def unforced_blocked() -> bool:
        """True when no unforced ready op can be urgent: a device busy after t fits them all."""
        while need_heap:
            _, v = need_heap[0]
            if is_ready[v] and fixed[v] < 0:
                break
            heappop(need_heap)
        if not need_heap:
            return True
        big = -need_heap[0][0]
        return any(dev_free[d] > t and (allocated[d] if liveness else used[d]) + big <= capx[d] for d in devs)

    def propose(d: int, f: int) -> tuple[float, int] | None:
        """Device d's best (start, topological position); with a reserved child ``f`` only f
        and urgent ops qualify."""
        f0 = dev_free[d]
        if f >= 0:
            sf = sched_on(f, d)
            if sf is None:  # cannot happen: dropped reservations are checked before
                return None
            best_s, best_p = sf, topo_pos[f]
            lim = t
            if unforced_blocked():
                r, p = frel[d], fpend[d]
            else:
                r, p = rel[d], pend[d]
        else:
            best_s, best_p = _INF, n
            lim = _INF
            r, p = rel[d], pend[d]
        while p and p[0][0] <= f0:
            heappush(r, heappop(p)[1])
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
            if lb > lim or lb > best_s or (lb == best_s and tp >= best_p):
                break
            v = order[tp]
            fx = fixed[v]
            if device[v] >= 0 or (fx >= 0 and fx != d):
                if from_r:
                    heappop(r)
                else:
                    heappop(p)
                continue
            rv = reserver[v]
            if v == f or (rv >= 0 and rv != d):
                s = None
            else:
                s = exact(v, d, lb)
                if s == -1.0:  # never fits this device again: drop it
                    if from_r:
                        heappop(r)
                    else:
                        heappop(p)
                    continue
                if s is not None and f >= 0 and (s > t or not urgent(v)):
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
        if best_p == n:
            return None
        return best_s, best_p

    def arrival_row(v: int) -> list[float]:
        """Baechi's per-device ready times of v (s) in the current state."""
        if channels:
            fx = fixed[v]
            if fx >= 0:
                row = [_INF] * nd
                row[fx] = channel_arrival(v, fx, False)
                return row
            return [channel_arrival(v, d, False) for d in devs]
        return rt_lb[v]  # type: ignore[return-value]

    def enqueue(v: int, d: int, forced: bool, main: bool = True) -> None:
        a = rt_lb[v][d]  # type: ignore[index]
        tp = topo_pos[v]
        if forced:
            if a <= dev_free[d]:
                heappush(frel[d], tp)
            else:
                heappush(fpend[d], (a, tp))
        if not main:
            return
        if a <= dev_free[d]:
            heappush(rel[d], tp)
        else:
            heappush(pend[d], (a, tp))

    def add_ready(v: int) -> None:
        is_ready[v] = True
        rt_lb[v] = independent_arrival(v)
        fx = fixed[v]
        if fx >= 0:
            enqueue(v, fx, True)
        else:
            for d in devs:
                enqueue(v, d, False)
            if fav is not None:
                g = groups[v]
                big = transient[v] + gpers[g] if liveness else gneed[g]
                heappush(need_heap, (-big, v))

    def place(v: int, d: int, at: float) -> None:
        nonlocal epoch
        f = fav[v] if fav is not None else -1  # a child of v: not ready before v is placed
        if channels:
            e0 = len(arrived)
            cf = chan_free[:]
            ready_at = channel_arrival(v, d, True)
            if len(arrived) != e0 or cf != chan_free:
                epoch += 1
        else:
            ready_at = rt_lb[v][d]  # type: ignore[index]
        s = ready_at
        if dev_free[d] > s:
            s = dev_free[d]
        if at > s:
            s = at
        is_ready[v] = False
        g = groups[v]
        if fixed[v] < 0 or (forced_mode and not group_placed[g]):
            used[d] += gneed[g]
            if liveness:
                timelines[d].add(s, gpers[g])
                allocated[d] += gpers[g]
            group_placed[g] = True
            for w in members.get(g, ()):
                fixed[w] = d
                if is_ready[w] and w != v:
                    enqueue(w, d, True, main=False)  # already in d's main queue
        device[v] = d
        start[v] = s
        ev = s + times[v][d]
        end[v] = ev
        dev_free[d] = ev
        if liveness:
            tl = timelines[d]
            tl.add(s, transient[v])
            allocated[d] += transient[v]
            tl.add(ev, -temporary[v])
            for u, _ in ins[v]:
                if ev > last_consumer_end[u]:
                    last_consumer_end[u] = ev
                consumers_left[u] -= 1
                if consumers_left[u] == 0:
                    lc, eu = last_consumer_end[u], end[u]
                    timelines[device[u]].add(lc if lc >= eu else eu, -output[u])
        if fav is not None:
            for dd in devs:
                if reserved[dd] == v:
                    reserved[dd] = -1
            reserver[v] = -1
        for w in outs[v]:
            remaining[w] -= 1
            if remaining[w] == 0:
                add_ready(w)
        if f >= 0 and is_ready[f]:
            rtf = arrival_row(f)
            fx = fixed[f]
            sf = [rtf[k] if rtf[k] >= dev_free[k] else dev_free[k] for k in devs]
            if fx < 0:
                gn = gneed[groups[f]]
                ok = [used[k] + gn <= capx[k] for k in devs]
            else:
                ok = [k == fx for k in devs]
            if ok[d] and reserved[d] < 0:
                lo = min(sf[k] for k in devs if ok[k])
                if sf[d] <= lo + 1e-12:
                    reserved[d] = f
                    reserver[f] = d

    for v in range(n):
        if remaining[v] == 0:
            add_ready(v)

    # a device's proposal without a reservation depends on the state, not on t: it is kept
    # until the next placement or dropped reservation (``version``)
    version = 0
    cached: list[tuple[int, tuple[float, int] | None]] = [(-1, None)] * nd
    while placed < n:
        if fav is not None:
            for d in devs:  # a reservation for a child that no longer fits its device is dropped
                f = reserved[d]
                if f >= 0 and sched_on(f, d) is None:
                    reserved[d] = -1
                    reserver[f] = -1
                    version += 1
        best: tuple[float, int, int] | None = None
        free_t = t + 1e-15
        for d in devs:
            if dev_free[d] <= free_t:
                f = reserved[d]
                if f >= 0:
                    prop = propose(d, f)
                else:
                    c = cached[d]
                    if c[0] == version:
                        prop = c[1]
                    else:
                        prop = propose(d, -1)
                        cached[d] = (version, prop)
                if prop is not None and (best is None or prop[0] < best[0] or (prop[0] == best[0] and prop[1] < best[1])):
                    best = (prop[0], prop[1], d)
        if best is not None:
            if best[0] <= t + 1e-12 * max(1.0, t):
                place(order[best[1]], best[2], best[0])
                placed += 1
                version += 1
                continue
            t_next = best[0]
        else:
            t_next = _INF
        for d in devs:
            fd = dev_free[d]
            if fd > free_t and fd < t_next:
                t_next = fd
        if t_next == _INF:
            # nothing fits anywhere: report the smallest shortfall of a ready op
            v = min((u for u in range(n) if is_ready[u]), key=lambda u: topo_pos[u])
            free = [cap[k] - used[k] for k in devs]
            want = gneed[groups[v]]
            dd = fixed[v] if fixed[v] >= 0 else int(np.argmax(free))
            raise InfeasibleError(
                f"{inst.name}: op {inst.op_names[v]!r} needs {int(want)} bytes but device "
                f"{inst.device_names[dd]!r} has only {int(free[dd])} free (short by {int(want - free[dd])} bytes); "
                f"{placed} of {n} ops were placed",
                {"op": inst.op_names[v], "device": inst.device_names[dd], "shortfall_bytes": float(want - free[dd])},
            )
        t = t_next

    return Schedule(device=np.asarray(device, dtype=np.int64), start=np.asarray(start, dtype=float), makespan=max(end) if n else 0.0)
