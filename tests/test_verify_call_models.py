"""Each formulation declares the programs its solver calls solve (`Formulation.solves`), and
`distplan verify` holds a result to its formulation's declaration: a result relabelled
with another formulation whose proofs it shares passed before (a MILP's plan and calls
credited to a heuristic; alpa_ilp's to tap; tag_sfb's to codec_select). `distplan.solve`
holds every run to the declaration (a `ContractError`), so the whole suite checks that
honest runs keep to what their formulations declare. From record_version 5 every call
records its model's name, the conic programs' calls included."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import distplan
import distplan.errors
from distplan.formulations.placement import milp
from distplan.formulations.registry import Formulation, formulations, from_blocks, get_formulation, register
from distplan.instances import load_instance
from distplan.solvers.result import MODEL_NAMES_SINCE, RECORD_VERSION, RECORD_VERSION_KEY
from distplan.verify import check_result
from tests.conftest import backend_params, skip_unless_available, takes_convex, takes_milp

#: (instance, formulation that makes solver calls, formulations it must not pass for)
RELABELS = [
    ("gpt-4layer-memtight", "alpa_ilp", ("tap", "megatron", "data_parallel")),
    ("placement-small-2", "placement_milp", ("baechi_sct", "baechi_etf", "baechi_topo", "single_device", "placement_search")),
    ("placement-small-2", "baechi_sct", ("placement_milp", "baechi_etf")),
    ("compression-bert-large", "tag_sfb", ("codec_select", "sfb_poseidon_rule", "greedy_by_saving", "allreduce_all", "tag_sfb_maxflow")),
    ("compression-bert-large", "codec_select", ("tag_sfb",)),
    ("libra-dlrm-3d-total500", "libra_perf_lp", ("libra_perf", "equal_bw", "proportional_to_traffic", "libra_perf_per_cost")),
]


def solved(instance: str, formulation: str, backend: str = "highs") -> dict[str, Any]:
    doc = json.loads(json.dumps(distplan.solve(instance, formulation, backend=backend, time_limit=20).to_dict()))
    assert doc["solver_results"], "the case needs a run with solver calls"
    notes: list[str] = []
    assert check_result(doc, load_instance(instance), notes) == [] and notes == []
    return doc


def model_problems(doc: dict[str, Any], instance: str) -> list[tuple[str, str]]:
    return [(f, t) for f, t in check_result(doc, load_instance(instance)) if f == "solver_results" or f.endswith("extra.model.name")]


@pytest.mark.parametrize(("instance", "formulation", "relabels"), RELABELS, ids=[f"{f}-{i}" for i, f, _ in RELABELS])
def test_a_result_relabelled_with_a_formulation_that_solves_other_programs_is_a_problem(instance: str, formulation: str, relabels: tuple[str, ...]) -> None:
    doc = solved(instance, formulation)
    for other in relabels:
        forged = copy.deepcopy(doc)
        forged["formulation"] = other
        problems = model_problems(forged, instance)
        assert problems, f"{formulation}'s result passed as {other}'s"
        if get_formulation(load_instance(instance).kind, other).solves == ():
            assert "makes none" in problems[0][1], problems
        else:
            assert "another formulation's" in problems[0][1] and problems[0][0].startswith("solver_results["), problems


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_every_milp_backend_names_what_it_solved(backend: str) -> None:
    """The declaration holds whichever backend solved the program, and a relabel is caught
    on each."""
    doc = solved("gpt-4layer-memtight", "alpa_ilp", backend)
    assert {c["extra"]["model"]["name"] for c in doc["solver_results"]} <= {"alpa_ilp", "alpa_ilp_lp"}
    forged = copy.deepcopy(doc)
    forged["formulation"] = "tap"
    assert model_problems(forged, "gpt-4layer-memtight")


@pytest.mark.parametrize("backend", backend_params(takes_convex))
def test_conic_calls_record_the_program_they_solved(backend: str) -> None:
    """The time program's calls record its name, by cvxpy or by the direct Clarabel path
    (cvxpy-CLARABEL), where record_version 4 recorded none; dropped, it is a problem."""
    doc = json.loads(json.dumps(distplan.solve("libra-dlrm-3d-total500", "libra_perf", backend=backend, time_limit=20).to_dict()))
    names = [c["extra"]["model"]["name"] for c in doc["solver_results"]]
    assert "libra-time-program" in names, names
    assert check_result(doc, load_instance("libra-dlrm-3d-total500")) == []
    k = names.index("libra-time-program")
    forged = copy.deepcopy(doc)
    del forged["solver_results"][k]["extra"]["model"]["name"]
    problems = check_result(forged, load_instance("libra-dlrm-3d-total500"))
    assert (f"solver_results[{k}].extra.model.name" in {f for f, _ in problems}), problems


@pytest.mark.parametrize("backend", [pytest.param("cvxpy-CLARABEL", marks=skip_unless_available("cvxpy-CLARABEL"))])
def test_the_budget_program_and_the_cheapest_network_are_named(backend: str) -> None:
    doc = json.loads(json.dumps(distplan.solve("libra-dlrm-3d-total500", "libra_perf_per_cost", backend=backend, time_limit=20).to_dict()))
    names = {c["extra"]["model"]["name"] for c in doc["solver_results"]}
    assert {"libra-budget-program", "min-cost"} <= names, names
    assert check_result(doc, load_instance("libra-dlrm-3d-total500")) == []


def test_a_call_without_a_model_name_is_a_problem_from_version_5_and_a_note_before() -> None:
    doc = solved("gpt-4layer-memtight", "alpa_ilp")
    assert doc[RECORD_VERSION_KEY] == RECORD_VERSION >= MODEL_NAMES_SINCE == 5
    del doc["solver_results"][0]["extra"]["model"]["name"]
    problems = check_result(doc, load_instance("gpt-4layer-memtight"))
    assert "solver_results[0].extra.model.name" in {f for f, _ in problems}, problems
    doc[RECORD_VERSION_KEY] = MODEL_NAMES_SINCE - 1
    notes: list[str] = []
    problems = check_result(doc, load_instance("gpt-4layer-memtight"), notes)
    assert not any(f.endswith("extra.model.name") for f, _ in problems), problems
    assert any("record no model name" in n for n in notes), notes
    # an older record still holds the names it has to the declaration
    doc["solver_results"][0]["extra"]["model"]["name"] = "tap"
    assert model_problems(doc, "gpt-4layer-memtight")


def test_every_registered_formulation_declares_what_it_solves() -> None:
    """The registry's own formulations all declare (None is for a user's variant with a
    driver); one that makes no calls declares (), and each pattern compiles."""
    import re

    for form in formulations():
        assert form.solves is not None, form.name
        for pattern in form.solves:
            re.compile(pattern)
    assert get_formulation("placement", "baechi_etf").solves == ()
    assert get_formulation("sharding", "alpa_ilp").undeclared_models(["alpa_ilp", "tap", None]) == ["tap", None]


def _variant(name: str, solves: tuple[str, ...] | None = None) -> Formulation:
    return from_blocks("placement", name, "placement MILP without memory rows (test)", spec=milp.PLACEMENT_MILP.without(milp.memory_capacity), program="milp", exact=False, solves=solves)


def test_a_variant_from_blocks_declares_its_one_model_and_solve_holds_runs_to_it() -> None:
    """A variant declared from blocks without a driver solves its one model, named after
    it (the README's example verifies clean); a run whose call solved a model its
    declaration does not name is a ContractError of `distplan.solve` (a programming
    error), never a result verify would reject."""
    ok = register(_variant("milp_no_memory_calls_test"))
    assert ok.solves == ("milp_no_memory_calls_test",)
    res = distplan.solve("placement-small-1", ok.name, time_limit=20)
    doc = json.loads(json.dumps(res.to_dict()))
    assert [c["extra"]["model"]["name"] for c in doc["solver_results"]] == [ok.name]
    assert check_result(doc, load_instance("placement-small-1")) == []
    bad = register(_variant("milp_misdeclared_calls_test", solves=("something-else",)))
    with pytest.raises(distplan.errors.InternalError, match="ContractError.*solved model .milp_misdeclared_calls_test."):
        distplan.solve("placement-small-1", bad.name, time_limit=20)
