"""`distplan verify` on a result file relabelled with another formulation or backend
(review rev29 D1, D2): a placement_milp result renamed placement_search kept bounds only
placement_milp proves, and a result renamed to another backend credited one solver's run
to another; both verified clean. Honest results of every MILP backend, and of the direct
Clarabel path that stands in for cvxpy-CLARABEL, still verify clean."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

import distplan
from distplan.instances import load_instance
from distplan.verify import check_result
from tests.conftest import backend_params, takes_milp

INSTANCE = "placement-small-4"


def honest(backend: str) -> dict[str, Any]:
    res = distplan.solve(INSTANCE, "placement_milp", backend=backend, time_limit=10)
    doc = json.loads(json.dumps(res.to_dict()))
    assert doc["solver_results"] and check_result(doc, load_instance(INSTANCE)) == []
    return doc


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_result_relabelled_with_another_backend_is_a_problem(backend: str) -> None:
    doc = honest(backend)
    other = "scip" if backend != "scip" else "highs"
    forged = copy.deepcopy(doc)
    forged["backend"] = other
    problems = check_result(forged, load_instance(INSTANCE))
    assert any(field == "backend" and f"made by {backend}" in text for field, text in problems), problems
    forged = copy.deepcopy(doc)
    forged["backend_version"] = "HiGHS 99"
    assert any(field == "backend_version" for field, _ in check_result(forged, load_instance(INSTANCE)))


@pytest.mark.parametrize("formulation", ["placement_search"])
def test_a_placement_milp_result_relabelled_as_a_search_is_a_problem(formulation: str) -> None:
    doc = honest("highs")
    assert any(b["source"].startswith("placement_milp dual bound") for b in doc["bounds"])
    forged = copy.deepcopy(doc)
    forged["formulation"] = formulation
    problems = check_result(forged, load_instance(INSTANCE))
    assert any("no solver call's bound placement_search reports" in text for _, text in problems), problems


def test_the_direct_clarabel_path_counts_as_cvxpy_clarabel() -> None:
    pytest.importorskip("clarabel")
    res = distplan.solve("libra-dlrm-3d-total500", "libra_perf", backend="cvxpy-CLARABEL")
    doc = json.loads(json.dumps(res.to_dict()))
    assert {c["backend"] for c in doc["solver_results"]} == {"clarabel-direct"}
    assert check_result(doc, load_instance("libra-dlrm-3d-total500")) == []
    doc["backend"] = "cvxpy-SCIP"
    assert any(field == "backend" for field, _ in check_result(doc, load_instance("libra-dlrm-3d-total500")))
