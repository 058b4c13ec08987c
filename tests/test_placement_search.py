"""placement_search: local search over device assignments (`improve`).

The critical chain explains the whole makespan; the search never returns a plan worse than
its start, finds the parallel plan of two independent chains started on one device,
respects memory and colocation, is deterministic for a seed and an evaluation budget, and
never beats a known optimum."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pytest

import distplan
from distplan.formulations.placement import improve as imp
from distplan.instances import bundled, load_instance
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def chains(n_chains: int = 2, length: int = 5, devices: int = 2, memory: float = 1e9, comm: str = "independent", colocate: bool = False) -> PlacementInstance:
    """``n_chains`` independent chains of ``length`` ops (1 s each), joined by a sink."""
    ops: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []
    for c in range(n_chains):
        for k in range(length):
            op: dict[str, Any] = {"name": f"c{c}_{k}", "time": 1.0, "memory": 1.0}
            if colocate and k < 2:
                op["colocate"] = f"head{c}"
            ops.append(op)
            if k:
                edges.append({"src": f"c{c}_{k - 1}", "dst": f"c{c}_{k}", "bytes": 1.0})
        edges.append({"src": f"c{c}_{length - 1}", "dst": "sink", "bytes": 1.0})
    ops.append({"name": "sink", "time": 1.0, "memory": 1.0})
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "chains",
        "graph": {"ops": ops, "edges": edges},
        "cluster": {"devices": [{"name": f"g{d}", "memory": memory} for d in range(devices)], "bandwidth": 10.0, "latency": 0.1},
        "model": {"communication": comm},
    }
    inst = instance_from_dict(doc)
    assert isinstance(inst, PlacementInstance)
    return inst


@pytest.mark.parametrize("comm", ["independent", "channels"])
def test_critical_chain_explains_the_makespan(comm: str) -> None:
    """Walking the chain back from the last op reaches time 0, and under independent links
    its durations and delays add up to the makespan."""
    inst = chains(comm=comm)
    prob = imp.SearchProblem(inst)
    dev = np.zeros(inst.n_ops, dtype=np.int64)
    dev[[1, 2]] = 1  # a cut inside chain 0: transfers on the chain
    s = prob.schedule(dev)
    assert s is not None
    links = imp.critical_links(prob, s, np.random.default_rng(0))
    first = links[-1][1]
    assert s.start[first] == 0.0
    if comm == "independent":
        total = float(inst.time[first, dev[first]])
        for kind, u, v in links:
            total += float(inst.time[v, dev[v]])
            if kind == "data":
                e = int(np.flatnonzero((inst.src == u) & (inst.dst == v))[0])
                total += float(inst.delay(np.array([e]), dev[[u]], dev[[v]])[0])
        assert total == pytest.approx(s.makespan, rel=1e-12)


def test_search_parallelizes_two_chains_from_one_device() -> None:
    inst = chains()
    start = np.zeros(inst.n_ops, dtype=np.int64)
    best, log = imp.improve(inst, start, max_evals=400)
    assert best is not None
    assert log.start_makespan == 11.0
    # both chains in parallel: 5 s + one transfer (0.2 s) + the sink
    assert best.makespan <= 6.2 + 1e-9
    assert len(set(best.device[:10].tolist())) == 2


def test_search_keeps_memory_and_colocation() -> None:
    inst = chains(memory=6.0, colocate=True)  # 11 ops of 1 byte: two devices needed
    start = np.array([0] * 5 + [1] * 5 + [1], dtype=np.int64)
    best, _ = imp.improve(inst, start, max_evals=300)
    assert best is not None
    check = evaluate(inst, make_plan(inst, best.device, best.start))
    assert check.feasible, check.violations
    assert best.makespan <= check.objective + 1e-12
    for c in range(2):
        assert best.device[5 * c] == best.device[5 * c + 1]


def test_search_is_deterministic_for_a_seed_and_budget() -> None:
    inst = load_instance("inception-v3-dgx1-4")
    from distplan.formulations.placement.milp import best_heuristic

    sched, _ = best_heuristic(inst)
    assert sched is not None
    runs = [imp.improve(inst, sched.device, max_evals=60, seed=3) for _ in range(2)]
    assert runs[0][0] is not None and runs[1][0] is not None
    assert np.array_equal(runs[0][0].device, runs[1][0].device)
    assert runs[0][1].makespan <= runs[0][1].start_makespan
    assert runs[0][1].evaluations <= 60


def test_search_honours_its_deadline() -> None:
    inst = load_instance("resnet-50-dgx1-4")
    start = np.zeros(inst.n_ops, dtype=np.int64)
    t0 = time.perf_counter()
    best, log = imp.improve(inst, start, deadline=t0 + 1.0)
    assert time.perf_counter() - t0 < 2.0
    assert best is not None and best.makespan <= log.start_makespan


@pytest.mark.parametrize("name", sorted(n for n in bundled() if n.startswith("placement-small")))
def test_search_through_the_api_never_beats_the_optimum(name: str) -> None:
    """The evaluator accepts its plan, it is no worse than m-ETF's, and no better than the
    instance's known optimum (from the bundle's description)."""
    res = distplan.solve(name, formulation="placement_search", time_limit=5, max_evals=200)
    etf = distplan.solve(name, formulation="baechi_etf")
    assert res.objective is not None and etf.objective is not None
    assert res.objective <= etf.objective + 1e-12
    optimum = float(bundled()[name]["description"].split("optimum ")[1].split(" ms")[0]) / 1e3
    assert res.objective >= optimum - 1e-9


def test_path_clusters_and_their_greedy_moves_split_two_chains() -> None:
    """The longest paths are the two chains; moving the second chain's cluster to the other
    device runs both in parallel."""
    inst = chains()
    cl = imp.path_clusters(inst, min_share=0.0)
    assert len(set(cl[:5].tolist())) == 1 and len(set(cl[5:10].tolist())) == 1 and cl[0] != cl[5]
    best = imp.cluster_greedy(inst, np.zeros(inst.n_ops, dtype=np.int64))
    assert best is not None and best.makespan <= 6.2 + 1e-9
    check = evaluate(inst, make_plan(inst, best.device, best.start))
    assert check.feasible and check.objective == pytest.approx(best.makespan)


def test_tail_priority_order_keeps_the_chain_ahead_of_leaves() -> None:
    """a feeds a leaf u and a chain b -> c (1 s each, 1 s links); a, u, b on device 0, c on
    device 1. Earliest-finish list scheduling may run u first (makespan 5 s); the longest
    tail first runs b, then u while b's output travels: 4 s, under both communication
    models, and the evaluator agrees with every plan it returns."""
    from test_placement_bounds import tiny

    from distplan.formulations.placement.listsched import list_schedule
    from distplan.formulations.placement.tailsched import polished, tail_priority_order, tail_priority_schedule

    dev = np.array([0, 0, 0, 1])
    for comm in ("independent", "channels"):
        inst = tiny(4, [(0, 1, 0), (0, 2, 0), (2, 3, 0)], [1, 1, 1, 1], [0, 0, 0, 0], 1, 1, comm, False)
        s = tail_priority_schedule(inst, dev)
        assert s is not None and s.makespan == 4.0
        check = evaluate(inst, make_plan(inst, s.device, s.start))
        assert check.feasible and check.objective == 4.0
        assert tail_priority_order(inst, dev).tolist() == [0.0, 2.0, 1.0, 3.0]
        ls = list_schedule(inst, assignment=dev)
        assert polished(inst, ls).makespan == min(ls.makespan, 4.0)


def test_search_times_assignments_longest_tail_first() -> None:
    """Under independent links the search times an assignment by the better of the list
    schedule and the longest-tail-first order; on resnet-50 split in three (the stem on
    device 2, the body on 3, the last stage on 0: the search's plan) the latter ends
    earlier, and the evaluator measures exactly the makespan the search uses."""
    from distplan.formulations.placement.listsched import list_schedule

    inst = load_instance("resnet-50-dgx1-4")
    g = inst.colocation_groups()
    dev = np.where(g < 5, 2, np.where(g < 61, 3, 0))
    ls = list_schedule(inst, assignment=dev)
    both = imp.SearchProblem(inst).schedule(dev)
    assert both is not None and both.makespan < ls.makespan
    check = evaluate(inst, make_plan(inst, both.device, both.start))
    assert check.feasible and check.objective == pytest.approx(both.makespan, rel=1e-12)
    assert imp.SearchProblem(inst, tail_order=False).schedule(dev).makespan == ls.makespan


def test_relabelled_finds_the_links_whatever_the_device_names() -> None:
    """DGX-1's links differ (25 vs 50 GB/s): the best renaming of an assignment's identical
    devices does not depend on how the devices were named, and is never worse than the
    assignment as named."""
    inst = load_instance("resnet-50-dgx1-4")
    g = inst.colocation_groups()
    dev = np.where(g < 5, 2, np.where(g < 61, 3, 0))
    as_named = imp.SearchProblem(inst).schedule(dev)
    best = imp.relabelled(inst, dev)
    renamed = imp.relabelled(inst, np.array([0, 2, 1, 3])[dev])
    assert as_named is not None and best is not None and renamed is not None
    assert best.makespan <= as_named.makespan
    assert renamed.makespan == best.makespan
    worst_names = imp.SearchProblem(inst).schedule(np.array([0, 2, 1, 3])[dev])
    assert worst_names is not None and renamed.makespan < worst_names.makespan


def test_milp_searches_from_the_relaxation_assignment() -> None:
    """placement_milp's search from a relaxation's assignment returns the better of that
    and the plan it had, timed by the evaluator."""
    from distplan.formulations.placement import milp
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    inst = load_instance("resnet-50-dgx1-4")
    g = inst.colocation_groups()
    seed = np.where(g < 5, 2, np.where(g < 61, 3, 0))
    single = milp.best_heuristic(inst)[0]
    assert single is not None
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=3), {"relaxation_search_share": 0.5})
    sched, source = milp._search_from(inst, ctx, [seed], single, "m-ETF", 0.0)
    assert sched is not None and source == "assignment relaxation + local search"
    assert sched.makespan < single.makespan
    check = evaluate(inst, make_plan(inst, sched.device, sched.start))
    assert check.feasible and check.objective == pytest.approx(sched.makespan, rel=1e-12)
    ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=3), {"relaxation_search_share": 0.0})
    assert milp._search_from(inst, ctx, [seed], single, "m-ETF", 0.0) == (single, "m-ETF")


def test_search_out_of_time_returns_the_best_start() -> None:
    """With the deadline already past (the heuristics took the whole limit), the search
    returns the best start as it is instead of nothing (``--time-limit 3`` on
    gnmt-v2-4gpu-channels failed with an AssertionError)."""
    from distplan.formulations.placement.milp import heuristic_schedules
    from distplan.formulations.placement.search import improved_schedule

    inst = chains()
    starts = heuristic_schedules(inst)
    best, origin, info = improved_schedule(inst, starts, deadline=time.perf_counter() - 1.0)
    assert best is starts[0][0] and origin == starts[0][1]
    assert info["search_evaluations_total"] == 0
