"""``distplan validate`` says when a well-formed document admits no plan, as ``solve`` does:
a placement whose ops need more memory in all than its devices hold together exits 3 with
the shortfall (review rev16: validate said "valid", solve exit 3)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli_run


def _doc(device_bytes: int) -> dict[str, object]:
    return {
        "format": "distplan/1",
        "kind": "placement",
        "name": "tight",
        "graph": {"ops": [{"name": f"op{k}", "time": 0.001, "memory": 60} for k in range(3)], "edges": [{"src": "op0", "dst": "op1"}]},
        "cluster": {"devices": [{"name": f"gpu{d}", "memory": device_bytes} for d in range(2)], "bandwidth": 1e10, "latency": 1e-5},
    }


@pytest.mark.parametrize("command", ["validate", "solve"])
def test_total_memory_short_of_the_ops_exits_3_with_the_shortfall(command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "tight.json"
    path.write_text(json.dumps(_doc(89)))  # every op fits a device, two fit none: 180 bytes against 178
    argv = [command, str(path)] + (["-f", "baechi_topo"] if command == "solve" else [])
    rc, out, err = cli_run(argv, capsys)
    assert rc == 3, (out, err)
    assert "total 180 bytes but the 2 devices hold 178 together (short by 2 bytes)" in err
    assert "valid placement instance" not in out


def test_a_document_whose_devices_hold_the_ops_is_valid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "fits.json"
    path.write_text(json.dumps(_doc(120)))
    rc, out, err = cli_run(["validate", str(path)], capsys)
    assert rc == 0, err
    assert "valid placement instance 'tight'" in out
