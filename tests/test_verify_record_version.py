"""Results record their format (``record_version``, `solvers.result.RECORD_VERSION`).

Before, `distplan verify` could not tell an older record from a forged one whose fields
were stripped: ``objective_scale`` dropped from every call record was checked at the least
scale with a note, a pipeline_milp call record without ``value_at_most`` (or whose model
could not be rebuilt) was only noted, options, logs and the gap tolerance were excused as
an older record's. A result that carries the version has every field that version writes:
one missing is a problem naming it (exit 1). A result without a version is an older one,
whose missing fields are noted as before; a version newer than the verifier knows is
refused, never read as a known one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import backend_params, cli_run, takes_milp
from test_verify_rev18 import BACKING_MODELS, _no_bound_proved, slow_links, solved
from test_verify_rev18_pipeline import _call_proof, _verify

import distplan
from distplan.api import RESULT_RECORD_FIELDS
from distplan.formulations.pipeline import milp
from distplan.solvers.result import CALL_RECORD_FIELDS, RECORD_VERSION, RECORD_VERSION_KEY
from distplan.verify import VerifyReport, check_result, unchecked, verify_result

Doc = dict[str, Any]

#: what `distplan verify` says of a field a versioned result dropped
DROPPED = "always writes it: the field was dropped"


def _unversioned(doc: Doc) -> None:
    """``doc`` as a result written before results recorded their format."""
    assert doc[RECORD_VERSION_KEY] == RECORD_VERSION
    del doc[RECORD_VERSION_KEY]


def _all_notes(doc: Doc, inst: Any) -> tuple[list[tuple[str, str]], list[str]]:
    """`check_result`'s problems, and every note `verify_result` makes of ``doc``."""
    notes: list[str] = []
    problems = check_result(doc, inst, notes)
    report = VerifyReport()
    verify_result(doc, inst, report)
    return problems, notes + report.notes


def _tap_walk(backend: str) -> tuple[Any, Doc]:
    """tap's walk program on the slow-links instance, whose programs' objective scales
    range from 1e5 to 1e6 (a call's scale is needed to convert its bound exactly); skipped
    only where the backend proved no solver bound to link."""
    inst, doc = solved(slow_links(), "tap", backend, dp=False)
    if not any(b.get("solver_call") is not None for b in doc["bounds"]):
        _no_bound_proved(doc, backend, "tap's walk", BACKING_MODELS["tap-walk"])
    return inst, doc


# the version is written --------------------------------------------------------------


def test_every_result_records_its_format_version(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = distplan.solve("placement-small-4", "baechi_etf")
    doc = result.to_dict()
    assert doc[RECORD_VERSION_KEY] == RECORD_VERSION and isinstance(RECORD_VERSION, int)
    assert tuple(doc) == RESULT_RECORD_FIELDS  # what verify requires is what is written
    rc, out, _ = cli_run(["solve", "placement-small-2", "-f", "baechi_etf", "--json", "--result", str(tmp_path / "r.json")], capsys)
    assert rc == 0
    assert json.loads(out)[RECORD_VERSION_KEY] == RECORD_VERSION
    assert json.loads((tmp_path / "r.json").read_text())[RECORD_VERSION_KEY] == RECORD_VERSION


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_every_call_record_has_the_fields_verify_requires(backend: str) -> None:
    inst, doc = _tap_walk(backend)
    assert doc[RECORD_VERSION_KEY] == RECORD_VERSION and doc["solver_results"]
    for call in doc["solver_results"]:
        assert set(CALL_RECORD_FIELDS) <= set(call), sorted(set(CALL_RECORD_FIELDS) - set(call))


def test_a_bench_run_stores_the_version_in_its_result_json() -> None:
    from distplan.bench.record import execute_run

    inst = distplan.load_instance("placement-small-2")
    spec = {"run_key": "k", "instance": inst.name, "instance_hash": "h", "kind": inst.kind, "formulation": "baechi_etf", "backend": "highs", "document": inst.to_dict(), "options": {}}
    rec = execute_run(spec)
    assert rec["termination"] != "error", rec.get("error")
    assert json.loads(rec["result_json"])[RECORD_VERSION_KEY] == RECORD_VERSION


# honest versioned results ------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_honest_versioned_results_verify_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for inst, doc in (_tap_walk(backend), solved(distplan.load_instance("gpt-2layer-2x2"), "alpa_ilp", backend)):
        assert doc[RECORD_VERSION_KEY] == RECORD_VERSION
        problems, notes = _all_notes(doc, inst)
        assert problems == [] and not any("written before" in n or "older" in n for n in notes), (problems, notes)
        rc, out = _verify(doc, inst, tmp_path, capsys)
        assert rc == 0, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_an_honest_versioned_pipeline_proof_verifies_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, model = _call_proof(backend)
    assert doc[RECORD_VERSION_KEY] == RECORD_VERSION and "value_at_most" in model
    assert check_result(doc, inst) == []
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


# fields stripped: a problem with the version, a note without it ----------------------


def _strip_gap_tolerance(doc: Doc) -> list[str]:
    del doc["gap_tolerance"]
    return ["gap_tolerance"]


def _strip_logs(doc: Doc) -> list[str]:
    for call in doc["solver_results"]:
        del call["log"]
    return [f"solver_results[{i}].log" for i in range(len(doc["solver_results"]))]


def _strip_call_options(doc: Doc) -> list[str]:
    for call in doc["solver_results"]:
        del call["options"]
    return [f"solver_results[{i}].options" for i in range(len(doc["solver_results"]))]


def _strip_options(doc: Doc) -> list[str]:
    del doc["options"]
    return ["options"]


def _strip_termination(doc: Doc) -> list[str]:
    del doc["termination"]  # (its check against the last call's is skipped without it)
    return ["termination"]


#: a field a forger strips from every record that has it: the fields it names
STRIPS: dict[str, Callable[[Doc], list[str]]] = {
    "gap_tolerance": _strip_gap_tolerance,
    "logs": _strip_logs,
    "call options": _strip_call_options,
    "options": _strip_options,
    "termination": _strip_termination,
}


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("strip", list(STRIPS))
def test_a_field_stripped_from_a_versioned_result_exits_1(strip: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = _tap_walk(backend)
    named = STRIPS[strip](doc)
    fields = [name for name, _ in check_result(doc, inst)]
    assert set(named) <= set(fields), fields
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and all(f"{name}: missing" in out for name in named), out


#: the strips an older record is excused (noted) for, and what the notes say
NOTED = {
    "gap_tolerance": "(default: the result records none)",
    "logs": "solver calls written without their logs",
}


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("strip", list(NOTED))
def test_the_same_field_stripped_from_an_unversioned_result_is_noted(strip: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = _tap_walk(backend)
    _unversioned(doc)
    STRIPS[strip](doc)
    problems, notes = _all_notes(doc, inst)
    assert problems == [] and any(NOTED[strip] in n for n in notes), (problems, notes)
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0 and NOTED[strip] in out, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_options_stripped_from_an_old_format_result_are_noted(backend: str) -> None:
    """Options are excused only on a result of the old format throughout (no version, and
    no bound kinds, links or logs, which only results that record options have)."""
    inst, doc = _tap_walk(backend)
    _unversioned(doc)
    _strip_options(doc)
    _strip_call_options(doc)
    _strip_logs(doc)
    doc["bounds"] = [{k: v for k, v in b.items() if k not in ("kind", "solver_call")} for b in doc["bounds"] if "solver_call" not in b]
    doc["bound"] = max(b["value"] for b in doc["bounds"])
    doc["bound_grade"] = next(b["grade"] for b in doc["bounds"] if b["value"] == doc["bound"])
    doc["bound_source"] = next(b["source"] for b in doc["bounds"] if b["value"] == doc["bound"])
    doc["gap"] = (doc["objective"] - doc["bound"]) / doc["objective"]
    doc["status"] = "optimal" if doc["gap"] <= doc["gap_tolerance"] else "feasible"
    problems, notes = _all_notes(doc, inst)
    assert problems == [] and any("gap_tolerance not cross-checked" in n for n in notes), (problems, notes)


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_objective_scale_stripped_from_every_call_of_a_versioned_result_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = _tap_walk(backend)
    (call,) = {b["solver_call"] for b in doc["bounds"] if b.get("solver_call") is not None}
    for c in doc["solver_results"]:
        c["extra"]["model"].pop("objective_scale")
    notes: list[str] = []
    problems = check_result(doc, inst, notes)
    assert f"solver_results[{call}].extra.model.objective_scale" in [name for name, _ in problems], problems
    assert not any("objective_scale" in n for n in notes), notes  # a problem, not a note
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"solver_results[{call}].extra.model.objective_scale: missing" in out, out
    # the version removed: an older record, checked at the least scale and noted (as before)
    _unversioned(doc)
    problems, notes = _all_notes(doc, inst)
    assert problems == [] and any("records no extra.model.objective_scale" in n and "10x looser" in n for n in notes), (problems, notes)
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0 and "records no extra.model.objective_scale" in out, out


def _time_indexed_call(doc: Doc) -> int:
    (i,) = [i for i, c in enumerate(doc["solver_results"]) if c["extra"]["model"]["name"].endswith("-time-indexed")]
    return i


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_value_at_most_stripped_from_a_versioned_result_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Even where the model rebuilt at U has the call's size (an older record passes then)."""
    inst, doc, k, model = _call_proof(backend)
    i = _time_indexed_call(doc)
    del model["value_at_most"]
    problems = check_result(doc, inst)
    assert [name for name, _ in problems] == [f"solver_results[{i}].extra.model.value_at_most"], problems
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"solver_results[{i}].extra.model.value_at_most: missing" in out, out
    _unversioned(doc)  # an older record: its model is the one rebuilt at U
    assert check_result(doc, inst) == []
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_value_at_most_stripped_where_the_model_cannot_be_rebuilt_exits_1(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The premise that could not be checked (`registry.Unchecked`) is a problem of a
    versioned result, a note of an older one."""
    inst, doc, k, model = _call_proof(backend)
    i = _time_indexed_call(doc)
    del model["value_at_most"]
    monkeypatch.setattr(milp, "rebuild_below", lambda inst_, cap: (None, "cannot be re-checked here (too large)"))
    notes: list[str] = []
    problems = check_result(doc, inst, notes)
    assert sorted(name for name, _ in problems) == sorted([f"bounds[{k}].source", f"solver_results[{i}].extra.model.value_at_most"]), problems
    assert any("value_at_most" in message and "was dropped" in message for name, message in problems if name == f"bounds[{k}].source"), problems
    assert not any("not checked" in n for n in notes), notes
    _unversioned(doc)
    notes = []
    assert check_result(doc, inst, notes) == []
    assert any(f"bounds[{k}]" in n and "not checked" in n and "value_at_most" in n for n in notes), notes


# versions this verifier does not know ------------------------------------------------


@pytest.mark.parametrize("version", [RECORD_VERSION + 1, 99])
def test_a_newer_version_is_refused(version: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(distplan.load_instance("gpt-2layer-2x2"), "alpa_ilp", "highs")
    doc[RECORD_VERSION_KEY] = version
    problems = check_result(doc, inst)
    assert [name for name, _ in problems] == [RECORD_VERSION_KEY] and "newer than the record format this verifier knows" in problems[0][1], problems
    assert unchecked(doc) == []  # not read as an older record either
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"{RECORD_VERSION_KEY}: {version} is newer" in out, out


@pytest.mark.parametrize("version", [0, -1, "1", True, None, 1.0])
def test_a_malformed_version_is_refused(version: Any) -> None:
    inst, doc = solved(distplan.load_instance("gpt-2layer-2x2"), "alpa_ilp", "highs")
    forged = copy.deepcopy(doc)
    forged[RECORD_VERSION_KEY] = version
    problems = check_result(forged, inst)
    assert [name for name, _ in problems] == [RECORD_VERSION_KEY] and "is no record format version" in problems[0][1], problems


# the options a versioned result was solved with (review rev20 H1) --------------------


def _open_gap_result() -> tuple[Any, Doc]:
    """tessel on Zero Bubble's case: a heuristic plan above its proven bound (an open gap,
    so "optimal" is a claim verify must refuse)."""
    inst = distplan.load_instance("pipeline-zb-p4-m12-comm0")
    res = distplan.solve(inst, formulation="tessel")
    doc = res.to_dict()
    assert doc["status"] == "feasible" and res.gap is not None and res.gap > doc["gap_tolerance"], (doc["status"], res.gap)
    assert check_result(doc, inst) == []
    return inst, doc


def _raise_tolerance_over(doc: Doc) -> None:
    """Claim optimal under a tolerance above the open gap."""
    doc["status"] = "optimal"
    doc["gap_tolerance"] = 0.5


@pytest.mark.parametrize("how", ["gap dropped", "options nulled"])
def test_a_tolerance_raised_with_the_options_hidden_exits_1(how: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A versioned result that claims optimal with an open gap, its tolerance raised, and
    the run's (and every call's) ``mip_gap`` or whole options hidden: the run's options must
    record every field, and its tolerance is the run's mip_gap. Passed before (exit 0)."""
    inst, doc = _open_gap_result()
    forged = copy.deepcopy(doc)
    _raise_tolerance_over(forged)
    for record in [forged] + forged["solver_results"]:
        if how == "gap dropped" and isinstance(record.get("options"), dict):
            del record["options"]["mip_gap"]
        elif how == "options nulled":
            record["options"] = None
    problems = check_result(forged, inst)
    assert any(name in ("options", "options.mip_gap") for name, _ in problems), problems
    rc, out = _verify(forged, inst, tmp_path, capsys)
    assert rc == 1, out


def test_a_tolerance_that_is_not_the_runs_mip_gap_exits_1() -> None:
    """The options kept whole and the tolerance alone raised: a problem on gap_tolerance
    (the run's mip_gap is the tolerance `distplan.solve` records)."""
    inst, doc = _open_gap_result()
    forged = copy.deepcopy(doc)
    _raise_tolerance_over(forged)
    assert "gap_tolerance" in [name for name, _ in check_result(forged, inst)]
    honest = copy.deepcopy(doc)
    assert honest["options"]["mip_gap"] == honest["gap_tolerance"]
    assert check_result(honest, inst) == []


def test_options_record_writes_exactly_the_fields_verify_requires() -> None:
    from distplan.solvers.base import SolveOptions
    from distplan.solvers.result import OPTIONS_RECORD_FIELDS, options_record

    assert tuple(options_record(SolveOptions())) == OPTIONS_RECORD_FIELDS
