"""tap's short cuts (issue 16): each gives exactly what the long way gives."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding import chain_fronts
from distplan.formulations.sharding.chain_fronts import TooLarge, _join, _Table


def _table(rng: np.random.Generator, n_vars: int, dom: np.ndarray, live: list[int], rows: int, dtype: type) -> _Table:
    asg = np.full((rows, n_vars), -1, dtype=dtype)
    for x in live:
        asg[:, x] = rng.integers(0, dom[x], rows)
    return _Table(live, asg, rng.integers(0, 5, rows) * 0.25, rng.integers(0, 5, rows).astype(float), float(rng.random()), float(rng.random()))


@settings(max_examples=80, deadline=None, derandomize=True)
@given(
    seed=st.integers(0, 2**31),
    n_vars=st.integers(1, 6),
    rows_a=st.integers(0, 30),
    rows_b=st.integers(0, 30),
    narrow=st.booleans(),
)
def test_join_in_python_equals_the_numpy_path(seed: int, n_vars: int, rows_a: int, rows_b: int, narrow: bool) -> None:
    """`_join` below `SMALL_JOIN` pairs (a dictionary of keys) gives the numpy path's
    table: same live variables, rows in the same order, same assignments (and dtype),
    seconds, bytes and floors; with no common variable, every pair; and the same
    `TooLarge` beyond a row limit. Rows are checked against the definition too."""
    rng = np.random.default_rng(seed)
    dom = rng.integers(1, 4, n_vars)
    live_a = sorted(rng.choice(n_vars, int(rng.integers(1, n_vars + 1)), replace=False).tolist())
    live_b = rng.choice(n_vars, int(rng.integers(1, n_vars + 1)), replace=False).tolist()  # any order
    dtype = np.int16 if narrow else np.int64
    a = _table(rng, n_vars, dom, live_a, rows_a, dtype)
    b = _table(rng, n_vars, dom, live_b, rows_b, dtype)
    assert rows_a * rows_b <= chain_fronts.SMALL_JOIN  # the Python path
    small = _join(a, b, dom)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "SMALL_JOIN", -1)
        big = _join(a, b, dom)
        limit = max(0, big.cost.size - 1)
        if big.cost.size:
            with pytest.raises(TooLarge):
                _join(a, b, dom, limit)
    if big.cost.size:
        with pytest.raises(TooLarge):
            _join(a, b, dom, limit)
    assert small.live == big.live
    assert small.asg.dtype == big.asg.dtype and np.array_equal(small.asg, big.asg)
    assert np.array_equal(small.cost, big.cost) and np.array_equal(small.mem, big.mem)
    assert (small.floor, small.wfloor) == (big.floor, big.wfloor)
    common = [x for x in live_a if x in live_b]
    want = [(i, j) for i in range(rows_a) for j in range(rows_b) if all(a.asg[i, x] == b.asg[j, x] for x in common)]
    assert small.cost.tolist() == [a.cost[i] + b.cost[j] for i, j in want]
    assert small.asg.tolist() == [np.maximum(a.asg[i], b.asg[j]).tolist() for i, j in want]


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n_vars=st.integers(1, 5), rows=st.integers(1, 64), group_size=st.integers(0, 3))
def test_pareto_of_a_small_table_keyed_by_tuples_equals_the_coded_path(seed: int, n_vars: int, rows: int, group_size: int) -> None:
    """`_pareto` up to `SMALL_PARETO` rows sorts the group's values as tuples instead of
    mixed-radix codes: the same rows in the same order as the coded numpy path, ties
    included (few distinct values)."""
    rng = np.random.default_rng(seed)
    dom = rng.integers(1, 4, n_vars)
    live = list(range(n_vars))
    t = _table(rng, n_vars, dom, live, rows, np.int64)
    group = rng.permutation(n_vars)[: min(group_size, n_vars)].tolist()
    small = chain_fronts._pareto(t, group, dom)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "SMALL_PARETO", 0)
        big = chain_fronts._pareto(t, group, dom)
    assert small.live == big.live == group
    assert np.array_equal(small.asg, big.asg) and np.array_equal(small.cost, big.cost) and np.array_equal(small.mem, big.mem)


@pytest.mark.parametrize("mesh", [4, (2, 2)])
def test_cost_tables_equal_the_cost_model_op_by_op(mesh: int | tuple[int, int]) -> None:
    """`CostTables` (layouts and op costs looked up once per tensor / signature and
    strategy) gives, bit for bit, the sums of `op_cost` over a node's members and
    `reshard_seconds` over its inner links and an edge's links, added in member and link
    order."""
    from distplan.formulations.sharding.costgraph import CostTables, build_skeleton
    from distplan.instances.transformer import transformer
    from distplan.models.sharding_costs import op_cost, reshard_seconds, tensor_spec

    inst = transformer(2, 256, 4, 128, 8, 1000, mesh=mesh, device="V100", memory=1e15)
    sk = build_skeleton(inst)
    tables = CostTables(inst)
    ctx = inst.cost_context
    for i in range(sk.num_nodes):
        nc = tables.node(sk, i)
        ops = sk.members(i)
        for k, chosen in enumerate(nc.strategies):
            cost = mem = 0.0
            for op, strategy in zip(ops, chosen):
                got = op_cost(inst.semantics(op), strategy, ctx)
                cost += got.seconds
                mem += got.memory
            for a, b, slot in sk.node_internal(i):
                src = inst.semantics(ops[a]).output
                cost += reshard_seconds(src, tensor_spec(src, chosen[a]), tensor_spec(inst.semantics(ops[b]).inputs[slot], chosen[b]), ctx)
            assert nc.cost[k] == cost and nc.memory[k] == mem
    for e in range(sk.num_edges):
        u, v = int(sk.edge_u[e]), int(sk.edge_v[e])
        nu, nv = tables.node(sk, u), tables.node(sk, v)
        want = np.zeros((len(nu.strategies), len(nv.strategies)))
        for a, b, slot in sk.edge_links(e):
            src = inst.semantics(sk.members(u)[a]).output
            dst = inst.semantics(sk.members(v)[b]).inputs[slot]
            want += np.array([[reshard_seconds(src, tensor_spec(src, su[a]), tensor_spec(dst, sv[b]), ctx) for sv in nv.strategies] for su in nu.strategies])
        assert np.array_equal(tables.edge(sk, e), want)
