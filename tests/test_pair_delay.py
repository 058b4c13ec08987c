"""`PlacementInstance.min_delay` / `max_delay` over the distinct edge sizes and links give
the very values of the whole edges x device-pairs table (review rev24b D1: that table took
1.2 GB and seconds past the limit on 64 GPUs), in blocks of any size."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.models import placement_instance
from distplan.models.placement_instance import PlacementInstance


def _whole_table(inst: PlacementInstance, reduce: Any) -> np.ndarray:
    off = ~np.eye(inst.n_devices, dtype=bool)
    return reduce(inst.latency[off][None, :] + inst.edge_bytes[:, None] * (1.0 / inst.bandwidth)[off][None, :], axis=1)


@pytest.mark.parametrize("name", ["placement-small-3", "gnmt-v2-4gpu-channels", "bert-large-tag-mix", "resnet-50-dgx1-4"])
@pytest.mark.parametrize("block", [1, 7, placement_instance.PAIR_DELAY_BLOCK])
def test_bundled_instances_match_the_whole_table(name: str, block: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(placement_instance, "PAIR_DELAY_BLOCK", block)
    inst = distplan.load_instance(name)
    assert np.array_equal(inst.min_delay(), _whole_table(inst, np.min))
    assert np.array_equal(inst.max_delay(), _whole_table(inst, np.max))


@settings(max_examples=40, deadline=None)
@given(
    devices=st.integers(1, 5),
    sizes=st.lists(st.sampled_from([0.0, 1.0, 3e6, 3e6, 1e9, 7.5]), min_size=1, max_size=12),
    links=st.lists(st.floats(1e8, 1e11), min_size=25, max_size=25),
    lats=st.lists(st.sampled_from([0.0, 1e-6, 5e-6]), min_size=25, max_size=25),
    block=st.integers(1, 64),
)
def test_random_links_match_the_whole_table(devices: int, sizes: list[float], links: list[float], lats: list[float], block: int) -> None:
    ops = [{"name": f"o{k}", "time": 1.0, "memory": 0.0} for k in range(len(sizes) + 1)]
    edges = [{"src": f"o{k}", "dst": f"o{k + 1}", "bytes": b} for k, b in enumerate(sizes)]
    pairs = [(a, b) for a in range(devices) for b in range(devices) if a != b]
    link_list = [{"src": f"g{a}", "dst": f"g{b}", "bandwidth": links[5 * a + b], "latency": lats[5 * a + b]} for a, b in pairs]
    doc = {
        "format": "distplan/1", "kind": "placement", "name": "t", "graph": {"ops": ops, "edges": edges},
        "cluster": {"devices": [{"name": f"g{k}", "memory": 1e9} for k in range(devices)], "bandwidth": 1e10, "latency": 0.0, "links": link_list},
    }
    inst = PlacementInstance.from_dict(doc)
    old = placement_instance.PAIR_DELAY_BLOCK
    placement_instance.PAIR_DELAY_BLOCK = block
    try:
        got_min, got_max = inst.min_delay(), inst.max_delay()
    finally:
        placement_instance.PAIR_DELAY_BLOCK = old
    if devices == 1:
        assert not got_min.any() and not got_max.any()
        return
    assert np.array_equal(got_min, _whole_table(inst, np.min))
    assert np.array_equal(got_max, _whole_table(inst, np.max))
