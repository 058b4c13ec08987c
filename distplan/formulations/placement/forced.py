"""A destructive lower bound on the placement makespan: forced co-location and one machine.

For a trial makespan C (seconds) the bound derives consequences that every plan finishing
by C must satisfy, until one is impossible; then the optimum exceeds C, and a bisection
over C gives the bound (Klein & Scholl, "Computing lower bounds by destructive improvement:
an application to resource-constrained project scheduling", EJOR 112(2), 1999).

Consequences, with heads r_v and tails q_v (longest paths before and after v at fastest
times, no communication) and the smallest delay c_e of an edge over device pairs:

1. *Forced co-location.* Colocation groups share a device. If op v were not on the device
   of a group G of ops already known to share one, every edge between v and G would carry
   a transfer, so a path through v would take at least
   h + p_v + t, h = max(r_v, max_{u in pred(v) & G} r_u + p_u + c_uv),
   t = max(q_v, max_{w in succ(v) & G} c_vw + p_w + q_w).
   When that exceeds C, v is on G's device: v joins G. Repeated to a fixpoint.
2. *One machine.* The ops of a group run on one device d one at a time, each after its
   head and followed by its tail: the preemptive one-machine bound (Jackson's preemptive
   schedule, optimal for 1|r_j, pmtn|max(C_j + q_j); Carlier, EJOR 11(1), 1982) with the
   times of d, minimized over d, exceeds C: impossible.
3. *Memory.* The group's memory (what it holds to the end under the liveness model:
   persistent memory and unconsumed outputs, `PlacementInstance.held_to_end`) exceeds what the
   evaluator accepts on the largest device (`PlacementInstance.accepted_memory`): impossible.
4. *Memory-driven cuts* (`pathcut`) with these groups: a path whose segments between
   cuts must each hold whole groups within the largest device's memory, and whose cuts
   inside a group are impossible, takes longer than C: impossible.
5. *Forced apart.* Two groups joined by an edge whose memory together exceeds the
   largest device, or whose ops one machine cannot run by C (earliest head + load + least
   tail > C), sit on different devices: their edges carry transfers. Heads and tails are
   recomputed with those delays (a path longer than C is impossible) and rules 1-4 run
   again with them.

Every step relaxes order, communication contention and memory timing, so the bound holds
under both communication models (a transfer is never faster than its smallest delay) and
both memory models. Comparisons carry a relative margin of 1e-9 (`MARGIN`) and the result
is rounded down, so float rounding in the sums cannot make it exceed the exact optimum.
"""

from __future__ import annotations

import heapq
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from distplan.formulations.placement.pathcut import candidate_paths, cheapest_cuts
from distplan.formulations.placement.relaxation import charged_memory, heads_tails, longest_path_levels
from distplan.formulations.registry import Bound, round_down
from distplan.models.common import per_instance
from distplan.models.placement_instance import PlacementInstance

#: relative margin of every "exceeds C" test (float rounding of sums of instance data)
MARGIN = 1e-9
SOURCE = "forced co-location + one-machine bound (destructive bisection)"


def preemptive_one_machine(r: np.ndarray, p: np.ndarray, q: np.ndarray) -> float:
    """max_j (C_j + q_j) of Jackson's preemptive schedule (seconds): at every moment the
    released op with the largest tail runs. O(k log k) for k ops."""
    order = np.argsort(r, kind="stable")
    rs, ps, qs = r[order].tolist(), p[order].tolist(), q[order].tolist()
    k = len(rs)
    heap: list[tuple[float, int]] = []
    rem = list(ps)
    t = 0.0
    i = 0
    best = 0.0
    while i < k or heap:
        if not heap and t < rs[i]:
            t = rs[i]
        while i < k and rs[i] <= t:
            heapq.heappush(heap, (-qs[i], i))
            i += 1
        j = heap[0][1]
        nxt = rs[i] if i < k else float("inf")
        run = min(rem[j], nxt - t)
        t += run
        rem[j] -= run
        if rem[j] <= 0.0:
            heapq.heappop(heap)
            best = max(best, t + qs[j])
    return best


class _Data:
    """Static arrays for the tests at every trial makespan."""

    def __init__(self, inst: PlacementInstance, deadline: float | None = None):
        """``deadline`` (a ``time.perf_counter()`` value): no candidate path is traced past
        it (each takes ~0.08 s on 12,000 ops; fewer paths only weaken the rules)."""
        self.inst = inst
        self.p = inst.time.min(axis=1)
        self.level = longest_path_levels(inst)  # the graph's, for every trial's heads and tails
        self.r, self.q = heads_tails(inst, self.p, level=self.level)
        self.c = inst.min_delay() if inst.n_devices > 1 else np.zeros(inst.n_edges)
        n = inst.n_ops
        # per op: (neighbour, smallest delay of the edge, edge id)
        self.preds: list[list[tuple[int, float, int]]] = [[] for _ in range(n)]
        self.succs: list[list[tuple[int, float, int]]] = [[] for _ in range(n)]
        for e, (a, b, c) in enumerate(zip(inst.src.tolist(), inst.dst.tolist(), self.c.tolist())):
            self.preds[b].append((a, float(c), e))
            self.succs[a].append((b, float(c), e))
        self.order = inst.topo_order().tolist()
        self.groups = inst.colocation_groups()
        self.mem = charged_memory(inst)
        self.cap = float(inst.accepted_memory().max())  # the evaluator's limit: bare capacity + its tolerance
        gmem = np.bincount(self.groups, weights=self.mem)
        tight = inst.n_devices > 1 and gmem.sum() > self.cap
        self.paths = list(candidate_paths(inst, self.p, self.r, self.q, self.groups, gmem, 8, deadline)) if tight else []


def _find(parent: list[int], a: int) -> int:
    while parent[a] != a:
        parent[a] = parent[parent[a]]
        a = parent[a]
    return a


def groups_at(data: _Data, C: float, r_: np.ndarray | None = None, q_: np.ndarray | None = None) -> np.ndarray:
    """Group id per op: ops that share a device in every plan of makespan <= C (rule 1),
    with heads ``r_`` and tails ``q_`` (default: without communication)."""
    n = data.inst.n_ops
    parent = list(range(n))
    first: dict[int, int] = {}
    for v, g in enumerate(data.groups.tolist()):
        if g in first:
            a, b = _find(parent, first[g]), _find(parent, v)
            if a != b:
                parent[b] = a
        else:
            first[g] = v
    r = (data.r if r_ is None else r_).tolist()
    q = (data.q if q_ is None else q_).tolist()
    p = data.p.tolist()
    limit = C * (1 + MARGIN)
    # only ops whose path through them could exceed C with one cut edge can be forced
    cand = [v for v in range(n) if data.preds[v] or data.succs[v]]
    changed = True
    while changed:
        changed = False
        for v in cand:
            heads: dict[int, float] = {}
            tails: dict[int, float] = {}
            for u, c, _ in data.preds[v]:
                g = _find(parent, u)
                h = r[u] + p[u] + c
                if h > heads.get(g, r[v]):
                    heads[g] = h
            for w, c, _ in data.succs[v]:
                g = _find(parent, w)
                t = c + p[w] + q[w]
                if t > tails.get(g, q[v]):
                    tails[g] = t
            own = _find(parent, v)
            for g in set(heads) | set(tails):
                if g == own:
                    continue
                if heads.get(g, r[v]) + p[v] + tails.get(g, q[v]) > limit:
                    parent[_find(parent, g)] = own
                    changed = True
    roots = np.fromiter((_find(parent, v) for v in range(n)), dtype=np.int64, count=n)
    return np.unique(roots, return_inverse=True)[1].reshape(-1)


def infeasible_at(data: _Data, C: float, rounds: int = 4) -> str:
    """Why no plan has makespan <= C (seconds), or "" when these rules find no reason.

    After rules 1-4, two groups joined by an edge that cannot share a device (their memory
    together exceeds the largest device, or one machine cannot run both: earliest head +
    load + least tail > C) are on different devices, so their edges carry transfers; heads
    and tails are recomputed with those delays and the rules run again (at most
    ``rounds`` times)."""
    inst = data.inst
    limit = C * (1 + MARGIN)
    r, q = data.r, data.q
    cut = np.zeros(inst.n_edges, dtype=bool)
    for _ in range(rounds):
        why, gid = _rules(data, C, r, q)
        if why:
            return why
        ga, gb = gid[inst.src], gid[inst.dst]
        k = int(gid.max()) + 1
        gmem = np.bincount(gid, weights=data.mem, minlength=k)
        rmin = np.full(k, np.inf)
        np.minimum.at(rmin, gid, r)
        qmin = np.full(k, np.inf)
        np.minimum.at(qmin, gid, q)
        load = np.zeros((k, inst.n_devices))
        np.add.at(load, gid, inst.time)
        low = np.minimum(rmin[ga], rmin[gb]) + (load[ga] + load[gb]).min(axis=1) + np.minimum(qmin[ga], qmin[gb])
        apart = (ga != gb) & ((gmem[ga] + gmem[gb] > data.cap) | (low > limit))
        new = apart & ~cut
        if not new.any():
            return ""
        cut |= new
        r, q = heads_tails(inst, data.p, np.where(cut, data.c, 0.0), data.level)
        if float((r + data.p + q).max()) > limit:
            return "transfers between groups that cannot share a device"
    return ""


def _rules(data: _Data, C: float, r: np.ndarray, q: np.ndarray) -> tuple[str, np.ndarray]:
    """Rules 1-4 with heads r and tails q: (reason or "", group id per op)."""
    inst = data.inst
    gid = groups_at(data, C, r, q)
    sizes = np.bincount(gid)
    gmem = np.bincount(gid, weights=data.mem)
    if np.any(gmem > data.cap):
        return "memory", gid
    limit = C * (1 + MARGIN)
    for path, cost in data.paths:  # rule 4: memory-driven cuts between forced groups
        g = gid[path]
        cost = np.where(g[:-1] == g[1:], np.inf, cost)  # one group sits on one device
        if float(data.p[path].sum()) + cheapest_cuts(path, gid, gmem, data.cap, cost) > limit:
            return "memory-driven cuts on a path", gid
    order = np.argsort(gid, kind="stable")
    cuts = np.flatnonzero(np.diff(gid[order])) + 1
    for mbr in np.split(order, cuts):
        if sizes[gid[mbr[0]]] < 2:
            continue
        rm, qm = r[mbr], q[mbr]
        # Jackson's value is at most max r + load + max q: skip groups that surely fit
        if float(rm.max() + inst.time[mbr].sum(axis=0).min() + qm.max()) <= limit:
            continue
        if all(preemptive_one_machine(rm, inst.time[mbr, d], qm) > limit for d in range(inst.n_devices)):
            return f"one machine ({mbr.size} ops on one device)", gid
    return "", gid


def forced_bound(inst: PlacementInstance, upper: float, deadline: float | None = None, steps: int = 30) -> Bound | None:
    """The largest trial makespan (seconds) in [critical path, ``upper``] that the rules
    prove infeasible, by bisection (``steps`` trials at most, stopping at ``deadline``, a
    ``time.perf_counter()`` value); None when none beyond the critical path is."""
    if inst.n_ops == 0 or not np.isfinite(upper) or (deadline is not None and time.perf_counter() >= deadline):
        return None  # (its data take 0.5 s on 12,000 ops: not built once the time is up)
    data = _Data(inst, deadline)
    lo = float((data.r + data.p + data.q).max())
    hi = float(upper)
    proven: float | None = None
    reason = ""
    for _ in range(steps):
        if hi <= lo * (1 + 1e-7) or (deadline is not None and time.perf_counter() >= deadline):
            break
        mid = 0.5 * (lo + hi)
        why = infeasible_at(data, mid)
        if why:
            lo, proven, reason = mid, mid, why
        else:
            hi = mid
    if proven is None:
        return None
    return Bound(round_down(proven), f"{SOURCE}: {reason}", "safe")


def recheck(inst: PlacementInstance, entry: Mapping[str, Any]) -> str | None:
    """`BoundSource.recheck` of `forced_bound`: None when the rules prove again, on the
    instance, that no plan has a makespan below the bound ``entry``'s value (seconds), else
    why not. The
    bound is the trial makespan the bisection proved infeasible, rounded down, and the
    rules only strengthen as the trial makespan falls (and with every candidate path
    traced: verify sets no deadline), so a bound the formulation proved passes; a raised
    one fails when the rules find no reason at it. One trial: its data take 0.5 s on
    12,000 ops."""
    value = float(entry["value"])
    if inst.n_ops == 0:
        return "an instance without ops has no makespan to bound"
    why = infeasible_at(_full_data(inst), value)
    return None if why else f"the rules find no reason why no plan finishes by {value!r} s"


@per_instance
def _full_data(inst: PlacementInstance) -> _Data:
    """`_Data` with every candidate path traced (no deadline), once per instance: a
    database audit re-checks many runs on one instance."""
    return _Data(inst)

