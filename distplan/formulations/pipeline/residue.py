"""Exact repetend search for integral data at an integer period: depth-first enumeration
of the blocks' residues (start times modulo the period), with the micro-batch offsets
computed, not searched.

A repetend of period T (integer) is a flat schedule ``sigma_b = r_b + T k_b`` with a
residue ``r_b`` in [0, T) and an offset ``k_b`` (periods). With integral durations and
delays an integral optimum exists (with the winding numbers fixed, the constraints are
difference constraints with integral right-hand sides), so the residues are integers and
every constraint splits (Hanen & Munier 1995; modulo scheduling, Rau 1994):

* no overlap on a device depends on the residues only (intervals modulo T);
* a dependency u -> v with gap g: ``k_v - k_u >= ceil((r_u + g - r_v) / T)``;
* the flat length: ``sigma_b + d_b <= K T`` (K = ``offsets``);
* steady-state memory at every allocating block a of device d (as `repetend.rep_memory`):
  ``mu_a + sum_b mu_b (k_a - k_b + ceil((r_a + d_a - r_b) / T)) <= capacity``; with one
  allocating and one freeing block of equal size (F/B), a difference constraint
  ``k_f - k_a <= D(r)``.

So once the residues are chosen, the least offsets are a longest-path computation (the
memory rows of F/B devices add arcs ``f -> a``; a positive cycle or an offset past its
bound refutes the residues). The search places the blocks in topological order, each at
its earliest flat start after its predecessors plus a delay in [0, T) (each residue once,
cheapest first: the first leaf is Rau's greedy placement, as in `modulo.modulo_backtrack`),
prunes on the device residues, on the flat length (least offsets only grow) and on a
sound lower bound of each completed device's memory rows, and re-solves the offsets of
every complete assignment exactly. Exhausting the tree proves that no repetend of period
T spans at most K periods; with ``minimize_length`` it is a branch and bound on the flat
length (seconds). A device whose memory rows are not difference constraints (e.g. a
B/W split) is decided by the least offsets or by the lower bound; when neither decides,
the result is "undecided", never a false proof.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from distplan.formulations.pipeline.modulo import MAX_PERIOD_UNITS, Cyclic, longest
from distplan.models.pipeline import PipelineInstance

EPS = 1e-9


@dataclass
class ResidueResult:
    """``status``: "found" (sigma fits), "infeasible" (proven: no repetend of this period
    within the offsets) or "undecided" (budget spent, or data outside the method).
    ``least_length``: with ``minimize_length``, sigma's flat length is proven least.
    ``nodes``: placements tried. ``stopped_by``: what stopped the search before it ran to
    its end, ``"node_limit"`` (its placements ran out) or ``"deadline"``; None when it
    ran to its end or did not start (data outside the method)."""

    status: str
    sigma: np.ndarray | None
    length: float | None
    least_length: bool
    nodes: int
    alternatives: list[np.ndarray] = field(default_factory=list)
    stopped_by: str | None = None


def _applicable(cy: Cyclic) -> bool:
    vals = np.concatenate([cy.dur, cy.gap])
    return bool(np.all(np.abs(vals - np.round(vals)) < EPS) and np.all(cy.dur > 0.5) and np.all(cy.mask.any(axis=1)))


def residue_search(
    cy: Cyclic,
    inst: PipelineInstance,
    offsets: int,
    period: int | Fraction,
    *,
    minimize_length: bool = False,
    below: float | None = None,
    collect: int = 0,
    rotate: list[int] | None = None,
    greedy: bool = False,
    node_limit: int = 100_000,
    deadline: float | None = None,
) -> ResidueResult:
    """Exact search for a repetend of integer ``period`` (seconds) spanning at most
    ``offsets`` periods (see the module docstring). At most ``node_limit`` placements
    (fewer when the ``time.perf_counter()`` deadline passes). ``below`` (seconds): only flat
    lengths below it are of interest (minimize: the length of a repetend in hand; then
    "infeasible" means that one is least). ``collect`` > 0: keep searching until that many
    repetends with different offsets are found (in search order; ``alternatives``).
    ``rotate`` (one integer per block): try each block's delays starting from that one
    (cyclically) instead of the earliest, to reach other repetends first. ``greedy``: also
    prune an F/B pair whose least offsets overflow the memory, as `modulo.modulo_backtrack`
    does (finds faster; its "infeasible" is then no proof and is reported as
    "undecided")."""
    frac = Fraction(period).limit_denominator(10**6)
    scale = frac.denominator  # a fractional period p / q: time in units of 1 / q
    t, kk = int(frac.numerator), int(offsets)
    if not _applicable(cy) or t > MAX_PERIOD_UNITS:
        return ResidueResult("undecided", None, None, False, 0)
    n, nd = cy.n, cy.mask.shape[1]
    dur = (np.round(cy.dur).astype(np.int64) * scale).tolist()
    if max(dur) > t:
        return ResidueResult("infeasible", None, None, False, 0)
    nb = inst.n_blocks
    order = np.concatenate([u * nb + inst.topo_order for u in range(cy.unfold)]).tolist()
    pos = {b: i for i, b in enumerate(order)}
    src = cy.src.tolist()
    dst = cy.dst.tolist()
    gap = (np.round(cy.gap).astype(np.int64) * scale).tolist()
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    succs: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, g in zip(src, dst, gap):
        preds[b].append((a, g))
        succs[a].append((b, g))
    # least time from a block's start to the end of the flat schedule (seconds)
    tail = [0] * n
    for b in reversed(order):
        tail[b] = max([dur[b]] + [g + tail[s] for s, g in succs[b]])
    horizon = kk * t
    last_start = [horizon - tail[b] for b in range(n)]
    roots = [b for b in range(n) if not preds[b]]
    pinned = roots[0] if len(roots) == 1 else -1  # rotation symmetry: the only root at 0
    devs = [np.flatnonzero(cy.mask[b]).tolist() for b in range(n)]
    full = (1 << t) - 1
    masks = []
    for b in range(n):
        span = (1 << dur[b]) - 1
        masks.append([((span << r) | (span >> (t - r))) & full for r in range(t)])
    mem = cy.mem.tolist()
    caps = inst.capacity
    # memory: per capped device, its blocks with memory; F/B pair devices are exact arcs
    holders: list[tuple[int, list[int], float]] = []
    general: list[int] = []  # holders whose rows are not one F/B difference constraint
    pair: list[tuple[int, int, float, float]] = []  # (alloc, free, size, capacity)
    check_at: list[list[int]] = [[] for _ in range(n)]
    for d in range(nd):
        if not math.isfinite(caps[d]):
            continue
        on = [b for b in range(n) if cy.mask[b, d] and abs(mem[b]) > EPS]
        if not any(mem[b] > 0 for b in on):
            continue
        holders.append((d, on, float(caps[d])))
        allocs = [b for b in on if mem[b] > 0]
        frees = [b for b in on if mem[b] < 0]
        if len(allocs) == 1 and len(frees) == 1 and abs(mem[allocs[0]] + mem[frees[0]]) <= EPS * max(1.0, abs(mem[allocs[0]])):
            pair.append((allocs[0], frees[0], float(mem[allocs[0]]), float(caps[d])))
        else:
            general.append(len(holders) - 1)
    # F/B pair memory as a largest distance: memory at a's start is size * (1 + floor((sigma_f
    # - sigma_a - d_a) / T)), so sigma_f - sigma_a <= floor(cap / size) T + d_a - 1
    static = longest(cy) * scale
    reach_pairs: list[list[tuple[int, int, int]]] = [[] for _ in range(n)]  # per block v: (pair, f, static v->f)
    span_max = []
    for j, (a, f, size, cap) in enumerate(pair):
        span_max.append(math.floor(cap / size + EPS) * t + dur[a] - 1)
        for v in range(n):
            if pos[v] >= pos[a] and np.isfinite(static[v, f]) and (v == a or np.isfinite(static[a, v])):
                reach_pairs[v].append((j, f, int(round(static[v, f]))))
    from_a: list[list[int | None]] = [[None] * n for _ in pair]  # least sigma_v - sigma_a along placed paths from a

    # forward checking: the later blocks sharing a device with b must keep a free residue
    rest = [[sum(dur[u] for u in order[i + 1 :] if cy.mask[u, d]) for i in range(n)] for d in range(nd)]
    later = [[u for u in order[pos[b] + 1 :] if cy.mask[u].any() and (cy.mask[u] & cy.mask[b]).any()] for b in range(n)]
    for h in general:
        check_at[max(pos[b] for b in holders[h][1])].append(h)
    res = [0] * n
    x = [0] * n  # flat start with the least offsets given the placed predecessors
    occ = [0] * nd
    budget = [node_limit]
    stopped_by: list[str | None] = [None]  # (`ResidueResult.stopped_by`)
    best: list = [None, math.inf if below is None else below * scale]  # sigma, length (scaled units)
    stop = [False]

    def w(u: int, g: int, v: int) -> int:
        """Least k_v - k_u of a dependency (periods)."""
        return -((res[v] - res[u] - g) // t)  # ceil((r_u + g - r_v) / t)

    def c(a: int, b: int) -> int:
        return -((res[b] - res[a] - dur[a]) // t)  # ceil((r_a + d_a - r_b) / t)

    def path_from(a: int) -> dict[int, int]:
        """Longest dependency path (periods) from a to the placed blocks after it."""
        dist = {a: 0}
        for v in order[pos[a] + 1 :]:
            best_v = None
            for u, g in preds[v]:
                if u in dist:
                    cand = dist[u] + w(u, g, v)
                    if best_v is None or cand > best_v:
                        best_v = cand
            if best_v is not None:
                dist[v] = best_v
        return dist

    def memory_bound_ok(h: int, upto: int) -> bool:
        """Sound lower bound of every memory row of holder h (its blocks placed; offsets
        as small or large as the placed dependencies allow)."""
        d, on, cap = holders[h]
        kmin = {b: x[b] // t for b in on}
        kmax = {b: (last_start[b] - res[b]) // t for b in on}
        for a in on:
            if mem[a] <= 0:
                continue
            dist_a = path_from(a)
            lhs = mem[a]
            for b in on:
                if b == a:
                    continue
                if mem[b] < 0:  # |mu_b| (k_b - k_a) >= |mu_b| * least difference
                    diff = dist_a[b] if b in dist_a else kmin[b] - kmax[a]
                    lhs += -mem[b] * diff
                else:  # mu_b (k_a - k_b)
                    dist_b = path_from(b)
                    diff = dist_b[a] if a in dist_b else kmin[a] - kmax[b]
                    lhs += mem[b] * diff
                lhs += mem[b] * c(a, b)
            if lhs > cap + EPS * max(1.0, abs(cap)):
                return False
        return True

    def offsets_of() -> list[int] | None:
        """Least offsets of the complete residue assignment (None: refuted or undecided;
        sets ``undecided`` in the latter case)."""
        k = [0] * n
        for _ in range(n * kk + 2):
            for v in order:
                lo = 0
                for u, g in preds[v]:
                    lo = max(lo, k[u] + w(u, g, v))
                if lo > k[v]:
                    k[v] = lo
                if res[v] + t * k[v] > last_start[v]:
                    return None
            changed = False
            for a, f, size, cap in pair:
                limit = math.floor(cap / size + EPS) - 1 + c(a, f)  # k_f - k_a <= limit
                if k[f] - k[a] > limit:
                    k[a] = k[f] - limit
                    changed = True
                    if res[a] + t * k[a] > last_start[a]:
                        return None
            if not changed:
                break
        else:
            undecided[0] = True
            return None
        for _d, on, cap in holders:
            for a in on:
                if mem[a] <= 0:
                    continue
                lhs = mem[a] + sum(mem[b] * (k[a] - k[b] + c(a, b)) for b in on if b != a)
                if lhs > cap + EPS * max(1.0, abs(cap)):
                    undecided[0] = True
                    return None
        return k

    undecided = [False]

    def pairs_ok(v: int) -> bool:
        """Update the distances from placed allocating blocks to v; False when a pair's
        free block can no longer start within its largest distance of the alloc."""
        for j, _f, st in reach_pairs[v]:
            a = pair[j][0]
            dist = from_a[j]
            dv: int | None
            if v == a:
                dv = 0
            else:
                dv = None
                for u, g in preds[v]:
                    du = dist[u] if pos[u] >= pos[a] else None
                    if du is not None and (u == a or pos[u] > pos[a]):
                        cand = du + g + (res[v] - res[u] - g) % t
                        if dv is None or cand > dv:
                            dv = cand
                if dv is None:
                    dist[v] = None
                    continue
            dist[v] = dv
            if dv + st > span_max[j]:
                return False
            if greedy and v == pair[j][1] and x[v] - x[a] > span_max[j]:
                return False
        return True

    fits_memo: dict[tuple[int, int], int] = {}
    shared = [[(u, devs[u], [d for d in devs[u] if d in devs[b]]) for u in later[b]] for b in range(n)]

    def room(b: int) -> bool:
        """Forward checking after placing b: every later block on b's devices keeps a
        free residue, and on each of b's devices the residues later blocks can still
        cover hold their remaining work (seconds)."""
        cover = dict.fromkeys(devs[b], 0)
        for u, ds, common in shared[b]:
            comb = 0
            for d in ds:
                comb |= occ[d]
            fit = fits_memo.get((u, comb))
            if fit is None:
                fit = 0
                for mm in masks[u]:
                    if not mm & comb:
                        fit |= mm
                fits_memo[(u, comb)] = fit
            if not fit:
                return False
            for d in common:
                cover[d] |= fit
        i = pos[b]
        return all((cover[d] & ~occ[d]).bit_count() >= rest[d][i] for d in devs[b])

    def place(i: int, slack: int) -> None:
        """Blocks i.. in order, the j-th free residue of a block costing j discrepancies."""
        if i == n:
            k = offsets_of()
            if k is None:
                return
            sigma = [res[b] + t * k[b] for b in range(n)]
            length = max(sigma[b] + dur[b] for b in range(n))
            if length < best[1]:
                best[0], best[1] = sigma, length
            if collect > 0:
                key = tuple(k)
                if key not in kinds:
                    kinds.add(key)
                    alts.append(np.asarray(sigma, dtype=float) / scale)
                if len(alts) >= collect:
                    stop[0] = True
            elif not minimize_length:
                stop[0] = True
            return
        b = order[i]
        est = max((x[a] + g for a, g in preds[b]), default=0)
        hi = min(est + t - 1, last_start[b])
        if b == pinned:
            est, hi = 0, min(0, last_start[b])
        j = 0
        span: Sequence[int] = range(est, hi + 1)
        if rotate is not None and len(span) > 1:  # a different first branch (diversification)
            cut_at = rotate[b] % len(span)
            span = list(span[cut_at:]) + list(span[:cut_at])
        for xb in span:
            if minimize_length and xb + tail[b] >= best[1]:
                break
            r = xb % t
            m = masks[b][r]
            if any(occ[d] & m for d in devs[b]):
                continue
            if j > slack:
                cut[0] = True
                return
            j += 1
            budget[0] -= 1
            if budget[0] < 0 or (deadline is not None and budget[0] % 512 == 0 and time.perf_counter() > deadline):
                stopped_by[0] = "node_limit" if budget[0] < 0 else "deadline"
                budget[0] = -1
                stop[0] = True
                return
            for d in devs[b]:
                occ[d] |= m
            res[b], x[b] = r, xb
            if room(b) and pairs_ok(b) and all(memory_bound_ok(h, i) for h in check_at[i]):
                place(i + 1, slack - (j - 1))
            for d in devs[b]:
                occ[d] &= ~m
            if stop[0]:
                return

    kinds: set[tuple[int, ...]] = set()
    alts: list[np.ndarray] = []
    cut = [False]
    slack = 0
    while True:  # limited discrepancy search (Harvey & Ginsberg 1995), then complete
        cut[0] = False
        place(0, slack)
        if stop[0] or not cut[0] or (best[0] is not None and not minimize_length and collect == 0):
            break
        if best[0] is not None:  # minimize / collect: the rest of the tree
            slack = n * t
            continue
        slack = {0: 1, 1: 2, 2: 4, 4: 6}.get(slack, n * t)  # a few limited passes, then the whole tree
    nodes = node_limit - max(budget[0], 0) if budget[0] >= 0 else node_limit
    exhausted = budget[0] >= 0
    if best[0] is not None:
        least = minimize_length and exhausted and not undecided[0]
        return ResidueResult("found", np.asarray(best[0], dtype=float) / scale, float(best[1]) / scale, least, nodes, alts, stopped_by[0])
    if exhausted and not undecided[0] and not greedy:
        return ResidueResult("infeasible", None, None, False, nodes)
    return ResidueResult("undecided", None, None, False, nodes, stopped_by=stopped_by[0])
