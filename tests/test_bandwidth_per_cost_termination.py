"""libra_perf_per_cost's termination says why its search stopped when it did not prove
its plan: its ``max_points`` ("iteration_limit", ``info["stopped"]``), and `distplan
verify` accepts that only with the record. It used to copy the last solver call's
"optimal" (a budget point solved) beside status "feasible"."""

from __future__ import annotations

import json
from typing import Any

import pytest

import distplan
from distplan.verify import check_solver_calls
from tests.conftest import backend_params, takes_convex


def _record(result: distplan.Result) -> dict[str, Any]:
    return json.loads(json.dumps(result.to_dict(), default=str))


@pytest.mark.parametrize("backend", backend_params(takes_convex))
def test_a_search_cut_by_max_points_says_so(backend: str) -> None:
    result = distplan.solve("libra-resnet50-3d-total500", "libra_perf_per_cost", backend=backend, max_points=1)
    assert result.status.value == "feasible" and result.gap is not None and result.gap > 1e-6
    assert result.termination.value == "iteration_limit" and result.info["stopped"] == "max_points"
    doc = _record(result)
    assert check_solver_calls(doc) == []
    doc["info"]["stopped"] = "closed"  # a record without the reason: the last call's word stands
    assert any(field == "termination" for field, _ in check_solver_calls(doc))


def test_a_proven_search_keeps_its_last_calls_optimal() -> None:
    result = distplan.solve("libra-resnet50-3d-total500", "libra_perf_per_cost")
    assert result.status.value == "optimal" and result.termination.value == "optimal" and "stopped" not in result.info
