"""PuLP backends: `pulp-cbc` (the CBC binary that PuLP bundles) and `pulp-highs` (PuLP's HiGHS API).

`pulp-cbc` writes the arrays as a free-format MPS file with vectorized string building and
runs PuLP's bundled CBC binary on it directly: building a PuLP `LpProblem` and letting PuLP
write the MPS costs 4-5x more for the same file (0.90 s against 0.18 s at 10k columns, 20k
rows, 60k nonzeros; benchmarks/bench_backends.py, section 1).
Statuses are read the way PuLP reads them (`COIN_CMD.get_status` on CBC's solution file,
giving PuLP's `LpStatus` / `LpSolution` pair) and then made exact with CBC's own
``Result - ...`` log line, because PuLP reports "Optimal" for a time-limited incumbent.
CBC's dual bound comes from its log; the log prints it rounded, so the reported bound is
weakened by the rounding error and stays a proven bound.

`pulp-highs` builds a PuLP `LpProblem` (PuLP's own modeling objects) and solves it with
PuLP's HiGHS API; the exact HiGHS model status and MIP dual bound are read from the
`highspy.Highs` object PuLP keeps in ``problem.solverModel``.

Both backends minimize ``sign * c @ x`` (sign -1 for maximization) without the objective
offset; `finish_result` maps objective and bound back. The helpers here (MPS writer, CBC log
parser, result assembly) are shared with the Pyomo and SCIP backends.
"""

from __future__ import annotations

import functools
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import version as package_version
from typing import Any

import highspy
import numpy as np

from distplan.modeling.export import generic_name, mps_number_strings, write_mps
from distplan.modeling.model import ModelArrays
from distplan.solvers.base import Backend, Capabilities, SolveOptions, register_backend
from distplan.solvers.capture import echo_to_stderr
from distplan.solvers.common import error_result, fill_unmentioned, finish_result, objective_sign
from distplan.solvers.highs import ISOLATE_SIZE, highs_version, holds_solution, node_limit, refused_option, use_threads
from distplan.solvers.highs import STATUS_MAP as HIGHS_STATUS_MAP
from distplan.solvers.reserved import cbc_reserved, cbc_sets, highs_reserved
from distplan.solvers.result import SolverResult, Termination, map_status

# -- status vocabulary -------------------------------------------------------------------

#: PuLP's (LpStatus, LpSolution) pair, by their names in ``pulp.LpStatus`` / ``pulp.LpSolution``,
#: to a termination. PuLP folds every limit into ("Optimal", "Solution Found") or
#: ("Not Solved", "No Solution Found"), so those pairs map to INTERRUPTED / UNKNOWN and the
#: solver's own status (CBC's result line, HiGHS's model status) names the exact limit.
_LP_STATUS = ("Not Solved", "Optimal", "Infeasible", "Unbounded", "Undefined")
_LP_SOLUTION = ("No Solution Found", "Optimal Solution Found", "Solution Found", "No Solution Exists", "Solution is Unbounded")
PULP_STATUS_MAP: dict[tuple[str, str], Termination] = {(s, q): Termination.UNKNOWN for s in _LP_STATUS for q in _LP_SOLUTION}
PULP_STATUS_MAP.update(
    {
        ("Optimal", "Optimal Solution Found"): Termination.OPTIMAL,
        ("Optimal", "Solution Found"): Termination.INTERRUPTED,  # a limit stopped the search with an incumbent
        ("Not Solved", "No Solution Found"): Termination.UNKNOWN,  # a limit stopped it before any solution
        ("Not Solved", "No Solution Exists"): Termination.UNKNOWN,
        ("Infeasible", "No Solution Exists"): Termination.INFEASIBLE,
        ("Infeasible", "No Solution Found"): Termination.INFEASIBLE,  # CBC's "Integer infeasible"
        ("Unbounded", "Solution is Unbounded"): Termination.INFEASIBLE_OR_UNBOUNDED,  # dual infeasible
        ("Undefined", "No Solution Exists"): Termination.UNKNOWN,
        ("Undefined", "No Solution Found"): Termination.UNKNOWN,
    }
)

#: CBC's ``Result - <primary><secondary>`` line (CbcSolver: statusName[] x minor[]). The
#: primary prefix decides first; with an empty or "Stopped on " prefix the secondary part
#: names the outcome or the limit.
CBC_PRIMARY_MAP: dict[str, Termination | None] = {
    "": None,  # finished: see the secondary part
    "Stopped on ": None,  # a limit: the secondary part names it
    "Run abandoned": Termination.ERROR,
    "User ctrl-c": Termination.INTERRUPTED,
}
CBC_SECONDARY_MAP: dict[str, Termination] = {
    "Optimal solution found": Termination.OPTIMAL,
    "Linear relaxation infeasible": Termination.INFEASIBLE,
    "Optimal solution found (within gap tolerance)": Termination.OPTIMAL,
    "node limit": Termination.NODE_LIMIT,
    "time limit": Termination.TIME_LIMIT,
    "user ctrl-c": Termination.INTERRUPTED,
    "solution limit": Termination.SOLUTION_LIMIT,
    "Linear relaxation unbounded": Termination.INFEASIBLE_OR_UNBOUNDED,
    "Problem proven infeasible": Termination.INFEASIBLE,
}

PULP_CBC_STATUS_MAP: dict[Any, Termination | None] = {**PULP_STATUS_MAP, **CBC_PRIMARY_MAP, **CBC_SECONDARY_MAP}

#: pulp-highs reads HiGHS's own model status from PuLP's Highs object (plus PuLP's pair as
#: a fallback)
PULP_HIGHS_STATUS_MAP: dict[Any, Termination] = {**PULP_STATUS_MAP, **HIGHS_STATUS_MAP}


def write_cbc_start(path: str, x: np.ndarray) -> None:
    """A CBC MIP start file (``-mips``) in CBC's own solution format, columns named C<j>."""
    vals = mps_number_strings(x)
    with open(path, "w") as fh:
        fh.write("Stopped on time - objective value 0\n")
        fh.write("".join(f"{j:>7} {generic_name('C', j)} {v:>15} {0:>23}\n" for j, v in enumerate(vals)))


# -- CBC log ------------------------------------------------------------------------------


@dataclass
class CbcLog:
    """What CBC's log says about a run (objective values are CBC's, i.e. of the min problem)."""

    result_line: str | None  # the text after "Result - "
    termination: Termination | None
    has_solution: bool | None  # None when the log has no summary block
    objective: float | None
    lower_bound: float | None  # proven lower bound, weakened by the printed rounding
    nodes: int | None
    iterations: int | None
    #: "Objective value:" less half a unit of its last printed digit: the bound a completed
    #: search proves (the solution file's values carry only 8 significant digits, so c @ x
    #: of them can exceed the optimum: 2202.2764 for 2202.27636508)
    objective_lower: float | None = None


_FLOAT = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf|nan)"


def rounding_slack(text: str, significant: bool) -> float:
    """Half a unit in the last printed place of ``text`` (a number CBC printed rounded).

    ``significant``: printed with ``%g`` (6 significant digits) rather than fixed decimals.
    """
    value = float(text)
    if not math.isfinite(value):
        return 0.0
    if significant:
        if value == 0.0:
            return 5e-7
        return 0.5 * 10.0 ** (math.floor(math.log10(abs(value))) - 5)
    mantissa = text.lower().split("e")[0]
    decimals = len(mantissa.split(".")[1]) if "." in mantissa else 0
    return 0.5 * 10.0 ** (-decimals)


def parse_cbc_result(line: str) -> Termination | None:
    """Map the text after ``Result - `` to a termination (None if unrecognized)."""
    text = line.strip()
    for prefix in ("Stopped on ", "Run abandoned", "User ctrl-c"):
        if text.startswith(prefix):
            fixed = CBC_PRIMARY_MAP[prefix]
            if fixed is not None:
                return fixed
            return CBC_SECONDARY_MAP.get(text[len(prefix) :].strip())
    return CBC_SECONDARY_MAP.get(text)


def parse_cbc_log(log: str) -> CbcLog:
    """Read CBC's final summary (``Result - ...``, ``Objective value:``, ``Lower bound:``,
    ``Enumerated nodes:``, ``Total iterations:``) and the final "Partial search ... best
    possible" line of a stopped search.

    Every bound read is made conservative by its printing precision, so it stays proven.
    """
    result_line: str | None = None
    termination: Termination | None = None
    has_solution: bool | None = None
    objective: float | None = None
    objective_lower: float | None = None
    lower: float | None = None
    nodes: int | None = None
    iterations: int | None = None
    partial: float | None = None
    gap_exit: float | None = None  # CBC's "best - best possible" when the main search stopped on its gap
    gap_bound: float | None = None
    for line in log.splitlines():
        s = line.strip()
        if result_line is None and (m := re.search(r"Exiting as integer gap of (" + _FLOAT + r")", s)):
            gap_exit = float(m.group(1)) + rounding_slack(m.group(1), significant=False)
        elif result_line is None and (m := re.search(r"Search completed - best objective (" + _FLOAT + r")", s)):
            # best - gap: the best possible value CBC held when it stopped on the gap (each
            # printed number widened by half a unit of its last written digit)
            best = float(m.group(1)) - rounding_slack(m.group(1), significant=False)
            gap_bound = None if gap_exit is None else best - gap_exit
            gap_exit = None
        if s.startswith("Result - "):
            result_line = s[len("Result - ") :]
            termination = parse_cbc_result(result_line)
            has_solution = False
            objective = lower = None
        elif result_line is not None and s.startswith("Objective value:"):
            m = re.search(_FLOAT, s[len("Objective value:") :])
            if m:
                objective = float(m.group(0))
                objective_lower = objective - rounding_slack(m.group(0), significant=False)
                has_solution = True
        elif result_line is not None and s.startswith("No feasible solution found"):
            has_solution = False
        elif result_line is not None and s.startswith("Lower bound:"):
            m = re.search(_FLOAT, s[len("Lower bound:") :])
            if m:
                lower = float(m.group(0)) - rounding_slack(m.group(0), significant=False)
        elif s.startswith("Enumerated nodes:"):
            m = re.search(r"\d+", s)
            nodes = int(m.group(0)) if m else None
        elif s.startswith("Total iterations:"):
            m = re.search(r"\d+", s)
            iterations = int(m.group(0)) if m else None
        elif result_line is None and "Partial search - best objective" in s:
            # the main search's final message (printed with %g); heuristics' sub-searches
            # are quiet at the default log level, and the last one before "Result" wins
            m = re.search(r"best possible (" + _FLOAT + r")", s)
            if m:
                partial = float(m.group(1)) - rounding_slack(m.group(1), significant=True)
    if termination is not None and termination is not Termination.OPTIMAL and partial is not None:
        candidates = [v for v in (lower, partial) if v is not None and math.isfinite(v)]
        lower = max(candidates) if candidates else lower
    if result_line == "Optimal solution found (within gap tolerance)" and gap_bound is not None and math.isfinite(gap_bound):
        lower = gap_bound if lower is None else max(lower, gap_bound)  # "Lower bound:" is printed with 3 decimals
    return CbcLog(result_line, termination, has_solution, objective, lower, nodes, iterations, objective_lower)


def completed_search_bound(parsed: CbcLog, arrays: ModelArrays, values: np.ndarray | None) -> float | None:
    """The bound a completed CBC search proves (min form, no offset): the smaller of its
    printed "Objective value" (less its rounding) and c @ x of its solution. Each alone has
    failed: the solution file's 8 significant digits put c @ x 2.4e-11 s above the optimum,
    and CBC has printed -0.5 for a solution of value -1.5 (random MILP test)."""
    candidates = [] if parsed.objective_lower is None else [parsed.objective_lower]
    if values is not None and values.shape == (arrays.num_vars,) and np.all(np.isfinite(values)):
        candidates.append(float(objective_sign(arrays) * (arrays.c @ values)))
    return min(candidates) if candidates else None


def read_cbc_solution(path: str, n: int) -> tuple[str, np.ndarray | None]:
    """CBC's solution file: the status line and the values of columns C0..C<n-1>."""
    if not os.path.exists(path):
        return "", None
    with open(path) as fh:
        first = fh.readline().strip()
        x = np.zeros(n)
        seen = np.zeros(n, dtype=bool)
        for line in fh:
            parts = line.split()
            if len(parts) < 3:
                continue
            if parts[0] == "**":
                parts = parts[1:]
            name = parts[1]
            if name[:1] == "C" and name[1:].isdigit():
                j = int(name[1:])
                if j < n:
                    x[j] = float(parts[2])
                    seen[j] = True
    if n and not seen.all():
        return first, None
    return first, x


def cbc_path() -> str:
    """The CBC binary PuLP bundles (PULP_CBC_CMD's), without constructing the deprecated solver."""
    from pulp.apis.coin_api import PULP_CBC_CMD

    return str(PULP_CBC_CMD.pulp_cbc_path)


#: what CBC prints for an option it does not take (its command line, 2.10): an unknown
#: name, a value that is not a number, out of range, or not one of a keyword's choices
CBC_REFUSALS = (("No match for {key}", "CBC has no such option"), ("is illegal for", "a value of the wrong type"),
                ("valid range is", "a value out of its range"), ("<Possible options for", "not one of its choices"))


def cbc_refused_option(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of ``raw`` (``-key value`` on CBC's command line, as both CBC backends pass
    them) that CBC refuses, asked of the CBC binary with ``-quit`` (10-20 ms per option):
    CBC itself only prints a line and solves on (review rev16: ``nosuch_opt=1`` ran)."""
    for key, value in raw.items():
        args = [f"-{key}"] + ([] if value is None or value == "" else [str(value)])
        proc = subprocess.run([cbc_path(), *args, "-quit"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
        for pattern, why in CBC_REFUSALS:
            if pattern.format(key=key) in proc.stdout:
                return str(key), why
    return None


def _cbc_available() -> bool:
    path = cbc_path()
    return os.path.isfile(path) and os.access(path, os.X_OK)


@functools.cache
def _cbc_version() -> str:
    proc = subprocess.run([cbc_path(), "-quit"], capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    m = re.search(r"Version:\s*(\S+)", proc.stdout)
    return f"CBC {m.group(1) if m else 'unknown'} (PuLP {package_version('pulp')})"


def pulp_status_of_solution_file(path: str) -> tuple[str, str]:
    """PuLP's own reading of a CBC solution file, as names of (LpStatus, LpSolution)."""
    import pulp
    from pulp.apis.coin_api import COIN_CMD

    status, sol_status = COIN_CMD(path=cbc_path(), msg=False).get_status(path)
    return pulp.LpStatus[status], pulp.LpSolution[sol_status]


def cbc_arguments(options: SolveOptions, is_mip: bool) -> list[str]:
    """CBC command-line options for time limit, gap, threads, seed and raw extras."""
    args: list[str] = []
    if options.time_limit is not None:
        args += ["-sec", repr(float(max(options.time_limit, 0.0))), "-timeMode", "elapsed"]
    if options.mip_gap is not None and is_mip:
        args += ["-ratioGap", repr(float(options.mip_gap))]
    if options.threads is not None:
        args += ["-threads", str(int(options.threads))]
    if options.seed is not None:
        args += ["-randomSeed", str(int(options.seed)), "-randomCbcSeed", str(int(options.seed))]
    if is_mip and "increment" not in options.raw:
        # CBC's default cutoff increment is 1e-5 in objective units: it then ignores better
        # solutions within 1e-5 and still says "Optimal solution found" (on an objective in
        # seconds it proved 0.0061878 optimal where 0.0061858 exists). Only the gap
        # tolerances above may end the search early; an integral objective still gets its
        # own increment (gcd of the costs) from CBC, which loses nothing.
        args += ["-increment", "0"]
    for key, value in options.raw.items():
        args += [f"-{key}"] + ([] if value is None or value == "" else [str(value)])
    return args


def run_logged(args: list[str], log_path: str, verbose: bool) -> int:
    """Run a solver binary, its output captured in ``log_path`` and echoed when verbose."""
    with open(log_path, "w") as log_fh:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            log_fh.write(line)
            if verbose:
                echo_to_stderr(line)
        return proc.wait()


#: what CBC prints once the continuous relaxation is solved, before its preprocessing runs
CBC_LP_SOLVED = "Continuous objective value is"


def recheck_without_preprocessing(
    solve_once: Callable[[ModelArrays, SolveOptions, np.ndarray | None], SolverResult],
    arrays: ModelArrays,
    options: SolveOptions,
    warm_start: np.ndarray | None,
) -> SolverResult:
    """Solve with CBC; a MILP it calls infeasible is solved again with its preprocessing
    off (in the time left), and that second verdict stands.

    CBC 2.10.3's preprocessing calls a feasible MILP "Integer infeasible": max x1 + x3 with
    x0 in [0, 0] and x1 in [0, 2] integer, x2, x3 in [-2, 3]; 3 x1 - x2 - x3 >= -0.5 and
    x2 + x3 >= 0.5 (plus a row with no coefficients); (0, 2, 0, 3) meets them with value 5,
    which HiGHS, SCIP and CBC without preprocessing find. A preprocessing setting given in
    ``options.raw`` is the user's, and its verdict is not second-guessed; neither is one
    given before preprocessing, on the continuous relaxation (no `CBC_LP_SOLVED` line).

    Without preprocessing the same CBC crashes (SIGSEGV) on MILPs that are infeasible
    (2 x = 3, x integer): when the second run fails so, the first verdict stands, marked
    unconfirmed in ``extra["preprocess_recheck"]`` (as it stood before this check)."""
    started = time.perf_counter()
    first = solve_once(arrays, options, warm_start)
    if not (arrays.is_mip and first.termination is Termination.INFEASIBLE) or cbc_sets(options.raw, "preprocess"):
        return first
    if CBC_LP_SOLVED not in first.log:  # the continuous relaxation was infeasible: preprocessing never ran
        return first
    spent = time.perf_counter() - started
    limit = None if options.time_limit is None else max(options.time_limit - spent, 0.01)
    again = solve_once(arrays, options.with_(raw={**options.raw, "preprocess": "off"}, time_limit=limit), warm_start)
    log = f"{first.log}\n--- solved again with preprocessing off (the first run said infeasible) ---\n{again.log}"
    if again.termination is Termination.ERROR:
        first.handover_seconds += again.handover_seconds
        first.solve_seconds += again.solve_seconds
        first.log = log
        first.extra["preprocess_recheck"] = f"infeasible with preprocessing, unconfirmed: the run without it failed ({again.message})"
        return first
    again.handover_seconds += first.handover_seconds
    again.solve_seconds += first.solve_seconds
    again.log = log
    again.extra["preprocess_recheck"] = f"{first.termination.value} with preprocessing, {again.termination.value} without"
    return again


# -- pulp-cbc ----------------------------------------------------------------------------


def solve_cbc(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    return recheck_without_preprocessing(_solve_cbc_once, arrays, options, warm_start)


def _solve_cbc_once(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    t0 = time.perf_counter()
    version = _cbc_version()
    workdir = tempfile.mkdtemp(prefix="distplan-cbc-")
    try:
        mps, sol, log_path, start = (os.path.join(workdir, f) for f in ("model.mps", "model.sol", "cbc.log", "start.sol"))
        write_mps(arrays, mps, generic_names=True, minimize=True)
        args = [cbc_path(), mps, *cbc_arguments(options, arrays.is_mip)]
        if warm_start is not None and arrays.is_mip:
            write_cbc_start(start, np.asarray(warm_start, dtype=float))
            args += ["-mips", start]
        args += ["-solve", "-printingOptions", "all", "-solution", sol]
        t1 = time.perf_counter()
        rc = run_logged(args, log_path, options.verbose)
        t2 = time.perf_counter()
        with open(log_path, errors="replace") as fh:
            log = fh.read()
        if rc != 0 or not os.path.exists(sol):
            return error_result("pulp-cbc", version, f"CBC exited with code {rc} and no solution file", log, t2 - t1)
        first_line, values = read_cbc_solution(sol, arrays.num_vars)
        pulp_pair = pulp_status_of_solution_file(sol)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    parsed = parse_cbc_log(log)
    if parsed.termination is not None:
        termination = parsed.termination
        has_solution = bool(parsed.has_solution)
        raw = f"Result - {parsed.result_line}; {first_line}"
    else:  # no branch-and-bound summary (e.g. the LP was settled before it): PuLP's reading
        termination = map_status(PULP_STATUS_MAP, pulp_pair, "pulp-cbc")
        has_solution = termination is Termination.OPTIMAL
        raw = first_line
    bound_min = parsed.lower_bound if arrays.is_mip else None
    completed = parsed.result_line != "Optimal solution found (within gap tolerance)" and not float(options.raw.get("increment") or 0.0)
    from_point = termination is Termination.OPTIMAL and completed and bound_min is None
    if from_point:
        bound_min = completed_search_bound(parsed, arrays, values if has_solution else None)
    if termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED):
        has_solution = True  # finish_result keeps the point only if it proves unboundedness
    return finish_result(
        backend="pulp-cbc",
        version=version,
        arrays=arrays,
        termination=termination,
        values=values if has_solution else None,
        bound_min=bound_min,
        raw_status=f"{raw} [PuLP: {pulp_pair[0]} / {pulp_pair[1]}]",
        log=log,
        handover_seconds=t1 - t0,
        solve_seconds=t2 - t1,
        nodes=parsed.nodes,
        iterations=parsed.iterations,
        # "Optimal solution found" means the search completed; "(within gap tolerance)"
        # does not, and then only the bound read from the log counts; a cutoff increment
        # given by the user makes even a completed search end short of the optimum
        proven_optimal_bound=completed,
        bound_from_point=from_point,
    )


# -- pulp-highs --------------------------------------------------------------------------


def build_pulp_problem(arrays: ModelArrays) -> tuple[Any, list[Any]]:
    """A PuLP LpProblem for ``min sign * c @ x`` (ranged rows become two rows, free rows are
    dropped) and its variables in column order."""
    import pulp

    n = arrays.num_vars
    prob = pulp.LpProblem("distplan", pulp.LpMinimize)
    integ = arrays.integrality.astype(bool).tolist()
    lo = [None if not math.isfinite(v) else v for v in arrays.col_lo.tolist()]
    hi = [None if not math.isfinite(v) else v for v in arrays.col_hi.tolist()]
    cont, intg = pulp.LpContinuous, pulp.LpInteger
    # PuLP >= 3.3 creates variables through the problem (PuLP 4.0 API); older PuLP directly.
    # Variables no row or objective mentions stay out of PuLP's model (see `fill_unmentioned`).
    make = getattr(prob, "add_variable", None) or pulp.LpVariable
    xs = [make(f"x{j}", lo[j], hi[j], intg if integ[j] else cont) for j in range(n)]
    c = objective_sign(arrays) * arrays.c
    nz = np.flatnonzero(c)
    prob.setObjective(pulp.LpAffineExpression([(xs[j], v) for j, v in zip(nz.tolist(), c[nz].tolist())]))
    A = arrays.A.tocsr()
    indptr, indices, data = A.indptr.tolist(), A.indices.tolist(), A.data.tolist()
    row_lo, row_hi = arrays.row_lo.tolist(), arrays.row_hi.tolist()
    LE, GE, EQ = pulp.LpConstraintLE, pulp.LpConstraintGE, pulp.LpConstraintEQ
    for i in range(arrays.num_rows):
        lo_i, hi_i = row_lo[i], row_hi[i]
        if not (math.isfinite(lo_i) or math.isfinite(hi_i)):
            continue
        s, e = indptr[i], indptr[i + 1]
        terms = [(xs[j], v) for j, v in zip(indices[s:e], data[s:e])]
        if lo_i == hi_i:
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), EQ, f"r{i}", lo_i))
            continue
        if math.isfinite(hi_i):
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), LE, f"r{i}_hi", hi_i))
        if math.isfinite(lo_i):
            prob.addConstraint(pulp.LpConstraint(pulp.LpAffineExpression(terms), GE, f"r{i}_lo", lo_i))
    return prob, xs


@functools.cache
def _pulp_highs_version() -> str:
    return f"HiGHS {highs_version()} (PuLP {package_version('pulp')})"


def solve_pulp_highs(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    """pulp-highs: PuLP's own model objects, solved by PuLP's HiGHS API."""
    import pulp

    t0 = time.perf_counter()
    prob, xs = build_pulp_problem(arrays)
    fd, log_path = tempfile.mkstemp(prefix="distplan-pulp-highs-", suffix=".log")
    os.close(fd)
    params: dict[str, Any] = {"output_flag": True, "log_to_console": False, "log_file": log_path}
    if options.seed is not None:
        params["random_seed"] = int(options.seed)
    params.update(options.raw)
    start = None if warm_start is None or not arrays.is_mip else np.asarray(warm_start, dtype=float)

    class _HighsWithStart(pulp.HiGHS):  # type: ignore[misc,name-defined]
        """PuLP's HiGHS API plus a MIP start handed to the Highs object before it runs, and
        tolerant of HiGHS statuses PuLP's own table does not list."""

        def callSolver(self, lp: Any) -> None:  # noqa: N802 (PuLP's name)
            if start is not None:
                col = np.zeros(lp.solverModel.getNumCol())
                for var in lp.variables():  # PuLP numbered them in buildSolverModel
                    col[var.index] = start[int(var.name[1:])]
                sol = highspy.HighsSolution()
                sol.col_value = col.tolist()
                sol.value_valid = True
                lp.solverModel.setSolution(sol)
            lp.solverModel.run()

        def findSolutionValues(self, lp: Any) -> Any:  # noqa: N802 (PuLP's name)
            try:
                return super().findSolutionValues(lp)
            except KeyError:  # PuLP's table lacks newer HiGHS statuses (e.g. kSolutionLimit of a node limit)
                return pulp.LpStatusNotSolved, pulp.LpSolutionNoSolutionFound

    solver = _HighsWithStart(
        mip=True,
        msg=False,
        gapRel=options.mip_gap,
        threads=options.threads,
        timeLimit=options.time_limit,
        **params,
    )
    use_threads(options.threads)
    t1 = time.perf_counter()
    try:
        prob.solve(solver)
    except pulp.PulpSolverError as exc:
        return error_result("pulp-highs", _pulp_highs_version(), str(exc), seconds=time.perf_counter() - t1)
    finally:
        with open(log_path, errors="replace") as fh:
            log = fh.read()
        os.unlink(log_path)
        if options.verbose:
            echo_to_stderr(log)
    t2 = time.perf_counter()
    pair = (pulp.LpStatus[prob.status], pulp.LpSolution[prob.sol_status])
    highs = prob.solverModel
    raw = highs.getModelStatus()
    info = highs.getInfo()
    # HiGHS's own status names the exact limit PuLP folds into ("Optimal", "Solution Found")
    termination = node_limit(PULP_HIGHS_STATUS_MAP.get(raw, PULP_STATUS_MAP.get(pair, Termination.UNKNOWN)), options, int(info.mip_node_count))
    values = None
    if holds_solution(info) or arrays.num_vars == 0:
        values = fill_unmentioned(np.array([np.nan if v.varValue is None else float(v.varValue) for v in xs]), arrays)
    bound_min: float | None = None
    # PuLP drops variables no row mentions, so HiGHS may have been handed an LP: then its
    # mip_dual_bound is not set (0.0), and the LP optimum is the bound (finish_result)
    highs_ran_a_mip = bool(np.any(np.asarray(highs.getLp().integrality_) != 0))
    if arrays.is_mip and highs_ran_a_mip and np.isfinite(info.mip_dual_bound):
        bound_min = float(info.mip_dual_bound)
    nodes = int(info.mip_node_count) if arrays.is_mip and info.mip_node_count >= 0 else None
    return finish_result(
        backend="pulp-highs",
        version=_pulp_highs_version(),
        arrays=arrays,
        termination=termination,
        values=values,
        bound_min=bound_min,
        raw_status=f"{highs.modelStatusToString(raw)} [PuLP: {pair[0]} / {pair[1]}]",
        log=log,
        handover_seconds=t1 - t0,
        solve_seconds=t2 - t1,
        nodes=nodes,
        iterations=int(info.simplex_iteration_count) if info.simplex_iteration_count >= 0 else None,
    )


PULP_CBC = register_backend(
    Backend(
        name="pulp-cbc",
        description="CBC binary bundled with PuLP, fed a vectorized MPS file",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=True, time_limit=False),
        requires=("pulp",),
        extra=None,
        solve_fn=solve_cbc,
        version_fn=_cbc_version,
        status_map=PULP_CBC_STATUS_MAP,
        availability_fn=_cbc_available,
        program="the CBC binary PuLP bundles",
        options_check_fn=cbc_refused_option,
        reserved_fn=cbc_reserved,
    )
)

PULP_HIGHS = register_backend(
    Backend(
        name="pulp-highs",
        description="PuLP model objects solved by PuLP's HiGHS API (highspy)",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=True, time_limit=True, interruptible_size=ISOLATE_SIZE),
        requires=("pulp", "highspy"),
        extra=None,
        solve_fn=solve_pulp_highs,
        version_fn=_pulp_highs_version,
        status_map=PULP_HIGHS_STATUS_MAP,
        options_check_fn=refused_option,  # (its options go to HiGHS as they are)
        reserved_fn=highs_reserved,  # (its record maps HiGHS's limits as the native backend's: `highs.node_limit`)
    )
)
