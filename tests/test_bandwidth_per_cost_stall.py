"""libra_perf_per_cost stops when its bound stops rising: on the 4-D "multi" LIBRA
instances the interval search sat at a gap of 1.47e-6 (above its ``tolerance`` 1e-6,
within the run's gap tolerance 1e-4) from about 20 evaluations to ``max_points`` (400,
and 4,000 when raised). It now stops after ``stall_points`` evaluations that raised the
bound by less than tolerance / 10 of the best plan: "finished", ``info["stopped"]``
"stalled", the same plan and a bound as strong."""

from __future__ import annotations

import warnings

import pytest

import distplan
from distplan.instances import load_instance
from distplan.solvers.result import Termination
from distplan.verify import check_result


@pytest.fixture(scope="module")
def dlrm() -> object:
    return load_instance("libra-dlrm-4d-multi")


def test_a_stalled_search_stops_with_the_same_plan_and_bound(dlrm: object) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stalled = distplan.solve(dlrm, "libra_perf_per_cost")
        full = distplan.solve(dlrm, "libra_perf_per_cost", stall_points=0, max_points=150)
    assert stalled.info["stopped"] == "stalled" and stalled.termination is Termination.FINISHED
    assert stalled.info["evaluations"] < 100 <= full.info["evaluations"]
    assert full.info["stopped"] == "max_points" and full.termination is Termination.ITERATION_LIMIT
    assert stalled.status.value == "optimal" and stalled.gap is not None and stalled.gap <= stalled.gap_tolerance
    assert stalled.objective == pytest.approx(full.objective, rel=1e-9)
    assert stalled.bound is not None and full.bound is not None and stalled.bound >= full.bound * (1 - 1e-9)
    for r in (stalled, full):
        assert r.bound is not None and r.objective is not None and r.bound <= r.objective
        assert check_result(r.to_dict(), dlrm) == []


def test_a_search_that_closes_its_gap_is_not_called_stalled() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = distplan.solve("libra-dlrm-4d-total500", "libra_perf_per_cost")
    assert r.termination is Termination.OPTIMAL and "stopped" not in r.info
