"""Pipeline lower bounds: the barrier contraction bound (valid against exact optima of
small instances, tight on Tessel's M shape), the stacked-barrier schedule that meets it,
and the exact state search (against brute force and the time-indexed MILP; Tessel's NN
shape, memory 4, N = 16: 153, the value Tessel's paper reports)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from pipeline_brute import brute_force_makespan

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.pipeline.barriers import barrier_blocks, contract, head_tail, stacking
from distplan.formulations.pipeline.baselines import best_baseline
from distplan.formulations.pipeline.bounds import pipeline_bounds
from distplan.formulations.pipeline.common import orders_from_starts
from distplan.formulations.pipeline.milp import stacked_baseline
from distplan.formulations.pipeline.opmodel import full_problem, serial_horizon
from distplan.formulations.pipeline.opsolve import solve_op_problem
from distplan.formulations.pipeline.statesearch import applicable, prove_makespan, search_makespan
from distplan.formulations.registry import RunContext
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.models.pipeline import PipelineInstance, evaluate, make_plan
from distplan.solvers.base import SolveOptions, get_backend


def _exact(inst: PipelineInstance) -> float | None:
    """The optimum makespan (seconds) by the time-indexed model alone (no solver-free bound
    takes part); None when no schedule fits in memory."""
    prob = full_problem(inst, serial_horizon(inst))
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=120, mip_gap=1e-9))
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
    plan = stacked_baseline(inst)
    assert plan is not None
    chk = evaluate(inst, plan)
    assert chk.feasible and chk.objective == pytest.approx(108.0)
    res = distplan.solve(inst, formulation="pipeline_milp", warm_start="baselines", time_limit=20)
    assert res.status.value == "optimal" and res.objective == pytest.approx(108.0)
    assert res.bound is not None and res.bound <= res.objective


@pytest.mark.parametrize("shape", ["m", "nn"])
def test_stacked_barriers_run_alone_first_and_last(shape: str) -> None:
    """The stacked schedule (`gather_ends` around the best baseline of the rest): every
    head barrier operation ends before any other starts, every tail one starts after all
    the others end, and the rest keeps the device orders of its own schedule."""
    inst = tessel_case(shape, 4, 6)
    stack = stacking(inst)
    plan = stacked_baseline(inst)
    assert stack is not None and stack.rest is not None and plan is not None
    assert stack.head.any() and stack.tail.any()
    s = np.asarray(plan.start)
    e = s + inst.duration[:, None]
    rest = ~stack.ends
    assert e[stack.head].max() <= s[rest].min() + 1e-9
    assert s[stack.tail].min() >= e[rest].max() - 1e-9
    middle = best_baseline(stack.rest)
    assert middle is not None
    n = inst.micro_batches
    kept = np.flatnonzero(rest)
    full_orders = orders_from_starts(inst, s)
    for d, seq in enumerate(orders_from_starts(stack.rest, np.asarray(middle[1].start))):
        mapped = [int(kept[op // n]) * n + op % n for op in seq]
        assert [op for op in full_orders[d] if rest[op // n]] == mapped
    assert evaluate(inst, plan).feasible


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
    plan = stacked_baseline(inst)
    if plan is not None:
        assert evaluate(inst, plan).objective >= truth - 1e-9


# -- exact state search -------------------------------------------------------------------------


def _search_value(inst: PipelineInstance) -> float:
    out = search_makespan(inst, 10_000)
    assert out.complete and out.value is not None and out.start is not None
    chk = evaluate(inst, make_plan(inst, out.start))
    assert chk.feasible and chk.objective == pytest.approx(out.value)
    return out.value


@pytest.mark.parametrize("cap", [1.0, 2.0, None])
def test_search_matches_brute_force(cap: float | None) -> None:
    inst = make_pipeline("v", 2, 2, forward_time=1.0, backward_time=2.0, memory_capacity=cap)
    assert _search_value(inst) == pytest.approx(brute_force_makespan(inst))


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["m", "nn", "k", "x", "v"]),
    n=st.integers(2, 3),
    f=st.integers(1, 2),
    b=st.integers(1, 3),
    cap=st.sampled_from([1.0, 2.0, 3.0, None]),
)
def test_search_matches_time_indexed_milp(shape: str, n: int, f: int, b: int, cap: float | None) -> None:
    inst = make_pipeline(shape, 2, n, forward_time=float(f), backward_time=float(b), memory_capacity=cap)
    truth = _exact(inst)
    assume(truth is not None)
    assert applicable(inst)
    assert _search_value(inst) == pytest.approx(truth)
    # stopped early, the open layer's bound stays below the optimum
    for states in (5, 40):
        out = search_makespan(inst, 10_000, max_states=states)
        assert out.bound <= truth + 1e-9


def test_search_of_barriers_only_gives_their_time_as_bound() -> None:
    """One device, inference: every block is a zero-memory barrier, nothing is left to
    search; the barriers' time (N x durations) is still a valid bound."""
    inst = make_pipeline("v", 1, 4, mode="inference")
    plan, out = prove_makespan(inst, 100.0)
    assert plan is None and not out.complete and out.bound == pytest.approx(4.0)
    res = distplan.solve(inst, "pipeline_milp", time_limit=10)
    assert res.status.value == "optimal" and res.bound == pytest.approx(res.objective) == pytest.approx(4.0)


def test_nnshape_optimum_proven() -> None:
    """Tessel's NN shape, memory 4, N = 16: 153 exists (Tessel's 154 is not optimal) and,
    the layers being searched in time order, nothing below it does."""
    inst = load_instance("pipeline-tessel-nnshape")
    plan, out = prove_makespan(inst, 154.0)
    assert out.complete and out.value == pytest.approx(153.0) and out.bound == pytest.approx(153.0)
    assert plan is not None and evaluate(inst, plan).objective == pytest.approx(153.0)
    late, stopped = prove_makespan(inst, 153.0, deadline=time.perf_counter() - 1.0)
    assert late is None and not stopped.complete and stopped.bound <= 153.0


def test_xshape_optimum_proven() -> None:
    """Tessel's X shape, memory 4, N = 16: the device-load bound is 132; no schedule is
    shorter than 134 (Tessel's makespan; the search's dynamic heads and tails prune all
    but a few thousand states)."""
    inst = load_instance("pipeline-tessel-xshape")
    assert max(b.value for b in pipeline_bounds(inst)) == pytest.approx(132.0)
    plan, out = prove_makespan(inst, 134.0)
    assert plan is None and out.complete and out.value is None and out.bound == pytest.approx(134.0)
    assert out.states < 50_000


def test_search_needs_integral_undelayed_makespan() -> None:
    assert not applicable(make_pipeline("v", 2, 2, comm_delay=1.0))
    assert not applicable(make_pipeline("v", 2, 2, forward_time=0.5))
    with pytest.raises(ValueError):
        search_makespan(make_pipeline("v", 2, 2, objective="device_span"), 100)
