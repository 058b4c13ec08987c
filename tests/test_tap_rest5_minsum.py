"""The memory-free pieces of tap's dynamic program (`chain_minsum`) against their earlier
forms, bit for bit: bucket elimination (`min_sum`, order bookkeeping kept up to date
eagerly, min through the ufunc), and `scalar_sides` / `cheapest_copy_arcs` (infinite costs
checked once over all factors), on random factors with ties and infinite entries and on the
explicit graphs and chains of small GPTs, with infinite costs injected."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding import chain_minsum
from distplan.formulations.sharding.alpa_ilp import INFINITE_SECONDS
from distplan.formulations.sharding.chain_fronts import finite_mask
from distplan.formulations.sharding.chain_program import explicit_graph
from distplan.formulations.sharding.chainfold import find_chains
from distplan.formulations.sharding.costgraph import CostTables
from distplan.formulations.sharding.tap import fold_instance
from distplan.models.graphs import component_roots
from tests.test_tap_exact import tight


def reference_finite(x: np.ndarray) -> np.ndarray:
    return np.where(finite_mask(np.asarray(x, float)), np.asarray(x, float), np.inf)


def reference_min_sum(dom: list[int], factors: list, keys: list[int], max_rows: float) -> tuple[np.ndarray, np.ndarray] | None:
    """`min_sum` as written before (scope sizes computed lazily, ``.min``)."""
    table = dict(enumerate(factors))
    by_var: dict[int, set[int]] = {}
    for fid, (scope, _) in table.items():
        for y in scope:
            by_var.setdefault(y, set()).add(fid)
    free = sorted(set(by_var) - set(keys))
    scopes: dict[int, set[int]] = {x: set() for x in by_var}
    for vars_, _ in factors:
        for y in vars_:
            scopes[y].update(vars_)
    trace = []

    def joined(ids: list[int], scope: list[int]) -> np.ndarray:
        shape = [dom[y] for y in scope]
        total = None
        for f in ids:
            vars_, arr = table.pop(f)
            part = arr.reshape([dom[y] if y in vars_ else 1 for y in scope])
            total = part if total is None else total + part
        if total is None:
            return np.zeros(shape)
        return total if list(total.shape) == shape else np.broadcast_to(total, shape)

    next_id = len(factors)
    while free:
        x = min(free, key=lambda z: math.prod(dom[w] for w in scopes[z]))
        free.remove(x)
        scope = sorted(scopes[x])
        if math.prod(dom[z] for z in scope) > max_rows:
            return None
        ids = sorted(by_var.pop(x))
        for f in ids:
            for y in table[f][0]:
                if y != x:
                    by_var[y].discard(f)
        total = joined(ids, scope)
        ax = scope.index(x)
        rest = tuple(y for y in scope if y != x)
        for y in rest:
            scopes[y].update(rest)
            scopes[y].discard(x)
        trace.append((x, rest, total.argmin(axis=ax)))
        table[next_id] = (rest, total.min(axis=ax))
        for y in rest:
            by_var[y].add(next_id)
        next_id += 1
    order = sorted(keys)
    if math.prod(dom[k] for k in keys) > max_rows:
        return None
    total = joined(list(table), order)
    dense = np.transpose(total, [order.index(k) for k in keys]).reshape(-1) if keys else total.reshape(1)
    digits = np.unravel_index(np.arange(dense.size), [dom[k] for k in keys]) if keys else ()
    assign = {k: d.astype(np.int64) for k, d in zip(keys, digits)}
    for x, rest, arg in reversed(trace):
        got = arg[tuple(assign[y] for y in rest)]
        assign[x] = got if got.shape == (dense.size,) else np.broadcast_to(got, (dense.size,))
    asg = np.full((dense.size, len(dom)), -1, dtype=np.int64)
    for y, vals in assign.items():
        asg[:, y] = vals
    return dense, asg


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 7), keys=st.integers(0, 3), values=st.integers(1, 4))
def test_min_sum_equals_its_earlier_form(seed: int, n: int, keys: int, values: int) -> None:
    """Same tables and the same assignments (first least entries, ties common with few
    values), or None alike under a row limit."""
    rng = np.random.default_rng(seed)
    dom = rng.integers(1, 5, n).tolist()
    factors = []
    for _ in range(int(rng.integers(1, 3 * n + 2))):
        scope = tuple(sorted(rng.choice(n, size=int(rng.integers(1, min(n, 3) + 1)), replace=False).tolist()))
        arr = rng.integers(0, values, [dom[y] for y in scope]).astype(float) * 0.1
        arr[rng.random(arr.shape) < 0.1] = np.inf
        factors.append((scope, arr))
    key_vars = rng.choice(n, size=min(keys, n), replace=False).tolist()  # in any order
    for max_rows in (1e9, 8):
        got = chain_minsum.min_sum(dom, factors, key_vars, max_rows)
        want = reference_min_sum(dom, factors, key_vars, max_rows)
        assert (got is None) == (want is None)
        if got is not None and want is not None:
            assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])


def reference_scalar_sides(graph, start_vars: list[int], end_vars: list[int], max_rows: float, lam: float = 0.0, measure: bool = False) -> tuple | None:
    """`scalar_sides` as written before (each factor made finite on its own)."""
    dom = graph.strategy_counts().tolist()
    n = len(dom)
    eu, ev = graph.edge_u, graph.edge_v
    comp = component_roots(n, eu, ev)
    end_comps = set(comp[end_vars].tolist())
    if end_comps & set(comp[start_vars].tolist()):
        return None
    at_end = np.isin(comp, list(end_comps))
    sides: list[list] = [[], []]
    for i in range(n):
        sides[int(at_end[i])].append(((i,), reference_finite(graph.node_cost[i]) + (lam * np.asarray(graph.node_memory[i], float) if lam else 0.0)))
    for e in range(eu.size):
        u, v = int(eu[e]), int(ev[e])
        M = reference_finite(graph.edge_cost[e])
        sides[int(at_end[u])].append(((u, v), M) if u < v else ((v, u), M.T))
    out = []
    for side, (factors, keys) in enumerate(zip(sides, (start_vars, end_vars))):
        got = reference_min_sum(dom, factors, keys, max_rows)
        if got is None:
            return None
        dense, asg = got
        ok = np.isfinite(dense)
        asg, cost, mem = asg[ok], dense[ok], np.zeros(int(ok.sum()))
        if measure:
            cost = np.zeros(mem.size)
            for i in np.flatnonzero(at_end == bool(side)).tolist():
                cost += np.asarray(graph.node_cost[i], float)[asg[:, i]]
                mem += np.asarray(graph.node_memory[i], float)[asg[:, i]]
            for e in np.flatnonzero(at_end[eu] == bool(side)).tolist():
                cost += np.asarray(graph.edge_cost[e], float)[asg[:, int(eu[e])], asg[:, int(ev[e])]]
        out.append((list(keys), asg, cost, mem))
    return out[0], out[1]


def reference_copy_arcs(chain, sk, tables, max_rows: float) -> dict | None:
    """`cheapest_copy_arcs` as written before."""
    n, S = chain.positions, chain.num_states
    rep = chain.nodes[1]
    nodes = [tables.node(sk, int(i)) for i in rep.tolist()]
    dom = [len(nc.strategies) for nc in nodes] + [S]
    P = n
    pos_of = {int(node): j for j, node in enumerate(rep.tolist())}
    pos_prev = {int(node): j for j, node in enumerate(chain.nodes[0].tolist())}
    out_index = {int(p): k for k, p in enumerate(chain.out_pos.tolist())}
    factors = [((j,), reference_finite(nc.cost)) for j, nc in enumerate(nodes)]
    factors.append(((P,), np.zeros(S)))
    for e in chain.internal_edges.tolist():
        u, v = pos_of[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        M = reference_finite(tables.edge(sk, e))
        factors.append(((u, v), M) if u < v else ((v, u), M.T))
    digits = chain.digits(np.arange(S))
    for e in chain.link_edges.tolist():
        a, b = pos_prev[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        factors.append(((b, P), reference_finite(tables.edge(sk, e)[digits[:, out_index[a]]]).T))
    got = reference_min_sum(dom, factors, [P] + [int(p) for p in chain.out_pos.tolist()], max_rows)
    if got is None:
        return None
    dense, asg = got
    ok = np.flatnonzero(np.isfinite(dense))
    strat = asg[ok, :n]
    memory = np.zeros(ok.size)
    for j, nc in enumerate(nodes):
        memory += np.asarray(nc.memory, float)[strat[:, j]]
    return {"prev": asg[ok, P], "cur": ok % max(1, S), "first": np.ones(ok.size, dtype=bool), "cost": dense[ok], "memory": memory, "strategy": strat}


class _Poisoned(CostTables):
    """Cost tables with some entries at or beyond `INFINITE_SECONDS` (and one NaN), so the
    masked path of the finiteness check runs."""

    def __init__(self, inst, seed: int) -> None:
        super().__init__(inst)
        self._rng = np.random.default_rng(seed)
        self._poisoned: dict[int, np.ndarray] = {}

    def edge(self, sk, e: int) -> np.ndarray:
        got = self._poisoned.get(e)
        if got is None:
            got = np.array(super().edge(sk, e), dtype=float)
            bad = self._rng.random(got.shape) < 0.2
            got[bad] = INFINITE_SECONDS * self._rng.choice([1.0, 3.0], size=int(bad.sum()))
            if got.size > 2 and e % 3 == 0:
                got.flat[1] = np.nan
            self._poisoned[e] = got
        return got


def _same(a: object, b: object) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return np.array_equal(np.asarray(a), np.asarray(b)) and np.asarray(a).dtype == np.asarray(b).dtype


@pytest.mark.parametrize("poison", [None, 1, 2])
@pytest.mark.parametrize("layers,mesh,bandwidth", [(5, 4, None), (6, 8, 2.5e10), (5, (2, 2), None)])
def test_sides_and_copy_arcs_equal_their_earlier_forms(layers: int, mesh: int | tuple[int, int], bandwidth: float | None, poison: int | None) -> None:
    inst = tight(layers, mesh, 0.3, bandwidth)
    sk, fold = fold_instance(inst, {})
    tables = CostTables(inst) if poison is None else _Poisoned(inst, poison)
    (chain,), _ = find_chains(sk, fold, CostTables(inst))
    got = chain_minsum.cheapest_copy_arcs(chain, sk, tables, 1e6)
    want = reference_copy_arcs(chain, sk, tables, 1e6)
    assert (got is None) == (want is None) and (got is None or _same(got, want))
    graph, origin, virtual = explicit_graph(sk, [chain], tables)
    if poison is not None:  # infinite node costs too
        graph.node_cost = [np.where(np.arange(c.size) % 3 == poison, INFINITE_SECONDS, c) for c in graph.node_cost]
    start = [int(np.flatnonzero(origin == chain.nodes[0, p])[0]) for p in chain.out_pos.tolist()]
    end = virtual[0].tolist()
    for lam, measure in ((0.0, False), (0.0, True), (3.7e-11, True), (3.7e-11, False)):
        sides = chain_minsum.scalar_sides(graph, start, end, 1e6, lam, measure)
        ref = reference_scalar_sides(graph, start, end, 1e6, lam, measure)
        assert (sides is None) == (ref is None)
        if sides is not None and ref is not None:
            for table, (keys, asg, cost, mem) in zip(sides, ref):
                assert table.live == keys and _same(table.asg, asg) and _same(table.cost, cost) and _same(table.mem, mem)
