"""`distplan verify` holds a result's ``termination`` to what its run can end with (review
rev31 audit D, item 3): "optimal" only from an exact program (a heuristic's runs end
"finished" or "time_limit"), never after ``info.stopped`` records the run was stopped
short, and, without solver calls, only with a bound of its own that closes the gap.
Before, a time-limited tessel, placement_search or libra_perf_lp result whose
``termination`` was edited to "optimal" verified clean."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import distplan
from distplan.instances import load_instance
from distplan.verify import check_result

#: a heuristic of each kind (no exact program), on a bundled instance
HEURISTICS = [
    ("placement-small-1", "baechi_etf"),
    ("placement-small-1", "placement_search"),
    ("gpt-2layer-2x2", "megatron"),
    ("pipeline-zb-p4-m12-comm0", "zb_h1"),
    ("pipeline-zb-p4-m12-comm0", "tessel"),
    ("compression-mlp-small", "sfb_poseidon_rule"),
    ("compression-mlp-small", "tag_sfb"),
    ("libra-dlrm-3d-total500", "equal_bw"),
    ("libra-dlrm-3d-total500", "libra_discrete"),
]


def _termination_problems(doc: dict[str, Any], instance: Any) -> list[str]:
    return [message for name, message in check_result(doc, instance) if name == "termination"]


@pytest.mark.parametrize("name, formulation", HEURISTICS)
def test_a_heuristics_result_edited_to_end_optimal_is_a_problem(name: str, formulation: str) -> None:
    inst = load_instance(name)
    doc = distplan.solve(inst, formulation, time_limit=20).to_dict()
    assert doc["termination"] in ("finished", "time_limit")
    assert check_result(doc, inst) == []
    edited = {**copy.deepcopy(doc), "termination": "optimal"}
    assert any(f"{formulation} is no exact program" in m for m in _termination_problems(edited, inst))


@pytest.mark.parametrize("stopped", ["time_limit", "max_rounds", "tap: the walk's dynamic program ran out of time", "time limit"])
def test_optimal_after_the_run_was_stopped_short_is_a_problem(stopped: str) -> None:
    inst = load_instance("libra-dlrm-3d-total500")
    doc = distplan.solve(inst, "libra_perf_lp", time_limit=20).to_dict()
    assert doc["termination"] == "optimal" and doc["info"]["stopped"] == "closed"
    assert check_result(doc, inst) == []  # (its search ended by its own test: it may end optimal)
    edited = copy.deepcopy(doc)
    edited["info"]["stopped"] = stopped
    assert any("stopped short" in m for m in _termination_problems(edited, inst))


def test_optimal_without_calls_needs_a_bound_of_its_own_that_closes_the_gap() -> None:
    """tap's dynamic program ends "optimal" with no solver call: its own proof closes the
    gap. With that bound lowered (the gap left open), "optimal" rests on nothing."""
    inst = load_instance("gpt-4layer-memtight")
    doc = distplan.solve(inst, "tap", time_limit=20).to_dict()
    assert doc["termination"] == "optimal" and not doc["solver_results"]
    assert _termination_problems(doc, inst) == []
    edited = copy.deepcopy(doc)
    edited["bounds"] = [b for b in edited["bounds"] if b.get("kind") == "solver_free"]
    edited["bound"] = max(b["value"] for b in edited["bounds"])
    edited["status"] = "feasible"
    edited["gap"] = (edited["objective"] - edited["bound"]) / abs(edited["objective"])
    assert edited["gap"] > edited["gap_tolerance"]
    assert any("made no solver call" in m for m in _termination_problems(edited, inst))


def _claims_infeasible() -> Any:
    """A registered exact formulation (for this test) whose last solver call says
    "infeasible" although it returns a plan (m-ETF's) the evaluator accepts."""
    from distplan.formulations.registry import Formulation, Outcome, formulations, register
    from distplan.solvers.result import SolutionStatus, SolverResult, Termination

    name = "claims_infeasible_test"
    found = [f for f in formulations("placement") if f.name == name]
    if found:
        return found[0]

    def run(inst: Any, ctx: Any) -> Outcome:
        plan = distplan.solve(inst, "baechi_etf").plan
        ctx.solver_results.append(SolverResult(backend=ctx.backend.name, backend_version=ctx.backend.version(), termination=Termination.INFEASIBLE, status=SolutionStatus.NONE, raw_status="infeasible (test)", extra={"model": {"name": name}}))
        return Outcome(plan=plan, solver_results=list(ctx.solver_results))

    return register(Formulation(kind="placement", name=name, solves=(name,), description="test: an infeasible verdict beside a plan", program="milp", run=run, exact=True, reference="test"))


def test_a_plan_refutes_its_last_calls_infeasible_verdict() -> None:
    """Such a run ends "numerical" (SciPy's HiGHS said pipeline_milp's disjunctive model
    with blocks of 1e9 s was infeasible, beside the warm start's plan); a result that
    says "infeasible" beside a plan is a problem."""
    form = _claims_infeasible()
    inst = load_instance("placement-small-1")
    res = distplan.solve(inst, form.name, time_limit=20)
    assert res.termination.value == "numerical" and "infeasible" in res.info["numerical"]
    doc = res.to_dict()
    assert _termination_problems(doc, inst) == []
    edited = {**copy.deepcopy(doc), "termination": "infeasible"}
    assert any("refutes it" in m for m in _termination_problems(edited, inst))
