"""The examples that run plans in PyTorch, without torch (review rev29): one line naming the
extra, exit 2, before any solving (they solved every case, then ended in a traceback)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("example", ["run_pipeline_plan.py", "run_dtensor_plan.py"])
def test_a_torch_example_without_torch_names_the_extra_before_solving(example: str) -> None:
    code = textwrap.dedent(
        f"""
        import runpy, sys
        sys.modules["torch"] = None  # as if torch were not installed
        import distplan
        def refuse(*args, **kwargs):
            raise SystemExit("solved before checking for torch")
        distplan.solve = refuse
        sys.argv = [{example!r}]
        runpy.run_path({str(ROOT / "examples" / example)!r}, run_name="__main__")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == "" and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: torch: PyTorch is not installed (pip install 'distplan[torch]')"
