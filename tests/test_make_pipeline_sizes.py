"""`make pipeline` refuses a run longer than any pipeline formulation plans
(`common.check_size`, `MAX_OPERATIONS`), naming ``--micro-batches`` and the most it takes,
and writes nothing (review rev24b: it wrote instances every solve refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distplan.formulations.pipeline.common import MAX_OPERATIONS
from tests.conftest import cli_run


@pytest.mark.parametrize("source", [["--shape", "v"], ["--model", "llama3-8b"]])
def test_too_many_operations_refused(source: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    blocks = 16  # v shape and a model's v placement, 8 stages: forward and backward blocks
    too_many = MAX_OPERATIONS // blocks + 1
    rc, _, err = cli_run(["make", "pipeline", *source, "--stages", "8", "--micro-batches", str(too_many), "-o", str(out)], capsys)
    assert rc == 2 and err.startswith("error: --micro-batches:") and f"plan at most {MAX_OPERATIONS // blocks:,} micro-batches" in err, err
    assert not out.exists()


def test_the_most_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    rc, _, err = cli_run(["make", "pipeline", "--shape", "v", "--stages", "8", "--micro-batches", str(MAX_OPERATIONS // 16), "-o", str(out)], capsys)
    assert rc == 0 and out.exists(), err
