"""tap's dynamic program walks a chain's first copy too when other nodes feed it as a copy
feeds the next (`chainfold.first_copy_feed`), and makes a copy's Pareto arcs from its core
by one (states x rows) array (`chain_fronts._front_by_state`): both exact."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.sharding import chain_dp
from distplan.formulations.sharding import chain_fronts as cf
from distplan.formulations.sharding.chainfold import first_copy_feed
from distplan.formulations.sharding.tap import DEFAULTS, find_walk_chains
from distplan.instances.transformer import transformer
from tests.test_tap_exact import tight


def _chain(inst: Any) -> tuple[Any, Any, Any]:
    sk, _, tables, chains, _, _ = find_walk_chains(inst, DEFAULTS)
    assert len(chains) == 1
    return sk, tables, chains[0]


def _hetero(layers: int, mesh: int | tuple[int, ...], frac: float) -> Any:
    """`tight` on a mesh whose first axis is slow (25 GB/s), as in bench_sharding."""
    axes = 1 if isinstance(mesh, int) else len(mesh)
    base = transformer(layers, 256, 4, 128, 8, 1000, mesh=mesh, device="V100", memory=1e15, bandwidth=(25e9,) + (240e9,) * (axes - 1))
    free = distplan.solve(base, "alpa_ilp", mip_gap=1e-9).check
    from distplan.formulations.sharding.alpa_ilp import memory_shortfall
    from distplan.formulations.sharding.costgraph import build_cost_graph

    least = memory_shortfall(build_cost_graph(base))[0]
    return base.with_memory(least + frac * (free.details["memory_bytes"] - least))


def test_the_embedding_feeds_a_gpts_first_layer() -> None:
    sk, tables, chain = _chain(tight(6, 4, 0.05))
    feed = first_copy_feed(sk, chain, tables)
    assert feed is not None and feed.size == chain.out_pos.size
    # the node that feeds the first layer: outside the chain, with the out position's strategies
    assert not np.isin(feed, chain.nodes).any()
    for f, p in zip(feed.tolist(), chain.out_pos.tolist()):
        assert len(tables.node(sk, f).strategies) == len(tables.node(sk, int(chain.nodes[0, p])).strategies)
    # a chain that starts one copy later is fed by the copy left out, at its out positions
    u, v = sk.edge_u, sk.edge_v
    one, two = np.isin(u, chain.nodes[1]), np.isin(v, chain.nodes[2])
    later = dataclasses.replace(
        chain,
        nodes=chain.nodes[1:],
        link_edges=np.flatnonzero(one & two),
        internal_edges=np.flatnonzero(np.isin(u, chain.nodes[2]) & two),
    )
    assert later.link_edges.size == chain.link_edges.size and later.internal_edges.size == chain.internal_edges.size
    assert np.array_equal(first_copy_feed(sk, later, tables), chain.nodes[0, chain.out_pos])


def test_a_feed_that_reshards_otherwise_or_a_first_copy_unlike_the_others_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    sk, tables, chain = _chain(tight(5, 4, 0.3))
    assert first_copy_feed(sk, chain, tables) is not None
    feed_edges = [e for e in range(sk.num_edges) if int(sk.edge_v[e]) in set(chain.nodes[0].tolist()) and int(sk.edge_u[e]) not in set(chain.nodes.ravel().tolist())]
    assert feed_edges
    edge = tables.edge

    def other(sk_: Any, e: int) -> np.ndarray:
        M = edge(sk_, e)
        return M * 2.0 + 1e-9 if e == feed_edges[0] else M

    monkeypatch.setattr(tables, "edge", other)
    assert first_copy_feed(sk, chain, tables) is None
    monkeypatch.undo()
    # positions of the first copy swapped: its labels by position are not the second copy's
    nodes = chain.nodes.copy()
    labels = sk.node_label_id
    j, k = next((j, k) for j in range(nodes.shape[1]) for k in range(j) if labels[nodes[0, j]] != labels[nodes[0, k]])
    nodes[0, [j, k]] = nodes[0, [k, j]]
    assert first_copy_feed(sk, dataclasses.replace(chain, nodes=nodes), tables) is None


def _without_feed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(chain_dp, "first_copy_feed", lambda *args: None)


@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(
    layers=st.integers(3, 6),
    mesh=st.sampled_from([4, 8, (2, 2)]),
    frac=st.sampled_from([0.0, 0.05, 0.3, 1.0]),
    hetero=st.booleans(),
)
def test_walking_the_first_copy_gives_the_optimum_of_alpa_ilp_and_of_the_explicit_first_copy(monkeypatch: pytest.MonkeyPatch, layers: int, mesh: int | tuple[int, int], frac: float, hetero: bool) -> None:
    inst = _hetero(layers, mesh, frac) if hetero else tight(layers, mesh, frac)
    sk, tables, chain = _chain(inst)
    assert first_copy_feed(sk, chain, tables) is not None
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    fed = distplan.solve(inst, "tap", mip_gap=1e-9)
    with monkeypatch.context() as m:
        _without_feed(m)
        explicit = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert fed.info["method"] == explicit.info["method"] == "dp"
    assert fed.objective == pytest.approx(alpa.objective, rel=1e-6)
    assert fed.objective == pytest.approx(explicit.objective, rel=1e-12)
    assert fed.status.value == "optimal" and fed.bound is not None and fed.bound <= alpa.objective and fed.bound <= fed.objective


def _fronts(t: cf._Table, P: int, out: list[int]) -> dict[tuple[int, tuple[int, ...], float], float]:
    """Per (previous state, out strategies, bytes) of a front: its seconds."""
    return {(int(row[P]), tuple(int(x) for x in row[out]), float(m)): float(c) for row, m, c in zip(t.asg, t.mem, t.cost)}


@pytest.mark.parametrize("mesh,hetero,forbid", [(4, False, False), (8, True, False), ((2, 2), False, True), (4, True, True)])
def test_the_copy_front_by_state_is_the_eliminations(mesh: int | tuple[int, int], hetero: bool, forbid: bool) -> None:
    inst = _hetero(4, mesh, 0.3) if hetero else tight(4, mesh, 0.3)
    sk, tables, chain = _chain(inst)
    n, S = chain.positions, chain.num_states
    P = n
    dom, node_f, internal_f, link_f, pairs, _, by_state = cf._copy_factors(chain, sk, tables)
    out = chain.out_pos.tolist()
    if forbid:  # reshardings the mesh does not allow (infinite seconds): the first link from state 0
        b, M = by_state[0]
        M = M.copy()
        M[0, :] = np.inf
        by_state[0] = (b, M)
        flat = np.arange(S * dom[b])
        link_f[0] = cf._factor(n + 1, [P, b], [flat // dom[b], flat % dom[b]], M.ravel(), np.zeros(flat.size))
    interface = sorted(set(out) | {b for a, b in pairs if a == P})
    core = cf._reduce(node_f + internal_f, interface, dom)
    states = cf._factor(n + 1, [P], [np.arange(S)], np.zeros(S), np.zeros(S))
    dense = cf._front_by_state(core, by_state, P, out, dom, chain.out_sizes, np.inf)
    eliminated = cf._eliminate(core + [states] + link_f, [P, *out], dom)
    got, want = _fronts(dense, P, out), _fronts(eliminated, P, out)
    assert len(got) == dense.cost.size and got.keys() == want.keys()
    # the costs agree up to the order of the sums, and each row's cost is its assignment's
    for key, c in got.items():
        assert c == pytest.approx(want[key], rel=1e-12)
    for row, c in zip(dense.asg, dense.cost):
        total = sum(float(t.cost[np.flatnonzero((t.asg[:, t.live] == row[t.live]).all(axis=1))[0]]) for t in node_f + internal_f + link_f)
        assert c == pytest.approx(total, rel=1e-12)
    if forbid:  # no copy after state 0
        assert not (dense.asg[:, P] == 0).any() and (dense.asg[:, P] == 1).any()


@settings(max_examples=150, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), states=st.integers(1, 8), rows=st.integers(1, 60), values=st.integers(1, 12), forbidden=st.sampled_from([0.0, 0.1, 0.5]))
def test_the_pareto_rows_per_state_are_pareto_rows_over_the_finite_entries(seed: int, states: int, rows: int, values: int, forbidden: float) -> None:
    """`_pareto_per_state` keeps `pareto_rows`' rows (keyed by state x states + own key, over
    the finite entries), in its order, ties and NaN (forbidden) included."""
    rng = np.random.default_rng(seed)
    cost = rng.integers(0, values, (states, rows)) * 0.25
    cost[rng.random((states, rows)) < forbidden] = np.inf
    if forbidden and rng.random() < 0.5:
        cost[rng.random((states, rows)) < forbidden / 2] = np.nan
    own = rng.integers(0, states, rows)
    mem = rng.integers(0, values, rows).astype(float)
    prev, row = cf._pareto_per_state(cost, own, mem)
    key = (np.arange(states)[:, None] * states + own[None, :]).ravel()
    flat = cost.ravel()
    ok = np.isfinite(flat).nonzero()[0]
    want = ok[cf.pareto_rows(key[ok], flat[ok], np.broadcast_to(mem, (states, rows)).ravel()[ok])]
    assert np.array_equal(prev * rows + row, want)


@pytest.mark.parametrize("mesh,hetero,frac", [(4, False, 0.05), (8, True, 0.3), ((2, 2), False, 0.0), (8, False, 1.0)])
def test_small_parts_of_the_explicit_graph_give_the_fronts_of_its_factors(monkeypatch: pytest.MonkeyPatch, mesh: int | tuple[int, int], hetero: bool, frac: float) -> None:
    """`_side_fronts` on parts enumerated whole (`_small_parts`) keeps the Pareto rows
    that elimination over the edge tables keeps, with the same costs; and the whole solve
    is the same either way."""
    from distplan.formulations.sharding.chain_program import explicit_graph

    inst = _hetero(4, mesh, frac) if hetero else tight(4, mesh, frac)
    sk, tables, chain = _chain(inst)
    feed = first_copy_feed(sk, chain, tables)
    assert feed is not None
    graph, origin, virtual = explicit_graph(sk, [chain], tables, 0)
    start = [int(np.flatnonzero(origin == x)[0]) for x in feed.tolist()]
    end = [int(x) for x in virtual[0].tolist()]
    if not isinstance(mesh, int):  # (2-D meshes: more strategies, the head's part is too large)
        assert chain_dp._small_parts(graph) is None
    for slack in (np.inf, float(inst.memory_budget) * 0.05) if isinstance(mesh, int) else ():
        assert chain_dp._small_parts(graph) is not None
        small = chain_dp._side_fronts(graph, start, end, slack, np.inf)
        with monkeypatch.context() as m:
            m.setattr(chain_dp, "SMALL_PART", 0)
            assert chain_dp._small_parts(graph) is None
            factored = chain_dp._side_fronts(graph, start, end, slack, np.inf)
        assert small is not None and factored is not None
        for got, want, keys in zip(small, factored, (start, end)):
            a, b = _fronts(got, keys[0], keys[1:]), _fronts(want, keys[0], keys[1:])
            assert a.keys() == b.keys()
            for key, c in a.items():
                assert c == pytest.approx(b[key], rel=1e-12)
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    fast = distplan.solve(inst, "tap", mip_gap=1e-9)
    monkeypatch.setattr(chain_dp, "SMALL_PART", 0)
    slow = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert fast.objective == pytest.approx(slow.objective, rel=1e-12) and fast.objective == pytest.approx(alpa.objective, rel=1e-6)


def _with_edge(sk: Any, u: int, v: int) -> Any:
    """The skeleton with one more edge u -> v (of a new edge label)."""
    return dataclasses.replace(
        sk,
        edge_u=np.append(sk.edge_u, u),
        edge_v=np.append(sk.edge_v, v),
        edge_label_id=np.append(sk.edge_label_id, int(sk.edge_label_id.max()) + 1),
    )


def test_a_first_copy_joined_otherwise_or_an_out_position_without_a_feed_is_refused() -> None:
    """The feed is refused when the first copy has an edge to a node other than the second
    copy, when an edge into it comes from inside the chain (in place of the embedding's),
    and when an out position has no
    node that feeds it (no link of its own)."""
    sk, tables, chain = _chain(tight(5, 4, 0.05))
    assert first_copy_feed(sk, chain, tables) is not None
    head = int(np.setdiff1d(np.arange(sk.num_nodes), chain.nodes.ravel()).max())  # (a node after the chain)
    assert first_copy_feed(_with_edge(sk, int(chain.nodes[0, 0]), head), chain, tables) is None
    # an edge that feeds the first copy moved to come from the third copy's out position
    first = set(chain.nodes[0].tolist())
    feed = next(e for e in range(sk.num_edges) if int(sk.edge_v[e]) in first and int(sk.edge_u[e]) not in first)
    moved = dataclasses.replace(sk, edge_u=sk.edge_u.copy())
    moved.edge_u[feed] = chain.nodes[2, chain.out_pos[0]]
    assert first_copy_feed(moved, chain, tables) is None
    # a second out position that nothing links: no node feeds it
    linked = {int(sk.edge_u[e]) for e in chain.link_edges.tolist()}
    unlinked = next(j for j in range(chain.positions) if int(chain.nodes[0, j]) not in linked)
    sizes = np.append(chain.out_sizes, len(tables.node(sk, int(chain.nodes[0, unlinked])).strategies))
    two = dataclasses.replace(chain, out_pos=np.array(sorted([*chain.out_pos.tolist(), unlinked])), out_sizes=sizes)
    assert first_copy_feed(sk, two, tables) is None


@pytest.mark.parametrize("mesh", [4, (2, 2)])
def test_a_two_stage_walk_from_its_first_copy_gives_the_optimum(monkeypatch: pytest.MonkeyPatch, mesh: int | tuple[int, int]) -> None:
    """With the copy's separator taken whatever its size (`_separator` given a huge state
    count: the same separator, found where the few-arcs test would refuse it), a copy is two
    walk steps through it; walked from the first copy (fed by the embedding) the plan is the
    optimum of alpa_ilp and of the walk with the first copy explicit."""
    separator = cf._separator
    monkeypatch.setattr(cf, "_separator", lambda n, P, pairs, out, dom, states: separator(n, P, pairs, out, dom, 10**9))
    inst = tight(5, mesh, 0.05)
    sk, tables, chain = _chain(inst)
    chain.arcs = cf.segment_fronts(chain, sk, tables)
    assert chain.num_walk_states > chain.num_states and first_copy_feed(sk, chain, tables) is not None
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    fed = distplan.solve(inst, "tap", mip_gap=1e-9)
    _without_feed(monkeypatch)
    explicit = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert fed.info["method"] == explicit.info["method"] == "dp"
    assert fed.objective == pytest.approx(alpa.objective, rel=1e-6) and fed.objective == pytest.approx(explicit.objective, rel=1e-12)
    assert fed.bound is not None and fed.bound <= alpa.objective


def test_cost_tables_hand_out_arrays_that_cannot_be_written_and_nan_memory_has_no_pareto_order() -> None:
    """`CostTables` shares one array per node and edge label, which tap's factor tables keep
    uncopied: writing into one raises instead of changing every later use. A NaN memory has
    no place in `_pareto_per_state`'s order (as in `pareto_rows`)."""
    sk, tables, chain = _chain(tight(3, 4, 0.3))
    node = tables.node(sk, int(chain.nodes[1, 0]))
    for array in (node.cost, node.memory, tables.edge(sk, int(chain.link_edges[0]))):
        with pytest.raises(ValueError):
            array[0] = 0.0
    with pytest.raises(ValueError, match="NaN"):
        cf._pareto_per_state(np.zeros((2, 3)), np.zeros(3, dtype=np.int64), np.array([1.0, np.nan, 2.0]))
