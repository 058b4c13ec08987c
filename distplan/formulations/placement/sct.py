"""m-SCT: Hanen & Munier's small-communication-time LP, rounded to favorite children, then
list scheduling that keeps a device for its op's favorite child.

References: C. Hanen, A. Munier, "An approximation algorithm for scheduling dependent tasks
on m processors with small communication delays", Discrete Applied Mathematics 108 (2001);
Baechi (Jeon et al., SoCC 2020; arXiv 2301.08695), ``placer/m_sct.py``.

LP (times in seconds): x_ij in [0, 1] per edge (x = 0 makes j the favorite child of i),
s_i >= 0, makespan w:
    s_i + p_i + c_ij x_ij <= s_j            every edge
    sum_{j in succ(i)} x_ij >= outdeg(i) - 1  (at most one favorite child)
    sum_{i in pred(j)} x_ij >= indeg(j) - 1   (favorite child of at most one parent)
    s_i + p_i <= w
p_i is the op's fastest device time and c_ij the edge's largest transfer delay.
The LP value is a lower bound on the optimum only under the small-communication
precondition (homogeneous devices and links, max c <= min p); it is reported as a bound
only then.

The LP is solved reduced (``lp_reduce``, default on; `implied_precedence`), with the same
optimal value: (1) a precedence row is left out when another path i -> k -> ... -> j whose
intermediate ops take at least c_ij in total implies it (induction on the topological span
of the edge: the rows kept imply every row left out, for any x in [0, 1]); (2) the makespan
row only for ops without successors (the precedence rows carry the others to a sink); (3)
the x of an edge whose row is left out is fixed to 1 (it then appears only in the
favorite rows, where 1 is best; such an edge is never a favorite), and a favorite row whose
right-hand side drops to <= 0 is left out. (1) and (2) keep the polyhedron; (3) keeps an
optimal solution (any optimal x raised to 1 on those edges stays feasible and optimal). On
fused GNMT (channels: 561 ops, 2,209 edges) 1,160 precedence rows and 559 makespan rows
go, and HiGHS takes about 0.02 s instead of 0.09-0.12 s. The LP's optimal vertex, hence
the favorites, may differ from the unreduced LP's: Baechi rounds whatever optimal
solution its solver returns, so any optimal solution of the SCT LP is a faithful m-SCT.

The LP has |E| + |V| + 1 columns and at most |E| + 3|V| rows, but simplex and interior
point both take super-linear time on it (HiGHS: about 15-40 s at 10k ops, hours at 100k on
a 2-core machine). Above ``lp_max_edges`` edges (default 5,000: every bundled instance
stays below) the LP is solved once on a contracted graph instead: ``chain_clusters``
blocks of a depth-first topological order, about ``lp_max_edges`` coarse edges. An
original edge between clusters takes its coarse edge's x, an edge inside a cluster x = 0
(the LP saw its ends as one task), and the favorite-aware list scheduling runs on the
original graph. The result's info says so (``lp_coarsened``); no LP bound is reported then.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.contract import ModelSpec
from distplan.formulations.placement.coarsen import chain_clusters, chain_order, contract
from distplan.formulations.placement.listsched import list_schedule, topological_positions
from distplan.formulations.registry import Bound, Outcome, RecordedModelField, RunContext
from distplan.modeling.model import Model, linear_sum
from distplan.models.graphs import edges_by
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan, make_plan
from distplan.solvers.result import SolverResult, model_record


@dataclass(frozen=True)
class SctIndex:
    """What the blocks of the SCT LP share (block contract): per-op times ``p`` (fastest
    device, s), per-edge delays ``c`` (largest over device pairs, s), ``theta`` (the
    rounding threshold of the decoder, in [0, 1] as the LP's x: the formulation's declared
    range), per edge whether its precedence row is implied by
    the others (``implied``: left out, its x fixed to 1), and the ops that get a makespan
    row (``ends``)."""

    p: np.ndarray
    c: np.ndarray
    theta: float
    implied: np.ndarray
    ends: np.ndarray


def prepare_sct(inst: PlacementInstance, params: Mapping[str, Any]) -> SctIndex:
    """The index; with ``lp_reduce`` (default True) the implied rows of the module docstring."""
    p, c = inst.time.min(axis=1), inst.max_delay()
    if params.get("lp_reduce", True):
        implied = implied_precedence(inst, p, c, int(params.get("reduce_max_cells", REDUCE_MAX_CELLS)))
        ends = np.flatnonzero(np.bincount(inst.src, minlength=inst.n_ops) == 0)
    else:
        implied, ends = np.zeros(inst.n_edges, dtype=bool), np.arange(inst.n_ops)
    return SctIndex(p, c, float(params.get("theta", 0.5)), implied, ends)


#: `implied_precedence` is skipped when (ops with two or more in-edges) x ops exceeds this
#: (its work is O(that x average out-degree); the LP is the same without it, only slower),
#: or when its column blocks x levels exceed ``MAX_LEVEL_STEPS`` (about ten numpy calls each:
#: 0.2-0.5 s at this bound on a long, merging graph)
REDUCE_MAX_CELLS = 25_000_000
MAX_LEVEL_STEPS = 20_000


def implied_precedence(inst: PlacementInstance, p: np.ndarray, c: np.ndarray, max_cells: int = REDUCE_MAX_CELLS, block_cells: int = 1 << 21) -> np.ndarray:
    """Per edge (i, j): does another path i -> k -> ... -> j exist whose ops strictly between
    i and j take at least c_ij in total (p, seconds)? Then s_j >= s_i + p_i + c_ij x_ij
    follows from the other precedence rows for any x_ij in [0, 1] (the paths' rows by
    induction on the topological span). A relative margin of 1e-9 keeps rounding on the
    safe side.

    Longest paths by dynamic programming towards the ops with two or more in-edges only (a
    path other than the edge needs a second in-edge of j; J such ops, the columns, in blocks
    of at most ``block_cells`` entries), one level at a time (an op's level: its longest path
    to a sink in edges; its successors are on lower levels). The matrix's rows are the ops
    by level and, within a level, by decreasing out-degree, so that the edges of rank r
    (an op's r-th out-edge) of a level start from a prefix of its rows: a level costs one
    gather and maximum per rank, O(E * J) time in all. All False when V * J exceeds
    ``max_cells`` or blocks x levels exceeds ``MAX_LEVEL_STEPS``."""
    n, m = inst.n_ops, inst.n_edges
    implied = np.zeros(m, dtype=bool)
    indeg = np.bincount(inst.dst, minlength=n)
    targets = np.flatnonzero(indeg >= 2)
    if m == 0 or targets.size == 0 or n * targets.size > max_cells:
        return implied
    order = topological_positions(inst)[0]
    e_out = edges_by(inst.src, n)
    cut_a = np.searchsorted(inst.src[e_out], np.arange(n + 1))
    cut = cut_a.tolist()
    dst_out = inst.dst[e_out]
    dl = dst_out.tolist()
    height = [0] * n
    for v in reversed(order):
        h = 0
        for w in dl[cut[v] : cut[v + 1]]:
            if height[w] >= h:
                h = height[w] + 1
        height[v] = h
    h_a = np.asarray(height)
    block = max(1, block_cells // n)
    if -(-targets.size // block) * int(h_a.max()) > MAX_LEVEL_STEPS:  # numpy calls ~ blocks x levels
        return implied
    outdeg = np.diff(cut_a)
    op_order = np.lexsort((-outdeg, h_a))  # rows: by level, then decreasing out-degree
    row_of = np.empty(n, dtype=np.int64)
    row_of[op_order] = np.arange(n)
    # the out-edges sorted by (level of the source, rank among its out-edges, source row)
    src_out = inst.src[e_out]
    e_row = row_of[src_out]
    e_rank = np.arange(m) - cut_a[src_out]
    e_lev = h_a[src_out]
    k = np.lexsort((e_row, e_rank, e_lev))  # ``k_*``: per edge in that order
    k_row, k_rank, k_lev = e_row[k], e_rank[k], e_lev[k]
    k_drow = row_of[dst_out[k]]
    k_edge = e_out[k]
    col_of = np.full(n, -1, dtype=np.int64)
    col_of[targets] = np.arange(targets.size)
    k_col = col_of[dst_out[k]]  # the destination's column (-1: one in-edge, never implied)
    grp = np.flatnonzero(np.r_[True, (k_rank[1:] != k_rank[:-1]) | (k_lev[1:] != k_lev[:-1]), True]).tolist()
    lev_rows = np.searchsorted(h_a[op_order], np.arange(int(h_a.max()) + 2)).tolist()  # rows of level l: [lev_rows[l], lev_rows[l + 1])
    need = (c * (1.0 + 1e-9))[k_edge]
    p_rows = p[op_order][:, None]
    # per level: row range, (count, source rows) per rank, and its edges' span in k order
    levels = []
    spans = []
    g = 0
    ng = len(grp) - 1
    while g < ng:
        lev = int(k_lev[grp[g]])
        spans.append(grp[g])
        ranks = []
        while g < ng and k_lev[grp[g]] == lev:
            a, b = grp[g], grp[g + 1]
            ranks.append((b - a, k_drow[a:b]))
            g += 1
        levels.append((lev_rows[lev], lev_rows[lev + 1], ranks))
    spans.append(m)
    rel = k_row - np.asarray(lev_rows)[k_lev]  # the source's row within its level
    for b0 in range(0, targets.size, block):
        width = min(block, targets.size - b0)
        longest = np.full((n, width), -np.inf)  # [row of k, column of t]: most time of ops on a path k -> t, k included, t not
        on = np.flatnonzero((k_col >= b0) & (k_col < b0 + width))  # the edges into this block's columns, by level
        t_idx, t_edge, t_need = rel[on] * width + k_col[on] - b0, k_edge[on], need[on]
        cuts = np.searchsorted(on, spans).tolist()
        for li, (lo, hi, ranks) in enumerate(levels):
            far = longest[lo:hi]  # through a successor: the maximum over the ranks
            np.take(longest, ranks[0][1], axis=0, out=far)
            for cnt, d in ranks[1:]:
                part = far[:cnt]
                np.maximum(part, longest[d], out=part)
            a, b = cuts[li], cuts[li + 1]
            if a < b:
                idx = t_idx[a:b]
                flat = far.reshape(-1)
                vals = flat[idx]
                implied[t_edge[a:b]] = vals >= t_need[a:b]
                flat[idx] = np.maximum(vals, 0.0, out=vals)  # the edge itself: a path with no op between
            far += p_rows[lo:hi]
    return implied


def sct_variables(model: Model, inst: PlacementInstance, index: SctIndex) -> None:
    """x_ij in [0, 1] per edge (``sct-x``; fixed to 1 where the precedence row is implied),
    start times (``start``), makespan w."""
    model.add_vars("sct-x", inst.n_edges, lb=index.implied.astype(float), ub=1.0)
    model.add_vars("start", inst.n_ops, lb=0.0)
    model.add_vars("makespan", (), lb=0.0)


def sct_precedence(model: Model, inst: PlacementInstance, index: SctIndex) -> None:
    """s_i + p_i + c_ij x_ij <= s_j for every edge whose row is not implied."""
    keep = np.flatnonzero(~index.implied)
    if keep.size == 0:
        return
    s, x = model["start"].index, model["sct-x"].index
    m = keep.size
    src, dst = inst.src[keep], inst.dst[keep]
    rows = np.tile(np.arange(m), 3)
    cols = np.concatenate([s[src], s[dst], x[keep]])
    coeffs = np.concatenate([np.ones(m), -np.ones(m), index.c[keep]])
    model.add_constraints("sct-precedence", linear_sum(cols, coeffs, rows, m, model.num_vars) <= -index.p[src])


def sct_favorite_rules(model: Model, inst: PlacementInstance, index: SctIndex) -> None:
    """At most one favorite child per op and one favorite parent per op: sum x >= degree - 1
    over the x that are not fixed (the fixed ones, at 1, taken to the right-hand side)."""
    if inst.n_edges == 0:
        return
    x = model["sct-x"].index
    free = ~index.implied
    for name, ends in (("sct-one-favorite-child", inst.src), ("sct-one-favorite-parent", inst.dst)):
        deg = np.bincount(ends, minlength=inst.n_ops)
        rhs = np.bincount(ends[free], minlength=inst.n_ops) - 1  # degree - 1 - fixed
        has = np.flatnonzero((deg > 1) & (rhs > 0))
        if has.size:
            row = np.cumsum((deg > 1) & (rhs > 0)) - 1  # the row of such an op
            on = free & (deg[ends] > 1) & (rhs[ends] > 0)
            expr = linear_sum(x[on], np.ones(int(on.sum())), row[ends[on]], has.size, model.num_vars)
            model.add_constraints(name, expr >= rhs[has])


def makespan_objective(model: Model, inst: PlacementInstance, index: SctIndex) -> None:
    """s_i + p_i <= w for the ops of ``index.ends``; minimize w."""
    s, w = model["start"].index, model["makespan"]
    ends = index.ends
    n = ends.size
    cols = np.concatenate([s[ends], np.full(n, w.index)])
    coeffs = np.concatenate([np.ones(n), -np.ones(n)])
    model.add_constraints("makespan", linear_sum(cols, coeffs, np.tile(np.arange(n), 2), n, model.num_vars) <= -index.p[ends])
    model.minimize(w)


def favorites_from_lp(inst: PlacementInstance, x: np.ndarray, theta: float) -> np.ndarray:
    """Round x_hat = round(x - theta + 0.5) (half to even, as Baechi), then walk edges in id
    order: x_hat = 0 makes dst the favorite of src; a child keeps only its last parent."""
    fav = np.full(inst.n_ops, -1, dtype=np.int64)
    parent = np.full(inst.n_ops, -1, dtype=np.int64)
    xhat = np.round(np.asarray(x) - theta + 0.5)  # numpy rounds halves to even, like Python
    for e in np.flatnonzero(xhat <= 0).tolist():
        i, j = int(inst.src[e]), int(inst.dst[e])
        if fav[i] >= 0:
            parent[fav[i]] = -1
        if parent[j] >= 0:
            fav[parent[j]] = -1
        fav[i] = j
        parent[j] = i
    return fav


def precondition_failure(inst: PlacementInstance, p: np.ndarray, c: np.ndarray) -> str | None:
    """Why Hanen–Munier's small-communication precondition, under which the LP value bounds
    the optimum, fails on ``inst`` (None: it holds): devices and links must be homogeneous
    and every transfer ``c`` (largest delay per edge, seconds) at most every op's time
    ``p`` (fastest device, seconds)."""
    if not bool(np.all(inst.time == inst.time[:, :1])):
        return "op times differ between devices"
    nd = inst.n_devices
    off = ~np.eye(nd, dtype=bool)
    if not (nd == 1 or (np.ptp(inst.bandwidth[off]) == 0 and np.ptp(inst.latency[off]) == 0)):
        return "links differ between device pairs"
    if inst.n_edges and float(c.max()) > float(p.min()):
        return f"communication is not small: the largest transfer takes {float(c.max()):.6g} s, the shortest op {float(p.min()):.6g} s"
    return None


def lp_bound_valid(inst: PlacementInstance, index: SctIndex) -> bool:
    """Hanen–Munier's precondition for the LP value to bound the optimum (`precondition_failure`)."""
    return precondition_failure(inst, index.p, index.c) is None


#: the name of the SCT LP `run_sct` solves on a contracted graph: it proves nothing about
#: the instance, so its call may back no bound (the registry's model pattern is the LP's own)
CONTRACTED_MODEL = "baechi_sct-contracted"


#: the model record's ``variable_blocks`` (`registry.RecordedModelField`): every call of the
#: SCT LP keeps its variable blocks (`Model.stats`), whose shapes `lp_bound_premise` reads to
#: tell the instance's own LP from a contracted graph's; without them (an older record) it
#: checks the model's name alone
VARIABLE_BLOCKS = RecordedModelField("variable_blocks", r"^baechi_sct$", ("optimal",), "every optimal call of the SCT LP records its variable blocks (`lp_bound_premise` reads their shapes: the LP was the instance's own, not a contracted graph's)")


def lp_bound_premise(inst: PlacementInstance, entry: Mapping[str, Any], calls: Sequence[Any]) -> str | None:
    """The premise of the bound `lp_bounds` reports (`registry.Premise`): the LP was solved
    to optimality and was the instance's own (its linked call's model has a ``start`` per
    op and an ``sct-x`` per edge, not a contracted graph's; blocks recorded as anything but
    a mapping are refused, review rev21) and the small-communication precondition holds on
    ``inst``, with the LP's own ``p`` and ``c`` (`prepare_sct`); None when all hold, else
    why not."""
    k = entry.get("solver_call")
    call = calls[k] if isinstance(k, int) and not isinstance(k, bool) and 0 <= k < len(calls) else None
    if isinstance(call, Mapping) and call.get("termination") != "optimal":
        # (`lp_bounds` reports the LP value only from an LP solved to optimality; a bound
        # linked to no call is `distplan verify`'s unlinked solver bound, rejected there)
        return f"the linked call ended {call.get('termination')!r}: the LP's value is a bound only when the LP was solved to optimality"
    model = model_record(call)
    blocks = model.get(VARIABLE_BLOCKS.name)
    if VARIABLE_BLOCKS.name in model and not isinstance(blocks, Mapping):
        return f"the linked call's variable_blocks {blocks!r} are no record of its LP's blocks"
    if isinstance(blocks, Mapping):  # (older records without blocks: the model name is checked alone)
        shapes = {b: (blocks.get(b) or {}).get("shape") if isinstance(blocks.get(b), Mapping) else None for b in ("start", "sct-x")}
        if shapes != {"start": [inst.n_ops], "sct-x": [inst.n_edges]}:
            return f"the linked call's LP is not the instance's own (start {shapes['start']}, sct-x {shapes['sct-x']}; the instance has {inst.n_ops} ops and {inst.n_edges} edges): a contracted graph's LP bounds nothing"
    return precondition_failure(inst, inst.time.min(axis=1), inst.max_delay())


def decode(inst: PlacementInstance, result: SolverResult, index: SctIndex) -> tuple[PlacementPlan, float]:
    """Favorites from the LP solution, then favorite-aware list scheduling."""
    fav = favorites_from_lp(inst, result.values_by_block["sct-x"], index.theta)
    sched = list_schedule(inst, favorite=fav)
    return make_plan(inst, sched.device, sched.start), sched.makespan


#: Hanen & Munier's LP (module docstring), decoded by favorite-aware list scheduling
SCT_LP = ModelSpec("baechi_sct", prepare_sct, (sct_variables, sct_precedence, sct_favorite_rules, makespan_objective), decode)


def lp_method(inst: PlacementInstance, params: Mapping[str, Any]) -> str:
    """The LP method m-SCT asks for (its `Policy`): large SCT LPs are degenerate for simplex,
    so the LP solved on the instance itself (up to ``lp_max_edges`` edges) with more than
    ``barrier_above_edges`` edges asks for interior point (10k ops: 15 s instead of 205 s
    on HiGHS)."""
    max_edges = int(params.get("lp_max_edges", 5000))
    on_instance = max_edges <= 0 or inst.n_edges <= max_edges
    return "barrier" if on_instance and inst.n_edges > int(params.get("barrier_above_edges", 10000)) else "auto"


def lp_bounds(inst: PlacementInstance, result: SolverResult, index: SctIndex) -> list[Bound]:
    """The LP value, only when it is proven optimal and the SCT precondition holds."""
    if result.termination.value == "optimal" and result.bound is not None and lp_bound_valid(inst, index):
        return [Bound(float(result.bound), "SCT LP value (small-communication precondition holds)", solver_record=result)]
    return []


def run_sct(inst: PlacementInstance, ctx: RunContext, run_lp: Callable[[PlacementInstance, RunContext], Outcome]) -> Outcome:
    """m-SCT with the LP on the instance itself (``run_lp``: the declared run of `SCT_LP`) up
    to ``lp_max_edges`` edges, on a contracted graph above (see the module docstring)."""
    max_edges = int(ctx.param("lp_max_edges", 5000))
    if max_edges <= 0 or inst.n_edges <= max_edges:
        return run_lp(inst, ctx)
    t0 = time.perf_counter()
    # the number of clusters k for about max_edges coarse edges: secant steps on log(edges)
    # against log(k) (coarse edges grow sub-linearly in k), at most 6 contractions
    k = max(1, (inst.n_ops * max_edges) // inst.n_edges)
    tried: list[tuple[int, int]] = []
    chosen: tuple[PlacementInstance, np.ndarray] | None = None
    order = chain_order(inst)
    for _ in range(6):
        cluster = chain_clusters(inst, k, order)
        coarse, edge_of = contract(inst, cluster)
        tried.append((k, coarse.n_edges))
        if coarse.n_edges <= 1.25 * max_edges:
            chosen = (coarse, edge_of)
            if coarse.n_edges >= 0.5 * max_edges or k >= inst.n_ops:
                break
        elif k == 1:
            chosen = (coarse, edge_of)
            break
        slope = 1.0
        if len(tried) >= 2 and tried[-1][0] != tried[-2][0] and min(tried[-1][1], tried[-2][1]) > 0:
            (k0, e0), (k1, e1) = tried[-2], tried[-1]
            slope = min(max(np.log(e1 / e0) / np.log(k1 / k0), 0.2), 1.0) if e1 != e0 else 1.0
        nxt = max(1, min(inst.n_ops, int(round(k * (max_edges / max(coarse.n_edges, 1)) ** (1.0 / slope)))))
        if nxt == k or any(nxt == kk for kk, _ in tried):
            if chosen is None:
                chosen = (coarse, edge_of)
            break
        k = nxt
    coarse, edge_of = chosen if chosen is not None else (coarse, edge_of)  # else the last tried
    params = {"theta": 0.5, **ctx.params}
    model, index = SCT_LP.build(coarse, params, name=CONTRACTED_MODEL)
    build = time.perf_counter() - t0
    result = ctx.solve_model(model, build_seconds=build)
    info = {
        "lp_coarsened": {
            "reason": f"the SCT LP of {inst.n_edges} edges is beyond lp_max_edges={max_edges}: solved on a contracted graph",
            "clusters": coarse.n_ops,
            "coarse_edges": coarse.n_edges,
            "contract_seconds": build,
        }
    }
    if not result.has_solution:
        return Outcome(plan=None, solver_results=list(ctx.solver_results), info=info)
    xc = np.asarray(result.values_by_block["sct-x"], dtype=float)
    x = np.where(edge_of >= 0, xc[np.maximum(edge_of, 0)] if xc.size else 0.0, 0.0)
    fav = favorites_from_lp(inst, x, index.theta)
    sched = list_schedule(inst, favorite=fav, deadline=ctx.deadline)  # (0.8 s on 27,083 ops)
    return Outcome(plan=make_plan(inst, sched.device, sched.start), solver_results=list(ctx.solver_results),
                   claimed_objective=sched.makespan, info=info)
