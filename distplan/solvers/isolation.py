"""Run a backend's solve in a child process with a hard wall clock.

Some solvers do not reliably honour their own time limit (CBC spends unbounded time in
preprocessing or heuristics, GLPK checks the clock only between phases, HiGHS cannot be
interrupted inside presolve). `Backend.solve` calls `run_isolated` under a time limit when
the backend declares ``Capabilities(time_limit=False)`` or the model is larger than its
``interruptible_size``: the solve runs in a forked child that leads its own process group,
the result comes back through a pipe, and when ``time_limit + kill_grace()`` seconds pass
the whole group (solver binaries started by the child included) is killed and a KILLED
result without a solution is returned. Temporary files of the child go to a scratch
directory the parent removes.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import shutil
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

import numpy as np

from distplan.modeling.model import ModelArrays
from distplan.solvers.common import error_result
from distplan.solvers.options import SolveOptions
from distplan.solvers.result import SolutionStatus, SolverResult, Termination

SolveFunction = Callable[[ModelArrays, SolveOptions, "np.ndarray | None"], SolverResult]

#: how often (seconds) the parent checks whether the child died without answering
_POLL_SECONDS = 0.2


def _child_main(
    solve_fn: SolveFunction,
    arrays: ModelArrays,
    options: SolveOptions,
    warm_start: np.ndarray | None,
    conn: Connection,
    backend: str,
    version: str,
    scratch: str,
    parent_end: Connection,
) -> None:
    parent_end.close()  # only the parent reads: a child holding the read end could block forever
    with contextlib.suppress(OSError):
        os.setpgid(0, 0)  # lead a new process group: the parent kills it as a whole
    _die_with_parent()
    # every temporary file of the solve (model files, logs) lands in the parent's scratch
    # directory, which the parent removes even when it has to kill this process
    tempfile.tempdir = scratch
    os.environ["TMPDIR"] = scratch
    try:
        result = solve_fn(arrays, options, warm_start)
    except Exception as exc:  # reported to the parent as an ERROR result, never raised there
        result = error_result(backend, version, f"{type(exc).__name__}: {exc}", log=traceback.format_exc())
    conn.send(result)
    conn.close()


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when its parent dies (PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_isolated(
    solve_fn: SolveFunction,
    arrays: ModelArrays,
    options: SolveOptions,
    warm_start: np.ndarray | None,
    *,
    backend: str = "isolated",
    version: str = "",
) -> SolverResult:
    """``solve_fn(arrays, options, warm_start)`` in a forked child, killed (with its whole
    process group) after ``options.time_limit + options.kill_grace()`` seconds.

    Returns the child's SolverResult, or one with ``Termination.KILLED`` and no solution when
    the wall clock ran out, or ``Termination.ERROR`` when the child died without answering.
    Without a time limit the child may run as long as it needs.
    """
    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    scratch = tempfile.mkdtemp(prefix="distplan-isolated-")
    proc = ctx.Process(
        target=_child_main,
        args=(solve_fn, arrays, options, warm_start, sender, backend, version, scratch, receiver),
        name=f"distplan-{backend}",
    )
    start = time.perf_counter()
    grace = options.kill_grace()
    deadline = None if options.time_limit is None else start + float(options.time_limit) + grace
    proc.start()
    sender.close()
    pid = proc.pid
    assert pid is not None
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.setpgid(pid, pid)  # also from the parent: no window where the group does not exist yet
    result: Any = None
    died = False
    try:
        while True:
            wait = _POLL_SECONDS if deadline is None else min(_POLL_SECONDS, deadline - time.perf_counter())
            if wait <= 0:
                break
            if receiver.poll(wait):
                try:
                    result = receiver.recv()
                except EOFError:
                    died = True
                break
            if not proc.is_alive() and not receiver.poll(0):
                died = True
                break
    finally:
        _kill_group(pid)  # the solver, anything it started, and the child if still there
        proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
            proc.join()
        receiver.close()
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - start
    if isinstance(result, SolverResult):
        result.extra.setdefault("isolated", True)
        return result
    if died:
        dead = error_result(backend, version, f"the solver process exited with code {proc.exitcode} without a result", seconds=elapsed)
        dead.raw_status = "child died"
        dead.extra["isolated"] = True
        return dead
    return SolverResult(
        backend=backend,
        backend_version=version,
        termination=Termination.KILLED,
        status=SolutionStatus.NONE,
        solve_seconds=elapsed,
        raw_status="killed",
        message=(
            f"killed after {elapsed:.1f} s: time_limit {options.time_limit} s + grace {grace:.1f} s "
            "passed without an answer"
        ),
        extra={"isolated": True},
    )
