"""`distplan verify` proves again the bounds whose value is their own certificate, and says
where a result's bound rests on a proof it cannot redo (review rev24 D2: raising the forced
co-location + one-machine bound to the objective and the status to "optimal" passed).
A result relabelled with a bound-only formulation but holding a plan is rejected (D3)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from test_fold_not_infeasible import MERGED_TOO_BIG
from test_placement import small_dags

import distplan
from distplan.formulations.placement import forced
from distplan.models.common import instance_from_dict
from distplan.verify import check_result

FORCED = "forced co-location + one-machine bound"


def _forced_entry(doc: dict[str, Any]) -> int:
    return next(k for k, b in enumerate(doc["bounds"]) if b["source"].startswith(FORCED))


def _raised(doc: dict[str, Any], value: float) -> dict[str, Any]:
    """``doc`` with its forced bound raised to ``value`` and every claim made to match."""
    out = copy.deepcopy(doc)
    out["bounds"][_forced_entry(out)]["value"] = value
    out["bound"], out["bound_grade"] = value, "safe"
    out["gap"] = abs(out["objective"] - value) / max(abs(out["objective"]), 1e-9)
    out["status"] = "optimal" if out["gap"] <= out["gap_tolerance"] else "feasible"
    return out


@pytest.mark.parametrize("formulation", ["placement_search", "placement_milp"])
def test_a_raised_forced_bound_is_caught(formulation: str) -> None:
    inst = instance_from_dict(MERGED_TOO_BIG)
    doc = distplan.solve(inst, formulation, time_limit=30).to_dict()
    assert check_result(doc, inst, require_version=True) == []
    forged = _raised(doc, doc["objective"])  # the auditor's forgery: "optimal" at 26.2 ms, the optimum is 21.7 ms
    problems = check_result(forged, inst, require_version=True)
    assert any(name == f"bounds[{_forced_entry(doc)}].value" and "is not proven again on the instance" in text for name, text in problems), problems


def test_honest_forced_bounds_pass_on_a_bundled_instance() -> None:
    inst = distplan.load_instance("inception-v3-dgx1-2-tight")
    res = distplan.solve(inst, "placement_search", time_limit=20)
    doc = res.to_dict()
    value = doc["bounds"][_forced_entry(doc)]["value"]
    assert forced.recheck(inst, value) is None
    assert forced.recheck(inst, value * 1.5) is not None, "the recheck can fail"
    assert check_result(doc, inst, require_version=True) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_every_forced_bound_placement_search_reports_is_proven_again(d: dict[str, Any]) -> None:
    inst = instance_from_dict(d)
    res = distplan.solve(inst, "placement_search", time_limit=20)
    for entry in res.to_dict()["bounds"]:
        if entry["source"].startswith(FORCED):
            assert forced.recheck(inst, entry["value"]) is None, entry


def test_a_proof_verify_cannot_redo_is_noted_where_the_bound_rests_on_it() -> None:
    inst = distplan.load_instance("libra-gpt3-4d-multi")
    res = distplan.solve(inst, "libra_perf", time_limit=30)
    assert res.bound_source is not None and "Lagrangian dual bound" in res.bound_source
    notes: list[str] = []
    assert check_result(res.to_dict(), inst, notes, require_version=True) == []
    assert any("own proof, which verify cannot redo" in n and "rest on it" in n for n in notes), notes


def test_a_plan_under_a_bound_only_formulation_is_rejected() -> None:
    inst = distplan.load_instance("placement-small-2")
    doc = distplan.solve(inst, "placement_milp", time_limit=30).to_dict()
    doc["formulation"] = "placement_bounds"
    problems = check_result(doc, inst)
    assert problems and problems[0][0] == "formulation" and "proves bounds only and makes no plan" in problems[0][1]
