"""An instance file given where a plan is expected (`evaluate`, `plot`, `emit`) is named as
an instance (review rev29: `emit` said "the plan does not say which instance it solves")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distplan
from distplan.errors import InputError
from tests.conftest import assert_named_error, cli_run


@pytest.fixture()
def pipeline_file(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    from distplan.cli import main

    rc = main(["make", "pipeline", "--shape", "v", "--stages", "4", "--micro-batches", "8", "-o", str(path)])
    assert rc == 0
    return path


@pytest.mark.parametrize(
    "argv",
    [
        ["evaluate", "{f}", "{f}"],
        ["emit", "{f}", "--target", "torch-pipelining"],
        ["emit", "{f}", "--instance", "{f}", "--target", "torch-pipelining"],
        ["plot", "{f}", "{f}", "-o", "{tmp}/g.png"],
    ],
)
def test_an_instance_given_as_the_plan_is_named(pipeline_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    args = [a.format(f=pipeline_file, tmp=tmp_path) for a in argv]
    rc, out, err = cli_run(args, capsys)
    assert_named_error(rc, out, err, "a pipeline instance", "not a plan", "distplan solve")


def test_emit_of_an_instance_document_in_python_is_named(pipeline_file: Path) -> None:
    doc = json.loads(pipeline_file.read_text())
    with pytest.raises(InputError, match="a pipeline instance .*, not a plan"):
        distplan.emit(doc, "torch-pipelining")


def test_plans_and_results_still_read(pipeline_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan, result = tmp_path / "plan.json", tmp_path / "result.json"
    rc, _, err = cli_run(["solve", str(pipeline_file), "-f", "1f1b", "--out", str(plan), "--result", str(result), "--json"], capsys)
    assert rc == 0, err
    for doc in (plan, result):
        rc, out, err = cli_run(["evaluate", str(pipeline_file), str(doc)], capsys)
        assert rc == 0, err
        rc, out, err = cli_run(["emit", str(doc), "--instance", str(pipeline_file), "--target", "torch-pipelining"], capsys)
        assert rc == 0 and out, err
