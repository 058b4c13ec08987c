"""The Baechi heuristics that start placement_milp and placement_search get at least
`deadline.BASELINE_GRACE` (0.1 s) when the run's limit passed before them (a fresh
``distplan solve`` counts its own loading). Before, the deadline stopped them once m-ETF
had a plan, and both returned m-ETF's where the baseline ``baechi_topo`` is better:
resnet-50 on one H100 SXM node, 5.0584 ms against m-TOPO's 5.0356 ms; a Llama-3 70B
inference graph (13,188 ops, 2 H100 nodes) at a 0.05 s limit, 3.6168 s against 2.8123 s."""

from __future__ import annotations

import time

import pytest

import distplan
from distplan.formulations.deadline import BASELINE_GRACE
from distplan.formulations.placement import milp
from distplan.instances.zoo import make_placement
from distplan.models.placement_instance import PlacementInstance
from distplan.verify import check_result


@pytest.fixture(scope="module")
def resnet_h100() -> PlacementInstance:
    """201 ops on 8 H100s: m-TOPO's plan (5.0356 ms) beats m-ETF's (5.0584 ms)."""
    return PlacementInstance.from_dict(make_placement("resnet-50", "h100-sxm"))


@pytest.mark.parametrize("formulation", ["placement_milp", "placement_search"])
def test_limit_passed_still_never_loses_to_a_heuristic(resnet_h100: PlacementInstance, formulation: str) -> None:
    baselines = {name: distplan.solve(resnet_h100, name).objective for name in ("baechi_etf", "baechi_topo")}
    assert baselines["baechi_topo"] < baselines["baechi_etf"]  # (the case this test is about)
    res = distplan.solve(resnet_h100, formulation, time_limit=0.05, started=time.perf_counter() - 1.0)
    assert res.objective <= min(baselines.values())
    assert check_result(res.to_dict(), resnet_h100, require_version=True) == []
    if formulation == "placement_milp":
        assert res.info["incumbent"] == "m-TOPO"


def test_the_grace_is_bounded(resnet_h100: PlacementInstance, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the deadline the heuristics stop once a plan is in hand and the grace is over:
    with each list schedule taking longer than the grace, m-ETF is not started after m-TOPO
    (the cheapest, first)."""
    real = milp.list_schedule
    took = BASELINE_GRACE + 0.2

    def slow(*args, **kwargs):
        time.sleep(took)
        return real(*args, **kwargs)

    monkeypatch.setattr(milp, "list_schedule", slow)
    t0 = time.perf_counter()
    found = milp.heuristic_schedules(resnet_h100, None, deadline=t0 - 1.0)
    assert [name for _, name in found] == ["m-TOPO"]
    assert time.perf_counter() - t0 < took + BASELINE_GRACE + 0.2


def test_the_grace_lets_every_quick_heuristic_run(resnet_h100: PlacementInstance) -> None:
    found = milp.heuristic_schedules(resnet_h100, None, deadline=time.perf_counter() - 1.0)
    assert {name for _, name in found} == {"m-ETF", "m-TOPO", "single device"}
