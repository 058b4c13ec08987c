"""Plan documents are read whole (`KindSpec.read_plan`): a field the kind's plans do not
have is a named error (exit 2) with the closest known field, as instance fields are, and
a plan of another kind is named too. Before, the readers took what they knew: a compression
plan whose ``sync`` was misspelled read as every gradient all-reduced, a placement plan
whose ``start`` was misspelled had its start times recomputed, and both evaluated "feasible"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_named_error, cli_run

import distplan
from distplan.errors import InputError
from distplan.models.common import PLAN_ENVELOPE, json_default, kind_spec

#: a bundled instance and a quick formulation of every kind, and a field of its plans
CASES = {
    "placement": ("placement-small-1", "baechi_topo", "start", "strat"),
    "sharding": ("gpt-2layer-2x2", "data_parallel", "strategies", "strategy"),
    "pipeline": ("pipeline-tessel-vshape", "1f1b", "start", "starts"),
    "compression": ("compression-mlp-small", "tag_sfb", "sync", "snyc"),
    "bandwidth": ("libra-gpt3-4d-multi", "libra_perf", "bandwidth", "bandwith"),
}


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_misspelled_plan_field_is_named_with_exit_2(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name, formulation, field, wrong = CASES[kind]
    plan_file = tmp_path / "plan.json"
    rc, out, err = cli_run(["solve", name, "-f", formulation, "--out", str(plan_file)], capsys)
    assert rc == 0, err
    rc, out, err = cli_run(["evaluate", name, str(plan_file)], capsys)
    assert rc == 0, err  # the plan as written
    doc = json.loads(plan_file.read_text())
    assert set(doc) <= set(PLAN_ENVELOPE + kind_spec(kind).plan_fields)
    doc[wrong] = doc.pop(field)
    plan_file.write_text(json.dumps(doc))
    rc, out, err = cli_run(["evaluate", name, str(plan_file)], capsys)
    assert_named_error(rc, out, err, f"{wrong}: unknown field, did you mean '{field}'?")


def test_a_plan_of_another_kind_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan_file = tmp_path / "plan.json"
    rc, _, err = cli_run(["solve", "gpt-2layer-2x2", "-f", "data_parallel", "--out", str(plan_file)], capsys)
    assert rc == 0, err
    rc, out, err = cli_run(["evaluate", "placement-small-1", str(plan_file)], capsys)
    assert_named_error(rc, out, err, "kind: a 'sharding-plan' document, not a placement-plan")


@pytest.mark.parametrize("kind", sorted(CASES))
def test_a_result_document_is_read_as_its_plan(kind: str) -> None:
    name, formulation, _, wrong = CASES[kind]
    inst = distplan.load_instance(name)
    result = json.loads(json.dumps(distplan.solve(inst, formulation).to_dict(), default=json_default))  # as --result writes it
    spec = kind_spec(kind)
    assert spec.evaluate(inst, spec.read_plan(inst, result)).feasible
    result["plan"][wrong] = 1
    with pytest.raises(InputError, match=f"{wrong}: unknown field"):
        spec.read_plan(inst, result)


def test_verify_names_a_stored_plan_with_an_unknown_field() -> None:
    from distplan.verify import check_result

    inst = distplan.load_instance("compression-mlp-small")
    doc = json.loads(json.dumps(distplan.solve(inst, "tag_sfb").to_dict(), default=json_default))
    assert check_result(doc, inst) == []
    doc["plan"]["snyc"] = doc["plan"].pop("sync")
    assert [(field, "snyc: unknown field" in message) for field, message in check_result(doc, inst)] == [("plan", True)]


def test_a_result_without_a_plan_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "bounds.json"
    rc, _, err = cli_run(["solve", "placement-small-4", "-f", "placement_bounds", "--time-limit", "5", "--result", str(result)], capsys)
    assert rc == 0, err
    rc, out, err = cli_run(["evaluate", "placement-small-4", str(result)], capsys)
    assert_named_error(rc, out, err, "plan: the result holds no plan")
