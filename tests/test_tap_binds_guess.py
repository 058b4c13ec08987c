"""tap's guess that memory binds (distplan/formulations/sharding/chain_dp.py: `_memory_binds`,
`BINDS_BELOW`): when the budget is far below the memory of the plan of cheapest nodes,
`solve_by_dp` skips the memory-free problem and starts the Lagrangian search from the Pareto
arcs' cheapest plan. A guess only: right or wrong, the plan's cost and the bound are those
of the path that solves the memory-free problem first (brute-force optimum: alpa_ilp)."""

from __future__ import annotations

import importlib

import pytest

import distplan
from tests.test_tap_exact import tight

chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")


@pytest.mark.parametrize(("mesh", "frac"), [(4, 0.05), (8, 0.3), (4, 1.0), (8, 1.0)])
def test_the_guess_changes_no_result(mesh: int, frac: float) -> None:
    """Always guessing that memory binds (the memory-free plan found on the Pareto arcs when
    it fits), never guessing it, and the default: one cost, optimal, with the bound at most
    the optimum of Alpa's ILP."""
    inst = tight(6, mesh, frac, 2.5e10)
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    got = {}
    for below in (float("inf"), 0.0, chain_dp.BINDS_BELOW):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "BINDS_BELOW", below)
            r = distplan.solve(inst, "tap", mip_gap=1e-9)
        assert r.info["method"] == "dp" and r.status.value == "optimal"
        assert r.bound is not None and r.bound <= alpa.objective * (1 + 1e-9)
        got[below] = r.objective
    assert max(got.values()) == pytest.approx(min(got.values()), rel=1e-12)
    assert min(got.values()) == pytest.approx(alpa.objective, rel=1e-6)


def test_the_guess_reads_the_plan_of_cheapest_nodes() -> None:
    """Far below (the least-memory end of the budget range) it binds; at the memory-free
    optimum's memory it does not (on this GPT that optimum holds more than the plan of
    cheapest nodes)."""
    from distplan.formulations.sharding.chain_program import explicit_graph
    from distplan.formulations.sharding.tap import find_walk_chains

    for frac, binds in ((0.05, True), (1.0, False)):
        inst = tight(6, 8, frac, 2.5e10)
        sk, _, tables, chains, _, _ = find_walk_chains(inst, {})
        graph = explicit_graph(sk, chains, tables)[0]
        assert chain_dp._memory_binds(sk, tables, chains[0], graph, chains[0].copies - 1) is binds
