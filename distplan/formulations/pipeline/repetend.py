"""Tessel's repetend search as MILPs (Lin et al., HPCA 2024), in modulo-scheduling form.

A *repetend* holds one instance of every block (``unfold`` instances with ``unfold`` > 1),
drawn from different micro-batches; repeated every ``T`` seconds it forms the steady
state. We write it as a flat schedule of one micro-batch, ``sigma_b`` (seconds), executed
for micro-batch m at ``sigma_b + m T`` (software pipelining / modulo scheduling: Tessel's
micro-batch offset of block b is ``floor(sigma_b / T)``; Hanen & Munier 1995):

* dependencies: ``sigma_v >= sigma_u + d_u + delay``;
* no overlap on a device across period boundaries: for blocks a, b sharing a device, one
  binary per winding number q: ``sigma_b + q T`` lies in ``[sigma_a + d_a, sigma_a + T - d_b]``
  (linear because q is a constant; `blocks.scheduling.modulo_no_overlap`);
* steady-state memory at the start of every allocating block a:
  ``mu_a + sum_b mu_b q_ab <= capacity`` (with ``q_ab`` the winding number of the pair,
  i.e. minus the number of b's instances in flight; every device frees what a
  micro-batch allocates);
* the flat schedule spans at most ``offsets`` periods: ``sigma_b + d_b <= offsets T``;
* minimize T (a second solve, T fixed, minimizes the flat length).

The search never sees N. The repetend is then unrolled to N micro-batches; the warm-up
(the partial periods before the first full repetend) and the cool-down (after the last)
are re-solved as makespan MILPs over their own operations (`milp.OpProblem`) against the
fixed steady state, and the result is compacted to earliest start times.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.blocks.scheduling import modulo_no_overlap, modulo_prefix, precedence_with_lag
from distplan.formulations.model import Model
from distplan.formulations.pipeline.common import (
    OpArcs,
    asap,
    block_depth,
    check_capacity,
    dependency_arcs,
    integral_data,
    orders_from_starts,
    retime,
)
from distplan.formulations.pipeline.milp import OpProblem, solve_op_problem
from distplan.formulations.registry import Outcome, RunContext, build_model
from distplan.models.pipeline import PipelineInstance, make_plan

DEFAULTS: dict[str, Any] = {
    "offsets": None,  # periods one micro-batch may span (None: from the critical path)
    "unfold": 1,  # micro-batches per repetend
    "phase_time_limit": 2.0,  # seconds for each warm-up / cool-down MILP
    "min_flat_length": True,  # second solve: shortest flat schedule at the optimal period
}


@dataclass
class Cyclic:
    """The blocks the repetend is made of (``unfold`` copies of the micro-batch)."""

    inst: PipelineInstance
    unfold: int
    dur: np.ndarray
    mask: np.ndarray
    mem: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    gap: np.ndarray  # duration of src + delay
    block: np.ndarray  # original block of each copy
    copy: np.ndarray  # copy index of each

    @property
    def n(self) -> int:
        return int(self.dur.size)


def cyclic_blocks(inst: PipelineInstance, unfold: int) -> Cyclic:
    nb = inst.n_blocks
    src, dst, lag = inst.edges
    u = np.arange(unfold)
    return Cyclic(
        inst=inst,
        unfold=unfold,
        dur=np.tile(inst.duration, unfold),
        mask=np.tile(inst.device_mask, (unfold, 1)),
        mem=np.tile(inst.memory, unfold),
        src=(u[:, None] * nb + src[None, :]).reshape(-1),
        dst=(u[:, None] * nb + dst[None, :]).reshape(-1),
        gap=np.tile(inst.duration[src] + lag, unfold),
        block=np.tile(np.arange(nb), unfold),
        copy=np.repeat(u, nb),
    )


def _longest(cy: Cyclic) -> np.ndarray:
    """(n, n) longest dependency distance sigma_j - sigma_i >= dist[i, j] (-inf if none)."""
    n = cy.n
    dist = np.full((n, n), -np.inf)
    np.fill_diagonal(dist, 0.0)
    for _ in range(n):
        changed = False
        for a, b, g in zip(cy.src.tolist(), cy.dst.tolist(), cy.gap.tolist()):
            cand = dist[:, a] + g
            better = cand > dist[:, b]
            if better.any():
                dist[better, b] = cand[better]
                changed = True
        if not changed:
            break
    return dist


# -- model blocks ---------------------------------------------------------------------------


def rep_prepare(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Repetend blocks, period bounds, offsets and the candidate winding numbers."""
    params = data["params"]
    unfold = int(params.get("unfold", 1))
    if unfold < 1:
        raise InputError("params.unfold", f"expected a positive integer, got {unfold!r}")
    cy = cyclic_blocks(inst, unfold)
    data["cyclic"] = cy
    capped = np.isfinite(inst.capacity)
    net = inst.memory @ inst.device_mask
    bad = np.flatnonzero(capped & (np.abs(net) > 1e-9 * (1 + np.abs(inst.memory).sum())))
    if bad.size:
        d = int(bad[0])
        raise InputError(
            "blocks", f"{inst.name}: a micro-batch leaves {net[d]:.6g} memory on device {inst.devices[d]}",
            "tessel's steady state needs every device to free what a micro-batch allocates (or no capacity)",
        )
    work = cy.dur @ cy.mask
    t_lb = float(max(work.max(), cy.dur.max()))
    _, _, lag = inst.edges
    t_ub = float(unfold * (inst.duration.sum() + lag.sum()))
    t_ub = max(t_ub, t_lb)
    dist = _longest(cy)
    crit = float(np.max(block_depth(inst) + inst.duration))
    k = params.get("offsets")
    k = int(k) if k is not None else int(min(max(2, math.ceil(crit / t_lb) + 2), 2 * inst.n_blocks + 2))
    if k < 1:
        raise InputError("params.offsets", f"expected a positive integer, got {k!r}")
    # pairs of blocks sharing a device
    n = cy.n
    share = (cy.mask.astype(np.int64) @ cy.mask.T.astype(np.int64)) > 0
    ia, ib = np.nonzero(np.triu(share, 1))
    q_pair: list[int] = []
    q_val: list[int] = []
    for p, (a, b) in enumerate(zip(ia.tolist(), ib.tolist())):
        lo, hi = -k + 1, k
        if math.isfinite(dist[a, b]):  # b after a: sigma_b - sigma_a >= dist > 0
            hi = 0
        if math.isfinite(dist[b, a]):  # a after b
            lo = max(lo, 1)
        for q in range(lo, hi + 1):
            q_pair.append(p)
            q_val.append(q)
    data.update(
        t_lb=t_lb,
        t_ub=t_ub,
        offsets=k,
        dist=dist,
        pair_a=ia,
        pair_b=ib,
        q_pair=np.asarray(q_pair, dtype=np.int64),
        q_val=np.asarray(q_val, dtype=np.int64),
        flat_ub=k * t_ub,
    )
    del n


def rep_variables(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    cy: Cyclic = data["cyclic"]
    data["sigma"] = model.add_vars("sigma", cy.n, lb=0.0, ub=data["flat_ub"])
    data["period"] = model.add_vars("period", 1, lb=data["t_lb"], ub=data.get("t_fix", data["t_ub"]))


def rep_dependencies(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    cy: Cyclic = data["cyclic"]
    sigma = data["sigma"]
    precedence_with_lag(model, sigma, cy.src, cy.dst, cy.gap, "flat-dependencies")
    # the flat schedule spans at most `offsets` periods
    t = data["period"]
    k = data["offsets"]
    model.add_constraints("flat-length", sigma + cy.dur - t[np.zeros(cy.n, dtype=np.int64)] * k <= 0.0)
    # identical copies of the micro-batch keep their order (symmetry)
    if cy.unfold > 1:
        nb = inst.n_blocks
        first = int(inst.topo_order[0])
        idx = np.arange(cy.unfold - 1) * nb + first
        model.add_constraints("copy-order", sigma[idx + nb] - sigma[idx] >= 0.0)


def rep_no_overlap(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    cy: Cyclic = data["cyclic"]
    a, b = data["pair_a"], data["pair_b"]
    qp, qv = data["q_pair"], data["q_val"]
    t_ub, flat = data["t_ub"], data["flat_ub"]
    # |sigma_b - sigma_a| <= flat; |q T| <= |q| t_ub
    big_m = flat + np.abs(qv) * t_ub + t_ub + cy.dur[a[qp]] + cy.dur[b[qp]]
    data["wind"] = modulo_no_overlap(model, data["sigma"], data["period"], a, b, cy.dur[a], cy.dur[b], qp, qv, big_m, "modulo")


def rep_memory(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Steady-state memory at every allocating block: mu_a + sum_b mu_b q_ab <= cap."""
    cy: Cyclic = data["cyclic"]
    a, b = data["pair_a"], data["pair_b"]
    qp, qv = data["q_pair"], data["q_val"]
    cap = inst.capacity
    consts, caps, rows, cols, coefs = [], [], [], [], []
    nrow = 0
    for d in range(inst.n_devices):
        if not math.isfinite(cap[d]):
            continue
        targets = np.flatnonzero(cy.mask[:, d] & (cy.mem > 0))
        for t in targets.tolist():
            # pairs (t, x) stored as (a=t, b=x): q_tx = q; stored as (a=x, b=t): q_tx = 1 - q
            sel_a = (a[qp] == t) & cy.mask[b[qp], d] & (cy.mem[b[qp]] != 0)
            sel_b = (b[qp] == t) & cy.mask[a[qp], d] & (cy.mem[a[qp]] != 0)
            ja = np.flatnonzero(sel_a)
            jb = np.flatnonzero(sel_b)
            cols.append(np.concatenate([ja, jb]))
            coefs.append(np.concatenate([cy.mem[b[qp[ja]]] * qv[ja], cy.mem[a[qp[jb]]] * (1 - qv[jb])]))
            rows.append(np.full(ja.size + jb.size, nrow))
            consts.append(cy.mem[t])
            caps.append(cap[d])
            nrow += 1
    if nrow == 0:
        return
    modulo_prefix(
        model, data["wind"], np.asarray(consts), np.asarray(caps), np.concatenate(rows), np.concatenate(cols), np.concatenate(coefs), "steady-memory"
    )


def rep_objective(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Minimize the period (or, with the period fixed, the flat length)."""
    if data.get("t_fix") is None:
        model.minimize(data["period"])
        return
    cy: Cyclic = data["cyclic"]
    length = model.add_vars("flat-length", (), lb=0.0)
    model.add_constraints("flat-length-epigraph", data["sigma"] + cy.dur - length <= 0.0)
    model.minimize(length)


REPETEND_BLOCKS = (rep_prepare, rep_variables, rep_dependencies, rep_no_overlap, rep_memory, rep_objective)


@dataclass
class Repetend:
    """A solved repetend: flat starts (seconds) of the cyclic blocks and the period."""

    sigma: np.ndarray
    period: float
    period_bound: float | None
    proven: bool
    offsets: int
    unfold: int
    search_seconds: float


def search_repetend(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> Repetend:
    """Minimize the period, then (optionally) the flat length at that period."""
    t0 = time.perf_counter()
    model, data = build_model("tessel-repetend", REPETEND_BLOCKS, inst, params)
    res = ctx.solve_model(model, build_seconds=time.perf_counter() - t0)
    if res.values is None:
        if res.termination.value in ("infeasible", "infeasible_or_unbounded"):
            raise InfeasibleError(
                f"{inst.name}: no repetend with at most {data['offsets']} micro-batch offsets fits the memory capacity",
                details={"offsets": data["offsets"]},
            )
        raise InfeasibleError(f"{inst.name}: the repetend search found no solution ({res.termination.value})", details={})
    period = float(res.values_by_block["period"][0])
    sigma = np.asarray(res.values_by_block["sigma"], dtype=float)
    bound = res.bound
    proven = res.termination.value == "optimal"
    if integral_data(inst):
        period = float(round(period)) if abs(period - round(period)) < 1e-6 else period
        if bound is not None:
            bound = float(math.ceil(bound - 1e-6))
    if params.get("min_flat_length", True):
        fixed = {**params, "_t": period}
        t1 = time.perf_counter()
        m2, d2 = build_model("tessel-flat", (_fix_period, *REPETEND_BLOCKS[1:]), inst, {**fixed, "_base": data})
        warm = m2.vector({"sigma": sigma, "period": [period], "modulo-wind": res.values_by_block["modulo-wind"], "flat-length": float(np.max(sigma + data["cyclic"].dur))})
        r2 = ctx.solve_model(m2, warm_start=warm, build_seconds=time.perf_counter() - t1)
        if r2.values is not None:
            sigma = np.asarray(r2.values_by_block["sigma"], dtype=float)
            period = float(r2.values_by_block["period"][0])
    sigma = sigma - sigma.min()
    return Repetend(sigma, period, bound, proven, int(data["offsets"]), int(data["cyclic"].unfold), time.perf_counter() - t0)


def _fix_period(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    base = data["params"]["_base"]
    for key in ("cyclic", "t_lb", "t_ub", "offsets", "dist", "pair_a", "pair_b", "q_pair", "q_val", "flat_ub"):
        data[key] = base[key]
    t = float(data["params"]["_t"])
    data["t_fix"] = t * (1 + 1e-9) + 1e-9
    data["t_lb"] = min(data["t_lb"], t)


# -- unrolling ------------------------------------------------------------------------------


def naive_unroll(inst: PipelineInstance, rep: Repetend) -> np.ndarray:
    """(B, N) start times: copy u of block b for super-step M runs micro-batch U M + u."""
    nb, n, u = inst.n_blocks, inst.micro_batches, rep.unfold
    start = np.zeros((nb, n))
    for m in range(n):
        big, c = divmod(m, u)
        start[:, m] = rep.sigma[c * nb : (c + 1) * nb] + big * rep.period
    return start


def _phase_problem(
    inst: PipelineInstance, start: np.ndarray, free: np.ndarray, kind: str, horizon_extra: float
) -> tuple[OpProblem, np.ndarray, float]:
    """The MILP of the free operations (warm-up or cool-down) against the fixed rest."""
    n = inst.micro_batches
    ops = np.flatnonzero(free.reshape(-1))
    local = -np.ones(inst.n_blocks * n, dtype=np.int64)
    local[ops] = np.arange(ops.size)
    flat = start.reshape(-1)
    dur_op = np.repeat(inst.duration, n)
    mask_op = np.repeat(inst.device_mask, n, axis=0)
    mem_op = np.repeat(inst.memory, n)
    arcs = dependency_arcs(inst)
    b = np.repeat(np.arange(inst.n_blocks), n - 1)
    m = np.tile(np.arange(n - 1), inst.n_blocks)
    src = np.concatenate([arcs.src, b * n + m])
    dst = np.concatenate([arcs.dst, b * n + m + 1])
    gap = np.concatenate([arcs.gap, inst.duration[b]])
    inside = (local[src] >= 0) & (local[dst] >= 0)
    sub = OpArcs(local[src[inside]], local[dst[inside]], gap[inside])
    fixed_ops = np.flatnonzero(~free.reshape(-1))
    nd = inst.n_devices
    if kind == "warmup":
        # free -> fixed: s_free + gap <= base + shift; device: free ends before the first fixed op
        cross = (local[src] >= 0) & (local[dst] < 0)
        d_ops = [local[src[cross]]]
        d_gap = [gap[cross]]
        d_base = [flat[dst[cross]]]
        for d in range(nd):
            fd = fixed_ops[mask_op[fixed_ops, d]]
            vd = ops[mask_op[ops, d]]
            if fd.size and vd.size:
                d_ops.append(local[vd])
                d_gap.append(dur_op[vd])
                d_base.append(np.full(vd.size, flat[fd].min()))
        base = np.concatenate(d_base)
        horizon = float(base.max())
        prob = OpProblem(
            name=f"{inst.name}-warmup",
            dur=dur_op[ops],
            mask=mask_op[ops],
            mem=mem_op[ops],
            arcs=sub,
            capacity=inst.capacity,
            horizon=horizon,
            objective="shift",
            deadline_ops=np.concatenate(d_ops),
            deadline_gap=np.concatenate(d_gap),
            deadline_base=base,
            integral=False,
            block_of=ops // n,
            block_reach=inst.reach,
        )
        return prob, ops, 0.0
    # cool-down: release times from the fixed part; memory held after it
    release = np.zeros(ops.size)
    cross = (local[src] < 0) & (local[dst] >= 0)
    np.maximum.at(release, local[dst[cross]], flat[src[cross]] + gap[cross])
    init = np.zeros(nd)
    for d in range(nd):
        fd = fixed_ops[mask_op[fixed_ops, d]]
        init[d] = mem_op[fd].sum()
        vd = ops[mask_op[ops, d]]
        if fd.size and vd.size:
            release[local[vd]] = np.maximum(release[local[vd]], (flat[fd] + dur_op[fd]).max())
    t_shift = float(release.min()) if release.size else 0.0
    horizon = float((flat[ops] + dur_op[ops]).max()) - t_shift + horizon_extra
    prob = OpProblem(
        name=f"{inst.name}-cooldown",
        dur=dur_op[ops],
        mask=mask_op[ops],
        mem=mem_op[ops],
        arcs=sub,
        capacity=inst.capacity,
        horizon=horizon,
        objective="makespan",
        release=release - t_shift,
        init_mem=init,
        integral=False,
        block_of=ops // n,
        block_reach=inst.reach,
    )
    return prob, ops, t_shift


def _phase_ctx(ctx: RunContext, limit: float) -> RunContext:
    remaining = ctx.remaining_time()
    lim = limit if remaining is None else max(0.05, min(limit, remaining / 3))
    sub = RunContext(ctx.backend, ctx.options.with_(time_limit=lim, mip_gap=ctx.options.mip_gap), dict(ctx.params))
    sub.solver_results = ctx.solver_results
    return sub


def complete_phases(inst: PipelineInstance, rep: Repetend, ctx: RunContext, limit: float) -> tuple[np.ndarray, dict[str, Any]]:
    """Unroll, then re-solve warm-up and cool-down as MILPs against the steady state."""
    n, nb, u = inst.micro_batches, inst.n_blocks, rep.unfold
    start = naive_unroll(inst, rep)
    info: dict[str, Any] = {}
    # period index of every operation in the naive unroll
    offs = np.floor((rep.sigma + 1e-9 * max(1.0, rep.period)) / rep.period).astype(np.int64)  # per cyclic block
    k_eff = int(offs.max()) + 1
    steps = (n + u - 1) // u
    period_of = np.zeros((nb, n), dtype=np.int64)
    for m in range(n):
        big, c = divmod(m, u)
        period_of[:, m] = big + offs[c * nb : (c + 1) * nb]
    first_full, last_full = k_eff - 1, steps - 1
    if last_full < first_full:
        # no complete repetend: schedule everything as one MILP from the unrolled start
        prob, ops, _ = _whole_problem(inst, start)
        s, res, _ = solve_op_problem(prob, _phase_ctx(ctx, limit), start.reshape(-1))
        if s is not None:
            start = s.reshape(nb, n)
        info["phases"] = "whole"
        return start, info
    warm = period_of < first_full
    if warm.any():
        prob, ops, _ = _phase_problem(inst, start, warm, "warmup", 0.0)
        s, res, _ = solve_op_problem(prob, _phase_ctx(ctx, limit), start.reshape(-1)[ops])
        if s is not None:
            shift = float(np.max(s[prob.deadline_ops] + prob.deadline_gap - prob.deadline_base)) if prob.deadline_ops.size else 0.0
            shift = min(shift, 0.0)
            flat = start.reshape(-1).copy()
            fixed = ~warm.reshape(-1)
            flat[fixed] += shift
            flat[ops] = s
            start = flat.reshape(nb, n)
            info["warmup_shift"] = shift
            info["warmup_termination"] = res.termination.value
    cool = period_of > last_full
    if cool.any():
        prob, ops, t0 = _phase_problem(inst, start, cool, "cooldown", 0.0)
        s, res, _ = solve_op_problem(prob, _phase_ctx(ctx, limit), start.reshape(-1)[ops] - t0)
        if s is not None:
            flat = start.reshape(-1).copy()
            flat[ops] = s + t0
            start = flat.reshape(nb, n)
            info["cooldown_termination"] = res.termination.value
    return start, info


def _whole_problem(inst: PipelineInstance, start: np.ndarray) -> tuple[OpProblem, np.ndarray, float]:
    from distplan.formulations.pipeline.milp import full_problem

    horizon = float((start + inst.duration[:, None]).max())
    prob = full_problem(inst.with_(objective="makespan"), horizon)
    return prob, np.arange(inst.n_blocks * inst.micro_batches), 0.0


def run_tessel(inst: PipelineInstance, ctx: RunContext) -> Outcome:
    """Search the repetend (independent of N), unroll it, complete warm-up and cool-down."""
    check_capacity(inst)
    params = {**DEFAULTS, **ctx.params}
    rep = search_repetend(inst, ctx, params)
    start, info = complete_phases(inst, rep, ctx, float(params["phase_time_limit"]))
    # exact times: keep the device orders, retime (earliest starts / span LP)
    orders = orders_from_starts(inst, start)
    exact = retime(inst, orders, ctx)
    naive = asap(inst, orders_from_starts(inst, naive_unroll(inst, rep)))
    if _objective(inst, naive) < _objective(inst, exact) - 1e-9:
        exact = naive
        info["phases"] = "naive unroll kept"
    exact = exact - exact.min()
    plan_info = {
        "schedule": "tessel",
        "period": rep.period,
        "period_bound": rep.period_bound,
        "period_proven_optimal": rep.proven,
        "offsets": int(np.floor((rep.sigma + 1e-9) / rep.period).max()) + 1,
        "unfold": rep.unfold,
        "repetend_search_seconds": rep.search_seconds,
        **info,
    }
    plan = make_plan(inst, exact, plan_info)
    return Outcome(plan=plan, solver_results=list(ctx.solver_results), info=plan_info)


def _objective(inst: PipelineInstance, start: np.ndarray) -> float:
    end = start + inst.duration[:, None]
    if inst.objective == "makespan":
        return float(end.max() - start.min())
    spans = [float(end[inst.device_mask[:, d]].max() - start[inst.device_mask[:, d]].min()) for d in range(inst.n_devices) if inst.device_mask[:, d].any()]
    return max(spans)

