"""``--json`` prints exactly one JSON document, also when the command fails (review rev16:
exits 3 and 4 left stdout empty, so a script's json.loads failed): the error document
``{"error": {type, message, exit_code, path?, details?}}``, the message on stderr as well;
and a file nested too deeply for the JSON reader is bad input, not a traceback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from distplan.cli import main


@pytest.mark.parametrize(
    ("argv", "code", "kind"),
    [
        (["solve", "pipeline-vshape-p8", "-f", "gpipe", "--json"], 3, "InfeasibleError"),
        (["solve", "no-such-instance", "-f", "gpipe", "--json"], 2, "InputError"),
        (["solve", "gnmt-v2-4gpu", "-f", "baechi_sct", "--time-limit", "0.001", "--json"], 4, "NoSolutionError"),
    ],
)
def test_an_error_is_the_one_json_document(argv: list[str], code: int, kind: str, capfd: pytest.CaptureFixture[str]) -> None:
    rc = main(argv)
    out, err = capfd.readouterr()
    assert rc == code and err.startswith("error: ")
    doc = json.loads(out)["error"]  # one document and nothing else
    assert doc["exit_code"] == code and doc["type"] == kind and doc["message"] in err
    if kind == "InfeasibleError":
        assert doc["details"]["peak_memory"]["d0"] == 32.0
    if kind == "InputError":
        assert doc["path"] == "instance"


def test_without_json_stdout_stays_empty(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "pipeline-vshape-p8", "-f", "gpipe"]) == 3
    assert capfd.readouterr().out == ""


def test_a_deeply_nested_file_is_bad_input(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000)
    assert main(["validate", str(deep)]) == 2
    out, err = capfd.readouterr()
    assert out == "" and "nested too deeply" in err and "Traceback" not in err


def test_the_help_lists_the_exit_codes(capfd: pytest.CaptureFixture[str]) -> None:
    """Review rev16: the exit codes were in the README only (evaluate's 3 nowhere)."""
    assert main(["--help"]) == 0
    out = capfd.readouterr().out
    assert "exit codes:" in out and all(f"\n  {code}  " in out for code in range(5)) and "(evaluate)" in out
