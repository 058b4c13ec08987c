"""Weighted max-min fair bandwidth allocations: the baselines' allocation (`baselines`),
and the plans an exact formulation is compared with (`finish`).

They are weighted max-min fair allocations under the instance's constraints, found by
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

from distplan.formulations.bandwidth.blocks import direct_lp, linear_bounds, optimize_linear, solve_direct
from distplan.formulations.bandwidth.data import Program, bandwidth_scale, unbounded_error
from distplan.formulations.bandwidth.diagnose import no_solution, raise_if_infeasible
from distplan.formulations.bandwidth.rows import BandwidthIndex, bandwidth_block, rows_block, solver_rows
from distplan.formulations.contract import ModelSpec
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model
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
    sigma = bandwidth_scale(prog)  # x = B / sigma, so every number the solver sees is O(1)
    return FillIndex(lb / sigma, ub / sigma, solver_rows(prog, sigma), np.asarray(params["free"], dtype=np.int64), np.asarray(params["weights"], dtype=float))


def fill_level(model: Model, prog: Program, index: FillIndex) -> None:
    """max t s.t. B_d >= t * w_d for the free dimensions (t and B in units of sigma GB/s)."""
    B = model["bandwidth"]
    t = model.add_vars("level", 1, lb=0.0)
    model.add_constraints("fill", B[index.free] - t.expr() * index.weights[index.free] >= 0.0)
    model.maximize(t.sum())


#: one level of weighted max-min fair filling
FILL_LEVEL = ModelSpec("fill-level", prepare_fill, (bandwidth_block, rows_block, fill_level))


def _fill_level(ctx: RunContext, prog: Program, weights: np.ndarray, free: list[int], fixed: dict[int, float]) -> tuple[float | None, np.ndarray | None]:
    """max t s.t. B_d >= t * w_d (d free), fixed dimensions pinned, instance rows."""
    if direct_lp(ctx):
        index = prepare_fill(prog, {"weights": weights, "free": free, "fixed": fixed})
        result = solve_direct(ctx, index, np.zeros(0), "max", "fill-level", fill=(index.free, index.weights))
    else:
        model, _ = FILL_LEVEL.build(prog, {"weights": weights, "free": free, "fixed": fixed})
        result = ctx.solve_model(model)
    if result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED):
        # whatever point the solver returns with it (HiGHS: a feasible one, level 0): the
        # level, hence some free dimension's bandwidth, has no maximum
        if result.termination is Termination.INFEASIBLE_OR_UNBOUNDED:
            raise_if_infeasible(ctx, prog, "max-min fair baseline")
        raise _Unbounded
    if not result.has_solution:
        no_solution(ctx, prog, result, "max-min fair baseline")
        return None, None
    sigma = bandwidth_scale(prog)
    return float(result.values_by_block["level"][0]) * sigma, np.asarray(result.values_by_block["bandwidth"], dtype=float) * sigma


class _Unbounded(Exception):
    """The fill level has no maximum: the free dimensions grow without limit together."""


def fair_allocation(ctx: RunContext, prog: Program, weights: np.ndarray) -> np.ndarray | None:
    """Weighted max-min fair bandwidths (GB/s) under the instance constraints.

    When the level has no maximum, the free dimensions without traffic leave the filling
    (they get the least bandwidth allowed, as weight 0 does); free dimensions with traffic
    that grow without limit make the instance unbounded (`InputError`, as for libra_perf)."""
    closed = _closed_form(prog, weights)
    if closed is not None:
        return closed
    weights = np.asarray(weights, dtype=float).copy()
    fixed: dict[int, float] = {}
    active = [k for k in range(prog.num_dims) if weights[k] > 0]
    last: np.ndarray | None = None
    while len(fixed) < len(active):
        free = [k for k in active if k not in fixed]
        try:
            level, last = _fill_level(ctx, prog, weights, free, fixed)
        except _Unbounded:
            idle = [k for k in free if not prog.used[k]]
            if not idle:
                raise unbounded_error(prog, free) from None
            weights[idle] = 0.0
            active = [k for k in active if k not in idle]
            continue
        if level is None or last is None:
            return None
        floor = np.full(prog.num_dims, np.nan)
        floor[free] = level * weights[free]
        newly = _blocked(ctx, prog, free, fixed, floor)
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


def _blocked(ctx: RunContext, prog: Program, free: list[int], fixed: dict[int, float], floor: np.ndarray) -> list[int]:
    """The free dimensions that cannot exceed their floor (GB/s) with every free one at
    least at its own. One LP first maximizes the sum of the free bandwidths: the dimensions
    it raises have room, and when it raises none, none has (any room would raise the sum);
    only the others get an LP each (max B_k)."""
    slack = _REL * bandwidth_scale(prog)  # _REL of a typical bandwidth, so tiny instances are not all "blocked"

    def at_floor(b: np.ndarray, k: int) -> bool:
        return bool(b[k] <= floor[k] * (1 + _REL) + slack)

    e = np.zeros(prog.num_dims)
    e[free] = 1.0
    result, b = optimize_linear(ctx, prog, e, "max", fixed=fixed, at_least=floor, name="fill-room")
    unbounded = result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED)
    unsure = list(free)
    if not unbounded and b is not None:
        unsure = [k for k in free if at_floor(b, k)]
        if len(unsure) == len(free):
            return unsure
    newly: list[int] = []
    for k in unsure:
        e = np.zeros(prog.num_dims)
        e[k] = 1.0
        result, b = optimize_linear(ctx, prog, e, "max", fixed=fixed, at_least=floor, name=f"fill-room-{prog.dims[k]}")
        unbounded = result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED)
        if not unbounded and b is not None and at_floor(b, k):
            newly.append(k)
    return newly


def _closed_form(prog: Program, weights: np.ndarray) -> np.ndarray | None:
    """The fair allocation without LPs when the only row is a total ``sum_d B_d <= W`` (or
    ``== W``), every weight is positive and ``W w_d / sum(w)`` lies within every dimension's
    bounds (then no dimension is held back and the filling ends when the total binds); None
    otherwise."""
    if len(prog.rows) != 1 or not np.all(weights > 0):
        return None
    row = prog.rows[0]
    if row.sense not in ("<=", "==") or not np.all(row.coeffs == row.coeffs[0]) or row.coeffs[0] <= 0 or row.rhs <= 0:
        return None
    B = (row.rhs / row.coeffs[0]) * weights / float(weights.sum())
    if not (np.all(np.isfinite(B)) and np.all(prog.lb <= B) and np.all(prog.ub >= B)):
        return None
    return B


def baseline_weights(prog: Program, proportional: bool) -> np.ndarray:
    """Per dimension: 1 (``equal_bw``) or the bytes it carries over the most any carries."""
    if proportional:
        weights = prog.weights @ prog.terms if prog.terms.size else np.zeros(prog.num_dims)
        return weights / weights.max() if weights.size and weights.max() > 0 else weights
    return np.ones(prog.num_dims)
