"""Pyomo backends: `pyomo-highs` (Pyomo's `highs` interface of pyomo.contrib.solver),
`pyomo-cbc` (Pyomo's CBC shell interface pointed at the CBC binary PuLP bundles) and
`pyomo-glpk` (Pyomo's GLPK shell interface; available when ``glpsol`` is on PATH).

The arrays become a `ConcreteModel` with one indexed `Var` and one indexed `Constraint`
whose rows are `LinearExpression`s of monomials built from the CSR rows (the fastest
construct Pyomo offers; Pyomo itself remains the slow part, see benchmarks). As in the
PuLP backends the model minimizes ``sign * c @ x`` without the offset and
`finish_result` maps objective and bound back.

Status maps are keyed by the *names* of Pyomo's `TerminationCondition` members (the legacy
``pyomo.opt`` enum for the shell interfaces, ``pyomo.contrib.solver.common.results`` for
`highs`), so that registering the backends does not import Pyomo (about 0.3 s).
CBC's and GLPK's own log lines refine them (Pyomo reports GLPK's time-limited incumbent as
"feasible", and keeps CBC's limit kinds apart only partly).
"""

from __future__ import annotations

import functools
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from importlib.metadata import version as package_version
from typing import Any

import numpy as np

from distplan.modeling.model import ModelArrays
from distplan.solvers.base import Backend, Capabilities, SolveOptions, register_backend
from distplan.solvers.capture import LiveStderr, echo_to_stderr
from distplan.solvers.common import error_result, fill_unmentioned, finish_result, objective_sign, primal_feasible
from distplan.solvers.highs import ISOLATE_SIZE, highs_version, refused_option, use_threads
from distplan.solvers.pulp_backend import (
    cbc_path,
    cbc_refused_option,
    completed_search_bound,
    parse_cbc_log,
    recheck_without_preprocessing,
)
from distplan.solvers.reserved import cbc_reserved, glpk_reserved, highs_adapter_reserved
from distplan.solvers.result import SolverResult, Termination, map_status

#: pyomo.contrib.solver.common.results.TerminationCondition member name -> termination
CONTRIB_STATUS_MAP: dict[str, Termination] = {
    "convergenceCriteriaSatisfied": Termination.OPTIMAL,
    "maxTimeLimit": Termination.TIME_LIMIT,
    "iterationLimit": Termination.ITERATION_LIMIT,
    "objectiveLimit": Termination.OBJECTIVE_LIMIT,
    "minStepLength": Termination.NUMERICAL,
    "unbounded": Termination.UNBOUNDED,
    "provenInfeasible": Termination.INFEASIBLE,
    "locallyInfeasible": Termination.UNKNOWN,  # no proof of infeasibility
    "infeasibleOrUnbounded": Termination.INFEASIBLE_OR_UNBOUNDED,
    "error": Termination.ERROR,
    "interrupted": Termination.INTERRUPTED,
    "licensingProblems": Termination.ERROR,
    "emptyModel": Termination.OPTIMAL,  # no variables: the constant objective is optimal
    "unknown": Termination.UNKNOWN,
}

#: legacy pyomo.opt.TerminationCondition member name -> termination
LEGACY_STATUS_MAP: dict[str, Termination] = {
    "unknown": Termination.UNKNOWN,
    "maxTimeLimit": Termination.TIME_LIMIT,
    "maxIterations": Termination.ITERATION_LIMIT,
    "minFunctionValue": Termination.OBJECTIVE_LIMIT,
    "minStepLength": Termination.NUMERICAL,
    "globallyOptimal": Termination.OPTIMAL,
    "locallyOptimal": Termination.UNKNOWN,  # no global claim: never called optimal
    "feasible": Termination.INTERRUPTED,  # GLPK: stopped with an incumbent (the log names the limit)
    "optimal": Termination.OPTIMAL,
    "maxEvaluations": Termination.NODE_LIMIT,  # CBC's node limit
    "other": Termination.UNKNOWN,  # CBC's solution limit among others: the log decides
    "unbounded": Termination.UNBOUNDED,
    "infeasible": Termination.INFEASIBLE,
    "infeasibleOrUnbounded": Termination.INFEASIBLE_OR_UNBOUNDED,
    "invalidProblem": Termination.ERROR,
    "intermediateNonInteger": Termination.UNKNOWN,  # only a relaxation's point: no solution
    "noSolution": Termination.UNKNOWN,
    "solverFailure": Termination.ERROR,
    "internalSolverError": Termination.ERROR,
    "error": Termination.ERROR,
    "userInterrupt": Termination.INTERRUPTED,
    "resourceInterrupt": Termination.INTERRUPTED,
    "licensingProblems": Termination.ERROR,
}

#: glpsol's own messages -> termination; the one printed last decides (a MIP log holds the
#: relaxation's "OPTIMAL LP SOLUTION FOUND" before the search's own verdict)
GLPK_LOG_MAP: dict[str, Termination] = {
    "INTEGER OPTIMAL SOLUTION FOUND": Termination.OPTIMAL,
    "OPTIMAL LP SOLUTION FOUND": Termination.OPTIMAL,
    "RELATIVE MIP GAP TOLERANCE REACHED": Termination.OPTIMAL,  # within the requested gap
    "TIME LIMIT EXCEEDED": Termination.TIME_LIMIT,
    "ITERATION LIMIT EXCEEDED": Termination.ITERATION_LIMIT,
    "OBJECTIVE LOWER LIMIT REACHED": Termination.OBJECTIVE_LIMIT,
    "OBJECTIVE UPPER LIMIT REACHED": Termination.OBJECTIVE_LIMIT,
    "SEARCH TERMINATED BY APPLICATION": Termination.INTERRUPTED,
    "PROBLEM HAS NO INTEGER FEASIBLE SOLUTION": Termination.INFEASIBLE,
    "PROBLEM HAS NO PRIMAL FEASIBLE SOLUTION": Termination.INFEASIBLE,
    "PROBLEM HAS NO FEASIBLE SOLUTION": Termination.INFEASIBLE,
    "LP HAS NO PRIMAL FEASIBLE SOLUTION": Termination.INFEASIBLE,  # of a MIP's relaxation too: then the MIP
    "LP RELAXATION HAS NO PRIMAL FEASIBLE SOLUTION": Termination.INFEASIBLE,
    "LP RELAXATION HAS NO DUAL FEASIBLE SOLUTION": Termination.INFEASIBLE_OR_UNBOUNDED,
    "PROBLEM HAS NO DUAL FEASIBLE SOLUTION": Termination.INFEASIBLE_OR_UNBOUNDED,
    "LP HAS NO DUAL FEASIBLE SOLUTION": Termination.INFEASIBLE_OR_UNBOUNDED,
    # a ray plus a feasible point; finish_result keeps UNBOUNDED only with a feasible point
    "LP HAS UNBOUNDED PRIMAL SOLUTION": Termination.UNBOUNDED,
    "PROBLEM HAS UNBOUNDED SOLUTION": Termination.UNBOUNDED,
}


def _finite(v: float) -> float | None:
    return v if math.isfinite(v) else None


def build_pyomo_model(arrays: ModelArrays) -> tuple[Any, list[Any]]:
    """A ConcreteModel for ``min sign * c @ x`` and its variables in column order.

    Free rows and empty rows are left out (an empty row whose bounds exclude 0 makes the
    caller report infeasibility before building, see `empty_row_conflict`).
    """
    import pyomo.environ as pyo
    from pyomo.core.expr.numeric_expr import LinearExpression, MonomialTermExpression

    n = arrays.num_vars
    lo, hi = arrays.col_lo.tolist(), arrays.col_hi.tolist()
    integ = arrays.integrality.astype(bool).tolist()
    m = pyo.ConcreteModel(name="distplan")
    m.x = pyo.Var(
        range(n),
        domain=lambda _m, j: pyo.Integers if integ[j] else pyo.Reals,
        bounds=lambda _m, j: (_finite(lo[j]), _finite(hi[j])),
    )
    xs = [m.x[j] for j in range(n)]
    A = arrays.A.tocsr()
    indptr, indices, data = A.indptr.tolist(), A.indices.tolist(), A.data.tolist()
    row_lo, row_hi = arrays.row_lo.tolist(), arrays.row_hi.tolist()
    rows = [i for i in range(arrays.num_rows) if indptr[i + 1] > indptr[i] and (math.isfinite(row_lo[i]) or math.isfinite(row_hi[i]))]

    def row_rule(_m: Any, i: int) -> Any:
        s, e = indptr[i], indptr[i + 1]
        expr = LinearExpression([MonomialTermExpression((v, xs[j])) for j, v in zip(indices[s:e], data[s:e])])
        if row_lo[i] == row_hi[i]:
            return expr == row_lo[i]
        return (_finite(row_lo[i]), expr, _finite(row_hi[i]))

    m.rows = pyo.Constraint(rows, rule=row_rule)
    c = objective_sign(arrays) * arrays.c
    nz = np.flatnonzero(c)
    m.obj = pyo.Objective(
        expr=LinearExpression([MonomialTermExpression((v, xs[j])) for j, v in zip(nz.tolist(), c[nz].tolist())]),
        sense=pyo.minimize,
    )
    return m, xs


def empty_row_conflict(arrays: ModelArrays) -> int | None:
    """The first row with no coefficients whose bounds exclude 0 (infeasible), else None."""
    empty = np.diff(arrays.A.indptr) == 0
    bad = np.flatnonzero(empty & ((arrays.row_lo > 1e-9) | (arrays.row_hi < -1e-9)))
    return int(bad[0]) if bad.size else None


def _values_of(xs: list[Any], arrays: ModelArrays) -> np.ndarray:
    """Variable values after loading a solution; variables no row or objective mentions
    (the writers leave them out) take a value within their bounds."""
    return fill_unmentioned(np.array([np.nan if v.value is None else float(v.value) for v in xs]), arrays)


def _infeasible_empty_row(backend: str, version: str, arrays: ModelArrays, row: int) -> SolverResult:
    """INFEASIBLE without a solve: Pyomo rejects constant constraints, so name the row here."""
    return finish_result(
        backend=backend,
        version=version,
        arrays=arrays,
        termination=Termination.INFEASIBLE,
        values=None,
        bound_min=None,
        raw_status="empty row",
        log="",
        handover_seconds=0.0,
        solve_seconds=0.0,
        message=(
            f"row {row} ({arrays.row_names[row] if row < len(arrays.row_names) else row}) has no variables "
            f"but needs {arrays.row_lo[row]} <= 0 <= {arrays.row_hi[row]}"
        ),
    )


# -- pyomo-highs -------------------------------------------------------------------------


@functools.cache
def _pyomo_highs_version() -> str:
    return f"HiGHS {highs_version()} (Pyomo {package_version('pyomo')})"


def solve_pyomo_highs(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    """pyomo-highs: Pyomo's `highs` interface (pyomo.contrib.solver)."""

    import pyomo.environ  # noqa: F401 (imported before the hand-over clock starts)
    from pyomo.contrib.solver.common.factory import SolverFactory
    from pyomo.contrib.solver.common.results import SolutionStatus as PyomoSolutionStatus

    version = _pyomo_highs_version()
    bad = empty_row_conflict(arrays)
    if bad is not None:
        return _infeasible_empty_row("pyomo-highs", version, arrays, bad)
    if arrays.A.nnz == 0 and not np.any(arrays.c):
        # nothing mentions any variable: Pyomo hands HiGHS an empty model and reads its
        # "model empty" status as unknown; every in-bounds point is optimal
        return finish_result(
            backend="pyomo-highs",
            version=version,
            arrays=arrays,
            termination=Termination.OPTIMAL,
            values=fill_unmentioned(np.full(arrays.num_vars, np.nan), arrays),
            bound_min=None,
            raw_status="empty model",
            log="",
            handover_seconds=0.0,
            solve_seconds=0.0,
        )
    t0 = time.perf_counter()
    model, xs = build_pyomo_model(arrays)
    solver = SolverFactory("highs")
    solver_options: dict[str, Any] = {}
    if options.seed is not None:
        solver_options["random_seed"] = int(options.seed)
    solver_options.update(options.raw)
    config: dict[str, Any] = {
        "load_solutions": False,
        "raise_exception_on_nonoptimal_result": False,
        "tee": [LiveStderr()] if options.verbose else [],
        "solver_options": solver_options,
    }
    if options.time_limit is not None:
        config["time_limit"] = float(options.time_limit)
    if options.mip_gap is not None:
        config["rel_gap"] = float(options.mip_gap)
    if options.threads is not None:
        config["threads"] = int(options.threads)
    use_threads(options.threads)
    t1 = time.perf_counter()
    try:
        results = solver.solve(model, **config)
    except Exception as exc:  # Pyomo raises on solver errors; report them as ERROR results
        return error_result("pyomo-highs", version, f"{type(exc).__name__}: {exc}", seconds=time.perf_counter() - t1)
    t2 = time.perf_counter()
    tc = results.termination_condition
    termination = map_status(CONTRIB_STATUS_MAP, tc.name, "pyomo-highs")
    values = None
    if results.solution_status in (PyomoSolutionStatus.feasible, PyomoSolutionStatus.optimal):
        results.solution_loader.load_vars()
        values = _values_of(xs, arrays)
    elif arrays.num_vars == 0:
        values = np.zeros(0)
    bound_min = results.objective_bound if arrays.is_mip else None
    extra = results.extra_info
    nodes = getattr(extra, "mip_node_count", None) if arrays.is_mip else None
    iterations = getattr(extra, "simplex_iteration_count", None)
    return finish_result(
        backend="pyomo-highs",
        version=version,
        arrays=arrays,
        termination=termination,
        values=values,
        bound_min=None if bound_min is None else float(bound_min),
        raw_status=f"{tc.name} / {results.solution_status.name}",
        log=str(results.solver_log or ""),
        handover_seconds=t1 - t0,
        solve_seconds=t2 - t1,
        nodes=int(nodes) if nodes is not None and nodes >= 0 else None,
        iterations=int(iterations) if iterations is not None and iterations >= 0 else None,
    )


# -- shell solvers (CBC, GLPK) through Pyomo's legacy interfaces ------------------------


@functools.cache
def _glpk_version() -> str:
    proc = subprocess.run(["glpsol", "--version"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    m = re.search(r"Solver\s+(\S+)", proc.stdout)
    return f"GLPK {m.group(1) if m else 'unknown'} (Pyomo {package_version('pyomo')})"


@functools.cache
def _pyomo_cbc_version() -> str:
    proc = subprocess.run([cbc_path(), "-quit"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    m = re.search(r"Version:\s*(\S+)", proc.stdout)
    return f"CBC {m.group(1) if m else 'unknown'} (Pyomo {package_version('pyomo')})"


def parse_glpk_log(log: str) -> tuple[Termination | None, float | None]:
    """glpsol's final message and the best proven bound of a minimization from its
    branch-and-cut progress lines (``+ N: mip = <incumbent> >= <bound> ...``), weakened by
    the printed rounding (``%.9e``)."""
    termination = None
    last = -1
    for phrase, term in GLPK_LOG_MAP.items():
        pos = log.rfind(phrase)
        if pos > last:
            last, termination = pos, term
    bound = None
    for m in re.finditer(r"^\+\s*\d+:\s*(?:mip|>>>>>)\s*=?\s*\S+\s*>=\s*([-+]?\d\.\d+e[-+]\d+)", log, flags=re.MULTILINE):
        text = m.group(1)
        mantissa_digits = len(text.split("e")[0].split(".")[1])
        value = float(text)
        slack = 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - mantissa_digits) if value != 0 else 0.0
        bound = value - slack if bound is None else max(bound, value - slack)
    return termination, bound


def _solve_shell(
    which: str, arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None
) -> SolverResult:
    import pyomo.environ as pyo

    backend = f"pyomo-{which}"
    version = _pyomo_cbc_version() if which == "cbc" else _glpk_version()
    bad = empty_row_conflict(arrays)
    if bad is not None:
        return _infeasible_empty_row(backend, version, arrays, bad)
    t0 = time.perf_counter()
    model, xs = build_pyomo_model(arrays)
    if which == "cbc":
        opt = pyo.SolverFactory("cbc", executable=cbc_path())
        if options.time_limit is not None:
            opt.options["sec"] = repr(float(options.time_limit))
            opt.options["timeMode"] = "elapsed"
        if options.mip_gap is not None:
            opt.options["ratioGap"] = repr(float(options.mip_gap))
        if options.threads is not None:
            opt.options["threads"] = int(options.threads)
        if options.seed is not None:
            opt.options["randomSeed"] = int(options.seed)
            opt.options["randomCbcSeed"] = int(options.seed)
        if arrays.is_mip and "increment" not in options.raw:
            # CBC's default cutoff increment (1e-5 objective units) skips better solutions
            # closer than that and still reports "Optimal" (see pulp_backend.cbc_arguments)
            opt.options["increment"] = 0
    else:
        opt = pyo.SolverFactory("glpk")
        if options.time_limit is not None:
            opt.options["tmlim"] = max(1, int(options.time_limit))
        if options.mip_gap is not None:
            opt.options["mipgap"] = repr(float(options.mip_gap))
        if options.seed is not None:
            opt.options["seed"] = int(options.seed)
    for key, value in options.raw.items():
        opt.options[key] = value
    use_start = which == "cbc" and warm_start is not None and arrays.is_mip
    if use_start:
        assert warm_start is not None
        for var, val in zip(xs, np.asarray(warm_start, dtype=float).tolist()):
            var.set_value(val, skip_validation=True)
    fd, log_path = tempfile.mkstemp(prefix=f"distplan-{backend}-", suffix=".log")
    os.close(fd)
    t1 = time.perf_counter()
    try:
        kwargs: dict[str, Any] = {"tee": False, "load_solutions": False, "logfile": log_path}
        if use_start:
            kwargs["warmstart"] = True
        results = opt.solve(model, **kwargs)
    except Exception as exc:  # Pyomo raises ApplicationError etc. on solver failures
        log = ""
        if os.path.exists(log_path):  # (Pyomo removes it when the solver crashed: CBC's SIGSEGV)
            with open(log_path, errors="replace") as fh:
                log = fh.read()
            os.unlink(log_path)
        return error_result(backend, version, f"{type(exc).__name__}: {exc}", log, time.perf_counter() - t1)
    t2 = time.perf_counter()
    with open(log_path, errors="replace") as fh:
        log = fh.read()
    os.unlink(log_path)
    if options.verbose:
        echo_to_stderr(log)
    tc = results.solver.termination_condition
    termination = map_status(LEGACY_STATUS_MAP, getattr(tc, "name", str(tc)), backend)
    bound_min: float | None = None
    nodes = iterations = None
    proven_optimal_bound = True
    has_solution: bool | None = None
    completed_cbc = False
    if which == "cbc":
        parsed = parse_cbc_log(log)
        if parsed.termination is not None:  # CBC's own result line is more exact than Pyomo's reading
            termination = parsed.termination
            has_solution = parsed.has_solution
        proven_optimal_bound = parsed.result_line != "Optimal solution found (within gap tolerance)" and not float(options.raw.get("increment") or 0.0)
        if arrays.is_mip:
            bound_min = parsed.lower_bound
            completed_cbc = termination is Termination.OPTIMAL and proven_optimal_bound and bound_min is None
        nodes, iterations = parsed.nodes, parsed.iterations
    else:
        glpk_term, glpk_bound = parse_glpk_log(log)
        if glpk_term is not None:
            termination = glpk_term
        proven_optimal_bound = "RELATIVE MIP GAP TOLERANCE REACHED" not in log
        if arrays.is_mip and not (termination is Termination.OPTIMAL and proven_optimal_bound):
            bound_min = glpk_bound  # a finished search proves its optimum exactly: no rounded bound
    values = None
    unbounded = termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED)
    if len(results.solution) > 0 and (has_solution is not False or unbounded):
        from pyomo.common.log import LoggingIntercept

        with LoggingIntercept(level=logging.WARNING):  # Pyomo warns when loading a non-optimal result
            model.solutions.load_from(results)
        values = _values_of(xs, arrays)
        if termination is not Termination.OPTIMAL and not unbounded and not primal_feasible(arrays, values, tol=1e-5):
            values = None  # e.g. CBC's "no integer solution - continuous used": not a solution
    elif arrays.num_vars == 0:
        values = np.zeros(0)
    if completed_cbc:  # after the values are loaded: the bound takes the smaller of two readings
        bound_min = completed_search_bound(parsed, arrays, values)
    return finish_result(
        backend=backend,
        version=version,
        arrays=arrays,
        termination=termination,
        values=values,
        bound_min=bound_min,
        raw_status=f"{getattr(tc, 'name', tc)} / {results.solver.status}",
        log=log,
        handover_seconds=t1 - t0,
        solve_seconds=t2 - t1,
        nodes=nodes,
        iterations=iterations,
        proven_optimal_bound=proven_optimal_bound,
        bound_from_point=completed_cbc,
    )


def solve_pyomo_cbc(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    return recheck_without_preprocessing(functools.partial(_solve_shell, "cbc"), arrays, options, warm_start)


def solve_pyomo_glpk(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    return _solve_shell("glpk", arrays, options, warm_start)


def _cbc_available() -> bool:
    path = cbc_path()
    return os.path.isfile(path) and os.access(path, os.X_OK)


PYOMO_HIGHS = register_backend(
    Backend(
        name="pyomo-highs",
        description="Pyomo ConcreteModel solved by Pyomo's highs interface (pyomo.contrib.solver)",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=False, time_limit=True, interruptible_size=ISOLATE_SIZE),
        requires=("pyomo", "highspy"),
        extra=None,
        solve_fn=solve_pyomo_highs,
        version_fn=_pyomo_highs_version,
        status_map=CONTRIB_STATUS_MAP,
        options_check_fn=refused_option,  # (its options go to HiGHS as they are)
        reserved_fn=highs_adapter_reserved,
    )
)

PYOMO_CBC = register_backend(
    Backend(
        name="pyomo-cbc",
        description="Pyomo ConcreteModel solved by the CBC binary PuLP bundles (Pyomo's cbc shell interface)",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=True, time_limit=False),
        requires=("pyomo", "pulp"),
        extra=None,
        solve_fn=solve_pyomo_cbc,
        version_fn=_pyomo_cbc_version,
        status_map=LEGACY_STATUS_MAP,
        availability_fn=_cbc_available,
        program="the CBC binary PuLP bundles",
        options_check_fn=cbc_refused_option,
        reserved_fn=cbc_reserved,
    )
)

PYOMO_GLPK = register_backend(
    Backend(
        name="pyomo-glpk",
        description="Pyomo ConcreteModel solved by glpsol (Pyomo's glpk shell interface; needs GLPK installed)",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=False, time_limit=False),
        requires=("pyomo",),
        extra=None,
        solve_fn=solve_pyomo_glpk,
        version_fn=_glpk_version,
        status_map={**LEGACY_STATUS_MAP, **GLPK_LOG_MAP},
        availability_fn=lambda: shutil.which("glpsol") is not None,
        program="GLPK's glpsol on PATH (e.g. apt install glpk-utils)",
        reserved_fn=glpk_reserved,
    )
)
