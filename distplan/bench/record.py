"""One run in the current process: its record (the flat row the database stores).

`execute_run(spec)` solves one run spec with ``distplan.solve`` and returns its record;
`base_record(spec)` holds the identifying columns every record starts from. Times are
seconds, memory bytes.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Collection, Sequence
from typing import Any

from distplan.solvers.result import LIMIT_TERMINATIONS as _SOLVER_LIMIT_TERMINATIONS

from .store import canonical_json

#: terminations of a run that errored: it produced no usable answer (`run_outcome` "failed")
ERROR_TERMINATIONS = frozenset({"crashed", "out_of_memory", "plan_rejected", "input_error", "backend_error", "error"})
#: terminations that mean a limit stopped the run (`run_outcome` "limit"), with or without a
#: plan: the solver's limits (`distplan.solvers.result.LIMIT_TERMINATIONS`, ``killed``
#: included: a solver or run process killed after its time limit + grace), and
#: ``no_solution`` of an exact or bound-only formulation (its solver stopped without a plan;
#: a heuristic's ``no_solution`` is a failure: it could not place every op)
LIMIT_TERMINATIONS = frozenset({t.value for t in _SOLVER_LIMIT_TERMINATIONS} | {"no_solution"})
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


def execute_run(spec: dict[str, Any], started: float | None = None) -> Record:
    """Solve one run in this process and return its record (never raises for a bad run).

    The plan has been re-checked by the kind's evaluator inside ``distplan.solve``; the
    record's ``verdict`` is "accepted" then, "rejected" when ``solve`` raised
    `PlanCheckError`, and None when there is no plan.

    ``started`` (a ``time.perf_counter()`` value, default now) is when the run began: it
    goes to ``distplan.solve`` as its ``started``, so the time limit covers reading the
    spec and loading the instance as well as solving, as for ``distplan solve`` (review
    D3: a 200,000-op instance loaded for seconds outside the limit, and the run was killed
    at limit + grace before it returned the plan it had). ``wall_seconds`` counts from it.
    """
    from distplan.api import solve
    from distplan.errors import InfeasibleError, InputError, NoSolutionError, PlanCheckError
    from distplan.models.common import instance_from_dict
    from distplan.solvers.base import BackendError

    rec = base_record(spec)
    opts = spec.get("options", {})
    t0 = time.perf_counter() if started is None else min(started, time.perf_counter())
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
            started=t0,  # the limit covers loading too (see above)
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


def run_outcome(rec: Record) -> str:
    """How a run ended, the one classification of the progress line and the report (its
    *limit* and *failed* columns and its "Failed runs" section):

    * ``"failed"``: the run errored (`ERROR_TERMINATIONS`: crashed, out of memory, plan
      rejected, input, backend or other error) or ended without an answer: a heuristic's
      ``infeasible`` or ``no_solution`` (no proof, no plan), a bound-only run without a bound,
      a run that ended with a rejected plan or no solution;
    * ``"limit"``: a limit stopped it (`LIMIT_TERMINATIONS`), with or without a plan: a run
      whose solver hit its time limit, or was killed after its time limit + grace, and
      returned an accepted plan is a time-limited run with a plan, never a failure;
    * ``"ok"``: it ended on its own with an answer: an accepted plan, a proof of
      infeasibility from an exact formulation, or a bound of a bound-only one.

    Whether an answer is also *solved* (proven optimal, ...) is `is_solved`'s to say.
    """
    term = rec.get("termination")
    heuristic = not rec.get("exact") and not rec.get("bound_only")
    if term in ERROR_TERMINATIONS:
        return "failed"
    if term in LIMIT_TERMINATIONS:
        return "failed" if term == "no_solution" and heuristic else "limit"
    if term == "infeasible":
        return "ok" if rec.get("exact") else "failed"  # a proof from an exact program; a heuristic merely failed
    if rec.get("bound_only"):
        return "ok" if rec.get("bound") is not None else "failed"
    if rec.get("verdict") == "accepted":
        return "ok"
    # a rejected plan, or no solution at all; a solution the evaluator was not asked about
    # (no verdict: a record without that column) is not held against the run
    return "ok" if rec.get("verdict") is None and rec.get("status") not in (None, "none") else "failed"


def is_solved(rec: Record, wrong: Collection[str] = ()) -> bool:
    """A solved run (the report's *solved*; ``wrong``: the run keys the audit flags): not
    failed (`run_outcome`) nor flagged, and proven optimal or infeasible (an exact
    formulation), with a bound (a bound-only one), or with an accepted plan (a heuristic)."""
    if rec.get("run_key") in wrong or run_outcome(rec) == "failed":
        return False
    if rec.get("bound_only"):
        return rec.get("bound") is not None
    if rec.get("exact"):
        return rec.get("status") == "optimal" or rec.get("termination") == "infeasible"
    return rec.get("verdict") == "accepted"
