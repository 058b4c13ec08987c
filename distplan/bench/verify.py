"""Audit a benchmark database: re-evaluate every plan, audit bounds, grade heuristics.

`audit_database(path)` returns an `Audit`; `verify_database(path)` (what
``distplan verify DB`` calls) turns it into a `distplan.verify.VerifyReport`.

1. **Columns.** Every stored column is audited: the columns a run's ``result_json``
   also holds (termination, status, objective, bound, bound source, gap, timings, kind,
   formulation, backend, version) must equal it; ``result_json.gap_tolerance`` must be the
   campaign's ``mip_gap`` (or the default); ``run_key`` must be the hash of the run's
   identity columns, ``instance_hash`` that of the stored instance document,
   ``time_limit`` the one in ``options_json``, ``exact``/``program``/``bound_only`` the
   formulation's, ``verdict`` what the evaluator says of the plan; a run that stored a
   result has no ``error`` text (a failed run stores its error and no result). An edited
   ``result_json`` thus disagrees with the columns or with the recomputation below.
2. **Re-evaluation and the optimality rule.** Every stored result is checked through
   `distplan.verify.check_result` against the instance document kept in the database:
   gap and status recomputed from objective and bound under the recorded tolerance,
   ``bound <= objective`` with zero tolerance, the plan re-evaluated by the kind's
   independent evaluator (feasibility, objective). A run that ``solve`` already caught
   returning a plan the evaluator rejects (``plan_rejected``) is a wrong answer too.
3. **Bound audit** (a solver bug detector). A proven lower bound may never exceed any
   feasible objective of the same instance (minimization). For every run with a bound,
   the smallest verified objective among runs of the *same formulation* is compared
   first (a disagreement between backends), then the smallest among all formulations
   (every stored bound is a bound on the instance optimum and every verified plan a
   feasible plan of the instance). Each violation names both runs. The run whose bound
   is too high is the wrong one: the other run's plan has passed the evaluator. An exact
   formulation claiming the instance infeasible while some run holds a verified plan is a
   disagreement too.
4. **Heuristic quality.** For every heuristic formulation (not exact, not bounds-only),
   objective / best certified bound per instance, where the best certified bound is the
   largest bound of the instance that no disagreement implicates; an instance's runs over
   seeds and repetitions give it one ratio, their median (`QUALITY_PER_INSTANCE`).
5. **Guarantees** (`distplan.bench.guarantees`): known approximation guarantees of
   heuristics (ETF, Hanen–Munier) where their preconditions hold.

Tolerances: none between a bound and an objective (a proven bound carries its own safety
margin); stored and recomputed floats must agree to the bit where both are stored, to
relative 1e-9 where one is recomputed.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distplan.api import DEFAULT_GAP_TOLERANCE
from distplan.errors import DistplanError
from distplan.formulations.registry import get_formulation
from distplan.models.common import instance_from_dict
from distplan.verify import UnredoneProof, VerifyReport, check_result, unchecked

from .campaign import instance_hash, latest_campaigns, run_key, stored_runs
from .guarantees import GuaranteeCheck, InstanceFacts, checks_for
from .store import DAMAGED_FIX, LATER_COLUMNS, Store, column_json, open_existing

#: columns that repeat a field of result_json (column, key in result_json; "timings.x" nests)
MIRRORED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("kind", "kind"),
    ("formulation", "formulation"),
    ("backend", "backend"),
    ("backend_version", "backend_version"),
    ("termination", "termination"),
    ("status", "status"),
    ("objective", "objective"),
    ("bound", "bound"),
    ("bound_source", "bound_source"),
    ("gap", "gap"),
    ("bound_grade", "bound_grade"),
    ("gap_tolerance", "gap_tolerance"),
    ("build_seconds", "timings.build_seconds"),
    ("handover_seconds", "timings.handover_seconds"),
    ("solve_seconds", "timings.solve_seconds"),
    ("wall_seconds", "timings.wall_seconds"),
)
#: how a heuristic's runs of one instance (seeds, repetitions) combine into the instance's
#: quality ratio: the median of their ratios (said in the report, its JSON and verify)
QUALITY_PER_INSTANCE = "median over the instance's runs"
#: category of a finding by the field it names
CATEGORIES = {
    "bound": "bound claim",
    "bounds": "bound claim",
    "termination": "termination claim",
    "plan": "infeasible plan",
    "objective": "objective mismatch",
    "status": "optimal claim",
    "gap": "gap mismatch",
}


@dataclass
class Finding:
    """A problem with one run (a wrong answer), optionally against another run."""

    category: str
    run_key: str
    message: str
    other_run_key: str | None = None


@dataclass
class QualityRow:
    """Objective / best certified bound of one heuristic run (``instance_hash`` tells
    instances apart: runs of one instance over seeds and repetitions are one instance)."""

    label: str
    backend: str
    instance: str
    ratio: float
    instance_hash: str = ""


@dataclass
class Audit:
    checked: int = 0
    reevaluated: int = 0
    findings: list[Finding] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    quality: list[QualityRow] = field(default_factory=list)
    guarantees: list[GuaranteeCheck] = field(default_factory=list)
    best_bound: dict[str, float] = field(default_factory=dict)
    best_objective: dict[str, float] = field(default_factory=dict)
    #: the runs whose bound and status rest on a proof verify cannot redo (`UnredoneProof`)
    unredone: list[str] = field(default_factory=list)

    def wrong_runs(self) -> set[str]:
        return {f.run_key for f in self.findings}

    def quality_per_instance(self) -> dict[tuple[str, str], dict[str, float]]:
        """Per heuristic label and backend, each instance's ratio: the median of its runs'
        ratios (`QUALITY_PER_INSTANCE`). Runs of one instance over seeds and repetitions
        are one instance (review D8: two repetitions of one instance were counted as two
        instances)."""
        runs: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        for q in self.quality:
            runs[(q.label, q.backend)][q.instance_hash or q.instance].append(q.ratio)
        return {key: {h: statistics.median(rs) for h, rs in by.items()} for key, by in runs.items()}

    def quality_summary(self) -> list[dict[str, Any]]:
        """min / median / max over instances of the per-instance ratio
        (`quality_per_instance`), per heuristic label and backend; ``instances`` counts
        distinct instances, ``runs`` the runs they combine."""
        counts: dict[tuple[str, str], int] = defaultdict(int)
        for q in self.quality:
            counts[(q.label, q.backend)] += 1
        out = []
        for (label, backend), by in sorted(self.quality_per_instance().items()):
            ratios = list(by.values())
            out.append(
                {
                    "formulation": label,
                    "backend": backend,
                    "instances": len(ratios),
                    "runs": counts[(label, backend)],
                    "per_instance": QUALITY_PER_INSTANCE,
                    "min": min(ratios),
                    "median": statistics.median(ratios),
                    "max": max(ratios),
                }
            )
        return out


def label_of(run: dict[str, Any]) -> str:
    """The run's campaign entry label (stored since it got its column), else the formulation
    name with its parameters, e.g. ``baechi_sct[theta=0.1]``."""
    if run.get("label"):
        return str(run["label"])
    params = column_json(run, "params_json", {}) or {}
    if not params:
        return str(run["formulation"])
    return f"{run['formulation']}[{','.join(f'{k}={v}' for k, v in sorted(params.items()))}]"


def describe_run(run: dict[str, Any]) -> str:
    return (
        f"{run['formulation']} on {run['backend']} {run.get('backend_version') or ''} (run {run['run_key']}, seed {run.get('seed')}, "
        f"termination {run['termination']}, status {run['status']}, objective {_num(run.get('objective'))}, "
        f"bound {_num(run.get('bound'))} [{run.get('bound_source') or '-'}])"
    )


def _num(v: Any) -> str:
    return "-" if v is None else f"{float(v):.10g}"


def _exceeds(bound: float, objective: float) -> bool:
    """A proven lower bound above a verified feasible objective: zero tolerance."""
    return bound > objective


def audit_database(path: str | Path | Store, *, require_version: bool = False) -> Audit:
    """Run the whole audit on a database (see the module docstring); ``require_version``:
    a run whose result records no format version is a problem
    (`distplan.verify.check_required_version`)."""
    store = path if isinstance(path, Store) else open_existing(path)
    try:
        return _audit(store, require_version)
    finally:
        if store is not path:
            store.close()


def _claims(run: dict[str, Any]) -> bool:
    """Whether a run's columns claim something to check: a plan, a status other than
    "none", a bound or an objective (a run that failed claims none of them)."""
    return run.get("plan_json") is not None or run["status"] != "none" or run.get("bound") is not None or run.get("objective") is not None


def _audit(store: Store, require_version: bool = False) -> Audit:
    audit = Audit()
    runs = store.runs()
    instances: dict[str, tuple[Any, str] | None] = {}
    verified: dict[str, bool] = {}  # run_key -> plan re-evaluated without problems
    for run in runs:
        audit.checked += 1
        h = run["instance_hash"]
        tag = f"{run['instance']} / {label_of(run)} / {run['backend']} (run {run['run_key']})"
        if h not in instances:
            doc = store.instance_document(h)
            try:
                instances[h] = None if doc is None else (instance_from_dict(doc), instance_hash(doc))
            except DistplanError as exc:
                instances[h] = None
                audit.notes.append(f"instance {run['instance']} ({h}) cannot be read: {exc}")
        entry = instances[h]
        problems = audit_columns(run, None if entry is None else entry[1])
        if run["termination"] == "plan_rejected":
            problems.append(("termination", f"solve rejected the plan: {run.get('error') or ''}".strip()))
        elif entry is None:
            if _claims(run):
                problems.append(("instance_hash", "the instance document is not stored; the result cannot be re-evaluated"))
        else:
            doc, stored = result_document(run)
            # (a run that failed stores no result, only its columns: a version is required of
            # what a run stored or claims, review rev21)
            claims = stored is not None or _claims(run)
            try:
                checked_notes: list[str] = []  # what verify could not check (as `distplan verify FILE` says)
                problems.extend(check_result(doc, entry[0], checked_notes, require_version=require_version and claims))
                audit.notes.extend(n for n in dict.fromkeys(checked_notes + unchecked(doc)) if n not in audit.notes)
                audit.unredone.extend(f"{tag}: {n}" for n in checked_notes if isinstance(n, UnredoneProof))
                if stored is not None and any(not _same(doc.get(k), stored.get(k)) for k in ("objective", "bound", "gap", "status")):
                    # the columns and result_json disagree: check result_json on its own too
                    problems.extend((f"result_json.{name}", message) for name, message in check_result(stored, entry[0], require_version=require_version))
            except DistplanError as exc:
                problems.append(("plan", f"the stored plan cannot be read: {exc}"))
            if doc.get("plan") is not None:
                audit.reevaluated += 1
                verified[run["run_key"]] = not problems and run.get("objective") is not None
                feasible = not any(name == "plan" for name, _ in problems)
                if run.get("verdict") != ("accepted" if feasible else "rejected"):
                    problems.append(("verdict", f"stored verdict {run.get('verdict')!r} but the evaluator {'accepts' if feasible else 'rejects'} the plan"))
            elif run.get("verdict") is not None:
                problems.append(("verdict", f"stored verdict {run.get('verdict')!r} without a plan"))
        for name, message in problems:
            audit.findings.append(Finding(_category(name, message), run["run_key"], f"{tag}: {name}: {message}"))
    audit.notes.extend(missing_runs(store.campaigns(), runs))
    _bound_audit(runs, verified, audit)
    _heuristics(runs, verified, {h: None if e is None else e[0] for h, e in instances.items()}, audit)
    return audit


def missing_runs(campaigns: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[str]:
    """A note for each campaign with runs it planned that the database does not hold: runs
    deleted, or a campaign that was interrupted (running it again runs the missing ones).
    The planned runs are re-expanded from the campaign text the database keeps (their run
    keys: a run planned twice is one run); when that text no longer expands (a moved
    instance file), its stored ``planned`` count is compared. Not a problem: an
    interrupted campaign looks the same."""
    stored_keys = {r["run_key"] for r in runs}
    stored: dict[str, int] = defaultdict(int)
    for r in runs:
        stored[str(r.get("campaign"))] += 1
    notes = []
    for name, c in sorted(latest_campaigns(campaigns).items()):
        specs = stored_runs(c)
        if specs is not None:
            keys = {spec["run_key"] for spec in specs}
            missing = sorted(keys - stored_keys)
            if missing:
                shown = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
                notes.append(f"MISSING campaign {name!r} planned {len(keys)} run(s), {len(missing)} not in the database ({shown}): deleted, or the campaign was interrupted (`distplan bench run CAMPAIGN --db DB` runs what is missing)")
        elif isinstance(c.get("planned"), int) and stored[name] < c["planned"]:
            notes.append(f"MISSING campaign {name!r} planned {c['planned']} run(s), the database holds {stored[name]}: deleted, or the campaign was interrupted (its text no longer expands here, so the runs cannot be named)")
    return notes


def _category(name: str, message: str) -> str:
    """A finding's category by the field it names (review rev29 D9: a forged termination
    read "plan rejected", a bound that is none of the listed ones "bound above own
    objective")."""
    if name == "status" and "optimal" not in message:
        return "status mismatch"
    root = name.split("[")[0].split(".")[0]
    if root in ("bound", "bounds") and ("exceeds" in message or "above" in message):
        return "bound above own objective"
    return CATEGORIES.get(root, f"{name} mismatch")


def result_document(run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The result a run row's columns state (objective, bound, gap, status from the
    columns, the rest from ``result_json``, the plan from ``plan_json``), and its
    ``result_json`` with the plan (None for a run that stored none)."""
    plan = column_json(run, "plan_json")
    stored = None
    if run.get("result_json"):
        try:
            parsed = json.loads(run["result_json"])
        except ValueError:  # reported by audit_columns
            parsed = None
        if isinstance(parsed, dict):
            stored = {**parsed, "plan": plan}
    columns = {k: run.get(k) for k in ("instance", "formulation", "backend", "objective", "bound", "gap", "status")}
    return {**(stored or {}), **columns, "plan": plan}, stored


def _lookup(doc: Any, key: str) -> Any:
    for part in key.split("."):
        if not isinstance(doc, dict):
            return None
        doc = doc.get(part)
    return doc


def _same(a: Any, b: Any) -> bool:
    """Equal, floats to the bit (SQLite REAL and JSON both keep a double exactly)."""
    numeric = (int, float)
    if isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool) and not isinstance(b, bool):
        return float(a) == float(b) or (math.isnan(float(a)) and math.isnan(float(b)))
    return bool(a == b)


def audit_columns(run: dict[str, Any], document_hash: str | None) -> list[tuple[str, str]]:
    """Problems with the stored columns of one run row (see the module docstring, item 1)."""
    problems: list[tuple[str, str]] = []
    try:
        options = json.loads(run.get("options_json") or "{}")
        params = json.loads(run.get("params_json") or "{}")
    except ValueError as exc:
        return [("options_json", f"not JSON: {exc}")]
    for name, value in (("options_json", options), ("params_json", params)):
        if not isinstance(value, dict):
            return [(name, f"a JSON {type(value).__name__}, not an object of {name.split('_')[0]}: the run cannot be identified ({DAMAGED_FIX})")]
    expected_key = run_key(run["instance_hash"], run["formulation"], params, run["backend"], options, run.get("seed"), run.get("repetition"))  # type: ignore[arg-type]
    if run["run_key"] != expected_key:
        problems.append(("run_key", f"{run['run_key']} is not {expected_key}, the hash of the run's instance, formulation, parameters, backend, options, seed and repetition"))
    if document_hash is not None and document_hash != run["instance_hash"]:
        problems.append(("instance_hash", f"{run['instance_hash']} but the stored instance document hashes to {document_hash}"))
    if not _same(run.get("time_limit"), options.get("time_limit")):
        problems.append(("time_limit", f"{run.get('time_limit')!r} but options_json says {options.get('time_limit')!r}"))
    try:
        form = get_formulation(run["kind"], run["formulation"])
    except DistplanError:
        form = None
    if form is not None:
        for column, value in (("exact", bool(form.exact)), ("bound_only", bool(form.bound_only)), ("program", form.program)):
            stored = run.get(column) if column == "program" else bool(run.get(column))
            if stored != value:
                problems.append((column, f"{run.get(column)!r} but formulation {form.name} has {value!r}"))
    for column in ("process_seconds", "peak_memory_bytes", *(c for c, k in MIRRORED_COLUMNS if k.startswith("timings."))):
        v = run.get(column)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not v >= 0):
            problems.append((column, f"{v!r} is not a non-negative number"))
    if not run.get("result_json"):
        return problems
    if run.get("error") not in (None, ""):  # (a run that fails stores its error and no result: `record.execute_run`)
        text = str(run["error"]).splitlines()[0][:200]
        problems.append(("error", f"{text!r}, but the run stored a result (termination {run.get('termination')!r}): a run that returns a result records no error"))
    try:
        result = json.loads(run["result_json"])
    except ValueError as exc:
        return [*problems, ("result_json", f"not JSON: {exc}")]
    if not isinstance(result, dict):
        return [*problems, ("result_json", "not a JSON object")]
    for column, key in MIRRORED_COLUMNS:
        if column in LATER_COLUMNS and run.get(column) is None:
            continue  # a run stored before the column existed (NULL there): result_json holds the value, checked on its own
        if not _same(run.get(column), _lookup(result, key)):
            problems.append((f"result_json.{key}", f"{_lookup(result, key)!r} but column {column} holds {run.get(column)!r}"))
    mip_gap = options.get("mip_gap")
    expected_tol = DEFAULT_GAP_TOLERANCE if mip_gap is None else float(mip_gap)
    if "gap_tolerance" in result and not _same(result["gap_tolerance"], expected_tol):
        problems.append(("result_json.gap_tolerance", f"{result['gap_tolerance']!r} but the run was solved with mip_gap {expected_tol!r}"))
    return problems


def _bound_audit(runs: list[dict[str, Any]], verified: dict[str, bool], audit: Audit) -> None:
    by_instance: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        by_instance[run["instance_hash"]].append(run)
    for h, group in by_instance.items():
        feasible = [r for r in group if verified.get(r["run_key"])]
        best_any = min(feasible, key=lambda r: r["objective"]) if feasible else None
        best_same: dict[str, dict[str, Any]] = {}
        for r in feasible:
            key = label_of(r)
            if key not in best_same or r["objective"] < best_same[key]["objective"]:
                best_same[key] = r
        if best_any is not None:
            audit.best_objective[h] = float(best_any["objective"])
        implicated: set[str] = set()
        for a in group:
            if a["termination"] == "infeasible" and a.get("exact") and best_any is not None:
                implicated.add(a["run_key"])
                audit.findings.append(
                    Finding(
                        "solver disagreement",
                        a["run_key"],
                        f"{a['instance']}: {describe_run(a)} claims the instance infeasible, but {describe_run(best_any)} found a verified plan",
                        best_any["run_key"],
                    )
                )
                continue
            bound = a.get("bound")
            if bound is None or not math.isfinite(bound) or a["termination"] == "plan_rejected":
                continue
            # against the best plan of the same formulation, then of any formulation
            for category, ref in (("solver disagreement", best_same.get(label_of(a))), ("bound disagreement across formulations", best_any)):
                if ref is not None and ref["run_key"] != a["run_key"] and _exceeds(bound, ref["objective"]):
                    implicated.add(a["run_key"])
                    audit.findings.append(
                        Finding(
                            category,
                            a["run_key"],
                            f"{a['instance']}: proven bound {bound:.10g} of {describe_run(a)} exceeds the feasible objective "
                            f"{ref['objective']:.10g} of {describe_run(ref)}",
                            ref["run_key"],
                        )
                    )
                    break
        certified = [r["bound"] for r in group if r.get("bound") is not None and math.isfinite(r["bound"]) and r["run_key"] not in implicated and r["termination"] != "plan_rejected"]
        if certified:
            audit.best_bound[h] = float(max(certified))


def _heuristics(runs: list[dict[str, Any]], verified: dict[str, bool], instances: dict[str, Any], audit: Audit) -> None:
    for run in runs:
        if run.get("exact") or run.get("bound_only") or not verified.get(run["run_key"]):
            continue
        h = run["instance_hash"]
        best = audit.best_bound.get(h)
        if best is not None and best > 0:
            audit.quality.append(QualityRow(label_of(run), run["backend"], run["instance"], float(run["objective"]) / best, h))
        inst = instances.get(h)
        if inst is None:
            continue
        facts = InstanceFacts(best_objective=audit.best_objective.get(h), best_bound=best)
        for checker in checks_for(run["kind"], run["formulation"]):
            result = checker(inst, run, facts)
            audit.guarantees.append(result)
            if result.verdict == "violated" and result.binding:
                audit.findings.append(
                    Finding(
                        "guarantee violated",
                        run["run_key"],
                        f"{run['instance']}: {describe_run(run)} exceeds the guarantee {result.guarantee}: "
                        f"objective {result.objective:.10g} > {result.rhs_upper:.10g} (an upper estimate of the guarantee)",
                    )
                )


def verify_database(path: str | Path, *, require_version: bool = False) -> VerifyReport:
    """``distplan verify DB``: every problem of the audit, plus a summary in the notes
    (``require_version``: `audit_database`'s)."""
    audit = audit_database(path, require_version=require_version)
    report = VerifyReport(checked=audit.checked, unredone=list(audit.unredone))
    report.notes.extend(audit.notes)
    report.notes.append(f"{audit.reevaluated} stored plan(s) re-evaluated with the independent evaluator")
    instances = len({*audit.best_bound, *audit.best_objective})
    report.notes.append(f"bound audit over {instances} instance(s): {sum(1 for f in audit.findings if 'disagreement' in f.category)} disagreement(s)")
    for row in audit.quality_summary():
        report.notes.append(
            f"heuristic {row['formulation']} on {row['backend']}: objective / best bound over {row['instances']} instance(s) "
            f"({row['runs']} run(s); per instance the {row['per_instance']}) "
            f"min {row['min']:.4g}, median {row['median']:.4g}, max {row['max']:.4g}"
        )
    applied = [g for g in audit.guarantees if g.applies]
    for g in applied:
        if g.verdict in ("violated", "possibly violated"):
            report.notes.append(
                f"guarantee {g.guarantee} {g.verdict} by {g.formulation} on {g.instance}: objective {g.objective:.6g}, "
                f"guarantee between {_num(g.rhs_lower)} and {_num(g.rhs_upper)}" + ("" if g.binding else " (not proven for this algorithm: reported only)")
            )
    report.notes.append(f"guarantees checked on {len(applied)} run(s) whose precondition holds")
    report.problems.extend(f"[{f.category}] {f.message}" for f in audit.findings)
    return report
