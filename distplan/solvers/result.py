"""One result record and one status vocabulary for every backend.

Two separate axes (as in Pyomo's newer API and OR-Tools MathOpt): *why the solver
stopped* (`Termination`) and *what solution exists* (`SolutionStatus`). A time-limited
incumbent is ``Termination.TIME_LIMIT`` with ``SolutionStatus.FEASIBLE``, never optimal.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

import numpy as np


class Termination(StrEnum):
    OPTIMAL = "optimal"
    FINISHED = "finished"  # an algorithm (heuristic) ran to completion: no optimality claim
    TIME_LIMIT = "time_limit"
    ITERATION_LIMIT = "iteration_limit"
    NODE_LIMIT = "node_limit"
    SOLUTION_LIMIT = "solution_limit"
    OBJECTIVE_LIMIT = "objective_limit"
    INTERRUPTED = "interrupted"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    INFEASIBLE_OR_UNBOUNDED = "infeasible_or_unbounded"
    NUMERICAL = "numerical"
    ERROR = "error"
    KILLED = "killed"  # the solver process was killed after time_limit + grace
    UNKNOWN = "unknown"


class SolutionStatus(StrEnum):
    NONE = "none"
    FEASIBLE = "feasible"
    OPTIMAL = "optimal"


#: Terminations that say the model has no feasible point.
INFEASIBLE_TERMINATIONS = frozenset({Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED})

#: Terminations that mean "time ran out": the solver's time limit, or its process killed
#: after the limit and its grace.
TIME_TERMINATIONS = frozenset({Termination.TIME_LIMIT, Termination.KILLED})

#: Terminations that mean "a limit stopped the search".
LIMIT_TERMINATIONS = frozenset(
    {
        Termination.TIME_LIMIT,
        Termination.ITERATION_LIMIT,
        Termination.NODE_LIMIT,
        Termination.SOLUTION_LIMIT,
        Termination.OBJECTIVE_LIMIT,
        Termination.INTERRUPTED,
        Termination.KILLED,
    }
)


def map_status(table: Mapping[Any, Termination], raw: object, backend: str, default: Termination = Termination.UNKNOWN) -> Termination:
    """The shared vocabulary's termination for a solver's own status; an unmapped status is
    ``default`` (UNKNOWN) with a warning naming the backend and the value, never silently."""
    try:
        return table[raw]
    except (KeyError, TypeError):
        warnings.warn(f"{backend}: unmapped solver status {raw!r}, reported as {default.value}", RuntimeWarning, stacklevel=2)
        return default


def relative_gap(objective: float | None, bound: float | None) -> float | None:
    """|objective - bound| / max(|objective|, 1e-9); None when either is unknown."""
    if objective is None or bound is None or not math.isfinite(objective) or not math.isfinite(bound):
        return None
    return abs(objective - bound) / max(abs(objective), 1e-9)


@dataclass
class SolverResult:
    """What a backend returns for one model. Times in seconds.

    ``bound`` is the best *proven* bound on the optimum (a dual bound), or None when the
    backend cannot report one; it is never invented. ``values`` is the solution vector
    (None when no solution exists); ``values_by_block`` splits it by variable block.
    """

    backend: str
    backend_version: str
    termination: Termination
    status: SolutionStatus
    objective: float | None = None
    bound: float | None = None
    build_seconds: float = 0.0
    handover_seconds: float = 0.0
    solve_seconds: float = 0.0
    nodes: int | None = None
    iterations: int | None = None
    raw_status: str = ""
    log: str = ""
    message: str = ""
    values: np.ndarray | None = None
    values_by_block: dict[str, np.ndarray] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    #: how safe ``bound`` is: "safe" (valid in exact arithmetic: `distplan.solvers.safe_bound`)
    #: or "solver" (valid within the solver's tolerances, less `solvers.common.solver_bound_margin`)
    bound_grade: str | None = None
    #: the options this call was solved with (``mip_gap``, ``time_limit``, ...: see
    #: `options_record`), None when the caller did not record them
    options: dict[str, Any] | None = None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    @property
    def has_solution(self) -> bool:
        return self.status is not SolutionStatus.NONE

    @property
    def model_name(self) -> str | None:
        """The name of the model this call solved (``extra.model.name``: its record, as
        `model_record` reads a stored call's); None when it records none."""
        model = self.extra.get("model")
        name = model.get("name") if isinstance(model, dict) else None
        return name if isinstance(name, str) else None

    def to_dict(self, with_values: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "backend_version": self.backend_version,
            "termination": self.termination.value,
            "status": self.status.value,
            "objective": self.objective,
            "bound": self.bound,
            "bound_grade": self.bound_grade if self.bound is not None else None,
            "gap": self.gap,
            "timings": {
                "build_seconds": self.build_seconds,
                "handover_seconds": self.handover_seconds,
                "solve_seconds": self.solve_seconds,
            },
            "nodes": self.nodes,
            "iterations": self.iterations,
            "raw_status": self.raw_status,
            "message": self.message,
            "options": self.options,
            "log": capped_log(self.log),
        }
        if self.extra:
            out["extra"] = self.extra
        if with_values and self.values is not None:
            out["values"] = {k: np.asarray(v).tolist() for k, v in self.values_by_block.items()}
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SolverResult:
        """A record read back from `to_dict` (without its values); unknown terminations and
        statuses are UNKNOWN and NONE. Records written before ``options`` and ``log`` were
        stored read as None and ""."""
        timings = data.get("timings") or {}
        try:
            termination = Termination(str(data.get("termination")))
        except ValueError:
            termination = Termination.UNKNOWN
        try:
            status = SolutionStatus(str(data.get("status")))
        except ValueError:
            status = SolutionStatus.NONE
        options = data.get("options")
        return cls(
            backend=str(data.get("backend", "")),
            backend_version=str(data.get("backend_version", "")),
            termination=termination,
            status=status,
            objective=data.get("objective"),
            bound=data.get("bound"),
            build_seconds=float(timings.get("build_seconds") or 0.0),
            handover_seconds=float(timings.get("handover_seconds") or 0.0),
            solve_seconds=float(timings.get("solve_seconds") or 0.0),
            nodes=data.get("nodes"),
            iterations=data.get("iterations"),
            raw_status=str(data.get("raw_status") or ""),
            log=str(data.get("log") or ""),
            message=str(data.get("message") or ""),
            extra=dict(data.get("extra") or {}),
            bound_grade=data.get("bound_grade"),
            options=dict(options) if isinstance(options, Mapping) else None,
        )


#: the fields every solver call's record has (`SolverResult.to_dict`; ``extra`` and
#: ``values`` only when there are some): a result of `RECORD_VERSION` whose call lacks one
#: had it dropped
CALL_RECORD_FIELDS = (
    "backend",
    "backend_version",
    "termination",
    "status",
    "objective",
    "bound",
    "bound_grade",
    "gap",
    "timings",
    "nodes",
    "iterations",
    "raw_status",
    "message",
    "options",
    "log",
)

#: a stored solver log keeps at most this many characters (its head and its tail); the
#: full log is on stderr with ``--verbose``
LOG_CAP_CHARS = 20_000
#: what replaces the middle of a log longer than `LOG_CAP_CHARS`
LOG_TRUNCATION_MARKER = "\n[... distplan: {omitted} characters of this solver log omitted (the stored log keeps its first and last {keep}) ...]\n"


def model_record(call: Any) -> dict[str, Any]:
    """A stored solver call's model record (``extra.model`` of `SolverResult.to_dict`: the
    model's name, sizes and its builder's notes), empty when it keeps none or ``call`` is
    no record. What `distplan verify` and the formulations' premises read of a call."""
    extra = call.get("extra") if isinstance(call, Mapping) else None
    model = extra.get("model") if isinstance(extra, Mapping) else None
    return model if isinstance(model, dict) else {}


def capped_log(log: str, cap: int = LOG_CAP_CHARS) -> str:
    """``log`` when at most ``cap`` characters, else its first and last ``cap // 2`` with a
    marker saying how much was left out between them."""
    if len(log) <= cap:
        return log
    keep = cap // 2
    return log[:keep] + LOG_TRUNCATION_MARKER.format(omitted=len(log) - 2 * keep, keep=keep) + log[-keep:]


#: the keys of `options_record` (a result of `RECORD_VERSION` records every one of them)
#: (``solver_options`` from `SOLVER_OPTIONS_SINCE`)
OPTIONS_RECORD_FIELDS = ("mip_gap", "time_limit", "threads", "seed", "lp_method", "solver_options")


def options_record(options: Any) -> dict[str, Any]:
    """What a solver call's record keeps of its `SolveOptions` (the gap and time limit it
    was given, and the rest that changes an answer): `OPTIONS_RECORD_FIELDS`, the raw
    solver options among them (``solver_options``, as JSON values: `distplan verify`
    flags one that distplan reserves, `distplan.solvers.reserved`; records before
    `SOLVER_OPTIONS_SINCE` lack it)."""
    return {
        "mip_gap": options.mip_gap,
        "time_limit": options.time_limit,
        "threads": options.threads,
        "seed": options.seed,
        "lp_method": options.lp_method,
        "solver_options": _json_value(dict(getattr(options, "raw", None) or {})),
    }


def _json_value(value: Any) -> Any:
    """``value`` as JSON can hold it: mappings and sequences kept, numbers (numpy's
    included), text, booleans and None as they are, a non-finite number as its text
    ("inf"), anything else as its repr."""
    if isinstance(value, Mapping):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)  # ("inf", "nan": JSON has no such numbers)
    if value is None or isinstance(value, str | bool | int | float):
        return value
    if isinstance(value, np.generic):
        return _json_value(value.item())
    return repr(value)


#: the format of the result record `distplan.solve` writes (``Result.to_dict``: the result's
#: fields and its solver calls' records, `SolverResult.to_dict`), stored in it as
#: ``record_version``. A result that carries it always has every field its version writes:
#: `distplan verify` rejects one that lacks such a field, or carries a version newer than
#: this, where a result without a version (written before) is only noted as older. Raise it
#: whenever the record gains a field that verify relies on. Version 1: the result's and its
#: calls' fields (`api.RESULT_RECORD_FIELDS`, `CALL_RECORD_FIELDS`); 2: every call's
#: ``options`` is a record, never None (libra's direct Clarabel calls wrote None in 1); 3:
#: every options record keeps the raw solver options (``solver_options``); 4: every bound
#: whose proof re-checks from a certificate keeps it (``certificate``: libra's Lagrangian
#: multipliers, placement's waists and segment bounds, `registry.BoundSource.recheck`); 5:
#: every call records the name of the program it solved (``extra.model.name``: the conic
#: programs' calls recorded none in 4), which its formulation declares
#: (`registry.Formulation.solves`); 6: libra_discrete's menu MILP counts its objective in a
#: unit of its own, which its calls record (``extra.model.objective_unit_seconds``:
#: `bandwidth.discrete.OBJECTIVE_UNIT`; in 5 it counted seconds).
RECORD_VERSION = 6
#: the first version whose every call records its options (`RECORD_VERSION`)
CALL_OPTIONS_SINCE = 2
#: the first version whose options records keep the raw solver options (`options_record`)
SOLVER_OPTIONS_SINCE = 3
#: the first version whose bounds keep their certificates (`RECORD_VERSION`)
CERTIFICATES_SINCE = 4
#: the first version whose every call records its model's name (`RECORD_VERSION`)
MODEL_NAMES_SINCE = 5
#: the key of `RECORD_VERSION` in a result's record
RECORD_VERSION_KEY = "record_version"


def new_format_fields(doc: Mapping[str, Any]) -> list[str]:
    """The fields of ``doc`` that only results which record their options (and their
    calls') have: its ``record_version`` (`RECORD_VERSION`), a bound's ``kind`` or
    ``solver_call``, a call's ``log``. Such a result is no old one, and the exemption of
    old results (`distplan.verify.unchecked`) is not for it."""
    out: list[str] = []
    if RECORD_VERSION_KEY in doc:
        out.append(RECORD_VERSION_KEY)
    bounds = doc.get("bounds")
    entries = [e for e in bounds if isinstance(e, dict)] if isinstance(bounds, list) else []
    for key in ("kind", "solver_call"):
        if any(key in e for e in entries):
            out.append(f"bounds[].{key}")
    calls = doc.get("solver_results")
    if any(isinstance(c, dict) and "log" in c for c in (calls if isinstance(calls, list) else [])):
        out.append("solver_results[].log")
    return out
