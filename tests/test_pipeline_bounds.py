"""Pipeline lower bounds: the barrier contraction bound (valid against exact optima of
small instances, tight on Tessel's M shape) and the stacked-barrier schedule that meets it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.pipeline.barriers import barrier_blocks, contract, head_tail, stacked_plan
from distplan.formulations.pipeline.baselines import best_baseline
from distplan.formulations.pipeline.bounds import pipeline_bounds
from distplan.formulations.pipeline.opmodel import full_problem, serial_horizon
from distplan.formulations.pipeline.opsolve import solve_op_problem
from distplan.formulations.registry import RunContext
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.models.pipeline import PipelineInstance, evaluate
from distplan.solvers.base import SolveOptions, get_backend


def _middle(sub: PipelineInstance):
    found = best_baseline(sub)
    return None if found is None else found[1]


def _exact(inst: PipelineInstance) -> float | None:
    """The optimum makespan (seconds) by the time-indexed model alone (no solver-free bound
    takes part); None when no schedule fits in memory."""
    prob = full_problem(inst, serial_horizon(inst))
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=30, mip_gap=1e-9))
    try:
        start, res, _ = solve_op_problem(prob, ctx, None, "time_indexed")
    except InfeasibleError:
        return None
    if res.termination.value == "infeasible":
        return None
    assert res.termination.value == "optimal" and start is not None
    s = start.reshape(inst.n_blocks, inst.micro_batches)
    return float((s + inst.duration[:, None]).max() - s.min())


def _barrier_bound(inst: PipelineInstance) -> float:
    return max(b.value for b in pipeline_bounds(inst) if b.source.startswith("barriers"))


def test_contraction_links_through_barriers() -> None:
    inst = tessel_case("nn", 4, 4)
    bar = barrier_blocks(inst)
    assert [inst.blocks[i].name for i in np.flatnonzero(bar)] == ["S1F", "S2F", "S2B", "S1B"]
    head, tail = head_tail(inst)
    assert head.sum() == 1 and tail.sum() == 1  # S2F and S2B sit in the middle
    sub = contract(inst, bar, zero_delays=True)
    assert sub is not None and sub.n_blocks == inst.n_blocks - 4
    deps = {b.name: b.deps for b in sub.blocks}
    assert deps["F2"] == ("F1",) and deps["B1"] == ("B2",) and deps["F0"] == ()
    # no barrier: no contraction bound
    assert not any(b.source.startswith("barriers") for b in pipeline_bounds(make_pipeline("v", 4, 8)))


def test_mshape_bound_is_met() -> None:
    """Tessel's M shape, memory 4, N = 16: the barriers (32 s) plus 1F1B of the rest
    (76 s) is optimal; the bound proves it, so a bound above 108 would be invalid."""
    inst = load_instance("pipeline-tessel-mshape")
    assert _barrier_bound(inst) == pytest.approx(108.0)
    plan = stacked_plan(inst, _middle)
    assert plan is not None
    chk = evaluate(inst, plan)
    assert chk.feasible and chk.objective == pytest.approx(108.0)
    res = distplan.solve(inst, formulation="pipeline_milp", warm_start="baselines", time_limit=20)
    assert res.status.value == "optimal" and res.objective == pytest.approx(108.0)
    assert res.bound is not None and res.bound <= res.objective


def test_bound_equals_exact_optimum_small_mshape() -> None:
    inst = tessel_case("m", 2, 3, stages=2)
    truth = _exact(inst)
    assert truth is not None and _barrier_bound(inst) == pytest.approx(truth)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["m", "nn", "k"]),
    n=st.integers(2, 3),
    f=st.integers(1, 2),
    b=st.integers(1, 3),
    shard=st.integers(1, 2),
    cap=st.sampled_from([1.0, 2.0, None]),
    comm=st.sampled_from([0.0, 1.0]),
)
def test_bounds_below_exact_optimum(shape: str, n: int, f: int, b: int, shard: int, cap: float | None, comm: float) -> None:
    inst = make_pipeline(shape, 2, n, forward_time=float(f), backward_time=float(b), shard_time=float(shard), memory_capacity=cap, comm_delay=comm)
    truth = _exact(inst)
    assume(truth is not None)
    assert truth is not None
    for bound in pipeline_bounds(inst):
        assert bound.value <= truth + 1e-9, bound.source
    plan = stacked_plan(inst, _middle)
    if plan is not None:
        assert evaluate(inst, plan).objective >= truth - 1e-9
