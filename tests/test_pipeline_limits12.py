"""Time limits and parameter ranges of the pipeline formulations (review rev12 D3-D5).

D3: a time-limited tessel run whose repetend search stops on the limit returned
InfeasibleError (exit 3) on a feasible instance and overran its limit (unfold = 50 at 2 s:
12.4 s); it now returns its best plan (a classic schedule computed first) or, with none,
NoSolutionError. D4: large N (micro-batches) ran far past the limit (pipeline_milp at
N = 4096: 12.6 s and 1.7 GB at a 3 s limit). D5: tessel's numeric parameters were not
range-checked.
"""

from __future__ import annotations

import time

import numpy as np
import pytest
from conftest import assert_named_error, cli_run

import distplan
from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.pipeline import baselines
from distplan.formulations.pipeline.common import OpArcs
from distplan.formulations.pipeline.opmodel import CLOSURE_MAX_OPS, ClosureTooLarge, closure, full_problem, serial_horizon
from distplan.formulations.pipeline.timeindexed import _backward
from distplan.formulations.registry import get_formulation
from distplan.instances.pipelines import make_pipeline
from distplan.solvers.result import Termination


def _v2x3():
    """The reviewer's v2x3.json: V placement, 2 devices, 3 micro-batches, memory 2."""
    return make_pipeline("v", 2, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0).with_(memory_capacity=2.0)


# -- D3 -----------------------------------------------------------------------------------


def test_limited_tessel_returns_a_plan_not_infeasibility():
    """unfold = 10 at 1 s: the repetend MILP stops on the limit. Was InfeasibleError ("the
    repetend search found no solution (time_limit)") on a feasible instance; now the best
    plan, never worse than zb_h1 (14)."""
    inst = _v2x3()
    zb = distplan.solve(inst, formulation="zb_h1").objective
    t0 = time.perf_counter()
    res = distplan.solve(inst, formulation="tessel", time_limit=1.0, unfold=10)
    assert time.perf_counter() - t0 < 1.0 + 2.0
    assert res.objective <= zb + 1e-9
    assert res.termination is Termination.TIME_LIMIT


def test_limited_tessel_stops_near_its_limit():
    """unfold = 50: the modulo heuristic and the repetend model's triples (300 cyclic blocks)
    did not check the deadline (12 s at a 2 s limit, then InfeasibleError)."""
    t0 = time.perf_counter()
    res = distplan.solve(_v2x3(), formulation="tessel", time_limit=0.5, unfold=50)
    assert time.perf_counter() - t0 < 0.5 + 2.0
    assert res.plan is not None and res.termination is Termination.TIME_LIMIT


def test_limited_tessel_without_a_plan_is_no_solution():
    """Without the classic schedules' fallback a run stopped by its limit has no plan: that
    is NoSolutionError (exit 4), not InfeasibleError: nothing was proven."""
    with pytest.raises(NoSolutionError):
        try:
            distplan.solve(_v2x3(), formulation="tessel", time_limit=0.3, unfold=50, baselines=False)
        except InfeasibleError as exc:  # the defect
            pytest.fail(f"infeasibility claimed without a proof: {exc}")


# -- D4 -----------------------------------------------------------------------------------


def test_closure_refused_beyond_its_size():
    """The (n, n) closure of 98k operations (N = 4096) took 1.7 GB before its deadline
    stopped it: above `CLOSURE_MAX_OPS` it is refused at once, before any allocation."""
    n = CLOSURE_MAX_OPS + 1
    arcs = OpArcs(np.arange(n - 1), np.arange(1, n), np.ones(n - 1))
    with pytest.raises(ClosureTooLarge, match="not built"):
        closure(n, arcs)
    assert isinstance(ClosureTooLarge("x"), DeadlineReached)  # callers keep their incumbent


def test_pipeline_milp_large_n_returns_its_warm_start_in_time():
    """nn on 8 devices, N = 2048 (49k operations) at 1.5 s: was NoSolutionError after
    5.5 s (the time-indexed sizing and the closure ran past the limit); now the baseline
    warm start, time-limited, within the limit's tolerance."""
    inst = make_pipeline("nn", 8, 2048, forward_time=2.0, backward_time=3.0, weight_time=1.0)
    t0 = time.perf_counter()
    res = distplan.solve(inst, formulation="pipeline_milp", time_limit=1.5)
    assert time.perf_counter() - t0 < 1.5 + 2.0
    assert res.plan is not None and res.termination is Termination.TIME_LIMIT


def test_backward_pass_equals_the_fixpoint():
    """The latest starts by one reverse-topological pass equal the old relaxation's fixpoint."""
    inst = make_pipeline("nn", 4, 6, forward_time=2.0, backward_time=3.0, weight_time=1.0, comm_delay=0.5)
    prob = full_problem(inst, serial_horizon(inst))
    latest = prob.horizon - prob.dur
    ub = latest.astype(float).copy()
    for _ in range(prob.n + 1):  # the fixpoint, as before
        cand = np.full(prob.n, np.inf)
        np.minimum.at(cand, prob.arcs.src, ub[prob.arcs.dst] - prob.arcs.gap)
        new = np.minimum(ub, cand)
        if np.array_equal(new, ub):
            break
        ub = new
    assert np.array_equal(_backward(prob, latest, prob.arcs), ub)


def test_device_units_each_is_unit_for_every_micro_batch():
    inst = make_pipeline("v", 4, 5, forward_time=2.0, backward_time=3.0, weight_time=1.0)
    units = baselines.DeviceUnits(inst)
    for d in range(inst.n_devices):
        for kinds in ((0,), (1, 2), (2,)):
            assert units.each(d, kinds) == [units.unit(d, kinds, m) for m in range(inst.micro_batches)]


def test_baseline_incumbent_keeps_the_schedules_done_before_the_deadline(monkeypatch):
    """A deadline reached in the second schedule lost the first (None: pipeline_milp at
    0.3 s on 8 devices, N = 32, ended with no plan although gpipe/1f1b take milliseconds)."""
    inst = make_pipeline("nn", 4, 8, forward_time=2.0, backward_time=3.0, weight_time=1.0)

    def late(inst, deadline):
        raise DeadlineReached("the 1f1b schedule ran out of time")

    monkeypatch.setattr(baselines, "SCHEDULES", {"gpipe": baselines.gpipe, "1f1b": late})
    found = baselines.baseline_incumbent(inst, time.perf_counter() + 60.0)
    assert found is not None and found[0] == "gpipe"


# -- D5 -----------------------------------------------------------------------------------

NEGATIVE = {
    "residue_nodes": -5,
    "repetend_candidates": 0,
    "justify_all_ops": -1,
    "flat_time_limit": -1.0,
    "probe_time_limit": -1.0,
    "candidate_probe_limit": -1.0,
    "phase_time_limit": -1.0,
    "proof_time_limit": -1.0,
}


@pytest.mark.parametrize("name", sorted(NEGATIVE))
def test_tessel_numeric_params_are_range_checked(name):
    form = get_formulation("pipeline", "tessel")
    with pytest.raises(InputError, match=name):
        form.check_params({name: NEGATIVE[name]})
    form.check_params({name: form.least[name]})  # the least value is taken


def test_tessel_negative_param_on_the_cli(capsys, tmp_path):
    rc, out, err = cli_run(["solve", "pipeline-tessel-vshape", "-f", "tessel", "--param", "repetend_candidates=-3"], capsys)
    assert_named_error(rc, out, err, "repetend_candidates")


@pytest.mark.parametrize("formulation", ["1f1b", "tessel", "pipeline_milp"])
def test_too_many_micro_batches_is_a_named_error(formulation):
    """N = 1e7 (60M operations) ran 7.7 s past a 3 s limit toward 1.3+ GB (1f1b) before
    giving up: it is refused at once, naming micro_batches."""
    inst = _v2x3().with_(micro_batches=10**7)
    t0 = time.perf_counter()
    with pytest.raises(InputError, match="micro_batches"):
        distplan.solve(inst, formulation=formulation, time_limit=3.0)
    assert time.perf_counter() - t0 < 3.0 + 2.0  # the limit's contract (it is refused at once)


def test_limited_pipeline_milp_keeps_the_tessel_warm_start():
    """The deadline checks must not cost small runs their repetend: nn on 8 devices, N = 32
    at 1F1B's memory, 5 s: the tessel warm start beats the stacked barriers (1300)
    (a check at the naive unroll's entry had dropped it, at 1 s and 3 s)."""
    inst = make_pipeline("nn", 8, 32, forward_time=2.0, backward_time=3.0, weight_time=1.0)
    peak = distplan.solve(inst, formulation="1f1b").check.details["devices"]
    inst = inst.with_(memory_capacity=max(d["peak_memory"] for d in peak.values()))
    res = distplan.solve(inst, formulation="pipeline_milp", time_limit=5.0)
    # the warm start is tessel's, not the stacked barriers' 1300 (how far tessel's search
    # gets in its share of the time depends on the machine's load: 431 alone, 658 seen
    # under the full suite on 2 busy cores)
    assert res.plan.info.get("warm_start") == "tessel" and res.objective < 1300.0, res.plan.info


def test_a_limited_search_leaves_time_for_the_completion():
    """With the rate proof, nn on 8 devices, N = 16, 3 s: the repetend search used the
    whole limit and the run returned the naive unroll (281; 150 at 1 s); a fifth of the
    time is now kept for the list schedules that complete the repetend."""
    inst = make_pipeline("nn", 8, 16, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    res = distplan.solve(inst, formulation="tessel", period_proof="rate_milp", time_limit=3.0)
    # (145 here alone; the bound leaves room for a loaded machine's shorter search)
    assert res.plan.info.get("completion") != "naive unroll" and res.objective < 281.0, res.plan.info.get("completion")


def test_a_small_earliest_start_schedule_runs_past_the_deadline():
    """The earliest-start schedule of a small run takes milliseconds, so it runs past the
    deadline instead of losing the repetend's unroll (the check at its entry had dropped
    it: pipeline_milp on nn 8 x 32 ended with the stacked barriers' 1300 instead of 431);
    above 65,536 operations it stops there."""
    from distplan.formulations.pipeline.common import asap, orders_from_starts

    small = make_pipeline("nn", 8, 32, forward_time=2.0, backward_time=3.0, weight_time=1.0)
    plan = distplan.solve(small, formulation="1f1b").plan
    orders = orders_from_starts(small, plan.start)
    starts = asap(small, orders, deadline=time.perf_counter() - 1.0)
    assert np.allclose(starts - starts.min(), plan.start - plan.start.min())
    big = make_pipeline("nn", 8, 0x10000 // small.n_blocks + 1, forward_time=2.0, backward_time=3.0, weight_time=1.0)
    assert big.n_blocks * big.micro_batches > 0xFFFF
    with pytest.raises(DeadlineReached):
        asap(big, baselines.gpipe_orders(big), deadline=time.perf_counter() - 1.0)
