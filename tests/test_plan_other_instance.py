"""A plan read against an instance other than the one it names (`evaluate`, `plot`,
`emit --instance`) is read all the same, with a warning on stderr naming both; a plan read
against its own instance gets none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distplan
from tests.conftest import cli_run

WARNING = "is a plan for instance 'placement-small-2'; it is read against instance 'edited'"


@pytest.fixture
def files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    """plan.json and result.json for placement-small-2, and edited.json: the same graph
    under another name."""
    monkeypatch.chdir(tmp_path)
    assert cli_run(["solve", "placement-small-2", "-f", "baechi_etf", "--out", "plan.json", "--result", "result.json"], capsys)[0] == 0
    doc = distplan.load_instance("placement-small-2").to_dict()
    doc["name"] = "edited"
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    return tmp_path


@pytest.mark.parametrize("plan", ["plan.json", "result.json"])
def test_evaluate_warns(files: Path, plan: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(["evaluate", "edited.json", plan, "--json"], capsys)
    assert rc == 0 and json.loads(out)["feasible"], err
    assert f"warning: {plan} {WARNING}" in err
    rc, out, err = cli_run(["evaluate", "placement-small-2", plan], capsys)
    assert rc == 0 and "warning" not in err, err


def test_plot_warns(files: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    rc, _, err = cli_run(["plot", "edited.json", "plan.json", "-o", "gantt.png"], capsys)
    assert rc == 0 and f"warning: plan.json {WARNING}" in err, err


def test_emit_with_instance_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    assert cli_run(["solve", "gpt-2layer-2x2", "-f", "megatron", "--out", "shard.json"], capsys)[0] == 0
    doc = distplan.load_instance("gpt-2layer-2x2").to_dict()
    doc["name"] = "edited"
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    rc, out, err = cli_run(["emit", "shard.json", "--target", "dtensor", "--instance", "edited.json"], capsys)
    assert rc == 0 and out, err
    assert "warning: shard.json is a plan for instance 'gpt-2layer-2x2'; it is read against instance 'edited'" in err
    for argv in (["--instance", "gpt-2layer-2x2"], []):
        rc, out, err = cli_run(["emit", "shard.json", "--target", "dtensor", *argv], capsys)
        assert rc == 0 and out and "warning" not in err, err
