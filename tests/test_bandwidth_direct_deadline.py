"""libra's direct Clarabel calls keep the run's time limit call by call
(`conic.DirectSolver.solve_in_run`).

* A solver reused for another budget is given that call's limit (the run's time left),
  not the first call's: Clarabel's own settings are read back after each call and must
  equal the limit its record states.
* A call made after the run's deadline does not start Clarabel; it is recorded "not
  started" (`RunContext.not_started`), as the run's backend calls are, and the result
  still verifies.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import distplan
from distplan.formulations.bandwidth import conic
from distplan.instances import load_instance
from distplan.verify import check_result

INSTANCE = "libra-gpt3-3d-total500"


def _spy(monkeypatch: pytest.MonkeyPatch, after: Any = None) -> list[float]:
    """Wrap `DirectSolver.solve`: the time limit Clarabel held after each call (seconds),
    ``after(calls so far)`` run after each."""
    seen: list[float] = []
    solve = conic.DirectSolver.solve

    def spied(self: conic.DirectSolver, *args: Any, **kwargs: Any) -> conic.Solved:
        got = solve(self, *args, **kwargs)
        assert self.solver is not None
        seen.append(float(self.solver.get_settings().time_limit))
        if after is not None:
            after(len(seen))
        return got

    monkeypatch.setattr(conic.DirectSolver, "solve", spied)
    return seen


def test_a_reused_direct_solver_gets_each_calls_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _spy(monkeypatch)
    doc = distplan.solve(INSTANCE, "libra_perf_per_cost", time_limit=60).to_dict()
    recorded = [c["options"]["time_limit"] for c in doc["solver_results"] if c["backend"] == "clarabel-direct"]
    assert len(seen) == len(recorded) > 2  # (the budget grid reuses one solver)
    assert seen == recorded
    assert recorded == sorted(recorded, reverse=True) and recorded[-1] < recorded[0]


def test_calls_past_the_deadline_are_not_started(monkeypatch: pytest.MonkeyPatch) -> None:
    limit, stall = 1.0, 1.2

    def stall_third(calls: int) -> None:
        if calls == 3:
            time.sleep(stall)  # (the run's deadline passes inside its third call)

    seen = _spy(monkeypatch, stall_third)
    t0 = time.perf_counter()
    res = distplan.solve(INSTANCE, "libra_perf_per_cost", time_limit=limit)
    wall = time.perf_counter() - t0
    doc = res.to_dict()
    calls = [c for c in doc["solver_results"] if c["backend"] == "clarabel-direct"]
    assert len(seen) == 3  # Clarabel ran three times, never after the deadline
    late = calls[3:]
    assert late, "the budget grid had more budgets to solve"
    for call in late:
        assert call["raw_status"] == "not started" and call["termination"] == "time_limit" and call["status"] == "none"
        assert call["backend_version"] == calls[0]["backend_version"] and call["options"]["time_limit"] == limit
    assert all(c["raw_status"] != "not started" for c in calls[:3])
    assert res.termination.value == "time_limit" and wall < limit + stall + 1.0
    assert check_result(doc, load_instance(INSTANCE), require_version=True) == []
