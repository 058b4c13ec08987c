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


def map_status(table: Mapping[object, Termination], raw: object, backend: str, default: Termination = Termination.UNKNOWN) -> Termination:
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

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    @property
    def has_solution(self) -> bool:
        return self.status is not SolutionStatus.NONE

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
        }
        if self.extra:
            out["extra"] = self.extra
        if with_values and self.values is not None:
            out["values"] = {k: np.asarray(v).tolist() for k, v in self.values_by_block.items()}
        return out
