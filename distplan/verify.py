"""Re-check stored results: the plan with the independent evaluator, the objective, and
the termination claims (an "optimal" with a gap above tolerance is flagged, and so is a
bound above the objective).

`verify_result(doc, instance)` checks one result document (as written by
``distplan solve --result``); `verify_path` reads a file (a result JSON, or a benchmark
database when the benchmarking module provides one).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from distplan.api import OPTIMALITY_TOLERANCE
from distplan.errors import InputError
from distplan.instances import load_instance
from distplan.models.common import kind_spec, read_json


@dataclass
class VerifyReport:
    checked: int = 0
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def lines(self) -> list[str]:
        out = [*self.notes]
        out.extend(f"PROBLEM {p}" for p in self.problems)
        out.append(f"{self.checked} result(s) checked, {len(self.problems)} problem(s)")
        return out


def verify_result(doc: dict[str, Any], instance: Any, report: VerifyReport, label: str = "") -> None:
    """Append to ``report`` every way in which ``doc`` disagrees with a fresh evaluation."""
    report.checked += 1
    tag = label or f"{doc.get('instance')} / {doc.get('formulation')} / {doc.get('backend')}"
    objective, bound, status = doc.get("objective"), doc.get("bound"), doc.get("status")
    if bound is not None and objective is not None and bound > objective * (1 + OPTIMALITY_TOLERANCE) + 1e-9:
        report.problems.append(f"{tag}: bound {bound} exceeds the objective {objective}")
    if status == "optimal":
        if bound is None or objective is None:
            report.problems.append(f"{tag}: claims optimal without a proven bound")
        else:
            gap = abs(objective - bound) / max(abs(objective), 1e-9)
            if gap > OPTIMALITY_TOLERANCE:
                report.problems.append(f"{tag}: claims optimal with gap {gap:.3g} > {OPTIMALITY_TOLERANCE}")
    plan = doc.get("plan")
    if plan is None:
        if status not in ("none", None):
            report.problems.append(f"{tag}: status {status} but no plan stored")
        return
    spec = kind_spec(instance.kind)
    check = spec.evaluate(instance, spec.plan_from_dict(instance, plan))
    if not check.feasible:
        report.problems.append(f"{tag}: the evaluator rejects the plan: {'; '.join(check.violations[:3])}")
    if objective is not None and not math.isclose(check.objective, objective, rel_tol=1e-6, abs_tol=1e-12):
        report.problems.append(f"{tag}: stored objective {objective} but the evaluator computes {check.objective}")
    else:
        report.notes.append(f"ok {tag}: objective {check.objective:.9g} re-evaluated")


def verify_path(path: str | Path, instance: str | None = None) -> VerifyReport:
    p = Path(path)
    if p.suffix in (".db", ".sqlite", ".sqlite3"):
        try:
            from distplan.bench.verify import verify_database
        except ImportError:
            raise InputError(str(p), "benchmark databases need the benchmarking module", "verify a result JSON instead") from None
        return verify_database(p)
    doc = read_json(p)
    if not isinstance(doc, dict) or "kind" not in doc:
        raise InputError(str(p), "not a result document", "write one with `distplan solve ... --result FILE`")
    source = instance or doc.get("info", {}).get("source") or doc.get("instance")
    if not source:
        raise InputError(str(p), "the result names no instance", "pass --instance FILE")
    report = VerifyReport()
    verify_result(doc, load_instance(source), report)
    return report
