"""The ``distplan`` process raises the garbage collector's thresholds
(`cli.COMMAND_GC_THRESHOLD`: large instances are millions of live objects, review rev25);
a Python caller of `cli.main` keeps its own."""

from __future__ import annotations

import gc
import subprocess
import sys

import pytest

from distplan import cli


def test_a_python_caller_keeps_its_thresholds(capsys: pytest.CaptureFixture[str]) -> None:
    before = gc.get_threshold()
    assert cli.main(["list", "backends"]) == 0
    assert gc.get_threshold() == before
    assert "backends:" in capsys.readouterr().out


def test_the_command_sets_its_own() -> None:
    code = "import gc, sys\nfrom distplan.cli import main\nsys.argv = ['distplan', 'list', 'backends']\nmain()\nprint(gc.get_threshold(), file=sys.stderr)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == str(cli.COMMAND_GC_THRESHOLD)
