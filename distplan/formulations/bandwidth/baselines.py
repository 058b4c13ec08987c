"""Baselines: equal bandwidth per dimension, and bandwidth proportional to traffic.

Both are weighted max-min fair allocations under the instance's constraints, found by
progressive filling (Bertsekas & Gallager, "Data Networks", sec. 6.5.2) with LPs: raise
t with B_d >= t * weight_d for all unfixed dimensions; dimensions that cannot exceed
t* * weight_d are fixed there; repeat. Under a plain total-bandwidth constraint this is
exactly B_d = W / D (``equal_bw``, LIBRA's comparison point) or B_d proportional to the
bytes dimension d carries (``proportional_to_traffic``); under other constraints it is
the most equal (most proportional) allocation they allow. Dimensions of weight 0 then get
the smallest bandwidth the constraints allow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.bandwidth.blocks import linear_bounds, optimize_linear
from distplan.formulations.bandwidth.convex import emit_warnings, no_solution, reject_menus
from distplan.formulations.bandwidth.data import Program, prepare, unbounded_error
from distplan.formulations.bandwidth.diagnose import raise_if_infeasible
from distplan.formulations.bandwidth.rows import BandwidthIndex, bandwidth_block, rows_block
from distplan.formulations.contract import ModelSpec
from distplan.formulations.registry import Outcome, RunContext
from distplan.modeling.model import Model
from distplan.models.bandwidth_eval import evaluate
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.solvers.result import Termination

_REL = 1e-9


@dataclass(frozen=True)
class FillIndex(BandwidthIndex):
    """Water filling: the ``free`` dimensions rise together, B_d >= t * weights_d."""

    free: np.ndarray
    weights: np.ndarray


def prepare_fill(prog: Program, params: Mapping[str, Any]) -> FillIndex:
    """``weights`` per dimension, ``free`` dimensions, ``fixed`` {dimension: GB/s}."""
    lb, ub = linear_bounds(prog, params.get("fixed"), None)
    return FillIndex(lb, ub, tuple(prog.rows), np.asarray(params["free"], dtype=np.int64), np.asarray(params["weights"], dtype=float))


def fill_level(model: Model, prog: Program, index: FillIndex) -> None:
    """max t s.t. B_d >= t * w_d for the free dimensions (t in GB/s per unit weight)."""
    B = model["bandwidth"]
    t = model.add_vars("level", 1, lb=0.0)
    model.add_constraints("fill", B[index.free] - t.expr() * index.weights[index.free] >= 0.0)
    model.maximize(t.sum())


#: one level of weighted max-min fair filling
FILL_LEVEL = ModelSpec("fill-level", prepare_fill, (bandwidth_block, rows_block, fill_level))


def _fill_level(ctx: RunContext, prog: Program, weights: np.ndarray, free: list[int], fixed: dict[int, float]) -> tuple[float | None, np.ndarray | None]:
    """max t s.t. B_d >= t * w_d (d free), fixed dimensions pinned, instance rows."""
    model, _ = FILL_LEVEL.build(prog, {"weights": weights, "free": free, "fixed": fixed})
    result = ctx.solve_model(model)
    if result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED) and result.status.value == "none":
        raise unbounded_error(prog, free)
    if not result.has_solution:
        no_solution(ctx, prog, result, "max-min fair baseline")
        return None, None
    return float(result.values_by_block["level"][0]), np.asarray(result.values_by_block["bandwidth"], dtype=float)


def fair_allocation(ctx: RunContext, prog: Program, weights: np.ndarray) -> np.ndarray | None:
    """Weighted max-min fair bandwidths (GB/s) under the instance constraints."""
    fixed: dict[int, float] = {}
    active = [k for k in range(prog.num_dims) if weights[k] > 0]
    last: np.ndarray | None = None
    while len(fixed) < len(active):
        free = [k for k in active if k not in fixed]
        level, last = _fill_level(ctx, prog, weights, free, fixed)
        if level is None or last is None:
            return None
        floor = np.full(prog.num_dims, np.nan)
        floor[free] = level * weights[free]
        newly: list[int] = []
        for k in free:
            e = np.zeros(prog.num_dims)
            e[k] = 1.0
            result, b = optimize_linear(ctx, prog, e, "max", fixed=fixed, at_least=floor, name=f"fill-room-{prog.dims[k]}")
            unbounded = result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED)
            if not unbounded and b is not None and b[k] <= floor[k] * (1 + _REL) + _REL:
                newly.append(k)
        if not newly:  # numerical stalemate: keep the LP's allocation for the rest
            newly = free
            for k in newly:
                fixed[k] = float(last[k])
            break
        for k in newly:
            fixed[k] = float(level * weights[k])
    zero = [k for k in range(prog.num_dims) if weights[k] <= 0]
    if zero or last is None:
        objective = np.zeros(prog.num_dims)
        objective[zero] = 1.0
        result, b = optimize_linear(ctx, prog, objective, "min", fixed=fixed, name="fill-rest")
        if b is None:
            no_solution(ctx, prog, result, "max-min fair baseline")
            return None
        return b
    out = np.array([fixed.get(k, float(last[k])) for k in range(prog.num_dims)])
    return out


def _run(inst: BandwidthInstance, ctx: RunContext, proportional: bool) -> Outcome:
    prog = prepare(inst)
    name = "proportional_to_traffic" if proportional else "equal_bw"
    reject_menus(prog, name)
    emit_warnings(prog)
    if proportional:
        weights = prog.weights @ prog.terms if prog.terms.size else np.zeros(prog.num_dims)
        weights = weights / weights.max() if weights.size and weights.max() > 0 else weights
    else:
        weights = np.ones(prog.num_dims)
    B = fair_allocation(ctx, prog, weights)
    if B is None:
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    plan = prog.to_plan(B, "time")
    if not evaluate(inst, plan).feasible:
        # the fill LPs hold the rows only to the solver's tolerance: a conflict smaller
        # than it (dim <= -5 bytes/s) passes them; named as libra_perf names it
        raise_if_infeasible(ctx, prog, name)
    return Outcome(
        plan=plan,
        solver_results=list(ctx.solver_results),
        info={"weights": dict(zip(prog.dims, weights.tolist(), strict=True)), "warnings": list(prog.warnings)},
    )


def run_equal_bw(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """Equal bandwidth on every dimension (max-min fair under the constraints)."""
    return _run(inst, ctx, proportional=False)


def run_proportional(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """Bandwidth proportional to the bytes each dimension carries (weighted max-min fair)."""
    return _run(inst, ctx, proportional=True)
