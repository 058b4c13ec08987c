"""`distplan verify --json` (review rev29 D9: verify had no --json): one JSON document on
stdout with the verdict, the count, the problems and the notes; the exit code is the same
as without it (0 clean, 1 a problem)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import cli_run


def test_verify_json_prints_one_document_with_the_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "r.json"
    rc, _, err = cli_run(["solve", "placement-small-1", "-f", "baechi_sct", "--result", str(result), "--json"], capsys)
    assert rc == 0, err
    rc, out, err = cli_run(["verify", str(result), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 0 and doc["ok"] is True and doc["checked"] == 1 and doc["problems"] == [], (out, err)
    forged = json.loads(result.read_text())
    forged["objective"] = forged["objective"] / 2
    (tmp_path / "f.json").write_text(json.dumps(forged))
    rc, out, err = cli_run(["verify", str(tmp_path / "f.json"), "--json"], capsys)
    doc = json.loads(out)
    assert rc == 1 and doc["ok"] is False and len(doc["problems"]) >= 1 and "objective" in doc["problems"][0]
    assert out.count("\n") == 1  # one document, one line
