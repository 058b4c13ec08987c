"""placement_milp under a hard time limit: once the run's deadline has passed (here forced
by slowing one phase), it neither builds its model nor starts a solver, and returns its best
plan so far as a time-limited run; a model build that runs out stops within a block."""

from __future__ import annotations

import time
from typing import Any

import pytest
from conftest import closure_late_until

import distplan
from distplan.formulations.placement import milp

LIMIT = 0.5
GRACE = 2.0  # the allowance of tests/test_first_contact.py: max(2 s, 10% of the limit)


def _slowed(fn: Any, seconds: float) -> Any:
    def slow(*args: Any, **kwargs: Any) -> Any:
        out = fn(*args, **kwargs)
        time.sleep(seconds)
        return out

    return slow


def test_heuristics_past_the_deadline_return_their_plan_without_a_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(milp, "best_heuristic", _slowed(milp.best_heuristic, LIMIT + 0.1))
    t0 = time.perf_counter()
    res = distplan.solve("placement-small-1", "placement_milp", time_limit=LIMIT)
    assert time.perf_counter() - t0 <= LIMIT + GRACE
    assert res.termination.value == "time_limit" and res.check is not None and res.check.feasible
    assert res.info["plan_from"] == res.info["incumbent"] and res.info["stopped"] == "placement_milp before its model ran out of time"
    assert res.solver_results == []  # no model, no solver
    assert res.bound is not None and res.bound <= res.objective


def test_past_the_deadline_no_phase_that_only_improves_starts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the heuristics' plan is in hand past the limit (and past their grace,
    `deadline.BASELINE_GRACE`), the waist and module bounds and the re-timing (0.15-0.4 s
    each on 12,000 ops) are not started, nor m-ETF after m-TOPO (the first, the cheapest);
    placement_search's re-timing neither."""
    from distplan.formulations.placement import search

    schedules: list[int] = []
    slow = _slowed(milp.list_schedule, LIMIT + 0.1)

    def counted(*args: Any, **kwargs: Any) -> Any:
        schedules.append(1)
        return slow(*args, **kwargs)

    monkeypatch.setattr(milp, "list_schedule", counted)
    for name in ("waist_bound", "module_bound", "polished"):
        monkeypatch.setattr(milp, name, lambda *a, _n=name, **k: pytest.fail(f"{_n} started past the deadline"))
    monkeypatch.setattr(search, "polished", lambda *a, **k: pytest.fail("placement_search re-timed past the deadline"))
    for formulation in ("placement_milp", "placement_search"):
        schedules.clear()
        res = distplan.solve("placement-small-1", formulation, time_limit=LIMIT)
        assert res.check is not None and res.check.feasible
        assert res.bound is not None and res.bound <= res.objective
        assert len(schedules) == 1, f"{formulation}: {len(schedules)} list schedules (m-ETF after m-TOPO past the deadline)"


def test_solver_free_bounds_stop_at_their_deadline() -> None:
    """The memory-driven path cuts (1 s on 12,000 ops) trace no path past the deadline;
    the linear-time bounds are always there."""
    from distplan.formulations.registry import solver_free_bounds
    from distplan.instances import load_instance

    inst = load_instance("gpt2-small-dgx1-4-tight")
    sources = lambda deadline: {b.source for b in solver_free_bounds(inst, deadline)}  # noqa: E731
    unlimited, past = sources(None), sources(time.perf_counter() - 1.0)
    assert "critical path without communication" in past and past < unlimited
    assert not any("cut" in s for s in past) and any("cut" in s for s in unlimited)


def test_a_run_that_used_its_whole_limit_still_gets_the_path_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The solver-free bounds get a small grace after the limit (`api.SOLVER_FREE_GRACE`):
    with none, a run that used its whole limit lost the memory-driven path cuts (review
    rev14 #3: gpt2-xl-infer-pcie-t4x4-tight at 2 s read feasible instead of optimal)."""
    monkeypatch.setattr(milp, "list_schedule", _slowed(milp.list_schedule, LIMIT + 0.1))
    res = distplan.solve("gpt2-small-dgx1-4-tight", "placement_milp", time_limit=LIMIT)
    assert res.termination.value == "time_limit"
    assert any("cuts on a path" in b.source for b in res.bounds), [b.source for b in res.bounds]


def test_a_build_that_runs_out_stops_and_returns_the_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reachability (n x n) of a large graph is where the build's time goes (llama3-8b:
    10,907 ops): it checks the deadline as it goes; slowed past the limit at its first
    checkpoint, it stops there and the pairs after it are not enumerated."""
    monkeypatch.setattr(milp, "transitive_closure", closure_late_until(milp.transitive_closure, time.perf_counter() + LIMIT + 0.05))
    monkeypatch.setattr(milp, "disjunctive_pairs", lambda *a, **k: pytest.fail("pairs enumerated past the deadline"))
    res = distplan.solve("placement-small-1", "placement_milp", time_limit=LIMIT)
    assert res.termination.value == "time_limit" and res.solver_results == []
    assert res.info["stopped"] == "placement_milp's reachability ran out of time"


def test_without_a_limit_the_milp_runs() -> None:
    res = distplan.solve("placement-small-1", "placement_milp", time_limit=30)
    assert res.status.value == "optimal" and "stopped" not in res.info and len(res.solver_results) == 1
