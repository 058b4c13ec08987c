"""Folding's colour refinement and the skeleton's label ids (issue 16, tap's shared
pre-work): both directions hashed in one pass give the colours of the two passes it
replaced, bit for bit; sequence ids (and their one-item fast path) equal their definition."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations import folding
from distplan.formulations.folding import (
    Family,
    FoldingError,
    IndexedGraph,
    LabelledGraph,
    _Growth,
    _indexed,
    _mix,
    _wl_colors,
    check_family,
    first_appearance_ids,
)
from distplan.formulations.sharding.costgraph import _sequence_ids


def reference_mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer as `folding._mix` was first written."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


@settings(max_examples=50, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), size=st.integers(0, 40))
def test_mix_equals_the_finalizer_and_leaves_its_input(seed: int, size: int) -> None:
    x = np.random.default_rng(seed).integers(0, 2**64 - 1, size, dtype=np.uint64, endpoint=True)
    before = x.copy()
    with np.errstate(over="ignore"):
        got = _mix(x)
    assert np.array_equal(got, reference_mix(before)) and np.array_equal(x, before)


def reference_wl_keys(g: IndexedGraph, iterations: int) -> list[np.ndarray]:
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
            np.add.at(out_sum, src, reference_mix(lab * np.uint64(0x9E3779B97F4A7C15) + c[dst] + np.uint64(1)))
            np.add.at(in_sum, dst, reference_mix(lab * np.uint64(0xC2B2AE3D27D4EB4F) + c[src] + np.uint64(2)))
            key = reference_mix(reference_mix(c + np.uint64(3)) + reference_mix(out_sum) * np.uint64(3) + reference_mix(in_sum ^ np.uint64(0x165667B19E3779F9)))
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


def _reference_sequence_ids(owner: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    ids: dict[tuple[int, ...], int] = {}
    seqs = [tuple(codes[owner == i].tolist()) for i in range(count)]
    return np.array([ids.setdefault(q, len(ids)) for q in seqs], dtype=np.int64)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(lengths=st.lists(st.integers(0, 3), min_size=1, max_size=12), ones=st.booleans(), seed=st.integers(0, 2**31), spread=st.integers(1, 5))
def test_sequence_ids_equal_the_definition(lengths: list[int], ones: bool, seed: int, spread: int) -> None:
    """Sequences of 0-3 items (or all of one item, the fast path), negative codes too: ids
    equal for equal sequences, numbered in order of first appearance."""
    rng = np.random.default_rng(seed)
    if ones:
        lengths = [1] * len(lengths)
    owner = np.repeat(np.arange(len(lengths)), lengths)
    codes = rng.integers(-spread, spread, owner.size)
    got = _sequence_ids(owner, codes, len(lengths))
    assert got.dtype == np.int64 and np.array_equal(got, _reference_sequence_ids(owner, codes, len(lengths)))


def test_check_family_rejects_overlapping_copies() -> None:
    """A node in two copies is named, before labels and edges are compared."""
    G = LabelledGraph([0, 0, 0, 0], [(0, 1), (1, 2), (2, 3)], [0, 0, 0])
    with pytest.raises(FoldingError, match="copy 1 overlaps another copy"):
        check_family(G, Family([[0, 1], [1, 2]]))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 30), m=st.integers(0, 70), iterations=st.integers(0, 2))
def test_growth_keys_number_kinds_and_colours_as_two_uniques(seed: int, n: int, m: int, iterations: int) -> None:
    """The growth's neighbour keys: dense ids of (edge and node label kind, neighbour
    colour) in lexicographic order, as the two np.unique calls they replaced numbered them."""
    rng = np.random.default_rng(seed)
    g = _indexed(LabelledGraph(rng.integers(0, 4, n), rng.integers(0, n, (m, 2)), rng.integers(0, 3, m)), "label", "label")
    color = _wl_colors(g, iterations)
    gr = _Growth.of(g, color)
    kind = np.concatenate([g.edge_label, g.edge_label])[np.argsort(np.concatenate([g.src, g.dst]), kind="stable")] * (int(g.label.max(initial=0)) + 1) + g.label[gr.node]
    kind = np.unique(kind, return_inverse=True)[1].reshape(-1)
    want = np.unique(kind * (int(color.max(initial=0)) + 1) + color[gr.node], return_inverse=True)[1].reshape(-1)
    assert gr.key.dtype == np.int64 and np.array_equal(gr.key, want) and gr.num_keys == int(want.max(initial=-1)) + 1
