"""The pipeline evaluator's checks do not depend on where the plan's clock starts, and it
reads a plan's rows by block name (review rev12: starts near 1e10 s were allowed 1000 s of
overlap, so a plan below the proven optimum passed; rows were read by position)."""

from __future__ import annotations

import numpy as np
import pytest

import distplan
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate


@pytest.fixture(scope="module")
def proven() -> tuple[PipelineInstance, PipelinePlan, float]:
    """V shape, 2 stages, 3 micro-batches, F=1 B=2 W=1, unlimited memory: pipeline_milp
    proves 13 s."""
    inst = make_pipeline("v", 2, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    res = distplan.solve(inst, "pipeline_milp", time_limit=30)
    assert res.status.value == "optimal" and res.bound is not None
    return inst, res.plan, res.bound


@pytest.mark.parametrize("shift", [-1e10, -1e9, -100.0, 0.0, 1.7e9, 1e10])
def test_a_shifted_optimal_plan_keeps_its_makespan(proven: tuple[PipelineInstance, PipelinePlan, float], shift: float) -> None:
    inst, plan, _ = proven
    base = evaluate(inst, plan)
    moved = evaluate(inst, PipelinePlan(plan.block_names, plan.start + shift))
    assert moved.feasible, moved.violations
    assert moved.objective == pytest.approx(base.objective, abs=4 * np.spacing(abs(shift) + base.objective))


@pytest.mark.parametrize("shift", [-1e10, -1e9, 0.0, 1e9, 1e10])
def test_no_plan_below_the_proven_optimum_passes(proven: tuple[PipelineInstance, PipelinePlan, float], shift: float) -> None:
    """Squeezing the optimal plan by 10% (then moving it) breaks its dependencies; every
    start at one instant overlaps everything: both refused, wherever the clock starts."""
    inst, plan, bound = proven
    squeezed = evaluate(inst, PipelinePlan(plan.block_names, plan.start * 0.9 + shift))
    assert not squeezed.feasible and squeezed.objective < bound
    together = evaluate(inst, PipelinePlan(plan.block_names, np.full_like(plan.start, 1e10 + shift)))
    assert not together.feasible


def test_rows_are_read_by_block_name(proven: tuple[PipelineInstance, PipelinePlan, float]) -> None:
    inst, plan, _ = proven
    names = list(plan.block_names)
    reordered = PipelinePlan(names[::-1], plan.start[::-1].copy())
    same = evaluate(inst, reordered)
    assert same.feasible and same.objective == evaluate(inst, plan).objective
    mislabelled = evaluate(inst, PipelinePlan(names[::-1], plan.start.copy()))
    assert not mislabelled.feasible
    unknown = evaluate(inst, PipelinePlan(["nope", *names[1:]], plan.start.copy()))
    assert not unknown.feasible and "the instance has" in unknown.violations[0]
