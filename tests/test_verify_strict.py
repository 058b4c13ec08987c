"""`distplan verify --strict` (review rev31 audit D, item 2): a result whose bound and status
rest on a formulation's own proof that verify cannot redo (tap's dynamic program, a state
search, libra_perf_per_cost's interval search) is listed as unredone, and with --strict it
is a problem. Before, verify said only "0 problem(s)" and a note, so a bound raised to
the objective with the status flipped to optimal passed unremarked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distplan
from tests.conftest import cli_run


def _result(tmp_path: Path, instance: str, formulation: str) -> Path:
    res = distplan.solve(instance, formulation, time_limit=20)
    path = tmp_path / f"{formulation}.json"
    path.write_text(json.dumps(res.to_dict()))
    return path


def test_a_bound_resting_on_a_proof_verify_cannot_redo_is_listed_and_strict_fails_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _result(tmp_path, "gpt-4layer-memtight", "tap")
    rc, out, _ = cli_run(["verify", str(path), "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and report["ok"] and report["problems"] == []
    assert len(report["unredone"]) == 1 and "tap's own proof, which verify cannot redo" in report["unredone"][0]
    rc, out, _ = cli_run(["verify", str(path)], capsys)
    assert rc == 0 and "1 resting on a proof verify cannot redo" in out and "rest on a proof verify cannot redo" in out
    rc, out, _ = cli_run(["verify", str(path), "--strict", "--json"], capsys)
    report = json.loads(out)
    assert rc == 1 and not report["ok"] and any("--strict" in p for p in report["problems"])


def test_a_bound_verify_checks_passes_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _result(tmp_path, "placement-small-1", "placement_milp")
    rc, out, _ = cli_run(["verify", str(path), "--strict", "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and report["ok"] and report["unredone"] == []


def test_strict_applies_to_a_benchmark_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text('name = "strict"\ntime_limit = 20\nformulations = ["tap"]\nbackends = ["highs"]\ninstances = ["gpt-4layer-memtight"]\n')
    db = tmp_path / "c.db"
    rc, _, err = cli_run(["bench", "run", str(campaign), "--db", str(db)], capsys)
    assert rc == 0, err
    rc, out, _ = cli_run(["verify", str(db), "--json"], capsys)
    report = json.loads(out)
    assert rc == 0 and len(report["unredone"]) == 1
    rc, _, _ = cli_run(["verify", str(db), "--strict", "--json"], capsys)
    assert rc == 1
