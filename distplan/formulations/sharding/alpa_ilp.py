"""Alpa's intra-operator sharding ILP, built from vectorized blocks.

Zheng et al., "Alpa: Automating Inter- and Intra-Operator Parallelism for Distributed
Deep Learning", OSDI 2022, section 4 (the formulation of XLA's auto-sharding solver):

    min  sum_i s_i . (c_i)  +  sum_(i,j) e_ij . r_ij
    s.t. sum_p s_i[p] = 1                          (one strategy per node)
         sum_(p,q) e_ij[p,q] = 1                   (one strategy pair per edge)
         sum_q e_ij[p,q] <= s_i[p],  sum_p e_ij[p,q] <= s_j[q]   (e_ij = s_i s_j^T)
         sum_i s_i . m_i <= M                      (memory per device)

``s`` is binary; ``e`` may stay continuous (with binary ``s`` the rows force the product).
Nodes with one strategy are constants (their edges become node costs of the other end);
choices of infinite cost are fixed to 0. The memory row moves every node's smallest
memory to the right-hand side (as XLA does) and is checked before solving: memory is a
sum of per-node terms, so the plan of least memory is known exactly and an infeasible
budget is reported with the shortfall. The objective is scaled to microseconds and the
memory row to GiB for the solver (a plan over the budget by the solver's tolerance is
solved again with the row in ten-thousandths of the budget: `solve_graph`); results are
reported in seconds.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.contract import ModelSpec, Policy, time_limit_parameter
from distplan.formulations.deadline import DeadlineReached, check
from distplan.formulations.registry import Bound, Formulation, Outcome, RunContext, Unrecorded
from distplan.formulations.sharding.costgraph import CostGraph, build_cost_graph
from distplan.formulations.sharding.expert_plans import expert_if_better
from distplan.modeling.model import Model, linear_sum
from distplan.models.common import per_instance
from distplan.models.sharding import TIGHTEST_POINT, ShardingInstance, ShardingPlan, accepted_bytes, bytes_text
from distplan.solvers.result import INFEASIBLE_TERMINATIONS, SolverResult, Termination

#: objective coefficients are microseconds
OBJECTIVE_SCALE = 1e6
#: memory row coefficients are GiB (the first solve: HiGHS's feasibility tolerance, 1e-6
#: on the row, is then ~1 kB, and on a 44 MB budget it returned a plan 467 bytes over)
MEMORY_SCALE = 1.0 / 1024**3
#: the re-solve's memory row counts in units of budget / MEMORY_ROW_UNITS: a solver's
#: absolute tolerance of 1e-6 (HiGHS's MIP, SCIP, CBC) is then 1e-10 of the budget, 10x
#: inside the evaluator's MEMORY_TOLERANCE. Not the first solve's unit: on the 12 24-layer
#: GPTs of bench_sharding it changed HiGHS's times 0.6x to over 3x (two solves went past
#: 20 s, one that had not finished in 20 s took 3.3 s)
MEMORY_ROW_UNITS = 1e4
#: the cost of a forbidden choice (a resharding that needs an all-to-all on a mesh without
#: one: `distplan.models.sharding_costs` returns ``math.inf`` there). Only an infinite cost
#: is forbidden: every finite cost, however large, stays choosable (a threshold of 1e9 s
#: here had declared an instance of 3.6e10 s iterations infeasible, review rev13)
INFINITE_SECONDS = math.inf
#: the largest objective coefficient handed to a solver (solver units): coefficients in
#: microseconds beyond it (an op or a resharding of more than 1e6 s) make `objective_scale`
#: smaller, by powers of ten, so that they stay far below the 1e20 that HiGHS takes for an
#: infinite cost
MAX_OBJECTIVE_COEFFICIENT = 1e12
#: relative MIP gap used when the caller sets none (the formulation is exact)
DEFAULT_MIP_GAP = 1e-9
REFERENCE = "Zheng et al., Alpa, OSDI 2022 (intra-operator pass; XLA auto-sharding solver)"



#: relative margin under a cost summed in floating point (n terms: error below n u, 2.2e-9
#: for 10 million terms) before it is a bound on the same sum in another order
SUM_ROUNDING_MARGIN = 1e-9

#: relative room for memory summed in another order than the evaluator's (two sums of n
#: nonnegative terms differ by less than 2 n u of them: 2.2e-11 for 100,000 terms)
MEMORY_ROUNDING = 1e-10


def memory_limits(budget: float) -> tuple[float, float]:
    """(plan, proof) limits on a plan's memory per device as the formulations sum it
    (bytes). The evaluator accepts up to ``budget x (1 + MEMORY_TOLERANCE)``
    (`distplan.models.sharding.bytes_over`): a plan within ``plan`` it surely accepts (the
    sums' rounding left inside), and every plan it accepts is within ``proof`` (rounding
    left outside), so what proves (an infeasibility, the memory row of a reported bound,
    the dynamic program's bound) compares with ``proof``, what is returned with ``plan``.
    With only the exact budget, a budget 1 byte below the least-memory plan, which the
    evaluator accepts, was called infeasible (review rev16 D2)."""
    accepted = accepted_bytes(budget)
    return accepted * (1 - MEMORY_ROUNDING), accepted * (1 + MEMORY_ROUNDING)


def memory_row_limit(budget: float, *memories: np.ndarray, copies: float = 1.0) -> float:
    """The limit of a memory row over per-choice memories ``memories`` (bytes; a plan takes
    at most ``copies`` of each): `memory_limits`' proof limit, except when every memory is
    a whole number of bytes and their sum (times ``copies``) is below 2^53, so that every
    plan's memory is a whole number, summed exactly: then the largest whole number within
    the proof limit, or the budget itself when none lies above it (the row is then the one
    of the exact budget, which holds every accepted plan; the solver's path is unchanged: at
    a limit 0.18 bytes higher, HiGHS took past 60 s on a 24-layer GPT it solved in 25 s)."""
    proof = memory_limits(budget)[1]
    values = [np.asarray(m, dtype=float) for m in memories]
    total = sum(float(np.abs(v).sum()) for v in values) * copies
    if not (total < 2.0**53 and proof < 2.0**53 and all(bool(np.all(v == np.round(v))) for v in values)):
        return proof
    top = float(math.floor(proof))
    return top if top > budget else budget


def objective_scale(*costs: np.ndarray | float) -> float:
    """Solver units per second of the objective: `OBJECTIVE_SCALE` (microseconds) unless
    the largest finite cost (seconds) would then exceed `MAX_OBJECTIVE_COEFFICIENT`; then
    the largest power of ten that keeps it within."""
    largest = 0.0
    for c in costs:
        a = np.abs(np.asarray(c, dtype=float))
        a = a[np.isfinite(a)]
        if a.size:
            largest = max(largest, float(a.max()))
    if largest * OBJECTIVE_SCALE <= MAX_OBJECTIVE_COEFFICIENT:
        return OBJECTIVE_SCALE
    return 10.0 ** math.floor(math.log10(MAX_OBJECTIVE_COEFFICIENT / largest))


def bound_seconds(call_bound: float, instance: ShardingInstance, scale: float) -> float:
    """The seconds a solver's bound (``scale`` solver units per second: the model's
    `objective_scale`) of alpa_ilp's or tap's programs proves: the bound over the scale.
    The arithmetic of `dual_bound_seconds`, which checks the scale a call's record keeps."""
    return call_bound / scale


#: the names of the models of Alpa's ILP on an instance's own cost graph (`run_alpa_ilp`;
#: on a folded instance they are "alpa_ilp_folded"): `dual_bound_seconds` re-derives their
#: objective scale exactly
ALPA_MODELS = ("alpa_ilp", "alpa_ilp_lp")


def dual_bound_seconds(call_bound: float, instance: ShardingInstance, model: Mapping[str, Any]) -> float:
    """The seconds of ``instance`` that a solver's bound of alpa_ilp's or tap's programs
    proves: the bound over the objective scale (solver units per second) the call's model
    record keeps (``objective_scale``, noted by `node_choice_block` when the model is
    built). The stated conversion of alpa_ilp's and tap's solver calls' bounds
    (`registry.BOUND_SOURCES`), which the formulations apply to their calls' records as
    `distplan verify` applies it to the stored ones.

    The recorded scale must be one the formulations pick (`objective_scale`): a power of
    ten, at most `OBJECTIVE_SCALE`. Below that (costs of more than 1e6 s) it must be at
    least the least scale any of their programs of ``instance`` can have
    (`least_objective_scale`), and on a model of Alpa's ILP on the instance's own cost
    graph (`ALPA_MODELS`) exactly that program's scale (`alpa_objective_scale`); both
    are re-derived from ``instance``, and a scale that breaks a rule is a ValueError. The
    scale of a tap program below `OBJECTIVE_SCALE` is checked against the least only (its
    exact value depends on the fold). A scale of `OBJECTIVE_SCALE` needs no check: no
    program has a larger one, so a positive bound over it proves the least.

    A record without the scale (a result written before it was kept): when the instance's
    costs sum to at most 1e6 s every program's scale is `OBJECTIVE_SCALE` and the bound
    over it is exact; so it is for a model of Alpa's ILP on the instance's own graph
    (`ALPA_MODELS`), over that program's scale re-derived; otherwise `registry.Unrecorded`
    with the most the bound can prove (a positive bound over the least scale, a negative
    one over `OBJECTIVE_SCALE`)."""
    scale = model.get("objective_scale")
    if scale is None:
        least = least_objective_scale(instance)
        if least >= OBJECTIVE_SCALE:
            return call_bound / OBJECTIVE_SCALE
        if model.get("name") in ALPA_MODELS:  # Alpa's ILP on the instance's own graph: its scale is re-derived
            return bound_seconds(call_bound, instance, alpa_objective_scale(instance))
        loosest = call_bound / (least if call_bound > 0 else OBJECTIVE_SCALE)
        raise Unrecorded("objective_scale", loosest, f"the instance's programs have objective scales from {least:g} to {OBJECTIVE_SCALE:g} units per second; the bound was checked at the least, up to {OBJECTIVE_SCALE / least:g}x looser than its model's own")
    if isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale) or scale <= 0:
        raise ValueError(f"objective_scale {scale!r} is no positive number of solver units per second")
    scale = float(scale)
    if scale > OBJECTIVE_SCALE or 10.0 ** round(math.log10(scale)) != scale:
        raise ValueError(f"objective_scale {scale!r} is none the formulations pick (a power of ten, at most {OBJECTIVE_SCALE:g})")
    if scale < OBJECTIVE_SCALE:
        least = least_objective_scale(instance)
        if scale < least:
            raise ValueError(f"objective_scale {scale:g} is below {least:g}, the least any program of alpa_ilp or tap on this instance has")
        name = model.get("name")
        if name in ALPA_MODELS and scale != (exact := alpa_objective_scale(instance)):
            raise ValueError(f"objective_scale {scale:g} but Alpa's ILP of this instance ({name}) has {exact:g}")
    return bound_seconds(call_bound, instance, scale)


@per_instance
def least_objective_scale(instance: ShardingInstance) -> float:
    """The least `objective_scale` a program of alpa_ilp or tap on ``instance`` can have:
    every coefficient of theirs (an op's or a resharding's cost, the costs of a fold's walk
    arc, the constant of fixed choices) is a sum of costs of distinct nodes and edges of the
    cost graph, each at most its largest finite cost, so at most the sum of those. It is
    the models' own scale (microseconds) unless that sum passes 1e6 seconds. Computed once
    per instance object (a database holds many runs of one)."""
    graph = build_cost_graph(instance)
    total = sum(_largest_finite(c) for c in graph.node_cost) + sum(_largest_finite(c) for c in graph.edge_cost)
    return float(objective_scale(total))


@per_instance
def alpa_objective_scale(instance: ShardingInstance) -> float:
    """The `objective_scale` of Alpa's ILP (and its LP relaxation) on ``instance``'s own
    cost graph (solver units per second; the memory row does not change it). Computed once
    per instance object."""
    return float(prepare_alpa(build_cost_graph(instance), {}).objective_scale)


def _largest_finite(cost: np.ndarray) -> float:
    a = np.abs(np.asarray(cost, dtype=float))
    a = a[np.isfinite(a)]
    return float(a.max()) if a.size else 0.0


def forbidden(cost: np.ndarray) -> np.ndarray:
    """The choices a cost array forbids: infinite costs (`INFINITE_SECONDS`); NaN, which no
    validated instance produces, counts as forbidden too rather than as a cost."""
    return ~np.isfinite(cost)


def memory_row_scale(budget: float) -> float:
    """Row units per byte of the re-solve's memory row: MEMORY_ROW_UNITS per budget, at
    least per GiB."""
    return max(MEMORY_ROW_UNITS / budget, MEMORY_SCALE) if budget > 0 else MEMORY_SCALE


class FoldedSharding:
    """A folded sharding problem: the cost graph over representatives (kind ``sharding``).

    Produced by the folder registered for ``solve(..., fold=True)``; `alpa_ilp` solves it
    like any instance and the folder unfolds the plan."""

    kind = "sharding"

    def __init__(self, graph: CostGraph, original: ShardingInstance, stats: dict[str, Any], unfold: Callable[[ShardingPlan], ShardingPlan]):
        self.graph = graph
        self.original = original
        self.name = original.name
        self.stats = stats
        #: a plan of the representatives -> the plan of every op of ``original``
        self.unfold = unfold


def unfolded(instance: Any, formulation: str) -> ShardingInstance:
    """The instance itself; InputError for a folded one (only alpa_ilp takes those)."""
    if isinstance(instance, FoldedSharding):
        raise InputError("fold", f"{formulation} does not take a folded instance", "solve without --fold (Python: without fold=True; tap folds by itself), or use alpa_ilp")
    return instance


def graph_of(instance: ShardingInstance | FoldedSharding) -> CostGraph:
    return instance.graph if isinstance(instance, FoldedSharding) else build_cost_graph(instance)


# -- the block contract: index, blocks, decoder ------------------------------------------------


def _edge_entries(g: CostGraph, sizes: np.ndarray, deadline: float | None = None) -> dict[str, np.ndarray]:
    """Every entry of every edge matrix as flat arrays: edge id, row p, column q, cost.
    `DeadlineReached` past ``deadline``, checked between the steps (each ~0.5 s on a
    1,024-layer GPT on a 4x4x4 mesh: review rev30 D8)."""
    nu, nv = sizes[g.edge_u], sizes[g.edge_v]
    count = nu * nv
    edge = np.repeat(np.arange(len(count)), count)
    check(deadline, "the alpa_ilp model's preparation")
    start = np.concatenate([[0], np.cumsum(count)])[:-1]
    local = np.arange(int(count.sum())) - np.repeat(start, count)
    check(deadline, "the alpa_ilp model's preparation")
    per = np.repeat(nv, count)
    p = local // per
    check(deadline, "the alpa_ilp model's preparation")
    q = local % per
    check(deadline, "the alpa_ilp model's preparation")
    cost = np.concatenate([m.ravel() for m in g.edge_cost]) if g.edge_cost else np.zeros(0)
    return {"edge": edge, "p": p, "q": q, "cost": cost}


@dataclass(frozen=True)
class AlpaIndex:
    """What the blocks of Alpa's ILP share (block contract: `distplan.formulations.contract`).
    Costs in seconds, memory in bytes.

    A node with one strategy is a constant; edges with a single-strategy end are folded into
    the other end's cost vector; the ``s`` variables are the strategies of the free nodes
    (``s_node``, ``s_offset``: node and first position of each), ``e`` the entries of the
    edges between free nodes (``e_edge`` numbers those edges 0..)."""

    graph: CostGraph
    relax: bool
    sizes: np.ndarray
    flat_node: np.ndarray
    flat_memory: np.ndarray
    free: np.ndarray
    #: every entry of every edge matrix (edge, p, q, cost)
    entries: dict[str, np.ndarray]
    s_cost: np.ndarray
    s_node: np.ndarray
    s_offset: np.ndarray
    s_upper: np.ndarray
    free_rank: np.ndarray
    kept_edges: np.ndarray
    e_edge: np.ndarray
    e_p: np.ndarray
    e_q: np.ndarray
    e_cost: np.ndarray
    e_upper: np.ndarray
    #: seconds every plan pays (fixed nodes, edges between them)
    constant: float
    #: row units per byte of the memory row (default `MEMORY_SCALE`: GiB)
    memory_scale: float
    #: the memory row's limit, bytes per device (None: `memory_limits`' proof limit, the
    #: most any plan the evaluator accepts holds, so that the program's bound holds for
    #: every one of them)
    memory_limit: float | None
    #: solver units per second of the objective (`objective_scale`: microseconds unless
    #: the costs are too large for them)
    objective_scale: float
    #: the run's deadline (a ``time.perf_counter()`` value; None: no limit): the build stops
    #: past it before each block (`contract.ModelSpec.build_from`)
    deadline: float | None


def prepare_alpa(instance: Any, params: Mapping[str, Any]) -> AlpaIndex:
    """The cost graph's arrays (``instance``: a cost graph, an instance or a folded one);
    ``relax`` for the LP relaxation, ``memory_scale`` (row units per byte, default GiB)
    and ``memory_limit`` (bytes, default `memory_limits`' proof limit) for the memory
    row. Raises InfeasibleError when an op has no allowed
    strategy."""
    g = instance if isinstance(instance, CostGraph) else graph_of(instance)
    sizes = g.strategy_counts()
    offset = np.concatenate([[0], np.cumsum(sizes)])
    flat_cost = np.concatenate(g.node_cost) if g.num_nodes else np.zeros(0)
    flat_memory = np.concatenate(g.node_memory) if g.num_nodes else np.zeros(0)
    flat_node = np.repeat(np.arange(g.num_nodes), sizes)
    cost = flat_cost.copy()
    deadline = params.get("deadline")
    check(deadline, "the alpa_ilp model's preparation")  # (the cost graph can take the limit)
    ent = _edge_entries(g, sizes, deadline)  # (1.1 s on 40,965 ops: the phases check the deadline between them)
    check(deadline, "the alpa_ilp model's preparation")
    free = sizes > 1
    eu, ev = g.edge_u[ent["edge"]], g.edge_v[ent["edge"]]
    fu, fv = free[eu], free[ev]
    to_v = ~fu & fv
    np.add.at(cost, offset[ev[to_v]] + ent["q"][to_v], ent["cost"][to_v])
    check(deadline, "the alpa_ilp model's preparation")
    to_u = fu & ~fv
    np.add.at(cost, offset[eu[to_u]] + ent["p"][to_u], ent["cost"][to_u])
    check(deadline, "the alpa_ilp model's preparation")
    constant = float(ent["cost"][~fu & ~fv].sum())
    fixed_nodes = np.flatnonzero(~free)
    constant += float(cost[offset[fixed_nodes]].sum())
    if not math.isfinite(constant):  # (a forbidden resharding: INFINITE_SECONDS)
        raise InfeasibleError(f"{g.name}: two single-strategy ops are joined by a resharding that is not allowed (mesh.all_to_all false)")
    flat_free = free[flat_node]
    s_cost = cost[flat_free]
    s_node = flat_node[flat_free]
    infinite = forbidden(s_cost)
    if infinite.any():
        blocked = np.bincount(s_node[infinite], minlength=g.num_nodes)
        dead = np.flatnonzero((blocked == sizes) & free)
        if dead.size:
            op = g.instance.ops[g.node_ops[int(dead[0])][0]].name
            raise InfeasibleError(f"{g.name}: every strategy of op {op!r} needs a resharding this mesh does not allow (mesh.all_to_all false)")
    free_ids = np.flatnonzero(free)
    rank = np.full(g.num_nodes, -1)
    rank[free_ids] = np.arange(free_ids.size)
    s_offset = np.zeros(g.num_nodes, dtype=np.int64)
    s_offset[free_ids] = np.concatenate([[0], np.cumsum(sizes[free_ids])])[:-1]
    keep_edge = free[g.edge_u] & free[g.edge_v]
    kept = np.flatnonzero(keep_edge)
    mask = keep_edge[ent["edge"]]
    check(deadline, "the alpa_ilp model's preparation")
    e_cost = ent["cost"][mask]
    e_inf = forbidden(e_cost)
    s_cost = np.where(infinite, 0.0, s_cost)
    e_cost = np.where(e_inf, 0.0, e_cost)
    edge_rank = np.full(len(g.edge_u), -1)
    edge_rank[kept] = np.arange(kept.size)
    return AlpaIndex(
        graph=g,
        relax=bool(params.get("relax", False)),
        sizes=sizes,
        flat_node=flat_node,
        flat_memory=flat_memory,
        free=free,
        entries=ent,
        s_cost=s_cost,
        s_node=s_node,
        s_offset=s_offset,
        s_upper=np.where(infinite, 0.0, 1.0),
        free_rank=rank,
        kept_edges=kept,
        e_edge=edge_rank[ent["edge"][mask]],
        e_p=ent["p"][mask],
        e_q=ent["q"][mask],
        e_cost=e_cost,
        e_upper=np.where(e_inf, 0.0, 1.0),
        constant=constant,
        memory_scale=float(params.get("memory_scale", MEMORY_SCALE)),
        memory_limit=None if params.get("memory_limit") is None else float(params["memory_limit"]),
        objective_scale=objective_scale(s_cost, e_cost, constant),
        deadline=None if deadline is None else float(deadline),
    )


def node_choice_block(model: Model, instance: Any, index: AlpaIndex) -> None:
    """One-hot strategy vector ``s`` for every node with more than one strategy (choices of
    infinite cost fixed to 0). The first block of every program on an `AlpaIndex` (Alpa's
    ILP, tap's walk program): it notes the index's ``objective_scale`` (solver units per
    second, the units its objective block counts in) in the model's record
    (`Model.notes`), which the conversion of the call's bound reads
    (`dual_bound_seconds`)."""
    model.notes["objective_scale"] = float(index.objective_scale)
    s = model.add_vars("s", index.s_node.size, lb=0, ub=index.s_upper, vtype="continuous" if index.relax else "binary")
    model.add_constraints("one-strategy", s.group_sum(index.free_rank[index.s_node], int(index.free.sum())) == 1)


def edge_product_block(model: Model, instance: Any, index: AlpaIndex) -> None:
    """Edge variables ``e`` linearizing s_i s_j^T for edges whose ends are both free."""
    g = index.graph
    sizes = index.sizes
    s = model["s"]
    n_e = index.e_edge.size
    e = model.add_vars("e", n_e, lb=0, ub=index.e_upper, vtype="continuous")
    if n_e == 0:
        return
    kept = index.kept_edges
    r, p, q = index.e_edge, index.e_p, index.e_q
    ncols = model.num_vars
    e_col = e.index.reshape(-1)
    s_col = s.index.reshape(-1)
    model.add_constraints("edge-one", linear_sum(e_col, np.ones(n_e), r, kept.size, ncols) == 1)
    su, sv = sizes[g.edge_u[kept]], sizes[g.edge_v[kept]]
    row_start_u = np.concatenate([[0], np.cumsum(su)])[:-1]
    row_start_v = np.concatenate([[0], np.cumsum(sv)])[:-1]
    # sum_q e[p, q] - s_u[p] <= 0
    rows_u = row_start_u[r] + p
    own_u = np.arange(int(su.sum())) - np.repeat(row_start_u, su)
    s_u = s_col[index.s_offset[np.repeat(g.edge_u[kept], su)] + own_u]
    cols = np.concatenate([e_col, s_u])
    coeffs = np.concatenate([np.ones(n_e), -np.ones(s_u.size)])
    rows = np.concatenate([rows_u, np.arange(int(su.sum()))])
    model.add_constraints("edge-row", linear_sum(cols, coeffs, rows, int(su.sum()), ncols) <= 0)
    rows_v = row_start_v[r] + q
    own_v = np.arange(int(sv.sum())) - np.repeat(row_start_v, sv)
    s_v = s_col[index.s_offset[np.repeat(g.edge_v[kept], sv)] + own_v]
    cols = np.concatenate([e_col, s_v])
    coeffs = np.concatenate([np.ones(n_e), -np.ones(s_v.size)])
    rows = np.concatenate([rows_v, np.arange(int(sv.sum()))])
    model.add_constraints("edge-col", linear_sum(cols, coeffs, rows, int(sv.sum()), ncols) <= 0)


def memory_shortfall(g: CostGraph) -> tuple[float, float, list[tuple[float, str]]]:
    """(least memory per device over all plans, budget, the three largest per-node
    minimums with their op names, equal ones in graph order), bytes."""
    least = [float(np.min(m[~forbidden(c)])) if m.size else 0.0 for m, c in zip(g.node_memory, g.node_cost)]
    largest = heapq.nsmallest(3, range(len(least)), key=lambda k: (-least[k], k))
    top = [(least[k], g.instance.ops[g.node_ops[k][0]].name + (f" (x{int(g.multiplicity[k])} copies)" if g.multiplicity[k] > 1 else "")) for k in largest]
    return float(sum(least)), g.memory_budget, top


def memory_shortfall_error(g: CostGraph, least: float, top: list[tuple[float, str]] | None = None) -> InfeasibleError:
    """The error of a budget below the least memory ``least`` (bytes per device) any plan
    needs: which device, at which point, by how much, and the largest needs (``top``:
    bytes and op name) when given."""
    inst, budget = g.instance, g.memory_budget
    mesh = "x".join(str(x) for x in inst.mesh.shape)
    largest = f". Largest needs: {', '.join(f'{n} {bytes_text(m)}' for m, n in top)}" if top else ""
    # (the budget is the instance's mesh.memory when it sets one, not the device's memory)
    source = "mesh.memory" if inst.mesh.memory is not None else f"the {inst.mesh.device}'s memory"
    return InfeasibleError(
        f"{g.name}: memory: device 0 of the {inst.mesh.num_devices}-device {mesh} mesh of {inst.mesh.device} "
        f"(every device holds an equal shard) needs at least {bytes_text(least)} at {TIGHTEST_POINT}, "
        f"even with the most memory-saving strategy of every op; its budget is {bytes_text(budget)} ({source}): "
        f"{bytes_text(least - budget)} missing{largest}",
        details={"device": 0, "point": "end of forward", "needed_bytes": least, "budget_bytes": budget, "missing_bytes": least - budget},
    )


def memory_block(model: Model, instance: Any, index: AlpaIndex) -> None:
    """The per-device memory row at the tightest point (end of the forward pass), in the
    index's ``memory_scale`` units (GiB unless re-solved);
    an InfeasibleError with the shortfall when even the least-memory plan does not fit."""
    g = index.graph
    least, budget, top = memory_shortfall(g)
    proof = memory_limits(budget)[1]
    limit = memory_row_limit(budget, index.flat_memory) if index.memory_limit is None else index.memory_limit
    if least > proof:
        raise memory_shortfall_error(g, least, top)
    s = model["s"]
    if s.size == 0:
        return
    node_min = np.array([float(np.min(m)) for m in g.node_memory])
    flat_free = index.free[index.flat_node]
    coeff = (index.flat_memory[flat_free] - node_min[index.s_node]) * index.memory_scale
    rhs = (limit - float(node_min.sum())) * index.memory_scale
    cols = s.index.reshape(-1)
    row = linear_sum(cols, coeff, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars)
    model.add_constraints("memory", row <= rhs)


def objective_block(model: Model, instance: Any, index: AlpaIndex) -> None:
    """Node costs + edge resharding costs (+ constants), in microseconds (in the index's
    ``objective_scale`` units)."""
    s, e = model["s"], model["e"]
    scale = index.objective_scale
    cols = np.concatenate([s.index.reshape(-1), e.index.reshape(-1)])
    coeffs = np.concatenate([index.s_cost, index.e_cost]) * scale
    expr = linear_sum(cols, coeffs, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars)
    model.minimize(expr.sum() + index.constant * scale)


def decode_choice(result: SolverResult, index: AlpaIndex) -> np.ndarray:
    """Strategy index per node: argmax of each node's ``s`` segment (0 for fixed nodes)."""
    choice = np.zeros(index.graph.num_nodes, dtype=np.int64)
    values = result.values_by_block.get("s")
    if values is None or values.size == 0:
        return choice
    node = index.s_node
    order = np.lexsort((-values, node))
    first = np.concatenate([[True], node[order][1:] != node[order][:-1]])
    best = order[first]
    nodes = node[best]
    choice[nodes] = best - index.s_offset[nodes]
    return choice


def decode_plan(instance: Any, result: SolverResult, index: AlpaIndex) -> ShardingPlan:
    return ShardingPlan(index.graph.plan(decode_choice(result, index)))


#: Alpa's intra-operator ILP over a cost graph (``relax``: its LP relaxation)
ALPA_ILP_SPEC = ModelSpec("alpa_ilp", prepare_alpa, (node_choice_block, edge_product_block, memory_block, objective_block), decode_plan)


def build_sharding_model(graph: CostGraph, *, relax: bool = False, name: str = "alpa_ilp") -> tuple[Model, AlpaIndex]:
    """Assemble the ILP (or its LP relaxation) of a cost graph."""
    return ALPA_ILP_SPEC.build(graph, {"relax": relax}, name=name)


def is_integral(result: SolverResult, tol: float = 1e-6) -> bool:
    values = result.values_by_block.get("s")
    return values is None or bool(np.all(np.minimum(np.abs(values), np.abs(1 - values)) <= tol))


def memory_excess(graph: CostGraph, choice: np.ndarray) -> float:
    """Bytes by which a plan's memory per device exceeds its budget when the evaluator may
    reject it (over ``budget x (1 + MEMORY_TOLERANCE)``, `distplan.models.sharding`, less
    the rounding room of `memory_limits`); 0 when it fits."""
    return excess_bytes(graph.memory_of(choice), graph.memory_budget)


def excess_bytes(memory: float, budget: float) -> float:
    """Bytes by which ``memory`` (per device, as the formulations sum it) exceeds
    ``budget`` when the evaluator may reject it (over `memory_limits`' plan limit); 0 when
    it fits."""
    return memory - budget if memory > memory_limits(budget)[0] else 0.0


#: the key of `solve_graph`'s info under which the record of the solver call that proved
#: its ``bound_seconds`` travels to the caller (popped there: a record is not JSON); review
#: rev16: unlinked, verify tied the bound to the call with the largest bound, the last
#: solve at the budget itself, whose bound is not kept, and an honest result failed
BOUND_RECORD = "_bound_record"
#: the bound's source when every op has a single strategy: the one plan's cost, summed
#: here, less a rounding margin (no solver call)
SINGLE_PLAN_SOURCE = "{name}: the one plan's cost (every op has a single strategy), less a rounding margin"

def single_plan_premise(instance: ShardingInstance, entry: Mapping[str, Any], calls: Sequence[Any]) -> str | None:
    """The premise of `SINGLE_PLAN_SOURCE` (`registry.Premise`): every op of ``instance``
    has a single strategy (every node of its cost graph one choice: the program has no
    variable, `solve_graph`), so the one plan is optimal and its cost a bound. None when it
    holds, else the first op with several strategies (the bound, of an instance with more
    than one plan, is no bound)."""
    graph = build_cost_graph(instance)
    counts = graph.strategy_counts()
    several = np.flatnonzero(counts > 1)
    if several.size == 0:
        return None
    node = int(several[0])
    op = instance.ops[graph.node_ops[node][0]].name
    return f"op {op!r} has {int(counts[node])} strategies ({several.size} of the {graph.num_nodes} nodes of its cost graph have several)"


def solve_graph(graph: CostGraph, ctx: RunContext, *, lp_first: bool, build_seconds: float, name: str) -> tuple[SolverResult | None, np.ndarray | None, dict[str, Any]]:
    """Solve the ILP of a cost graph (optionally its LP relaxation first). Returns the
    deciding solver result, the strategy index per node (None without a solution) and
    information (LP relaxation objective and integrality, bounds in seconds).

    A solver satisfies the memory row only within its feasibility tolerance, ~1 kB on the
    row in GiB, so its plan can exceed the budget by a few hundred bytes, which the
    evaluator rejects. Such a plan is solved again, once, with the row in ten-thousandths
    of the budget (`memory_row_scale`: the tolerance becomes 1e-10 of it). Both rows
    are at the most memory any plan the evaluator accepts holds (`memory_limits`), so
    both dual bounds hold for every such plan (within the solvers' tolerances: the same
    program, the row scaled), and the larger is kept. Should the fine row's plan still be
    over, a last solve has its row at the budget itself: its plan decides, its bound
    (of plans within the budget only) is not kept. A re-solve that finds no plan (time
    out) decides nothing: the plan before it is returned, and the evaluator names its
    excess."""
    if ctx.options.mip_gap is None:
        ctx.options = ctx.options.with_(mip_gap=DEFAULT_MIP_GAP)
    info: dict[str, Any] = {}
    if lp_first:
        t0 = time.perf_counter()
        lp, lp_index = build_sharding_model(graph, relax=True, name=name + "_lp")
        res = ctx.solve_model(lp, build_seconds=time.perf_counter() - t0 + build_seconds)
        build_seconds = 0.0
        if res.termination is Termination.OPTIMAL and res.objective is not None:
            integral = is_integral(res)
            info["lp_relaxation"] = {"objective": res.objective / lp_index.objective_scale, "integral": integral}
            if res.bound is not None:  # the LP's proven bound, not its primal value; rounded down
                info["bound_seconds"] = math.nextafter(dual_bound_seconds(res.bound, graph.instance, res.extra.get("model", {})), -math.inf)
                info[BOUND_RECORD] = res
            if integral:
                choice = decode_choice(res, lp_index)
                if not memory_excess(graph, choice):  # (else the ILP below, re-solved if it must)
                    info["objective_seconds"] = res.objective / lp_index.objective_scale
                    info["optimal"] = True
                    return res, choice, info
    fine = memory_row_scale(graph.memory_budget)
    # (row units per byte, row limit in bytes): the rows at the proof limit (None) give
    # bounds that hold for every plan the evaluator accepts; the last, at the budget
    # itself, only a plan (its tolerance, 1e-10 of the budget, leaves it accepted) when
    # the fine row's plan still used the solver's tolerance beyond what is accepted
    passes: list[tuple[float, float | None]] = [(MEMORY_SCALE, None)] + ([(fine, None)] if fine != MEMORY_SCALE else []) + [(fine, graph.memory_budget)]
    kept: tuple[SolverResult, np.ndarray] | None = None  # the plan of the first solve
    proves = True
    for scale, limit in passes:
        t0 = time.perf_counter()
        try:
            model, index = ALPA_ILP_SPEC.build(graph, {"memory_scale": scale, "memory_limit": limit, "deadline": ctx.deadline}, name=name)
        except DeadlineReached as exc:  # (a model of 40,965 ops takes 6 s to build)
            info["stopped"] = str(exc)
            if kept is None:
                return None, None, info
            res, choice = kept
            break
        if model.num_vars == 0:  # every op has a single strategy: nothing to decide
            value = float(index.constant)
            # the one plan is optimal; its cost summed here in another order than the
            # evaluator's can be an ulp above the evaluator's (review rev10): the bound is
            # lowered by a rounding margin far above a sum's error (n u, n < 1e7)
            info.update(objective_seconds=value, bound_seconds=value - abs(value) * SUM_ROUNDING_MARGIN, optimal=True, single_plan=True)
            return None, np.zeros(graph.num_nodes, dtype=np.int64), info
        res = ctx.solve_model(model, build_seconds=time.perf_counter() - t0 + build_seconds)
        build_seconds = 0.0
        if res.bound is not None and limit is None:
            value = math.nextafter(dual_bound_seconds(res.bound, graph.instance, res.extra.get("model", {})), -math.inf)
            if value > info.get("bound_seconds", -np.inf):
                info["bound_seconds"], info[BOUND_RECORD] = value, res
        if not res.has_solution:
            if kept is None:
                return res, None, info
            res, choice = kept
            break
        choice = decode_choice(res, index)
        if kept is not None:
            info["memory_row_resolved"] = True
        kept = (res, choice)
        proves = limit is None
        if not memory_excess(graph, choice):
            break
    info["objective_seconds"] = res.objective / index.objective_scale if res.objective is not None else None
    info["optimal"] = proves and res.termination is Termination.OPTIMAL and not memory_excess(graph, choice)
    return res, choice, info


def folded_expert_if_better(folded: FoldedSharding, plan: ShardingPlan | None, info: dict[str, Any]) -> ShardingPlan | None:
    """`expert_if_better` for a run on a folded instance: the incumbent (a plan of the
    representatives) is unfolded and compared with the expert plans on the original
    instance. An expert plan is returned, as a plan of the representatives, only when
    unfolding it gives it back (its copies of every folded region agree, as they do for
    Megatron-LM and data parallelism on repeated layers); otherwise the incumbent stays."""
    full = folded.unfold(plan) if plan is not None else None
    trial: dict[str, Any] = {}
    chosen = expert_if_better(folded.original, full, trial, "alpa_ilp")
    if chosen is None or chosen is full:
        info.update(trial)
        return plan
    names = {name for ops in folded.graph.node_ops for name in (folded.graph.instance.ops[k].name for k in ops)}
    restricted = ShardingPlan({name: chosen.strategies[name] for name in names})
    if folded.unfold(restricted).strategies != chosen.strategies:
        if plan is not None:
            info["incumbent"] = "alpa_ilp"
        return plan
    info.update(trial)
    return restricted


def run_alpa_ilp(instance: ShardingInstance | FoldedSharding, ctx: RunContext) -> Outcome:
    t0 = time.perf_counter()
    graph = graph_of(instance)
    graph_seconds = time.perf_counter() - t0
    # (a folded instance's models are named apart: their objective scale is not the
    # instance's own program's, `dual_bound_seconds`, and their bounds do not hold for it)
    name = "alpa_ilp_folded" if isinstance(instance, FoldedSharding) else "alpa_ilp"
    res, choice, info = solve_graph(graph, ctx, lp_first=bool(ctx.param("lp_first", False)), build_seconds=graph_seconds, name=name)
    info["cost_graph_seconds"] = graph_seconds
    info["cost_graph"] = {"nodes": graph.num_nodes, "edges": len(graph.edge_cost), "strategies": int(graph.strategy_counts().sum())}
    record = info.pop(BOUND_RECORD, None)
    if info.get("single_plan"):
        bounds = [Bound(info["bound_seconds"], SINGLE_PLAN_SOURCE.format(name="alpa_ilp"))]
    else:
        bounds = [Bound(info["bound_seconds"], f"alpa_ilp dual bound ({ctx.backend.name})", solver_record=record)] if "bound_seconds" in info else []
    plan = ShardingPlan(graph.plan(choice)) if choice is not None else None
    if not info.get("optimal") and (res is None or res.termination not in INFEASIBLE_TERMINATIONS):
        if isinstance(instance, FoldedSharding):
            plan = folded_expert_if_better(instance, plan, info)
        else:
            plan = expert_if_better(instance, plan, info, "alpa_ilp")
    stopped = Termination.TIME_LIMIT if "stopped" in info else None  # (the build ran out of time)
    if plan is None:
        return Outcome(plan=None, bounds=bounds, solver_results=list(ctx.solver_results), info=info, termination=stopped)
    return Outcome(
        plan=plan,
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=info.get("objective_seconds"),
        proven_optimal=bool(info.get("optimal")),
        info=info,
        termination=stopped,
    )


ALPA_ILP = Formulation(
    kind="sharding",
    name="alpa_ilp",
    solves=("alpa_ilp", "alpa_ilp_lp", "alpa_ilp_folded", "alpa_ilp_folded_lp"),
    description="Alpa's intra-op sharding ILP: one-hot strategy per op, linearized edge products, memory row",
    program="milp",
    run=run_alpa_ilp,
    exact=True,
    reference=REFERENCE,
    spec=ALPA_ILP_SPEC,
    # (without a limit Alpa's ILP on Llama-3 70B over an 8x8 mesh ran past 400 s and
    # 2.4 GB, review rev16; at 60 s it stops with a 0.95% gap, its incumbent and bound)
    policy=Policy(default_time_limit=time_limit_parameter),
    params={"lp_first": False, "default_time_limit": 60.0},
    above={"default_time_limit": 0.0},
)
