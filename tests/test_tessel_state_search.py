"""Tessel's exact whole-schedule state search at small N (`tessel._whole_state_search`,
`statesearch`): what it proves is reported as the run's bound, and its pruning (a ready
operation that cannot be in anyone's way starts at once) reaches optima the state budget
missed before.

Known optimum: NN shape, 8 stages, N = 2, F 1 s, B 2 s, W 1 s, memory 2 (1F1B's peak):
37 s (pipeline_milp, time-indexed, proven); tessel's completions give 39 and the solver-free
bound is 35. The search from 39 needed ~35,000 states (tessel's budget: 20,000) before the
rule, 364 with it.

The runs ask for a long search time (``whole_search_time_limit``) so that the state budget,
not the machine's speed, decides whether the search finishes.
"""

from __future__ import annotations

import functools

import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.formulations.pipeline.repetend import DEFAULTS
from distplan.formulations.pipeline.statesearch import bound_is_exact, prove_makespan, search_makespan
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelineInstance, evaluate

MILP_BACKENDS = backend_params(takes_milp)
LONG = {"whole_search_time_limit": 60.0}  # the state budget (20,000) binds, not the clock


def nn8x2() -> PipelineInstance:
    """NN shape, 8 stages, N = 2, B/W split, memory 2 = 1F1B's peak: optimum 37 s."""
    return make_pipeline("nn", 8, 2, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=2.0)


def test_nn8_one_f_one_b_memory_is_solved_and_proven() -> None:
    inst = nn8x2()
    res = distplan.solve(inst, formulation="tessel", **LONG)
    assert evaluate(inst, res.plan).feasible
    assert res.objective == pytest.approx(37.0)
    assert res.bound == pytest.approx(37.0) and res.bound_grade == "safe"
    assert res.bound_source is not None and "state search" in res.bound_source
    assert res.status.value == "optimal"
    assert res.plan.info["whole_search"]["complete"]


def test_nn8_search_within_tessels_state_budget() -> None:
    """From any incumbent up to 1F1B's 48 s the search finds and proves 37 well within
    tessel's default budget of states (it needed ~35,000 from 39 without the rule)."""
    inst = nn8x2()
    for incumbent in (39.0, 48.0):
        plan, out = prove_makespan(inst, incumbent, max_states=int(DEFAULTS["whole_search_states"]))
        assert out.complete and out.value == pytest.approx(37.0) and out.bound == pytest.approx(37.0)
        assert plan is not None and evaluate(inst, plan).objective == pytest.approx(37.0)
    # nothing below 37: the search from 37 itself ends without a schedule
    plan, out = prove_makespan(inst, 37.0)
    assert plan is None and out.complete and out.value is None and out.bound == pytest.approx(37.0)


@pytest.mark.parametrize("states", [1, 10, 60, 100])
def test_stopped_search_bound_stays_below_the_optimum(states: int) -> None:
    """(The best-first search finishes within ~130 states: budgets below that stop it.)"""
    _, out = prove_makespan(nn8x2(), 48.0, max_states=states)
    assert not out.complete and out.bound <= 37.0 + 1e-9


def test_stopped_tessel_search_reports_a_bound_below_the_optimum() -> None:
    """Stopped by its state budget, the search's open-layer bound is reported (if above
    the solver-free one) and stays below the optimum."""
    inst = nn8x2()
    res = distplan.solve(inst, formulation="tessel", whole_search_states=60, **LONG)
    assert not res.plan.info["whole_search"]["complete"]
    assert res.bound is not None and res.bound <= 37.0 + 1e-9 <= res.objective + 1e-9


def test_search_bound_needs_exact_durations() -> None:
    """Durations within 1e-12 of integers are searched (rounded) but prove no bound."""
    inst = make_pipeline("v", 2, 2, forward_time=1.0, backward_time=2.0)
    assert bound_is_exact(inst)
    near = make_pipeline("v", 2, 2, forward_time=1.0 + 1e-13, backward_time=2.0)
    assert not bound_is_exact(near)


def _one_f_one_b_memory(shape: str, stages: int, n: int) -> PipelineInstance:
    inst = make_pipeline(shape, stages, n, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    plan = distplan.solve(inst, formulation="1f1b").plan
    peak = max(d["peak_memory"] for d in evaluate(inst, plan).details["devices"].values())
    return inst.with_(memory_capacity=float(peak))


#: small instances whose state search finishes within tessel's budget from any incumbent
#: up to 3x the optimum (so the status does not depend on which repetend a loaded machine
#: finds), and one (x) where it may not
DIFFERENTIAL = [("v", True), ("k", True), ("x", False)]


@functools.cache
def _tessel(shape: str) -> distplan.Result:
    return distplan.solve(_one_f_one_b_memory(shape, 4, 2), formulation="tessel", **LONG)


@pytest.mark.parametrize("backend", MILP_BACKENDS)
@pytest.mark.parametrize(("shape", "proven"), DIFFERENTIAL, ids=[s for s, _ in DIFFERENTIAL])
def test_tessel_bound_against_pipeline_milp(backend: str, shape: str, proven: bool) -> None:
    """4 stages, N = 2, B/W split, 1F1B's memory: tessel's bound never exceeds what
    pipeline_milp finds, its plan is never below what pipeline_milp proves (the
    time-indexed model, warm-started from the classic schedules: no state search and no
    tessel in it), whatever either's time limit cut short."""
    inst = _one_f_one_b_memory(shape, 4, 2)
    res = _tessel(shape)
    milp = distplan.solve(inst, formulation="pipeline_milp", backend=backend, model="time_indexed", warm_start="baselines", time_limit=20)
    assert res.bound is not None and milp.bound is not None
    assert res.bound <= milp.objective + 1e-9
    assert res.objective >= milp.bound - 1e-9
    if proven:  # the search proved tessel's plan optimal
        assert res.status.value == "optimal" and res.bound == pytest.approx(res.objective)
        assert res.bound_source is not None and "state search" in res.bound_source
        if milp.status.value == "optimal":
            assert res.objective == pytest.approx(milp.objective)


@pytest.mark.parametrize("shape", ["v", "k", "x", "m", "nn"])
def test_search_value_matches_the_time_indexed_optimum(shape: str) -> None:
    """The search's optimum (within the MILP's value) equals the time-indexed MILP's proven
    optimum on 4 stages, N = 2, B/W split, 1F1B's memory (where the rule starts W passes
    and barriers at once)."""
    inst = _one_f_one_b_memory(shape, 4, 2)
    milp = distplan.solve(inst, formulation="pipeline_milp", model="time_indexed", warm_start="baselines", time_limit=20)
    out = search_makespan(inst, int(milp.objective), max_states=200_000)
    assert out.complete and out.value is not None
    if milp.status.value == "optimal":
        assert out.value == pytest.approx(milp.objective)
    assert milp.bound - 1e-9 <= out.value <= milp.objective + 1e-9


def test_two_micro_batches_are_searched_whatever_the_repetends_span() -> None:
    """V shape, 4 stages, N = 2, F 1 s, B 3 s, memory one below 1F1B's peak: the repetend
    is as long as one micro-batch's schedule (N = 2 is two flat lengths), and the search
    proves its unroll (32 s, pipeline_milp's optimum) in a few states; before, the run
    stopped at the solver-free bound (20 s)."""
    inst = make_pipeline("v", 4, 2, forward_time=1.0, backward_time=3.0)
    plan = distplan.solve(inst, formulation="1f1b").plan
    peak = max(d["peak_memory"] for d in evaluate(inst, plan).details["devices"].values())
    inst = inst.with_(memory_capacity=float(peak) - 1.0)
    res = distplan.solve(inst, formulation="tessel", **LONG)
    assert res.objective == pytest.approx(32.0)
    assert res.status.value == "optimal" and res.bound == pytest.approx(32.0)
    assert res.plan.info["whole_search"]["complete"]


def test_the_states_reached_are_capped_with_the_budget() -> None:
    """The reached-but-pruned states (remembered, not bounded again) count against the
    budget at `SEEN_PER_STATE` per kept state, so memory stays capped (review rev15:
    uncapped, 6.7 to 47 reached per kept state); a search stopped there keeps a valid bound."""
    from distplan.formulations.pipeline.statesearch import SEEN_PER_STATE

    inst = make_pipeline("x", 8, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    out = search_makespan(inst, 33, max_states=1000)
    assert not out.complete and out.states < 1000  # stopped by the states reached
    assert SEEN_PER_STATE * 1000 < int(out.info["reached"]) <= SEEN_PER_STATE * 1000 + 1000
    assert out.bound <= 33.0  # (33 is this target's optimum: the search with room proves it)
    assert search_makespan(inst, 33, max_states=20_000).complete
