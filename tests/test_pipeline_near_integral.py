"""Durations a hair off integers (1e-13): the searches may round them for a plan, but no
bound may use integrality that the data does not have. pipeline_milp declared its makespan
integer over durations 1e-13 below integers and reported the optimum's ceiling, 16, as a
dual bound above the evaluated 15.999999999998904 (a PlanCheckError); its state-search
bound did the same."""

from __future__ import annotations

import dataclasses

import pytest

import distplan
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelineInstance


def _shifted(shape: str, weight: bool, shift: float) -> PipelineInstance:
    base = make_pipeline(shape, 3, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0 if weight else None)
    return base.with_(blocks=[dataclasses.replace(b, duration=b.duration + shift) for b in base.blocks])


@pytest.mark.parametrize("formulation", ["pipeline_milp", "tessel"])
@pytest.mark.parametrize("shift", [-1e-13, 1e-13])
@pytest.mark.parametrize("shape,weight", [("v", True), ("v", False), ("x", True)])
def test_no_bound_above_the_objective_off_integers(formulation: str, shift: float, shape: str, weight: bool) -> None:
    inst = _shifted(shape, weight, shift)
    result = distplan.solve(inst, formulation, time_limit=20)
    assert result.check is not None and result.check.feasible
    assert result.bound is not None and result.bound <= result.objective
    if formulation == "pipeline_milp":  # exact: the optimum moves by at most the shifts along a schedule
        exact = distplan.solve(_shifted(shape, weight, 0.0), "pipeline_milp", time_limit=20)
        assert result.status.value == "optimal" and abs(result.objective - exact.objective) <= 1e-9


def test_the_state_search_proves_nothing_over_durations_below_integers() -> None:
    """The state search rounds durations within 1e-12 of integers (a plan), but its bound
    holds for exact integers only: backward blocks 1e-13 below 2 s made pipeline_milp
    report 'no schedule below 32' (grade safe) over a schedule of 31.9999999999995."""
    base = make_pipeline("nn", 4, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=3.0)
    inst = base.with_(blocks=[dataclasses.replace(b, duration=b.duration - (1e-13 if b.duration == 2.0 else 0.0)) for b in base.blocks])
    result = distplan.solve(inst, "pipeline_milp", time_limit=3, model="disjunctive")
    assert result.info["state_search"]["complete"]  # (the search ran, for its plan)
    assert result.bound is not None and result.bound <= result.objective < 32.0
    assert not any("state search" in b.source for b in result.bounds)


@pytest.mark.parametrize("proof", ["residue", "auto"])
@pytest.mark.parametrize("shift", [-1e-13, 1e-13])
@pytest.mark.parametrize("shape,weight", [("v", True), ("v", False), ("x", True)])
def test_tessel_proves_no_period_from_integrality_the_data_lacks(shift: float, shape: str, weight: bool, proof: str) -> None:
    """tessel searches near-integer durations rounded, for a plan, but proves no period
    from it: 1e-13 below integers it reported period 4 proven least with period_bound 4,
    though the rounded data's repetend with its times scaled by s = 1 - 2e-14 (every
    duration d <= 4 has d - 1e-13 <= s d) repeats every 4 s; 1e-13 above (forward blocks
    only, the V case) it reported period 4 proven under a device's work of 4.0000000000002.
    The residue search (period_proof "residue") and, without it ("auto"), the heuristics'
    integer period taken as reaching the work bound made those claims."""
    if shift > 0:  # forward blocks only (the others stay integral): the work bound moves off 4
        base = make_pipeline(shape, 3, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0 if weight else None)
        inst = base.with_(blocks=[dataclasses.replace(b, duration=b.duration + (shift if b.duration == 1.0 and b.role == "F" else 0.0)) for b in base.blocks])
    else:
        inst = _shifted(shape, weight, shift)
    rounded = distplan.solve(_shifted(shape, weight, 0.0), "tessel", time_limit=20).info
    result = distplan.solve(inst, "tessel", time_limit=20, period_proof=proof)
    assert result.check is not None and result.check.feasible
    info = result.plan.info
    unfold = int(info["unfold"])
    work = max(float((unfold * (inst.duration @ inst.device_mask)).max()), float(inst.duration.max()))
    # the rounded data's repetend with its times scaled by s is a real one (every
    # duration d in [1, 4] has d + shift <= s d): no period bound above its period
    s = 1 - 2e-14 if shift < 0 else 1 + 1e-13
    assert info["period_bound"] is not None and info["period_bound"] <= rounded["period"] * s
    if info["period_proven_optimal"]:
        assert info["period_bound"] >= info["period"] >= work
        assert info["period"] <= rounded["period"] * s
    assert result.info.get("period_proven_optimal") == info["period_proven_optimal"]


@pytest.mark.parametrize("shift", [-1e-13, 1e-13, 3e-13])
def test_tessel_reports_a_period_its_repetend_has_on_the_data(shift: float) -> None:
    """Review rev15c: with forward blocks 1e-13 above integers tessel reported the rounded
    data's period 4 beside its (correct) period_bound 4.0000000000001, the work bound. The
    period is now the repetend's on the instance's own durations (`period_on_data`): the
    rounded data's repetend with its times scaled by the largest ratio of a duration to
    its rounding, whose naive unroll the evaluator accepts."""
    from distplan.formulations.pipeline.repetend import DEFAULTS, Repetend, period_on_data, search_repetend
    from distplan.formulations.registry import RunContext
    from distplan.models.pipeline import evaluate, make_plan
    from distplan.solvers.base import SolveOptions, get_backend

    base = make_pipeline("v", 3, 6, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    inst = base.with_(blocks=[dataclasses.replace(b, duration=b.duration + (shift if b.role == "F" else 0.0)) for b in base.blocks])
    result = distplan.solve(inst, "tessel", time_limit=20)
    info = result.plan.info
    assert info["period_bound"] is not None and info["period_bound"] <= info["period"]
    rep = search_repetend(base, RunContext(get_backend("highs"), SolveOptions()), dict(DEFAULTS))
    real = period_on_data(inst, rep.period)
    assert real is not None and (real > rep.period) == (shift > 0)
    if shift > 0:
        assert info["period_of_rounded_data"] == rep.period and info["period"] == real
    # the rounded data's repetend, scaled to the reported period, is a real one
    scaled = Repetend(rep.sigma * (real / rep.period), real, None, False, rep.offsets, rep.unfold, 0.0)
    assert evaluate(inst, make_plan(inst, scaled.unroll(inst))).feasible
    # exact data keeps its period; a positive value rounded to 0 has none
    assert period_on_data(base, rep.period) == rep.period
    assert period_on_data(inst.with_(comm_delay=1e-13), rep.period) is None
