"""A MILP solver meets the memory row only within its feasibility tolerance (HiGHS: 1e-6
on the row, ~1 kB with the row in GiB). On this 4-layer GPT, HiGHS's plan for Alpa's ILP
was 467 bytes over the 43,928,109-byte budget, and the evaluator rejected it
(PlanCheckError). Such a plan is now solved again with the row in ten-thousandths of the
budget (`alpa_ilp.solve_graph`, `chain_program.solve_chains`), where the tolerance is
1e-10 of the budget."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.formulations.registry import RunContext
from distplan.formulations.sharding import alpa_ilp
from distplan.instances.transformer import transformer
from distplan.solvers.result import SolutionStatus

#: the budget, bytes per device, at which HiGHS (highspy 1.16) and SCIP returned plans over
#: it (found by a differential run of tap against alpa_ilp on random tight GPTs)
TOLERANCE_BUDGET = 43928109.056
#: with every all-to-all forbidden, the least plan needs 36,051,968 bytes; 500 bytes more
#: of budget, and HiGHS's plan was 524 bytes over (review rev7: a re-solve held 1,048
#: bytes below the budget, as a first mend did, cut the optimum off and was infeasible)
NO_A2A_BUDGET = 36051968.0 + 500.0


def gpt(memory: float, all_to_all: bool = True) -> Any:
    return transformer(4, 256, 4, 128, 8, 1000, mesh=(2, 2), device="V100", memory=memory, all_to_all=all_to_all, name="gpt-l4-mesh2x2")


CASES = {"tolerance": (TOLERANCE_BUDGET, True), "no-a2a": (NO_A2A_BUDGET, False)}


@pytest.fixture(scope="module")
def optimum() -> dict[str, Any]:
    """tap's plans: exact (Pareto dynamic program, no solver), proven optimal."""
    out = {}
    for case, (budget, a2a) in CASES.items():
        best = distplan.solve(gpt(budget, a2a), "tap")
        assert best.status is SolutionStatus.OPTIMAL and best.info["method"] == "dp"
        out[case] = best
    return out


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_alpa_ilp_plan_fits_the_budget_its_solver_tolerance_let_it_exceed(backend: str, case: str, optimum: dict[str, Any]) -> None:
    inst = gpt(*CASES[case])
    r = distplan.solve(inst, "alpa_ilp", backend=backend, mip_gap=1e-9)  # PlanCheckError on HiGHS and SCIP
    assert r.check.details["memory_bytes"] <= inst.memory_budget
    assert r.bound is not None and r.bound <= optimum[case].objective
    assert r.objective == pytest.approx(optimum[case].objective, rel=1e-6)


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("formulation, params", [("alpa_ilp", {"lp_first": True}), ("tap", {"exact": False}), ("tap", {"dp": False})], ids=["alpa_ilp-lp_first", "tap-shared", "tap-milp"])
def test_every_milp_path_plan_fits_the_budget(formulation: str, params: dict[str, Any], case: str, optimum: dict[str, Any]) -> None:
    """The other programs on the embedded default (the paths, not the backends, differ):
    the LP relaxation first, TAP as published (copies agree), the folded walk MILP."""
    inst = gpt(*CASES[case])
    r = distplan.solve(inst, formulation, mip_gap=1e-9, **params)  # tap shared raised PlanCheckError
    assert r.check.details["memory_bytes"] <= inst.memory_budget
    assert r.bound is not None and r.bound <= optimum[case].objective
    if formulation == "alpa_ilp":  # (tap shared forces copies to agree: a restriction)
        assert r.objective == pytest.approx(optimum[case].objective, rel=1e-6)


def _scales(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The memory row scale of every Alpa ILP built from here on."""
    seen: list[float] = []
    real = alpa_ilp.prepare_alpa

    def prepare(instance: Any, params: Any) -> Any:
        index = real(instance, params)
        if not index.relax:
            seen.append(index.memory_scale)
        return index

    monkeypatch.setattr(alpa_ilp, "ALPA_ILP_SPEC", dataclasses.replace(alpa_ilp.ALPA_ILP_SPEC, prepare=prepare))
    return seen


def test_a_plan_over_the_budget_is_solved_again_with_the_fine_row(monkeypatch: pytest.MonkeyPatch, optimum: dict[str, Any]) -> None:
    """The first plan reported 100 kB over: one re-solve, its row in ten-thousandths of the
    budget, whose plan decides (optimal, both bounds kept: the larger)."""
    inst = gpt(TOLERANCE_BUDGET)
    scales = _scales(monkeypatch)
    real = alpa_ilp.memory_excess
    calls: list[int] = []

    def first_over(graph: Any, choice: Any) -> float:
        calls.append(1)
        return 1e5 if len(calls) == 1 else real(graph, choice)

    monkeypatch.setattr(alpa_ilp, "memory_excess", first_over)
    r = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    assert scales == [alpa_ilp.MEMORY_SCALE, alpa_ilp.MEMORY_ROW_UNITS / inst.memory_budget]
    assert r.info["memory_row_resolved"] and r.info["optimal"] and len(r.solver_results) == 2
    assert r.objective == pytest.approx(optimum["tolerance"].objective, rel=1e-9)
    firsts = [s.bound / alpa_ilp.OBJECTIVE_SCALE for s in r.solver_results]
    assert r.bound == pytest.approx(max(firsts), rel=1e-12) and r.bound <= optimum["tolerance"].objective


def test_a_plan_within_the_budget_is_not_solved_again(monkeypatch: pytest.MonkeyPatch) -> None:
    scales = _scales(monkeypatch)
    r = distplan.solve(gpt(1e9), "alpa_ilp", mip_gap=1e-9)
    assert scales == [alpa_ilp.MEMORY_SCALE] and "memory_row_resolved" not in r.info


def test_a_re_solve_without_a_plan_decides_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-solve found no plan (as at a time limit): the first plan is returned, and
    the evaluator names its excess (here made up: the plan fits, and is accepted)."""
    inst = gpt(1e9)
    monkeypatch.setattr(alpa_ilp, "memory_excess", lambda graph, choice: 1e5)
    real = RunContext.solve_model

    def second_finds_nothing(self: RunContext, model: Any, *args: Any, **kwargs: Any) -> Any:
        res = real(self, model, *args, **kwargs)
        if len(self.solver_results) == 2:
            res.status = SolutionStatus.NONE
        return res

    monkeypatch.setattr(RunContext, "solve_model", second_finds_nothing)
    r = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    assert len(r.solver_results) == 2 and not r.info["optimal"] and "memory_row_resolved" not in r.info
    assert r.check.details["memory_bytes"] <= inst.memory_budget


@pytest.mark.parametrize("lose_the_re_solve", [False, True])
def test_the_walk_milp_solves_again_with_the_fine_row(monkeypatch: pytest.MonkeyPatch, optimum: dict[str, Any], lose_the_re_solve: bool) -> None:
    """`solve_chains`: its first plan within the budget reported 100 kB over it; the walk
    program is solved again (its row in ten-thousandths of the budget), and that decides,
    its bound kept too; a re-solve without a plan decides nothing (the first plan, which
    fits here, is returned)."""
    from distplan.formulations.sharding import chain_program

    inst = gpt(TOLERANCE_BUDGET)
    real_excess, real_program = chain_program.plan_excess, chain_program.solve_program
    told: list[int] = []
    scales: list[float] = []

    def first_over(sk: Any, tables: Any, choice: Any) -> float:
        told.append(1)
        return 1e5 if len(told) == 1 else real_excess(sk, tables, choice)

    bounds: list[float] = []

    def program(*args: Any, **kwargs: Any) -> Any:
        got = real_program(*args, **kwargs)
        if kwargs.get("memory_row", True):
            scales.append(kwargs.get("memory_scale", alpa_ilp.MEMORY_SCALE))
            bounds.append(got.bound)
            if lose_the_re_solve and len(scales) == 2:
                got = dataclasses.replace(got, choice=None)
        return got

    monkeypatch.setattr(chain_program, "plan_excess", first_over)
    monkeypatch.setattr(chain_program, "solve_program", program)
    r = distplan.solve(inst, "tap", dp=False, mip_gap=1e-9)
    assert told and scales == [alpa_ilp.MEMORY_SCALE, alpa_ilp.MEMORY_ROW_UNITS / inst.memory_budget]
    assert r.check.details["memory_bytes"] <= inst.memory_budget
    assert r.objective == pytest.approx(optimum["tolerance"].objective, rel=1e-6)
    assert r.bound is not None and r.bound <= optimum["tolerance"].objective
    assert r.bound >= max(bounds) * (1 - 1e-9)  # (tap lowers its bound by 1e-10 relative)


def test_the_fine_row_is_ten_thousandths_of_the_budget_and_never_coarser_than_gib() -> None:
    assert alpa_ilp.memory_row_scale(4e7) == pytest.approx(1e4 / 4e7)
    assert alpa_ilp.memory_row_scale(1e15) == alpa_ilp.MEMORY_SCALE  # (a loose row)
    assert alpa_ilp.memory_row_scale(0.0) == alpa_ilp.MEMORY_SCALE


def test_memory_excess_is_what_the_evaluator_rejects() -> None:
    """0 for a plan within budget x (1 + MEMORY_TOLERANCE), the bytes over the budget beyond it."""
    import numpy as np

    from distplan.formulations.sharding.costgraph import build_cost_graph

    g = build_cost_graph(gpt(1e15))
    choice = np.zeros(g.num_nodes, dtype=np.int64)
    memory = g.memory_of(choice)
    for budget, excess in ((memory, 0.0), (memory * 2, 0.0), (memory / (1 + 0.5e-9), 0.0), (memory - 100.0, 100.0)):
        g = dataclasses.replace(g, memory_budget=budget)
        assert alpa_ilp.memory_excess(g, choice) == pytest.approx(excess, abs=1e-6)


def test_plan_excess_is_what_the_evaluator_rejects() -> None:
    """The walk program's test (`chain_program.plan_excess`), as `memory_excess`."""
    import numpy as np

    from distplan.formulations.sharding.chain_program import plan_excess, plan_memory
    from distplan.formulations.sharding.costgraph import CostTables
    from distplan.formulations.sharding.tap import DEFAULTS, fold_instance

    def at(budget: float) -> tuple[Any, Any, Any]:
        inst = gpt(budget)
        sk, _ = fold_instance(inst, dict(DEFAULTS))
        return sk, CostTables(inst), np.zeros(sk.num_nodes, dtype=np.int64)

    memory = plan_memory(*at(1e15))
    for budget, excess in ((memory, 0.0), (memory / (1 + 0.5e-9), 0.0), (memory - 100.0, 100.0)):
        assert plan_excess(*at(budget)) == pytest.approx(excess, abs=1e-6)


def test_a_shortfall_of_bytes_is_named_in_bytes() -> None:
    """The evaluator's message for HiGHS's plan 467 bytes over said "0.000 GB missing"."""
    from distplan.models.sharding import ShardingPlan, bytes_text, evaluate

    inst = gpt(1e15)
    plan = ShardingPlan(distplan.solve(inst, "tap").plan.strategies)
    memory = evaluate(inst, plan).details["memory_bytes"]
    over = evaluate(inst.with_memory(memory - 467.0), plan)
    assert not over.feasible and over.violations[-1].endswith("(467 bytes missing)")
    assert bytes_text(2.5e9) == "2.500 GB" and bytes_text(999_999.0) == "999,999 bytes"


@pytest.mark.parametrize("formulation", ["alpa_ilp", "tap", "megatron"])
def test_a_budget_of_kilobytes_is_named_in_bytes(formulation: str) -> None:
    """A 250 kB budget under a 293 kB need said "needs at least 0.000 GB ... its budget is
    0.000 GB" (review rev29): the need, the budget and the largest needs are in bytes too."""
    from distplan.errors import InfeasibleError
    from distplan.instances.transformer import transformer

    inst = transformer(2, 32, 4, 8, 2, 256, ffn=64, mesh=2, memory=2.5e5)
    with pytest.raises(InfeasibleError) as got:
        distplan.solve(inst, formulation)
    text = str(got.value)
    assert "0.000 GB" not in text and "250,000 bytes" in text and "bytes missing" in text, text


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_graph_with_one_strategy_per_op_is_optimal_without_a_bound_above_it(backend: str) -> None:
    """Every dim of size 1: each op has one strategy and the ILP has no variable. Its bound
    was the constant cost summed in the ILP's order, one ulp above the evaluator's sum of the
    same costs, and solve raised PlanCheckError (review rev10); it is now lowered by
    `alpa_ilp.SUM_ROUNDING_MARGIN`."""
    from distplan.models.sharding import ShardingInstance

    doc = transformer(2, 256, 4, 128, 8, 1000, mesh=(2, 2)).to_dict()
    doc["graph"]["dims"] = dict.fromkeys(doc["graph"]["dims"], 1)
    res = distplan.solve(ShardingInstance.from_dict(doc), "alpa_ilp", backend=backend)
    assert res.status.value == "optimal" and res.bound is not None and res.bound <= res.objective
    assert res.objective - res.bound <= 2e-9 * res.objective
