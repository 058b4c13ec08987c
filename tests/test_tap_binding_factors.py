"""The explicit graph's factor tables of tap's Pareto fronts (chain_dp._factors, summed in
Python lists): equal, bit for bit, to the rule written out with numpy arrays."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from distplan.formulations.sharding.chain_dp import _factors
from distplan.formulations.sharding.chain_fronts import finite_mask
from tests.test_tap_dp import _one_chain
from tests.test_tap_exact import tight


@pytest.mark.parametrize("perturbed", [False, True])
@pytest.mark.parametrize(("layers", "mesh", "frac", "bandwidth"), [(6, 8, 0.05, 2.5e10), (5, 4, 0.3, None)])
def test_factor_tables_follow_the_rule_bit_for_bit(layers: int, mesh: int, frac: float, bandwidth: float | None, perturbed: bool) -> None:
    """One table per edge, rows (u strategy, v strategy) in row-major order, cost = edge
    cost + the cost of each end node not taken by an earlier edge (in that order of
    additions), memory the same nodes' memory (zero without memory), rows of infinite cost
    (or >= INFINITE_SECONDS) removed; then one table per node without edges; floors the
    least memory and least cost + lam x memory."""
    _, graph, _, _ = _one_chain(tight(layers, mesh, frac, bandwidth))
    if perturbed:  # nonzero costs at both ends of every edge, so the order of the additions shows in the bits
        rng = np.random.default_rng(layers)
        graph = dataclasses.replace(
            graph,
            node_cost=[np.asarray(c, float) + rng.random(np.shape(c)) * 1e-3 for c in graph.node_cost],
            edge_cost=[np.asarray(c, float) + rng.random(np.shape(c)) * 1e-4 for c in graph.edge_cost],
        )
    order_shows = False
    dom = graph.strategy_counts()
    for memory in (True, False):
        for lam in (0.0, 2.5e-11):
            tables, got_dom = _factors(graph, memory, lam)
            assert np.array_equal(got_dom, dom)
            want = []
            taken = np.zeros(dom.size, dtype=bool)
            for e, (u, v) in enumerate(zip(graph.edge_u.tolist(), graph.edge_v.tolist())):
                cost = np.array(graph.edge_cost[e], dtype=float)
                mem = np.zeros(cost.shape)
                if perturbed and not taken[u] and not taken[v]:  # (edge + u) + v against (edge + v) + u
                    cu, cv = np.asarray(graph.node_cost[u], float)[:, None], np.asarray(graph.node_cost[v], float)[None, :]
                    order_shows |= bool(np.any((cost + cu) + cv != (cost + cv) + cu))
                for x, axis in ((u, 1), (v, 0)):
                    if not taken[x]:
                        taken[x] = True
                        cost = cost + np.expand_dims(np.asarray(graph.node_cost[x], float), axis)
                        mem = mem + np.expand_dims(np.asarray(graph.node_memory[x], float), axis)
                iu, iv = np.divmod(np.arange(cost.size), cost.shape[1])
                want.append(([u, v], [iu, iv], cost.ravel(), mem.ravel()))
            for x in np.flatnonzero(~taken).tolist():
                want.append(([x], [np.arange(dom[x])], np.asarray(graph.node_cost[x], float), np.asarray(graph.node_memory[x], float)))
            assert len(tables) == len(want)
            for t, (live, cols, cost, mem) in zip(tables, want):
                ok = finite_mask(cost)
                m = mem[ok] if memory else np.zeros(int(ok.sum()))
                assert t.live == live
                assert np.array_equal(t.cost, cost[ok]) and np.array_equal(t.mem, m)
                assert all(np.array_equal(t.asg[:, x], c[ok]) for x, c in zip(live, cols))
                assert (t.asg[:, [y for y in range(dom.size) if y not in live]] == -1).all()
                if m.size:
                    assert t.floor == m.min() and t.wfloor == (cost[ok] + lam * m).min()
    assert order_shows or not perturbed
