"""Phases that ran past the time limit on large graphs (review rev24b: llama3-70b
on 64 GPUs) now stop at it: the coarsening's fusion, m-SCT's list schedule, and the
m-SCT plans that start placement_milp; the per-pair precedence block of the MILP has a
size limit (beyond it, the model is a relaxation)."""

from __future__ import annotations

import time

import numpy as np
import pytest

import distplan
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.placement import milp
from distplan.formulations.placement.coarsen import coarsen
from distplan.formulations.registry import RunContext
from distplan.solvers.base import SolveOptions, get_backend
from distplan.verify import check_result


def test_coarsening_stops_at_its_deadline() -> None:
    inst = distplan.load_instance("gnmt-v2-4gpu")
    with pytest.raises(DeadlineReached, match="fusing the coarsened graph ran out of time"):
        coarsen(inst, {}, deadline=time.perf_counter() - 1)
    assert coarsen(inst, {}, deadline=time.perf_counter() + 60).instance.n_ops == coarsen(inst, {}).instance.n_ops


def test_sct_plans_start_no_variant_past_the_deadline() -> None:
    inst = distplan.load_instance("gnmt-v2-4gpu")
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=1e-3), {}, started=time.perf_counter() - 1)
    t0 = time.perf_counter()
    assert milp._sct_plans(inst, ctx) == []
    assert time.perf_counter() - t0 < 0.05


def test_pairwise_rows_beyond_their_limit_leave_a_relaxation(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the per-pair block over its limit, placement_milp still returns a plan the
    evaluator accepts and a bound that holds (below the exact optimum)."""
    inst = distplan.load_instance("placement-small-5")  # links of different speeds: the per-pair block applies
    off = ~np.eye(inst.n_devices, dtype=bool)
    assert np.ptp(inst.bandwidth[off]) > 0 or np.ptp(inst.latency[off]) > 0
    exact = distplan.solve(inst, "placement_milp", time_limit=60)
    assert exact.status.value == "optimal"
    monkeypatch.setattr(milp, "PAIRWISE_MAX_ROWS", 0)
    relaxed = distplan.solve(inst, "placement_milp", time_limit=60)
    assert relaxed.bound is not None and relaxed.bound <= exact.objective
    assert relaxed.objective >= exact.objective * (1 - 1e-9)
    assert check_result(relaxed.to_dict(), inst, require_version=True) == []


def test_alpa_ilp_build_stops_at_the_limit() -> None:
    """Alpa's ILP on 40,965 ops took 6 s to build past a 1 s limit (review rev24b D3): the
    build now stops at the deadline, and the run returns the expert plan, time-limited."""
    inst = distplan.load_instance("gpt-24layer-2x4")
    res = distplan.solve(inst, "alpa_ilp", time_limit=0.01, started=time.perf_counter() - 1.0)
    assert "ran out of time" in res.info["stopped"]
    assert res.termination.value == "time_limit" and res.status.value == "feasible"
    assert res.plan is not None and res.check.feasible
    assert check_result(res.to_dict(), inst, require_version=True) == []


def test_search_skips_its_forced_bound_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """placement_search gave its forced co-location bound a share of the time from its
    start even when the start plans had used it all (p70: 0.27 s past a 3 s limit)."""
    from distplan.formulations.placement import search

    real = search.heuristic_schedules
    calls: list[float | None] = []

    def slow_starts(inst, ctx):  # type: ignore[no-untyped-def]
        out = real(inst, ctx)
        while ctx.deadline is not None and time.perf_counter() < ctx.deadline:
            time.sleep(0.01)
        return out

    def counted(inst, makespan, deadline=None):  # type: ignore[no-untyped-def]
        calls.append(deadline)
        return None

    monkeypatch.setattr(search, "heuristic_schedules", slow_starts)
    monkeypatch.setattr(search, "forced_bound", counted)
    inst = distplan.load_instance("placement-small-5")
    res = distplan.solve(inst, "placement_search", time_limit=0.3)
    assert calls == [] and res.plan is not None
    assert check_result(res.to_dict(), inst, require_version=True) == []
