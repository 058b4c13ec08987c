"""Re-check stored results with one optimality rule.

A result is "optimal" exactly when its relative gap ``|objective - bound| / max(|objective|,
1e-9)`` is at most the ``gap_tolerance`` it records (results written before the field
existed are held to `DEFAULT_GAP_TOLERANCE`, 1e-4: the HiGHS, CBC and SCIP default). The
verifier trusts no stored claim; for each result it

* recomputes the gap from the stored objective and bound and rejects a stored ``gap``
  that differs, and recomputes the status and rejects a stored ``status`` that
  contradicts it ("optimal" with an open gap; "feasible" with a closed one when the result
  records its tolerance; a plan with status "none"; "optimal"/"feasible" without a plan);
* checks ``bound <= objective`` with zero tolerance (every listed bound too): a proven
  lower bound above a feasible objective is impossible;
* re-evaluates the plan with the kind's independent evaluator: it must be feasible
  (memory, precedence, ...) and give exactly the stored objective (relative 1e-9);
* checks the instance is the one solved (name, kind, and the content digest the CLI
  records), that the best bound's grade is the result's ``bound_grade``, and that every
  listed bound is backed (`check_bounds`): solver-free ones recomputed, a solver call's
  dual bound against its call's record, converted as the formulation states
  (`registry.BoundSource.conversion`: the function the formulation applies, given the
  call's model record, e.g. alpa_ilp's objective scale; a record written before it kept a
  field the conversion reads is held to the loosest value the instance allows, and the
  report's notes say what was not checked), a
  formulation's own proof only from the sources it reports (`registry.BOUND_SOURCES`), at
  their grade, and a bound that holds only under a premise (a precondition of the
  instance, an infeasible call of the run) only where the formulation's own check of it
  passes (`registry.BoundSource.premise`).
  A proof that can be checked again is proven again from the instance
  (`registry.BoundSource.recheck`: placement's destructive bound at its trial makespan and
  its series composition over waist ops from its waists and segment bounds, libra's
  Lagrangian bounds at the multipliers they record as their ``certificate``);
  another bound a solve proved is not re-proven (that would take the solve again), and
  the notes say where the result's bound rests on such a proof.

A result that records its format (``record_version``, `solvers.result.RECORD_VERSION`)
has every field that version writes: one missing (a field the checks above would read, or
whose absence they excuse as an older record's: an objective scale, a model-record field
its formulation declares, `registry.RecordedModelField`, such as pipeline_milp's
``value_at_most``, options, logs, the gap tolerance) was dropped, and is a problem; a
version newer than this verifier knows is one too. Only a result without a version is an
older one, whose missing fields are noted; with ``require_version`` (``distplan verify
--require-version``) a result without a version is a problem.

`check_result(doc, instance)` returns the problems as (field, message) pairs;
`verify_result` adds them to a `VerifyReport`; `verify_path` reads a result file
(``distplan solve --result``). Benchmark databases are audited by
`distplan.bench.verify.verify_database`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distplan.api import DEFAULT_GAP_TOLERANCE, RESULT_RECORD_FIELDS, gap_tolerance
from distplan.errors import DistplanError, InputError
from distplan.formulations.bandwidth import conic
from distplan.formulations.registry import (
    BOUND_GRADES,
    BOUND_KINDS,
    BoundSource,
    Formulation,
    RecordedModelField,
    Unchecked,
    Unrecorded,
    bound_source,
    formulations,
    get_formulation,
    solver_free_bounds,
    solver_free_match,
)
from distplan.instances import load_instance
from distplan.kinds import KINDS
from distplan.models.common import digest_of, kind_spec, per_instance, read_json
from distplan.solvers.base import get_backend
from distplan.solvers.options import run_grace
from distplan.solvers.result import (
    CALL_OPTIONS_SINCE,
    CALL_RECORD_FIELDS,
    CERTIFICATES_SINCE,
    MODEL_NAMES_SINCE,
    OPTIONS_RECORD_FIELDS,
    RECORD_VERSION,
    RECORD_VERSION_KEY,
    SOLVER_OPTIONS_SINCE,
    TIME_TERMINATIONS,
    Termination,
    model_record,
    new_format_fields,
    relative_gap,
)

#: stored and re-evaluated objectives must agree this closely (relative; both come from the
#: same deterministic evaluator, so only a JSON round trip separates them)
OBJECTIVE_REL_TOLERANCE = 1e-9
#: a stored gap must equal the recomputed one this closely (relative)
GAP_REL_TOLERANCE = 1e-9
STATUSES = ("optimal", "feasible", "none")
TERMINATIONS = tuple(t.value for t in Termination)


@dataclass
class VerifyReport:
    checked: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the results whose bound and status rest on a formulation's own proof that verify
    #: cannot redo (`UnredoneProof`): a claim verify holds to its record but cannot prove
    #: again; ``distplan verify --strict`` counts each a problem
    unredone: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def note_once(self, *notes: str) -> None:
        """Add each note not already there (what a report says once, not per result)."""
        self.notes.extend(n for n in dict.fromkeys(notes) if n not in self.notes)

    def lines(self) -> list[str]:
        out = [*self.notes]
        out.extend(f"PROBLEM {p}" for p in self.problems)
        rest = f", {len(self.unredone)} resting on a proof verify cannot redo (--strict counts them problems)" if self.unredone else ""
        out.append(f"{self.checked} result(s) checked, {len(self.problems)} problem(s){rest}")
        return out

    def strictly(self) -> VerifyReport:
        """The report with every result that rests on a proof verify cannot redo counted a
        problem (``distplan verify --strict``)."""
        problems = self.problems + [f"{u} (--strict: a proof verify cannot redo)" for u in self.unredone]
        return VerifyReport(self.checked, problems, list(self.notes), list(self.unredone))


class UnredoneProof(str):
    """A note (`check_bounds`) that a result's bound and status rest on its formulation's
    own proof, which verify cannot redo (it would take the solve again): `verify_result`
    lists the result in `VerifyReport.unredone`."""



def record_version(doc: dict[str, Any]) -> int | None:
    """The record format version ``doc`` carries (``record_version``), when it is one this
    verifier knows (1 to `RECORD_VERSION`); None for a result written before results
    recorded their format, or one whose version is not known (`check_record_version`)."""
    version = doc.get(RECORD_VERSION_KEY)
    if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= RECORD_VERSION:
        return None
    return version


def check_record_version(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The problem of a ``record_version`` that is no version this verifier knows: not a
    positive integer, or newer than `RECORD_VERSION` (its fields may mean what this
    verifier cannot check: never accepted as if known)."""
    if RECORD_VERSION_KEY not in doc:
        return []
    version = doc[RECORD_VERSION_KEY]
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return [(RECORD_VERSION_KEY, f"{version!r} is no record format version (a positive integer)")]
    if version > RECORD_VERSION:
        return [(RECORD_VERSION_KEY, f"{version} is newer than the record format this verifier knows ({RECORD_VERSION}): what its fields say cannot be checked here; verify it with the distplan that wrote it")]
    return []


def _dropped(version: int) -> str:
    return f"missing, but the result's record_version {version} always writes it: the field was dropped (only a result without a record_version is an older one)"


def _formulation_of(doc: dict[str, Any], instance: Any) -> Formulation | None:
    """The result's formulation, of ``instance``'s kind (the result's recorded ``kind``
    without an instance); None when it is no formulation of that kind (`check_formulation`
    says so), for the declarations verify reads from the registry."""
    kind = getattr(instance, "kind", None) if instance is not None else doc.get("kind")
    name = doc.get("formulation")
    if not isinstance(kind, str) or kind not in KINDS or not isinstance(name, str):
        return None
    return next((f for f in formulations(kind) if f.name == name), None)


def _declared_fields(doc: dict[str, Any], instance: Any) -> tuple[RecordedModelField, ...]:
    """The model-record fields the result's formulation declares its calls always write
    (`registry.Formulation.recorded_model_fields`)."""
    form = _formulation_of(doc, instance)
    return form.recorded_model_fields if form is not None else ()


def check_recorded_fields(doc: dict[str, Any], instance: Any = None) -> list[tuple[str, str]]:
    """For a result that records its format version (`record_version`): every field that
    version always writes is there (`api.RESULT_RECORD_FIELDS`; each solver call's
    `solvers.result.CALL_RECORD_FIELDS`, its ``options`` not None from version
    `solvers.result.CALL_OPTIONS_SINCE`, its model's name from
    `solvers.result.MODEL_NAMES_SINCE`; the model-record fields
    the formulation declares for its calls, `registry.RecordedModelField`, read from the
    registry for ``instance``'s kind). A missing one was dropped: a problem naming it. None
    for a result without a version (an older one: `unchecked` notes what it lacks). The
    result's own ``options`` are `check_solver_calls`' (as for any result of the new
    format), the fields a bound's conversion or premise reads `_check_linked_bound`'s and
    `_unmet_premise`'s. A listed bound's ``kind`` and ``solver_call`` are not required:
    without them `check_bounds` judges the bound by its source, and rejects a result whose
    bound rests on an unlinked solver bound."""
    version = record_version(doc)
    if version is None:
        return []
    problems = [(name, _dropped(version)) for name in RESULT_RECORD_FIELDS if name not in doc and name != "options"]
    problems += _recorded_options(doc, version)
    declared = _declared_fields(doc, instance)
    for k, call in enumerate(_calls(doc) or []):
        if not isinstance(call, dict):
            continue
        problems.extend((f"solver_results[{k}].{name}", _dropped(version)) for name in CALL_RECORD_FIELDS if name not in call and name != "options")
        if version >= CALL_OPTIONS_SINCE and "options" in call and call["options"] is None:  # (missing, or not an object: `check_solver_calls`)
            problems.append((f"solver_results[{k}].options", f"None, but every call of a result of record_version {version} records the options it was solved with (`RunContext.record_call` for the calls a formulation makes by itself)"))
        elif isinstance(call.get("options"), dict):  # (a call's options are `options_record`'s, as the run's: review rev21)
            problems += _dropped_options(call["options"], f"solver_results[{k}].options", version)
        model = model_record(call)
        if version >= MODEL_NAMES_SINCE and not isinstance(model.get("name"), str):
            problems.append((f"solver_results[{k}].extra.model.name", _dropped(version) + ": without it nothing shows which program the call solved (`registry.Formulation.solves`)"))
        for want in declared:
            if want.name not in model and want.required(str(model.get("name")), call.get("termination"), version):
                problems.append((f"solver_results[{k}].extra.model.{want.name}", _dropped(version) + f": {doc.get('formulation')} declares that {want.why}"))
    return problems


def _dropped_options(options: dict[str, Any], where: str, version: int) -> list[tuple[str, str]]:
    """The `solvers.result.OPTIONS_RECORD_FIELDS` keys a versioned result's options record
    (the run's or a call's, at field ``where``) lacks, each a dropped field."""
    return [(f"{where}.{name}", _dropped(version)) for name in OPTIONS_RECORD_FIELDS if name not in options and (name != "solver_options" or version >= SOLVER_OPTIONS_SINCE)]


def _recorded_options(doc: dict[str, Any], version: int) -> list[tuple[str, str]]:
    """A versioned result's run ``options`` (when present: a missing one is
    `check_solver_calls`' problem) hold every `solvers.result.OPTIONS_RECORD_FIELDS` key,
    and its ``gap_tolerance`` is the one `distplan.solve` derives from them
    (`api.gap_tolerance` of the run's ``mip_gap``). Without this a
    tolerance raised above the run's gap passed with the gap (or the options) nulled, and a
    result with an open gap read as optimal (review rev20 H1)."""
    if "options" not in doc:
        return []
    options = doc["options"]
    if not isinstance(options, dict):
        return [("options", f"{options!r}, but a result of record_version {version} records its options as an object with {', '.join(OPTIONS_RECORD_FIELDS)}")]
    missing = _dropped_options(options, "options", version)
    if missing:
        return missing
    gap = options["mip_gap"]
    tolerance = doc.get("gap_tolerance")
    if isinstance(gap, bool) or not isinstance(gap, int | float | None) or tolerance != gap_tolerance(gap):
        return [("gap_tolerance", f"{tolerance!r}, but a run solved with mip_gap {gap!r} records the gap_tolerance `distplan.solve` derives from it: the tolerance is not the one the run used")]
    return []


def _number(doc: dict[str, Any], key: str, problems: list[tuple[str, str]]) -> float | None:
    value = doc.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        problems.append((key, f"{value!r} is not a number"))
        return None
    return float(value)


def recorded_tolerance(doc: dict[str, Any]) -> tuple[float, bool]:
    """The result's gap tolerance (relative) and whether the result recorded it."""
    tol = doc.get("gap_tolerance")
    if tol is None:
        return DEFAULT_GAP_TOLERANCE, False
    return float(tol), True


def _info(doc: dict[str, Any]) -> dict[str, Any]:
    info = doc.get("info")
    return info if isinstance(info, dict) else {}


#: fields of a result and the JSON types they may have (besides null)
FIELD_TYPES: dict[str, tuple[type, ...]] = {"info": (dict,), "bounds": (list,), "timings": (dict,), "solver_results": (list,), "plan": (dict,), "check": (dict,)}


#: seconds of clock rounding allowed when a result's timings are added up (`_timing_sums`)
TIMING_SLACK = 1e-3


def _timing_sums(timings: Any) -> list[tuple[str, str]]:
    """A run's folding, formulation run and evaluation lie within its wall time: `api._solve`
    measures them in turn on one clock from the run's start. Timings that add up to more
    were written by hand (review rev29 D7). (Its solver calls' build, hand-over and solve
    seconds have no such sum: a call's solve time is partly the solver's own clock, and on
    pipeline_milp they add up to 2-5% more than the run that made them.)"""
    if not isinstance(timings, dict):
        return []
    values = [timings.get(k) for k in ("fold_seconds", "formulation_seconds", "evaluate_seconds", "wall_seconds")]
    numbers = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)]
    if len(numbers) < len(values):
        return []
    *phases, wall = numbers
    if sum(phases) > wall + TIMING_SLACK:
        return [("timings.wall_seconds", f"{wall:.6g} s, less than its folding, run and evaluation ({sum(phases):.6g} s)")]
    return []


def check_claims(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Problems with the stored numbers and status alone (no instance needed)."""
    problems: list[tuple[str, str]] = []
    for key, types in FIELD_TYPES.items():
        if doc.get(key) is not None and not isinstance(doc[key], types):
            problems.append((key, f"a JSON {type(doc[key]).__name__}, not {' or '.join('an object' if t is dict else 'a list' for t in types)}"))
            if key in ("bounds", "solver_results", "plan"):
                return problems
    timings = doc.get("timings")
    for key, seconds in (timings.items() if isinstance(timings, dict) else ()):
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float) or not math.isfinite(seconds) or seconds < 0):
            problems.append((f"timings.{key}", f"{seconds!r} is not a number of seconds (finite, >= 0)"))
    problems += _timing_sums(timings)
    objective = _number(doc, "objective", problems)
    bound = _number(doc, "bound", problems)
    tol_value = doc.get("gap_tolerance")
    if tol_value is not None and (isinstance(tol_value, bool) or not isinstance(tol_value, int | float) or not 0 <= tol_value < 1):
        problems.append(("gap_tolerance", f"{tol_value!r} is not a relative gap in [0, 1)"))
        return problems
    tolerance, recorded = recorded_tolerance(doc)
    status = doc.get("status")
    if status not in STATUSES and status is not None:
        problems.append(("status", f"{status!r} is not one of {', '.join(STATUSES)}"))
    for name, value in (("objective", objective), ("bound", bound)):
        if value is not None and not math.isfinite(value):
            problems.append((name, f"{value!r} is not finite"))
            return problems
    if bound is not None and objective is not None and bound > objective:
        problems.append(("bound", f"proven bound {bound!r} exceeds the objective {objective!r} (a bound above a feasible plan is impossible)"))
    for k, entry in enumerate(doc.get("bounds") or []):
        value = entry.get("value") if isinstance(entry, dict) else None
        if isinstance(value, int | float) and objective is not None and math.isfinite(value) and value > objective:
            problems.append((f"bounds[{k}].value", f"bound {value!r} ({entry.get('source')}) exceeds the objective {objective!r}"))
    gap = relative_gap(objective, bound)
    if "gap" in doc:
        stored = doc.get("gap")
        if (stored is None) != (gap is None) or (
            stored is not None and gap is not None and not (isinstance(stored, int | float) and math.isclose(stored, gap, rel_tol=GAP_REL_TOLERANCE, abs_tol=1e-15))
        ):
            problems.append(("gap", f"stored gap {stored!r} but objective {objective!r} and bound {bound!r} give {gap!r}"))
    has_plan = doc.get("plan") is not None
    if status == "optimal":
        if gap is None:
            problems.append(("status", "claims optimal without both an objective and a proven bound"))
        elif gap > tolerance:
            problems.append(("status", f"claims optimal with gap {gap:.3g} > gap_tolerance {tolerance:g}"))
    elif status == "feasible" and recorded and gap is not None and gap <= tolerance:
        problems.append(("status", f"says feasible but gap {gap:.3g} <= gap_tolerance {tolerance:g} makes it optimal"))
    if status in ("optimal", "feasible") and not has_plan:
        problems.append(("plan", f"status {status} but no plan stored"))
    elif objective is not None and not has_plan:
        problems.append(("plan", f"objective {objective!r} claimed but no plan stored to re-evaluate"))
    if status == "none" and has_plan:
        problems.append(("status", "says none but a plan is stored"))
    termination = doc.get("termination")
    if termination is not None and termination not in TERMINATIONS:
        problems.append(("termination", f"{termination!r} is not a termination ({', '.join(TERMINATIONS)})"))
    elif termination in ("infeasible", "infeasible_or_unbounded") and has_plan:
        problems.append(("termination", f"says {termination} but a plan is stored"))
    if has_plan and objective is None:
        problems.append(("objective", "a plan is stored without its objective"))
    return problems


#: terminations a result has only when its last solver call had it (`distplan.solve` takes
#: an exact run's termination from its last call; formulations override it only with
#: optimal, time_limit or numerical, or one they declare, `registry.RunTermination`, and
#: heuristics end "finished", or "time_limit" when time cut them or a solver call of theirs)
CALL_ONLY_TERMINATIONS = frozenset(TERMINATIONS) - {"optimal", "finished", "time_limit", "numerical"}
#: a run ends "optimal" only when its last solver call proved optimality, or proved a model
#: restricted below the incumbent infeasible (pipeline_milp), or it made no solver call
OPTIMAL_LAST_CALL = frozenset({"optimal", "infeasible", "infeasible_or_unbounded"})
#: ``info.stopped`` of a run whose search ended by its own test (`bandwidth.stopping.Stop.CLOSED`);
#: any other value there records a run stopped short (its limit, its rounds, a failed
#: call), which never ends "optimal"
STOPPED_CLOSED = "closed"
#: the only solver calls whose bound is graded "safe": HiGHS LPs, whose dual point
#: `distplan.solvers.safe_bound` repairs (a MIP's dual bound holds within tolerances only)
SAFE_BOUND_BACKENDS = ("highs",)


def _calls(doc: dict[str, Any]) -> list[Any] | None:
    calls = doc.get("solver_results")
    return calls if isinstance(calls, list) else None


def check_backend(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """The result's ``backend`` and ``backend_version`` against its solver calls' records: a
    run with solver calls made at least one by its own backend (a run on cvxpy-CLARABEL, by
    the direct Clarabel path that stands in for it, `bandwidth.conic`; the other calls a
    run may make are HiGHS diagnostics), and a call by the backend itself records the
    result's version. A result relabelled with another backend credited one solver's run
    to another (review rev29 D2)."""
    calls = [c for c in _calls(doc) or [] if isinstance(c, dict)]
    backend, version = doc.get("backend"), doc.get("backend_version")
    if not calls or not isinstance(backend, str):
        return []
    own = {backend, conic.BACKEND} if backend == conic.STANDS_IN_FOR else {backend}
    if not any(c.get("backend") in own for c in calls):
        made = ", ".join(sorted({str(c.get("backend")) for c in calls}))
        return [("backend", f"{backend!r}, but none of the run's {len(calls)} solver call(s) was made by it (made by {made})")]
    versions = {c.get("backend_version") for c in calls if c.get("backend") == backend}
    if versions and version not in versions:
        return [("backend_version", f"{version!r}, but the calls by {backend} record {', '.join(sorted(map(repr, versions)))}")]
    return []


def check_call_models(doc: dict[str, Any], instance: Any, notes: list[str] | None = None) -> list[tuple[str, str]]:
    """Every solver call of the result solved a program its formulation declares
    (`registry.Formulation.solves`, read by the model name a call records,
    ``extra.model.name``): a formulation that makes no solver call has none, and a call
    of another program is another formulation's, as in a result relabelled with a
    heuristic's name or alpa_ilp's relabelled tap (review rev29 D2). A call without a
    model name is `check_recorded_fields`' problem from `MODEL_NAMES_SINCE` on; in an
    older record, ``notes`` says it was not checked. Nothing is checked for a formulation
    that declares nothing (a variant a user declared with a driver)."""
    form = _formulation_of(doc, instance)
    calls = _calls(doc) or []
    if form is None or form.solves is None or not calls:
        return []
    if not form.solves:
        return [("solver_results", f"{len(calls)} solver call(s), but {form.name} makes none (it solves no program): the calls, and what they proved, are another formulation's")]
    version = record_version(doc)
    problems: list[tuple[str, str]] = []
    unnamed: list[int] = []
    foreign: list[tuple[int, str]] = []
    for k, call in enumerate(calls):
        if not isinstance(call, dict):
            continue  # (`check_solver_calls` names it)
        name = model_record(call).get("name")
        if not isinstance(name, str):
            if version is None or version < MODEL_NAMES_SINCE:  # (dropped from a newer one: `check_recorded_fields`)
                unnamed.append(k)
        elif form.undeclared_models([name]):
            foreign.append((k, name))
    if foreign:
        (k, name), more = foreign[0], f" (and {len(foreign) - 1} more of the result's calls)" if len(foreign) > 1 else ""
        problems.append((f"solver_results[{k}].extra.model.name", f"{name!r}{more}, but {form.name} solves only programs whose names match {', '.join(form.solves)}: the call is another formulation's"))
    if unnamed and notes is not None:
        notes.append(f"solver call(s) {', '.join(map(str, unnamed))} record no model name (written before record_version {MODEL_NAMES_SINCE}): which program they solved is not checked")
    return problems


def check_solver_calls(doc: dict[str, Any], instance: Any = None, notes: list[str] | None = None) -> list[tuple[str, str]]:
    """The result's claims against the records of its solver calls (``solver_results``):

    * ``gap_tolerance`` is not above the ``mip_gap`` the run (``options``) or any call
      records it was solved with
      (`distplan.solve` hands its tolerance to every call; a raised one would turn an open
      gap into "optimal", a lower one only makes the status rule stricter);
    * the ``termination`` is one its calls allow (`CALL_ONLY_TERMINATIONS`,
      `OPTIMAL_LAST_CALL`), or one of the run's own that its formulation declares and its
      ``info`` records (`registry.RunTermination`, with or without solver calls); and
      "optimal" only from an exact program of the instance, not after ``info.stopped``
      records a run stopped short (`STOPPED_CLOSED`), and without solver calls only with a
      bound of its own that closes the gap (`_closed_without_calls`);
    * a call's bound graded "safe" is a HiGHS LP's (no integer variables in the model it
      records): no code path makes a MIP's dual bound safe;
    * a listed bound that names the call that proved it (``solver_call``) is at most that
      call's bound converted as its formulation states, from the call's model record
      (`_check_linked_bound`; a conversion that needs the instance only with
      ``instance``), and "safe" only when the call's bound is; ``notes`` says where an
      older record left the conversion less than its model's own.

    Records written before calls recorded their options say nothing to cross-check:
    `unchecked` names what was left out."""
    problems: list[tuple[str, str]] = []
    if "solver_results" in doc and _calls(doc) is None:
        return [("solver_results", f"{type(doc.get('solver_results')).__name__} is not a list of solver call records")]
    calls = _calls(doc) or []
    tolerance, _ = recorded_tolerance(doc) if _tolerance_ok(doc) else (None, False)
    run_options = doc.get("options")
    newer = new_format_fields(doc)
    if newer and "options" not in doc:
        problems.append(("options", f"missing, but the result has fields only results that record their options have ({', '.join(newer)}): it is no old result, and its gap_tolerance must be checked against the options it was solved with"))
    if isinstance(run_options, dict):
        problems += _reserved_options(run_options, doc.get("backend"), "options")
    if run_options is not None and not isinstance(run_options, dict):
        problems.append(("options", f"{run_options!r} is not a record of options"))
    elif isinstance(run_options, dict) and tolerance is not None:
        gap = run_options.get("mip_gap")
        if gap is not None and (isinstance(gap, bool) or not isinstance(gap, int | float)):
            problems.append(("options.mip_gap", f"{gap!r} is not a relative gap"))
        elif gap is not None and tolerance > float(gap):
            problems.append(("gap_tolerance", f"{tolerance:g} but the run was solved with mip_gap {gap!r}: the tolerance is raised above the one the run used"))
    for k, call in enumerate(calls):
        if not isinstance(call, dict):
            problems.append((f"solver_results[{k}]", "not a solver call record"))
            continue
        options = call.get("options")
        if newer and "options" not in call:
            problems.append((f"solver_results[{k}].options", f"missing, but the result has fields only results that record their calls' options have ({', '.join(newer)})"))
        if isinstance(options, dict):
            problems += _reserved_options(options, call.get("backend"), f"solver_results[{k}].options")
        if options is not None and not isinstance(options, dict):
            problems.append((f"solver_results[{k}].options", f"{options!r} is not a record of options"))
        elif isinstance(options, dict) and tolerance is not None:
            gap = options.get("mip_gap")
            if gap is not None and (isinstance(gap, bool) or not isinstance(gap, int | float)):
                problems.append((f"solver_results[{k}].options.mip_gap", f"{gap!r} is not a relative gap"))
            elif gap is not None and tolerance > float(gap):
                problems.append(("gap_tolerance", f"{tolerance:g} but solver call {k} ({call.get('backend')}) was solved with mip_gap {gap!r}: the tolerance is raised above the one the run used"))
        problems += _call_bound_side(call, k)
        if call.get("bound_grade") == "safe":
            model = (call.get("extra") or {}).get("model") if isinstance(call.get("extra"), dict) else None
            integers = None
            counts = [model.get(name) for name in ("binaries", "integers")] if isinstance(model, dict) else []
            whole = [v for v in counts if isinstance(v, int) and not isinstance(v, bool) and v >= 0]
            if counts and len(whole) == len(counts):
                integers = sum(whole)
            if call.get("backend") not in SAFE_BOUND_BACKENDS:
                problems.append((f"solver_results[{k}].bound_grade", f"'safe' but {call.get('backend')!r} bounds are graded 'solver' (valid within its tolerances): only HiGHS LP bounds are made safe"))
            elif not isinstance(model, dict):
                problems.append((f"solver_results[{k}].extra.model", "missing, but the call's bound is graded 'safe': only an LP's bound is made safe, and without the model's record nothing shows it has no integer variables"))
            elif integers is None:
                problems.append((f"solver_results[{k}].extra.model", f"binaries {counts[0]!r} and integers {counts[1]!r}, but the call's bound is graded 'safe': only an LP's bound is made safe, and every model record counts its integer variables (0 and 0 for an LP)"))
            elif integers:
                problems.append((f"solver_results[{k}].bound_grade", f"'safe' but the model has {integers} integer variable(s): a MIP's dual bound holds within the solver's tolerances only (grade 'solver')"))
    for k, entry in enumerate(doc.get("bounds") or []):
        if not isinstance(entry, dict) or entry.get("solver_call") is None:
            continue
        index = entry["solver_call"]
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(calls) or not isinstance(calls[index], dict):
            problems.append((f"bounds[{k}].solver_call", f"{index!r} names no recorded solver call"))
            continue
        problems.extend(_check_linked_bound(doc, k, entry, index, calls[index], instance, notes))
    termination = doc.get("termination")
    if "solver_results" in doc and termination in TERMINATIONS:
        last = calls[-1].get("termination") if calls and isinstance(calls[-1], dict) else None
        form = _formulation_of(doc, instance)
        if form is not None and any(own.termination == termination and own.recorded(_info(doc), len(calls)) for own in form.run_terminations):
            pass  # the run's own budget, which its info records (`registry.RunTermination`)
        elif termination in ("infeasible", "infeasible_or_unbounded") and doc.get("plan") is not None:
            problems.append(("termination", f"{termination!r} but the result gives a plan: a plan the evaluator accepts refutes it (`distplan.solve` ends such a run 'numerical')"))
        elif termination == "optimal" and form is not None and not (form.is_exact(instance) if instance is not None else form.exact):
            problems.append(("termination", f"'optimal' but {form.name} is no exact program{' of this instance' if form.exact else ''}: its runs end 'finished' or 'time_limit' (only an exact program's solver or own proof ends a run 'optimal')"))
        elif termination == "optimal" and _info(doc).get("stopped", STOPPED_CLOSED) != STOPPED_CLOSED:
            problems.append(("termination", f"'optimal' but info.stopped records that the run was stopped short ({_info(doc)['stopped']!r})"))
        elif termination == "optimal" and not calls and not _closed_without_calls(doc):
            problems.append(("termination", "'optimal' but the run made no solver call, and no bound of its own (a proof or a solver-free bound) closes the gap within the recorded tolerance: nothing in the record proved optimality"))
        elif termination in CALL_ONLY_TERMINATIONS and termination != last:
            problems.append(("termination", f"{termination!r} but the last solver call ended {last!r}" if calls else f"{termination!r} but the run made no solver call"))
        elif termination == "optimal" and calls and last not in OPTIMAL_LAST_CALL and not _closed_without_calls(doc):
            problems.append(("termination", f"'optimal' but the last solver call ended {last!r}: nothing in the record proved optimality"))
        elif termination == "finished":
            timed = next((k for k, c in enumerate(calls) if isinstance(c, dict) and c.get("termination") in {t.value for t in TIME_TERMINATIONS}), None)
            if timed is not None:
                problems.append(("termination", f"'finished' but solver call {timed} ended {calls[timed]['termination']!r}: time cut the run short (it ends 'time_limit')"))
    return problems


def _call_bound_side(call: dict[str, Any], k: int) -> list[tuple[str, str]]:
    """A call's bound on the wrong side of its own objective (above it in a minimization,
    below it in a maximization: the sense its model record states; zero tolerance, as
    every reported bound carries its margin already)."""
    sense = model_record(call).get("sense")
    objective: Any = call.get("objective")
    bound: Any = call.get("bound")
    if sense not in ("min", "max") or not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) for v in (objective, bound)):
        return []
    if (bound > objective) if sense == "min" else (bound < objective):
        side = "above" if sense == "min" else "below"
        return [(f"solver_results[{k}].bound", f"{bound!r} is {side} the call's own objective {objective!r} in a {'minimization' if sense == 'min' else 'maximization'}: no bound of it")]
    return []


def _reserved_options(options: dict[str, Any], backend: Any, where: str) -> list[tuple[str, str]]:
    """A raw solver option in an options record (``solver_options``) that distplan
    refuses for ``backend`` (`distplan.solvers.reserved`: its own time limit and gap, an
    objective cutoff, any option not on the backend's accepted list): `distplan.solve`
    refuses them, so the record was written otherwise, and the call's bound, "optimal" or
    "infeasible" is no proof. Raw options given to a backend this distplan does not know
    cannot be vetted: a problem too."""
    if "solver_options" not in options:  # (an older record: `_dropped_options` flags a version-3 one)
        return []
    raw = options["solver_options"]
    if not isinstance(raw, dict):
        return [(f"{where}.solver_options", f"{raw!r} is not a record of solver options")]
    try:
        found = get_backend(str(backend)).reserved_fn
    except DistplanError:
        return [(f"{where}.solver_options", f"{sorted(raw)} given to backend {backend!r}, which this distplan does not know: the options cannot be vetted")] if raw else []
    reserved = found(raw) if raw and found is not None else None
    if reserved is None:
        return []
    name, why, _ = reserved
    return [(f"{where}.solver_options.{name}", f"reserved by distplan ({why}): distplan.solve refuses it, and a call given it proves nothing")]


def _closed_without_calls(doc: dict[str, Any]) -> bool:
    """Whether a listed bound that rests on no solver call (a formulation's own proof or a
    solver-free bound: ``kind`` "proof" or "solver_free", no ``solver_call``) closes the
    result's gap within its recorded tolerance: a run proven optimal that way ends
    "optimal" whatever its calls ended (pipeline_milp's exact state search after a warm
    start's probe cut by its limit, review rev21). `check_bounds` checks the bound itself."""
    objective = doc.get("objective")
    if isinstance(objective, bool) or not isinstance(objective, int | float) or not _tolerance_ok(doc):
        return False
    tolerance, _ = recorded_tolerance(doc)
    for entry in doc.get("bounds") or []:
        if not isinstance(entry, dict) or entry.get("kind") not in ("proof", "solver_free") or entry.get("solver_call") is not None:
            continue
        value = entry.get("value")
        gap = relative_gap(float(objective), float(value)) if isinstance(value, int | float) and not isinstance(value, bool) and value <= objective else None
        if gap is not None and gap <= tolerance:
            return True
    return False


#: relative slack of a linked bound over its call's bound converted (one rounding)
CONVERSION_REL_TOLERANCE = 1e-12
#: what a conversion may raise on an instance it cannot read (a result of another kind
#: names one: `check_instance` says so)
_UNREADABLE = (DistplanError, TypeError, ValueError, KeyError, IndexError, AttributeError)


def _check_linked_bound(doc: dict[str, Any], k: int, entry: dict[str, Any], index: int, call: dict[str, Any], instance: Any = None, notes: list[str] | None = None) -> list[tuple[str, str]]:
    """A listed bound that names the solver call that proved it (``solver_call``): at most
    that call's bound converted to the result's units as the formulation states it
    (`registry.BoundSource.convert`, the function the formulation itself applies to the
    call's model record, ``extra.model``; only with ``instance``), with
    `CONVERSION_REL_TOLERANCE` for one rounding; graded "safe" only when the call's bound
    is. A record without a field the conversion reads (`registry.Unrecorded`: written
    before the record kept it) is checked against the loosest value the instance allows,
    and ``notes`` says what was not checked; unless another call of the result records
    the field, or the result records its format version (`record_version`), which makes
    the result no older one: then it is a problem naming the field. A source that is no solver
    call's bound (`check_bounds` names it) is held to the call's own bound. The conversion
    older versions kept in a call's record (``extra.bound_conversion``, derived from the
    bound it was to check) is ignored."""
    problems: list[tuple[str, str]] = []
    value, bound = entry.get("value"), call.get("bound")
    formulation = str(doc.get("formulation"))
    known = bound_source(formulation, str(entry.get("source")))
    stated = known if known is not None and known.kind == "solver" else None
    if stated is not None and stated.models is not None:
        name = model_record(call).get("name")
        if not isinstance(name, str):
            problems.append((f"bounds[{k}].solver_call", f"names solver call {index}, which records no model (extra.model.name): nothing shows the call solved the program {formulation}'s bound {entry.get('source')!r} comes from"))
        elif not stated.model_matches(formulation, name):
            problems.append((f"bounds[{k}].solver_call", f"names solver call {index}, which solved model {name!r}, but {formulation}'s bound {entry.get('source')!r} comes from a model matching {stated.models!r}: another program's bound means something else"))
    if not isinstance(bound, int | float) or isinstance(bound, bool) or not math.isfinite(bound):
        problems.append((f"bounds[{k}].solver_call", f"names solver call {index}, which records no finite bound ({bound!r}) to back {value!r}"))
    elif isinstance(value, int | float) and not isinstance(value, bool):
        allowed: float | None = float(bound)
        how = ""
        if stated is not None and stated.conversion is not None:
            try:
                allowed = None if instance is None else float(stated.convert(float(bound), instance, model_record(call)))
            except Unrecorded as exc:
                if exc.loosest is None:
                    return [(f"bounds[{k}].solver_call", f"solver call {index}'s bound {bound!r} cannot be converted: {exc}")]
                keeping = [j for j, c in enumerate(_calls(doc) or []) if isinstance(c, dict) and exc.field in model_record(c)]
                if keeping:
                    return [(f"bounds[{k}].solver_call", f"solver call {index} records no extra.model.{exc.field}, which the result's solver call {keeping[0]} records: no older record, the field was dropped ({exc.why})")]
                if (version := record_version(doc)) is not None:
                    return [(f"solver_results[{index}].extra.model.{exc.field}", f"{_dropped(version)}: bounds[{k}] ({entry.get('source')!r}) cannot be checked with its model's own conversion ({exc.why})")]
                allowed = float(exc.loosest)
                if notes is not None:
                    notes.append(f"bounds[{k}] ({entry.get('source')!r}): solver call {index} records no extra.model.{exc.field} (written before the record kept it): not checked with its model's own conversion; {exc.why}")
            except _UNREADABLE as exc:
                return [(f"bounds[{k}].solver_call", f"solver call {index}'s bound {bound!r} cannot be converted on the instance read ({type(exc).__name__}: {exc})")]
            how = f", which {formulation}'s stated conversion ({stated.conversion}) makes at most {allowed!r}"
        if allowed is not None and value > allowed + abs(allowed) * CONVERSION_REL_TOLERANCE:
            problems.append((f"bounds[{k}].value", f"{value!r} but solver call {index}, which proved it, records bound {bound!r}{how}"))
    call_grade = call.get("bound_grade") or "solver"
    if entry.get("grade") == "safe" and call_grade != "safe":
        problems.append((f"bounds[{k}].grade", f"'safe' but solver call {index}, which proved it, grades its bound {call_grade!r}"))
    elif entry.get("grade") not in BOUND_GRADES:
        problems.append((f"bounds[{k}].grade", f"{entry.get('grade')!r} is not one of {', '.join(BOUND_GRADES)}"))
    return problems


def _tolerance_ok(doc: dict[str, Any]) -> bool:
    tol = doc.get("gap_tolerance")
    return tol is None or (isinstance(tol, int | float) and not isinstance(tol, bool) and 0 <= tol < 1)


def unchecked(doc: dict[str, Any]) -> list[str]:
    """What in ``doc`` cannot be cross-checked because it was written before the record held
    the evidence (not a problem: the claim stands as recorded)."""
    if "solver_results" not in doc:  # not a stored result (a failed run's row): nothing claimed
        return []
    if RECORD_VERSION_KEY in doc:  # no older result: what it lacks is a problem (`check_recorded_fields`, `check_record_version`)
        return []
    calls = [c for c in _calls(doc) or [] if isinstance(c, dict)]
    out = []
    old_format = not new_format_fields(doc)  # (missing options of a new one are a problem: `check_solver_calls`)
    if old_format and "options" not in doc and not any(isinstance(c.get("options"), dict) for c in calls):
        out.append("results written without the options they were solved with (and no solver call recording them): gap_tolerance not cross-checked")
    elif old_format and any("options" not in c for c in calls):
        out.append("solver calls written without the options they were solved with: gap_tolerance not cross-checked against their mip_gap")
    if any("log" not in c for c in calls):
        out.append("solver calls written without their logs (results from before logs were stored)")
    return out


def check_instance(doc: dict[str, Any], instance: Any) -> list[tuple[str, str]]:
    """Whether ``instance`` is the one ``doc`` was solved on: the same name and kind, and the
    same content where the result records its digest (``info.instance_digest``, written by
    ``distplan solve``: `models.common.instance_digest`)."""
    problems: list[tuple[str, str]] = []
    name, kind = doc.get("instance"), doc.get("kind")
    if name is not None and name != instance.name:
        problems.append(("instance", f"the result is for {name!r}, the instance read is {instance.name!r}"))
    if kind is not None and kind != instance.kind:
        problems.append(("kind", f"the result is a {kind} result, the instance read is a {instance.kind} instance"))
    digest = _info(doc).get("instance_digest")
    if digest is not None and digest != digest_of(instance):
        problems.append(("info.instance_digest", f"the instance read ({instance.name!r}) is not the one solved: its content digest differs from the recorded {digest!r}"))
    return problems


#: `registry.solver_free_bounds` of an instance, computed once per instance object
_solver_free_bounds = per_instance(solver_free_bounds)


def _value(entry: dict[str, Any]) -> float | None:
    value = entry.get("value")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) else None


def _unmet_premise(k: int, entry: dict[str, Any], known: BoundSource, formulation: str, instance: Any, doc: dict[str, Any], notes: list[str] | None) -> tuple[str, str] | None:
    """The problem of a listed bound whose source names a premise (`registry.BoundSource.premise`:
    a precondition of the instance, a solver call the proof needs) that the formulation's
    own check finds unmet on ``instance`` and the result's solver call records; None when
    it holds or the source names none (a part an older record keeps no trace of: noted,
    `registry.Unchecked`; in a result that records its format version, `record_version`,
    no older record: a problem)."""
    try:
        why = known.unmet(instance, entry, _calls(doc) or [])
    except Unchecked as exc:
        if (version := record_version(doc)) is not None:
            return (f"bounds[{k}].source", f"{entry.get('source')!r}: its premise ({known.premise}) cannot be checked: {exc.why}; but the result's record_version {version} keeps every field the premise reads: one was dropped")
        if notes is not None:
            notes.append(f"bounds[{k}] ({entry.get('source')!r}): its premise ({known.premise}) holds as far as the record shows; not checked: {exc.why}")
        return None
    except _UNREADABLE as exc:
        why = f"it cannot be re-checked on the instance read ({type(exc).__name__}: {exc})"
    if why is None:
        return None
    return (f"bounds[{k}].source", f"{entry.get('source')!r} is a bound {formulation} reports only when its premise holds ({known.premise}), and it does not: {why}")


def check_bounds(doc: dict[str, Any], instance: Any, notes: list[str] | None = None) -> list[tuple[str, str]]:
    """Every listed bound is backed by what proves it, and the result's ``bound`` is theirs:

    * a finite ``bound`` is the largest listed bound (none listed: nothing backs it), and
      its grade is the result's ``bound_grade``;
    * a solver-free bound (its source one that `registry.solver_free_bounds` recomputes
      from ``instance``, maybe repeated under a formulation's name: `solver_free_match`) is
      at most the recomputed value, graded "safe";
    * a bound that names its solver call (``solver_call``) is checked against that call's
      record (`check_solver_calls`);
    * a bound whose source names a premise (`registry.BoundSource.premise`: m-SCT's
      small-communication precondition, the one plan of an instance whose every op has
      a single strategy, pipeline_milp's infeasible time-indexed call below U) holds only
      when the formulation's own check of it passes on ``instance`` and the result's
      solver call records (`_unmet_premise`);
    * any other bound must be a kind the formulation reports (`registry.BOUND_SOURCES`):
      its own proof (a state search, a DP, a Lagrangian dual), at most the grade that kind
      has, or a solver call's dual bound. A proof that can be checked again is proven again
      on ``instance`` (`registry.BoundSource.recheck`, from the bound's ``certificate``
      where it keeps one), and one that fails is a problem; the others cannot be
      re-proven here (that would take the solve again), and ``notes`` says so where the
      result's bound rests on one. A solver call's bound without its ``solver_call`` (results written
      before bounds were linked, or a link removed) is not evidence: when the result's
      bound rests on it (it is at least the result's bound, and no bound verify backs
      reaches that) it is a problem whatever the status (a "feasible" claim states its bound
      too), else ``notes`` says what was not checked;
    * a bound of no known source is a problem when the result's bound rests on it (a
      source verify does not know proves nothing), else a note."""
    problems: list[tuple[str, str]] = []
    notes = notes if notes is not None else []
    grade, bound = doc.get("bound_grade"), doc.get("bound")
    formulation = str(doc.get("formulation"))
    if grade is not None and grade not in BOUND_GRADES:
        problems.append(("bound_grade", f"{grade!r} is not one of {', '.join(BOUND_GRADES)}"))
    entries = [(k, e) for k, e in enumerate(doc.get("bounds") or []) if isinstance(e, dict)]
    values = [v for _, e in entries if (v := _value(e)) is not None]
    finite_bound = isinstance(bound, int | float) and not isinstance(bound, bool) and math.isfinite(bound)
    if finite_bound and not values:
        problems.append(("bounds", f"the result's bound {bound!r} is claimed but no bound is listed to back it"))
    elif bound is not None and entries:
        top = [e for _, e in entries if e.get("value") == bound]
        if not top:
            problems.append(("bound", f"{bound!r} is none of the listed bounds"))
        elif grade not in {e.get("grade") for e in top}:
            problems.append(("bound_grade", f"{grade!r} but the listed bound {bound!r} is graded {top[0].get('grade')!r}"))
        if values and finite_bound and max(values) > bound:
            problems.append(("bound", f"{bound!r} but a listed bound is larger ({max(values)!r}): the result's bound is the largest proven"))
    free = _solver_free_bounds(instance)
    supported: list[float] = []  # the listed bounds verify backs
    checked: list[float] = []  # of those, the ones verify proved again or cross-checked (not a proof taken as stated)
    unproven: list[tuple[int, float, str]] = []  # a formulation's own proofs verify cannot redo
    unlinked: list[tuple[int, float, str]] = []  # solver bounds without their call
    for k, entry in entries:
        value, source = _value(entry), str(entry.get("source"))
        stated_kind = entry.get("kind")
        if stated_kind is not None and stated_kind not in BOUND_KINDS:
            problems.append((f"bounds[{k}].kind", f"{stated_kind!r} is not one of {', '.join(BOUND_KINDS)}"))
            stated_kind = None
        if entry.get("solver_call") is not None:  # checked against the call: check_solver_calls
            known = bound_source(formulation, source)
            if known is None or known.kind != "solver":
                problems.append((f"bounds[{k}].source", f"{source!r} names solver call {entry.get('solver_call')!r} but is no solver call's bound {formulation} reports"))
            elif stated_kind not in (None, "solver"):
                problems.append((f"bounds[{k}].kind", f"{stated_kind!r} but {source!r} is a solver call's bound (linked to call {entry.get('solver_call')!r}): kind 'solver'"))
            elif (unmet := _unmet_premise(k, entry, known, formulation, instance, doc, notes)) is not None:
                problems.append(unmet)
            elif value is not None:
                supported.append(value)
                checked.append(value)
            continue
        recomputed = solver_free_match(source, formulation, free)
        if recomputed is not None and stated_kind not in (None, "solver_free"):
            problems.append((f"bounds[{k}].kind", f"{stated_kind!r} but {source!r} is a solver-free bound of the instance: kind 'solver_free'"))
            continue
        if recomputed is not None:
            if value is None or value > recomputed:
                problems.append((f"bounds[{k}].value", f"{entry.get('value')!r} ({source}) but the instance gives {recomputed!r}"))
            elif entry.get("grade") != "safe":
                problems.append((f"bounds[{k}].grade", f"{entry.get('grade')!r} ({source}) but solver-free bounds are 'safe'"))
            else:
                supported.append(value)
                checked.append(value)
            continue
        known = bound_source(formulation, source)
        if known is None:
            if value is not None and isinstance(bound, int | float) and finite_bound and value >= bound:
                problems.append((f"bounds[{k}].source", f"{source!r} is no bound {formulation} reports (nor a solver-free bound of the instance): the result's bound {bound!r} rests on a source verify does not know"))
            else:
                notes.append(f"bounds[{k}] ({source!r}): a source verify does not know; the result's bound does not rest on it")
            continue
        if stated_kind not in (None, known.kind):
            problems.append((f"bounds[{k}].kind", f"{stated_kind!r} but {formulation}'s bound {source!r} is a {known.kind} bound (kind {known.kind!r})"))
            continue
        if entry.get("grade") not in BOUND_GRADES or (entry.get("grade") == "safe" and known.grade != "safe"):
            problems.append((f"bounds[{k}].grade", f"{entry.get('grade')!r} but {formulation}'s {known.kind} bound {source!r} is at best {known.grade!r}"))
            continue
        if (unmet := _unmet_premise(k, entry, known, formulation, instance, doc, notes)) is not None:
            problems.append(unmet)
            continue
        if known.kind == "proof":
            if value is None:
                continue
            if known.recheck is None:
                supported.append(value)
                if known.premise is None:  # (a premise checked above is what proves it: an infeasible call's record)
                    unproven.append((k, value, source))
                else:
                    checked.append(value)
            else:
                try:
                    why = known.unproven(instance, entry)
                except Unchecked as exc:  # no certificate kept
                    if (version := record_version(doc)) is not None and version >= CERTIFICATES_SINCE:
                        problems.append((f"bounds[{k}].certificate", f"{source!r}: {exc.why}, but the result's record_version {version} keeps every certificate: it was dropped"))
                    else:
                        supported.append(value)
                        unproven.append((k, value, source))
                    continue
                except _UNREADABLE as exc:
                    why = f"it cannot be re-checked on the instance read ({type(exc).__name__}: {exc})"
                if why is not None:
                    problems.append((f"bounds[{k}].value", f"{value!r} ({source}) is not proven again on the instance ({known.recheck}): {why}"))
                else:
                    supported.append(value)
                    checked.append(value)
        elif entry.get("grade") == "safe":
            problems.append((f"bounds[{k}].grade", f"'safe' but {source!r} is a solver call's bound linked to no call: only a linked HiGHS LP bound can be safe"))
        elif value is not None:
            unlinked.append((k, value, source))
    backed = max(supported, default=-math.inf)
    reached = max(checked, default=-math.inf)
    for k, value, source in unproven:
        if finite_bound and isinstance(bound, int | float) and value >= bound and reached < bound:
            notes.append(UnredoneProof(
                f"bounds[{k}] ({source!r}): {formulation}'s own proof, which verify cannot redo (it would take the solve again); "
                f"the result's bound {bound!r} and its status rest on it ("
                + ("no bound verify checks backs it)" if reached == -math.inf else f"the bounds verify checks reach {reached!r})")
            ))
    for k, value, source in unlinked:
        if finite_bound and isinstance(bound, int | float) and value >= bound and backed < bound:
            reach = "none of the bounds verify can check backs it" if backed == -math.inf else f"the bounds verify can check reach {backed!r}"
            problems.append((f"bounds[{k}].solver_call", f"{source!r} ({value!r}) is a solver call's bound linked to no recorded call, and the result's bound {bound!r} rests on it ({reach}): re-solve to link it"))
        else:
            notes.append(f"bounds[{k}] ({source!r}): a solver call's bound linked to no recorded call, not cross-checked; the result's bound does not rest on it")
    return problems


def check_formulation(doc: dict[str, Any], instance: Any) -> list[tuple[str, str]]:
    """The result's ``formulation`` is one the registry knows for the instance's kind: the
    bound sources it may claim (`registry.BOUND_SOURCES`) are that formulation's."""
    name = doc.get("formulation")
    known = sorted(f.name for f in formulations(instance.kind))
    if not isinstance(name, str) or name not in known:
        return [("formulation", f"{name!r} is no {instance.kind} formulation (the registry's: {', '.join(known) or '(none)'}): its bounds cannot be checked against what a formulation reports")]
    if doc.get("plan") is not None and get_formulation(instance.kind, name).bound_only:
        # (review rev24 D3: a placement_milp result relabelled placement_bounds passed)
        return [("formulation", f"{name!r} proves bounds only and makes no plan, but the result holds one: it is another formulation's result")]
    return []


def check_required_version(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """With ``--require-version`` (`check_result`'s ``require_version``): the problem of a
    result without a ``record_version``. The version is what makes a missing field a
    dropped one; a result stripped of it and of the fields with it reads as an older
    record, whose gaps are only noted (review rev20 M3). Where every result is new (a
    store this distplan wrote, a result just received), requiring it closes that."""
    if RECORD_VERSION_KEY in doc:
        return []
    return [(RECORD_VERSION_KEY, f"missing, and only results that record their format version are accepted here (--require-version; this distplan writes {RECORD_VERSION}): a result without one is read as an older record, whose missing fields are only noted")]


def check_result(doc: dict[str, Any], instance: Any, notes: list[str] | None = None, *, require_version: bool = False) -> list[tuple[str, str]]:
    """Every way in which ``doc`` (a ``Result.to_dict()``) disagrees with the rule, with the
    instance it names, or with a fresh evaluation of its plan on ``instance``: (field,
    message) pairs. ``notes`` collects what could not be checked (`check_bounds`). A
    ``record_version`` this verifier does not know is the only problem reported
    (`check_record_version`); a known one requires its fields (`check_recorded_fields`);
    ``require_version``: a result without one is a problem too (`check_required_version`)."""
    version_problems = check_record_version(doc)
    if version_problems:
        return version_problems  # a format this verifier does not know: nothing in it can be read as known
    problems = (check_required_version(doc) if require_version else []) + check_claims(doc) + check_recorded_fields(doc, instance) + check_formulation(doc, instance)
    if any(name == "formulation" for name, _ in problems):
        return problems  # its bounds and calls are no formulation's of this kind: nothing to check them against
    problems += check_backend(doc) + check_call_models(doc, instance, notes) + check_solver_calls(doc, instance, notes) + check_instance(doc, instance) + check_bounds(doc, instance, notes)
    plan = doc.get("plan")
    if plan is None:
        return problems
    spec = kind_spec(instance.kind)
    try:
        check = spec.evaluate(instance, spec.read_plan(instance, plan))
    except (DistplanError, TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        problems.append(("plan", f"the stored plan cannot be read: {exc}"))
        return problems
    if not check.feasible:
        problems.append(("plan", f"the evaluator rejects the plan: {'; '.join(check.violations[:3])}"))
    objective = doc.get("objective")
    if isinstance(objective, int | float) and not math.isclose(check.objective, objective, rel_tol=OBJECTIVE_REL_TOLERANCE, abs_tol=1e-15):
        problems.append(("objective", f"stored objective {objective!r} but the evaluator computes {check.objective!r}"))
    return problems + _stored_check_problems(doc.get("check"), check)


def _stored_check_problems(stored: Any, fresh: Any) -> list[tuple[str, str]]:
    """The result's recorded evaluator verdict (``check``) against the fresh one: its
    ``feasible`` and ``objective`` must be what the evaluator says of the plan now."""
    if not isinstance(stored, dict):
        return []
    problems: list[tuple[str, str]] = []
    if "feasible" in stored and stored["feasible"] is not fresh.feasible:
        problems.append(("check.feasible", f"records {stored['feasible']!r}, but the evaluator finds the plan {'feasible' if fresh.feasible else 'infeasible'}"))
    value = stored.get("objective")
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or not math.isclose(fresh.objective, value, rel_tol=OBJECTIVE_REL_TOLERANCE, abs_tol=1e-15)):
        problems.append(("check.objective", f"records {value!r}, but the evaluator computes {fresh.objective!r}"))
    return problems


def overrun_note(doc: dict[str, Any]) -> str | None:
    """What a result's recorded wall time (``timings.wall_seconds``) says of its time limit
    (``options.time_limit``), when it ran past it: a note, not a problem (the plan and its
    bounds are checked on their own), saying whether it stayed within `run_grace`."""
    options, timings = doc.get("options"), doc.get("timings")
    limit = options.get("time_limit") if isinstance(options, dict) else None
    wall = timings.get("wall_seconds") if isinstance(timings, dict) else None
    if not isinstance(limit, int | float) or not isinstance(wall, int | float) or isinstance(limit, bool) or isinstance(wall, bool):
        return None
    if not math.isfinite(wall) or wall <= limit:
        return None
    grace = run_grace(limit)
    where = "within" if wall <= limit + grace else "beyond"
    return f"the run took {wall:.3f} s, {wall - limit:.3f} s past its time limit of {limit:g} s ({where} the {grace:g} s a solve may run past its limit)"


def verify_result(doc: dict[str, Any], instance: Any, report: VerifyReport, label: str = "", *, require_version: bool = False) -> None:
    """Append to ``report`` every problem `check_result` finds, as ``TAG: FIELD: message``."""
    report.checked += 1
    tag = label or f"{doc.get('instance')} / {doc.get('formulation')} / {doc.get('backend')}"
    notes: list[str] = []
    problems = check_result(doc, instance, notes, require_version=require_version)
    report.note_once(*notes)
    report.problems.extend(f"{tag}: {name}: {message}" for name, message in problems)
    unredone = [n for n in notes if isinstance(n, UnredoneProof)]
    report.unredone.extend(f"{tag}: {n}" for n in unredone)
    report.note_once(*unchecked(doc))
    overrun = overrun_note(doc)
    if overrun is not None:
        report.notes.append(f"{tag}: {overrun}")
    if not problems and doc.get("objective") is not None:
        tol, recorded = recorded_tolerance(doc)
        report.notes.append(
            f"ok {tag}: objective {doc['objective']:.9g} re-evaluated, status {doc.get('status')} under gap_tolerance {tol:g}"
            + ("" if recorded else " (default: the result records none)")
            + ("; its bound and status rest on a proof verify cannot redo" if unredone else "")
        )


def verify_path(path: str | Path, instance: str | None = None, *, require_version: bool = False) -> VerifyReport:
    """Verify a result file written by ``distplan solve --result`` (benchmark databases are
    the bench layer's: ``distplan verify`` routes them to `distplan.bench.verify`);
    ``require_version``: a result without a ``record_version`` is a problem
    (`check_required_version`)."""
    p = Path(path)
    doc = read_json(p)
    if not isinstance(doc, dict) or "kind" not in doc:
        raise InputError(str(p), "not a result document", "write one with `distplan solve ... --result FILE`")
    if "formulation" not in doc:  # (every result names its formulation; an instance file has a kind too)
        raise InputError(str(p), f"not a result document: it has no formulation, and reads as a {doc.get('kind')} instance", "verify the result of a solve: `distplan solve INSTANCE -f FORMULATION --result FILE`, then `distplan verify FILE`")
    source = instance or _info(doc).get("source") or doc.get("instance")
    if not isinstance(source, str | Path):
        raise InputError(str(p), f"the result's instance {source!r} is not a name or a path", "pass --instance FILE")
    if not source:
        raise InputError(str(p), "the result names no instance", "pass --instance FILE")
    report = VerifyReport()
    verify_result(doc, load_instance(source), report, require_version=require_version)
    return report
