"""The last device's stint: the series composition over cut waists, split by where the
waists last change device.

Take the cut waists w_1, ..., w_K of `segments` (each a descendant of the one before),
their windows (the modules M_j between w_j and w_{j+1}, j = 1..K-1, M_0 before w_1, M_K
after w_K) and window bounds L(i, j) (the ``seg`` of `segments.compose`, node 0 the start,
node K+1 the end). In any plan, either every waist runs on one device A (case h = 0), or
there is a last h with dev(w_h) != dev(w_{h+1}) and w_{h+1}, ..., w_K all run on A =
dev(w_K) (case h). Every plan falls in one case, so the least over the cases of a bound
valid in that case is a bound on the makespan. In case h:

1. **The hop.** Every path from w_h to w_{h+1} crosses devices, so it pays at least the
   smallest delay (`PlacementInstance.min_delay`) of one of its edges: the window's span
   S(w_{h+1}) - C(w_h) is at least the longest such path with its least delay added
   (`cut_spans`), besides L(h, h+1). Under channels a transfer is never faster than its
   delay, so this holds under both communication models.
2. **The mirrored hop.** Co-location groups tie ops far apart (a weight's forward op, its
   gradient and its update): a waist w_b co-located with w_h runs on dev(w_h), one w_a
   co-located with any of w_{h+1}, ..., w_K (or one of them) runs on A. With a, b <= h, the
   consecutive windows between positions a and b have devices that differ at their ends,
   so one of them crosses devices: their spans add up to at least their bounds plus the
   least of their hop gains (1.). Positions a = b, or w_h co-located with a later waist,
   make the case impossible (it is skipped).
3. **The last stint.** From S(w_{h+1}) to the makespan, A runs the waists w_{h+1..K} and
   every op outside the modules M_1..M_{K-1} (ops of no window, such as the weight updates
   hanging off a backward pass, and the tail module M_K) that is co-located with one of
   them and descends from w_{h+1}; module ops co-located with them count only through
   their module's choice below. For each module M_j (j > h)
   either all its ops run on A (then its span is at least their work, and their co-located
   ops that descend from w_{h+1} run on A too), or some op v does not: then every path
   w_j -> v and every path v -> w_{j+1} crosses devices, and the span is at least the
   longest in-path to v with its least delay plus the longest out-path with its least
   delay (`cut_spans`). So makespan - S(w_{h+1}) >= sum of the waists' fastest times +
   max(the spans, A's work) for the cheapest choice of the modules whose ops all stay on
   A (enumerated up to ``max_subsets`` choices, else the larger of the spans' least sum
   and the work known on A), with S(w_{h+1}) bounded by the longest composition up to
   w_{h+1} with 1. and 2. in it.

This is a head-plus-load bound on one machine (a start no earlier than a head, then the
machine's work; the simplest of the bounds of Carlier, "The one-machine sequencing
problem", EJOR 11(1), 1982) on the device of the last stint, branched on where it starts,
over the series decomposition of Möhring ("Computationally tractable classes of ordered
sets", 1989). It sees what the windows alone cannot: ops hanging off a window (updates)
must be run on their group's device by someone, and moving the chain off that device
costs transfers in the backward pass and again, mirrored, in the forward pass.
resnet-50-dgx1-4: 17.293 ms (windows alone) -> 17.415 ms. Seconds throughout.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Mapping, Sequence

import numpy as np

from distplan.formulations.placement.listsched_data import successors
from distplan.formulations.placement.waist import reachable
from distplan.models.placement_instance import PlacementInstance

SOURCE = "last-stint bound over cut waists (window composition, hops into the last device, its co-located work)"


def _longest(order: list[int], adj: list[list[int]], start: int, inside: np.ndarray, p: np.ndarray, delay: dict[tuple[int, int], float], tau: float, reverse: bool) -> dict[int, float]:
    """Longest paths (seconds, ops' times past ``start``) from ``start`` over ops where
    ``inside`` holds, using only edges whose least delay is at least ``tau``."""
    length = {start: 0.0}
    for v in order:
        if v not in length:
            continue
        for w in adj[v]:
            if inside[w] and delay[(w, v) if reverse else (v, w)] >= tau:
                cand = length[v] + p[w]
                if cand > length.get(w, -np.inf):
                    length[w] = cand
    return length


def cut_spans(inst: PlacementInstance, first: int, last: int, module: np.ndarray, graph: tuple[list[list[int]], list[list[int]], np.ndarray, np.ndarray] | None = None) -> tuple[float, float]:
    """For the window of ``module`` (boolean per op) between ops ``first`` and ``last``
    (seconds): (the least span when ``first`` and ``last`` run on different devices: the
    longest path first -> last with its least delay added; the least span when both run on
    one device and some module op runs elsewhere: the least over module ops v of the
    longest path first -> v with its least delay plus the longest v -> last with its least
    delay, v counted once; inf for an empty module). Paths count ops' fastest times, not
    the endpoints'. The maximum over paths of (length + least delay) is taken over
    thresholds: the longest path over edges with delay >= tau, plus tau. ``graph``:
    (successors, predecessors, least delay per edge, topological position per op), when
    the caller has them."""
    n = inst.n_ops
    p = inst.time.min(axis=1)
    if graph is None:
        pos = np.empty(n, dtype=np.int64)
        pos[inst.topo_order()] = np.arange(n)
        graph = (successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src), inst.min_delay(), pos)
    succ, pred, md, topo_pos = graph
    ops = np.flatnonzero(module).tolist()
    if not ops:
        lone = [float(md[e]) for e in np.flatnonzero((inst.src == first) & (inst.dst == last)).tolist()]
        return (min(lone) if lone else -np.inf), np.inf
    inside = module.copy()
    inside[[first, last]] = True
    delay: dict[tuple[int, int], float] = {}
    for e in np.flatnonzero(inside[inst.src] & inside[inst.dst]).tolist():
        key = (int(inst.src[e]), int(inst.dst[e]))
        delay[key] = min(delay.get(key, np.inf), float(md[e]))
    order = sorted([first, last, *ops], key=lambda v: topo_pos[v])
    into = dict.fromkeys(ops + [last], -np.inf)
    out = dict.fromkeys(ops, -np.inf)
    pl = p.copy()
    pl[last] = 0.0
    for tau in sorted(set(delay.values())):
        fwd = _longest(order, succ, first, inside, pl, delay, tau, reverse=False)
        back = _longest(order[::-1], pred, last, inside, p, delay, tau, reverse=True)
        for v in into:
            if v in fwd:
                into[v] = max(into[v], fwd[v] + tau)
        for v in out:
            if v in back:
                out[v] = max(out[v], back[v] - p[v] + tau)
    one = into[last]
    two = min(into[v] + out[v] for v in ops)
    return float(one), float(two)


def last_stint_bound(
    inst: PlacementInstance,
    chain: list[int],
    seg: Mapping[tuple[int, int], float],
    desc: Sequence[np.ndarray] | None = None,
    anc: Sequence[np.ndarray] | None = None,
    deadline: float | None = None,
    max_subsets: int = 256,
) -> tuple[float, int] | None:
    """The least over the cases h = 0..K-1 (module docstring) of the case's bound, with
    ``seg`` the window bounds over ``chain`` (nodes 0..K+1 as in `segments.compose`; the
    consecutive windows (i, i+1) must be there), ``desc`` and ``anc`` each waist's
    descendants and ancestors when the caller has them: (seconds, not rounded; the
    weakest case h), or None when ``deadline`` (a ``time.perf_counter()`` value) passes
    first. Each case's bound is at least the composition over ``seg``; the longest paths
    with the hop (and mirrored hop) windows raised are taken through them, the windows
    between them consecutive."""
    n, k = inst.n_ops, len(chain)
    p = inst.time.min(axis=1)
    wt = np.concatenate(([0.0], p[chain], [0.0]))  # wt[i]: node i's time (0: start, k+1: end)
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    if desc is None or anc is None:
        desc = [reachable(n, succ, v) for v in chain]
        anc = [reachable(n, pred, v) for v in chain]
    topo_pos = np.empty(n, dtype=np.int64)
    topo_pos[inst.topo_order()] = np.arange(n)
    graph = (succ, pred, inst.min_delay(), topo_pos)
    modules = {j: desc[j - 1] & anc[j] for j in range(1, k)}
    one_cut = np.zeros(k + 1)
    gain = np.zeros(k + 1)
    work: dict[int, float] = {}
    serial: dict[int, float] = {}
    off: dict[int, float] = {}
    for j, mod in modules.items():
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        one, two = cut_spans(inst, chain[j - 1], chain[j], mod, graph)
        low = seg[(j, j + 1)]
        one_cut[j] = max(low, one)
        gain[j] = one_cut[j] - low
        if mod.any():
            serial[j] = float(p[mod].sum())
            work[j] = max(low, serial[j])
            off[j] = max(low, two)
    # longest paths over seg: pre[j] bounds the start of node j, suf[i] what follows node i
    pre = np.full(k + 2, -np.inf)
    pre[0] = 0.0
    for (i, j), v in sorted(seg.items(), key=lambda item: item[0][1]):
        pre[j] = max(pre[j], pre[i] + wt[i] + v)
    suf = np.full(k + 2, -np.inf)
    suf[k + 1] = 0.0
    for (i, j), v in sorted(seg.items(), key=lambda item: -item[0][0]):
        suf[i] = max(suf[i], v + wt[j] + suf[j])
    whole0 = float(pre[k + 1])
    # before[j] - before[i]: consecutive windows from node i to node j and waists i+1..j
    before = np.zeros(k + 2)
    for i in range(1, k + 1):
        before[i + 1] = before[i] + seg[(i, i + 1)] + wt[i + 1]
    groups = inst.colocation_groups()
    is_waist = np.zeros(n, dtype=bool)
    is_waist[chain] = True
    free = ~is_waist
    for mod in modules.values():
        free &= ~mod
    position = {v: i + 1 for i, v in enumerate(chain)}
    mates = [[position[u] for u in np.flatnonzero(groups == groups[v]).tolist() if u in position and u != v] for v in chain]
    stint = _Stint(p, groups, free, modules, work, serial, off, seg.get((k, k + 1), 0.0), max_subsets)
    tail_waists = np.concatenate((np.cumsum(p[chain][::-1])[::-1], [0.0]))  # waists h+1..K, 0-based h
    on_a: list[int] = []  # positions of the waists after the case's hop and of their group mates
    on_a_set: set[int] = set()
    known = np.zeros(int(groups.max(initial=0)) + 1, dtype=bool)  # groups run on the last device
    best_value, best_case = np.inf, 0
    for h in range(k - 1, -1, -1):
        if deadline is not None and h % 32 == 0 and time.perf_counter() >= deadline:
            return None
        known[groups[chain[h]]] = True
        for a in (h + 1, *mates[h]):
            if a not in on_a_set:
                on_a_set.add(a)
                bisect.insort(on_a, a)
        if h == 0:
            whole, start = whole0, float(pre[1])
        else:
            if h in on_a_set:
                continue  # w_h co-located with a later waist: it cannot sit elsewhere
            start = float(pre[h] + wt[h] + one_cut[h])
            whole = max(whole0, start + wt[h + 1] + suf[h + 1])
            mirrored = _mirrored(mates[h - 1], on_a, on_a_set, gain, h)
            if mirrored is None:
                continue  # a waist on both devices: impossible
            if mirrored[0] > 0:
                extra, lo, hi = mirrored
                into_lo = pre[lo] + wt[lo]
                whole = max(whole, into_lo + before[hi] - before[lo] - wt[hi] + extra + wt[hi] + suf[hi])
                start = max(start, float(into_lo + before[h] - before[lo] - wt[h] + extra + wt[h] + one_cut[h]))
                whole = max(whole, start + wt[h + 1] + suf[h + 1])
            start = max(start, float(pre[h + 1]))
        last = start + float(tail_waists[h]) + stint.length(h, known[groups] & desc[h] & free, desc[h])
        value = max(whole, last)
        if value < best_value:
            best_value, best_case = value, h
    return float(best_value), best_case


def _mirrored(mates: list[int], on_a: list[int], on_a_set: set[int], gain: np.ndarray, h: int) -> tuple[float, int, int] | None:
    """The mirrored hop of case h (module docstring, 2.): (the least gain over the windows
    between a waist co-located with w_h and the nearest waist known on the last device,
    both at positions <= h, and those positions), (0, 0, 0) without one, None when a waist
    would sit on both devices."""
    best = (0.0, 0, 0)
    for b in mates:
        if b > h:
            continue
        if b in on_a_set:
            return None
        at = bisect.bisect_left(on_a, b)
        for a in (on_a[at - 1] if at > 0 else None, on_a[at] if at < len(on_a) else None):
            if a is None or a > h:
                continue
            lo, hi = min(a, b), max(a, b)
            extra = float(gain[lo:hi].min())
            if extra > best[0]:
                best = (extra, lo, hi)
    return best


class _Stint:
    """The last stint's length past its waists' times (module docstring, 3.): the cheapest
    choice of the modules after w_{h+1} that stay on A (their span at least ``work``, the
    larger of their bound and ``serial``, their ops' fastest times, which A is busy for, and
    their co-located ops that descend from w_{h+1} on A too) or not (span at least
    ``off``), enumerated up to ``max_subsets`` choices, else the least spans alone."""

    def __init__(self, p: np.ndarray, groups: np.ndarray, free: np.ndarray, modules: Mapping[int, np.ndarray], work: Mapping[int, float], serial: Mapping[int, float], off: Mapping[int, float], end: float, max_subsets: int):
        self.p, self.groups, self.free, self.modules = p, groups, free, modules
        self.work, self.serial, self.off, self.end, self.max_subsets = work, serial, off, end, max_subsets
        self.mods = sorted(work)
        self.cheapest = {j: min(work[j], off[j]) for j in self.mods}
        self.mates: dict[int, np.ndarray] = {}

    def length(self, h: int, known: np.ndarray, after: np.ndarray) -> float:
        """The bound (seconds) for case h, ``known``: the ops outside every window known
        to run on A after S(w_{h+1}), ``after``: the descendants of w_{h+1}."""
        mods = [j for j in self.mods if j > h]
        busy_known = float(self.p[known].sum())
        if 2 ** len(mods) > self.max_subsets:
            return max(self.end + sum(self.cheapest[j] for j in mods), busy_known)
        for j in mods:
            if j not in self.mates:
                self.mates[j] = np.isin(self.groups, self.groups[self.modules[j]]) & self.free
        best = np.inf
        for mask in range(2 ** len(mods)):  # bit set: the module's ops all stay on A
            on_a = known.copy()
            spans, busy = self.end, 0.0
            for b, j in enumerate(mods):
                if mask >> b & 1:
                    on_a |= self.mates[j] & after
                    spans += self.work[j]
                    busy += self.serial[j]
                else:
                    spans += self.off[j]
            best = min(best, max(spans, busy + float(self.p[on_a].sum())))
        return best
