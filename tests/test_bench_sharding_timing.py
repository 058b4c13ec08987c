"""benchmarks/bench_sharding.py's timing helpers: tap's dynamic program (no solver call)
and its walk MILP both timed by `timed_run`; `paired_batches` gives each formulation the
median of its batches."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.test_tap_exact import tight

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> Any:
    spec = importlib.util.spec_from_file_location("bench_sharding_under_test", ROOT / "benchmarks" / "bench_sharding.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_timed_run_times_taps_dynamic_program_and_its_walk_milp(bench: Any) -> None:
    dp = bench.timed_run("tap", 4, 8, "highs", 60.0, {"certify": True})
    milp = bench.timed_run("tap", 4, 8, "highs", 60.0, {"dp": False})
    assert dp["solve"] == 0.0 and dp["build"] == dp["search"] > 0 and dp["termination"] == "optimal"
    assert dp["variables"] and dp["unfolded"] and dp["variables"] < dp["unfolded"]
    assert milp["solve"] > 0 and milp["termination"] == "optimal" and milp["variables"]
    assert dp["objective"] == pytest.approx(milp["objective"], rel=1e-6)


def test_paired_batches_take_the_median_of_each_formulations_batches(bench: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, int, float]] = []
    batch_solve = bench.batch_solve

    def counted(inst: Any, formulation: str, backend: str, time_limit: float, batch: int, least_seconds: float = 0.0) -> dict[str, Any]:
        calls.append((formulation, batch, least_seconds))
        return batch_solve(inst, formulation, backend, time_limit, batch, least_seconds)

    monkeypatch.setattr(bench, "batch_solve", counted)
    monkeypatch.setattr(bench, "SETTLE_SECONDS", 0.0)
    alpa, tap = bench.paired_batches(tight(4, 4, 0.3), "highs", 60.0, 2, 0.01)
    assert [c[0] for c in calls] == ["alpa_ilp", "tap"] * bench.BATCH_REPEATS and all(c[1:] == (2, 0.01) for c in calls)
    assert alpa["cpu"] > 0 and tap["cpu"] > 0 and alpa["objective"] == pytest.approx(tap["objective"], rel=1e-6)
