"""Solver-free bounds of an instance whose optimum is an integer are integers (review rev31
audit C): a pipeline of integral durations and delays has an integral optimal makespan, so
its bounds, once rounded down to be safe, are rounded up (`register_bounds(integral=...)`).
pipeline_milp proved mshape's 108 by a warm start meeting the bound, yet listed 107.9999996:
termination "optimal" beside status "feasible" at --mip-gap 0."""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pipeline_brute import brute_force_makespan

import distplan
from distplan.formulations.registry import solver_free_bounds
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline
from distplan.verify import check_result


def test_a_warm_start_that_meets_the_bound_is_optimal_at_a_gap_of_zero() -> None:
    inst = load_instance("pipeline-tessel-mshape")
    res = distplan.solve(inst, "pipeline_milp", mip_gap=0.0, time_limit=30)
    assert res.objective == 108.0 and res.bound == 108.0
    assert res.status.value == "optimal" and res.termination.value == "optimal"
    assert check_result(res.to_dict(), inst) == []


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    f=st.integers(1, 3),
    b=st.integers(1, 3),
    comm=st.sampled_from([0.0, 1.0, 0.5]),
    cap=st.sampled_from([1.0, 2.0, None]),
)
def test_integral_bounds_stay_below_the_brute_force_optimum(f: int, b: int, comm: float, cap: float | None) -> None:
    """(V shape, 2 stages, 2 micro-batches: what the brute force enumerates quickly)"""
    inst = make_pipeline("v", 2, 2, forward_time=float(f), backward_time=float(b), comm_delay=comm, memory_capacity=cap)
    truth = brute_force_makespan(inst)
    bounds = solver_free_bounds(inst)
    assert bounds and all(bd.value <= truth for bd in bounds)
    if comm != 0.5:  # integral data: integral bounds
        assert all(bd.value == math.floor(bd.value) for bd in bounds)


def test_non_integral_data_keeps_its_bounds_rounded_down_only() -> None:
    inst = make_pipeline("v", 2, 4, forward_time=1.5, backward_time=2.5)
    raw = [bd.value for bd in solver_free_bounds(inst)]
    assert any(v != math.floor(v) for v in raw)
    assert max(raw) <= distplan.solve(inst, "pipeline_milp", time_limit=30).objective
