"""Folding's colour refinement (issue 16, tap's shared pre-work): both directions hashed in
one pass give the colours of the two passes it replaced, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations import folding
from distplan.formulations.folding import LabelledGraph, _Indexed, _indexed, _mix, _wl_colors, first_appearance_ids


def reference_wl_keys(g: _Indexed, iterations: int) -> list[np.ndarray]:
    """The hash keys of every iteration of `folding._wl_colors` as written before:
    successors and predecessors summed apart."""
    keys = []
    color = g.label
    src, dst = g.src, g.dst
    lab = g.edge_label.astype(np.uint64)
    n = color.size
    with np.errstate(over="ignore"):
        for _ in range(iterations):
            c = color.astype(np.uint64)
            out_sum = np.zeros(n, dtype=np.uint64)
            in_sum = np.zeros(n, dtype=np.uint64)
            np.add.at(out_sum, src, _mix(lab * np.uint64(0x9E3779B97F4A7C15) + c[dst] + np.uint64(1)))
            np.add.at(in_sum, dst, _mix(lab * np.uint64(0xC2B2AE3D27D4EB4F) + c[src] + np.uint64(2)))
            key = _mix(_mix(c + np.uint64(3)) + _mix(out_sum) * np.uint64(3) + _mix(in_sum ^ np.uint64(0x165667B19E3779F9)))
            keys.append(key)
            color = first_appearance_ids(key)
    return keys


@settings(max_examples=300, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 30), m=st.integers(0, 60), labels=st.integers(1, 3), iterations=st.integers(0, 3))
def test_wl_keys_equal_the_two_pass_form(seed: int, n: int, m: int, labels: int, iterations: int) -> None:
    """Random graphs (self-loops, parallel arcs, isolated nodes, few labels): the same hash
    keys, bit for bit, at every iteration (so the same colours)."""
    rng = np.random.default_rng(seed)
    g = _indexed(LabelledGraph(rng.integers(0, labels, n), rng.integers(0, n, (m, 2)), rng.integers(0, labels, m)), "label", "label")
    keys: list[np.ndarray] = []

    def recorded(key: np.ndarray) -> np.ndarray:
        keys.append(key.copy())
        return first_appearance_ids(key)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(folding, "first_appearance_ids", recorded)
        _wl_colors(g, iterations)
    want = reference_wl_keys(g, iterations)
    assert len(keys) == len(want) and all(np.array_equal(a, b) for a, b in zip(keys, want))
