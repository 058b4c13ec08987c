"""The README's examples run as written."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)


def test_readme_has_python_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("k", range(len(BLOCKS)))
def test_python_example_runs(k: int) -> None:
    proc = subprocess.run([sys.executable, "-c", BLOCKS[k]], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_set_up_commands_are_the_ci_commands() -> None:
    """The README's test command is exactly what CI runs."""
    match = re.search(r"^(pip install -c constraints.txt '\.\[dev[^\n]*python -m pytest -q)$", README, flags=re.M)
    assert match, "the README's test command"
    assert match.group(1) in (ROOT / ".ci" / "run").read_text()


def _blocks_after(marker: str) -> list[str]:
    """The command lines of the first plain code block after ``marker``."""
    tail = README[README.index(marker) :]
    block = re.search(r"```\n(.*?)```", tail, flags=re.S)
    assert block, marker
    return [line.split("  #")[0].strip() for line in block.group(1).splitlines() if line.startswith("distplan ")]


EXAMPLES = _blocks_after("These run as printed") + _blocks_after("## Run a plan") + _blocks_after("## Benchmarking solvers and verifying bounds")


def test_command_examples_run_as_printed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each example of the README's command sections, in order, in a fresh folder (through
    the command's entry point in this process: the same argv, no interpreter start-up)."""
    from distplan.cli import main

    monkeypatch.chdir(tmp_path)
    for line in EXAMPLES:
        argv = shlex.split(line)
        argv = [str(ROOT / a) if a.startswith("benchmarks/") else a for a in argv]
        rc = main(argv[1:])
        out, err = capsys.readouterr()
        assert rc == 0, (line, err[-2000:])
        if "--json" in argv:
            json.loads(out)


def test_main_job_command() -> None:
    match = re.search(r"pip install -c constraints\.txt \. && (distplan solve [^\n]+)", README)
    assert match, "the README's main job command"
    args = match.group(1).split()[1:]
    proc = subprocess.run([sys.executable, "-m", "distplan", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "makespan" in proc.stdout and "bound" in proc.stdout and "gap" in proc.stdout
    assert "memory peak" in proc.stdout


def test_examples_say_which_extras_they_need() -> None:
    """A "run as printed" example that needs an extra the set-up line does not install is
    announced where the examples are listed (``distplan plot`` needs matplotlib)."""
    set_up = re.search(r"pip install -c constraints\.txt (\S+) && distplan", README)
    assert set_up, "the README's set-up line"
    start = README.index("These run as printed")
    intro = README[start : README.index("```", start)]
    if any(line.startswith("distplan plot ") for line in EXAMPLES) and "plot" not in set_up.group(1):
        assert "'.[plot]'" in intro, intro
