"""The README's examples run as written."""

from __future__ import annotations

import re
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


def test_main_job_command() -> None:
    match = re.search(r"pip install \. && (distplan solve [^\n]+)", README)
    assert match, "the README's main job command"
    args = match.group(1).split()[1:]
    proc = subprocess.run([sys.executable, "-m", "distplan", *args], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "makespan" in proc.stdout and "bound" in proc.stdout and "gap" in proc.stdout
    assert "memory peak" in proc.stdout
