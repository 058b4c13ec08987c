"""TAG's sufficient-factor-broadcasting selection as a MILP and as a minimum s-t cut.

Zhang et al., "Expediting Distributed DNN Training with Device Topology-Aware Graph
Deployment", arXiv 2302.06126 (code ylxdzsw/tag, ``search/sfb.jl``); sufficient factors:
Xie et al. 2016, Poseidon (Zhang et al., USENIX ATC 2017).

    min  sum_i (M_i-1) T_i x_i + sum_e c_e b_e - sum_g a_g x_{p(g)} + alpha sum_i x_i
    s.t. b_e >= x_j - x_i   for every edge e = (i -> j) into an eligible op j
         x_i = 0            for ineligible ops

(seconds; ``c_e`` the all-gather of tensor e, ``a_g`` the ring all-reduce of gradient g.)
The constraint matrix is an edge-node incidence matrix next to an identity, so it is
totally unimodular and the LP relaxation is integral; the same program is a project
selection problem, solved exactly by one minimum cut. When memory limits can bind, rows
``base + sum (M_i-1) mem_i x_i + sum (M-1) S_e b_e <= capacity`` are added (only then) and
the program is no longer a pure cut.
"""

from __future__ import annotations

import time
from typing import Any

import networkx as nx
import numpy as np

from distplan.errors import InputError
from distplan.formulations.compression.costs import cost_data, memory_can_bind, memory_terms, prune_dangling, tag_objective
from distplan.formulations.model import Model, linear_sum
from distplan.formulations.registry import Outcome, RunContext, build_model
from distplan.models.compression import CompressionInstance, CompressionPlan, make_plan
from distplan.solvers.result import SolverResult

#: seconds charged per duplicated op: TAG's tie-break (alpha = 1 in its code units); one
#: kernel launch here. It makes the minimal duplicated set the unique optimum.
DEFAULT_ALPHA = 1e-6


def _vtype(data: dict[str, Any]) -> Any:
    return "continuous" if data["params"].get("_relax", False) else "binary"


def tag_duplicate(model: Model, inst: CompressionInstance, data: dict[str, Any]) -> None:
    """x_i in {0,1}: op i is duplicated on every replica; ineligible ops fixed to 0."""
    cd = cost_data(inst)
    data["cd"] = cd
    model.add_vars("duplicate", cd.n_ops, lb=0.0, ub=cd.eligible.astype(float), vtype=_vtype(data))


def tag_broadcast(model: Model, inst: CompressionInstance, data: dict[str, Any]) -> None:
    """b_e >= x_j - x_i for every edge e = (i -> j) into an eligible op (other edges have
    x_j = 0 and b_e = 0 at every optimum, so they get no variable)."""
    cd = data["cd"]
    x = model["duplicate"]
    n = cd.cand_edges.size
    b = model.add_vars("broadcast", n, lb=0.0, ub=1.0, vtype=_vtype(data))
    if n == 0:
        return
    rows = np.arange(n)
    expr = linear_sum(
        np.concatenate([b.index, x.index[cd.cand_dst], x.index[cd.cand_src]]),
        np.concatenate([np.ones(n), -np.ones(n), np.ones(n)]),
        np.concatenate([rows, rows, rows]),
        n,
        model.num_vars,
    )
    model.add_constraints("broadcast-closure", expr >= 0.0)


def tag_memory(model: Model, inst: CompressionInstance, data: dict[str, Any]) -> None:
    """Memory per device, added only for devices where duplicating everything could overflow."""
    bind = memory_can_bind(inst)
    data["memory_rows"] = int(bind.sum())
    if not bind.any():
        return
    cd = data["cd"]
    devs = np.flatnonzero(bind)
    dup_bytes, bcast_bytes = memory_terms(inst)
    x, b = model["duplicate"], model["broadcast"]
    A_dup = dup_bytes[devs]
    A_b = bcast_bytes[devs]
    r1, c1 = np.nonzero(A_dup)
    r2, c2 = np.nonzero(A_b)
    expr = linear_sum(
        np.concatenate([x.index[c1], b.index[c2]]),
        np.concatenate([A_dup[r1, c1], A_b[r2, c2]]),
        np.concatenate([r1, r2]),
        devs.size,
        model.num_vars,
    )
    model.add_constraints("memory", expr <= cd.memory_capacity[devs] - cd.memory_base[devs])


#: the objective is built in microseconds: the terms are 1e-6..1e-3 s, below the solvers'
#: absolute optimality tolerances (1e-7) in seconds
OBJECTIVE_SCALE = 1e6


def tag_objective_block(model: Model, inst: CompressionInstance, data: dict[str, Any]) -> None:
    """min redundant compute + broadcasts - all-reduce avoided + alpha per duplicated op
    (microseconds: ``OBJECTIVE_SCALE``)."""
    cd = data["cd"]
    alpha = float(data["params"].get("alpha", DEFAULT_ALPHA))
    x, b = model["duplicate"], model["broadcast"]
    coef = cd.dup_seconds + alpha * cd.eligible
    np.subtract.at(coef, cd.grad_op, cd.grad_allreduce_seconds)
    expr = linear_sum(
        np.concatenate([x.index, b.index]),
        np.concatenate([coef, cd.cand_seconds]) * OBJECTIVE_SCALE,
        np.zeros(cd.n_ops + cd.cand_edges.size, dtype=np.int64),
        1,
        model.num_vars,
    )
    model.minimize(expr)


TAG_BLOCKS = (tag_duplicate, tag_broadcast, tag_memory, tag_objective_block)


def plan_from_duplicated(inst: CompressionInstance, dup: np.ndarray) -> CompressionPlan:
    """TAG's plan: gradients of duplicated producers by sfb, the others by all-reduce."""
    dup = prune_dangling(inst, dup)
    methods = ["sfb" if dup[p] else "allreduce" for p in inst.grad_op.tolist()]
    return make_plan(inst, dup, methods)


def _seconds(value: float | None) -> float | None:
    return None if value is None else value / OBJECTIVE_SCALE


def decode(inst: CompressionInstance, result: SolverResult, data: dict[str, Any]) -> CompressionPlan:
    return plan_from_duplicated(inst, result.values_by_block["duplicate"] > 0.5)


def _params(ctx: RunContext) -> dict[str, Any]:
    return {"alpha": float(ctx.param("alpha", DEFAULT_ALPHA))}


def run_tag_sfb(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    """Solve TAG's program as a MILP on the context's backend; also solve its LP relaxation
    (``relaxation=True``) and report whether it is integral."""
    inst.check_base_memory()
    params = _params(ctx)
    info: dict[str, Any] = {}
    if ctx.param("relaxation", True):
        t0 = time.perf_counter()
        lp_model, _ = build_model("tag_sfb_lp", TAG_BLOCKS, inst, {**params, "_relax": True})
        lp = ctx.solve_model(lp_model, build_seconds=time.perf_counter() - t0)
        info["lp_relaxation"] = {"termination": lp.termination.value, "objective": _seconds(lp.objective)}
        if lp.values is not None:
            frac = np.abs(lp.values - np.round(lp.values))
            info["lp_relaxation"]["max_fractionality"] = float(frac.max(initial=0.0))
            info["lp_relaxation"]["fractional_values"] = int((frac > 1e-6).sum())
    t0 = time.perf_counter()
    model, data = build_model("tag_sfb", TAG_BLOCKS, inst, params)
    build = time.perf_counter() - t0
    saved = ctx.options
    if saved.mip_gap is None:
        ctx.options = saved.with_(mip_gap=0.0)
    try:
        res = ctx.solve_model(model, build_seconds=build)
    finally:
        ctx.options = saved
    info["tag_objective"] = _seconds(res.objective)
    info["tag_bound"] = _seconds(res.bound)
    info["memory_rows"] = data.get("memory_rows", 0)
    if "lp_relaxation" in info and res.objective is not None and info["lp_relaxation"]["objective"] is not None:
        lp_info = info["lp_relaxation"]
        lp_info["milp_objective"] = info["tag_objective"]
        gap = abs(lp.objective - res.objective)  # microseconds
        lp_info["integral"] = bool(lp_info.get("max_fractionality", 1.0) <= 1e-6 and gap <= 1e-6 + 1e-7 * abs(res.objective))
    if not res.has_solution:
        return Outcome(plan=None, solver_results=list(ctx.solver_results), info=info)
    plan = decode(inst, res, data)
    dup = np.array([o.name in set(plan.duplicated) for o in inst.ops])
    info["tag_objective_of_plan"] = tag_objective(inst, dup, params["alpha"])
    return Outcome(plan=plan, solver_results=list(ctx.solver_results), info=info)


# -- the same program as a minimum s-t cut ---------------------------------------------------


def min_cut_duplicated(inst: CompressionInstance, alpha: float) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Solve TAG's program by one minimum cut (networkx preflow-push).

    Source side = duplicated. A weight w_i x_i becomes an arc i -> t of capacity w_i when
    w_i > 0, or the constant w_i plus an arc s -> i of capacity -w_i when w_i < 0; a term
    c_e max(0, x_j - x_i) becomes an arc j -> i of capacity c_e (cut when j is duplicated and
    i is not); ineligible ops are merged into t. Returns (duplicated mask, TAG objective, stats).
    """
    cd = cost_data(inst)
    if memory_can_bind(inst).any():
        dev = inst.devices[int(np.flatnonzero(memory_can_bind(inst))[0])].name
        raise InputError(
            "formulation",
            f"memory of device {dev} can bind when ops are duplicated; a minimum cut cannot express memory rows",
            "use tag_sfb (the MILP)",
        )
    w = cd.dup_seconds + alpha * cd.eligible
    np.subtract.at(w, cd.grad_op, cd.grad_allreduce_seconds)
    graph = nx.DiGraph()
    s, t = "s", "t"
    graph.add_node(s)
    graph.add_node(t)
    elig = np.flatnonzero(cd.eligible)
    constant = 0.0
    for i in elig.tolist():
        wi = float(w[i])
        if wi > 0:
            graph.add_edge(i, t, capacity=wi)
        elif wi < 0:
            constant += wi
            graph.add_edge(s, i, capacity=-wi)
        else:
            graph.add_node(i)
    for src, dst, cap in zip(cd.cand_src.tolist(), cd.cand_dst.tolist(), cd.cand_seconds.tolist()):
        if cap <= 0:
            continue
        tail = src if cd.eligible[src] else t
        if graph.has_edge(dst, tail):
            graph[dst][tail]["capacity"] += cap
        else:
            graph.add_edge(dst, tail, capacity=cap)
    t0 = time.perf_counter()
    cut, (source_side, _) = nx.minimum_cut(graph, s, t, flow_func=nx.algorithms.flow.preflow_push)
    seconds = time.perf_counter() - t0
    dup = np.zeros(inst.n_ops, dtype=bool)
    idx = [v for v in source_side if v != s]
    dup[np.array(idx, dtype=np.int64)] = True
    stats = {"nodes": graph.number_of_nodes(), "arcs": graph.number_of_edges(), "cut_value": float(cut), "constant": constant, "maxflow_seconds": seconds}
    return dup, constant + float(cut), stats


def run_tag_sfb_maxflow(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    """TAG's program solved exactly by a minimum cut (no solver backend)."""
    inst.check_base_memory()
    alpha = float(ctx.param("alpha", DEFAULT_ALPHA))
    dup, value, stats = min_cut_duplicated(inst, alpha)
    plan = plan_from_duplicated(inst, dup)
    pruned = np.array([o.name in set(plan.duplicated) for o in inst.ops])
    info = {"tag_objective": value, "tag_objective_of_plan": tag_objective(inst, pruned, alpha), "min_cut": stats}
    return Outcome(plan=plan, info=info)
