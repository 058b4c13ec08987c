"""Review rev16a D6: `distplan verify` accepted forged bounds that touch no solver record.

Every listed bound is now backed by what proves it: solver-free bounds are recomputed
(a renamed one is no longer skipped), a solver call's dual bound is linked to its call
(``solver_call``) and held to the conversion to the result's units its formulation states
(`registry.BoundSource.conversion`), a formulation's own proof must be a source that
formulation reports, at most at its grade; a finite ``bound`` needs a listed bound, and is
their largest.
"""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import pytest

import distplan
from distplan.cli import main as cli_main
from distplan.formulations.registry import Bound, bound_source, solver_free_match
from distplan.models.common import canonical_json, write_json
from distplan.verify import check_bounds, check_result, check_solver_calls

Doc = dict[str, Any]


def _doc(result: Any) -> Doc:
    return json.loads(canonical_json(result.to_dict()))


def _fields(problems: list[tuple[str, str]]) -> set[str]:
    return {name for name, _ in problems}


@pytest.fixture(scope="module")
def topo() -> tuple[Doc, Any]:
    """A heuristic (no solver call) whose gap is open: baechi_topo on placement-small-2."""
    doc = _doc(distplan.solve("placement-small-2", "baechi_topo"))
    assert doc["status"] == "feasible" and doc["gap"] > 1e-3 and not doc["solver_results"]
    return doc, distplan.load_instance("placement-small-2")


@pytest.fixture(scope="module")
def alpa() -> tuple[Doc, Any]:
    """An exact MILP whose bound is the solver's dual bound converted to seconds."""
    doc = _doc(distplan.solve("gpt-4layer-memtight", "alpa_ilp", time_limit=20))
    assert doc["status"] == "optimal" and doc["bound_source"].startswith("alpa_ilp dual bound")
    return doc, distplan.load_instance("gpt-4layer-memtight")


def _optimal(d: Doc) -> None:
    d.update(bound=d["objective"], gap=0.0, status="optimal", bound_grade="safe")


def _fabricated_entry(d: Doc) -> None:
    _optimal(d)
    d["bounds"].append({"value": d["objective"], "source": "my proof", "grade": "safe"})


def _emptied(d: Doc) -> None:
    _optimal(d)
    d["bounds"] = []


def _no_bounds_key(d: Doc) -> None:
    _optimal(d)
    del d["bounds"]


def _renamed_free(d: Doc) -> None:
    _optimal(d)
    d["bounds"][0].update(value=d["objective"], source=d["bounds"][0]["source"] + " ")


def _other_formulations_proof(d: Doc) -> None:
    """A proof source that exists, but for another formulation (tessel's state search)."""
    _optimal(d)
    d["bounds"].append({"value": d["objective"], "source": "tessel: exact whole-schedule state search (no schedule below 1)", "grade": "safe", "kind": "proof"})


TOPO_TAMPERS = {
    "fabricated entry": (_fabricated_entry, "bounds[-1].source"),
    "bounds emptied": (_emptied, "bounds"),
    "bounds key removed": (_no_bounds_key, "bounds"),
    "solver-free renamed and raised": (_renamed_free, "bounds[0].source"),
    "another formulation's proof": (_other_formulations_proof, "bounds[-1].source"),
}


@pytest.mark.parametrize("name", list(TOPO_TAMPERS))
def test_forged_bounds_on_a_heuristic_result_are_rejected(topo: tuple[Doc, Any], name: str) -> None:
    """D6 (a)-(c): each of these verified clean (exit 0) before."""
    doc, inst = topo
    assert check_result(doc, inst) == []
    change, field = TOPO_TAMPERS[name]
    bad = copy.deepcopy(doc)
    change(bad)
    field = field.replace("[-1]", f"[{len(bad.get('bounds', [])) - 1}]")
    assert field in _fields(check_result(bad, inst))


def _unlinked(d: Doc) -> None:
    """The result as written before bounds were linked to their calls (or links removed)."""
    for entry in d["bounds"]:
        entry.pop("solver_call", None)
        entry.pop("kind", None)
    for call in d["solver_results"]:
        (call.get("extra") or {}).pop("bound_conversion", None)


def _regraded(d: Doc) -> None:
    d["bounds"][0]["grade"] = "safe"
    d["bound_grade"] = "safe"


def _raised(d: Doc) -> None:
    d["bounds"][0]["value"] = d["objective"]
    d["bound"] = d["objective"]
    d["gap"] = 0.0


@pytest.mark.parametrize("linked", [True, False], ids=["linked", "links-removed"])
@pytest.mark.parametrize(("change", "field"), [(_regraded, "bounds[0].grade"), (_raised, None)], ids=["regraded-safe", "raised"])
def test_forged_solver_bounds_are_rejected_with_calls_untouched(alpa: tuple[Doc, Any], linked: bool, change: Any, field: str | None) -> None:
    """D6 (d), (e): a MIP dual bound regraded "safe", or raised with its entry, while the
    call's record is unchanged. Linked, the value is checked against the call's bound
    converted; with the link removed, the "optimal" status rests on an unlinked bound."""
    doc, inst = alpa
    entry = doc["bounds"][0]
    assert entry["kind"] == "solver" and entry["solver_call"] is not None
    honest = copy.deepcopy(doc)
    if not linked:
        _unlinked(honest)
    bad = copy.deepcopy(honest)
    change(bad)
    problems = check_result(bad, inst)
    expected = field or ("bounds[0].value" if linked else "bounds[0].solver_call")
    assert expected in _fields(problems), problems
    if linked:
        assert check_result(honest, inst) == []


def test_a_raised_bound_is_held_to_the_stated_conversion_whatever_the_call_keeps(alpa: tuple[Doc, Any]) -> None:
    """The conversion is the formulation's (alpa_ilp: the objective scale's units per
    second), not one the call's record keeps: an old file's ``bound_conversion`` edited to
    cover a raised bound is ignored. Raising the call's own bound with it is not caught
    (verify does not re-solve)."""
    doc, inst = alpa
    bad = copy.deepcopy(doc)
    _raised(bad)
    call = bad["solver_results"][bad["bounds"][0]["solver_call"]]
    call["extra"]["bound_conversion"] = {"scale": bad["objective"] / call["bound"], "offset": 0.0}
    assert "bounds[0].value" in _fields(check_result(bad, inst))
    call["bound"] = call["objective"]  # the documented limit: raised up to its own objective
    assert check_result(bad, inst) == []
    call["bound"] = math.nextafter(call["objective"], math.inf)  # above it: the call's record says so
    assert _fields(check_result(bad, inst)) == {f"solver_results[{bad['bounds'][0]['solver_call']}].bound"}


def test_a_fabricated_entry_linked_to_a_real_call_is_rejected(alpa: tuple[Doc, Any]) -> None:
    """Linking a made-up source to a call would escape the stated conversion (keyed on the
    source): a linked bound must be one of the formulation's solver bounds."""
    doc, inst = alpa
    bad = copy.deepcopy(doc)
    _optimal(bad)
    bad["bound_grade"] = "solver"
    bad["bounds"].append({"value": bad["objective"], "source": "my proof", "grade": "solver", "kind": "solver", "solver_call": doc["bounds"][0]["solver_call"]})
    assert f"bounds[{len(bad['bounds']) - 1}].source" in _fields(check_result(bad, inst))


def test_an_unlinked_solver_bound_the_bound_rests_on_is_a_problem_whatever_the_status(topo: tuple[Doc, Any], alpa: tuple[Doc, Any]) -> None:
    """A heuristic's old result (no solver bound) verifies clean unlinked; a "feasible"
    claim states its bound as much as an "optimal" one: resting on a solver call's bound
    linked to no call, it is a problem (it had been a note)."""
    doc, inst = topo
    old = copy.deepcopy(doc)
    _unlinked(old)
    assert check_result(old, inst) == []
    adoc, ainst = alpa
    old = copy.deepcopy(adoc)
    _unlinked(old)
    old["status"] = "feasible"
    old["gap_tolerance"] = None
    del old["record_version"]  # (written before results recorded their format, or their tolerance)
    problems = check_result(old, ainst)
    assert _fields(problems) == {"bounds[0].solver_call"} and "re-solve to link it" in problems[0][1], problems


def test_an_unlinked_solver_bound_below_the_bound_is_a_note(alpa: tuple[Doc, Any]) -> None:
    doc, inst = alpa
    old = copy.deepcopy(doc)
    old["bounds"].append({"value": doc["bound"] * 0.5, "source": "alpa_ilp dual bound (highs)", "grade": "solver", "kind": "solver"})
    notes: list[str] = []
    assert check_result(old, inst, notes) == []
    assert any("linked to no recorded call" in n and "does not rest on it" in n for n in notes), notes


def test_bound_must_be_the_largest_listed(topo: tuple[Doc, Any]) -> None:
    doc, inst = topo
    bad = copy.deepcopy(doc)
    bad["bounds"][1]["value"] = bad["bound"]  # a lower listed bound raised to the top: not the result's grade issue
    bad["bound"] = bad["bounds"][1]["value"] * (1 - 1e-12)
    assert "bound" in _fields(check_result(bad, inst))


def test_unknown_source_below_the_bound_is_a_note(topo: tuple[Doc, Any]) -> None:
    doc, inst = topo
    odd = copy.deepcopy(doc)
    odd["bounds"].append({"value": 0.0, "source": "something older", "grade": "safe"})
    notes: list[str] = []
    assert check_result(odd, inst, notes) == []
    assert any("something older" in n for n in notes)


def test_placement_milp_conversion_is_the_stated_one() -> None:
    """placement's MILP solves in microseconds: a bound raised above its call's bound in
    seconds is caught, whatever conversion an old file's call record keeps."""
    doc = _doc(distplan.solve("placement-small-6", "placement_milp", time_limit=10))
    inst = distplan.load_instance("placement-small-6")
    assert check_result(doc, inst) == []
    k, entry = next((k, e) for k, e in enumerate(doc["bounds"]) if e.get("solver_call") is not None and "dual bound" in e["source"])
    bad = copy.deepcopy(doc)
    bad["bounds"][k]["value"] = entry["value"] * (1 + 1e-7)
    call = bad["solver_results"][entry["solver_call"]]
    call["extra"]["bound_conversion"] = {"scale": 1.0, "offset": 0.0}
    assert f"bounds[{k}].value" in _fields(check_result(bad, inst))


HONEST = [
    ("gpt-4layer-memtight", "tap"),
    ("compression-mlp-small", "codec_select"),
    ("pipeline-tessel-kshape", "pipeline_milp"),
    ("pipeline-tessel-kshape", "tessel"),
    ("libra-gpt3-3d-total500", "libra_discrete"),
    ("libra-gpt3-3d-total500", "libra_perf_per_cost"),
    ("placement-small-2", "placement_search"),
]


@pytest.mark.parametrize(("instance", "formulation"), HONEST)
def test_honest_results_of_every_family_verify_clean(instance: str, formulation: str) -> None:
    doc = _doc(distplan.solve(instance, formulation, time_limit=10))
    notes: list[str] = []
    assert check_result(doc, distplan.load_instance(instance), notes) == []
    assert not any("verify does not know" in n or "not cross-checked" in n for n in notes), notes
    assert all(e.get("kind") in ("solver_free", "solver", "proof") for e in doc["bounds"])
    assert all(e.get("solver_call") is not None for e in doc["bounds"] if e["kind"] == "solver")


def test_sources_are_classified() -> None:
    assert bound_source("tessel", "tessel: whole-schedule state search, open layer (stopped)").kind == "proof"
    assert bound_source("baechi_topo", "tessel: whole-schedule state search, open layer (stopped)") is None
    assert bound_source("alpa_ilp", "alpa_ilp dual bound (highs)").kind == "solver"
    free = [Bound(3.0, "device load: earliest start", "safe"), Bound(2.0, "forced x: one machine", "safe")]
    assert solver_free_match("pipeline_milp: device load: earliest start", "pipeline_milp", free) == 3.0
    assert solver_free_match("forced x: other case", "placement_milp", free) == 2.0
    # renamed within a family it is held to the family's recomputed value; else it is no match
    assert solver_free_match("device load: earliest start ", "pipeline_milp", free) == 3.0
    assert solver_free_match("device load ", "pipeline_milp", free) is None


def test_cli_exits_1_on_the_reviewers_fabricated_bound(topo: tuple[Doc, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, _ = topo
    bad = copy.deepcopy(doc)
    _fabricated_entry(bad)
    bad["info"]["source"] = "placement-small-2"
    path = tmp_path / "r.json"
    write_json(bad, path)
    assert cli_main(["verify", str(path)]) == 1
    assert "my proof" in capsys.readouterr().out


def test_a_linked_bound_of_a_source_stating_no_conversion_is_its_calls_own(topo: tuple[Doc, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """A formulation declared from blocks reports its call's own bound ("<name> dual bound
    (<backend>)"): a linked one is held to the call's bound itself (it had been checked
    against the conversion its call's record kept, with a note)."""
    from distplan.formulations import registry
    from distplan.solvers.result import SolutionStatus, SolverResult, Termination

    _, inst = topo
    # declared from blocks (rev17: the generic source is only for those)
    some = registry.Formulation(kind="placement", name="some_milp", description="", program="milp", run=lambda i, c: registry.Outcome(None), declared=True)
    monkeypatch.setitem(registry._FORMULATIONS, ("placement", "some_milp"), some)
    call = SolverResult("highs", "1", Termination.OPTIMAL, SolutionStatus.OPTIMAL, objective=1.0, bound=0.9, bound_grade="solver", extra={"model": {"name": "some_milp"}}).to_dict()
    doc = {"formulation": "some_milp", "bound": 1.0, "bound_grade": "solver", "options": {}, "solver_results": [call], "bounds": [{"value": 1.0, "source": "some_milp dual bound (highs)", "grade": "solver", "kind": "solver", "solver_call": 0}]}
    notes: list[str] = []
    assert check_bounds(doc, inst, notes) == [] and notes == []
    assert _fields(check_solver_calls(doc, inst)) == {"bounds[0].value"}
    call["bound"] = 1.0
    assert check_solver_calls(doc, inst) == []
