"""Sinks moved into idle gaps (`sinkfill`): on a constructed case the non-delay schedulers
run a weight update in a gap too short for it and delay the critical chain, the re-timed
schedule does not; on random DAGs the re-timed plan is one the evaluator accepts, its
non-sink ops never start later than in the exact re-timing of their orders, and the
search's timing (`SearchProblem.schedule`) is never worse with it than without."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.placement.improve import SearchProblem
from distplan.formulations.placement.listsched import list_schedule
from distplan.formulations.placement.sinkfill import sinks_in_gaps
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate, start_times_in_order
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def instance(ops: list[tuple[str, float]], edges: list[tuple[str, str, float]], devices: int = 2, communication: str = "independent") -> PlacementInstance:
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "sinks",
        "graph": {"ops": [{"name": a, "time": t, "memory": 1.0} for a, t in ops], "edges": [{"src": a, "dst": b, "bytes": x} for a, b, x in edges]},
        "cluster": {"devices": [{"name": f"g{d}", "memory": 1e9} for d in range(devices)], "bandwidth": 1.0, "latency": 0.0},
        "model": {"communication": communication},
    }
    inst = instance_from_dict(doc)
    assert isinstance(inst, PlacementInstance)
    return inst


def gap_case(communication: str = "independent") -> tuple[PlacementInstance, np.ndarray]:
    """g1 runs x (1.5 s), then waits for a's output (1 s transfer) to run b; u, a 1 s sink
    of x, is ready at 1.5 s in that 0.5 s gap; c on g0 and d on g1 leave g1 idle from 3 to
    6 s. Non-delay: u at 1.5, b at 2.5, ..., end 7.5 s; with u moved: end 7 s."""
    inst = instance(
        [("a", 1.0), ("x", 1.5), ("u", 1.0), ("b", 1.0), ("c", 1.0), ("d", 1.0)],
        [("a", "b", 1.0), ("x", "b", 0.0), ("x", "u", 0.0), ("b", "c", 1.0), ("c", "d", 1.0)],
        communication=communication,
    )
    device = np.array([0, 1, 1, 1, 0, 1])
    return inst, device


def test_a_sink_leaves_the_short_gap_to_the_critical_chain() -> None:
    inst, device = gap_case()
    before = list_schedule(inst, assignment=device)
    assert before.makespan == pytest.approx(7.5)
    start = sinks_in_gaps(inst, device, before.start)
    assert start is not None
    names = dict(zip(inst.op_names, start.tolist()))
    assert names["b"] == pytest.approx(2.0) and names["u"] == pytest.approx(3.0)  # the 3-6 s gap
    check = evaluate(inst, make_plan(inst, device, start))
    assert check.feasible and check.objective == pytest.approx(7.0)
    # the search's timing takes it, and keeps the plain one where it is better
    assert SearchProblem(inst, sink_fill=True).schedule(device).makespan == pytest.approx(7.0)  # type: ignore[union-attr]
    assert SearchProblem(inst).schedule(device).makespan == pytest.approx(7.5)  # type: ignore[union-attr]


def test_not_under_the_channel_model() -> None:
    inst, device = gap_case("channels")
    assert sinks_in_gaps(inst, device, list_schedule(inst, assignment=device).start) is None


def test_not_under_the_liveness_memory_model() -> None:
    """Under liveness the filled plan would run sink u (temporary 5) in the gap while y's
    output (5) is live: 10 bytes on a 6-byte device, which the evaluator rejects; the
    given plan (u after z) is feasible."""
    ops = [{"name": "a", "time": 1.0}, {"name": "x", "time": 1.0}, {"name": "u", "time": 1.0, "temporary": 5.0}, {"name": "y", "time": 1.0, "output": 5.0}, {"name": "z", "time": 1.0}]
    edges = [("a", "z", 2.0), ("x", "u", 0.0), ("x", "y", 0.0), ("y", "z", 0.0)]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "live",
        "graph": {"ops": ops, "edges": [{"src": a, "dst": b, "bytes": x} for a, b, x in edges]},
        "cluster": {"devices": [{"name": "g0", "memory": 6.0}, {"name": "g1", "memory": 6.0}], "bandwidth": 1.0, "latency": 0.0},
        "model": {"communication": "independent", "memory": "liveness"},
    }
    inst = instance_from_dict(doc)
    device = np.array([0, 1, 1, 1, 1])
    start = np.array([0.0, 0.0, 4.0, 1.0, 3.0])
    assert evaluate(inst, make_plan(inst, device, start)).feasible
    assert sinks_in_gaps(inst, device, start) is None


def random_case(seed: int) -> tuple[PlacementInstance, np.ndarray]:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 30))
    ops = [(f"o{k}", float(rng.integers(0, 5))) for k in range(n)]
    edges: list[tuple[str, str, float]] = []
    density = rng.uniform(0.05, 0.4)
    for j in range(1, n):
        for i in range(j):
            if rng.random() < density:
                edges.append((f"o{i}", f"o{j}", float(rng.integers(0, 4))))
    devices = int(rng.integers(2, 4))
    return instance(ops, edges, devices=devices), rng.integers(0, devices, size=n)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.integers(0, 10_000))
def test_random_plans_stay_feasible_and_no_other_op_starts_later(seed: int) -> None:
    inst, device = random_case(seed)
    base = list_schedule(inst, assignment=device)
    start = sinks_in_gaps(inst, device, base.start)
    sink = np.bincount(inst.src, minlength=inst.n_ops) == 0
    if start is None:
        assert not np.any(sink & (inst.time[np.arange(inst.n_ops), device] > 0))
        return
    check = evaluate(inst, make_plan(inst, device, start))
    assert check.feasible, check.violations
    # every other op starts at its earliest in its orders (sinks left out): never later
    # than the exact re-timing of the whole schedule in the same orders
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(inst.n_ops)
    rank = np.empty(inst.n_ops, dtype=np.int64)
    rank[np.lexsort((pos, base.start))] = np.arange(inst.n_ops)
    whole = start_times_in_order(inst, device, rank)
    assert whole is not None
    core = ~sink | (inst.time[np.arange(inst.n_ops), device] == 0)
    assert np.all(start[core] <= whole[core] + 1e-9)
    with_fill = SearchProblem(inst, sink_fill=True).schedule(device)
    without = SearchProblem(inst).schedule(device)
    assert with_fill is not None and without is not None
    assert with_fill.makespan <= without.makespan + 1e-12
    assert evaluate(inst, make_plan(inst, with_fill.device, with_fill.start)).objective == pytest.approx(with_fill.makespan, abs=1e-9)



def test_the_search_returns_its_best_plan_with_the_sinks_moved() -> None:
    """`improve` steps without moving sinks (its key would rank moves by where the updates
    went) and moves them in the plan it returns: from the gap case, with no move tried,
    the start itself at 7 s, not 7.5 s."""
    from distplan.formulations.placement.improve import improve

    inst, device = gap_case()
    found, log = improve(inst, device, max_evals=1)
    assert found is not None and found.makespan == pytest.approx(7.0)
    assert log.start_makespan == pytest.approx(7.5)
    assert evaluate(inst, make_plan(inst, found.device, found.start)).objective == pytest.approx(7.0)
