"""Bandwidth numbers at the ends of their ranges (LIBRA instances): a max_bandwidth that
cannot bind must not change the optimum, and the step menus of libra_discrete are counted
before they are made (a max_bandwidth of 1e300 B/s was a ValueError, exit 1)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from distplan import solve
from distplan.errors import InputError
from distplan.formulations.bandwidth.data import implied_upper_bounds, prepare
from distplan.instances import load_document
from distplan.models.bandwidth import BandwidthInstance
from distplan.models.common import instance_from_dict
from tests.conftest import backend_params, skip_unless_available, takes_convex, takes_lp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

BASE = "libra-dlrm-3d-total500"  # sum of the three bandwidths == 500 GB/s


def _with_max(max_bandwidth: float) -> BandwidthInstance:
    doc: dict[str, Any] = copy.deepcopy(dict(load_document(BASE)))
    doc["network"]["dimensions"][0]["max_bandwidth"] = max_bandwidth
    inst = instance_from_dict(doc)
    assert isinstance(inst, BandwidthInstance)
    return inst


def _optimum(formulation: str, backend: str) -> float:
    return float(solve(BASE, formulation, backend).objective)


@pytest.mark.parametrize("max_bandwidth", [1e15, 1e18])
@pytest.mark.parametrize("backend", backend_params(takes_convex))
def test_libra_perf_ignores_a_max_bandwidth_that_cannot_bind(backend: str, max_bandwidth: float) -> None:
    """Clarabel, scaled by the 1e9 GB/s bound, returned the best baseline (5% slower than
    the optimum, status feasible)."""
    r = solve(_with_max(max_bandwidth), "libra_perf", backend)
    assert r.status.value == "optimal"
    assert r.objective == pytest.approx(_optimum("libra_perf", backend), rel=1e-6)


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_libra_perf_lp_ignores_a_max_bandwidth_that_cannot_bind(backend: str) -> None:
    r = solve(_with_max(1e18), "libra_perf_lp", backend)
    assert r.status.value == "optimal"
    assert r.objective == pytest.approx(_optimum("libra_perf_lp", backend), rel=1e-6)


def test_implied_upper_bounds_come_from_the_nonnegative_rows() -> None:
    prog = prepare(_with_max(1e18))
    assert implied_upper_bounds(prog) == pytest.approx([500.0, 500.0, 500.0])
    assert prog.ub[0] == 1e9  # the instance's bound itself is kept (messages name it)


def test_a_step_menu_too_long_is_refused_before_it_is_made() -> None:
    with pytest.raises(InputError, match=r"params.step: 80000000 options of 12.5 GB/s for dimension dim1"):
        solve(_with_max(1e18), "libra_discrete")


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_libra_perf_lp_stops_when_no_bound_moves(backend: str) -> None:
    """With OSQP (no dual bound) the cuts never closed the LP gap: all 500 rounds ran
    (235 s). They stop once neither bound moves; the safe bound still proves the plan."""
    r = solve(BASE, "libra_perf_lp", backend, max_rounds=60)
    assert r.info["rounds"] < 60
    assert r.status.value == "optimal" and r.bound is not None and r.bound <= r.objective


def test_an_idle_dimension_whose_floor_is_on_the_grid_counts_it_once() -> None:
    """dim4 carries no traffic, min_bandwidth 25 GB/s (two steps), max 50 GB/s: its menu is
    25, 37.5, 50 GB/s, three options. The count before the menu added the floor again
    (review rev14 #4: '4 options ... more than max_options 3', an InputError)."""
    doc: dict[str, Any] = copy.deepcopy(dict(load_document("libra-tnlg-4d-total500")))
    for layer in doc["workload"]["layers"]:
        for coll in layer["collectives"]:
            coll["npus"][3] = 1
    for k, dim in enumerate(doc["network"]["dimensions"]):
        dim["min_bandwidth"], dim["max_bandwidth"] = (25e9, 50e9) if k == 3 else (0.0, 25e9)
    doc["constraints"]["total_bandwidth"] = {"sense": "<=", "value": 1000e9}
    r = solve(instance_from_dict(doc), "libra_discrete", max_options=3)
    assert r.status.value == "optimal" and r.plan.bandwidth["dim4"] == 25e9
    with pytest.raises(InputError, match="3 options of 12.5 GB/s for dimension dim4"):
        solve(instance_from_dict(doc), "libra_discrete", max_options=2)


@pytest.mark.parametrize("backend", [pytest.param("cvxpy-OSQP", marks=skip_unless_available("cvxpy-OSQP"))])
def test_a_stall_with_an_open_safe_gap_goes_on(backend: str) -> None:
    """libra-msft1t-3d-total500 on OSQP: the bounds stop moving after 20 rounds with the
    safe gap still 1.3% open (review rev14 #5, status feasible); the cuts go on until the
    safe bound closes the gap (~50 rounds). Its LPs stop at OSQP's max_iter: they say so,
    and the run, stopped by its own test well within its limit, is not "time_limit"
    (tests/test_bandwidth_osqp_termination.py's case for OSQP on this instance)."""
    from distplan.solvers.result import LIMIT_TERMINATIONS, Termination
    from distplan.verify import check_solver_calls

    r = solve("libra-msft1t-3d-total500", "libra_perf_lp", backend, max_rounds=200, time_limit=600)
    assert r.info["rounds"] < 200
    assert r.status.value == "optimal" and r.gap is not None and r.gap <= r.gap_tolerance
    assert r.info["stopped"] == "closed" and r.termination not in LIMIT_TERMINATIONS
    assert all(c.termination is not Termination.TIME_LIMIT for c in r.solver_results)
    hit = [c for c in r.solver_results if c.raw_status == "maximum iterations reached"]
    assert hit and all(c.termination is Termination.ITERATION_LIMIT for c in hit)
    assert check_solver_calls(r.to_dict()) == []
