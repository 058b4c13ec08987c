"""Helpers shared by the backends that hand solvers ``min sign * c @ x`` (PuLP, Pyomo, SCIP, cvxpy)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from distplan.modeling.model import ModelArrays
from distplan.solvers.result import SolutionStatus, SolverResult, Termination


def objective_sign(arrays: ModelArrays) -> float:
    """-1.0 for maximization (we always hand solvers ``min sign * c @ x``), else 1.0."""
    return -1.0 if arrays.sense == "max" else 1.0


def primal_feasible(arrays: ModelArrays, x: np.ndarray, tol: float = 1e-6) -> bool:
    """True if x satisfies bounds, rows and integrality within an absolute/relative tol."""
    if x.shape != (arrays.num_vars,) or not np.all(np.isfinite(x)):
        return False
    scale_c = tol * np.maximum(1.0, np.abs(x))
    if np.any(x < arrays.col_lo - scale_c) or np.any(x > arrays.col_hi + scale_c):
        return False
    ints = arrays.integrality.astype(bool)
    if np.any(np.abs(x[ints] - np.round(x[ints])) > tol):
        return False
    ax = arrays.A @ x
    scale_r = tol * np.maximum(1.0, np.abs(ax))
    return not (np.any(ax < arrays.row_lo - scale_r) or np.any(ax > arrays.row_hi + scale_r))


#: Feasibility tolerances the backends run with by default (HiGHS ``mip_feasibility_tolerance``
#: and ``primal/dual_feasibility_tolerance``; CBC's integer / primal tolerances and SCIP's
#: ``numerics/feastol`` are the same or tighter): a solver's point and its node LPs are
#: feasible only within these, so a dual bound it proves is valid only within them too.
MILP_FEASIBILITY_TOLERANCE = 1e-6
LP_FEASIBILITY_TOLERANCE = 1e-7
#: The absolute gap (objective units) at which a MIP search counts its tree closed (HiGHS's
#: ``mip_abs_gap`` default; CBC's and SCIP's absolute gaps are smaller): nodes whose bound
#: comes within it of the incumbent are pruned, so the dual bound reported at the end can
#: stand this far above the model's optimum. Review rev31: codec_select's MILP (objective
#: in units of the incumbent, ~1) ended with its dual bound at 1.0 beside a warm start of
#: 0.999999, and the bound, less a margin of 1.001e-6, passed the plan's evaluated time.
MIP_ABSOLUTE_GAP = 1e-6


#: Relative precision of the values a solver hands back, hence of ``c @ x`` of them, which is
#: the bound of a solve that reports no dual bound of its own (an LP, or a completed CBC
#: search: `finish_result`, `pulp_backend.completed_search_bound`): CBC's primal and dual
#: feasibility tolerances (1e-7 by default) apply to its scaled rows and columns, so a value
#: is settled only to about 1e-7 of its magnitude, and CBC's solution file prints 8
#: significant digits (5e-8 of each value). Review rev16 D4: m-SCT's LP on CBC read
#: w = 42579.16 for an optimum of 42579.159898 (1.4e-9 above it, more than the 1e-9 of the
#: bound below), and the run crashed on the bound above the plan's makespan.
VALUE_PRECISION = 1e-7


def solver_bound_margin(arrays: ModelArrays, bound: float, values: np.ndarray | None = None) -> float:
    """How far below a solver's dual bound the reported bound is put (``"solver"`` grade:
    valid within the solver's tolerances; the margin is recorded in the result).

    The solver's node LPs and points are feasible only within its feasibility tolerance
    eps: one coordinate off by eps moves ``c @ x`` by up to ``eps * max|c_j|``; add 1e-9 of
    the value for the rounding of the objective's accumulation. E.g. a makespan objective
    (one cost of 1, seconds) loses 1e-6 s. (Charging every coordinate, ``eps * ||c||_1``,
    cost 3e-4 of the objective on Alpa's ILP for GPT-3 on 64 GPUs: more than the gap the
    solver was asked to close.) A MIP's bound also loses `MIP_ABSOLUTE_GAP`, the gap at
    which its search closes the tree. With the solver's point ``values``, add the precision of
    ``c @ x`` of them, `VALUE_PRECISION` x sum_j |c_j x_j| (1e-7 of a makespan objective):
    a bound taken from the point is known no better than its values. A bound valid in
    exact arithmetic is `safe_bound`'s job.
    """
    eps = MILP_FEASIBILITY_TOLERANCE if arrays.is_mip else LP_FEASIBILITY_TOLERANCE
    largest = float(np.abs(arrays.c).max()) if arrays.c.size else 0.0
    margin = eps * largest + 1e-9 * abs(bound) + (MIP_ABSOLUTE_GAP if arrays.is_mip else 0.0)
    if values is not None and np.shape(values) == (arrays.num_vars,) and arrays.c.size:
        weighted = float(np.abs(arrays.c) @ np.abs(np.asarray(values, dtype=float)))
        if math.isfinite(weighted):
            margin += VALUE_PRECISION * weighted
    return margin


def fill_unmentioned(values: np.ndarray, arrays: ModelArrays) -> np.ndarray:
    """Give variables a modeling layer left out (NaN: no row and no objective term mentions
    them) a value within their bounds: any such value is optimal."""
    out = np.array(values, dtype=float)
    missing = np.isnan(out)
    if missing.any():
        lo, hi = arrays.col_lo[missing], arrays.col_hi[missing]
        out[missing] = np.where(np.isfinite(lo), lo, np.where(np.isfinite(hi), hi, 0.0))
    return out


def finish_result(
    *,
    backend: str,
    version: str,
    arrays: ModelArrays,
    termination: Termination,
    values: np.ndarray | None,
    bound_min: float | None,
    raw_status: str,
    log: str,
    handover_seconds: float,
    solve_seconds: float,
    nodes: int | None = None,
    iterations: int | None = None,
    message: str = "",
    proven_optimal_bound: bool = True,
    extra: dict[str, Any] | None = None,
    bound_from_point: bool = False,
) -> SolverResult:
    """Assemble a SolverResult from a solve of ``min sign * c @ x`` (no offset).

    ``bound_min`` is a proven lower bound of that minimization or None; it is mapped to the
    original sense and offset. The objective is recomputed from the values. When the run
    ended OPTIMAL and ``proven_optimal_bound`` holds (no relative gap was allowed) and no
    explicit bound was given, the optimum itself is the bound. An "unbounded" claim backed
    by an integer-feasible point stays UNBOUNDED; without one it becomes
    INFEASIBLE_OR_UNBOUNDED. ``bound_from_point``: ``bound_min`` was read from the solver's
    point (CBC's completed search, `pulp_backend.completed_search_bound`); such a bound, and
    the optimum taken as the bound, also lose the point's precision (`solver_bound_margin`
    with ``values``), which a solver's own dual bound (HiGHS's mip_dual_bound) does not.
    """
    sign = objective_sign(arrays)
    if values is not None:
        values = np.asarray(values, dtype=float)
        if values.shape != (arrays.num_vars,) or not np.all(np.isfinite(values)):
            values = None
    if termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED):
        # a feasible point plus a dual-infeasible relaxation proves unboundedness; the point
        # is kept (as HiGHS does) as a feasible, not optimal, solution
        feasible_point = values is not None and primal_feasible(arrays, values)
        termination = Termination.UNBOUNDED if feasible_point else Termination.INFEASIBLE_OR_UNBOUNDED
        if not feasible_point:
            values = None
    if termination in (Termination.INFEASIBLE, Termination.ERROR):
        values = None
    objective = float(arrays.c @ values + arrays.offset) if values is not None else None
    bound: float | None = None
    if bound_min is not None and math.isfinite(bound_min) and termination not in (Termination.ERROR, Termination.UNKNOWN):
        bound = sign * float(bound_min) + arrays.offset
    if termination is Termination.OPTIMAL and values is None and arrays.num_vars > 0:
        termination = Termination.UNKNOWN
    if termination is Termination.OPTIMAL and objective is not None:
        if bound is None and proven_optimal_bound:
            bound, bound_from_point = objective, True
        status = SolutionStatus.OPTIMAL
    elif values is not None:
        status = SolutionStatus.FEASIBLE
    else:
        status = SolutionStatus.NONE
    if termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED, Termination.UNBOUNDED):
        bound = None
    extra = dict(extra or {})
    bound = with_margin(arrays, bound, extra, values if bound_from_point else None)
    if bound is not None and objective is not None and (bound < objective if arrays.sense == "max" else bound > objective):
        # the point's objective, c @ x of values read at the solver's printing precision
        # (CBC's solution file: 8 significant digits, 5294535.4 for 5294535.44525662), can
        # pass the proven bound: the bound is put at that objective, below the proven bound
        # and so a bound too, and a call's bound never passes its own objective
        extra["bound_lowered_to_objective"] = bound
        bound = objective
    return SolverResult(
        bound_grade="solver" if bound is not None else None,
        backend=backend,
        backend_version=version,
        termination=termination,
        status=status,
        objective=objective,
        bound=bound,
        handover_seconds=handover_seconds,
        solve_seconds=solve_seconds,
        nodes=nodes,
        iterations=iterations,
        raw_status=raw_status,
        log=log,
        message=message,
        values=values,
        extra=extra,
    )


def with_margin(arrays: ModelArrays, bound: float | None, extra: dict[str, Any], values: np.ndarray | None = None) -> float | None:
    """The solver's bound (original sense) moved by `solver_bound_margin` (with the solver's
    point ``values``, when it has one) to the safe side; the margin is recorded in
    ``extra["bound_margin"]``."""
    if bound is None:
        return None
    margin = solver_bound_margin(arrays, bound, values)
    extra["bound_margin"] = margin
    return bound - margin if arrays.sense != "max" else bound + margin


def error_result(backend: str, version: str, message: str, log: str = "", seconds: float = 0.0) -> SolverResult:
    """A SolverResult for a solver run that failed outright (no solution, no bound)."""
    return SolverResult(
        backend=backend,
        backend_version=version,
        termination=Termination.ERROR,
        status=SolutionStatus.NONE,
        solve_seconds=seconds,
        raw_status="error",
        log=log,
        message=message,
    )


