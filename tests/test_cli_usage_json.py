"""Review rev23: a command line argparse refuses printed no JSON document with ``--json``;
an error document written to a closed pipe ended in a BrokenPipeError traceback; `verify`
on an instance file said its instance "None" was no name or path."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import cli_run


@pytest.mark.parametrize("argv", [
    ["solve", "placement-small-1", "-f", "placement_milp", "--time-limit", "abc", "--json"],
    ["solve", "placement-small-1", "--json"],  # (no --formulation)
    ["--json", "nosuchcommand"],
    ["solve", "placement-small-1", "-f", "placement_milp", "--time-limit", "abc", "--jso"],  # (argparse's abbreviation)
])
def test_a_refused_command_line_is_one_json_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(argv, capsys)
    assert rc == 2
    doc = json.loads(out)
    assert doc["error"]["exit_code"] == 2 and doc["error"]["type"] == "UsageError"
    assert doc["error"]["message"] in err and "usage:" in err and "Traceback" not in err


def test_without_json_a_refused_command_line_prints_nothing_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(["solve", "placement-small-1", "-f", "placement_milp", "--time-limit", "abc"], capsys)
    assert rc == 2 and out == "" and "argument --time-limit: 'abc' is not a number" in err


def test_help_still_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli_run(["--help"], capsys)
    assert rc == 0 and "exit codes" in out


def test_an_error_document_to_a_closed_pipe_is_no_traceback() -> None:
    proc = subprocess.run(f"{sys.executable} -m distplan solve placement-small-1 -f nosuch --json | true; exit ${{PIPESTATUS[0]}}",
                          shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and "BrokenPipeError" not in proc.stderr
    assert "unknown placement formulation 'nosuch'" in proc.stderr


def test_verify_names_an_instance_file_as_such(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    from distplan.instances import load_instance

    path = tmp_path / "inst.json"
    path.write_text(json.dumps(load_instance("placement-small-1").to_dict()))
    rc, out, err = cli_run(["verify", str(path)], capsys)
    assert rc == 2 and "not a result document" in err and "reads as a placement instance" in err
