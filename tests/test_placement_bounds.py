"""Placement lower bounds: the assignment relaxation (`placement_bounds`), the forced
co-location bound (`forced`) and the MILP's dual bound never exceed brute-force optima on random tiny DAGs (3-5 ops, 2 devices) (both communication models,
memory limits), and known optima on fixtures. Times are whole seconds and delays whole
numbers, so every sum is exact in floating point and bounds are compared with zero
tolerance."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import distplan
from distplan.errors import InputError, NoSolutionError
from distplan.instances import bundled
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate, schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def brute_force(inst: PlacementInstance) -> float:
    """The optimal makespan (seconds): every device assignment and every order of each
    device's ops consistent with the graph, each scheduled as early as the orders allow by
    the evaluator's own simulation (which is how the evaluator reads any plan under the
    channel model). Plans the evaluator rejects (memory) are skipped; inf when none fits.
    Exact under channels (the evaluator re-times every plan from its orders) and under the
    simple memory model; under independent links with the liveness model it is an upper
    estimate, as a later start can free memory in time (earliest starts only are tried)."""
    n, m = inst.n_ops, inst.n_devices
    best = np.inf
    for assign in itertools.product(range(m), repeat=n):
        dev = np.asarray(assign, dtype=np.int64)
        if inst.memory_model == "simple" and np.any(np.bincount(dev, weights=inst.memory_need(), minlength=m) > inst.device_memory):
            continue
        per_device = [[p for p in itertools.permutations(np.flatnonzero(dev == d).tolist()) if _consistent(inst, p)] for d in range(m)]
        for orders in itertools.product(*per_device):
            key = np.zeros(n)
            for order in orders:
                key[list(order)] = np.arange(len(order))
            try:
                start = schedule_fixed_placement(inst, dev, order_key=key)
            except InputError:  # the device orders wait on each other (deadlock)
                continue
            check = evaluate(inst, make_plan(inst, dev, start))
            if check.feasible:
                best = min(best, check.objective)
    return float(best)


def _consistent(inst: PlacementInstance, perm: tuple[int, ...]) -> bool:
    """No edge (path) runs against the order ``perm`` of some of the ops."""
    pos = {v: k for k, v in enumerate(perm)}
    reach = _reach(inst)
    return not any(reach[b, a] for a in perm for b in perm if pos[a] < pos[b])


def _reach(inst: PlacementInstance) -> np.ndarray:
    n = inst.n_ops
    r = np.zeros((n, n), dtype=bool)
    r[inst.src, inst.dst] = True
    for k in range(n):
        r |= r[:, [k]] & r[[k], :]
    return r


def tiny(n: int, edges: list[tuple[int, int, int]], times: list[int], mem: list[int], cap: int, latency: int, comm: str, liveness: bool) -> PlacementInstance:
    ops: list[dict[str, Any]] = [{"name": f"o{k}", "time": float(times[k]), "memory": float(mem[k])} for k in range(n)]
    if liveness:
        for k, op in enumerate(ops):
            op["output"] = float(mem[(k + 1) % n])
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "tiny",
        "graph": {"ops": ops, "edges": [{"src": f"o{a}", "dst": f"o{b}", "bytes": float(x)} for a, b, x in edges]},
        "cluster": {"devices": [{"name": "g0", "memory": float(cap)}, {"name": "g1", "memory": float(cap)}], "bandwidth": 1.0, "latency": float(latency)},
        "model": {"communication": comm, "memory": "liveness" if liveness else "simple"},
    }
    return instance_from_dict(doc)


@st.composite
def tiny_instances(draw: Any) -> PlacementInstance:
    n = draw(st.integers(3, 5))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, max_size=min(len(pairs), 7)))
    edges = [(a, b, draw(st.integers(0, 4))) for a, b in chosen]
    times = draw(st.lists(st.integers(0, 6), min_size=n, max_size=n))
    mem = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
    liveness = draw(st.booleans())
    need = [mem[k] + (mem[(k + 1) % n] if liveness else 0) for k in range(n)]
    cap = draw(st.integers(max(max(need), 1), max(sum(need), 1)))
    return tiny(n, edges, times, mem, cap, draw(st.integers(0, 2)), draw(st.sampled_from(["independent", "channels"])), liveness)


@st.composite
def solved_tiny_instances(draw: Any) -> tuple[PlacementInstance, float]:
    """A feasible `tiny_instances` draw and its brute-force optimum (seconds)."""
    inst = draw(tiny_instances())
    opt = brute_force(inst)
    assume(np.isfinite(opt))
    return inst, opt


def on_solved_tiny_instances(examples: int) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Run a test on ``examples`` random feasible tiny instances, passed as (instance,
    optimum): the differential tests of every bound against brute force."""

    def wrap(test: Callable[..., None]) -> Callable[..., None]:
        return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])(given(solved_tiny_instances())(test))

    return wrap


@on_solved_tiny_instances(20)
def test_relaxation_bound_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    inst, opt = solved
    res = distplan.solve(inst, "placement_bounds", time_limit=10)
    assert res.bounds, "the solver-free bounds at least"
    for b in res.bounds:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"


@on_solved_tiny_instances(6)
def test_milp_bound_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    inst, opt = solved
    try:
        res = distplan.solve(inst, "placement_milp", time_limit=10)
    except NoSolutionError:
        # under the liveness model the MILP charges persistent memory only (a relaxation):
        # its plan may not fit, and the heuristics may not either
        assert inst.memory_model == "liveness"
        return
    assert res.objective >= opt  # an evaluated plan is never better than the optimum
    for b in res.bounds:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"
    if inst.memory_model == "simple" and inst.communication == "independent":
        assert res.objective == pytest.approx(opt)  # the exact model finds the optimum


def fan(comm: str) -> PlacementInstance:
    """a (1 s) feeds b, c, d (10 s each) with three different tensors of 3, 3.5, 3.25 s on
    4 devices: independent links allow 1 + 3.25 + 10 = 14.25 s; on Baechi's channels a's
    channel sends one tensor at a time, so the best is 1 + 3 + 3.25 + 10 = 17.25 s."""
    ops = [{"name": "a", "time": 1, "memory": 0}] + [{"name": k, "time": 10, "memory": 0} for k in "bcd"]
    edges = [{"src": "a", "dst": k, "bytes": b} for k, b in zip("bcd", [3, 3.5, 3.25])]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "fan",
        "graph": {"ops": ops, "edges": edges},
        "cluster": {"devices": [{"name": f"g{k}", "memory": 1e9} for k in range(4)], "bandwidth": 1.0, "latency": 0.0},
        "model": {"communication": comm},
    }
    return instance_from_dict(doc)


def test_channel_serialization_lifts_the_bound_above_the_independent_optimum() -> None:
    indep = distplan.solve(fan("independent"), "placement_milp")
    assert indep.objective == pytest.approx(14.25) and indep.status.value == "optimal"
    res = distplan.solve(fan("channels"), "placement_bounds")
    relax = [b for b in res.bounds if b.source.startswith("assignment relaxation")]
    assert len(relax) == 1
    assert 14.25 < relax[0].value <= 17.25
    assert relax[0].value == pytest.approx(17.25, rel=1e-6)
    milp = distplan.solve(fan("channels"), "placement_milp")
    assert milp.objective == pytest.approx(17.25)
    assert milp.bound <= milp.objective


SMALL = sorted(n for n, e in bundled().items() if n.startswith("placement-small-"))


def known_optimum(name: str) -> float:
    # "optimum 29.7000 ms" in the bundled description
    text = bundled()[name]["description"]
    return float(text.split("optimum")[1].split("ms")[0]) * 1e-3


@pytest.mark.parametrize("name", SMALL)
def test_bounds_on_known_optima(name: str) -> None:
    opt = known_optimum(name)
    res = distplan.solve(name, "placement_bounds", time_limit=20)
    sources = [b.source for b in res.bounds]
    assert len(sources) == len(set(sources)), "each bound listed once"
    assert all(b.value <= opt + 1e-12 for b in res.bounds)
    milp = distplan.solve(name, "placement_milp", time_limit=60)
    assert milp.status.value == "optimal"
    assert milp.objective == pytest.approx(opt, rel=1e-9)
    assert milp.bound <= milp.objective


def test_relaxation_sees_communication_and_memory() -> None:
    # placement-small-2 (memory-bound): critical path 25.7 ms, optimum 29.7 ms
    res = distplan.solve("placement-small-2", "placement_bounds", time_limit=20)
    relax = next(b for b in res.bounds if b.source.startswith("assignment relaxation"))
    cp = next(b for b in res.bounds if b.source.startswith("critical path"))
    assert cp.value == pytest.approx(25.7e-3)
    assert 29.0e-3 < relax.value <= 29.7e-3


def test_milp_never_returns_a_plan_worse_than_its_warm_start() -> None:
    # a time limit too short for the MILP: the best heuristic plan comes back
    heur = min(distplan.solve("inception-v3-dgx1-4", f).objective for f in ("baechi_etf", "baechi_topo", "single_device"))
    res = distplan.solve("inception-v3-dgx1-4", "placement_milp", time_limit=1)
    assert res.objective <= heur
    assert res.bound <= res.objective
    json.dumps(res.info)


@on_solved_tiny_instances(20)
def test_forced_bound_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    """No trial makespan at or above the optimum is declared infeasible, and the bisected
    bound (searched up to far above the optimum) stays below it."""
    from distplan.formulations.placement import forced

    inst, opt = solved
    data = forced._Data(inst)
    for C in (opt, opt * 1.5 + 1.0):
        assert forced.infeasible_at(data, C) == "", f"makespan {C} >= optimum {opt} declared infeasible"
    upper = float(inst.time.max(axis=1).sum() + inst.max_delay().sum()) * 2 + 10
    b = forced.forced_bound(inst, upper, steps=40)
    if b is not None:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"


def test_forced_bound_sees_edges_too_dear_to_cut() -> None:
    """a (1 s) feeds b and c (2 s each) over 10 s links: the critical path is 3 s, but any
    cut costs 10 s, so all three share a device and the optimum is 5 s."""
    from distplan.formulations.placement.forced import forced_bound, preemptive_one_machine

    inst = tiny(3, [(0, 1, 0), (0, 2, 0)], [1, 2, 2], [0, 0, 0], 1, 10, "independent", False)
    assert brute_force(inst) == 5.0
    b = forced_bound(inst, 100.0, steps=60)
    assert b is not None and 4.99 < b.value <= 5.0
    assert preemptive_one_machine(np.array([0.0, 1.0, 1.0]), np.array([1.0, 2.0, 2.0]), np.array([0.0, 0.0, 0.0])) == 5.0
    # with 1 s links a cut pays off (b and c in parallel: 1 + 1 + 2 = 4 s): nothing forced
    cheap = tiny(3, [(0, 1, 0), (0, 2, 0)], [1, 2, 2], [0, 0, 0], 1, 1, "independent", False)
    assert brute_force(cheap) == 4.0
    b2 = forced_bound(cheap, 100.0, steps=60)
    assert b2 is None or b2.value <= 4.0


@on_solved_tiny_instances(20)
def test_path_cut_bound_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    from distplan.formulations.placement.pathcut import path_cut_bound

    inst, opt = solved
    b = path_cut_bound(inst)
    if b is not None:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"


def test_path_cut_bound_charges_the_cuts_memory_forces() -> None:
    """A chain a -> b -> c -> d (1 s each, 1 byte each) on devices of 2 bytes: it must be
    cut at least once; the cheapest cut is b -> c (2 s; the others cost 5 s)."""
    from distplan.formulations.placement.pathcut import cheapest_cuts, path_cut_bound

    edges = [(0, 1, 5), (1, 2, 2), (2, 3, 5)]
    inst = tiny(4, edges, [1, 1, 1, 1], [1, 1, 1, 1], 2, 0, "independent", False)
    assert brute_force(inst) == 6.0
    b = path_cut_bound(inst)
    assert b is not None and 5.99 < b.value <= 6.0
    groups = np.arange(4)
    # three bytes of room: still one cut; one byte: three cuts
    assert cheapest_cuts([0, 1, 2, 3], groups, np.ones(4), 3.0, np.array([5.0, 2.0, 5.0])) == 2.0
    assert cheapest_cuts([0, 1, 2, 3], groups, np.ones(4), 1.0, np.array([5.0, 2.0, 5.0])) == 12.0
    assert cheapest_cuts([0, 1, 2, 3], groups, np.ones(4), 4.0, np.array([5.0, 2.0, 5.0])) == 0.0
    # b and c colocated with 2 bytes fill a device alone: the dear cuts a | b c | d
    assert cheapest_cuts([0, 1, 2, 3], np.array([0, 1, 1, 2]), np.array([1.0, 2.0, 1.0]), 2.0, np.array([5.0, 2.0, 5.0])) == 10.0


def test_precedence_load_rows_lift_the_relaxation_to_the_optimum() -> None:
    """o1 (5 s) feeds o3 (5 s) and o4 (6 s); o0 (2 s) feeds o1 and o2; memory keeps o4 off
    the device of o0 and o1. Without the order of ops the assignment relaxation reaches
    18 s; with the descendant rows (o3 and o4 both wait for o1's end) it reaches the
    brute-force optimum of 19 s, and never more (`descendants`)."""
    from distplan.formulations.placement import relaxation
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    inst = tiny(5, [(1, 4, 4), (1, 3, 3), (0, 2, 4), (0, 1, 2)], [2, 5, 2, 5, 6], [2, 2, 0, 0, 3], 5, 2, "independent", False)
    assert brute_force(inst) == 19.0
    values = {}
    for nz in (0, 10_000):
        ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=20), {})
        b, _ = relaxation.solve_bound(inst, ctx, 20, order_nonzeros=nz)
        assert b is not None
        values[nz] = b.value
    assert values[0] < 18.01
    assert 18.99 < values[10_000] <= 19.0
    milp = distplan.solve(inst, "placement_milp", time_limit=20, order_nonzeros=10_000, milp_order_nonzeros=10_000)
    assert milp.objective == 19.0 and milp.status.value == "optimal" and milp.bound <= 19.0


@on_solved_tiny_instances(10)
def test_precedence_load_rows_never_exceed_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    """The relaxation with every ancestor and descendant row (`descendants`) stays at or
    below the optimum, under both communication and both memory models."""
    from distplan.formulations.placement import relaxation
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    inst, opt = solved
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=10), {})
    b, _ = relaxation.solve_bound(inst, ctx, 10, order_nonzeros=10_000)
    if b is not None:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"
    try:  # and the MILP with the same rows on its start times
        res = distplan.solve(inst, "placement_milp", time_limit=10, milp_order_nonzeros=10_000, relaxation_share=0.0, forced_share=0.0)
    except NoSolutionError:
        assert inst.memory_model == "liveness"  # persistent memory only: see above
        return
    for bound in res.bounds:
        assert bound.value <= opt, f"{bound.source}: {bound.value} > optimum {opt}"


def window_instance(comm: str, memory_model: str) -> PlacementInstance:
    """s (1 s) -> k (1 s) -> a, b (2 s each) -> i (1 s) -> t (1 s); s and t form one
    colocation group, k, a, b, i another, and memory keeps the groups apart, so the plan
    is s | transfer 2 s | k a b i one at a time | transfer 2 s | t = 12 s. Heads alone see
    only one of a and b between k and i (10 s)."""
    names, times, mem = "skabit", [1, 1, 2, 2, 1, 1], [2, 1, 1, 1, 1, 1]
    ops: list[dict[str, Any]] = [{"name": names[j], "time": float(times[j]), "memory": float(mem[j]), "colocate": "front" if j in (0, 5) else "middle"} for j in range(6)]
    edges = [("s", "k", 2), ("k", "a", 3), ("k", "b", 3), ("a", "i", 3), ("b", "i", 3), ("i", "t", 2)]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "window",
        "graph": {"ops": ops, "edges": [{"src": a, "dst": b, "bytes": float(x)} for a, b, x in edges]},
        "cluster": {"devices": [{"name": "g0", "memory": 4.0}, {"name": "g1", "memory": 4.0}], "bandwidth": 1.0, "latency": 0.0},
        "model": {"communication": comm, "memory": memory_model},
    }
    return instance_from_dict(doc)


@pytest.mark.parametrize("comm", ["independent", "channels"])
@pytest.mark.parametrize("memory_model", ["simple", "liveness"])
def test_window_rows_lift_the_relaxation_to_the_optimum(comm: str, memory_model: str) -> None:
    """The window rows (`descendants.window_load_rows`: a and b both run between k's end
    and i's start on their device) lift the relaxation from 10 s to the brute-force
    optimum, 12 s, and never above it; the waiting rows alone do not lift it here."""
    from distplan.formulations.placement import relaxation
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    inst = window_instance(comm, memory_model)
    assert brute_force(inst) == 12.0
    values = {}
    for wait, window in ((0, 0), (10_000, 0), (10_000, 10_000)):
        ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=20), {})
        b, _ = relaxation.solve_bound(inst, ctx, 20, order_nonzeros=10_000, wait_nonzeros=wait, window_nonzeros=window)
        assert b is not None
        values[wait, window] = b.value
    assert values[0, 0] < 10.01 and values[10_000, 0] < 10.01
    assert 11.99 < values[10_000, 10_000] <= 12.0


def _milp_with_rows(inst: PlacementInstance, nonzeros: int) -> Any:
    """placement_milp's run with the waiting and window rows in the MILP itself (and no
    relaxation or forced phase before it), within 10 s."""
    from distplan.formulations.placement import milp
    from distplan.formulations.registry import RunContext, get_formulation
    from distplan.solvers.base import SolveOptions, get_backend

    params = {**get_formulation("placement", "placement_milp").params, "relaxation_share": 0.0, "forced_share": 0.0}
    params.update(milp_wait_nonzeros=nonzeros, milp_window_nonzeros=nonzeros, wait_nonzeros=nonzeros, window_nonzeros=nonzeros)
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=10, mip_gap=1e-4), params)
    return milp.run(inst, ctx)


def test_milp_with_window_rows_proves_the_optimum() -> None:
    """The MILP with the window rows on its start times finds and proves 12 s."""
    out = _milp_with_rows(window_instance("independent", "simple"), 10_000)
    assert out.claimed_objective == 12.0
    assert max(b.value for b in out.bounds) <= 12.0


@on_solved_tiny_instances(12)
def test_waiting_and_window_rows_never_exceed_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    """The relaxation with every waiting and window row (and the ancestor and descendant
    rows), and the MILP with them on its start times, stay at or below the optimum under
    both communication and both memory models."""
    from distplan.formulations.placement import relaxation
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    inst, opt = solved
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=10), {})
    b, _ = relaxation.solve_bound(inst, ctx, 10, order_nonzeros=10_000, wait_nonzeros=10_000, window_nonzeros=10_000)
    if b is not None:
        assert b.value <= opt, f"{b.source}: {b.value} > optimum {opt}"
    out = _milp_with_rows(inst, 10_000)
    for bound in out.bounds:
        assert bound.value <= opt, f"{bound.source}: {bound.value} > optimum {opt}"


def test_gap_matrix_is_the_longest_path_between_ops() -> None:
    """gap(i, j): the longest path from i's end to j's start (ops strictly between), -inf
    without a path; checked against every path of a small DAG enumerated by networkx."""
    import networkx as nx

    from distplan.formulations.placement.descendants import gap_matrix

    inst = window_instance("independent", "simple")
    p = inst.time.min(axis=1)
    gap = gap_matrix(inst, p)
    g = nx.DiGraph(list(zip(inst.src.tolist(), inst.dst.tolist())))
    for i in range(inst.n_ops):
        for j in range(inst.n_ops):
            paths = list(nx.all_simple_paths(g, i, j)) if i != j else []
            want = max((float(p[path[1:-1]].sum()) for path in paths), default=-np.inf)
            assert gap[i, j] == want, (i, j)


@settings(max_examples=15, deadline=None)
@given(tiny_instances(), st.integers(0, 2**31 - 1))
def test_heads_tails_with_delays_are_longest_paths(inst: PlacementInstance, seed: int) -> None:
    """relaxation.heads_tails with edge delays (the one longest-path routine of the forced
    bound, tail-first timing and the relaxation) equals the longest path over every path
    enumerated by networkx, head and tail, with and without delays."""
    import networkx as nx

    from distplan.formulations.placement.relaxation import heads_tails

    rng = np.random.default_rng(seed)
    p = rng.integers(0, 5, inst.n_ops).astype(float)
    delay = rng.integers(0, 4, inst.n_edges).astype(float)
    g = nx.MultiDiGraph()
    g.add_nodes_from(range(inst.n_ops))
    for e, (a, b) in enumerate(zip(inst.src.tolist(), inst.dst.tolist())):
        g.add_edge(a, b, key=e)
    for c in (None, delay):
        head, tail = heads_tails(inst, p, c)
        cost = np.zeros(inst.n_edges) if c is None else c
        for v in range(inst.n_ops):
            into = [float(sum(p[a] + cost[e] for a, _, e in path)) for u in range(inst.n_ops) if u != v for path in nx.all_simple_edge_paths(g, u, v)]
            out = [float(sum(cost[e] + p[b] for _, b, e in path)) for w in range(inst.n_ops) if w != v for path in nx.all_simple_edge_paths(g, v, w)]
            assert head[v] == max(into, default=0.0)
            assert tail[v] == max(out, default=0.0)
