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


def big_instance() -> tuple[ShardingInstance, float]:
    """GPT-3 175B on 8x8: building Alpa's ILP alone takes longer than the 10 ms limit, so
    the solver never starts (a time-limited call with no plan, `RunContext.deadline`)."""
    inst = distplan.load_instance("gpt3-175b-64gpu-nomem")
    return inst, _best_expert(inst)


@pytest.fixture(scope="module")
def big() -> tuple[ShardingInstance, float]:
    return big_instance()


@pytest.mark.parametrize("backend", MILP_BACKENDS)
@pytest.mark.parametrize(
    ("formulation", "params"),
    [("alpa_ilp", {}), ("alpa_ilp", {"fold": True}), ("tap", {"dp": False}), ("tap", {"exact": False})],
    ids=["alpa_ilp", "alpa_ilp-fold", "tap-milp", "tap-shared"],
)
def test_stopped_early_never_loses_to_an_expert_plan(big: tuple[ShardingInstance, float], backend: str, formulation: str, params: dict[str, Any]) -> None:
    inst, expert = big
    res = distplan.solve(inst, formulation, backend=backend, time_limit=0.01, **params)
    assert res.objective <= expert  # zero tolerance: the same evaluator's seconds
    if res.status.value != "optimal":
        # (killed: the solver process outlived the limit and its kill grace, as CBC does
        # on a loaded machine; the run ends with its last call's termination)
        assert res.termination.value in ("time_limit", "killed")
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


def test_folded_run_keeps_its_incumbent_when_the_expert_plan_does_not_fold() -> None:
    """On a folded instance the expert plan is returned only as a plan of the
    representatives that unfolds back to it; when its copies would disagree (here: an
    unfold that changes one op) the run's own incumbent stays, and without one there is
    no plan."""
    from distplan.formulations.sharding.alpa_ilp import FoldedSharding, folded_expert_if_better
    from distplan.formulations.sharding.tap import fold_sharding
    from distplan.models.sharding import ShardingPlan

    inst, _ = big_instance()
    folding = fold_sharding(inst, {})
    honest = folding.instance
    assert isinstance(honest, FoldedSharding)
    info: dict[str, Any] = {}
    expert = folded_expert_if_better(honest, None, info)
    assert expert is not None and info["incumbent"] in EXPERTS
    assert honest.unfold(expert).strategies == distplan.solve(inst, info["incumbent"]).plan.strategies

    def bent(plan: ShardingPlan) -> ShardingPlan:
        full = dict(honest.unfold(plan).strategies)
        full[inst.ops[-1].name] += " (changed)"
        return ShardingPlan(full)

    crooked = FoldedSharding(honest.graph, inst, honest.stats, bent)
    info = {}
    assert folded_expert_if_better(crooked, None, info) is None and "incumbent" not in info
    info = {}
    assert folded_expert_if_better(crooked, expert, info) is expert and info["incumbent"] == "alpa_ilp"
