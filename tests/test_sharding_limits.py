"""An exact sharding formulation stopped by its time limit never returns less than the
expert plans a user compares it with (Megatron-LM, data parallel;
`distplan.formulations.sharding.expert_plans.expert_if_better`), on every MILP backend."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.errors import InfeasibleError
from distplan.models.sharding import ShardingInstance
from tests.test_tap_exact import tight

MILP_BACKENDS = backend_params(takes_milp)
EXPERTS = ("megatron", "data_parallel")


def _best_expert(inst: ShardingInstance) -> float:
    """The least evaluated iteration time (seconds) of the expert plans that fit."""
    seconds = []
    for name in EXPERTS:
        try:
            seconds.append(distplan.solve(inst, name).objective)
        except InfeasibleError:
            continue
    assert seconds, "the fixture needs an expert plan that fits"
    return min(seconds)


@pytest.fixture(scope="module")
def big() -> tuple[ShardingInstance, float]:
    """GPT-3 175B on 8x8: building Alpa's ILP alone takes longer than the 10 ms limit, so
    the solver never starts (a time-limited call with no plan, `RunContext.deadline`)."""
    inst = distplan.load_instance("gpt3-175b-64gpu-nomem")
    return inst, _best_expert(inst)


@pytest.mark.parametrize("backend", MILP_BACKENDS)
@pytest.mark.parametrize(("formulation", "params"), [("alpa_ilp", {}), ("tap", {"dp": False}), ("tap", {"exact": False})], ids=["alpa_ilp", "tap-milp", "tap-shared"])
def test_stopped_early_never_loses_to_an_expert_plan(big: tuple[ShardingInstance, float], backend: str, formulation: str, params: dict[str, Any]) -> None:
    inst, expert = big
    res = distplan.solve(inst, formulation, backend=backend, time_limit=0.01, **params)
    assert res.objective <= expert  # zero tolerance: the same evaluator's seconds
    if res.status.value != "optimal":
        assert res.termination.value == "time_limit"
        assert res.info.get("incumbent", formulation) in (formulation, *EXPERTS)
    assert res.bound is None or res.bound <= res.objective


def test_dp_stopped_at_its_deadline_returns_the_expert_plan() -> None:
    """The memory-binding dynamic program gives up at its deadline (`DeadlineReached`);
    the run returns the faster expert plan that fits, time-limited, never "optimal"."""
    inst = tight(6, 4, 0.5)
    res = distplan.solve(inst, "tap", time_limit=1e-6)
    assert res.termination.value == "time_limit" and res.status.value == "feasible"
    assert res.info["incumbent"] == "megatron"
    assert res.objective == _best_expert(inst)
    assert distplan.solve(inst, "tap").objective < res.objective  # the DP given time does better


def test_a_proven_optimum_computes_no_expert_plan() -> None:
    """The expert plans are built only for a run that did not prove its plan (timing of an
    optimal alpa_ilp, the baseline of `benchmarks/bench_sharding.py`, is unchanged)."""
    inst = distplan.load_instance("gpt3-4layer-8gpu")
    res = distplan.solve(inst, "alpa_ilp")
    assert res.status.value == "optimal" and "incumbent" not in res.info
    assert res.objective < _best_expert(inst)


def test_no_expert_plan_fits_then_no_solution() -> None:
    """Under a budget no expert plan fits, a run stopped before any plan has none to give."""
    inst = tight(8, 8, 0.3)
    with pytest.raises(distplan.NoSolutionError, match="before the limit"):
        distplan.solve(inst, "tap", time_limit=1e-6)
