"""HiGHS through highspy, in memory: the embedded default backend.

The assembled arrays are handed over directly as a column-wise sparse matrix
(no LP/MPS files).

Time limits are hard. HiGHS checks its clock only between phases and LP solves: its
presolve of a large model (111k rows: codec_select on compression-bert-large) or the root
LP of a large time-indexed model can run minutes past ``time_limit``. The backend declares
``interruptible_size=ISOLATE_SIZE``: a larger model solved under a time limit runs in an
isolated child process (`distplan.solvers.isolation`), killed ``kill_grace()`` after it.
"""

from __future__ import annotations

import functools
import os
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

import highspy
import numpy as np

from distplan.modeling.model import ModelArrays
from distplan.solvers.base import Backend, Capabilities, SolveOptions, register_backend
from distplan.solvers.capture import echo_to_stderr
from distplan.solvers.common import finish_result
from distplan.solvers.reserved import highs_reserved
from distplan.solvers.result import SolverResult, Termination, map_status
from distplan.solvers.safe_bound import lp_safe_bound

_S = highspy.HighsModelStatus
STATUS_MAP: dict[object, Termination] = {
    _S.kNotset: Termination.UNKNOWN,
    _S.kLoadError: Termination.ERROR,
    _S.kModelError: Termination.ERROR,
    _S.kPresolveError: Termination.ERROR,
    _S.kSolveError: Termination.ERROR,
    _S.kPostsolveError: Termination.ERROR,
    _S.kModelEmpty: Termination.OPTIMAL,
    _S.kOptimal: Termination.OPTIMAL,
    _S.kInfeasible: Termination.INFEASIBLE,
    _S.kUnboundedOrInfeasible: Termination.INFEASIBLE_OR_UNBOUNDED,
    _S.kUnbounded: Termination.UNBOUNDED,
    _S.kObjectiveBound: Termination.OBJECTIVE_LIMIT,
    _S.kObjectiveTarget: Termination.OBJECTIVE_LIMIT,
    _S.kTimeLimit: Termination.TIME_LIMIT,
    _S.kIterationLimit: Termination.ITERATION_LIMIT,
    _S.kUnknown: Termination.UNKNOWN,
    _S.kSolutionLimit: Termination.SOLUTION_LIMIT,
    _S.kInterrupt: Termination.INTERRUPTED,
    _S.kMemoryLimit: Termination.ERROR,
}
if hasattr(_S, "kHighsInterrupt"):  # highspy >= 1.12
    STATUS_MAP[_S.kHighsInterrupt] = Termination.INTERRUPTED
#: `STATUS_MAP` by the statuses' names ("kTimeLimit"), as cvxpy 1.9 hands them on
STATUS_BY_NAME: dict[str, Termination] = {status.name: term for status, term in STATUS_MAP.items()}  # type: ignore[attr-defined]


def holds_solution(info: object) -> bool:
    """Whether HiGHS's ``info`` says it holds a feasible point (``primal_solution_status``
    is `kSolutionStatusFeasible`): its column values mean nothing otherwise."""
    return int(getattr(info, "primal_solution_status", 0)) == int(highspy.SolutionStatus.kSolutionStatusFeasible)


#: A pure LP with at most this many columns + rows is solved without presolve: on such
#: small LPs HiGHS's presolve costs more than the simplex it saves (1.0 ms of presolve vs
#: 0.6 ms of simplex on the 502 x 295 folded sharding LP, benchmarks/bench_sharding.py).
SMALL_LP_SIZE = 1_000


#: A model with more rows + columns than this, solved under a time limit, runs in an
#: isolated child process (HiGHS cannot be interrupted inside presolve, a long LP or the
#: root's cut separation). Forking costs ~10-30 ms, nothing next to the seconds such a
#: model takes. Measured: the time-indexed pipeline_milp model of an M-shaped pipeline
#: (4 stages, 8 micro-batches, B/W split, memory 4; 8,663 rows + 3,055 columns) spent 30 s
#: in root cut separation past a 13 s limit (20,000 let it run in process).
ISOLATE_SIZE = 10_000


@functools.cache
def highs_version() -> str:
    h = highspy.Highs()
    return str(h.version())


# -- HiGHS's thread scheduler, and fork ------------------------------------------------------
#
# HiGHS keeps its task scheduler (a task deque per thread, ``threads - 1`` worker threads)
# in a thread-local handle: a thread's first run makes one with the ``threads`` option then
# in force, and every later run *on that thread* uses it (another thread gets its own: with
# highspy 1.16 a second thread runs threads=1 while the first holds a 2-thread scheduler). A
# later run on the thread asking for another number of threads fails (model status
# "Notset", "...can be destroyed by calling Highs::resetGlobalScheduler"): `use_threads`
# resets it first, keeping per thread which number it was made with (one number for the
# process had the main thread's run at threads=2 fail after another thread ran threads=2
# while the main thread's scheduler had 1).
#
# Fork. A child has only the forking thread. Its inherited scheduler hands tasks to workers
# that do not exist: its next MIP waits forever. Resetting that scheduler in the child (an
# after-fork handler did so until this change) is not safe either: the reset wakes each
# worker through a semaphore whose mutex the worker holds for a moment on its way to sleep
# (5 ms after its last task, so after every run); a worker holding it at the fork left it
# locked for good in the child, which hung in the handler (gdb: pthread_mutex_lock in
# Highs::resetThreadScheduler). The kernel copies the page tables while the other threads
# run on, so the window grows with the fork's length. Measured with highspy 1.16 (a parent
# solving a knapsack at threads=2, then forking 0-10 ms later; the child solves): 8 of 3,100
# children hung with 300-800 MB resident (fork 4-12 ms median, up to 37 ms; 2 cores, busy or
# not), 0 of 2,000 with 145 MB; an LD_PRELOAD delay of 3 ms before pthread_cond_wait hung 18
# of 100. This fits the one timeout in six full suite runs (pytest's process: 300 MB-1 GB) of
# test_backends.py::test_a_forked_child_solves_after_the_parent_ran_highs_threads.
#
# So no worker of the forking thread's scheduler exists at a fork: a before-fork handler
# shuts that scheduler down in the parent, joining its workers, and the next run on either
# side makes a fresh one (0 of the same 3,100 children hung, 0 of 100 with the delay). The
# handler costs 0.1-0.2 ms median when the thread has a scheduler (a few ms on 2 saturated
# cores) and 1 us when it has none, next to the fork's milliseconds; the knapsack at
# threads=2 takes the same 1.8-1.9 ms with a fresh scheduler as with a kept one. The child
# never touches other threads' schedulers.


#: per thread: threads of the scheduler HiGHS holds for it, when distplan asked for a number
#: (None: HiGHS's default, or no scheduler yet)
_scheduler = threading.local()


def use_threads(threads: int | None) -> None:
    """Make the calling thread's HiGHS scheduler fit the ``threads`` option of its next run:
    reset it (blocking until its workers stopped) when a run asks for a number other than
    the one it was made with. ``None`` keeps whatever exists (HiGHS's default accepts any
    scheduler)."""
    if threads is None:
        return
    if threads != getattr(_scheduler, "threads", None):
        highspy.Highs.resetGlobalScheduler(True)
        _scheduler.threads = threads


def _stop_scheduler_before_fork() -> None:
    """Shut the forking thread's HiGHS scheduler down and join its workers (see above)."""
    highspy.Highs.resetGlobalScheduler(True)
    _scheduler.threads = None


os.register_at_fork(before=_stop_scheduler_before_fork)


def pass_arrays(h: highspy.Highs, arrays: ModelArrays) -> None:
    """Hand the arrays to HiGHS in memory (addVars / addRows with the CSR buffers); HiGHS
    always minimizes here, a maximization is negated."""
    inf = highspy.kHighsInf
    n = arrays.num_vars
    sign = -1.0 if arrays.sense == "max" else 1.0
    lo = np.where(np.isfinite(arrays.col_lo), arrays.col_lo, -inf)
    hi = np.where(np.isfinite(arrays.col_hi), arrays.col_hi, inf)
    h.addVars(n, lo, hi)
    cols = np.arange(n, dtype=np.int32)
    if n:
        h.changeColsCost(n, cols, sign * arrays.c)
    if arrays.offset:
        h.changeObjectiveOffset(sign * arrays.offset)
    if arrays.num_rows:
        A = arrays.A
        rl = np.where(np.isfinite(arrays.row_lo), arrays.row_lo, -inf)
        rh = np.where(np.isfinite(arrays.row_hi), arrays.row_hi, inf)
        h.addRows(arrays.num_rows, rl, rh, A.nnz, A.indptr.astype(np.int32), A.indices.astype(np.int32), A.data.astype(np.float64))
    if arrays.is_mip:
        ints = np.flatnonzero(arrays.integrality).astype(np.int32)
        kinds = np.full(ints.size, highspy.HighsVarType.kInteger)
        h.changeColsIntegrality(ints.size, ints, kinds)


def node_limit(termination: Termination, options: SolveOptions, nodes: int) -> Termination:
    """HiGHS reports its node limits (``mip_max_nodes``, ``mip_max_leaves``) as "Solution
    limit reached", as it does ``mip_max_improving_sols``: NODE_LIMIT when a node limit was
    set and the search explored that many nodes (review rev16: ``mip_max_nodes=0`` read
    solution_limit)."""
    if termination is not Termination.SOLUTION_LIMIT:
        return termination
    limits = [int(options.raw[k]) for k in ("mip_max_nodes", "mip_max_leaves") if k in options.raw]
    if limits and nodes >= min(limits):
        return Termination.NODE_LIMIT
    return termination


def solve(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    """One HiGHS run on the arrays. The hand-over counts against ``time_limit``: HiGHS is
    given what is left of it when the model is in."""
    t0 = time.perf_counter()
    use_threads(options.threads)
    h = highspy.Highs()
    fd, log_path = tempfile.mkstemp(prefix="distplan-highs-", suffix=".log")
    os.close(fd)
    h.setOptionValue("output_flag", True)
    h.setOptionValue("log_to_console", False)
    h.setOptionValue("log_file", log_path)
    if options.verbose:  # live, on stderr: logs never go to stdout
        h.cbLogging.subscribe(lambda event: echo_to_stderr(str(event.message)))
    if options.mip_gap is not None:
        h.setOptionValue("mip_rel_gap", float(options.mip_gap))
    if options.threads is not None:
        h.setOptionValue("threads", int(options.threads))
    if options.seed is not None:
        h.setOptionValue("random_seed", int(options.seed))
    if options.lp_method == "barrier":
        h.setOptionValue("solver", "ipm")
    elif options.lp_method == "simplex":
        h.setOptionValue("solver", "simplex")
    if not arrays.is_mip and arrays.num_vars + arrays.num_rows <= SMALL_LP_SIZE and "presolve" not in options.raw:
        h.setOptionValue("presolve", "off")
    for key, value in options.raw.items():
        h.setOptionValue(key, value)
    pass_arrays(h, arrays)
    if warm_start is not None and arrays.is_mip:
        sol = highspy.HighsSolution()
        sol.col_value = list(np.asarray(warm_start, dtype=float))
        sol.value_valid = True
        h.setSolution(sol)
    t1 = time.perf_counter()
    if options.time_limit is not None:
        h.setOptionValue("time_limit", max(float(options.time_limit) - (t1 - t0), 1e-3))
    h.run()
    t2 = time.perf_counter()
    raw = h.getModelStatus()
    info = h.getInfo()
    sign = -1.0 if arrays.sense == "max" else 1.0
    values = np.asarray(h.getSolution().col_value, dtype=float) if holds_solution(info) else None
    bound_min: float | None = None  # of min sign * c @ x without the offset HiGHS was given
    if arrays.is_mip and np.isfinite(info.mip_dual_bound):
        bound_min = float(info.mip_dual_bound) - sign * float(arrays.offset)
    with open(log_path, errors="replace") as fh:
        log = fh.read()
    os.unlink(log_path)
    result = finish_result(
        backend="highs",
        version=highs_version(),
        arrays=arrays,
        termination=node_limit(map_status(STATUS_MAP, raw, "highs"), options, int(info.mip_node_count)),
        values=values,
        bound_min=bound_min,
        raw_status=h.modelStatusToString(raw),
        log=log,
        handover_seconds=t1 - t0,
        solve_seconds=t2 - t1,
        nodes=int(info.mip_node_count) if arrays.is_mip and info.mip_node_count >= 0 else None,
        iterations=int(info.simplex_iteration_count) if info.simplex_iteration_count >= 0 else None,
    )
    if not arrays.is_mip and result.bound is not None and result.objective is not None:
        # an optimal LP: the safe bound of HiGHS's dual point (Neumaier-Shcherbina) replaces
        # the margin-based one when it exists
        safe = lp_safe_bound(arrays, np.asarray(h.getSolution().row_dual, dtype=float))
        if safe is not None and (safe <= result.objective if sign > 0 else safe >= result.objective):
            result.bound, result.bound_grade = safe, "safe"
            result.extra["bound_margin"] = abs(result.objective - safe)
    return result


def refused_option(raw: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first of ``raw`` HiGHS refuses (an unknown name, a value of the wrong type or out
    of range), tried on a scratch solver object."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    for key, value in raw.items():
        try:
            status = h.setOptionValue(str(key), value)
        except TypeError:  # a list or an object: no HiGHS option takes one
            status = highspy.HighsStatus.kError
        if status != highspy.HighsStatus.kOk:
            return str(key), "an unknown option, or a value of the wrong type or out of its range"
    return None


BACKEND = register_backend(
    Backend(
        name="highs",
        description="HiGHS via highspy, arrays handed over in memory (default)",
        capabilities=Capabilities(lp=True, milp=True, reports_bound=True, warm_start=True, time_limit=True, interruptible_size=ISOLATE_SIZE),
        requires=("highspy",),
        extra=None,
        solve_fn=solve,
        version_fn=highs_version,
        status_map=STATUS_MAP,
        options_check_fn=refused_option,
        reserved_fn=highs_reserved,
    )
)
