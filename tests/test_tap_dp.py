"""tap's dynamic program (distplan/formulations/sharding/chain_dp.py) and chain realignment
(chainfold.alignments): the same optimum as the walk MILP and Alpa's ILP, its pieces exact."""

from __future__ import annotations

import importlib
import itertools
import time
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.folding import _indexed, check_copies
from distplan.formulations.sharding.chain_dp import solve_walk_dp
from distplan.formulations.sharding.chain_fronts import pareto_rows, segment_fronts
from distplan.formulations.sharding.chain_program import explicit_graph
from distplan.formulations.sharding.chainfold import Chain, _chain_of, _widest_chain, alignments, find_chains, grown_copies
from distplan.formulations.sharding.costgraph import CostTables
from distplan.formulations.sharding.tap import fold_instance
from tests.test_tap_exact import tight


@settings(max_examples=3, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(
    layers=st.integers(5, 7),
    mesh=st.sampled_from([4, 8, (2, 2)]),
    frac=st.sampled_from([0.0, 0.02, 0.3, 0.8]),
    bandwidth=st.sampled_from([None, 2.5e10]),
)
def test_dp_equals_the_walk_milp_and_alpa_ilp(layers: int, mesh: int | tuple[int, int], frac: float, bandwidth: float | None) -> None:
    inst = tight(layers, mesh, frac, bandwidth)
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    dp = distplan.solve(inst, "tap", mip_gap=1e-9)
    milp = distplan.solve(inst, "tap", mip_gap=1e-9, dp=False)
    assert dp.info["method"] == "dp" and milp.info["method"] == "milp"
    assert dp.objective == pytest.approx(alpa.objective, rel=1e-6)
    assert milp.objective == pytest.approx(alpa.objective, rel=1e-6)
    assert dp.status.value == "optimal" and dp.termination.value == "optimal"
    # the DP's bound is proven: below every plan's cost (zero tolerance), tight at its own
    assert dp.bound is not None and dp.bound <= alpa.objective and dp.bound <= dp.objective
    assert dp.check is not None and dp.check.details["memory_bytes"] <= inst.memory_budget * (1 + 1e-9)


def test_dp_gives_up_to_the_milp_beyond_its_row_limit() -> None:
    inst = tight(6, 4, 0.05)
    small = distplan.solve(inst, "tap", mip_gap=1e-9, dp_max_rows=1)
    dp = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert small.info["method"] == "milp" and dp.info["method"] == "dp"
    assert small.objective == pytest.approx(dp.objective, rel=1e-9)


def _one_chain(inst: distplan.models.sharding.ShardingInstance) -> tuple:  # type: ignore[name-defined]
    sk, fold = fold_instance(inst, {})
    tables = CostTables(inst)
    (chain,), _ = find_chains(sk, fold, tables)
    chain.arcs = segment_fronts(chain, sk, tables)
    graph, origin, virtual = explicit_graph(sk, [chain], tables)
    start = [int(np.flatnonzero(origin == chain.nodes[0, p])[0]) for p in chain.out_pos.tolist()]
    return chain, graph, start, virtual[0].tolist()


def test_dp_stops_at_its_deadline() -> None:
    chain, graph, start, end = _one_chain(tight(8, 8, 0.3))
    with pytest.raises(DeadlineReached):
        solve_walk_dp(chain, graph, start, end, deadline=time.perf_counter() - 1.0)
    free = solve_walk_dp(chain, graph, start, end, memory=False)
    full = solve_walk_dp(chain, graph, start, end)
    assert free is not None and full is not None and free.cost <= full.cost
    assert full.memory <= graph.memory_budget


def test_pareto_labels_keep_exactly_the_undominated_labels() -> None:
    rng = np.random.default_rng(7)
    state = rng.integers(0, 4, 200)
    cost = rng.integers(0, 8, 200).astype(float)
    mem = rng.integers(0, 8, 200).astype(float)
    kept = pareto_rows(state, cost, mem)
    assert np.all(np.diff(state[kept]) >= 0)  # sorted by state
    points = {(int(state[i]), cost[i], mem[i]) for i in kept.tolist()}
    assert len(points) == kept.size  # one label per distinct point
    for s in range(4):
        same = np.flatnonzero(state == s)
        front = {(cost[i], mem[i]) for i in same if not np.any((cost[same] <= cost[i]) & (mem[same] <= mem[i]) & ((cost[same] < cost[i]) | (mem[same] < mem[i])))}
        assert {(c, m) for g, c, m in points if g == s} == front


def test_realigned_copies_cross_the_fewest_states() -> None:
    """A chain of 3-node blocks a -> b -> c, c -> next a and b -> next b, grown as copies
    (b, c, next a): out positions b and next a (5 x 3 states). Shifting b to the next copy
    gives copies (c, next a, next b) with b alone crossing (5 states), the fewest of every
    shift set (brute force); the realigned copies are isomorphic and one chain."""
    from distplan.formulations.folding import LabelledGraph

    K = 6
    edges, labels = [], []
    for k in range(K):
        labels += [0, 1, 2]
        edges += [(3 * k, 3 * k + 1), (3 * k + 1, 3 * k + 2)]
        if k + 1 < K:
            edges += [(3 * k + 2, 3 * k + 3), (3 * k + 1, 3 * k + 4)]
    # copies as grown from b: (b, c, next a)
    nodes = np.array([[3 * k + 1, 3 * k + 2, 3 * k + 3] for k in range(K - 1)])
    # positions: 0 = b, 1 = c, 2 = a'; internal b -> c, c -> a'; links b -> b', a' -> b'
    iu, iv = np.array([0, 1]), np.array([1, 2])
    lu, lv = np.array([0, 2]), np.array([0, 0])
    dom = np.array([5, 7, 3])
    new = alignments(nodes, iu, iv, lu, lv, np.array([], dtype=np.int64), dom)[0]
    assert new.shape == (K - 2, 3)
    g = _indexed(LabelledGraph(labels, edges, [0] * len(edges)), "label", "label")
    check_copies(new, g)
    # brute force over every shift set: none crosses fewer states than the one chosen
    internal, links = list(zip(iu.tolist(), iv.tolist())), list(zip(lu.tolist(), lv.tolist()))

    def states(shift: set[int]) -> float:
        out = {a for a, b in internal if a in shift and b not in shift} | {a for a, b in links if (a in shift) == (b in shift)}
        return float(np.prod([dom[j] for j in out])) if out else 1.0

    valid = [set(t) for r in range(3) for t in itertools.combinations(range(3), r) if all(not (a not in t and b in t) for a, b in internal) and all(not (a in t and b not in t) for a, b in links)]
    assert states(set()) == 15.0 and min(states(t) for t in valid) == 5.0
    arrays = np.array(edges)
    sk = SimpleNamespace(edge_u=arrays[:, 0], edge_v=arrays[:, 1], num_nodes=3 * K)
    made = _chain_of(0, new, sk, dom)  # type: ignore[arg-type]
    assert not isinstance(made, str) and made.num_states == 5 and made.out_pos.tolist() == [0]
    grown = _chain_of(0, nodes, sk, dom)  # type: ignore[arg-type]
    assert isinstance(grown, Chain) and grown.num_states == 15


def _blocks(K: int, labels: dict[int, int] | None = None, extra: list[tuple[int, int]] | None = None) -> SimpleNamespace:
    """A skeleton of K blocks a -> b -> c (labels 0, 1, 2), each c -> the next a (edge
    label 1), a source p -> the first a and the last c -> a sink q; node labels
    overridden by ``labels``, ``extra`` edges (label 0) added."""
    nl = [0, 1, 2] * K + [7, 8]
    p, q = 3 * K, 3 * K + 1
    edges = [(3 * k, 3 * k + 1, 0) for k in range(K)] + [(3 * k + 1, 3 * k + 2, 0) for k in range(K)]
    edges += [(3 * k + 2, 3 * k + 3, 1) for k in range(K - 1)] + [(p, 0, 1), (3 * K - 1, q, 1)]
    edges += [(a, b, 0) for a, b in extra or []]
    for x, lab in (labels or {}).items():
        nl[x] = lab
    e = np.array(edges)
    return SimpleNamespace(edge_u=e[:, 0], edge_v=e[:, 1], edge_label_id=e[:, 2], node_label_id=np.array(nl), num_nodes=3 * K + 2)


def test_grown_copies_grow_the_chain_by_exact_copies_only() -> None:
    """chainfold.grown_copies takes the explicit copies next to a chain's ends back into it
    (as `find_chains` takes them: through `_widest_chain`, when they are a chain),
    and only copies: same node labels, same internal edges and links, no other edge from
    a copy that would sit inside the chain, nodes free."""
    K = 7
    found = np.array([[3 * k, 3 * k + 1, 3 * k + 2] for k in range(2, K - 2)])

    def grow(sk: SimpleNamespace, free: np.ndarray | None = None) -> list[int]:
        if free is None:
            free = np.ones(sk.num_nodes, dtype=bool)
            free[found.ravel()] = False
        got, _ = _widest_chain(0, [(found, grown_copies(found, sk, free))], sk, np.ones(3, dtype=np.int64))  # type: ignore[arg-type]
        assert isinstance(_chain_of(0, got, sk, np.ones(3, dtype=np.int64)), Chain)  # type: ignore[arg-type]
        return [int(r[0]) // 3 for r in got]

    assert grow(_blocks(K)) == list(range(K))
    assert grow(_blocks(K, labels={1: 5})) == list(range(1, K))  # block 0 labelled apart
    assert grow(_blocks(K, labels={3 * K - 2: 5})) == list(range(K - 1))
    # block 1 has an edge out (ok for a first copy, not inside the chain): it ends there
    assert grow(_blocks(K, extra=[(4, 3 * K + 1)])) == list(range(1, K))
    # block 6 joined to block 5 by one more edge: the links differ
    assert grow(_blocks(K, extra=[(16, 18)])) == list(range(K - 1))
    # the last copy found (block 4) has an edge to block 1: neither joins the chain
    assert grow(_blocks(K, extra=[(13, 4)])) == [2, 3, 4]
    # block 6 has an edge in from outside (the source p): not a last copy
    assert grow(_blocks(K, extra=[(3 * K, 19)])) == list(range(K - 1))
    # nodes taken by another family are not free
    free = np.ones(3 * K + 2, dtype=bool)
    free[found.ravel()] = False
    free[0] = False
    assert grow(_blocks(K), free) == list(range(1, K))


def test_llama_layers_fold_whole_and_realign_to_one_out_position() -> None:
    """Issue 20: Llama-3 8B's 32 layers used to fold as 31 copies of 7 nodes and 30 of 5
    (a layer split in two families, neither a chain); now whole layers, realigned to cut
    after the FFN's down projection (one out position, the residual stream), and grown
    (chainfold.grown_copies) from the 6 folded copies to all 8 layers."""
    from distplan.instances.zoo_sharding import llama_sharding

    inst = llama_sharding("llama3-8b", 32, layers=8)
    sk, fold = fold_instance(inst, {})
    assert [(f["copies"], f["nodes_per_copy"]) for f in fold.stats["families"]] == [(6, 12)]
    tables = CostTables(inst)
    chains, info = find_chains(sk, fold, tables)
    assert len(chains) == 1 and chains[0].out_pos.size == 1 and chains[0].copies == 8
    names = list(inst.index)
    assert names[sk.node_ops[int(chains[0].nodes[0, chains[0].out_pos[0]])][0]].endswith(".w2")
    made = _chain_of(0, chains[0].nodes, sk, np.array([len(tables.node(sk, int(x)).strategies) for x in chains[0].nodes[0].tolist()]))
    assert not isinstance(made, str)


@pytest.mark.parametrize(("mesh", "frac"), [(8, 0.0), (8, 0.05), (4, 0.3)])
def test_lagrangian_pruned_fronts_keep_the_optimum(mesh: int | tuple[int, int], frac: float, monkeypatch: pytest.MonkeyPatch) -> None:
    """The explicit fronts pruned by the Lagrangian bound (taken when the plain fronts pass
    FIRST_ROWS rows) give the same optimum as the plain fronts, and a bound below it."""
    chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")
    chain, graph, start, end = _one_chain(tight(6, mesh, frac, 2.5e10))
    monkeypatch.setattr(chain_dp, "FIRST_ROWS", 10**7)
    plain = solve_walk_dp(chain, graph, start, end)
    calls: list[int] = []
    original = chain_dp._scalar_lagrange

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(chain_dp, "FIRST_ROWS", 1)
    monkeypatch.setattr(chain_dp, "_scalar_lagrange", counted)
    pruned = solve_walk_dp(chain, graph, start, end)
    assert calls == [1]
    assert plain is not None and pruned is not None
    assert pruned.cost == pytest.approx(plain.cost, rel=1e-12)
    assert pruned.bound <= plain.cost * (1 + 1e-12) and pruned.memory <= graph.memory_budget


#: hypothesis strategies of a random walk case (`_random_walk`'s size, its multiplier), shared
#: by the label-pass tests
RANDOM_WALK_CASES = {
    "seed": st.integers(0, 2**31),
    "W": st.integers(1, 3),
    "stages": st.integers(1, 2),
    "copies": st.integers(1, 3),
    "lam": st.sampled_from([0.0, 0.25, 3.0]),
}


def _random_walk(rng: np.random.Generator, W: int, stages: int, copies: int) -> object:
    """A `_Walk` over random arcs (some state pairs without arcs, several arcs per pair) and
    random start and end fronts; the chain is a stand-in with the arcs and the state count."""
    from distplan.formulations.sharding.chain_dp import _Walk
    from distplan.formulations.sharding.chain_fronts import _Table

    n = int(rng.integers(2, 4 * W * W * stages + 3))
    first = rng.random(n) < 0.5 if stages == 2 else np.ones(n, dtype=bool)
    first[:2] = [True, stages == 1]  # no stage without arcs
    arcs = {
        "prev": rng.integers(0, W, n),
        "cur": rng.integers(0, W, n),
        "first": first,
        "cost": rng.integers(0, 9, n).astype(float) * 0.125,
        "memory": rng.integers(0, 9, n).astype(float),
    }
    stage_arcs = [np.flatnonzero(arcs["first"]), np.flatnonzero(~arcs["first"])][:stages]

    def front() -> tuple[_Table, np.ndarray]:
        rows = int(rng.integers(1, 2 * W + 1))
        t = _Table([], np.zeros((rows, 1), dtype=np.int64), rng.integers(0, 9, rows).astype(float), rng.integers(0, 9, rows).astype(float))
        return t, rng.integers(0, W, rows)

    (fs, ks), (fe, ke) = front(), front()
    chain = SimpleNamespace(arcs=arcs, num_walk_states=W)
    return _Walk(chain, stage_arcs, stages * copies, arcs["memory"], fs, fe, ks, ke)  # type: ignore[arg-type]


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 4), stages=st.integers(1, 2), copies=st.integers(1, 5), lam=st.sampled_from([0.0, 0.5, 3.0]))
def test_scalar_pass_by_squaring_equals_the_step_loop_and_brute_force(seed: int, W: int, stages: int, copies: int, lam: float) -> None:
    """The scalar pass by repeated min-plus squaring gives the least weight of every walk
    (brute force over all arc sequences when small, else the step-by-step loop), a path of
    consecutive arcs of the right stages with that weight, and the same forward values; the
    dense values to go equal the arc-by-arc ones exactly."""
    chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")
    walk = _random_walk(np.random.default_rng(seed), W, stages, copies)
    a = walk.chain.arcs  # type: ignore[attr-defined]
    weight = a["cost"] + lam * a["memory"]
    fast = walk.scalar(lam)  # type: ignore[attr-defined]
    fast_forward = walk.forward[1].copy()  # type: ignore[attr-defined]
    fast_to_go = walk.to_go(weight, walk.front_end.cost + lam * walk.front_end.mem)  # type: ignore[attr-defined]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "SQUARING_STATES", 0)
        slow = walk.scalar(lam)  # type: ignore[attr-defined]
        slow_forward = walk.forward[1].copy()  # type: ignore[attr-defined]
        slow_to_go = walk.to_go(weight, walk.front_end.cost + lam * walk.front_end.mem)  # type: ignore[attr-defined]
    assert np.array_equal(fast_to_go, slow_to_go)
    np.testing.assert_allclose(fast_forward, slow_forward, rtol=1e-12)
    assert (fast is None) == (slow is None)
    # brute force: every start row, arc sequence and end row
    fs, fe = walk.front_start, walk.front_end  # type: ignore[attr-defined]
    stage_arcs = walk.stage_arcs  # type: ignore[attr-defined]
    steps = walk.steps  # type: ignore[attr-defined]
    if np.prod([idx.size for idx in stage_arcs], dtype=float) ** copies <= 5000:
        best = np.inf
        for seq in itertools.product(*[stage_arcs[t % stages].tolist() for t in range(steps)]):
            if any(a["cur"][x] != a["prev"][y] for x, y in zip(seq, seq[1:])):
                continue
            s0, s1 = a["prev"][seq[0]], a["cur"][seq[-1]]
            w0 = (fs.cost + lam * fs.mem)[walk.key_start == s0]  # type: ignore[attr-defined]
            w1 = (fe.cost + lam * fe.mem)[walk.key_end == s1]  # type: ignore[attr-defined]
            if w0.size and w1.size:
                best = min(best, w0.min() + weight[list(seq)].sum() + w1.min())
        assert (fast is None) == (best == np.inf)
    if fast is None or slow is None:
        return
    assert fast[0] == pytest.approx(slow[0], rel=1e-12)
    path = fast[3][1]
    assert path.size == steps
    assert all(a["cur"][x] == a["prev"][y] for x, y in zip(path.tolist(), path[1:].tolist()))
    assert all(x in stage_arcs[t % stages] for t, x in enumerate(path.tolist()))
    assert fast[1] + lam * fast[2] == pytest.approx(fast[0], rel=1e-12)


@pytest.mark.parametrize(("layers", "mesh", "frac", "one_pass"), [(6, 8, 0.3, True), (8, 4, 0.3, True), (6, 4, 0.02, False), (6, 8, 0.02, False)])
def test_a_capped_pass_below_its_least_dropped_bound_is_optimal(layers: int, mesh: int, frac: float, one_pass: bool) -> None:
    """A label pass whose cap dropped labels, but whose best plan costs no more than the
    least Lagrangian bound of a dropped label, is optimal: one pass in the first two cases
    (its plan costs more than the cap), more in the others (a pass's plan above that bound
    is not taken); each with the optimum of a single uncapped pass. (Without the spliced
    incumbent and the completions, `SWEEP_STATES` 0: the caps from the Lagrangian bound.)"""
    chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")
    chain, graph, start, end = _one_chain(tight(layers, mesh, frac, 2.5e10))
    passes: list[tuple[float, float, float]] = []
    original = chain_dp._label_dp

    def logged(walk: object, budget: float, lam: float, upper: float, *args: object) -> object:
        got = original(walk, budget, lam, upper, *args)
        passes.append((upper, np.inf if got[0] is None else got[0].cost, got[1]))
        return got

    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "_label_dp", logged)
        m.setattr(chain_dp, "SWEEP_STATES", 0)
        capped = solve_walk_dp(chain, graph, start, end)
    if one_pass:
        ((upper, cost, dropped),) = passes
        assert upper < cost <= dropped  # the threshold, not the cap, ended the search
    else:
        assert len(passes) > 1 and passes[0][1] > passes[0][2]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "FIRST_GAP", 1e9)  # one pass, capped at the incumbent: exhaustive
        whole = solve_walk_dp(chain, graph, start, end)
    assert capped is not None and whole is not None
    assert capped.cost == pytest.approx(whole.cost, rel=1e-12) and capped.bound <= whole.cost


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 5), keys=st.integers(0, 2))
def test_min_sum_equals_brute_force(seed: int, n: int, keys: int) -> None:
    """Bucket elimination (`chain_minsum.min_sum`): the least total per assignment of the
    keys equals brute force over every assignment (infinite entries included), and each
    returned assignment achieves it; a variable in no factor is left at -1."""
    from distplan.formulations.sharding.chain_minsum import min_sum

    rng = np.random.default_rng(seed)
    dom = rng.integers(1, 4, n + 1).tolist()  # variable n is in no factor
    factors: list[tuple[tuple[int, ...], np.ndarray]] = []
    for _ in range(int(rng.integers(1, 2 * n + 2))):
        scope = tuple(sorted(rng.choice(n, size=int(rng.integers(1, min(n, 2) + 1)), replace=False).tolist()))
        arr = rng.integers(0, 5, [dom[y] for y in scope]).astype(float)
        arr[rng.random(arr.shape) < 0.1] = np.inf
        factors.append((scope, arr))
    key_vars = sorted(rng.choice(n, size=min(keys, n), replace=False).tolist())
    got = min_sum(dom, factors, key_vars, 1e9)
    assert got is not None
    dense, asg = got
    in_factors = sorted({y for scope, _ in factors for y in scope})
    brute = np.full(int(np.prod([dom[k] for k in key_vars])), np.inf)
    for values in itertools.product(*[range(dom[y]) for y in range(n)]):
        total = sum(float(arr[tuple(values[y] for y in scope)]) for scope, arr in factors)
        flat = int(np.ravel_multi_index([values[k] for k in key_vars], [dom[k] for k in key_vars])) if key_vars else 0
        brute[flat] = min(brute[flat], total)
    assert np.array_equal(dense, brute)
    assert np.all(asg[:, n] == -1)
    for r in np.flatnonzero(np.isfinite(dense)).tolist():
        total = sum(float(arr[tuple(int(asg[r, y]) for y in scope)]) for scope, arr in factors)
        assert total == dense[r] and all(asg[r, y] >= 0 for y in in_factors)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 90), keys=st.integers(1, 5), values=st.integers(1, 12))
def test_pareto_rows_in_python_equal_the_numpy_path(seed: int, n: int, keys: int, values: int) -> None:
    """`pareto_rows` below `SMALL_PARETO` rows (a Python sort) returns the same rows in the
    same order as its numpy path, ties included (few distinct values make them common),
    and they are exactly the undominated rows, one per distinct point of each key."""
    chain_fronts = importlib.import_module("distplan.formulations.sharding.chain_fronts")
    rng = np.random.default_rng(seed)
    key = rng.integers(0, keys, n)
    cost = rng.integers(0, values, n) * 0.125
    mem = rng.integers(0, values, n).astype(float)
    small = chain_fronts._pareto_rows_small(key, cost, mem)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "SMALL_PARETO", 0)
        big = pareto_rows(key, cost, mem)
    assert np.array_equal(small, big)
    got = {(int(key[i]), cost[i], mem[i]) for i in small.tolist()}
    assert len(got) == small.size
    want = {(int(key[i]), cost[i], mem[i]) for i in range(n) if not np.any((key == key[i]) & (cost <= cost[i]) & (mem <= mem[i]) & ((cost < cost[i]) | (mem < mem[i])))}
    assert got == want
