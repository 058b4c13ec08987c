"""What a versioned result must keep, declared where it is written, and a verify mode that
accepts versioned results only.

* A formulation declares the model-record fields its solver calls always write
  (`registry.Formulation.recorded_model_fields`, `registry.RecordedModelField`): verify
  reads the declaration, so pipeline_milp's ``value_at_most`` is no special case written
  into verify, and any formulation can declare one (baechi_sct declares its LP's
  ``variable_blocks``, whose shapes its bound's premise reads).
* Every call of a versioned result records its options: the calls a formulation makes by
  itself (libra's direct Clarabel solver) record them through `RunContext.record_call`
  (they wrote ``options: null`` before), and ``options: null`` in a versioned result is a
  problem.
* ``distplan verify --require-version`` (review rev20 M3): a result stripped of its
  ``record_version`` and of the fields with it reads as an older record, whose gaps are
  only noted; with the flag it is a problem, for result files and bench databases alike.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from conftest import cli_run

import distplan
from distplan.formulations.pipeline import milp
from distplan.formulations.registry import RecordedModelField, formulations
from distplan.models.common import write_json
from distplan.solvers.result import CALL_OPTIONS_SINCE, OPTIONS_RECORD_FIELDS, RECORD_VERSION, RECORD_VERSION_KEY
from distplan.verify import check_result

registry = importlib.import_module("distplan.formulations.registry")

Doc = dict[str, Any]


def _solved(name: str, formulation: str, **kw: Any) -> tuple[Any, Doc]:
    return distplan.load_instance(name), distplan.solve(name, formulation, **kw).to_dict()


def _declaring(monkeypatch: pytest.MonkeyPatch, kind: str, name: str, *fields: RecordedModelField) -> None:
    """The registry with formulation ``name`` declaring ``fields`` (and nothing else changed)."""
    key = (kind, name)
    monkeypatch.setitem(registry._FORMULATIONS, key, dataclasses.replace(registry._FORMULATIONS[key], recorded_model_fields=fields))


# declared model-record fields ----------------------------------------------------------


def test_pipeline_milp_declares_value_at_most_where_it_writes_it() -> None:
    (form,) = [f for f in formulations("pipeline") if f.name == "pipeline_milp"]
    assert form.recorded_model_fields == (milp.VALUE_AT_MOST,)
    assert milp.VALUE_AT_MOST.required("pipe-milp-time-indexed", "infeasible", RECORD_VERSION)
    assert not milp.VALUE_AT_MOST.required("pipe-milp-time-indexed", "optimal", RECORD_VERSION)
    assert not milp.VALUE_AT_MOST.required("pipe-milp", "infeasible", RECORD_VERSION)


def test_verify_requires_what_the_registry_declares(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field declared for alpa_ilp's optimal calls (none of them writes it) is reported as
    dropped from an honest versioned result; declared for another model or termination, or
    not declared, it is not; without a version it is not required."""
    inst, doc = _solved("gpt-2layer-2x2", "alpa_ilp")
    assert check_result(doc, inst) == []
    k = next(i for i, c in enumerate(doc["solver_results"]) if c["termination"] == "optimal" and c["extra"]["model"]["name"] == "alpa_ilp")
    _declaring(monkeypatch, "sharding", "alpa_ilp", RecordedModelField("made_up_field", r"^alpa_ilp$", ("optimal",), "a test's declaration"))
    problems = check_result(doc, inst)
    assert (f"solver_results[{k}].extra.model.made_up_field") in [name for name, _ in problems], problems
    assert all("a test's declaration" in message for name, message in problems if name.endswith("made_up_field"))
    older = {key: value for key, value in doc.items() if key != RECORD_VERSION_KEY}
    assert not any(name.endswith("made_up_field") for name, _ in check_result(older, inst))
    for other in (RecordedModelField("made_up_field", r"^another_model$", ("optimal",), "x"), RecordedModelField("made_up_field", r"^alpa_ilp$", ("infeasible",), "x")):
        _declaring(monkeypatch, "sharding", "alpa_ilp", other)
        assert check_result(doc, inst) == []
    _declaring(monkeypatch, "sharding", "alpa_ilp")
    assert check_result(doc, inst) == []


@pytest.mark.parametrize("since", [0, RECORD_VERSION + 1])
def test_a_field_is_declared_since_a_known_version(since: int) -> None:
    """``since`` names a record version the code writes (review rev22: one beyond it
    would silently never be required)."""
    with pytest.raises(ValueError, match="is no record version"):
        RecordedModelField("made_up_field", r"^alpa_ilp$", ("optimal",), "a test's declaration", since=since)


def test_a_field_declared_since_a_later_version_is_not_asked_of_older_results(monkeypatch: pytest.MonkeyPatch) -> None:
    """A field declared with ``since`` = the next record version (written from then on) is
    not required of a result of the current version, which never wrote it; of a result of
    that next version it is."""
    inst, doc = _solved("gpt-2layer-2x2", "alpa_ilp")
    later = RECORD_VERSION + 1
    monkeypatch.setattr(registry, "RECORD_VERSION", later)  # (a field declared with the version that writes it)
    _declaring(monkeypatch, "sharding", "alpa_ilp", RecordedModelField("made_up_field", r"^alpa_ilp$", ("optimal",), "a test's declaration", since=later))
    assert check_result(doc, inst) == []
    monkeypatch.setattr(importlib.import_module("distplan.verify"), "RECORD_VERSION", later)  # (a verifier that knows it)
    assert check_result(doc, inst) == []
    newer = {**doc, RECORD_VERSION_KEY: later}
    assert any(name.endswith("extra.model.made_up_field") for name, _ in check_result(newer, inst))


def test_sct_lp_calls_keep_their_variable_blocks() -> None:
    """m-SCT's LP value is a bound only for the instance's own LP, which its premise tells by
    the recorded variable blocks' shapes (`sct.lp_bound_premise`); without blocks (an older
    record) it checks the model's name alone. baechi_sct declares the blocks, so a
    versioned result that dropped them is a problem, and an older one is not."""
    from test_verify_stated_conversions import _sct

    from distplan.formulations.placement import sct

    (form,) = [f for f in formulations("placement") if f.name == "baechi_sct"]
    assert form.recorded_model_fields == (sct.VARIABLE_BLOCKS,)
    inst = _sct()
    doc = distplan.solve(inst, "baechi_sct").to_dict()
    assert any(b["source"].startswith("SCT LP value") for b in doc["bounds"]) and check_result(doc, inst) == []
    k = next(i for i, c in enumerate(doc["solver_results"]) if c["termination"] == "optimal")
    del doc["solver_results"][k]["extra"]["model"]["variable_blocks"]
    assert [name for name, _ in check_result(doc, inst)] == [f"solver_results[{k}].extra.model.variable_blocks"]
    del doc[RECORD_VERSION_KEY]
    assert check_result(doc, inst) == []


# every call's options --------------------------------------------------------------


@pytest.mark.parametrize(("formulation", "name"), [("libra_perf", "libra-gpt3-3d-total500"), ("libra_perf_per_cost", "libra-gpt3-3d-total500"), ("libra_perf", "libra-dlrm-4d-multi")])
def test_direct_clarabel_calls_record_their_options(formulation: str, name: str) -> None:
    """libra's calls of its own Clarabel solver keep the run's options at the limit each was
    given (they recorded None before), as its other calls (HiGHS LPs) do, and the result
    verifies clean."""
    inst, doc = _solved(name, formulation, time_limit=60)
    calls = doc["solver_results"]
    assert any(c["backend"] == "clarabel-direct" for c in calls), {c["backend"] for c in calls}
    for call in calls:
        assert isinstance(call["options"], dict) and tuple(call["options"]) == OPTIONS_RECORD_FIELDS
        assert call["options"]["time_limit"] is not None and 0 < call["options"]["time_limit"] <= 60
        assert call["options"]["mip_gap"] == doc["options"]["mip_gap"]
    assert check_result(doc, inst) == []


def test_call_options_nulled_in_a_versioned_result_is_a_problem() -> None:
    """From `CALL_OPTIONS_SINCE` (record version 2) every call records its options; a
    version-1 result (libra's direct calls wrote None then) and an unversioned one are
    not held to it."""
    inst, doc = _solved("libra-dlrm-4d-multi", "libra_perf", time_limit=60)
    assert doc[RECORD_VERSION_KEY] >= CALL_OPTIONS_SINCE == 2
    doc["solver_results"][1]["options"] = None
    assert [name for name, _ in check_result(doc, inst)] == ["solver_results[1].options"]
    older = {key: value for key, value in doc.items() if key != RECORD_VERSION_KEY}
    assert not any(name == "solver_results[1].options" for name, _ in check_result(older, inst))
    assert not any(name == "solver_results[1].options" for name, _ in check_result({**doc, RECORD_VERSION_KEY: 1}, inst))


# --require-version -----------------------------------------------------------------


def _files(doc: Doc, inst: Any, tmp_path: Path) -> list[str]:
    write_json(inst.to_dict(), tmp_path / "instance.json")
    write_json(doc, tmp_path / "result.json")
    return ["verify", str(tmp_path / "result.json"), "--instance", str(tmp_path / "instance.json")]


def test_require_version_refuses_a_result_without_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A versioned result passes with and without the flag; stripped of its version it
    passes as an older record without the flag, and exits 1 naming the field with it."""
    inst, doc = _solved("placement-small-4", "baechi_etf")
    for flags in ([], ["--require-version"]):
        rc, out, _ = cli_run(_files(doc, inst, tmp_path) + flags, capsys)
        assert rc == 0, out
    del doc[RECORD_VERSION_KEY]
    rc, out, _ = cli_run(_files(doc, inst, tmp_path), capsys)
    assert rc == 0, out
    rc, out, err = cli_run(_files(doc, inst, tmp_path) + ["--require-version"], capsys)
    assert rc == 1 and f"{RECORD_VERSION_KEY}: missing" in out and "--require-version" in out, out + err
    assert "Traceback" not in out + err


def test_require_version_in_a_bench_database(tmp_path: Path) -> None:
    """A run of a bench store whose result_json lost its version is a problem of the audit
    with the flag, and not without it (an honest store passes both ways)."""
    from distplan.bench.campaign import parse_campaign
    from distplan.bench.runner import run_campaign
    from distplan.bench.verify import verify_database

    campaign = parse_campaign({"name": "v", "time_limit": 20, "threads": 1, "formulations": ["baechi_etf"], "backends": ["highs"], "instances": ["placement-small-2"]}, base=tmp_path)
    db = tmp_path / "runs.db"
    assert run_campaign(campaign, db, progress=False)["stored"] == 1
    assert verify_database(db).ok and verify_database(db, require_version=True).ok
    con = sqlite3.connect(str(db))
    (stored,) = con.execute("SELECT result_json FROM runs").fetchone()
    doc = json.loads(stored)
    del doc[RECORD_VERSION_KEY]
    con.execute("UPDATE runs SET result_json = ?", (json.dumps(doc),))
    con.commit()
    con.close()
    assert verify_database(db).ok
    report = verify_database(db, require_version=True)
    assert not report.ok and any(f"{RECORD_VERSION_KEY}: missing" in p for p in report.problems), report.problems


# a "safe" grade needs the model's integer counts ----------------------------------------


@pytest.mark.parametrize("dropped", [("binaries", "integers"), ("binaries",), ("integers",)])
def test_a_safe_grade_on_a_call_without_its_integer_counts_is_a_problem(dropped: tuple[str, ...]) -> None:
    """Only an LP's bound is made safe; verify tells an LP by the model record's counts of
    binaries and integers, which every record keeps. A MIP call regraded "safe" with its
    counts dropped read as an LP before (the missing counts summed to 0)."""
    inst, doc = _solved("placement-small-2", "placement_milp")
    k = next(i for i, c in enumerate(doc["solver_results"]) if c["extra"].get("model", {}).get("binaries"))
    doc["solver_results"][k]["bound_grade"] = "safe"
    for name in dropped:
        del doc["solver_results"][k]["extra"]["model"][name]
    for record in (doc, {key: value for key, value in doc.items() if key != RECORD_VERSION_KEY}):
        assert f"solver_results[{k}].extra.model" in [name for name, _ in check_result(record, inst)]
