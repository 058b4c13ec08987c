"""A run's own terminations are declared by its formulation (`registry.RunTermination`,
`Formulation.run_terminations`), and `distplan verify` reads the declarations.

* tessel: a run whose searches only its placement and state budgets cut
  (``residue_nodes``, ``flat_residue_nodes``, ``whole_search_states``) ends "node_limit",
  with solver calls or with none (a residue search makes none); verify accepts it only
  when ``info["cut_by"]`` names those budgets alone.
* libra_perf_lp and libra_perf_per_cost declare their "iteration_limit" (``max_rounds``,
  ``max_points``), which verify used to keep in a table of formulation names.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

import distplan
from distplan.formulations.pipeline.tessel import COUNT_BUDGETS, NODE_BUDGETS_CUT
from distplan.formulations.registry import RunTermination, formulations
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.verify import check_result, check_solver_calls

Doc = dict[str, Any]


def _k4_capped() -> tuple[Any, Doc]:
    """Tessel's K shape, memory 4, N = 4: the flat-length residue search needs 1967
    placements; at 1,000 it is cut, and the run makes no solver call."""
    inst = tessel_case("k", 4.0, 4)
    return inst, distplan.solve(inst, "tessel", flat_residue_nodes=1_000).to_dict()


def _v4_capped() -> tuple[Any, Doc]:
    """V shape, 4 stages, N = 4, memory 3: the state search's proof keeps 337 states; at
    336 it is cut, after a solver call that ended "infeasible"."""
    inst = make_pipeline("v", 4, 4, memory_capacity=3.0)
    return inst, distplan.solve(inst, "tessel", whole_search_states=336).to_dict()


@pytest.mark.parametrize("case", [_k4_capped, _v4_capped], ids=["no solver call", "last call infeasible"])
def test_tessel_cut_by_count_budgets_alone_ends_node_limit_and_verifies(case: Any) -> None:
    inst, doc = case()
    assert doc["termination"] == "node_limit"
    assert set(doc["info"]["cut_by"].values()) <= COUNT_BUDGETS
    assert check_result(doc, inst, require_version=True) == []
    assert check_solver_calls(doc) == []  # (without the instance, the result's own kind finds the declaration)


def _termination_problems(doc: Doc, inst: Any) -> list[tuple[str, str]]:
    return [p for p in check_result(doc, inst) if p[0] == "termination"]


@pytest.mark.parametrize("forge", ["a time budget too", "cut_by dropped", "cut_by empty", "another formulation"])
def test_node_limit_without_its_recorded_reason_is_a_problem(forge: str) -> None:
    inst, doc = _v4_capped()
    forged = copy.deepcopy(doc)
    if forge == "a time budget too":
        forged["info"]["cut_by"]["repetend_search"] = "search_time_limit"
    elif forge == "cut_by dropped":
        del forged["info"]["cut_by"]
    elif forge == "cut_by empty":
        forged["info"]["cut_by"] = {}
    else:
        forged["formulation"] = "pipeline_milp"
    problems = _termination_problems(forged, inst)
    assert problems and "'node_limit' but the last solver call ended 'infeasible'" in problems[0][1], problems


def test_a_time_budget_cut_ends_time_limit() -> None:
    """A time budget among the cuts: the run ends time_limit, as before."""
    inst = make_pipeline("v", 4, 4, memory_capacity=3.0)
    res = distplan.solve(inst, "tessel", whole_search_states=336, whole_search_time_limit=1e-9)
    assert res.termination.value == "time_limit"
    assert check_result(res.to_dict(), inst) == []


def test_run_termination_records() -> None:
    own = RunTermination("node_limit", "cut_by", frozenset({"a", "b"}), "a test's", mapping=True, absent=frozenset({"stopped"}), needs_call=False)
    assert own.recorded({"cut_by": {"s": "a", "t": "b"}}, 0) and own.recorded({"cut_by": {"s": "a"}}, 2)
    for info in ({}, {"cut_by": "a"}, {"cut_by": {}}, {"cut_by": {"s": "a", "t": "c"}}, {"cut_by": {"s": 1}}, {"cut_by": ["a"]}, {"other": "a"}, {"cut_by": {"s": "a"}, "stopped": "time limit"}):
        assert not own.recorded(info, 1), info
    text = RunTermination("iteration_limit", "stopped", frozenset({"a"}), "a test's")
    assert text.recorded({"stopped": "a"}, 1)
    assert not text.recorded({"stopped": "a"}, 0)  # (needs a call)
    assert not text.recorded({"stopped": {"x": "a"}}, 1)  # (a text, not a mapping)


@pytest.mark.parametrize("termination", ["optimal", "infeasible", "finished", "time_limit", "no_such"])
def test_a_run_termination_is_a_limit_of_the_runs_own(termination: str) -> None:
    """Declaring "optimal" or "infeasible" would let verify skip what proves them; the run's
    time limit needs no declaration."""
    with pytest.raises(ValueError, match="not a limit of a run's own"):
        RunTermination(termination, "k", frozenset({"a"}), "a test's")


def test_tessel_node_limit_is_refused_beside_its_deadline_or_a_text_cut_by() -> None:
    """Review rev22: a forged node_limit next to ``stopped`` (tessel's own deadline passed,
    which ends it time_limit), or with ``cut_by`` a text, is a problem."""
    inst, doc = _v4_capped()
    for forge in ({"stopped": "time limit"}, {"cut_by": "whole_search_states"}):
        forged = copy.deepcopy(doc)
        forged["info"].update(forge)
        assert _termination_problems(forged, inst), forge


def test_libra_iteration_limit_needs_its_solver_calls() -> None:
    """Review rev22: a libra run's rounds always make solver calls; an iteration_limit
    with none recorded is a problem (tessel's residue searches make none: allowed there)."""
    inst = load_instance("libra-gpt3-3d-total500")
    doc = distplan.solve(inst, "libra_perf_lp", max_rounds=2).to_dict()
    assert doc["termination"] == "iteration_limit" and check_result(doc, inst) == []
    doc["solver_results"] = []
    assert _termination_problems(doc, inst)


def test_the_declarations_are_the_formulations_own() -> None:
    declared = {f.name: f.run_terminations for kind in ("pipeline", "bandwidth") for f in formulations(kind) if f.run_terminations}
    assert declared.keys() == {"tessel", "libra_perf_lp", "libra_perf_per_cost"}
    assert declared["tessel"] == (NODE_BUDGETS_CUT,)


def test_libra_perf_lp_cut_by_max_rounds_verifies_and_forged_does_not() -> None:
    inst = load_instance("libra-gpt3-3d-total500")
    doc = distplan.solve(inst, "libra_perf_lp", max_rounds=1).to_dict()
    assert doc["termination"] == "iteration_limit" and doc["info"]["stopped"] == "max_rounds"
    assert check_result(doc, inst) == []
    forged = copy.deepcopy(doc)
    forged["info"]["stopped"] = "max_points"  # (libra_perf_per_cost's reason, not this one's)
    assert _termination_problems(forged, inst)
