"""TAG's sufficient-factor-broadcasting selection: the iteration-time MILP, TAG's own cost
program, and that program as a minimum s-t cut.

Zhang et al., "Expediting Distributed DNN Training with Device Topology-Aware Graph
Deployment", arXiv 2302.06126 (code ylxdzsw/tag, ``search/sfb.jl``); sufficient factors:
Xie et al. 2016, Poseidon (Zhang et al., USENIX ATC 2017).

**tag_sfb** (``objective="iteration"``, the default) chooses the duplicated ops (gradients of
duplicated producers travel as sufficient factors, the others by ring all-reduce, the channel
in release order: TAG's plans) that minimize the iteration time the compression evaluator
computes (`distplan.models.compression_eval.evaluate`). With the channel order fixed the
evaluator's simulation is a max-plus recursion, so its least schedule is the optimum of
linear rows without big-M (seconds, divided by ``unit``), per device class k (devices of one
type hosting the same ops) and gradient g in release order (g-1 its predecessor):

    f_gk = C_k(p_g) - sum_{eligible j <= p_g on k} t_jk x_j          release (chained rows)
    c_g >= f_gk,  c_g >= c_{g-1} + tau_{g-1}                         channel, one at a time
    u_gk >= c_g + tau_g,  u_gk >= u_{g-1,k} + w_{g-1,k},  u_gk >= End_k     sync stream
    T >= u_{last,k} + w_{last,k},  T >= End_k = stream_k - sum_{eligible j on k} t_jk x_j
    tau_g = a_g (1 - x_{p_g}) + sum_{e = (i -> j) into g's tree} c_e b_e,   b_e >= x_j - x_i
    w_gk = update_gk + sum_{j in g's tree on k} M_j t_jk x_j,   x_i <= x_consumer(i)

    min T

(``a_g`` the ring all-reduce of g, ``c_e`` the all-gather of tensor e, ``M_j`` replicas, all
in seconds.) For fixed x the least T is the evaluator's iteration time, so an optimal solve is
the best TAG plan; its dual bound holds over TAG's plans (not over the instance, where codecs
and other channel orders may do better) and is reported in ``info["tag_space"]``.

**TAG's cost program** (``objective="tag_cost"``; ``tag_sfb_maxflow``) sums costs instead:

    min  sum_i (M_i-1) T_i x_i + sum_e c_e b_e - sum_g a_g x_{p(g)} + alpha sum_i x_i
    s.t. b_e >= x_j - x_i   for every edge e = (i -> j) into an eligible op j
         x_i = 0            for ineligible ops

The constraint matrix is an edge-node incidence matrix next to an identity, so it is
totally unimodular and the LP relaxation is integral; the same program is a project
selection problem, solved exactly by one minimum cut. When memory limits can bind, rows
``base + sum (M_i-1) mem_i x_i + sum (M-1) S_e b_e <= capacity`` are added (only then) and
the program is no longer a pure cut. Its optimum is not the least iteration time: it ignores
the overlap of communication with the backward pass and where redundant compute lands.
``tag_sfb_maxflow`` therefore solves it for several prices of redundant compute (TAG's
price 1 among them) and keeps the cut whose plan the evaluator's schedule times best.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from distplan.errors import InputError
from distplan.formulations.compression.baselines import without_gradients
from distplan.formulations.compression.costs import (
    CostData,
    cost_data,
    memory_can_bind,
    memory_terms,
    prune_dangling,
    tag_objective,
)
from distplan.formulations.compression.schedule import Choice, SelectIndex, least_schedule, select_index
from distplan.formulations.contract import ContractError, ModelSpec
from distplan.formulations.deadline import made_in_time, past
from distplan.formulations.registry import Outcome, RunContext
from distplan.modeling.model import Model, linear_sum
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan, make_plan
from distplan.solvers.result import LIMIT_TERMINATIONS, SolverResult, Termination

#: seconds charged per duplicated op in TAG's cost program: TAG's tie-break (alpha = 1 in
#: its code units); one kernel launch here. It makes the minimal duplicated set the unique optimum.
DEFAULT_ALPHA = 1e-6
#: TAG's objective (``tag_cost``) or the evaluator's iteration time (``iteration``)
OBJECTIVES = ("iteration", "tag_cost")
#: prices of redundant compute (TAG's is 1) at which ``tag_sfb_maxflow`` cuts
CUT_PRICES = (0.0, 0.125, 0.25, 0.5, 1.0, 2.0)


@dataclass(frozen=True)
class TagIndex:
    """What the blocks of TAG's programs share (block contract: `distplan.formulations.contract`)."""

    cd: CostData
    #: False: the LP relaxation (x continuous)
    integral: bool
    #: seconds charged per duplicated op in the cost program
    alpha: float
    #: the iteration program's index arrays (time unit, horizon); None in the cost program
    si: SelectIndex | None


def prepare_tag_cost(inst: CompressionInstance, params: Mapping[str, Any]) -> TagIndex:
    """TAG's cost program: cost arrays; ``alpha`` (s); ``_relax`` for the LP relaxation."""
    return TagIndex(cost_data(inst), not params.get("_relax", False), float(params.get("alpha", DEFAULT_ALPHA)), None)


def prepare_tag_iteration(inst: CompressionInstance, params: Mapping[str, Any]) -> TagIndex:
    """The iteration program: cost arrays and the schedule's index arrays, with ``_upper`` (s),
    an iteration time some TAG plan reaches, as the time unit and horizon."""
    cd = cost_data(inst)
    return TagIndex(cd, not params.get("_relax", False), float(params.get("alpha", DEFAULT_ALPHA)), select_index(inst, cd, params.get("_upper")))


def _schedule_index(index: TagIndex) -> SelectIndex:
    if index.si is None:
        raise ContractError("the schedule block needs prepare_tag_iteration's index")
    return index.si


def tag_duplicate(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """x_i in {0,1}: op i is duplicated on every replica; ineligible ops fixed to 0."""
    cd = index.cd
    model.add_vars("duplicate", cd.n_ops, lb=0.0, ub=cd.eligible.astype(float), vtype="binary" if index.integral else "continuous")


def tag_broadcast(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """b_e >= x_j - x_i for every edge e = (i -> j) into an eligible op (other edges have
    x_j = 0 and b_e = 0 at every optimum, so they get no variable). b is continuous: every
    b_e has a nonnegative price, so it takes its least value max(0, x_j - x_i), integral
    when x is."""
    cd = index.cd
    x = model["duplicate"]
    n = cd.cand_edges.size
    b = model.add_vars("broadcast", n, lb=0.0, ub=1.0)
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


def tag_closure(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """x_i <= x_consumer(i): a duplicated op feeds a duplicated op (or the update of the
    gradient it produces, its only consumer then); eligible ops in no gradient's tree stay 0."""
    cd = index.cd
    x = model["duplicate"]
    elig = np.flatnonzero(cd.eligible)
    dead = elig[inst.tree[elig] < 0]
    if dead.size:
        model.set_bounds(x[dead], ub=0.0)
    cons = inst.consumer[elig]
    inner = elig[(cons >= 0) & cd.eligible[np.maximum(cons, 0)]]
    if inner.size:
        m = inner.size
        r = np.arange(m)
        expr = linear_sum(
            np.concatenate([x.index[inner], x.index[inst.consumer[inner]]]),
            np.concatenate([np.ones(m), -np.ones(m)]),
            np.concatenate([r, r]),
            m,
            model.num_vars,
        )
        model.add_constraints("duplicate-closure", expr <= 0.0)


def tag_memory(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """Memory per device, added only for devices where duplicating everything could overflow
    (rows scaled by the capacity, bytes / bytes)."""
    bind = memory_can_bind(inst)
    if not bind.any():
        return
    cd = index.cd
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


#: TAG's cost program is built in microseconds: the terms are 1e-6..1e-3 s, below the
#: solvers' absolute optimality tolerances (1e-7) in seconds
OBJECTIVE_SCALE = 1e6


def tag_objective_block(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """min redundant compute + broadcasts - all-reduce avoided + alpha per duplicated op
    (microseconds: ``OBJECTIVE_SCALE``)."""
    cd = index.cd
    alpha = index.alpha
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


def _class_pairs(cd: CostData, si: SelectIndex, k: int) -> np.ndarray:
    """The (gradient, class k) pairs in release order."""
    pk = np.flatnonzero(si.pair_k == k)
    pos = np.empty(cd.n_gradients, dtype=np.int64)
    pos[si.rank] = np.arange(cd.n_gradients)
    return pk[np.argsort(pos[si.pair_g[pk]], kind="stable")]


def tag_schedule(model: Model, inst: CompressionInstance, index: TagIndex) -> None:
    """The evaluator's schedule of TAG's plans (channel in release order) as linear rows, and
    min T (see the module docstring). Times in units of ``si.unit`` seconds (an upper bound
    on the optimum when ``_upper`` is given, else a horizon), so values are O(1)."""
    cd = index.cd
    si = _schedule_index(index)
    k_ = 1.0 / si.unit
    x, b = model["duplicate"], model["broadcast"]
    G, P, nk = cd.n_gradients, si.pair_g.size, cd.n_classes
    f = model.add_vars("release", P)
    c = model.add_vars("channel_start", G)
    u = model.add_vars("sync_start", P)
    T = model.add_vars("iteration", 1)
    nv = model.num_vars
    # channel seconds: all-reduce unless the producer is duplicated, plus the broadcasts into the tree
    ar = cd.grad_allreduce_seconds
    gi = np.flatnonzero(cd.eligible[cd.grad_op])
    into = np.flatnonzero(cd.cand_gradient >= 0)
    tau = linear_sum(
        np.concatenate([x.index[cd.grad_op[gi]], b.index[into]]),
        np.concatenate([-ar[gi], cd.cand_seconds[into]]) * k_,
        np.concatenate([gi, cd.cand_gradient[into]]),
        G,
        nv,
    ) + ar * k_
    # sync-stream seconds per pair: update + the duplicated tree on the whole batch
    tree_ops = si.elig[inst.tree[si.elig] >= 0]
    tr, tc, tv = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)], [np.zeros(0)]
    for k in range(nk):
        on_k = tree_ops[cd.class_host[tree_ops, k]]
        rows = si.pair_of[inst.tree[on_k], k]
        keep = rows >= 0
        tr.append(rows[keep])
        tc.append(x.index[on_k[keep]])
        tv.append((inst.replicas[on_k] * cd.class_time[on_k, k])[keep] * k_)
    w = linear_sum(np.concatenate(tc), np.concatenate(tv), np.concatenate(tr), P, nv) + cd.update_seconds[si.pair_g, si.pair_k] * k_
    # per class: chained releases, sync chain, end of backward
    fr, fcol, fval, frhs = [], [], [], []
    row = 0
    firsts, lasts = [], []
    end_rows, end_cols, end_vals = [], [], []
    for k in range(nk):
        on_k = si.elig[cd.class_host[si.elig, k]]
        end_rows.append(np.full(on_k.size, k))
        end_cols.append(x.index[on_k])
        end_vals.append(cd.class_time[on_k, k] * k_)
        pk = _class_pairs(cd, si, k)
        if pk.size == 0:
            continue
        firsts.append(pk[0])
        lasts.append(pk[-1])
        prods = cd.grad_op[si.pair_g[pk]]
        C = si.stream_const[prods, k] * k_
        seg = np.searchsorted(prods, on_k, side="left")  # prods[i-1] < j <= prods[i]
        keep = seg < pk.size
        n = pk.size
        # f_i - f_{i-1} + sum_{j in segment i} t_jk x_j = C_i - C_{i-1}
        fr += [row + np.arange(n), row + np.arange(1, n), row + seg[keep]]
        fcol += [f.index[pk], f.index[pk[:-1]], x.index[on_k[keep]]]
        fval += [np.ones(n), -np.ones(n - 1), cd.class_time[on_k[keep], k] * k_]
        frhs.append(np.diff(C, prepend=0.0))
        row += n
        if n > 1:
            model.add_constraints(f"sync-chain-{k}", u.expr()[pk[1:]] - u.expr()[pk[:-1]] - w[pk[:-1]] >= 0.0)
    rel = linear_sum(np.concatenate(fcol), np.concatenate(fval), np.concatenate(fr), row, nv)
    model.add_constraints("release", rel == np.concatenate(frhs))
    end_sub = linear_sum(np.concatenate(end_cols), np.concatenate(end_vals), np.concatenate(end_rows), nk, nv)
    stream_end = si.stream_end * k_
    model.add_constraints("channel-after-release", c.expr()[si.pair_g] - f.expr() >= 0.0)
    r = si.rank
    if G > 1:
        model.add_constraints("channel-chain", c.expr()[r[1:]] - c.expr()[r[:-1]] - tau[r[:-1]] >= 0.0)
    model.add_constraints("sync-after-channel", u.expr() - c.expr()[si.pair_g] - tau[si.pair_g] >= 0.0)
    if firsts:
        ks = si.pair_k[np.array(firsts)]
        model.add_constraints("sync-after-backward", u.expr()[np.array(firsts)] + end_sub[ks] >= stream_end[ks])
        lst = np.array(lasts)
        model.add_constraints("iteration-after-sync", T.expr()[np.zeros(lst.size, dtype=np.int64)] - u.expr()[lst] - w[lst] >= 0.0)
    model.add_constraints("iteration-after-backward", T.expr()[np.zeros(nk, dtype=np.int64)] + end_sub >= stream_end)
    if G:
        model.add_constraints("iteration-after-channel", T.expr() - c.expr()[r[-1:]] - tau[r[-1:]] >= 0.0)
    model.minimize(T.expr())


def decode(inst: CompressionInstance, result: SolverResult, index: TagIndex) -> CompressionPlan:
    return plan_from_duplicated(inst, result.values_by_block["duplicate"] > 0.5)


#: TAG's cost program (Zhang et al.): redundant compute + broadcasts - all-reduce avoided
TAG_COST = ModelSpec("tag_sfb_cost", prepare_tag_cost, (tag_duplicate, tag_broadcast, tag_memory, tag_objective_block), decode)
#: the evaluator's iteration time over TAG's plans (channel in release order)
TAG_ITERATION = ModelSpec("tag_sfb", prepare_tag_iteration, (tag_duplicate, tag_broadcast, tag_closure, tag_memory, tag_schedule), decode)


def plan_from_duplicated(inst: CompressionInstance, dup: np.ndarray) -> CompressionPlan:
    """TAG's plan: gradients of duplicated producers by sfb, the others by all-reduce."""
    dup = prune_dangling(inst, dup)
    methods = ["sfb" if dup[p] else "allreduce" for p in inst.grad_op.tolist()]
    return make_plan(inst, dup, methods)


def tag_choice(inst: CompressionInstance, dup: np.ndarray) -> Choice:
    """TAG's plan of a duplicated set as fixed choices (all-reduce or sfb, release order)."""
    cd = cost_data(inst)
    dup = prune_dangling(inst, dup)
    allreduce = np.full(cd.n_gradients, -1, dtype=np.int64)
    for o, opt in enumerate(cd.options):
        if opt.method == "allreduce":
            allreduce[opt.gradient] = o
    option = np.where(dup[cd.grad_op], -1, allreduce)
    return Choice(dup, option, np.lexsort((np.arange(cd.n_gradients), cd.grad_op)))


def tag_iteration(inst: CompressionInstance, dup: np.ndarray, si: SelectIndex | None = None) -> float:
    """Iteration seconds of TAG's plan of a duplicated set (the evaluator's schedule)."""
    return float(least_schedule(inst, tag_choice(inst, dup), si)["iteration"])


def tag_warm_vector(model: Model, inst: CompressionInstance, index: TagIndex, dup: np.ndarray) -> np.ndarray:
    """A full solution vector of the iteration model for a duplicated set."""
    cd, si = index.cd, _schedule_index(index)
    ch = tag_choice(inst, dup)
    sched = least_schedule(inst, ch, si)
    k_ = 1.0 / si.unit
    sub = np.cumsum(cd.class_time * (ch.dup & cd.eligible)[:, None], axis=0)
    F = si.stream_const - sub
    vals = {
        "duplicate": ch.dup.astype(float),
        "broadcast": sched["broadcast"],
        "release": F[cd.grad_op[si.pair_g], si.pair_k] * k_,
        "channel_start": sched["channel_start"] * k_,
        "sync_start": sched["sync_start"] * k_,
        "iteration": np.array([sched["iteration"] * k_]),
    }
    out = np.zeros(model.num_vars)
    for name, blk in model.var_blocks.items():
        out[blk.start : blk.stop] = np.asarray(vals[name], dtype=float).reshape(-1)
    return out


def _seconds(value: float | None) -> float | None:
    return None if value is None else value / OBJECTIVE_SCALE


def _dup_of(inst: CompressionInstance, plan: CompressionPlan) -> np.ndarray:
    names = set(plan.duplicated)
    return np.array([o.name in names for o in inst.ops], dtype=bool)


def _relaxation_info(res: SolverResult, scale: float) -> dict[str, Any]:
    out: dict[str, Any] = {"termination": res.termination.value, "objective": None if res.objective is None else res.objective * scale}
    if res.values is not None:
        frac = np.abs(res.values - np.round(res.values))
        out["max_fractionality"] = float(frac.max(initial=0.0))
        out["fractional_values"] = int((frac > 1e-6).sum())
    return out


def run_tag_cost(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    """Solve TAG's cost program as a MILP on the context's backend; with ``relaxation`` also
    its LP relaxation, reporting whether it is integral."""
    alpha = float(ctx.param("alpha", DEFAULT_ALPHA))
    params = {"alpha": alpha}
    info: dict[str, Any] = {"objective": "tag_cost"}
    lp = None
    if ctx.param("relaxation", False):
        t0 = time.perf_counter()
        lp_model, _ = TAG_COST.build(inst, {**params, "_relax": True}, name="tag_sfb_lp")
        lp = ctx.solve_model(lp_model, build_seconds=time.perf_counter() - t0)
        info["lp_relaxation"] = _relaxation_info(lp, 1.0 / OBJECTIVE_SCALE)
    t0 = time.perf_counter()
    model, index = TAG_COST.build(inst, params, name="tag_sfb")
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
    info["memory_rows"] = int(memory_can_bind(inst).sum())
    if lp is not None and res.objective is not None and lp.objective is not None:
        lp_info = info["lp_relaxation"]
        lp_info["milp_objective"] = info["tag_objective"]
        gap = abs(lp.objective - res.objective)  # microseconds
        lp_info["integral"] = bool(lp_info.get("max_fractionality", 1.0) <= 1e-6 and gap <= 1e-6 + 1e-7 * abs(res.objective))
    if not res.has_solution:
        return Outcome(plan=None, solver_results=list(ctx.solver_results), info=info)
    plan, _ = TAG_COST.decode_result(inst, res, index)
    info["tag_objective_of_plan"] = tag_objective(inst, _dup_of(inst, plan), alpha)
    return Outcome(plan=plan, solver_results=list(ctx.solver_results), info=info, termination=_limit_of(res))


def tag_candidates(inst: CompressionInstance, ctx: RunContext) -> dict[str, np.ndarray]:
    """Duplicated sets of TAG plans known without the iteration MILP: nothing (all-reduce),
    TAG's cost optimum (its minimum cut, or its MILP when memory can bind), Poseidon's rule
    (when it fits in memory) and the sfb part of the greedy baseline; the last two only
    while the run's deadline has not passed (each takes seconds on 46,080 ops: review
    rev30)."""
    from distplan.formulations.compression.baselines import greedy_plan, poseidon_if_fits

    out: dict[str, np.ndarray] = {"allreduce_all": np.zeros(inst.n_ops, dtype=bool)}
    if memory_can_bind(inst).any():
        cost = run_tag_cost(inst, ctx.child({"relaxation": False}))
        ctx.solver_results.extend(cost.solver_results)
        if cost.plan is not None:
            out["tag_cost"] = _dup_of(inst, cost.plan)
    else:
        out["tag_cost"], _, _ = min_cut_duplicated(inst, DEFAULT_ALPHA)
    plans = made_in_time(ctx.deadline, [("sfb_poseidon_rule", lambda: poseidon_if_fits(inst)), ("greedy_by_saving", lambda: greedy_plan(inst))])
    out |= {name: _dup_of(inst, plan) for name, plan in plans.items()}
    return {name: prune_dangling(inst, dup) for name, dup in out.items()}


def run_tag_sfb(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    """TAG's plan of least evaluated iteration time: the iteration MILP warm-started with the
    best known TAG plan (``objective="iteration"``), or TAG's cost program (``"tag_cost"``)."""
    inst.check_base_memory()
    trivial = without_gradients(inst)
    if trivial is not None:
        return trivial
    objective = ctx.param("objective", "iteration")  # one of OBJECTIVES (`Formulation.choices`)
    if objective == "tag_cost":
        return run_tag_cost(inst, ctx)
    cands = tag_candidates(inst, ctx)
    sched_si = select_index(inst, cost_data(inst))
    scored = {name: tag_iteration(inst, dup, sched_si) for name, dup in cands.items()}
    start_name = min(scored, key=lambda n: scored[n])
    upper = scored[start_name]
    info: dict[str, Any] = {"objective": "iteration", "candidates": dict(scored), "warm_start": start_name}
    params = {"_upper": max(upper, 1e-12)}
    if ctx.param("relaxation", False):
        t0 = time.perf_counter()
        lp_model, lp_index = TAG_ITERATION.build(inst, {**params, "_relax": True}, name="tag_sfb_lp")
        lp = ctx.solve_model(lp_model, build_seconds=time.perf_counter() - t0)
        info["lp_relaxation"] = _relaxation_info(lp, _schedule_index(lp_index).unit)
    t0 = time.perf_counter()
    model, index = TAG_ITERATION.build(inst, params)
    build = time.perf_counter() - t0
    # no MIP start: HiGHS 1.16 mapped a feasible start to its presolved space with a wrong
    # objective and stopped "optimal" there (vgg16); the solve takes ~0.1 s without one
    saved = ctx.options
    if saved.mip_gap is None:  # prove optimality, not HiGHS's default 0.01 % gap
        ctx.options = saved.with_(mip_gap=0.0)
    try:
        res = ctx.solve_model(model, build_seconds=build)
    finally:
        ctx.options = saved
    unit = _schedule_index(index).unit
    res.extra["time_unit_seconds"] = unit
    if res.objective is not None:
        res.objective *= unit
    if res.bound is not None:
        res.bound *= unit
    info["memory_rows"] = int(memory_can_bind(inst).sum())
    best_name, best_dup, best_seconds = start_name, cands[start_name], upper
    if res.has_solution:
        dup = prune_dangling(inst, res.values_by_block["duplicate"] > 0.5)
        seconds = tag_iteration(inst, dup, index.si)
        info["milp_plan_iteration"] = seconds
        if seconds <= best_seconds:
            best_name, best_dup, best_seconds = "milp", dup, seconds
    info["chosen"] = best_name
    bound = None if res.bound is None else min(res.bound, best_seconds)
    info["tag_space"] = {
        "termination": res.termination.value,
        "objective": best_seconds,
        "bound": bound,
        "gap": None if bound is None else (best_seconds - bound) / max(abs(best_seconds), 1e-300),
        "note": "bound over TAG's plans (all-reduce or sfb, channel in release order), not over the instance",
    }
    info["tag_objective_of_plan"] = tag_objective(inst, best_dup, DEFAULT_ALPHA)
    return Outcome(plan=plan_from_duplicated(inst, best_dup), solver_results=list(ctx.solver_results), claimed_objective=best_seconds, info=info, termination=_limit_of(res))


def _limit_of(res: SolverResult) -> Termination | None:
    """The limit that stopped the MILP (time, nodes, ...): the run's termination, which
    otherwise reads "finished" (tag_sfb is exact over TAG's plans, not the instance's); None
    when the MILP ended by itself (review rev23: a cut MILP's run said "finished")."""
    return res.termination if res.termination in LIMIT_TERMINATIONS else None


# -- the same program as a minimum s-t cut ---------------------------------------------------


def min_cut_duplicated(inst: CompressionInstance, alpha: float, price: float = 1.0) -> tuple[np.ndarray, float, dict[str, Any]]:
    """Solve TAG's program by one minimum cut (networkx preflow-push), redundant compute
    charged at ``price`` times its seconds (TAG: 1).

    Source side = duplicated. A weight w_i x_i becomes an arc i -> t of capacity w_i when
    w_i > 0, or the constant w_i plus an arc s -> i of capacity -w_i when w_i < 0; a term
    c_e max(0, x_j - x_i) becomes an arc j -> i of capacity c_e (cut when j is duplicated and
    i is not); ineligible ops are merged into t. Returns (duplicated mask, objective, stats).
    """
    cd = cost_data(inst)
    if memory_can_bind(inst).any():
        dev = inst.devices[int(np.flatnonzero(memory_can_bind(inst))[0])].name
        raise InputError(
            "formulation",
            f"memory of device {dev} can bind when ops are duplicated; a minimum cut cannot express memory rows",
            "use tag_sfb (the MILP)",
        )
    w = price * cd.dup_seconds + alpha * cd.eligible
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
    """TAG's cost program solved exactly by minimum cuts (no solver backend), one per price of
    redundant compute in ``prices`` (TAG's own price 1 is always among them); the plan is the
    cut whose TAG plan has the least evaluated iteration time (ties: the higher price, fewer
    duplicated ops). ``info["tag_objective"]`` is the optimum of TAG's program (price 1;
    None when the limit stopped the cuts before it). Past the run's deadline no further
    cut starts once one plan is in hand: termination TIME_LIMIT, ``info["stopped"]`` says
    after how many prices (review rev30 D5: 8 s at a 2 s limit on 46,080 ops, "finished")."""
    inst.check_base_memory()
    alpha = float(ctx.param("alpha", DEFAULT_ALPHA))
    prices = sorted({1.0, *(float(p) for p in ctx.param("prices", CUT_PRICES))}, reverse=True)
    if prices[-1] < 0:
        raise InputError("params.prices", f"negative price {prices[-1]}", "give prices >= 0 (seconds of cut cost per second of redundant compute)")
    sched_si = select_index(inst, cost_data(inst))
    best: tuple[float, float, np.ndarray] | None = None
    cuts: dict[str, dict[str, Any]] = {}
    tag_value: float | None = None
    stats: dict[str, Any] = {}
    stopped = None
    for price in prices:
        if best is not None and past(ctx.deadline):
            stopped = f"the time limit stopped the cuts after {len(cuts)} of {len(prices)} prices"
            break
        dup, value, st = min_cut_duplicated(inst, alpha, price)
        dup = prune_dangling(inst, dup)
        seconds = tag_iteration(inst, dup, sched_si)
        cuts[f"{price:g}"] = {"iteration_seconds": seconds, "duplicated_ops": int(dup.sum()), "cut_objective": value}
        if price == 1.0:
            tag_value, stats = value, st
        if best is None or seconds < best[0]:
            best = (seconds, price, dup)
    assert best is not None
    plan = plan_from_duplicated(inst, best[2])
    info: dict[str, Any] = {
        "tag_objective": tag_value,
        "tag_objective_of_plan": tag_objective(inst, _dup_of(inst, plan), alpha),
        "min_cut": stats,
        "price": best[1],
        "cuts": cuts,
    }
    if stopped is not None:
        info["stopped"] = stopped
    return Outcome(plan=plan, claimed_objective=best[0], info=info, termination=None if stopped is None else Termination.TIME_LIMIT)
