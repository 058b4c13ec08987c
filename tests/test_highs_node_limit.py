"""HiGHS reports its node limits as "Solution limit reached" (as it does
``mip_max_improving_sols``): distplan records them as node_limit (review rev16:
``mip_max_nodes=0`` read solution_limit)."""

from __future__ import annotations

import pytest

import distplan
from distplan.solvers.result import LIMIT_TERMINATIONS, Termination


@pytest.mark.parametrize("backend", ["highs", "pulp-highs"])
def test_a_node_limit_reads_node_limit(backend: str) -> None:
    res = distplan.solve("placement-small-1", "placement_milp", backend=backend, solver_options={"mip_max_nodes": 0})
    calls = [s for s in res.solver_results if s.raw_status.startswith("Solution limit reached")]
    assert calls and all(s.termination is Termination.NODE_LIMIT for s in calls)
    assert Termination.NODE_LIMIT in LIMIT_TERMINATIONS

