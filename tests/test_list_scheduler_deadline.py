"""The list scheduler (m-ETF, m-TOPO, and the heuristics that start placement_milp and
placement_search) stops at a deadline: baechi_etf on a Llama-3 8B kernel graph (10,907
ops, 0.045 s) ran to its end whatever the limit. baechi_etf and baechi_topo get the
baselines' grace (`BASELINE_GRACE`) after a cold start; past it they end with no plan."""

from __future__ import annotations

import time

import pytest

import distplan
from distplan.errors import NoSolutionError
from distplan.formulations.deadline import BASELINE_GRACE, DeadlineReached
from distplan.formulations.placement import milp
from distplan.formulations.placement.listsched import DEADLINE_EVERY, list_schedule
from distplan.instances.zoo import make_placement
from distplan.models.placement_instance import PlacementInstance


@pytest.fixture(scope="module")
def llama() -> PlacementInstance:
    return PlacementInstance.from_dict(make_placement("llama3-8b", "h100-sxm", granularity="kernel"))


def test_list_schedule_stops_at_its_deadline(llama: PlacementInstance) -> None:
    assert llama.n_ops > 10 * (DEADLINE_EVERY + 1)
    with pytest.raises(DeadlineReached, match=r"the list scheduler ran out of time"):
        list_schedule(llama, deadline=time.perf_counter() - 1)
    t0 = time.perf_counter()
    full = list_schedule(llama)
    took = time.perf_counter() - t0
    with pytest.raises(DeadlineReached, match=r"the list scheduler \(\d+ of 10907 ops placed\) ran out of time"):
        list_schedule(llama, deadline=time.perf_counter() + took / 4)
    again = list_schedule(llama, deadline=time.perf_counter() + 60)
    assert again.makespan == full.makespan and (again.device == full.device).all()


@pytest.mark.parametrize("formulation", ["baechi_etf", "baechi_topo"])
def test_baselines_end_at_the_limit_after_their_grace(llama: PlacementInstance, formulation: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the grace shrunk below one list schedule, a limit that passed before the run
    ends it without a plan (exit 4), soon after the grace."""
    from distplan.formulations import deadline

    monkeypatch.setattr(deadline, "BASELINE_GRACE", 0.001)
    t0 = time.perf_counter()
    with pytest.raises(NoSolutionError, match=r"found no solution before the limit \(the list scheduler( \(\d+ of 10907 ops placed\))? ran out of time\)"):
        distplan.solve(llama, formulation, time_limit=0.01, started=t0 - 1.0)
    assert time.perf_counter() - t0 < 0.5


@pytest.mark.parametrize("formulation", ["baechi_etf", "baechi_topo"])
def test_the_grace_still_gives_a_plan(llama: PlacementInstance, formulation: str) -> None:
    """The grace covers a list schedule of this graph (0.045 s against 0.1 s); without a
    limit the plan is the same."""
    assert BASELINE_GRACE >= 0.1
    res = distplan.solve(llama, formulation, time_limit=0.01, started=time.perf_counter() - 1.0)
    assert res.objective == distplan.solve(llama, formulation).objective


def test_heuristics_stop_m_etf_once_a_plan_is_in_hand(llama: PlacementInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """placement_milp's start: after m-TOPO's plan, m-ETF stops at the deadline instead of
    running to its end."""
    from distplan.formulations import deadline

    monkeypatch.setattr(deadline, "BASELINE_GRACE", 0.0)
    monkeypatch.setattr(milp, "past", lambda _deadline: False)  # m-ETF starts, past the deadline
    seen: list[float | None] = []
    real = milp.list_schedule

    def spy(*args, **kwargs):
        seen.append(kwargs.get("deadline"))
        return real(*args, **kwargs)

    monkeypatch.setattr(milp, "list_schedule", spy)
    found = milp.heuristic_schedules(llama, None, deadline=time.perf_counter() - 1.0)
    assert [name for _, name in found] == ["m-TOPO"]
    assert seen[0] is None and seen[1] is not None, "m-TOPO runs to its end (no plan yet), m-ETF gets the deadline"
