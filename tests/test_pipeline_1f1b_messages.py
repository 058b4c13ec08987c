"""1F1B's refusal says why: a memory shortfall by how much, or an order that deadlocks
when the memory fits (on the x shape at capacity 1 it had said "needs memory 1 on device
d0 (capacity 1, over by 0)"). Either way exit 3 is a fact about the 1F1B rule, whose one
plan is named; pipeline_milp finds a schedule."""

from __future__ import annotations

import pytest

import distplan
from distplan.errors import InfeasibleError
from distplan.instances.pipelines import make_pipeline


def test_a_deadlocked_order_is_not_called_a_memory_shortfall() -> None:
    inst = make_pipeline("x", 4, 4, forward_time=1.0, backward_time=2.0, memory_capacity=1.0)
    with pytest.raises(InfeasibleError) as err:
        distplan.solve(inst, "1f1b")
    text = str(err.value)
    assert "the 1f1b schedule" in text and "deadlock" in text and "over by 0" not in text
    # a schedule exists (tessel proves 75 in ~0.5 s; pipeline_milp took 2-30 s with HiGHS's
    # two threads, depending on the machine's load)
    assert distplan.solve(inst, "tessel", time_limit=30).check.feasible


def test_a_memory_shortfall_says_by_how_much() -> None:
    inst = make_pipeline("x", 4, 4, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=1.0)
    with pytest.raises(InfeasibleError, match=r"the 1f1b schedule needs memory 4\.5 on device d0 \(capacity 1, over by 3\.5\)"):
        distplan.solve(inst, "1f1b")
