"""Backend interface: capabilities as data, options, availability and the registry."""

from __future__ import annotations

import functools
import importlib
import importlib.util
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import DistplanError, InputError
from distplan.modeling.model import ModelArrays
from distplan.solvers.capture import captured_output, echo_to_stderr
from distplan.solvers.isolation import run_isolated
from distplan.solvers.options import SolveOptions
from distplan.solvers.result import SolutionStatus, SolverResult, Termination


class BackendError(InputError, RuntimeError):
    """A backend cannot take a model, or is not installed: bad input (exit 2), so an
    ``except InputError`` (or ``ValueError``) catches it with every other bad input. Its
    ``path`` is ``backend``; the message is the problem and the fix, unprefixed."""

    def __init__(self, message: str):
        self.path = "backend"
        self.problem = message
        self.fix = None
        DistplanError.__init__(self, message)


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do. Routing and tests read these flags."""

    lp: bool = True
    milp: bool = False
    convex: bool = False  # takes cvxpy problems (conic / QP)
    reports_bound: bool = False  # reports a proven MIP dual bound
    reports_lp_bound: bool = True  # reports a bound on a solved LP (a dual objective); OSQP does not
    warm_start: bool = False
    time_limit: bool = True  # honours time_limit itself (False: always run isolated under a limit)
    #: rows + columns up to which the solver stops within its time limit by itself (None:
    #: any size); a larger model solved under a time limit runs in an isolated child process,
    #: killed `SolveOptions.kill_grace` after the limit (`distplan.solvers.isolation`)
    interruptible_size: int | None = None


SolveFn = Callable[[ModelArrays, SolveOptions, "np.ndarray | None"], SolverResult]


@dataclass(frozen=True)
class Backend:
    """A solver backend: a name, its capabilities, what it needs installed, and how to run.

    ``solve(arrays, options, warm_start)`` takes an assembled model; ``warm_start`` is a
    full solution vector or None. ``solve_convex(problem, options)`` (convex backends only)
    takes a cvxpy problem.
    """

    name: str
    description: str
    capabilities: Capabilities
    requires: tuple[str, ...]  # importable modules
    extra: str | None  # pip extra that installs them
    solve_fn: SolveFn
    version_fn: Callable[[], str]
    status_map: dict[Any, Any] = field(default_factory=dict)
    availability_fn: Callable[[], bool] | None = None
    solve_convex_fn: Callable[[Any, SolveOptions], SolverResult] | None = None
    #: what it needs besides the ``requires`` modules (a solver program, a cvxpy solver),
    #: named when those modules are there and it is not
    program: str = ""
    #: the first of raw solver options (name -> value) the solver refuses, as (name, why);
    #: None when it takes them all (backends without one pass options on unchecked)
    options_check_fn: Callable[[Mapping[str, Any]], tuple[str, str] | None] | None = None
    #: the first of raw solver options that distplan reserves (`distplan.solvers.reserved`:
    #: its own time limit and gap, objective cutoffs), as (name, why, what instead)
    reserved_fn: Callable[[Mapping[str, Any]], tuple[str, str, str] | None] | None = None

    def available(self) -> bool:
        return _available(self.name, self.requires, self.availability_fn)

    def check_options(self, raw: Mapping[str, Any]) -> None:
        """An InputError naming the first raw solver option (``solver_options``, the CLI's
        ``--solver-option``) that distplan reserves (`reserved_fn`) or this backend's solver
        refuses, before anything is solved."""
        reserved = self.reserved_fn(raw) if raw and self.reserved_fn is not None else None
        if reserved is not None:
            name, why, instead = reserved
            raise InputError(f"solver_options.{name}", f"{name} is refused by distplan: {why}", instead)
        if not raw or self.options_check_fn is None or not self.available():
            return
        with captured_output():
            refused = self.options_check_fn(raw)
        if refused is not None:
            name, why = refused
            raise InputError(f"solver_options.{name}", f"{self.name} refuses {name}={raw[name]!r}: {why}", f"see the {self.name} solver's option list")

    def version(self) -> str:
        """The installed solver's version ("not installed", "unknown" when the lookup
        fails); looked up once per process (every solve records it)."""
        if not self.available():
            return "not installed"
        return _version(self.name, self.version_fn)

    def missing(self) -> str | None:
        """What is missing to run it here (None when it is available): the solver program
        when its modules are installed, else the pip extra (or the modules) that install it.
        `check_can_take`, campaigns (``skip_unavailable = false``) and ``distplan list``
        say it."""
        if self.available():
            return None
        if self.program and all(importlib.util.find_spec(m) is not None for m in self.requires):
            return f"{', '.join(self.requires)} {'is' if len(self.requires) == 1 else 'are'} installed, {self.program} is not"
        return f"pip install 'distplan[{self.extra}]'" if self.extra else f"install {', '.join(self.requires)}"

    def check_can_take(self, arrays: ModelArrays | None = None, convex: bool = False) -> None:
        hint = self.missing()
        if hint is not None:
            raise BackendError(f"backend {self.name!r} is not available here: {hint}")
        if convex and not self.capabilities.convex:
            raise BackendError(
                f"backend {self.name!r} cannot take a convex (conic) program; "
                f"use one of: {', '.join(b.name for b in all_backends() if b.capabilities.convex and b.available())}"
            )
        if arrays is not None and arrays.is_mip and not self.capabilities.milp:
            raise BackendError(
                f"backend {self.name!r} takes no integer variables and this model has some; "
                f"use one of: {', '.join(b.name for b in all_backends() if b.capabilities.milp and b.available())}"
            )

    def solve(self, arrays: ModelArrays, options: SolveOptions | None = None, warm_start: np.ndarray | None = None) -> SolverResult:
        options = options or SolveOptions()
        self.check_can_take(arrays)
        if warm_start is not None and not self.capabilities.warm_start:
            warm_start = None
        with captured_output() as printed:
            if self.runs_isolated(arrays, options):
                result = run_isolated(self.solve_fn, arrays, options, warm_start, backend=self.name, version=self.version())
            else:
                result = self.solve_fn(arrays, options, warm_start)
        _check_optimality_claim(result, arrays, options)
        return _with_printed(result, printed.text, options.verbose)

    def runs_isolated(self, arrays: ModelArrays, options: SolveOptions) -> bool:
        """Whether a solve of ``arrays`` runs in an isolated child process: under a time limit,
        when the backend does not honour limits itself or the model is beyond the size up to
        which it can be interrupted."""
        if options.time_limit is None:
            return False
        caps = self.capabilities
        if not caps.time_limit:
            return True
        return caps.interruptible_size is not None and arrays.num_vars + arrays.num_rows > caps.interruptible_size

    def solve_convex(self, problem: Any, options: SolveOptions | None = None) -> SolverResult:
        options = options or SolveOptions()
        self.check_can_take(None, convex=True)
        assert self.solve_convex_fn is not None
        with captured_output() as printed:
            result = self.solve_convex_fn(problem, options)
        return _with_printed(result, printed.text, options.verbose)


#: absolute gap under which solvers stop (HiGHS's ``mip_abs_gap``, CBC's ``allowableGap``)
SOLVER_ABSOLUTE_GAP = 1e-6


def _check_optimality_claim(result: SolverResult, arrays: ModelArrays, options: SolveOptions) -> None:
    """A solver's "optimal" stands only when its own bound (before distplan's margin) is
    within the gap it was given: HiGHS 1.16 can map a MIP start into presolved space with a
    wrong objective and report "Optimal" with a dual bound 15% below its incumbent. Such a
    result keeps its termination (why the solver stopped) but its solution is FEASIBLE."""
    if result.termination is not Termination.OPTIMAL or result.objective is None or result.bound is None:
        return
    margin = float(result.extra.get("bound_margin") or 0.0)
    solver_bound = result.bound + margin if arrays.sense != "max" else result.bound - margin
    gap = abs(result.objective - solver_bound)
    allowed = (options.mip_gap if options.mip_gap is not None else 1e-4) * max(abs(result.objective), 1e-9) + SOLVER_ABSOLUTE_GAP
    if gap > allowed * (1 + 1e-9):
        result.status = SolutionStatus.FEASIBLE
        note = f"the solver said optimal with its bound {solver_bound!r} {gap:.3g} from its objective {result.objective!r}"
        result.message = f"{result.message}; {note}" if result.message else note


def _with_printed(result: SolverResult, printed: str, verbose: bool) -> SolverResult:
    """Add what the solver library printed (outside its own log) to the result's log, and
    show it on stderr when verbose."""
    if printed.strip():
        result.log = f"{result.log}\n{printed}" if result.log else printed
        if verbose:
            echo_to_stderr(printed)
    return result


@functools.cache
@functools.cache
def _version(name: str, version_fn: Callable[[], str]) -> str:
    try:
        with captured_output():  # constructing a solver object may print a banner
            return version_fn()
    except Exception:  # version lookups never fail a solve
        return "unknown"


@functools.cache
def _available(name: str, requires: tuple[str, ...], extra_check: Callable[[], bool] | None) -> bool:
    for mod in requires:
        if importlib.util.find_spec(mod) is None:
            return False
    if extra_check is not None:
        try:
            return bool(extra_check())
        except Exception:
            return False
    return True


_REGISTRY: dict[str, Backend] = {}
#: cvxpy first: OSQP crashes when its library is loaded after PuLP's in one process
_BACKEND_MODULES = (
    "distplan.solvers.cvxpy_backend",
    "distplan.solvers.highs",
    "distplan.solvers.pulp_backend",
    "distplan.solvers.pyomo_backend",
    "distplan.solvers.scip_backend",
)
_loaded = False


def register_backend(backend: Backend) -> Backend:
    if backend.name in _REGISTRY:
        raise ValueError(f"backend {backend.name!r} registered twice")
    _REGISTRY[backend.name] = backend
    return backend


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in _BACKEND_MODULES:
        if importlib.util.find_spec(mod) is None:
            continue
        try:
            importlib.import_module(mod)
        except ImportError as exc:  # a backend whose package is broken is unavailable, not fatal
            warnings.warn(f"solver backends in {mod} are unavailable: {exc}", RuntimeWarning, stacklevel=2)


def all_backends() -> list[Backend]:
    """Every registered backend, available or not."""
    _load()
    return list(_REGISTRY.values())


def get_backend(name: str) -> Backend:
    _load()
    if name not in _REGISTRY:
        raise BackendError(f"unknown backend {name!r}; known backends: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name]
