"""One run in the current process: its record (the flat row the database stores).

`execute_run(spec)` solves one run spec with ``distplan.solve`` and returns its record;
`base_record(spec)` holds the identifying columns every record starts from. Times are
seconds, memory bytes.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Sequence
from typing import Any

from .store import canonical_json

#: terminations that mean the run produced no usable answer
FAILED_TERMINATIONS = frozenset(
    {"killed", "crashed", "out_of_memory", "no_solution", "plan_rejected", "input_error", "backend_error", "error"}
)
#: how much of a failed run's stderr is kept (characters)
LOG_TAIL_CHARS = 4000
Record = dict[str, Any]


def base_record(spec: dict[str, Any]) -> Record:
    """The identifying columns of a run's record (from its spec)."""
    opts = spec.get("options", {})
    return {
        "run_key": spec["run_key"],
        "campaign": spec.get("campaign"),
        "instance": spec["instance"],
        "instance_hash": spec["instance_hash"],
        "kind": spec["kind"],
        "formulation": spec["formulation"],
        "label": spec.get("label"),
        "program": spec.get("program"),
        "exact": bool(spec.get("exact")),
        "bound_only": bool(spec.get("bound_only")),
        "params_json": canonical_json(spec.get("params", {})),
        "backend": spec["backend"],
        "backend_version": spec.get("backend_version"),
        "options_json": canonical_json(opts),
        "time_limit": opts.get("time_limit"),
        "seed": spec.get("seed"),
        "repetition": spec.get("repetition"),
        "termination": "error",
        "status": "none",
    }


def execute_run(spec: dict[str, Any]) -> Record:
    """Solve one run in this process and return its record (never raises for a bad run).

    The plan has been re-checked by the kind's evaluator inside ``distplan.solve``; the
    record's ``verdict`` is "accepted" then, "rejected" when ``solve`` raised
    `PlanCheckError`, and None when there is no plan.
    """
    from distplan.api import solve
    from distplan.errors import InfeasibleError, InputError, NoSolutionError, PlanCheckError
    from distplan.models.common import instance_from_dict
    from distplan.solvers.base import BackendError

    rec = base_record(spec)
    opts = spec.get("options", {})
    t0 = time.perf_counter()
    try:
        inst = instance_from_dict(spec["document"])
        res = solve(
            inst,
            spec["formulation"],
            backend=spec["backend"],
            time_limit=opts.get("time_limit"),
            mip_gap=opts.get("mip_gap"),
            fold=bool(opts.get("fold", False)),
            threads=opts.get("threads"),
            seed=spec.get("seed"),
            solver_options=opts.get("solver_options"),
            **spec.get("params", {}),
        )
        doc = res.to_dict()
        plan = doc.pop("plan")
        t = doc.get("timings", {})
        rec.update(
            termination=doc["termination"],
            status=doc["status"],
            objective=doc["objective"],
            bound=doc["bound"],
            bound_source=doc["bound_source"],
            bound_grade=doc["bound_grade"],
            gap=doc["gap"],
            gap_tolerance=doc["gap_tolerance"],
            backend_version=doc["backend_version"],
            build_seconds=t.get("build_seconds"),
            handover_seconds=t.get("handover_seconds"),
            solve_seconds=t.get("solve_seconds"),
            wall_seconds=t.get("wall_seconds"),
            verdict=None if res.check is None else ("accepted" if res.check.feasible else "rejected"),
            plan_json=None if plan is None else canonical_json(plan),
            result_json=canonical_json(doc),
        )
        return rec
    except InfeasibleError as exc:
        rec.update(termination="infeasible", error=str(exc))
    except NoSolutionError as exc:
        rec.update(termination="no_solution", error=str(exc))
    except PlanCheckError as exc:
        rec.update(termination="plan_rejected", verdict="rejected", error=str(exc))
    except BackendError as exc:  # before InputError, which it is a kind of
        rec.update(termination="backend_error", error=str(exc))
    except InputError as exc:
        rec.update(termination="input_error", error=str(exc))
    except MemoryError:
        rec.update(termination="out_of_memory", error="MemoryError: " + traceback.format_exc()[-LOG_TAIL_CHARS:])
    except Exception as exc:
        rec.update(termination="error", error=f"{type(exc).__name__}: {exc}\n" + traceback.format_exc()[-LOG_TAIL_CHARS:])
    rec["wall_seconds"] = time.perf_counter() - t0
    return rec


def warm_set(specs: Sequence[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Kinds and backends the fork server should preload for these runs."""
    return sorted({s["kind"] for s in specs}), sorted({s["backend"] for s in specs})


def is_success(rec: Record) -> bool:
    """A run that produced an answer: an accepted plan, a proof of infeasibility, or bounds."""
    if rec.get("termination") in FAILED_TERMINATIONS:
        return False
    if rec.get("termination") == "infeasible":
        return bool(rec.get("exact"))  # a proof from an exact program; a heuristic merely failed
    return rec.get("verdict") == "accepted" or bool(rec.get("bound_only"))
