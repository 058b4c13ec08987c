"""The event-queue list scheduler (m-ETF, m-SCT, m-TOPO timing) reproduces the direct
formulation kept in tests/placement_reference.py exactly: same device and start of every op,
or the same infeasibility message, on random small DAGs that exercise ties, colocation,
both memory models, both communication models, favorites and fixed assignments."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import numpy as np
import pytest
from placement_reference import reference_list_schedule

import distplan
from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.placement.coarsen import coarsen
from distplan.formulations.placement.heuristics import topo_assignment
from distplan.formulations.placement.listsched import list_schedule, topological_positions
from distplan.formulations.placement.sct import favorites_from_lp
from distplan.models.common import instance_from_dict
from distplan.models.placement_instance import PlacementInstance


def random_instance(seed: int) -> PlacementInstance:
    """A small DAG with integer times and delays (many exact ties), random colocation groups,
    parallel edges, zero-time ops, and a memory model / capacity / channel model drawn at random."""
    rng = np.random.default_rng(seed)
    unit = float(rng.choice([1.0, 0.1]))  # tenths: float near-ties (0.1 + 0.2 != 0.3)
    n = int(rng.integers(2, 28))
    nd = int(rng.integers(1, 5))
    hetero = rng.random() < 0.3
    types = [f"t{k % 2}" for k in range(nd)] if hetero else ["t0"] * nd
    ops: list[dict[str, Any]] = []
    for k in range(n):
        t0 = float(rng.integers(0, 6)) * unit if rng.random() < 0.9 else 0.0
        time: Any = {"t0": t0, "t1": float(rng.integers(1, 6)) * unit} if hetero else t0
        op: dict[str, Any] = {"name": f"o{k}", "time": time, "memory": float(rng.integers(0, 10))}
        if rng.random() < 0.5:
            op["temporary"] = float(rng.integers(0, 5))
            op["output"] = float(rng.integers(0, 5))
        if rng.random() < 0.25:
            op["colocate"] = f"g{int(rng.integers(0, 3))}"
        ops.append(op)
    density = rng.uniform(0.05, 0.4)
    edges = []
    for j in range(1, n):
        for i in range(j):
            if rng.random() < density or (i == j - 1 and rng.random() < 0.3):
                b = float(rng.integers(0, 4) * 10)
                edges.append({"src": f"o{i}", "dst": f"o{j}", "bytes": b})
                if rng.random() < 0.05:  # a parallel edge carrying the same tensor
                    edges.append({"src": f"o{i}", "dst": f"o{j}", "bytes": b})
    liveness = rng.random() < 0.5
    channels = rng.random() < 0.5
    need = [o["memory"] + (o.get("temporary", 0) + o.get("output", 0) if liveness else 0) for o in ops]
    groups: dict[str, float] = {}
    for o in ops:
        if "colocate" in o:
            groups[o["colocate"]] = groups.get(o["colocate"], 0.0) + o["memory"]
    floor = max(max(need), max(groups.values(), default=0.0), 1.0)
    total = sum(o["memory"] + o.get("temporary", 0) + o.get("output", 0) for o in ops)
    cap = floor if rng.random() < 0.15 else max(floor, float(np.ceil(total * rng.uniform(0.3, 1.2) / nd)))
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": f"r{seed}",
        "graph": {"ops": ops, "edges": edges},
        "cluster": {
            "devices": [{"name": f"d{k}", "memory": cap, "type": types[k]} for k in range(nd)],
            "bandwidth": 10.0,
            "latency": float(rng.integers(0, 3)) * unit,
            "links": [{"src": "d0", "dst": "d1", "bandwidth": 5.0, "latency": 1.0, "directed": bool(rng.random() < 0.5)}] if nd > 1 and rng.random() < 0.3 else [],
        },
        "model": {"memory": "liveness" if liveness else "simple", "communication": "channels" if channels else "independent"},
    }
    return instance_from_dict(doc)


def random_favorites(inst: PlacementInstance, rng: np.random.Generator) -> np.ndarray:
    """Favorites as m-SCT's rounding makes them: from random LP-like x values."""
    x = rng.choice([0.0, 0.05, 0.3, 0.5, 1.0], size=inst.n_edges)
    return favorites_from_lp(inst, x, theta=float(rng.choice([0.1, 0.5])))


def outcome(fn: Any, *args: Any, **kw: Any) -> tuple[str, Any, Any]:
    try:
        s = fn(*args, **kw)
    except (InfeasibleError, NoSolutionError) as e:  # the reference's InfeasibleError, distplan's stop
        return ("infeasible", str(e), None)
    return ("ok", s.device.tolist(), s.start.tolist())


def test_topological_positions_match_the_instance_order() -> None:
    for seed in range(20):
        inst = random_instance(seed)
        order, pos = topological_positions(inst)
        assert order == inst.topo_order().tolist()
        assert [pos[v] for v in order] == list(range(inst.n_ops))


@pytest.mark.parametrize("block", range(3))
def test_etf_sct_and_fixed_assignments_match_the_reference(block: int) -> None:
    rng = np.random.default_rng(1000 + block)
    infeasible = 0
    for seed in range(block * 60, (block + 1) * 60):
        inst = random_instance(seed)
        fav = random_favorites(inst, rng)
        groups = inst.colocation_groups()
        assignment = rng.integers(0, inst.n_devices, size=int(groups.max()) + 1)[groups]
        for kw in ({}, {"favorite": fav}, {"assignment": assignment}):
            new = outcome(list_schedule, inst, **kw)
            ref = outcome(reference_list_schedule, inst, **kw)
            assert new == ref, (seed, list(kw))
            infeasible += new[0] == "infeasible"
    assert 0 < infeasible < 180  # both outcomes occur (60 instances x 3 modes)


def renumbered(inst: PlacementInstance, rng: np.random.Generator) -> PlacementInstance:
    """``inst`` with its op ids randomly permuted (edges kept in order), so that an op's id
    is not its topological position (the random DAGs and bundled instances number ops
    topologically, which hides code that mixes the two up)."""
    perm = rng.permutation(inst.n_ops)  # the new id of op k
    back = np.argsort(perm)
    return dataclasses.replace(
        inst,
        op_names=[inst.op_names[k] for k in back.tolist()],
        time=inst.time[back],
        memory=inst.memory[back],
        temporary=inst.temporary[back],
        output=inst.output[back],
        colocate=[inst.colocate[k] for k in back.tolist()],
        src=perm[inst.src],
        dst=perm[inst.dst],
    )


def test_renumbered_ops_match_the_reference() -> None:
    """Ops numbered against the graph's order: same schedules as the reference (m-ETF,
    favorites, fixed assignments; both communication and memory models)."""
    rng = np.random.default_rng(7)
    moved = 0
    for seed in range(60):
        inst = renumbered(random_instance(seed), rng)
        moved += inst.topo_order().tolist() != list(range(inst.n_ops))
        fav = random_favorites(inst, rng)
        groups = inst.colocation_groups()
        assignment = rng.integers(0, inst.n_devices, size=int(groups.max()) + 1)[groups]
        for kw in ({}, {"favorite": fav}, {"assignment": assignment}):
            assert outcome(list_schedule, inst, **kw) == outcome(reference_list_schedule, inst, **kw), (seed, list(kw))
    assert moved > 40


def test_gnmt_sct_matches_the_reference() -> None:
    """Channels, liveness, colocation groups and favorites from the real LP; m-TOPO's order.
    (`benchmarks/bench_placement.py speed` compares old and new makespans of all three.)"""
    inst = coarsen(distplan.load_instance("gnmt-v2-4gpu-channels")).instance
    dev = topo_assignment(inst)
    assert dev.tolist() == topo_assignment(inst, topo=(inst.topo_order().tolist(), [])).tolist()
    res = distplan.solve(inst, "baechi_sct", theta=0.1)
    fav = favorites_from_lp(inst, res.solver_results[0].values_by_block["sct-x"], 0.1)
    assert outcome(list_schedule, inst, favorite=fav) == outcome(reference_list_schedule, inst, favorite=fav)


def test_a_child_with_two_favorite_parents_is_refused() -> None:
    ops = [{"name": k, "time": 1.0, "memory": 1.0} for k in "abc"]
    edges = [{"src": "a", "dst": "c", "bytes": 1.0}, {"src": "b", "dst": "c", "bytes": 1.0}]
    doc = {"format": "distplan/1", "kind": "placement", "name": "two-parents", "graph": {"ops": ops, "edges": edges},
           "cluster": {"devices": [{"name": "d0", "memory": 10.0}, {"name": "d1", "memory": 10.0}], "bandwidth": 1.0}}
    inst = instance_from_dict(doc)
    with pytest.raises(ValueError, match="favorite"):
        list_schedule(inst, favorite=np.array([2, 2, -1]))
    with pytest.raises(ValueError, match="favorite"):
        list_schedule(inst, favorite=np.array([1, -1, -1]))  # b is not a successor of a
    assert outcome(list_schedule, inst, favorite=np.array([2, -1, -1])) == outcome(reference_list_schedule, inst, favorite=np.array([2, -1, -1]))


def test_sct_lp_on_a_contracted_graph_above_lp_max_edges() -> None:
    from distplan.instances.generators import random_layered_dag

    inst = instance_from_dict(random_layered_dag(400, n_devices=3, seed=2))
    whole = distplan.solve(inst, "baechi_sct", theta=0.1)
    assert "lp_coarsened" not in whole.info
    small = distplan.solve(inst, "baechi_sct", theta=0.1, lp_max_edges=200)
    info = small.info["lp_coarsened"]
    assert info["clusters"] < inst.n_ops and 0 < info["coarse_edges"] <= 1.25 * 200
    assert small.solver_results[0].values_by_block["sct-x"].size == info["coarse_edges"]
    assert small.objective >= small.bound > 0  # the plan passed the evaluator


def test_chain_clusters_contract_to_an_acyclic_graph() -> None:
    from distplan.formulations.placement.coarsen import chain_clusters, contract
    from distplan.instances.generators import random_layered_dag

    inst = instance_from_dict(random_layered_dag(300, n_devices=2, seed=5))
    for k in (1, 7, 50, 300):
        cluster = chain_clusters(inst, k)
        assert np.unique(cluster).size == k
        coarse, edge_of = contract(inst, cluster)
        assert np.all(coarse.src < coarse.dst)  # edges go forward in block order
        inside = edge_of < 0
        assert np.array_equal(inside, cluster[inst.src] == cluster[inst.dst])
        assert np.array_equal(coarse.src[edge_of[~inside]], cluster[inst.src[~inside]])
        assert coarse.time.sum() == pytest.approx(inst.time.sum())


def test_topological_positions_on_a_numbering_that_is_not_topological() -> None:
    """Kahn's smallest-id-first order on shuffled op ids (the fast path for forward edges
    does not apply) and on the original numbering (where it does), against networkx's
    lexicographical topological sort (the same order by definition)."""
    import networkx as nx

    from distplan.formulations.placement.listsched_data import consumers_of, static_lists

    for seed in range(10):
        inst = random_instance(seed)
        perm = np.random.default_rng(seed).permutation(inst.n_ops)
        shuffled = dataclasses.replace(inst, src=perm[inst.src], dst=perm[inst.dst])
        for graph in (inst, shuffled):
            g = nx.DiGraph()
            g.add_nodes_from(range(graph.n_ops))
            g.add_edges_from(zip(graph.src.tolist(), graph.dst.tolist()))
            assert graph.topo_order().tolist() == list(nx.lexicographical_topological_sort(g))
        want = shuffled.topo_order().tolist()
        assert topological_positions(shuffled)[0] == want
        st = static_lists(shuffled, True)
        assert [st.outs(v) for v in range(shuffled.n_ops)] == consumers_of(shuffled)


def test_distinct_inputs_and_favorite_checks() -> None:
    from distplan.formulations.placement.listsched_data import check_favorites, distinct_inputs

    for seed in range(30):
        inst = random_instance(seed)
        naive = [True] * inst.n_ops
        seen: set[tuple[int, int, float]] = set()
        for a, b, nbytes in zip(inst.src.tolist(), inst.dst.tolist(), inst.edge_bytes.tolist()):
            naive[b] &= (a, b, nbytes) not in seen
            seen.add((a, b, nbytes))
        assert distinct_inputs(inst) == naive
        fav = favorites_from_lp(inst, np.zeros(inst.n_edges), 0.5)
        assert check_favorites(inst, fav) == fav.tolist()
        if inst.n_edges:
            bad = fav.copy()
            bad[int(inst.dst[0])] = int(inst.src[0])  # an edge backwards: not a successor
            with pytest.raises(ValueError, match="favorite"):
                check_favorites(inst, bad)


def test_sct_lp_arrays_match_the_expression_form() -> None:
    """The m-SCT LP built from triplets, unreduced (``lp_reduce=False``; the reduction is
    checked in tests/test_sct_reduce.py), is the LP of its docstring written with
    expressions, entry for entry (HiGHS's vertex, hence the plan, depends on the order)."""
    from distplan.formulations.placement import sct
    from distplan.instances.generators import random_layered_dag
    from distplan.modeling.model import Model

    gnmt = coarsen(distplan.load_instance("gnmt-v2-4gpu-channels")).instance
    for inst in (gnmt, instance_from_dict(random_layered_dag(300, n_devices=3, seed=4)), random_instance(7)):
        got = sct.SCT_LP.build(inst, {"theta": 0.1, "lp_reduce": False})[0].to_arrays()
        p, c = inst.time.min(axis=1), inst.max_delay()
        m = Model("baechi_sct")
        x = m.add_vars("sct-x", inst.n_edges, lb=0.0, ub=1.0)
        s = m.add_vars("start", inst.n_ops, lb=0.0)
        w = m.add_vars("makespan", (), lb=0.0)
        m.add_constraints("sct-precedence", s[inst.src] - s[inst.dst] + c * x <= -p[inst.src])
        for name, ends in (("sct-one-favorite-child", inst.src), ("sct-one-favorite-parent", inst.dst)):
            deg = np.bincount(ends, minlength=inst.n_ops)
            has = np.flatnonzero(deg > 1)
            if has.size:
                m.add_constraints(name, x.group_sum(ends, inst.n_ops)[has] >= deg[has] - 1)
        m.add_constraints("makespan", s - w <= -p)
        m.minimize(w)
        want = m.to_arrays()
        assert got.con_blocks == want.con_blocks and got.var_blocks == want.var_blocks
        for a, b in ((got.A.indptr, want.A.indptr), (got.A.indices, want.A.indices), (got.A.data, want.A.data),
                     (got.row_lo, want.row_lo), (got.row_hi, want.row_hi), (got.col_lo, want.col_lo), (got.col_hi, want.col_hi), (got.c, want.c)):
            assert a.dtype == b.dtype and np.array_equal(a, b)


def test_coarse_ops_are_numbered_in_the_order_of_the_first_numbering() -> None:
    """`coarsen` numbers fused ops in Kahn's smallest-id-first order of the numbering by first
    member (every coarse edge forward), so the list scheduler keeps that numbering's ties."""
    from distplan.formulations.placement.coarsen import coplacement_groups, fuse
    from distplan.formulations.placement.listsched_data import kahn_positions

    renumbered = 0
    for inst in [distplan.load_instance("gnmt-v2-4gpu-channels")] + [random_instance(s) for s in range(10)]:
        coarse = coarsen(inst).instance
        assert np.all(coarse.src < coarse.dst)
        fused = fuse(inst, coplacement_groups(inst))
        # the numbering by first member: the first topological position of each fused op
        pos = np.empty(inst.n_ops, dtype=np.int64)
        pos[inst.topo_order()] = np.arange(inst.n_ops)
        first = np.full(coarse.n_ops, inst.n_ops)
        np.minimum.at(first, fused, pos)
        old = np.argsort(np.argsort(first))  # per new id: the id by first member
        cross = fused[inst.src] != fused[inst.dst]
        order, _ = kahn_positions(coarse.n_ops, old[fused[inst.src][cross]], old[fused[inst.dst][cross]])
        assert order == old.tolist()  # Kahn's k-th op (by first member) is new id k
        renumbered += not np.array_equal(old, np.arange(coarse.n_ops))
    assert renumbered > 0  # GNMT's numbering by first member is not topological


def test_memory_shortfall_messages_say_where_the_memory_went() -> None:
    """Every infeasible outcome on the random instances (m-ETF and a random fixed
    assignment, both memory models) names a device and a positive shortfall, and never a
    negative free amount: a device the placed ops already overfill says by how much, and
    under the liveness model the free amount is what stays resident for good."""
    rng = np.random.default_rng(7)
    seen = 0
    for seed in range(200):
        inst = random_instance(seed)
        groups = inst.colocation_groups()
        for kw in ({}, {"assignment": rng.integers(0, inst.n_devices, size=int(groups.max()) + 1)[groups]}):
            try:
                list_schedule(inst, **kw)
            except NoSolutionError as err:
                seen += 1
                text = str(err)
                assert "has only -" not in text, text
                assert err.details["shortfall_bytes"] > 0 and err.details["device"] in inst.device_names, text
    assert seen > 50


def _topo_walk(inst: PlacementInstance, uniform: bool) -> list[int] | None:
    """m-TOPO written out: ops in the instance's topological order fill device 0, 1, ...;
    an op whose colocation group is placed joins it; past the last device, the first device
    with room (None: none)."""
    groups = inst.colocation_groups().tolist()
    need = inst.memory_need()
    gneed: dict[int, float] = {}
    for v, g in enumerate(groups):
        gneed[g] = gneed.get(g, 0.0) + float(need[v])
    cap = [float(c) for c in inst.device_memory]
    if uniform:
        cap = [min(c, float(np.floor(need.sum() / inst.n_devices) + need.max())) for c in cap]
    used = [0.0] * inst.n_devices
    where: dict[int, int] = {}
    device = [-1] * inst.n_ops
    d = 0
    for v in inst.topo_order().tolist():
        g = groups[v]
        if g not in where:
            while d < inst.n_devices and used[d] + gneed[g] > cap[d]:
                d += 1
            k = d
            if d == inst.n_devices:
                room = [k for k in range(inst.n_devices) if inst.device_memory[k] - used[k] >= gneed[g]]
                if not room:
                    return None
                k = room[0]
            used[k] += gneed[g]
            where[g] = k
        device[v] = where[g]
    return device


def test_topo_assignment_keeps_groups_together_as_written_out() -> None:
    """`topo_assignment` against m-TOPO written out (colocation groups, the uniform cap and
    the fall-back past the last device) on random instances; every group on one device."""
    checked = 0
    for seed, tight in itertools.product(range(80), (None, 1.0, 1.15, "all but a byte")):
        inst = random_instance(seed)
        groups = inst.colocation_groups()
        if tight is not None:  # the fall-back runs while groups still have members to place
            need = float(np.bincount(groups, weights=inst.memory_need()).sum())
            cap = need - 1.0 if tight == "all but a byte" else float(tight) * need / inst.n_devices
            inst = dataclasses.replace(inst, device_memory=np.full(inst.n_devices, cap))
        for uniform in (True, False):
            want = _topo_walk(inst, uniform)
            try:
                got = topo_assignment(inst, uniform=uniform).tolist()
            except NoSolutionError:
                assert want is None, seed
                continue
            assert got == want, (seed, uniform)
            assert all(len({got[v] for v in np.flatnonzero(groups == g)}) == 1 for g in set(groups.tolist()))
            checked += int(np.bincount(groups).max() > 1)
    assert checked > 60


def test_topo_fall_back_keeps_a_group_on_its_device() -> None:
    """Past the last device under the uniform cap (28 bytes: 40 / 2 + 8), m-TOPO puts a new
    group (g1, g2: 4 + 4 bytes) on the first device with room for all of it (d1: 10 of 34
    free); the group's second op joins it there. Were the group's device not recorded, g2
    would look for 8 bytes of room again and find none (d0 2 free, d1 2 free)."""
    ops = [{"name": n, "time": 1.0, "memory": 8.0} for n in "abcd"]
    ops += [{"name": n, "time": 1.0, "memory": 4.0, "colocate": "g"} for n in ("g1", "g2")]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "topo-fall-back",
        "graph": {"ops": ops, "edges": [{"src": u, "dst": v, "bytes": 0.0} for u, v in zip(["a", "b", "c", "d", "g1"], ["b", "c", "d", "g1", "g2"])]},
        "cluster": {"devices": [{"name": "d0", "memory": 10.0}, {"name": "d1", "memory": 34.0}], "bandwidth": 10.0, "latency": 0.0},
        "model": {"memory": "simple", "communication": "independent"},
    }
    inst = instance_from_dict(doc)
    assert topo_assignment(inst, uniform=True).tolist() == [0, 1, 1, 1, 1, 1]
    assert _topo_walk(inst, True) == [0, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("memory", ["simple", "liveness"])
def test_an_op_whose_inputs_never_arrive_is_not_called_short_of_memory(memory: str) -> None:
    """1e18 bytes over a 1e-300 B/s link take forever: with memory to spare the error says
    the earliest start is infinite (before, it named a device 'short by -998 bytes')."""
    ops = [{"name": n, "time": 1.0, "memory": 5.0, "temporary": 1.0, "output": 1.0} for n in "abc"]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "never-arrives",
        "graph": {"ops": ops, "edges": [{"src": "a", "dst": "b", "bytes": 1.0}, {"src": "b", "dst": "c", "bytes": 1e18}]},
        "cluster": {"devices": [{"name": "d0", "memory": 1000.0}, {"name": "d1", "memory": 1000.0}], "bandwidth": 1e-300, "latency": 0.0},
        "model": {"memory": memory, "communication": "independent"},
    }
    inst = instance_from_dict(doc)
    with pytest.raises(NoSolutionError, match="'c' can never start: its earliest start is infinite"):
        list_schedule(inst, assignment=np.array([1, 0, 1]))
