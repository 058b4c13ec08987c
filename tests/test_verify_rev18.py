"""Review rev18: forged results that `distplan verify` let through.

* F21: alpa_ilp's and tap's solver bounds were converted with the least objective scale
  any program of the instance can have; where the costs sum past ~1e6 s that is 10-100x
  looser than the model's own scale, and a bound linked to a call that does not prove it
  passed. The call's model record keeps its ``objective_scale`` (`Model.notes`);
  the stated conversion (`alpa_ilp.dual_bound_seconds`, one contract for every conversion:
  ``(call_bound, instance, model_record)``) uses it, checked against what the instance
  allows; a record without it (older results) is checked at the least scale, and verify's
  notes say so.
* F8: a bound "the one plan's cost (every op has a single strategy)" passed on an
  instance with ops of several strategies. Its premise is re-checked
  (`registry.BoundSource.premise`: `alpa_ilp.single_plan_premise`).
* F15: m-SCT's LP value, a bound only under Hanen and Munier's small-communication
  precondition, passed where the precondition fails (`sct.lp_bound_premise`, the check
  `sct.lp_bounds` applies).
* F14: pipeline_milp's "no schedule of value <= U" passed without the time-indexed call
  whose infeasibility it is. Its premise (`pipeline.milp.below_incumbent_premise`): an
  infeasible time-indexed call in the record, restricted at U or above
  (``value_at_most``), or, where the source says the model was empty by construction,
  the model rebuilt from the instance empty; integral data; the bound at most U + 1.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import backend_params, cli_run, takes_lp, takes_milp
from test_verify_rev17 import refix
from test_verify_stated_conversions import SCT_DOC

import distplan
from distplan.formulations.registry import Unrecorded
from distplan.formulations.sharding.alpa_ilp import (
    OBJECTIVE_SCALE,
    alpa_objective_scale,
    dual_bound_seconds,
    least_objective_scale,
)
from distplan.instances import load_document
from distplan.instances.pipelines import make_pipeline
from distplan.models.common import canonical_json, instance_from_dict, write_json
from distplan.models.sharding import ShardingInstance
from distplan.solvers.base import get_backend
from distplan.verify import check_result

Doc = dict[str, Any]


def _doc(result: Any) -> Doc:
    return json.loads(canonical_json(result.to_dict()))  # type: ignore[no-any-return]


def _fields(problems: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in problems]


def _verify(doc: Doc, inst: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``distplan verify`` of ``doc`` written to a file, the instance given as a file."""
    write_json(inst.to_dict(), tmp_path / "instance.json")
    write_json(doc, tmp_path / "result.json")
    rc, out, _ = cli_run(["verify", str(tmp_path / "result.json"), "--instance", str(tmp_path / "instance.json")], capsys)
    return rc, out


_SOLVED: dict[tuple[str, str, str], tuple[Any, Doc]] = {}


def solved(inst: Any, formulation: str, backend: str, **kw: Any) -> tuple[Any, Doc]:
    """The instance and a deep copy of its honest result (solved once per session)."""
    key = (inst.name, formulation, backend + json.dumps(kw, sort_keys=True))
    if key not in _SOLVED:
        _SOLVED[key] = inst, _doc(distplan.solve(inst, formulation, backend=backend, **kw))
    inst, doc = _SOLVED[key]
    return inst, copy.deepcopy(doc)


def _no_bound_proved(doc: Doc, backend: str, what: str, models: tuple[str, ...]) -> None:
    """Skip a test whose result links no solver bound, only where the backend's calls of
    the ``models`` that back one proved none (else a link is missing, and that fails)."""
    backing = [c for c in doc["solver_results"] if c["extra"]["model"]["name"] in models]
    assert backing and all(c.get("bound") is None for c in backing), (doc["bounds"], [(c["extra"]["model"]["name"], c.get("bound")) for c in doc["solver_results"]])
    pytest.skip(f"{backend} proved no solver bound for {what}")


def _forged_exits_1(doc: Doc, inst: Any, bound: Doc, tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str = "", *said: str) -> int:
    """``bound`` appended to the honest ``doc`` (status, gap made consistent: `refix`):
    ``distplan verify`` exits 1 naming that bound's ``field`` (``bounds[k]`` + it), with
    each of ``said`` in its output; the bound's index."""
    doc["bounds"].append(bound)
    refix(doc)
    k = len(doc["bounds"]) - 1
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}]{field}" in out and all(x in out for x in said), out
    return k


# F21 ----------------------------------------------------------------------------------


_SLOW: list[ShardingInstance] = []


def slow_links() -> ShardingInstance:
    """gpt-2layer-2x2 with links 3e7 times slower and 1 GB per device: reshardings of
    hours, costs summing past 1e6 s (the least objective scale of its programs is 1e5),
    while Alpa's ILP keeps microseconds (1e6): the least scale was 10x loose here."""
    if not _SLOW:
        doc = distplan.load_instance("gpt-2layer-2x2").to_dict()
        doc["name"] = "gpt-2layer-2x2-slow-links"
        doc["mesh"]["bandwidth"] = [b / 3e7 for b in doc["mesh"]["bandwidth"]]
        doc["mesh"]["memory"] = 1e9
        _SLOW.append(ShardingInstance.from_dict(doc))
    return _SLOW[0]


def test_the_slow_instance_has_a_loose_least_scale() -> None:
    inst = slow_links()
    assert least_objective_scale(inst) == OBJECTIVE_SCALE / 10
    assert alpa_objective_scale(inst) == OBJECTIVE_SCALE


SHARDING_CASES = {"alpa_ilp-lp_first": ("alpa_ilp", {"lp_first": True}), "tap-walk": ("tap", {"dp": False}), "tap-shared": ("tap", {"exact": False})}
#: per case, the models whose calls' bounds back its solver bound (tap-shared's MILP runs
#: on an inexact fold: its bound proves nothing about the instance)
BACKING_MODELS = {"alpa_ilp-lp_first": ("alpa_ilp", "alpa_ilp_lp"), "tap-walk": ("tap", "tap_lp"), "tap-shared": ("tap_bound",)}


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("case", list(SHARDING_CASES))
def test_f21_honest_results_record_their_scale_and_verify_clean(case: str, backend: str) -> None:
    formulation, params = SHARDING_CASES[case]
    inst, doc = solved(slow_links(), formulation, backend, **params)
    notes: list[str] = []
    assert check_result(doc, inst, notes) == []
    assert not any("objective_scale" in n for n in notes), notes
    linked = [b for b in doc["bounds"] if b.get("solver_call") is not None]
    if not linked:
        _no_bound_proved(doc, backend, case, BACKING_MODELS[case])
    for b in linked:
        model = doc["solver_results"][b["solver_call"]]["extra"]["model"]
        assert model["objective_scale"] == OBJECTIVE_SCALE, model


def _alpa_lp_first(backend: str) -> tuple[Any, Doc, int, int]:
    """The slow instance's alpa_ilp result with its LP first: the listed bound's index,
    linked to the ILP's call, and the LP's call (a weaker bound)."""
    inst, doc = solved(slow_links(), "alpa_ilp", backend, lp_first=True)
    (k,) = [k for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    names = [c["extra"]["model"]["name"] for c in doc["solver_results"]]
    if "alpa_ilp_lp" not in names or names[doc["bounds"][k]["solver_call"]] != "alpa_ilp":
        pytest.skip(f"{backend}: the LP relaxation decided alone ({names})")
    return inst, doc, k, names.index("alpa_ilp_lp")


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f21_a_bound_relinked_to_a_weaker_call_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, lp = _alpa_lp_first(backend)
    lp_seconds = doc["solver_results"][lp]["bound"] / OBJECTIVE_SCALE
    assert lp_seconds < doc["bounds"][k]["value"] < 10 * lp_seconds  # within the least scale's 10x
    doc["bounds"][k]["solver_call"] = lp  # the ILP's bound claimed from the LP's call
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].value: " in out and "dual_bound_seconds" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f21_a_recorded_scale_the_model_did_not_have_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, lp = _alpa_lp_first(backend)
    doc["bounds"][k]["solver_call"] = lp
    doc["solver_results"][lp]["extra"]["model"]["objective_scale"] = OBJECTIVE_SCALE / 10  # the least: 10x the bound
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].solver_call: " in out and "objective_scale 100000 but Alpa's ILP of this instance" in out, out
    doc["solver_results"][lp]["extra"]["model"]["objective_scale"] = 3e5  # no power of ten
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and "is none the formulations pick" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f21_a_tap_scale_below_the_least_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(slow_links(), "tap", backend, dp=False)
    linked = [(k, b) for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    if not linked:
        _no_bound_proved(doc, backend, "tap's walk", BACKING_MODELS["tap-walk"])
    ((k, entry),) = linked
    doc["solver_results"][entry["solver_call"]]["extra"]["model"]["objective_scale"] = OBJECTIVE_SCALE / 100
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].solver_call: " in out and "the least any program of alpa_ilp or tap" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f21_a_record_without_its_scale_is_checked_loosely_and_noted(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An older record (no scale) of tap's walk program: the least scale, and the notes say
    what was not checked (Alpa's own ILP's scale is re-derived: exact, nothing to note)."""
    inst, doc = solved(slow_links(), "tap", backend, dp=False)
    linked = [k for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    if not linked:
        _no_bound_proved(doc, backend, "tap's walk program", BACKING_MODELS["tap-walk"])
    del doc["record_version"]  # (an older record kept no format version either)
    for call in doc["solver_results"]:
        call["extra"]["model"].pop("objective_scale")
    notes: list[str] = []
    assert check_result(doc, inst, notes) == []
    assert any(f"bounds[{linked[0]}]" in n and "records no extra.model.objective_scale" in n and "10x looser" in n for n in notes), notes
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0 and "records no extra.model.objective_scale" in out, out
    # dropped from the linked call only, another call keeping it: no older record
    inst, doc = solved(slow_links(), "tap", backend, dp=False)
    doc["solver_results"][doc["bounds"][linked[0]]["solver_call"]]["extra"]["model"].pop("objective_scale")
    if len(doc["solver_results"]) > 1:
        rc, out = _verify(doc, inst, tmp_path, capsys)
        assert rc == 1 and f"bounds[{linked[0]}].solver_call: " in out and "the field was dropped" in out, out
    inst, doc, k, lp = _alpa_lp_first(backend)
    for call in doc["solver_results"]:
        call["extra"]["model"].pop("objective_scale")
    notes = []
    assert check_result(doc, inst, notes) == [] and not any("objective_scale" in n for n in notes), notes
    # dropped from the linked call only, the other call keeping it: no older record
    inst, doc, k, lp = _alpa_lp_first(backend)
    doc["bounds"][k]["solver_call"] = lp
    doc["solver_results"][lp]["extra"]["model"].pop("objective_scale")
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}]" in out, out  # (Alpa's LP: converted at its own scale, below the bound)
    # where every program's scale is microseconds the record needs none: nothing to note
    inst, doc = solved(distplan.load_instance("gpt-2layer-2x2"), "alpa_ilp", backend)
    for call in doc["solver_results"]:
        call["extra"]["model"].pop("objective_scale", None)
    notes = []
    assert check_result(doc, inst, notes) == [] and not any("objective_scale" in n for n in notes), notes


# F8 -----------------------------------------------------------------------------------


def one_plan() -> Any:
    """gpt-2layer-2x2 with every dimension of size 1: nothing splits, every op has a single
    strategy, and the one plan's cost is the optimum (no solver call)."""
    doc = load_document("gpt-2layer-2x2")
    doc["graph"]["dims"] = dict.fromkeys(doc["graph"]["dims"], 1)
    doc["name"] = "gpt-2layer-2x2-one-plan"
    return instance_from_dict(doc)


#: runs of the one-plan instance whose bound is the one plan's cost (tap's walk program
#: too: review rev18b finding 7, its bound was sourced to a walk-program call never made)
ONE_PLAN_RUNS = {"alpa_ilp": ("alpa_ilp", {}), "tap": ("tap", {}), "tap-walk": ("tap", {"dp": False})}


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("run", list(ONE_PLAN_RUNS))
def test_f8_the_one_plan_of_an_instance_that_has_one_verifies_clean(run: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    formulation, params = ONE_PLAN_RUNS[run]
    inst, doc = solved(one_plan(), formulation, backend, **params)
    assert any(b["source"].startswith(f"{formulation}: the one plan's cost") for b in doc["bounds"]), doc["bounds"]
    assert check_result(doc, inst) == []
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("formulation", ["alpa_ilp", "tap"])
def test_f8_the_one_plan_claimed_where_ops_have_several_strategies_exits_1(formulation: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(distplan.load_instance("gpt-2layer-2x2"), formulation, backend)
    assert check_result(doc, inst) == []
    _forged_exits_1(doc, inst, {"value": doc["objective"], "source": f"{formulation}: the one plan's cost (every op has a single strategy), less a rounding margin", "grade": "safe", "kind": "proof"}, tmp_path, capsys, ".source: ", "strategies")


# F15 ----------------------------------------------------------------------------------


def _no_lp_bound(backend: str) -> None:
    """Skip a test that needs an LP's bound, only where the backend declares it reports
    none (`Capabilities.reports_lp_bound`: OSQP); one that declares it fails instead."""
    assert not get_backend(backend).capabilities.reports_lp_bound, f"{backend} declares LP bounds but its solved LP has none"
    pytest.skip(f"{backend} proves no LP bound here")


def _sct_bound(doc: Doc) -> list[int]:
    return [k for k, b in enumerate(doc["bounds"]) if b["source"].startswith("SCT LP value")]


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_f15_the_sct_bound_where_the_precondition_holds_verifies_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(instance_from_dict(copy.deepcopy(SCT_DOC)), "baechi_sct", backend)
    if not _sct_bound(doc):  # only where the LP proved no optimum with a bound (OSQP)
        assert all(c.get("bound") is None or c.get("termination") != "optimal" for c in doc["solver_results"]), doc["solver_results"]
        _no_lp_bound(backend)
    assert check_result(doc, inst) == []
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_f15_the_sct_bound_where_communication_is_not_small_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(distplan.load_instance("placement-small-2"), "baechi_sct", backend)
    assert check_result(doc, inst) == [] and not _sct_bound(doc)  # the precondition fails: no bound
    (call,) = [i for i, c in enumerate(doc["solver_results"]) if c["extra"]["model"]["name"] == "baechi_sct"]
    value = doc["solver_results"][call]["bound"]
    if value is None:
        _no_lp_bound(backend)
    assert value <= doc["objective"]
    _forged_exits_1(doc, inst, {"value": value, "source": "SCT LP value (small-communication precondition holds)", "grade": "solver", "kind": "solver", "solver_call": call}, tmp_path, capsys, ".source: ", "communication is not small")


# F14 ----------------------------------------------------------------------------------


def _no_schedule(doc: Doc) -> list[int]:
    return [k for k, b in enumerate(doc["bounds"]) if b["source"].startswith("pipeline_milp: no schedule of value <= ")]


PIPELINE_CASES = {"solver-infeasible": ("v", 4, 4), "by-construction": ("x", 3, 1)}


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("case", list(PIPELINE_CASES))
def test_f14_honest_proofs_below_the_incumbent_verify_clean(case: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(make_pipeline(*PIPELINE_CASES[case]), "pipeline_milp", backend, model="time_indexed", time_limit=30)
    (k,) = _no_schedule(doc)
    source = doc["bounds"][k]["source"]
    if case == "by-construction":
        assert "infeasible by construction" in source and not doc["solver_results"], source
    else:
        (call,) = [c for c in doc["solver_results"] if c["extra"]["model"]["name"].endswith("-time-indexed")]
        assert call["termination"] == "infeasible" and call["extra"]["model"]["value_at_most"] == doc["objective"] - 1
    assert check_result(doc, inst) == []
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


def _claimed(doc: Doc, detail: str) -> int:
    """The proof that nothing beats the result's objective, appended (a forger's claim)."""
    cap = doc["objective"] - 1
    doc["bounds"].append({"value": cap + 1, "source": f"pipeline_milp: no schedule of value <= {cap:g} ({detail})", "grade": "solver", "kind": "proof"})
    refix(doc)
    return len(doc["bounds"]) - 1


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f14_a_proof_without_its_infeasible_call_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(distplan.load_instance("pipeline-tessel-kshape"), "pipeline_milp", backend, model="time_indexed", time_limit=0.5)
    assert check_result(doc, inst) == [] and not _no_schedule(doc)  # no proof: its time-indexed model timed out
    k = _claimed(doc, f"time-indexed model infeasible, {backend}")
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].source: " in out and "no solver call of the run solved the time-indexed model and found it infeasible" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f14_a_proof_relabelled_as_infeasible_by_construction_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(distplan.load_instance("pipeline-tessel-kshape"), "pipeline_milp", backend, model="time_indexed", time_limit=0.5)
    k = _claimed(doc, "constraint block 'one-at-a-time' row 1: no variables: the model is infeasible by construction")
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].source: " in out and "is not infeasible by construction" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_f14_a_proof_above_what_its_call_restricted_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(make_pipeline(*PIPELINE_CASES["solver-infeasible"]), "pipeline_milp", backend, model="time_indexed", time_limit=30)
    (k,) = _no_schedule(doc)
    (call,) = [c for c in doc["solver_results"] if c["extra"]["model"]["name"].endswith("-time-indexed")]
    call["extra"]["model"]["value_at_most"] -= 2  # its model admitted less: it proves less
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].source: " in out and "admitted values <=" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_f15_a_contracted_graphs_lp_backs_no_sct_bound(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Review rev18 (second round): m-SCT's LP on a contracted graph (``lp_max_edges`` below
    the instance's edges) proves nothing about the instance. Its call has its own model
    name, and a call renamed to the instance's LP is caught by its blocks' sizes."""
    inst, doc = solved(instance_from_dict(copy.deepcopy(SCT_DOC)), "baechi_sct", backend, lp_max_edges=3)
    assert "lp_coarsened" in doc["info"] and not _sct_bound(doc)
    assert check_result(doc, inst) == []
    (call,) = [i for i, c in enumerate(doc["solver_results"]) if c["extra"]["model"]["name"] == "baechi_sct-contracted"]
    if doc["solver_results"][call].get("bound") is None:
        _no_lp_bound(backend)
    k = _forged_exits_1(doc, inst, {"value": doc["objective"], "source": "SCT LP value (small-communication precondition holds)", "grade": "safe", "kind": "solver", "solver_call": call}, tmp_path, capsys)
    doc["solver_results"][call]["extra"]["model"]["name"] = "baechi_sct"  # the forger renames the model too
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].source: " in out and "not the instance's own" in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_alpa_ilp_whose_lp_relaxation_decides_alone_verifies_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Review rev18b finding 6: with ``lp_first`` an integral LP relaxation decides alone and
    the bound is its call's ('alpa_ilp_lp'), which the registry's model pattern admits."""
    inst, doc = solved(distplan.load_instance("gpt-2layer-2x2"), "alpa_ilp", backend, lp_first=True)
    names = [c["extra"]["model"]["name"] for c in doc["solver_results"]]
    if names != ["alpa_ilp_lp"]:
        pytest.skip(f"{backend}: the LP relaxation did not decide alone ({names})")
    if not any(b.get("solver_call") is not None for b in doc["bounds"]):
        _no_bound_proved(doc, backend, "the LP relaxation", ("alpa_ilp_lp",))
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


def test_f21_an_older_alpa_record_is_converted_at_alpa_s_own_scale() -> None:
    """Review rev18b finding 8: a record of Alpa's ILP without its scale is converted at the
    scale re-derived for that program, not at the least any program of the instance has
    (10x looser on this instance: a bound raised 10x passed with a note)."""
    doc = distplan.load_instance("gpt-2layer-2x2").to_dict()
    doc["name"] = "gpt-2layer-2x2-slower-links"
    doc["mesh"]["bandwidth"] = [b / 3e9 for b in doc["mesh"]["bandwidth"]]
    inst = ShardingInstance.from_dict(doc)
    own, least = alpa_objective_scale(inst), least_objective_scale(inst)
    assert least < own < OBJECTIVE_SCALE
    assert dual_bound_seconds(7.0, inst, {"name": "alpa_ilp"}) == 7.0 / own
    assert dual_bound_seconds(7.0, inst, {"name": "alpa_ilp_lp"}) == 7.0 / own
    with pytest.raises(Unrecorded):
        dual_bound_seconds(7.0, inst, {"name": "tap"})
