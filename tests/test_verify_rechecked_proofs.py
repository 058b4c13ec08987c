"""`distplan verify` proves again the bounds whose value is their own certificate, and says
where a result's bound rests on a proof it cannot redo (review rev24 D2: raising the forced
co-location + one-machine bound to the objective and the status to "optimal" passed).
A result relabelled with a bound-only formulation but holding a plan is rejected (D3)."""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from test_fold_not_infeasible import MERGED_TOO_BIG
from test_placement import small_dags

import distplan
from distplan.formulations.bandwidth import safe
from distplan.formulations.placement import forced, waist
from distplan.models.common import instance_from_dict, json_default
from distplan.solvers.result import CERTIFICATES_SINCE
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
    res = distplan.solve(inst, "placement_search", time_limit=3)  # (it has its forced bound well before)
    doc = res.to_dict()
    value = doc["bounds"][_forced_entry(doc)]["value"]
    assert forced.recheck(inst, {"value": value}) is None
    assert forced.recheck(inst, {"value": value * 1.5}) is not None, "the recheck can fail"
    assert check_result(doc, inst, require_version=True) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_every_forced_bound_placement_search_reports_is_proven_again(d: dict[str, Any]) -> None:
    inst = instance_from_dict(d)
    res = distplan.solve(inst, "placement_search", time_limit=20)
    for entry in res.to_dict()["bounds"]:
        if entry["source"].startswith(FORCED):
            assert forced.recheck(inst, entry) is None, entry


def test_a_proof_verify_cannot_redo_is_noted_where_the_bound_rests_on_it() -> None:
    inst = distplan.load_instance("gpt-24layer-2x4")
    res = distplan.solve(inst, "tap", time_limit=30)
    assert res.bound_source is not None and "exhaustive Pareto dynamic program" in res.bound_source
    notes: list[str] = []
    assert check_result(res.to_dict(), inst, notes, require_version=True) == []
    assert any("own proof, which verify cannot redo" in n and "rest on it" in n for n in notes), notes


# -- libra's Lagrangian bounds: re-evaluated at their recorded multipliers --------------------

LAGRANGIAN = "Lagrangian dual bound"


def _lagrangian(doc: dict[str, Any]) -> int:
    return next(k for k, b in enumerate(doc["bounds"]) if LAGRANGIAN in b["source"])


@pytest.fixture(scope="module", params=[("libra-gpt3-4d-multi", f) for f in ("libra_perf", "libra_perf_lp", "libra_discrete")] + [("libra-dlrm-3d-total500", "libra_perf")], ids=lambda p: f"{p[0]}-{p[1]}")
def lagrangian_result(request: pytest.FixtureRequest) -> tuple[Any, dict[str, Any]]:
    name, formulation = request.param
    inst = distplan.load_instance(name)
    doc = json.loads(json.dumps(distplan.solve(inst, formulation, time_limit=30).to_dict()))
    return inst, doc


def test_honest_lagrangian_bounds_are_proven_again(lagrangian_result: tuple[Any, dict[str, Any]]) -> None:
    inst, doc = lagrangian_result
    entry = doc["bounds"][_lagrangian(doc)]
    assert set(entry["certificate"]) == {"lambda", "mu"}
    assert safe.recheck(inst, entry) is None
    notes: list[str] = []
    assert check_result(doc, inst, notes, require_version=True) == []
    assert not any("cannot redo" in n for n in notes), notes


@pytest.mark.parametrize(
    ("forge", "field", "named"),
    [
        ("raise", "value", "the dual function at its multipliers gives"),
        ("zero lambda", "value", "the dual function at its multipliers gives"),
        ("short mu", "value", "shapes"),
        ("drop", "certificate", "keeps no certificate"),
    ],
)
def test_forged_lagrangian_bounds_are_caught(lagrangian_result: tuple[Any, dict[str, Any]], forge: str, field: str, named: str) -> None:
    inst, doc = lagrangian_result
    doc = copy.deepcopy(doc)
    k = _lagrangian(doc)
    entry = doc["bounds"][k]
    if forge == "raise":
        entry["value"] = doc["objective"] * (1 + 1e-12) if doc["objective"] > entry["value"] * (1 + 1e-9) else entry["value"] * (1 + 1e-6)
    elif forge == "zero lambda":  # other multipliers: a weaker dual value than the one stated
        entry["certificate"]["lambda"] = [[0.0] * len(row) for row in entry["certificate"]["lambda"]]
        entry["certificate"]["mu"] = [0.0] * len(entry["certificate"]["mu"])
    elif forge == "short mu":
        entry["certificate"]["mu"] = entry["certificate"]["mu"][:-1]
    else:
        del entry["certificate"]
    problems = check_result(doc, inst, require_version=True)
    assert any(name == f"bounds[{k}].{field}" and named in text for name, text in problems), problems


@pytest.mark.parametrize("version", [None, CERTIFICATES_SINCE - 1])
def test_an_older_record_without_certificates_is_noted(lagrangian_result: tuple[Any, dict[str, Any]], version: int | None) -> None:
    """A result written before bounds kept their certificates (no record_version, or one
    before `CERTIFICATES_SINCE`) is read as an older one: the bound is noted as not
    re-proven, not rejected."""
    inst, doc = lagrangian_result
    doc = copy.deepcopy(doc)
    del doc["bounds"][_lagrangian(doc)]["certificate"]
    if version is None:
        del doc["record_version"]
    else:
        doc["record_version"] = version
    notes: list[str] = []
    assert not [p for p in check_result(doc, inst, notes) if "certificate" in p[0]]
    assert any("cannot redo" in n for n in notes) or doc["bound"] != doc["bounds"][_lagrangian(doc)]["value"], notes


def test_a_plan_under_a_bound_only_formulation_is_rejected() -> None:
    inst = distplan.load_instance("placement-small-2")
    doc = distplan.solve(inst, "placement_milp", time_limit=30).to_dict()
    doc["formulation"] = "placement_bounds"
    problems = check_result(doc, inst)
    assert problems and problems[0][0] == "formulation" and "proves bounds only and makes no plan" in problems[0][1]


# -- placement's series composition over waist ops: re-composed from its waists and segments ---

WAIST = "series composition over waist ops"


@pytest.fixture(scope="module")
def waist_result() -> tuple[Any, dict[str, Any]]:
    """gpt2-small-infer-pcie-t4x4: its bound (0.1075 s) is the composition over 3 waists."""
    inst = distplan.load_instance("gpt2-small-infer-pcie-t4x4")
    doc = json.loads(json.dumps(distplan.solve(inst, "placement_bounds", time_limit=10).to_dict(), default=json_default))
    return inst, doc


def _waist(doc: dict[str, Any]) -> int:
    return next(k for k, b in enumerate(doc["bounds"]) if b["source"].startswith(WAIST))


def test_honest_waist_bounds_are_proven_again(waist_result: tuple[Any, dict[str, Any]]) -> None:
    inst, doc = waist_result
    entry = doc["bounds"][_waist(doc)]
    assert doc["bound"] == entry["value"] and len(entry["certificate"]["waists"]) >= 2
    assert waist.recheck(inst, entry) is None
    assert check_result(doc, inst, require_version=True) == []


@pytest.mark.parametrize(
    ("forge", "field", "named"),
    [
        ("raise", "value", "compose to"),
        ("segment", "value", "is not bounded by"),
        ("reverse", "value", "does not follow the waist before it"),
        ("unknown op", "value", "no op of the instance"),
        ("drop", "certificate", "keeps no certificate"),
    ],
)
def test_forged_waist_bounds_are_caught(waist_result: tuple[Any, dict[str, Any]], forge: str, field: str, named: str) -> None:
    inst, doc = waist_result
    doc = copy.deepcopy(doc)
    k = _waist(doc)
    entry = doc["bounds"][k]
    cert = entry["certificate"]
    if forge == "raise":  # by 4 units in the last place: the recheck composes the very same sum
        value = entry["value"]
        for _ in range(4):
            value = math.nextafter(value, math.inf)
        entry["value"] = doc["bound"] = value
        doc["gap"] = abs(doc["objective"] - value) / max(abs(doc["objective"]), 1e-9) if doc["objective"] is not None else None
    elif forge == "segment":  # one segment's bound doubled
        cert["segments"][1] *= 2
    elif forge == "reverse":
        cert["waists"] = cert["waists"][::-1]
    elif forge == "unknown op":
        cert["waists"][0] = "no-such-op"
    else:
        del entry["certificate"]
    problems = check_result(doc, inst, require_version=True)
    assert any(name == f"bounds[{k}].{field}" and named in text for name, text in problems), problems


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_every_waist_bound_is_proven_again(d: dict[str, Any]) -> None:
    inst = instance_from_dict(d)
    for entry in distplan.solve(inst, "placement_bounds", time_limit=20).to_dict()["bounds"]:
        if entry["source"].startswith(WAIST):
            assert waist.recheck(inst, json.loads(json.dumps(entry))) is None, entry
