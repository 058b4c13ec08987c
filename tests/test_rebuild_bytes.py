"""`pipeline.milp.rebuild_bytes` bounds the memory of rebuilding a time-indexed model.

`distplan verify` rebuilds a pipeline_milp proof's model only when this estimate is within
`milp.REBUILD_MAX_BYTES`, so it must not be below what the build takes. Measured as
``benchmarks/bench_rebuild_bytes.py`` measures it: the build's peak resident memory growth
in a fresh process. The former constants (600 bytes per step variable, 300 per device and
time step) gave 0.28 of the peak on the nn case and 0.79 on the v case below: the
one-at-a-time rows grow with operation-device pairs, not devices.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from bench_rebuild_bytes import OLD_ROW, OLD_STEP, run_case  # noqa: E402

#: (shape, stages, micro-batches, unit): ~30 MB and ~140 MB builds, 0.4-0.5 s each
CASES = [("nn", 4, 1, 417.0), ("v", 4, 4, 893.0)]


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="peak RSS is read from /proc (Linux)")
@pytest.mark.parametrize(("shape", "stages", "micro_batches", "unit"), CASES)
def test_the_estimate_is_above_the_builds_peak_memory(shape: str, stages: int, micro_batches: int, unit: float) -> None:
    got = run_case({"shape": shape, "p": stages, "N": micro_batches, "unit": unit, "cap_factor": 1.0})
    assert got["outcome"] == "built" and "no_reset" not in got, got
    peak = got["rss_peak"]
    assert got["estimate"] >= peak, (got["estimate"], peak)
    assert got["estimate"] <= 2.5 * peak, (got["estimate"], peak)  # (an estimate, not a blanket refusal)
    assert OLD_STEP * got["steps"] + OLD_ROW * got["rows"] < peak  # what the former constants missed
