"""Windows joined by co-location (`placement.joined`, `milp.joined_bound`, the fourth step of
`segments.compose`): on a forward/backward fixture whose forward block wants its branches
apart and whose gradient block wants them together, the composition with the joined pair
equals the brute-force optimum (12), which the separate windows (10) do not reach, so a
bound inflated by any amount fails; on random tiny training graphs (two devices, both
communication models, simple memory, where brute force is exact) the joined MILP's bound
never exceeds the brute-force value of the joined instance (the least sum of the two
windows' optima over assignments that keep co-location groups together) and reaches it
under independent links, and the composition never exceeds the optimum. Integral data."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_placement_segments import exact
from test_placement_segments_lasthop import instance as two_devices

import distplan
from distplan.errors import InputError
from distplan.formulations.placement.joined import device_automorphisms, joined_instance, orbit_representatives, tied_pairs
from distplan.formulations.placement.milp import joined_bound, window_bound
from distplan.formulations.placement.segments import compose, cut_waists, module_bound
from distplan.formulations.registry import RunContext
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate, schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions

DATA = Path(__file__).parent / "data"


def instance(times: list[int], edges: list[tuple[int, int, int]], groups: list[str | None], comm: str = "independent") -> PlacementInstance:
    """Two identical devices, bandwidth 1, no latency (a transfer of x bytes takes x)."""
    return two_devices(times, edges, groups, 0, comm)


def training(fwd: tuple[int, int], fwd_bytes: int, bwd: tuple[int, int], bwd_bytes: int, comm: str = "independent") -> PlacementInstance:
    """f0 -> {a, b} -> f1 -> g1 -> {a', b'} -> g0, a with a' and b with b' co-located,
    the waists taking 1: branch times ``fwd`` and ``bwd``, every branch edge ``fwd_bytes``
    (forward) or ``bwd_bytes`` (backward), f1 -> g1 one byte."""
    times = [1, fwd[0], fwd[1], 1, 1, bwd[0], bwd[1], 1]  # f0 a b f1 g1 a' b' g0
    edges = [(0, 1, fwd_bytes), (0, 2, fwd_bytes), (1, 3, fwd_bytes), (2, 3, fwd_bytes), (3, 4, 1)]
    edges += [(4, 5, bwd_bytes), (4, 6, bwd_bytes), (5, 7, bwd_bytes), (6, 7, bwd_bytes)]
    return instance(times, edges, [None, "a", "b", None, None, "a", "b", None], comm)


def _context() -> RunContext:
    return RunContext(get_backend("highs"), SolveOptions(time_limit=20.0, threads=1))


def _extensions(reach: np.ndarray, ops: list[int]) -> list[list[int]]:
    """Every order of ``ops`` that no path (``reach``) runs against."""
    if not ops:
        return [[]]
    out = []
    for v in ops:
        rest = [u for u in ops if u != v]
        if not any(reach[u, v] for u in rest):
            out += [[v, *tail] for tail in _extensions(reach, rest)]
    return out


def _fixed_optimum(inst: PlacementInstance, dev: np.ndarray) -> float:
    """The optimal makespan (seconds) with the devices ``dev``: every order of each
    device's ops consistent with the graph, timed by the evaluator's simulation (as
    `test_placement_bounds.brute_force` does, with the orders built along the graph)."""
    best = np.inf
    n = inst.n_ops
    reach = np.zeros((n, n), dtype=bool)
    reach[inst.src, inst.dst] = True
    for k in range(n):
        reach |= reach[:, [k]] & reach[[k], :]
    per_device = [_extensions(reach, np.flatnonzero(dev == d).tolist()) for d in range(inst.n_devices)]
    for orders in itertools.product(*per_device):
        key = np.zeros(inst.n_ops)
        for order in orders:
            key[list(order)] = np.arange(len(order))
        try:
            start = schedule_fixed_placement(inst, dev, order_key=key)
        except InputError:
            continue
        check = evaluate(inst, make_plan(inst, dev, start))
        if check.feasible:
            best = min(best, check.objective)
    return float(best)


def optimum(inst: PlacementInstance) -> float:
    """The optimal makespan (seconds) by brute force over every assignment with op 0 on
    device 0 (the two devices of `instance` are interchangeable; simple memory, which
    these instances never exceed)."""
    return min(_fixed_optimum(inst, np.asarray((0, *a), dtype=np.int64)) for a in itertools.product(range(inst.n_devices), repeat=inst.n_ops - 1))


def joined_exact(sub: PlacementInstance, part: np.ndarray) -> float:
    """The joined instance's value by brute force: the least sum of the two parts'
    optima over the assignments that keep co-location groups together."""
    groups = sub.colocation_groups()
    ids, inverse = np.unique(groups, return_inverse=True)
    parts = [sub.induced(part == k) for k in range(2)]
    best = np.inf
    for choice in itertools.product(range(sub.n_devices), repeat=ids.size):
        dev = np.asarray(choice, dtype=np.int64)[inverse]
        best = min(best, sum(_fixed_optimum(p, dev[part == k]) for k, p in enumerate(parts)))
    return float(best)


def small_exact(sub: PlacementInstance, until: float, lower: float, stage: int) -> float | None:
    """`test_placement_segments.exact` on windows of at most four ops (the modules between
    consecutive waists here), None on the larger ones (the segments from the start or to
    the end, whose brute force is slow and would see the whole instance)."""
    return exact(sub, until, lower, stage) if sub.n_ops <= 4 else None


def test_joined_pair_reaches_the_forward_backward_optimum() -> None:
    """Forward branches (3 each, edges 1) end first apart (4: one branch moves with f1,
    vs 6 together); gradient branches (1 each, edges 5) together (2, vs 6 apart). One
    assignment serves both: 8; the windows alone: 4 + 2. With the four waists: 12 =
    everything on one device."""
    inst = training((3, 3), 1, (1, 1), 5)
    assert optimum(inst) == 12.0
    chain = cut_waists(inst)
    assert [inst.op_names[v] for v in chain] == ["o0", "o3", "o4", "o7"]
    calls: list[float] = []

    def exact_joined(sub: PlacementInstance, part: np.ndarray, keys: Any, until: float, lower: tuple[float, float]) -> tuple[float, bool]:
        value = joined_exact(sub, part)
        assert sum(lower) <= value
        calls.append(value)
        return value, True

    alone = compose(inst, chain, small_exact)
    series = sum(alone.seg[(i, i + 1)] for i in range(len(chain) + 1)) + len(chain)
    assert series == 10.0 and alone.joined == 0 and alone.value < 12.0  # (a segment bound from the start sees 12 - 1e-6)
    c = compose(inst, chain, small_exact, solve_joined=exact_joined)
    assert calls == [8.0]
    assert c.value == 12.0 and c.joined == 1
    ctx = _context()
    b = module_bound(
        inst,
        lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage),
        deadline=time.perf_counter() + 20,
        solve_joined=lambda sub, part, keys, until, lower: joined_bound(sub, part, ctx, until, lower, keys),
    )
    assert b is not None and b.grade == "solver" and "1 pairs tied by co-location joined" in b.source
    assert 12.0 - 1e-6 <= b.value <= 12.0


@st.composite
def training_instances(draw: Any) -> PlacementInstance:
    fwd = (draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    bwd = (draw(st.integers(0, 4)), draw(st.integers(0, 4)))
    return training(fwd, draw(st.integers(0, 4)), bwd, draw(st.integers(0, 4)), draw(st.sampled_from(["independent", "channels"])))


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_instances())
def test_joined_bound_against_brute_force(inst: PlacementInstance) -> None:
    opt = optimum(inst)
    chain = cut_waists(inst)
    ctx = _context()
    seen: list[tuple[float, float]] = []

    def milp_joined(sub: PlacementInstance, part: np.ndarray, keys: Any, until: float, lower: tuple[float, float]) -> tuple[float, bool] | None:
        found = joined_bound(sub, part, ctx, time.perf_counter() + 20, lower, keys)
        truth = joined_exact(sub, part)
        assert found is None or found[0] <= truth, f"joined bound {found} above the joined value {truth}"
        seen.append((truth, sum(lower) if found is None else found[0]))
        return found

    milp_window = lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage)  # noqa: E731
    c = compose(inst, chain, milp_window, solve_joined=milp_joined)
    assert c.value <= opt, f"{c.value} > optimum {opt}"
    if inst.communication == "independent":
        for truth, got in seen:  # the MILP is exact under independent links
            assert got >= truth * (1 - 2e-4) - 1e-6, f"joined bound {got} below the joined value {truth}"
        c = compose(inst, chain, small_exact, solve_joined=lambda sub, part, keys, until, lower: (joined_exact(sub, part), True))
        assert c.value <= opt, f"{c.value} > optimum {opt}"


def test_tied_pairs_are_disjoint_and_skip_adjacent_modules() -> None:
    groups = np.array([0, 1, 2, 0, 1, 2, 3, 3])
    inner = [np.array([0, 1]), np.array([2]), np.array([3, 4]), np.array([5]), np.array([6]), np.array([7])]
    # module 0 shares two groups with 2, module 1 one with 3; 4 and 5 are adjacent
    assert tied_pairs(inner, groups, adjacent=[(4, 5)]) == [(0, 2), (1, 3)]
    assert tied_pairs(inner, groups, adjacent=[(0, 2), (4, 5)]) == [(1, 3)]


def test_joined_instance_keeps_the_edges_inside_each_window() -> None:
    inst = training((3, 3), 1, (1, 1), 5)
    sub, part = joined_instance(inst, np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7]), [0, 3, 4, 7])
    assert part.tolist() == [0, 0, 0, 0, 1, 1, 1, 1]
    assert sub.n_edges == 8 and np.all(part[sub.src] == part[sub.dst])
    assert sub.time[[0, 3, 4, 7], 0].tolist() == [0.0] * 4 and sub.time[[1, 6], 0].tolist() == [3.0, 1.0]


def test_device_automorphisms_of_a_dgx1_quad() -> None:
    """Four devices, fast links 0-3, 1-2, 2-3 (a path 0-3-2-1): reversing the path is the
    only renaming besides the identity; op 0 is fixed to devices 0 and 2."""
    bw = np.full((4, 4), 25.0)
    for a, b in ((0, 3), (1, 2), (2, 3)):
        bw[a, b] = bw[b, a] = 50.0
    inst = training((3, 3), 1, (1, 1), 5)
    inst.device_names = [f"g{d}" for d in range(4)]
    inst.device_types = ["v"] * 4
    inst.device_memory = np.ones(4)
    inst.time = np.repeat(inst.time[:, :1], 4, axis=1)
    inst.bandwidth, inst.latency = bw, np.full((4, 4), 1e-6)
    autos = device_automorphisms(inst)
    assert [a.tolist() for a in autos] == [[0, 1, 2, 3], [1, 0, 3, 2]]
    assert orbit_representatives(autos, 4).tolist() == [0, 2]
    inst.time = inst.time.copy()
    inst.time[1, 1] = 9.0  # device 1 slower on one op: no renaming but the identity
    assert [a.tolist() for a in device_automorphisms(inst)] == [[0, 1, 2, 3]]


@pytest.mark.parametrize("change", ["latency one way", "bandwidth one way", "memory"])
def test_device_automorphisms_keep_links_both_ways_and_memory(change: str) -> None:
    """Two identical devices swap, unless one direction of their link (latency or
    bandwidth) or one device's memory differs: then only the identity is left."""
    inst = training((3, 3), 1, (1, 1), 5)
    assert [a.tolist() for a in device_automorphisms(inst)] == [[0, 1], [1, 0]]
    lat, bw, mem = inst.latency.copy(), inst.bandwidth.copy(), inst.device_memory.copy()
    if change == "latency one way":
        lat[0, 1] = 0.5
    elif change == "bandwidth one way":
        bw[1, 0] = 2.0
    else:
        mem[1] = 2.0
    inst.latency, inst.bandwidth, inst.device_memory = lat, bw, mem
    assert [a.tolist() for a in device_automorphisms(inst)] == [[0, 1]]


def test_placement_milp_reports_the_joined_composition_and_its_switch() -> None:
    """`placement_milp` runs the joined pairs by default (its composition bound names them)
    and not with ``joined_windows`` off; the plan is the optimum 12 either way."""
    inst = training((3, 3), 1, (1, 1), 5)
    on = distplan.solve(inst, "placement_milp", time_limit=30, threads=1, module_ops=0)
    off = distplan.solve(inst, "placement_milp", time_limit=30, threads=1, joined_windows=False, module_ops=0)
    assert on.objective == off.objective == 12.0
    assert any("1 pairs tied by co-location joined" in b.source for b in on.bounds)
    assert not any("joined" in b.source for b in off.bounds)


def _module_bound_as_milp_runs_it(inst: PlacementInstance) -> float:
    """`segments.module_bound` with the windows' plans filed and handed to the joined
    solves (``found``), as `milp.run` calls it."""
    ctx = _context()
    windows: dict[bytes, list[np.ndarray]] = {}
    b = module_bound(
        inst,
        lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage, found=windows),
        deadline=time.perf_counter() + 20,
        solve_joined=lambda sub, part, keys, until, lower: joined_bound(sub, part, ctx, until, lower, keys, found=windows),
    )
    assert b is not None
    return b.value


@pytest.mark.parametrize("comm", ["independent", "channels"])
@pytest.mark.parametrize("memory", ["simple", "liveness"])
def test_joined_horizon_from_plans_that_fit_both_windows_memory(comm: str, memory: str) -> None:
    """Devices of two types; X and Y (memory 1 each) cannot share a device, T1 and T2 are
    co-located. The windows' filed plans put X and Y both on the fast device A: each fits
    alone, together they break the joined MILP's memory row. Taken as the horizon (12.5)
    they cut off the joined optimum (Y on B: 13) and the bound came out 16.1, above the
    plan below (15.0, the optimum)."""
    with open(DATA / "joined_memory_horizon.json") as f:
        doc = json.load(f)
    doc["model"] = {"communication": comm, "memory": memory}
    inst = instance_from_dict(doc)
    names = inst.op_names
    dev = np.asarray([1 if n in ("V", "Y") else 0 for n in names], dtype=np.int64)
    check = evaluate(inst, make_plan(inst, dev, schedule_fixed_placement(inst, dev)))
    assert check.feasible and check.objective == pytest.approx(15.0)
    assert _module_bound_as_milp_runs_it(inst) <= check.objective


def test_three_modules_sharing_groups_pair_each_module_once() -> None:
    """Three modules share the co-location groups a and b; only one pair may be joined (a
    module in two pairs would be counted twice: 18). Everything on one device: 16."""
    inst = instance(
        [1, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1],
        [(0, 1, 1), (0, 2, 1), (1, 3, 1), (2, 3, 1), (3, 4, 1), (4, 5, 5), (4, 6, 5), (5, 7, 5), (6, 7, 5), (7, 8, 1), (8, 9, 5), (8, 10, 5), (9, 11, 5), (10, 11, 5)],
        [None, "a", "b", None, None, "a", "b", None, None, "a", "b", None],
    )
    dev = np.zeros(inst.n_ops, dtype=np.int64)
    check = evaluate(inst, make_plan(inst, dev, schedule_fixed_placement(inst, dev)))
    assert check.feasible and check.objective == 16.0
    assert _module_bound_as_milp_runs_it(inst) <= 16.0


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(training_instances(), st.sampled_from([1.5, 2.0]), st.sampled_from([1.0, 4.0]))
def test_joined_bound_on_devices_that_differ(inst: PlacementInstance, slow: float, fast_link: float) -> None:
    """Three devices: g0 of one type, g1 and g2 of another (``slow`` times as long), the
    g1-g2 link ``fast_link`` times as fast: two orbits ({0}, {1, 2}) where the window's ops
    take time, op 0's device fixed to their representatives. The joined MILP's bound never exceeds the brute-force joined
    value and, under independent links, reaches it (no assignment class lost)."""
    m = 3
    inst.device_names, inst.device_types, inst.device_memory = [f"g{d}" for d in range(m)], ["a", "b", "b"], np.ones(m)
    inst.time = np.hstack([inst.time[:, :1], inst.time[:, :1] * slow, inst.time[:, :1] * slow])
    bw = np.ones((m, m))
    bw[1, 2] = bw[2, 1] = fast_link
    inst.bandwidth, inst.latency = bw, np.zeros((m, m))
    sub, part = joined_instance(inst, np.array([0, 1, 2, 3]), np.array([4, 5, 6, 7]), [0, 3, 4, 7])
    truth = joined_exact(sub, part)
    got = joined_bound(sub, part, _context(), time.perf_counter() + 20)
    assert got is not None and got[0] <= truth
    if inst.communication == "independent":
        assert got[0] >= truth * (1 - 2e-4) - 1e-6
