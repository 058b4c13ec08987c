"""Review rev17: forged results that `distplan verify` let through.

* F1/F2/F3/F16: the generic ``" dual bound ("`` source matched any formulation and any
  source, and a result's ``formulation`` was never checked against the instance's kind: a
  renamed formulation or source escaped the stated conversion. The formulation must be one
  of the kind's, and the generic source is only for formulations declared with
  `from_blocks` (``"^<name> dual bound ("``) that state no solver source of their own.
* F5/F6: a bound could be linked to any call of the run (pipeline_milp's to a retiming LP,
  whose value is a plan's, an upper bound; libra_discrete's to a libra_perf_lp LP). Each
  solver source names the models (``extra.model.name``) its bound comes from.
* F4: a call graded "safe" without its model record passed (integers unknown).
* F18: placement's compositions over cut waists and the last stint rest on module windows'
  MILPs whose calls are not recorded: grade "solver" unless no window went to a solver.
* F12: options deleted from a result that has new-only fields turned on the old-format
  exemption.
* F17: a bound's stated ``kind`` was never compared with what its source is.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import backend_params, takes_milp
from test_placement_segments import exact
from test_placement_segments_lasthop import forward_backward

import distplan
from distplan.formulations.placement.lasthop import SOURCE as LAST_STINT
from distplan.formulations.placement.segments import module_bound
from distplan.formulations.registry import BOUND_SOURCES, Bound, bound_source, declared_formulations
from distplan.models.common import canonical_json
from distplan.verify import check_result, unchecked


def _doc(result: Any) -> dict[str, Any]:
    return json.loads(canonical_json(result.to_dict()))  # type: ignore[no-any-return]


def refix(doc: dict[str, Any]) -> None:
    """The result's bound, grade, gap and status made consistent with its listed bounds
    (what a forger does after editing them)."""
    doc["bound"] = max(b["value"] for b in doc["bounds"])
    doc["bound_grade"] = next(b["grade"] for b in doc["bounds"] if b["value"] == doc["bound"])
    obj = doc.get("objective")
    doc["gap"] = None if obj is None else abs(obj - doc["bound"]) / max(abs(obj), 1e-9)
    if obj is not None and doc["gap"] <= doc.get("gap_tolerance", 1e-4) and doc.get("plan") is not None:
        doc["status"] = "optimal"


def _fields(problems: list[tuple[str, str]]) -> list[str]:
    return [name for name, _ in problems]


_SOLVED: dict[tuple[str, str, str], tuple[Any, dict[str, Any]]] = {}


def solved(name: str, formulation: str, backend: str = "highs", **kw: Any) -> tuple[Any, dict[str, Any]]:
    """The instance and a deep copy of its honest result (solved once per session)."""
    key = (name, formulation, backend)
    if key not in _SOLVED:
        inst = distplan.load_instance(name)
        _SOLVED[key] = inst, _doc(distplan.solve(inst, formulation, backend=backend, **kw))
    inst, doc = _SOLVED[key]
    return inst, copy.deepcopy(doc)


def _alpa(backend: str) -> tuple[Any, dict[str, Any], int]:
    inst, doc = solved("gpt-2layer-2x2", "alpa_ilp", backend)
    assert check_result(doc, inst) == []
    (k,) = [k for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    return inst, doc, k


# F1/F2/F3/F16 ------------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_formulation_the_kind_does_not_have_is_rejected(backend: str) -> None:
    inst, doc, k = _alpa(backend)
    doc["formulation"] = "alpa_ilp_x"  # F1: the generic source then matched, no conversion
    doc["bounds"][k]["value"] = doc["objective"]
    refix(doc)
    assert "formulation" in _fields(check_result(doc, inst))
    doc["formulation"] = "codec_select"  # F3b: another kind's formulation
    assert "formulation" in _fields(check_result(doc, inst))


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_renamed_source_is_no_generic_dual_bound(backend: str) -> None:
    inst, doc, k = _alpa(backend)
    doc["bounds"][k]["source"] = f"alpa dual bound ({backend})"  # F2
    doc["bounds"][k]["value"] = doc["objective"]
    refix(doc)
    assert f"bounds[{k}].source" in _fields(check_result(doc, inst))


def test_placement_relaxation_bound_renamed_generic_is_rejected() -> None:
    inst, doc = solved("placement-small-4", "placement_bounds", time_limit=10.0)
    assert check_result(doc, inst) == []
    (k,) = [k for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    doc["bounds"][k]["source"] = "relaxation dual bound (highs, optimal)"  # F3: raw microseconds
    doc["bounds"][k]["value"] = doc["solver_results"][doc["bounds"][k]["solver_call"]]["bound"]
    refix(doc)
    assert f"bounds[{k}].source" in _fields(check_result(doc, inst))


def test_generic_source_is_only_for_formulations_declared_from_blocks() -> None:
    declared = declared_formulations()
    # every formulation of the package states its solver sources (baechi_sct: its LP value)
    assert "baechi_sct" not in declared and "codec_select" not in declared
    for formulation in ("tessel", "alpa_ilp", "pipeline_milp", "gpipe", "codec_select"):
        src = bound_source(formulation, f"{formulation} dual bound (highs)")
        assert src is None or src.formulations is not None, formulation
    # F16: tessel reports no solver bound
    assert bound_source("tessel", "tessel dual bound (highs)") is None
    assert bound_source("alpa_ilp", "tessel dual bound (highs)") is None
    assert bound_source("codec_select", "codec_select dual bound (scip)") is not None


def test_a_new_from_blocks_formulation_has_the_generic_source(monkeypatch: pytest.MonkeyPatch) -> None:
    from distplan.formulations import registry

    sct = registry.get_formulation("placement", "baechi_sct")
    fake = registry.Formulation(kind="placement", name="my_lp", description="", program="lp", run=sct.run, declared=True)
    monkeypatch.setitem(registry._FORMULATIONS, ("placement", "my_lp"), fake)
    src = bound_source("my_lp", "my_lp dual bound (highs)")
    assert src is not None and src.formulations is None
    assert src.model_matches("my_lp", "my_lp") and not src.model_matches("my_lp", "my_lp-retime")
    assert bound_source("my_lp", "x my_lp dual bound (highs)") is None
    assert bound_source("my_lpx", "my_lpx dual bound (highs)") is None


# F5/F5b/F6 ----------------------------------------------------------------------------


def test_pipeline_bound_linked_to_the_retiming_lp_is_rejected() -> None:
    inst, doc = solved("pipeline-zb-p4-m12-comm1", "pipeline_milp", time_limit=10.0)
    assert check_result(doc, inst) == []
    names = [((c.get("extra") or {}).get("model") or {}).get("name") for c in doc["solver_results"]]
    retime = [i for i, n in enumerate(names) if isinstance(n, str) and n.endswith("-retime") and doc["solver_results"][i].get("bound") is not None]
    assert retime, names
    doc["bounds"] = [b for b in doc["bounds"] if not b["source"].startswith("pipeline_milp: no schedule")]
    (k,) = [k for k, b in enumerate(doc["bounds"]) if b["source"].startswith("pipeline_milp dual bound")]
    doc["bounds"][k]["solver_call"] = retime[0]
    doc["bounds"][k]["value"] = min(doc["objective"], doc["bounds"][k]["value"])
    refix(doc)
    problems = check_result(doc, inst)
    assert any(f == f"bounds[{k}].solver_call" and "retime" in m for f, m in problems), problems


def test_libra_discrete_bound_linked_to_an_lp_is_rejected() -> None:
    inst, doc = solved("libra-dlrm-3d-total500", "libra_discrete")
    assert check_result(doc, inst) == []
    names = [((c.get("extra") or {}).get("model") or {}).get("name") for c in doc["solver_results"]]
    lp = [i for i, n in enumerate(names) if n == "libra_perf_lp" and doc["solver_results"][i].get("bound") is not None]
    assert lp, names
    doc["bounds"].append({"value": doc["objective"], "source": "libra_discrete MILP dual bound (highs)", "grade": "solver", "kind": "solver", "solver_call": lp[0]})  # F6
    refix(doc)
    k = len(doc["bounds"]) - 1
    assert f"bounds[{k}].solver_call" in _fields(check_result(doc, inst))


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_linked_call_without_its_model_record_is_rejected(backend: str) -> None:
    inst, doc, k = _alpa(backend)
    call = doc["solver_results"][doc["bounds"][k]["solver_call"]]
    assert call["extra"]["model"]["name"] == "alpa_ilp"
    call["extra"].pop("model")
    assert f"bounds[{k}].solver_call" in _fields(check_result(doc, inst))
    call["extra"]["model"] = {"name": "tap_lp"}
    assert f"bounds[{k}].solver_call" in _fields(check_result(doc, inst))


# F4 -----------------------------------------------------------------------------------


def test_a_safe_call_needs_its_model_record() -> None:
    inst, doc = solved("placement-small-2", "placement_milp")
    assert check_result(doc, inst) == []
    (k,) = [k for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None]
    call = doc["solver_results"][doc["bounds"][k]["solver_call"]]
    call["bound_grade"] = "safe"
    call["extra"].pop("model")
    doc["bounds"][k]["grade"] = "safe"
    refix(doc)
    fields = _fields(check_result(doc, inst))
    assert f"solver_results[{doc['bounds'][k]['solver_call']}].extra.model" in fields


# F18 ----------------------------------------------------------------------------------


def _grade(source: str) -> str:
    src = bound_source("placement_milp", source)
    assert src is not None and src.kind == "proof", source
    return src.grade


def test_compositions_over_solved_windows_are_at_best_solver() -> None:
    cut = "series composition over cut waists with each module's optimum"
    assert _grade(f"{cut}: 1 waists, 1 of 2 modules solved") == "solver"
    assert _grade(f"{cut}: 1 waists, 1 of 2 modules solved (times scaled by 2^-9 in the model)") == "solver"
    assert _grade(f"{cut}: 3 waists, 0 of 2 modules solved, 1 pairs tied by co-location joined") == "solver"
    assert _grade(f"{cut}: 1 waists, 0 of 1 modules solved (times scaled by 2^-5 in the model)") == "safe"
    assert _grade(f"{LAST_STINT}: 288 waists, weakest case after 'x'") == "solver"  # older text: no count
    assert _grade(f"{LAST_STINT}: 288 waists, 3 windows solved, weakest case after 'x'") == "solver"
    assert _grade(f"{LAST_STINT}: 5 waists, 0 windows solved, weakest case one device") == "safe"
    assert _grade("series composition over waist ops (segment bounds added along a chain): 2 waists") == "safe"


@pytest.mark.parametrize("window", [None, exact], ids=["no-solver", "windows-solved"])
def test_placement_never_grades_a_composition_above_the_registry(window: Any) -> None:
    inst = forward_backward(3)
    also: list[Bound] = []
    main = module_bound(inst, window, also=also)
    assert main is not None
    for b in [main, *also]:
        src = bound_source("placement_milp", b.source)
        assert src is not None and (b.grade != "safe" or src.grade == "safe"), (b.source, b.grade)
    if window is not None:
        assert main.grade == "solver" and all(b.grade == "solver" for b in also)


def test_series_composition_regraded_safe_is_rejected() -> None:
    inst, doc = solved("placement-small-2", "placement_milp")
    doc["bounds"].append({"value": 0.0, "source": "series composition over cut waists with each module's optimum: 1 waists, 1 of 2 modules solved", "grade": "safe", "kind": "proof"})
    k = len(doc["bounds"]) - 1
    assert f"bounds[{k}].grade" in _fields(check_result(doc, inst))
    doc["bounds"][k]["grade"] = "solver"
    assert check_result(doc, inst) == []


# F12 ----------------------------------------------------------------------------------


def test_options_removed_from_a_new_result_are_a_problem() -> None:
    inst, doc = solved("gpt-4layer-memtight", "alpa_ilp")
    doc["gap_tolerance"] = 0.2
    doc.pop("options")
    for c in doc["solver_results"]:
        c.pop("options", None)
    fields = _fields(check_result(doc, inst))
    assert "options" in fields and "solver_results[0].options" in fields
    assert not any("gap_tolerance not cross-checked" in n for n in unchecked(doc))
    # a result from before options, links, kinds and logs were stored: still exempt
    del doc["record_version"]  # (nor its format version)
    for b in doc["bounds"]:
        b.pop("kind", None)
        b.pop("solver_call", None)
    for c in doc["solver_results"]:
        c.pop("log", None)
    assert not {"options", "solver_results[0].options"} & set(_fields(check_result(doc, inst)))
    assert any("gap_tolerance not cross-checked" in n for n in unchecked(doc))


# F17 ----------------------------------------------------------------------------------


@pytest.mark.parametrize("stated", ["solver_free", "proof"])
def test_a_stated_kind_must_be_what_the_source_is(stated: str) -> None:
    inst, doc, k = _alpa("highs")
    doc["bounds"][k]["kind"] = stated  # F17: a linked solver bound
    assert f"bounds[{k}].kind" in _fields(check_result(doc, inst))
    inst, doc, k = _alpa("highs")
    free = next(j for j, b in enumerate(doc["bounds"]) if b.get("kind") == "solver_free")
    doc["bounds"][free]["kind"] = "solver" if stated == "solver_free" else stated
    assert f"bounds[{free}].kind" in _fields(check_result(doc, inst))


def test_every_solver_source_names_its_models() -> None:
    assert all(s.models is not None for s in BOUND_SOURCES if s.kind == "solver")
