"""The last-stint bound over cut waists (`placement.lasthop`): on random tiny DAGs with
co-location groups and sinks (4-5 ops, 2 devices, both communication models, simple
memory, where brute force is exact) it never exceeds the brute-force optimum, over every
chain of one or two ops and over the cut waists, with each window bounded by its
brute-force optimum (the strongest a window can have, under independent links, on chains of
two ops and more) or by the segment bounds; on a forward/backward fixture with weight updates it equals the optimum,
which the window composition does not reach, so a bound inflated by any amount fails.
Integral data: sums are exact."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_placement_bounds import brute_force
from test_placement_channels_waist import _chains
from test_placement_segments import exact

from distplan.formulations.placement.lasthop import _mirrored, cut_spans, last_stint_bound
from distplan.formulations.placement.segments import compose, cut_waists, module_bound
from distplan.models.common import instance_from_dict
from distplan.models.placement_instance import PlacementInstance


def instance(times: list[int], edges: list[tuple[int, int, int]], groups: list[str | None], latency: int = 0, comm: str = "independent") -> PlacementInstance:
    """Two identical devices, bandwidth 1 (a transfer of x bytes takes x + latency)."""
    ops: list[dict[str, Any]] = [{"name": f"o{k}", "time": float(t)} | ({"colocate": g} if g else {}) for k, (t, g) in enumerate(zip(times, groups))]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "stint",
        "graph": {"ops": ops, "edges": [{"src": f"o{a}", "dst": f"o{b}", "bytes": float(x)} for a, b, x in edges]},
        "cluster": {"devices": [{"name": "g0", "memory": 1.0}, {"name": "g1", "memory": 1.0}], "bandwidth": 1.0, "latency": float(latency)},
        "model": {"communication": comm, "memory": "simple"},
    }
    return instance_from_dict(doc)


def forward_backward(update: int) -> PlacementInstance:
    """Two layers: forward f1 -> f2, backward b2 -> b1, updates u2 (after b2) and u1 (after
    b1), each layer's three ops co-located; times 2 (updates ``update``), the layer-crossing
    edges take 1. On one device: 8 + 2 * update. Layers on two devices: both crossings pay 1,
    u2 runs beside b1: 8 + 2 + update."""
    times = [2, 2, 2, 2, update, update]  # f1 f2 b2 b1 u2 u1
    edges = [(0, 1, 1), (1, 2, 0), (2, 3, 1), (2, 4, 0), (3, 5, 0)]
    return instance(times, edges, ["l1", "l2", "l2", "l1", "l2", "l1"])


def test_last_stint_reaches_the_forward_backward_optimum() -> None:
    for update, optimum in ((3, 13.0), (1, 10.0)):
        inst = forward_backward(update)
        assert brute_force(inst) == optimum
        chain = cut_waists(inst)
        assert [inst.op_names[v] for v in chain] == ["o0", "o1", "o2", "o3", "o5"]
        c = compose(inst, chain)
        # the windows between consecutive waists alone (the tail segments' forced bound
        # sees the whole instance here): their composition is the critical path
        seg = {(i, i + 1): c.seg[(i, i + 1)] for i in range(len(chain) + 1)}
        assert sum(seg.values()) + inst.time[chain, 0].sum() == 8.0 + update < optimum
        value, _ = last_stint_bound(inst, chain, seg)
        assert value == optimum
        assert last_stint_bound(inst, chain, c.seg)[0] == optimum
        also: list = []
        module_bound(inst, None, also=also)
        assert all(b.value <= optimum and b.grade == "safe" for b in also)


def test_cut_spans_of_a_fork_join() -> None:
    """first -> {a (3), b (1)} -> last, transfers of 2: across devices the longer branch
    pays one transfer (3 + 2); with an op off the endpoints' device, b pays two (1 + 4) and
    a pays two (3 + 4)."""
    inst = instance([0, 3, 1, 0], [(0, 1, 2), (0, 2, 2), (1, 3, 2), (2, 3, 2)], [None] * 4)
    module = np.array([False, True, True, False])
    assert cut_spans(inst, 0, 3, module) == (5.0, 5.0)


def test_mirrored_hop_charges_the_cheapest_crossing() -> None:
    """Waist 3 co-located with the hop's source, waist 1 known on the last device: one of
    the windows (1, 2), (2, 3) crosses devices, so only the smaller gain (1) is proven; a
    waist on both sides makes the case impossible."""
    gain = np.array([0.0, 5.0, 1.0, 0.0, 0.0, 0.0])
    assert _mirrored([3], [1, 5, 6], {1, 5, 6}, gain, 4) == (1.0, 1, 3)
    assert _mirrored([3], [2, 5], {2, 5}, gain, 4) == (1.0, 2, 3)
    assert _mirrored([5], [1, 5], {1, 5}, gain, 4) == (0.0, 0, 0)  # past the hop: not used
    assert _mirrored([1], [1, 5], {1, 5}, gain, 4) is None


@st.composite
def grouped_instances(draw: Any) -> tuple[PlacementInstance, float]:
    n = draw(st.integers(4, 5))
    pairs = [(a, b) for a in range(n) for b in range(a + 1, n)]
    chosen = draw(st.lists(st.sampled_from(pairs), unique=True, min_size=n - 1, max_size=min(len(pairs), 6)))
    edges = [(a, b, draw(st.integers(0, 3))) for a, b in chosen]
    times = draw(st.lists(st.integers(0, 4), min_size=n, max_size=n))
    groups = draw(st.lists(st.sampled_from([None, "x", "y"]), min_size=n, max_size=n))
    inst = instance(times, edges, groups, draw(st.integers(0, 1)), draw(st.sampled_from(["independent", "channels"])))
    return inst, brute_force(inst)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(grouped_instances())
def test_last_stint_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    inst, opt = solved
    window = exact if inst.communication == "independent" else None  # see `exact`
    for chain in [*_chains(inst), cut_waists(inst)]:
        if not chain:
            continue
        c = compose(inst, chain, window if len(chain) > 1 else None)
        value, _ = last_stint_bound(inst, chain, c.seg)
        assert c.value - 1e-9 <= value <= opt, f"chain {chain}: {value} > optimum {opt}"
        for few in (0, 1):  # past max_subsets: the spans' least sum or the known work, no choice enumerated
            weaker, _ = last_stint_bound(inst, chain, c.seg, max_subsets=few)
            assert weaker <= value + 1e-12 and weaker <= opt, f"chain {chain}, max_subsets {few}: {weaker}"
    also: list = []
    module_bound(inst, window, also=also)
    assert all(b.value <= opt for b in also)
