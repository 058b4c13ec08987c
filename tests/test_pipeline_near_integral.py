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
