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
   every op that is co-located with one of them and descends from w_{h+1} (ops of no
   window: the weight updates hanging off a backward pass). For each module M_j (j > h)
   either all its ops run on A (then its span is at least their work, and their co-located
   ops that descend from w_{h+1} run on A too), or some op v does not: then every path
   w_j -> v and every path v -> w_{j+1} crosses devices, and the span is at least the
   longest in-path to v with its least delay plus the longest out-path with its least
   delay (`cut_spans`). So makespan - S(w_{h+1}) >= sum of the waists' fastest times +
   max(the spans, A's work) for the cheapest choice of the modules whose ops all stay on
   A (enumerated up to ``max_subsets`` choices, else the spans' least sum alone), with
   S(w_{h+1}) bounded by the longest composition up to w_{h+1} with 1. and 2. in it.

This is the one-machine bound with heads (Carlier, "The one-machine sequencing problem",
EJOR 11(1), 1982) on the device of the last stint, branched on where that stint starts,
over the series decomposition of Möhring ("Computationally tractable classes of ordered
sets", 1989). It sees what the windows alone cannot: ops hanging off a window (updates)
must be run on their group's device by someone, and moving the chain off that device
costs transfers in the backward pass and again, mirrored, in the forward pass.
resnet-50-dgx1-4: 17.293 ms (windows alone) -> 17.415 ms. Seconds throughout.
"""

from __future__ import annotations

from collections.abc import Mapping

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


def cut_spans(inst: PlacementInstance, first: int, last: int, module: np.ndarray) -> tuple[float, float]:
    """For the window of ``module`` (boolean per op) between ops ``first`` and ``last``
    (seconds): (the least span when ``first`` and ``last`` run on different devices: the
    longest path first -> last with its least delay added; the least span when both run on
    one device and some module op runs elsewhere: the least over module ops v of the
    longest path first -> v with its least delay plus the longest v -> last with its least
    delay, v counted once; inf for an empty module). Paths count ops' fastest times, not
    the endpoints'. The maximum over paths of (length + least delay) is taken over
    thresholds: the longest path over edges with delay >= tau, plus tau."""
    n = inst.n_ops
    p = inst.time.min(axis=1)
    md = inst.min_delay()
    inside = module.copy()
    inside[[first, last]] = True
    delay: dict[tuple[int, int], float] = {}
    for e in np.flatnonzero(inside[inst.src] & inside[inst.dst]).tolist():
        key = (int(inst.src[e]), int(inst.dst[e]))
        delay[key] = min(delay.get(key, np.inf), float(md[e]))
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    order = [v for v in inst.topo_order().tolist() if inside[v]]
    ops = np.flatnonzero(module).tolist()
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
    two = min((into[v] + out[v] for v in ops), default=np.inf)
    return float(one), float(two)


def last_stint_bound(inst: PlacementInstance, chain: list[int], seg: Mapping[tuple[int, int], float], max_subsets: int = 256) -> tuple[float, int]:
    """The least over the cases h = 0..K-1 (module docstring) of the case's bound, with
    ``seg`` the window bounds over ``chain`` (nodes 0..K+1 as in `segments.compose`; the
    consecutive windows (i, i+1) must be there): (seconds, not rounded; the weakest case
    h). Each case's bound is at least the composition over ``seg``."""
    n, k = inst.n_ops, len(chain)
    p = inst.time.min(axis=1)
    wt = p[chain]
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    desc = [reachable(n, succ, v) for v in chain]
    anc = [reachable(n, pred, v) for v in chain]
    modules = {j: desc[j - 1] & anc[j] for j in range(1, k)}
    one_cut: dict[int, float] = {}
    work: dict[int, float] = {}
    serial: dict[int, float] = {}
    off: dict[int, float] = {}
    for j, mod in modules.items():
        one, two = cut_spans(inst, chain[j - 1], chain[j], mod)
        low = seg[(j, j + 1)]
        one_cut[j] = max(low, one)
        if mod.any():
            serial[j] = float(p[mod].sum())
            work[j] = max(low, serial[j])
            off[j] = max(low, two)
    gain = {j: one_cut[j] - seg[(j, j + 1)] for j in modules}
    groups = inst.colocation_groups()
    is_waist = np.zeros(n, dtype=bool)
    is_waist[chain] = True
    free = ~is_waist
    for mod in modules.values():
        free &= ~mod
    position = {v: i + 1 for i, v in enumerate(chain)}
    mates = [[position[u] for u in np.flatnonzero(groups == groups[v]).tolist() if u in position and u != v] for v in chain]
    # consecutive composition, for blocks of windows: before[i] - before[j] spans nodes j..i
    before = np.zeros(k + 2)
    for i in range(1, k + 1):
        before[i + 1] = before[i] + seg[(i, i + 1)] + (wt[i] if i < k else 0.0)
    ordered = sorted(seg.items(), key=lambda item: item[0][1])
    end = seg.get((k, k + 1), 0.0)
    best_value, best_case = np.inf, 0
    for h in range(k):
        on_a = {position[v] for v in chain[h:]}
        for i in range(h + 1, k + 1):
            on_a.update(mates[i - 1])
        if h > 0 and h in on_a:
            continue  # w_h co-located with a later waist: it cannot sit elsewhere
        sg = dict(seg)
        if h > 0:
            sg[(h, h + 1)] = one_cut[h]
            span: tuple[float, int, int] | None = None
            impossible = False
            for b in mates[h - 1]:
                for a in on_a:
                    lo, hi = min(a, b), max(a, b)
                    if hi > h:
                        continue
                    if lo == hi:
                        impossible = True
                        break
                    extra = min(gain[x] for x in range(lo, hi))
                    if span is None or extra > span[0]:
                        span = (extra, lo, hi)
            if impossible:
                continue
            if span is not None and span[0] > 0:
                extra, lo, hi = span
                block = before[hi] - before[lo] - wt[hi - 1] + extra
                sg[(lo, hi)] = max(sg.get((lo, hi), -np.inf), block)
        node = np.full(k + 2, -np.inf)
        node[0] = 0.0
        for (i, j), v in sorted(sg.items(), key=lambda item: item[0][1]) if h > 0 else ordered:
            if np.isfinite(node[i]):
                node[j] = max(node[j], node[i] + (wt[i - 1] if i > 0 else 0.0) + v)
        whole = float(node[k + 1])
        stint = float(node[h + 1]) + float(wt[h:].sum()) + _stint(p, groups, chain, h, desc[h], free, modules, work, serial, off, end, max_subsets)
        value = max(whole, stint)
        if value < best_value:
            best_value, best_case = value, h
    return float(best_value), best_case


def _stint(p: np.ndarray, groups: np.ndarray, chain: list[int], h: int, after: np.ndarray, free: np.ndarray, modules: Mapping[int, np.ndarray], work: Mapping[int, float], serial: Mapping[int, float], off: Mapping[int, float], end: float, max_subsets: int) -> float:
    """A bound (seconds) on the last stint's length past its waists' times (module
    docstring, 3.): the cheapest choice of the modules after w_{h+1} that stay on A (their
    span at least ``work``, the larger of their bound and ``serial``, their ops' fastest
    times, which A is busy for) or not (span at least ``off``)."""
    known = np.isin(groups, groups[chain[h:]]) & after & free
    mods = [j for j in range(h + 1, len(chain)) if j in work]
    if 2 ** len(mods) > max_subsets:
        return max(end + sum(min(work[j], off[j]) for j in mods), float(p[known].sum()))
    mates = [np.isin(groups, groups[modules[j]]) & after & free for j in mods]
    best = np.inf
    for mask in range(2 ** len(mods)):  # bit set: the module's ops all stay on A
        on_a = known.copy()
        spans, busy = end, 0.0
        for b, j in enumerate(mods):
            if mask >> b & 1:
                on_a |= mates[b]
                spans += work[j]
                busy += serial[j]
            else:
                spans += off[j]
        best = min(best, max(spans, busy + float(p[on_a].sum())))
    return best
