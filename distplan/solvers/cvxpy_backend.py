"""cvxpy backends: ``cvxpy-<SOLVER>`` for the solvers cvxpy drives.

Each backend takes

* an assembled model (`ModelArrays`, LP or MILP): it becomes ``x = cp.Variable(n,
  integer=...)`` with variable bounds and the CSR rows split into ``==``, ``<=`` and ``>=``
  blocks (``solve_fn``);
* a cvxpy ``Problem`` built by a formulation (convex programs, ``solve_convex_fn``).

Both go through cvxpy's documented three-step path (``get_problem_data`` ->
``chain.solve_via_data`` -> ``unpack``), which separates canonicalization time (reported
as hand-over seconds) from solver time and keeps the raw solver output, so the duality
gap can be read where the solver reports it (Clarabel ``obj_val_dual``, SCS ``dobj``,
ECOS ``dcost``, HiGHS / SciPy / SCIP MIP dual bounds). ``bound`` is that dual objective
carried back to the original objective, or None when the solver does not report one.
Parametrized (DPP) problems keep cvxpy's compiled program between calls, so a sweep
over parameter values pays canonicalization once.

cvxpy itself is imported lazily (it takes about a second): importing this module only
registers the backends.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import re
import sys
import time
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.modeling.model import ModelArrays
from distplan.solvers.base import Backend, Capabilities, SolveOptions, register_backend
from distplan.solvers.capture import captured_output, echo_to_stderr
from distplan.solvers.common import with_margin
from distplan.solvers.reserved import cvxpy_reserved
from distplan.solvers.result import INFEASIBLE_TERMINATIONS, SolutionStatus, SolverResult, Termination

# OSQP's native library segfaults in ``setup`` when it is first loaded after PuLP (PuLP's
# import pulls in highspy and pyscipopt; measured with osqp 1.1.3 / pulp 3.x): loading it
# here, before any PuLP import, avoids that (about 20 ms once scipy is loaded). When PuLP
# was imported first, cvxpy-OSQP reports itself unavailable instead of crashing the process.
_OSQP_SAFE = True
if importlib.util.find_spec("osqp") is not None and "osqp" not in sys.modules:
    if "pulp" in sys.modules:
        _OSQP_SAFE = False
    else:
        with contextlib.suppress(Exception):
            import osqp  # noqa: F401

#: cvxpy's status strings (cvxpy.settings) mapped to the shared vocabulary.
#: USER_LIMIT is refined into TIME_LIMIT / ITERATION_LIMIT from the raw solver status.
STATUS_MAP: dict[str, Termination] = {
    "optimal": Termination.OPTIMAL,
    "optimal_inaccurate": Termination.NUMERICAL,
    "infeasible": Termination.INFEASIBLE,
    "infeasible_inaccurate": Termination.NUMERICAL,
    "unbounded": Termination.UNBOUNDED,
    "unbounded_inaccurate": Termination.NUMERICAL,
    "infeasible_or_unbounded": Termination.INFEASIBLE_OR_UNBOUNDED,
    "user_limit": Termination.TIME_LIMIT,
    "solver_error": Termination.ERROR,
}


@dataclass(frozen=True)
class SolverSpec:
    """What one cvxpy solver can do and how its options are spelled (data, not code).

    ``cones`` lists the cone families it takes beyond linear rows; ``accuracy`` is
    "high" for interior-point / simplex / branch-and-bound solvers and "low" for
    first-order (ADMM) solvers, whose "optimal" means a 1e-4..1e-6 tolerance.
    """

    name: str
    lp: bool
    milp: bool
    conic: bool
    qp: bool
    cones: tuple[str, ...]
    accuracy: str
    #: option key (or nested path) for a time limit in seconds; None: not supported
    time_limit_key: tuple[str, ...] | None
    threads_key: tuple[str, ...] | None = None
    mip_gap_key: tuple[str, ...] | None = None
    seed_key: tuple[str, ...] | None = None
    #: raw statuses (str of the solver's own status) that mean "iteration limit"
    iteration_limit_statuses: tuple[str, ...] = ()
    #: solver options always passed (e.g. tighter tolerances than cvxpy's defaults)
    defaults: dict[str, Any] = field(default_factory=dict)
    #: reports a dual objective or MIP dual bound we can read
    reports_bound: bool = False


SOLVER_TABLE: tuple[SolverSpec, ...] = (
    SolverSpec("CLARABEL", lp=True, milp=False, conic=True, qp=True, cones=("soc", "exp", "pow", "psd"), accuracy="high",
               time_limit_key=("time_limit",), threads_key=("max_threads",), iteration_limit_statuses=("MaxIterations",),
               reports_bound=True),
    SolverSpec("SCS", lp=True, milp=False, conic=True, qp=True, cones=("soc", "exp", "pow", "psd"), accuracy="low",
               time_limit_key=("time_limit_secs",),
               defaults={"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iters": 200000}, reports_bound=True),
    SolverSpec("ECOS", lp=True, milp=False, conic=True, qp=False, cones=("soc", "exp"), accuracy="high",
               time_limit_key=None, reports_bound=True),
    SolverSpec("OSQP", lp=True, milp=False, conic=False, qp=True, cones=(), accuracy="low",
               time_limit_key=("time_limit",), defaults={"eps_abs": 1e-7, "eps_rel": 1e-7, "max_iter": 200000}),
    SolverSpec("HIGHS", lp=True, milp=True, conic=False, qp=True, cones=(), accuracy="high",
               time_limit_key=("time_limit",), threads_key=("threads",), mip_gap_key=("mip_rel_gap",),
               seed_key=("random_seed",), reports_bound=True),
    SolverSpec("SCIP", lp=True, milp=True, conic=True, qp=True, cones=("soc",), accuracy="high",
               time_limit_key=("scip_params", "limits/time"), mip_gap_key=("scip_params", "limits/gap"),
               seed_key=("scip_params", "randomization/randomseedshift"), reports_bound=True),
    SolverSpec("SCIPY", lp=True, milp=True, conic=False, qp=False, cones=(), accuracy="high",
               time_limit_key=("scipy_options", "time_limit"), mip_gap_key=("scipy_options", "mip_rel_gap"),
               reports_bound=True),
    SolverSpec("GLPK_MI", lp=True, milp=True, conic=False, qp=False, cones=(), accuracy="high", time_limit_key=None),
    SolverSpec("CBC", lp=True, milp=True, conic=False, qp=False, cones=(), accuracy="high", time_limit_key=None),
)
SOLVERS: dict[str, SolverSpec] = {s.name: s for s in SOLVER_TABLE}


def solver_spec(backend_name: str) -> SolverSpec | None:
    """The table entry behind a ``cvxpy-<SOLVER>`` backend name (None for other backends)."""
    if not backend_name.startswith("cvxpy-"):
        return None
    return SOLVERS.get(backend_name[len("cvxpy-") :])


#: the Python package each cvxpy solver interface imports
SOLVER_MODULES = {"CLARABEL": "clarabel", "SCS": "scs", "ECOS": "ecos", "OSQP": "osqp", "HIGHS": "highspy",
                  "SCIP": "pyscipopt", "SCIPY": "scipy", "GLPK_MI": "cvxopt", "CBC": "cylp"}


@functools.lru_cache(maxsize=1)
def _installed() -> frozenset[str]:
    import cvxpy as cp

    return frozenset(cp.installed_solvers())


def _solver_available(solver: str) -> bool:
    """cvxpy's own answer (`cvxpy.installed_solvers`, which imports cvxpy: 0.3-0.4 s),
    except for Clarabel before cvxpy is loaded: whether ``clarabel`` imports (1-2 ms), so
    that a run on the direct Clarabel path (`bandwidth.convex.direct`), which needs no
    cvxpy, does not spend its time limit importing it. Every other cvxpy backend imports
    cvxpy to solve anyway. (Whether a solver's package is merely found, as before, listed
    a package that fails to import as available: review rev15c, a broken ``ecos``.)"""
    if solver == "OSQP" and not _OSQP_SAFE:
        return False
    if solver == "CLARABEL" and "cvxpy" not in sys.modules:
        try:
            import clarabel  # noqa: F401
        except Exception:
            return False
        return True
    return solver in _installed()


@functools.cache
def _version(solver: str) -> str:
    from importlib.metadata import version

    module = SOLVER_MODULES.get(solver)
    detail = ""
    if module is not None and importlib.util.find_spec(module) is not None:
        with contextlib.suppress(Exception):
            detail = f" {module} {version(module)}"
    return f"cvxpy {version('cvxpy')}{detail}"


def _set_path(opts: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    cur = opts
    for key in path[:-1]:
        cur = cur.setdefault(key, {})
    cur[path[-1]] = value


def _solver_options(spec: SolverSpec, options: SolveOptions) -> dict[str, Any]:
    opts: dict[str, Any] = {k: (dict(v) if isinstance(v, dict) else v) for k, v in spec.defaults.items()}
    if options.time_limit is not None and spec.time_limit_key is not None:
        _set_path(opts, spec.time_limit_key, float(options.time_limit))
    if options.threads is not None and spec.threads_key is not None:
        _set_path(opts, spec.threads_key, int(options.threads))
    if options.mip_gap is not None and spec.mip_gap_key is not None:
        _set_path(opts, spec.mip_gap_key, float(options.mip_gap))
    if options.seed is not None and spec.seed_key is not None:
        _set_path(opts, spec.seed_key, int(options.seed))
    for key, value in options.raw.items():
        if isinstance(value, dict) and isinstance(opts.get(key), dict):
            opts[key].update(value)
        else:  # (a copy of a nested one: cvxpy's SciPy adapter adds "method" to its scipy_options)
            opts[key] = dict(value) if isinstance(value, dict) else value
    return opts


def _raw_status(raw: Any) -> str:
    if isinstance(raw, dict):
        info = raw.get("info")
        if isinstance(info, dict) and "status" in info:
            return str(info["status"])
        for key in ("status", "model_status", "scip_status"):
            if key in raw:
                return str(raw[key])
        return ""
    for attr in ("status", "message"):
        if hasattr(raw, attr):
            return str(getattr(raw, attr))
    info = getattr(raw, "info", None)  # OSQP's result keeps its status in ``info``
    if info is not None and hasattr(info, "status"):
        return str(info.status)
    return ""


def _raw_primal_dual(spec: SolverSpec, raw: Any, is_mip: bool, termination: Termination) -> tuple[float, float] | None:
    """(primal, dual) objective of the solver's own (minimization) problem, when reported."""
    try:
        if spec.name == "CLARABEL":
            return float(raw.obj_val), float(raw.obj_val_dual)
        if spec.name == "SCS":
            return float(raw["info"]["pobj"]), float(raw["info"]["dobj"])
        if spec.name == "ECOS":
            return float(raw["info"]["pcost"]), float(raw["info"]["dcost"])
        if spec.name == "HIGHS":
            info = raw["info"]
            primal = float(info.objective_function_value)
            if is_mip:
                return primal, float(info.mip_dual_bound)
            return (primal, primal) if termination is Termination.OPTIMAL else None
        if spec.name == "SCIPY":
            primal = float(raw.fun)
            if is_mip:
                return primal, float(raw.mip_dual_bound)
            return (primal, primal) if termination is Termination.OPTIMAL else None
        if spec.name == "SCIP":
            model = raw["model"]
            return float(model.getPrimalbound()), float(model.getDualbound())
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return None


#: SCIP's status strings (pyscipopt ``Model.getStatus``)
_SCIP_STATUS: dict[str, Termination] = {
    "optimal": Termination.OPTIMAL,
    "gaplimit": Termination.OPTIMAL,  # within limits/gap, as HiGHS's optimal within mip_rel_gap
    "timelimit": Termination.TIME_LIMIT,
    "nodelimit": Termination.NODE_LIMIT,
    "totalnodelimit": Termination.NODE_LIMIT,
    "stallnodelimit": Termination.NODE_LIMIT,
    "sollimit": Termination.SOLUTION_LIMIT,
    "bestsollimit": Termination.SOLUTION_LIMIT,
    "restartlimit": Termination.ITERATION_LIMIT,
    "userinterrupt": Termination.INTERRUPTED,
    "terminate": Termination.INTERRUPTED,
    "memlimit": Termination.ERROR,
    "infeasible": Termination.INFEASIBLE,
    "unbounded": Termination.UNBOUNDED,
    "inforunbd": Termination.INFEASIBLE_OR_UNBOUNDED,
}
#: Clarabel's status names (str of clarabel.SolverStatus)
_CLARABEL_STATUS: dict[str, Termination] = {
    "MaxTime": Termination.TIME_LIMIT,
    "MaxIterations": Termination.ITERATION_LIMIT,
}
#: OSQP's limit statuses (its result's ``info.status``; osqp 1.1.3), which cvxpy folds into
#: ``user_limit``: stopping at its ``max_iter`` (200000 here) is no time limit
_OSQP_STATUS: dict[str, Termination] = {
    "maximum iterations reached": Termination.ITERATION_LIMIT,
    "run time limit reached": Termination.TIME_LIMIT,
    "interrupted": Termination.INTERRUPTED,
}


def _refine(spec: SolverSpec, raw: Any) -> Termination | None:
    """The solver's own status where it says more than cvxpy's (which limit stopped it).

    cvxpy folds limits into ``user_limit`` or even ``optimal_inaccurate`` (SCIP, SciPy);
    a time-limited incumbent must never pass for optimal.
    """
    try:
        if spec.name == "SCIP":
            return _SCIP_STATUS.get(str(raw.get("scip_status") or raw.get("status")))
        if spec.name == "HIGHS":
            from distplan.solvers.highs import STATUS_BY_NAME

            # (cvxpy 1.9 keeps the status's name, "kTimeLimit"; earlier ones the enum)
            status = raw["model_status"]
            return STATUS_BY_NAME.get(status if isinstance(status, str) else getattr(status, "name", ""))
        if spec.name == "SCIPY":
            code, text = int(raw.status), str(raw.message).lower()
            if code == 1:  # "Iteration or time limit reached"
                return Termination.TIME_LIMIT if "time" in text else Termination.ITERATION_LIMIT
            if code == 4 and "unbounded or infeasible" in text:
                return Termination.INFEASIBLE_OR_UNBOUNDED
            return None
        if spec.name == "CLARABEL":
            return _CLARABEL_STATUS.get(str(raw.status))
        if spec.name == "OSQP":
            return _OSQP_STATUS.get(str(raw.info.status))
    except (AttributeError, KeyError, TypeError, ValueError):
        return None
    return None


def _no_incumbent(spec: SolverSpec, raw: Any) -> bool:
    """Whether the solver says it holds no feasible point, whatever values cvxpy unpacked:
    cvxpy 1.9 counts HiGHS's time limit (``user_limit``) as a solution present and unpacks
    its column values even when HiGHS found none (``primal_solution_status`` below 2,
    `kSolutionStatusFeasible`), values no plan may be decoded from (a 32-layer alpa_ilp
    stopped at 1-3 s: a plan 7 times over the memory budget, a `PlanCheckError`)."""
    if spec.name != "HIGHS" or not isinstance(raw, dict) or "info" not in raw:
        return False
    from distplan.solvers.highs import holds_solution

    return not holds_solution(raw["info"])


def _is_mip(problem: Any) -> bool:
    return any(v.attributes.get("integer") or v.attributes.get("boolean") for v in problem.variables())


def _run(spec: SolverSpec, problem: Any, options: SolveOptions, backend_name: str) -> tuple[SolverResult, Any]:
    """Canonicalize, solve and unpack ``problem``; returns the result and the raw output."""
    import cvxpy as cp
    from cvxpy.problems.problem import SolverStats

    t0 = time.perf_counter()
    solver_opts = _solver_options(spec, options)
    version = _version(spec.name)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            data, chain, inverse = problem.get_problem_data(spec.name, solver_opts=dict(solver_opts))
    except (cp.error.SolverError, cp.error.DCPError, cp.error.DPPError, ValueError) as exc:
        hint = ""
        if not spec.conic:
            hint = f"; cvxpy-{spec.name} takes LPs{' and QPs' if spec.qp else ''} only: use a conic backend such as cvxpy-CLARABEL"
        return SolverResult(backend=backend_name, backend_version=version, termination=Termination.ERROR,
                            status=SolutionStatus.NONE, message=f"{exc}{hint}",
                            handover_seconds=time.perf_counter() - t0), None
    t1 = time.perf_counter()
    is_mip = _is_mip(problem)
    try:
        if spec.name == "HIGHS":  # highspy loaded only now: see the OSQP note at the top
            from distplan.solvers.highs import use_threads

            use_threads(options.threads)
        with warnings.catch_warnings(), captured_output() as log:
            warnings.simplefilter("ignore")
            raw = chain.solve_via_data(problem, data, False, True, dict(solver_opts))
    except Exception as exc:  # the solver (or cvxpy's adapter) failed: an ERROR result, never a crash
        return SolverResult(backend=backend_name, backend_version=version, termination=Termination.ERROR,
                            status=SolutionStatus.NONE, message=f"{type(exc).__name__}: {exc}", handover_seconds=t1 - t0,
                            solve_seconds=time.perf_counter() - t1, log=log.text), None
    t2 = time.perf_counter()
    if options.verbose:
        echo_to_stderr(log.text)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        solution = chain.invert(raw, inverse)
    cvx_status = str(solution.status)
    termination = STATUS_MAP.get(cvx_status)
    message = ""
    if termination is None:
        warnings.warn(f"cvxpy-{spec.name}: unmapped cvxpy status {cvx_status!r}", RuntimeWarning, stacklevel=2)
        termination = Termination.UNKNOWN
    raw_status = _raw_status(raw)
    refined = _refine(spec, raw)
    if refined is not None:
        termination = refined
        if spec.name == "HIGHS" and isinstance(raw, dict) and "info" in raw:  # its node limits read "solution limit"
            from distplan.solvers.highs import node_limit

            highs_raw = options.raw.get("highs_options")
            termination = node_limit(termination, options.with_(raw=dict(highs_raw) if isinstance(highs_raw, dict) else {}), int(getattr(raw["info"], "mip_node_count", 0)))
    elif cvx_status == "user_limit":
        timed_out = options.time_limit is not None and (t2 - t1) >= 0.9 * options.time_limit
        if not timed_out and (raw_status in spec.iteration_limit_statuses or options.time_limit is None):
            termination = Termination.ITERATION_LIMIT
    # values of an earlier solve must never survive into this one: cvxpy's `unpack` only
    # overwrites the primal / dual values the solver returned (SCIP returns no duals for
    # cone programs, so stale multipliers from another backend would remain).
    for var in problem.variables():
        var.save_value(None)
    for con in problem.constraints:
        for dual in con.dual_variables:
            dual.save_value(None)
    if cvx_status not in ("solver_error",):
        problem.unpack(solution)
        problem._solver_stats = SolverStats.from_dict(solution.attr, chain.solver.name())
    has_values = cvx_status in ("optimal", "optimal_inaccurate", "user_limit") and not _no_incumbent(spec, raw) and all(
        v.value is not None for v in problem.variables()
    )
    if termination is Termination.OPTIMAL and has_values:
        status = SolutionStatus.OPTIMAL
    elif has_values:
        status = SolutionStatus.FEASIBLE
        if cvx_status == "optimal_inaccurate":
            message = "solver reached only a reduced accuracy (optimal_inaccurate)"
    else:
        status = SolutionStatus.NONE
        if termination is Termination.OPTIMAL:
            termination = Termination.UNKNOWN
    objective = float(problem.value) if has_values and problem.value is not None and np.isfinite(problem.value) else None
    bound: float | None = None
    raw_gap: float | None = None
    if objective is not None and termination in (Termination.OPTIMAL, Termination.TIME_LIMIT, Termination.ITERATION_LIMIT):
        pd = _raw_primal_dual(spec, raw, is_mip, termination)
        if pd is not None and all(np.isfinite(pd)) and (termination is Termination.OPTIMAL or is_mip):
            # |primal - dual| of the solver's own problem: an interior-point dual objective can
            # exceed the primal by the tolerance, so the gap's size (not its sign) weakens the bound
            gap = abs(pd[0] - pd[1])
            minimize = isinstance(problem.objective, cp.Minimize)
            bound = objective - gap if minimize else objective + gap
            raw_gap = pd[0] - pd[1]
    stats = problem.solver_stats if has_values or status is SolutionStatus.NONE else None
    iterations = getattr(stats, "num_iters", None) if stats is not None else None
    nodes = None
    if spec.name == "SCIPY" and is_mip and getattr(raw, "mip_node_count", None) is not None:
        nodes = int(raw.mip_node_count)
    extra: dict[str, Any] = {
        "cvxpy_status": cvx_status,
        "canonicalization_seconds": t1 - t0,
        "unpack_seconds": time.perf_counter() - t2,
        "solver_reported_seconds": getattr(stats, "solve_time", None) if stats is not None else None,
        "dpp_cached": problem._cache.param_prog is not None,
        "solver_primal_minus_dual": raw_gap,
    }
    result = SolverResult(
        backend=backend_name,
        backend_version=version,
        termination=termination,
        status=status,
        objective=objective,
        bound=bound,
        handover_seconds=(t1 - t0) + (time.perf_counter() - t2),
        solve_seconds=t2 - t1,
        nodes=nodes,
        iterations=int(iterations) if isinstance(iterations, int | np.integer) and iterations >= 0 else None,
        raw_status=raw_status or cvx_status,
        message=message,
        log=log.text,
        extra=extra,
    )
    return result, raw


def arrays_to_problem(arrays: ModelArrays) -> tuple[Any, Any]:
    """The assembled model as a cvxpy problem: one vector variable with bounds, row blocks."""
    import cvxpy as cp

    n = arrays.num_vars
    integer = np.flatnonzero(arrays.integrality)
    lo = np.where(np.isfinite(arrays.col_lo), arrays.col_lo, -np.inf)
    hi = np.where(np.isfinite(arrays.col_hi), arrays.col_hi, np.inf)
    kwargs: dict[str, Any] = {"name": "x", "bounds": [lo, hi]}
    if integer.size:
        kwargs["integer"] = (integer,)
    x = cp.Variable(max(n, 1), **kwargs) if n else cp.Variable(1, name="x", bounds=[np.zeros(1), np.zeros(1)])
    A = arrays.A
    rlo, rhi = arrays.row_lo, arrays.row_hi
    eq = np.flatnonzero(np.isfinite(rlo) & np.isfinite(rhi) & (rlo == rhi))
    le = np.flatnonzero(np.isfinite(rhi) & ~(np.isfinite(rlo) & (rlo == rhi)))
    ge = np.flatnonzero(np.isfinite(rlo) & ~(np.isfinite(rhi) & (rlo == rhi)))
    constraints = []
    if n:
        if eq.size:
            constraints.append(A[eq] @ x == rhi[eq])
        if le.size:
            constraints.append(A[le] @ x <= rhi[le])
        if ge.size:
            constraints.append(A[ge] @ x >= rlo[ge])
        expr = arrays.c @ x + arrays.offset
    else:
        expr = cp.Constant(arrays.offset) + 0 * cp.sum(x)
    objective = cp.Maximize(expr) if arrays.sense == "max" else cp.Minimize(expr)
    return cp.Problem(objective, constraints), x


def _without_presolve(spec: SolverSpec, problem: Any, options: SolveOptions, backend_name: str, first: SolverResult, spent: float) -> SolverResult:
    """A MILP SciPy called infeasible, solved again without presolve, whose verdict stands:
    SciPy 1.17.1's HiGHS presolve calls a feasible MILP of 3 variables infeasible (x0 in
    [-1, 0] and x1 in [0, 2] integer, x2 in [-2, 3]: 2 x1 + x2 >= 4, x1 + x2 <= 3,
    -3 x0 + x1 - x2 = 2; (0, 2, 0) meets them), which the highs backend solves."""
    raw = dict(options.raw)
    raw["scipy_options"] = {**(raw.get("scipy_options") or {}), "presolve": False}
    limit = None if options.time_limit is None else max(options.time_limit - spent, 0.01)
    again, _ = _run(spec, problem, options.with_(raw=raw, time_limit=limit), backend_name)
    again.handover_seconds += first.handover_seconds
    again.solve_seconds += first.solve_seconds
    again.extra["presolve_recheck"] = f"{first.termination.value} with presolve, {again.termination.value} without"
    return again


def _make_solve(spec: SolverSpec, backend_name: str) -> Callable[[ModelArrays, SolveOptions, np.ndarray | None], SolverResult]:
    def solve(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
        t0 = time.perf_counter()
        problem, x = arrays_to_problem(arrays)
        build = time.perf_counter() - t0
        result, _ = _run(spec, problem, options, backend_name)
        if spec.name == "SCIPY" and arrays.is_mip and result.termination in INFEASIBLE_TERMINATIONS:
            result = _without_presolve(spec, problem, options, backend_name, result, time.perf_counter() - t0)
        result.handover_seconds += build
        result.extra["problem_build_seconds"] = build
        result.bound = with_margin(arrays, result.bound, result.extra)
        result.bound_grade = "solver" if result.bound is not None else None
        if result.has_solution and arrays.num_vars:
            result.values = np.asarray(x.value, dtype=float).reshape(-1)
        elif result.has_solution:
            result.values = np.zeros(0)
        return result

    return solve


def _make_solve_convex(spec: SolverSpec, backend_name: str) -> Callable[[Any, SolveOptions], SolverResult]:
    def solve_convex(problem: Any, options: SolveOptions) -> SolverResult:
        result, _ = _run(spec, problem, options, backend_name)
        if result.has_solution:
            result.values_by_block = {
                (v.name() or f"var{v.id}"): np.asarray(v.value, dtype=float) for v in problem.variables()
            }
        return result

    return solve_convex


#: cvxpy's own keys among HIGHS's solver options (cvxpy's HiGHS adapter reads them; every
#: other key goes to ``Highs.setOptionValue`` as it is)
_CVXPY_HIGHS_KEYS = ("highs_options", "write_model_file")


def _highs_refused_option(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of ``raw`` HiGHS refuses (`highs.refused_option`), the options under
    ``highs_options`` included, which cvxpy's adapter passes to HiGHS the same way
    (highspy is imported only now: see the OSQP note at the top)."""
    from distplan.solvers.highs import refused_option

    refused = refused_option({k: v for k, v in raw.items() if k not in _CVXPY_HIGHS_KEYS})
    nested = raw.get("highs_options")
    if refused is None and isinstance(nested, Mapping):
        inner = refused_option(nested)
        if inner is not None:
            return "highs_options", f"its {inner[0]!r}: {inner[1]}"
    return refused


def _tried_refused_option(spec: SolverSpec, raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of ``raw`` cvxpy's ``spec.name`` adapter or solver refuses, found by
    solving ``min x s.t. x >= 1`` with each option in turn (with the spec's defaults, as a
    solve passes them; a few milliseconds each): an exception, or a warning that the
    option is not recognised (SciPy passes unknown ``scipy_options`` on with one), is a
    refusal. A solver that takes MILPs is also tried with ``x`` integer, and an option
    either program takes is accepted: cvxpy's SciPy adapter sends LPs to ``linprog`` and
    MILPs to ``milp``, whose options differ (``node_limit`` is a MILP's only). Without
    this an unknown option made every call of the run end in error (SCIP, Clarabel, SCS,
    OSQP) or went unused (SciPy), after the heuristics had run."""
    import cvxpy as cp

    programs = [cp.Variable()] + ([cp.Variable(integer=True)] if spec.milp else [])
    problems = [cp.Problem(cp.Minimize(x), [x >= 1]) for x in programs]
    for key, value in raw.items():
        refusals = [why for problem in problems if (why := _trial_refusal(spec, problem, key, value)) is not None]
        if len(refusals) == len(problems):
            return str(key), refusals[0]
    return None


def _trial_refusal(spec: SolverSpec, problem: Any, key: str, value: Any) -> str | None:
    """Why ``spec.name`` refuses the option ``key=value`` on ``problem``, or None."""
    opts = _solver_options(spec, SolveOptions(raw={key: value}))
    with warnings.catch_warnings(record=True) as caught, captured_output():
        warnings.simplefilter("always")
        try:
            problem.solve(solver=spec.name, **opts)
        except Exception as exc:  # the adapter's or the solver's refusal
            return f"{type(exc).__name__}: {exc}"
    unknown = [w for w in caught if re.search(r"unrecogni[sz]ed|unknown", str(w.message), re.IGNORECASE)]
    return str(unknown[0].message) if unknown else None


def _register_all() -> None:
    for spec in SOLVER_TABLE:
        name = f"cvxpy-{spec.name}"
        kinds = "/".join(k for k, ok in (("LP", spec.lp), ("MILP", spec.milp), ("conic", spec.conic), ("QP", spec.qp)) if ok)
        register_backend(
            Backend(
                name=name,
                description=f"{spec.name} through cvxpy ({kinds}; {spec.accuracy} accuracy)",
                capabilities=Capabilities(
                    lp=spec.lp,
                    milp=spec.milp,
                    convex=spec.conic,  # the convex programs are conic (SOC): a QP-only solver cannot take them
                    reports_bound=spec.reports_bound and spec.milp,
                    reports_lp_bound=spec.reports_bound,
                    warm_start=False,
                    time_limit=spec.time_limit_key is not None,
                    interruptible_size=20_000,
                ),
                requires=("cvxpy",),
                extra=None,
                solve_fn=_make_solve(spec, name),
                version_fn=functools.partial(_version, spec.name),
                status_map=dict(STATUS_MAP),
                availability_fn=functools.partial(_solver_available, spec.name),
                program=f"cvxpy's {spec.name} solver (its Python package)",
                solve_convex_fn=_make_solve_convex(spec, name),
                options_check_fn=_highs_refused_option if spec.name == "HIGHS" else functools.partial(_tried_refused_option, spec),
                reserved_fn=functools.partial(cvxpy_reserved, spec.name, spec.time_limit_key, spec.mip_gap_key),
            )
        )


_register_all()
