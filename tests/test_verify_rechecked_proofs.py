"""`distplan verify` proves again the bounds whose value is their own certificate, and says
where a result's bound rests on a proof it cannot redo (review rev24 D2: raising the forced
co-location + one-machine bound to the objective and the status to "optimal" passed).
A result relabelled with a bound-only formulation but holding a plan is rejected (D3)."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable
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


#: the arguments of a forgery case: how the bound is changed, the problem's field and text
FORGERY = ("forge", "field", "named")


def _assert_forgery_caught(result: tuple[Any, dict[str, Any]], locate: Callable[[dict[str, Any]], int], forge: Callable[[dict[str, Any], dict[str, Any]], None], field: str, named: str) -> None:
    """Verify names ``bounds[k].field`` (with ``named`` in its text) on a copy of the result
    whose bound ``locate`` finds is changed by ``forge(doc, entry)``."""
    inst, doc = result
    doc = copy.deepcopy(doc)
    k = locate(doc)
    forge(doc, doc["bounds"][k])
    problems = check_result(doc, inst, require_version=True)
    assert any(name == f"bounds[{k}].{field}" and named in text for name, text in problems), problems


def _drop_certificate(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    del entry["certificate"]


def _raise_lagrangian(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    entry["value"] = doc["objective"] * (1 + 1e-12) if doc["objective"] > entry["value"] * (1 + 1e-9) else entry["value"] * (1 + 1e-6)


def _zero_multipliers(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    """Other multipliers: a weaker dual value than the one stated."""
    entry["certificate"]["lambda"] = [[0.0] * len(row) for row in entry["certificate"]["lambda"]]
    entry["certificate"]["mu"] = [0.0] * len(entry["certificate"]["mu"])


def _short_mu(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    entry["certificate"]["mu"] = entry["certificate"]["mu"][:-1]


LAGRANGIAN_FORGERIES = [
    pytest.param(_raise_lagrangian, "value", "the dual function at its multipliers gives", id="raise"),
    pytest.param(_zero_multipliers, "value", "the dual function at its multipliers gives", id="zero lambda"),
    pytest.param(_short_mu, "value", "shapes", id="short mu"),
    pytest.param(_drop_certificate, "certificate", "keeps no certificate", id="drop"),
]


@pytest.mark.parametrize(FORGERY, LAGRANGIAN_FORGERIES)
def test_forged_lagrangian_bounds_are_caught(lagrangian_result: tuple[Any, dict[str, Any]], forge: Any, field: str, named: str) -> None:
    _assert_forgery_caught(lagrangian_result, _lagrangian, forge, field, named)


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


def _raise_waist(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    """By 4 units in the last place: the recheck composes the very same sum."""
    value = entry["value"]
    for _ in range(4):
        value = math.nextafter(value, math.inf)
    entry["value"] = doc["bound"] = value
    doc["gap"] = abs(doc["objective"] - value) / max(abs(doc["objective"]), 1e-9) if doc["objective"] is not None else None


def _double_a_segment(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    entry["certificate"]["segments"][1] *= 2


def _reverse_waists(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    entry["certificate"]["waists"] = entry["certificate"]["waists"][::-1]


def _unknown_waist(doc: dict[str, Any], entry: dict[str, Any]) -> None:
    entry["certificate"]["waists"][0] = "no-such-op"


WAIST_FORGERIES = [
    pytest.param(_raise_waist, "value", "compose to", id="raise"),
    pytest.param(_double_a_segment, "value", "is not bounded by", id="segment"),
    pytest.param(_reverse_waists, "value", "does not follow the waist before it", id="reverse"),
    pytest.param(_unknown_waist, "value", "no op of the instance", id="unknown op"),
    pytest.param(_drop_certificate, "certificate", "keeps no certificate", id="drop"),
]


@pytest.mark.parametrize(FORGERY, WAIST_FORGERIES)
def test_forged_waist_bounds_are_caught(waist_result: tuple[Any, dict[str, Any]], forge: Any, field: str, named: str) -> None:
    _assert_forgery_caught(waist_result, _waist, forge, field, named)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small_dags())
def test_every_waist_bound_is_proven_again(d: dict[str, Any]) -> None:
    inst = instance_from_dict(d)
    for entry in distplan.solve(inst, "placement_bounds", time_limit=20).to_dict()["bounds"]:
        if entry["source"].startswith(WAIST):
            assert waist.recheck(inst, json.loads(json.dumps(entry))) is None, entry
