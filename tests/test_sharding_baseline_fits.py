"""The expert baselines (data_parallel, megatron) decide "does not fit" as the evaluator
does: its memory sum and its tolerance (`check_fits` reads `evaluate`), so a plan the
evaluator accepts is never called infeasible, and the shortfall named is the evaluator's."""

from __future__ import annotations

import pytest

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.sharding.expert_plans import data_parallel_plan, megatron_plan
from distplan.instances.transformer import transformer
from distplan.models.sharding import MEMORY_TOLERANCE, evaluate


def _instance() -> distplan.models.sharding.ShardingInstance:
    return transformer(2, 256, 4, 128, 8, 1000, mesh=4, device="V100", memory=1e15, name="gpt-l2-mesh4")


@pytest.mark.parametrize("name", ["data_parallel", "megatron"])
def test_a_plan_within_the_evaluators_tolerance_is_returned(name: str) -> None:
    base = _instance()
    plan = data_parallel_plan(base) if name == "data_parallel" else megatron_plan(base)
    memory = evaluate(base, plan).details["memory_bytes"]
    # below the plan's memory, but within the evaluator's relative tolerance of it
    inst = base.with_memory(memory / (1 + MEMORY_TOLERANCE / 2))
    assert memory > inst.memory_budget
    result = distplan.solve(inst, name)
    assert result.check is not None and result.check.feasible
    assert result.objective == evaluate(inst, plan).objective


@pytest.mark.parametrize("name", ["data_parallel", "megatron"])
def test_the_shortfall_is_the_evaluators(name: str) -> None:
    base = _instance()
    plan = data_parallel_plan(base) if name == "data_parallel" else megatron_plan(base)
    memory = evaluate(base, plan).details["memory_bytes"]
    inst = base.with_memory(memory / 2)
    with pytest.raises(InfeasibleError) as info:
        distplan.solve(inst, name)
    details = info.value.details
    assert details["needed_bytes"] == evaluate(inst, plan).details["memory_bytes"]
    assert details["missing_bytes"] == details["needed_bytes"] - inst.memory_budget
    assert f"the {name} plan needs" in str(info.value)
