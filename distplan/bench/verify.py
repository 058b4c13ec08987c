"""Audit a benchmark database: re-evaluate every plan, audit bounds, grade heuristics.

`audit_database(path)` returns an `Audit`; `verify_database(path)` (what
``distplan verify DB`` calls) turns it into a `distplan.verify.VerifyReport`.

1. **Re-evaluation.** Every stored plan is checked again with the kind's independent
   evaluator through `distplan.verify.verify_result`, against the instance document kept
   in the database: feasibility, the objective recomputed, and the termination claims
   (an "optimal" status with a gap above `distplan.api.OPTIMALITY_TOLERANCE`, or a bound
   above the run's own objective, is flagged). A run that ``solve`` already caught
   returning a plan the evaluator rejects (``plan_rejected``) is a wrong answer too.
2. **Bound audit** (a solver bug detector). A proven lower bound may never exceed any
   feasible objective of the same instance (minimization). For every run with a bound,
   the smallest verified objective among runs of the *same formulation* is compared
   first (a disagreement between backends), then the smallest among all formulations
   (every stored bound is a bound on the instance optimum and every verified plan a
   feasible plan of the instance). Each violation names both runs. The run whose bound
   is too high is the wrong one: the other run's plan has passed the evaluator. An exact
   formulation claiming the instance infeasible while some run holds a verified plan is a
   disagreement too.
3. **Heuristic quality.** For every heuristic formulation (not exact, not bounds-only),
   objective / best certified bound per instance, where the best certified bound is the
   largest bound of the instance that no disagreement implicates.
4. **Guarantees** (`distplan.bench.guarantees`): known approximation guarantees of
   heuristics (ETF, Hanen–Munier) where their preconditions hold.

Tolerances: objective and bound compare with relative `OPTIMALITY_TOLERANCE` plus 1e-9
absolute, as in ``distplan.solve``.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distplan.api import OPTIMALITY_TOLERANCE
from distplan.errors import DistplanError
from distplan.models.common import instance_from_dict
from distplan.verify import VerifyReport, verify_result

from .guarantees import GuaranteeCheck, InstanceFacts, checks_for
from .store import Store, open_existing

ABS_TOLERANCE = 1e-9


@dataclass
class Finding:
    """A problem with one run (a wrong answer), optionally against another run."""

    category: str
    run_key: str
    message: str
    other_run_key: str | None = None


@dataclass
class QualityRow:
    """Objective / best certified bound of one heuristic run."""

    label: str
    backend: str
    instance: str
    ratio: float


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

    def wrong_runs(self) -> set[str]:
        return {f.run_key for f in self.findings}

    def quality_summary(self) -> list[dict[str, Any]]:
        """min / median / max ratio per heuristic label and backend."""
        groups: dict[tuple[str, str], list[float]] = defaultdict(list)
        for q in self.quality:
            groups[(q.label, q.backend)].append(q.ratio)
        out = []
        for (label, backend), ratios in sorted(groups.items()):
            out.append({"formulation": label, "backend": backend, "instances": len(ratios), "min": min(ratios), "median": statistics.median(ratios), "max": max(ratios)})
        return out


def label_of(run: dict[str, Any]) -> str:
    """Formulation name with its parameters, e.g. ``baechi_sct[theta=0.1]``."""
    params = json.loads(run.get("params_json") or "{}")
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
    return bound > objective * (1 + OPTIMALITY_TOLERANCE) + ABS_TOLERANCE


def audit_database(path: str | Path | Store) -> Audit:
    """Run the whole audit on a database (see the module docstring)."""
    store = path if isinstance(path, Store) else open_existing(path)
    try:
        return _audit(store)
    finally:
        if store is not path:
            store.close()


def _audit(store: Store) -> Audit:
    audit = Audit()
    runs = store.runs()
    instances: dict[str, Any] = {}
    verified: dict[str, bool] = {}  # run_key -> plan re-evaluated without problems
    for run in runs:
        audit.checked += 1
        h = run["instance_hash"]
        tag = f"{run['instance']} / {label_of(run)} / {run['backend']} (run {run['run_key']})"
        if run["termination"] == "plan_rejected":
            audit.findings.append(Finding("plan rejected", run["run_key"], f"{tag}: solve rejected the plan: {run.get('error') or ''}".strip()))
            continue
        if run.get("plan_json") is None and run["status"] == "none" and run.get("bound") is None:
            continue
        if h not in instances:
            doc = store.instance_document(h)
            try:
                instances[h] = None if doc is None else instance_from_dict(doc)
            except DistplanError as exc:
                instances[h] = None
                audit.notes.append(f"instance {run['instance']} ({h}) cannot be read: {exc}")
        inst = instances[h]
        if inst is None:
            audit.findings.append(Finding("no instance", run["run_key"], f"{tag}: the instance document is not stored; the plan cannot be re-evaluated"))
            continue
        doc = {
            "instance": run["instance"],
            "formulation": run["formulation"],
            "backend": run["backend"],
            "objective": run.get("objective"),
            "bound": run.get("bound"),
            "status": run["status"],
            "plan": None if run.get("plan_json") is None else json.loads(run["plan_json"]),
        }
        report = VerifyReport()
        try:
            verify_result(doc, inst, report, label=tag)
        except DistplanError as exc:
            report.problems.append(f"{tag}: the stored plan cannot be read: {exc}")
        for problem in report.problems:
            audit.findings.append(Finding(_category(problem), run["run_key"], problem))
        if doc["plan"] is not None:
            audit.reevaluated += 1
            verified[run["run_key"]] = not report.problems and run.get("objective") is not None
    _bound_audit(runs, verified, audit)
    _heuristics(runs, verified, instances, audit)
    return audit


def _category(problem: str) -> str:
    if "claims optimal" in problem:
        return "optimal claim"
    if "exceeds the objective" in problem:
        return "bound above own objective"
    if "evaluator rejects" in problem:
        return "infeasible plan"
    if "stored objective" in problem:
        return "objective mismatch"
    return "verification"


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
            audit.quality.append(QualityRow(label_of(run), run["backend"], run["instance"], float(run["objective"]) / best))
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


def verify_database(path: str | Path) -> VerifyReport:
    """``distplan verify DB``: every problem of the audit, plus a summary in the notes."""
    audit = audit_database(path)
    report = VerifyReport(checked=audit.checked)
    report.notes.extend(audit.notes)
    report.notes.append(f"{audit.reevaluated} stored plan(s) re-evaluated with the independent evaluator")
    instances = len({*audit.best_bound, *audit.best_objective})
    report.notes.append(f"bound audit over {instances} instance(s): {sum(1 for f in audit.findings if 'disagreement' in f.category)} disagreement(s)")
    for row in audit.quality_summary():
        report.notes.append(
            f"heuristic {row['formulation']} on {row['backend']}: objective / best bound over {row['instances']} instance(s) "
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
