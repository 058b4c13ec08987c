"""Folding's fast paths (issue 16, tap's shared path) give what the plain code gives: the
lock-step growth against its earlier form on random stacks of layers, and first-appearance
ids against their definition."""

from __future__ import annotations

from collections import deque

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.folding import (
    LabelledGraph,
    _Growth,
    _indexed,
    _lockstep,
    _wl_colors,
    find_repeated_subgraphs,
    first_appearance_ids,
)


def reference_lockstep(seeds: list[int], gr: _Growth) -> tuple[list[list[int]], list[int], list[int]]:
    """`folding._lockstep` as written before its fast paths (one dictionary of viable keys
    rebuilt per copy, every key's candidates sorted)."""
    k = len(seeds)
    copies: list[list[int]] = [[s] for s in seeds]
    steps: list[int] = []
    keys: list[int] = []
    claimed = gr.claimed.tolist()
    local = bytearray(gr.g.num_nodes)
    for s in seeds:
        local[s] = 1
    first, middle, node, key = gr.lists
    scan = [0, *range(k - 1, 0, -1)]  # the last copy early: copies at the end of a stack differ first
    queue: deque[int] = deque([0])
    while queue:
        j = queue.popleft()
        for direction in (0, 1):
            per_copy: list[dict[int, list[int]]] = [{}] * k
            viable: dict[int, int] = {}  # keys with candidates in every copy so far, and their count
            for c in scan:
                u = copies[c][j]
                groups: dict[int, list[int]] = {}
                for i in range(first[u], middle[u]) if direction == 0 else range(middle[u], first[u + 1]):
                    m = node[i]
                    if claimed[m] or local[m]:
                        continue
                    groups.setdefault(key[i], []).append(m)
                per_copy[c] = groups
                viable = {g: len(lst) for g, lst in groups.items()} if c == 0 else {g: x for g, x in viable.items() if len(groups.get(g, ())) == x}
                if not viable:
                    break  # no key has the same count in every copy: this step adds nothing
            for group in viable:
                ordered = [sorted(pc[group]) for pc in per_copy]
                for r in range(viable[group]):
                    tup = [ordered[c][r] for c in range(k)]
                    if len(set(tup)) < k or any(local[m] for m in tup):
                        continue
                    for c in range(k):
                        copies[c].append(tup[c])
                        local[tup[c]] = 1
                    steps.append(2 * j + direction)
                    keys.append(group)
                    queue.append(len(copies[0]) - 1)
    return copies, steps, keys



def _stack(rng: np.random.Generator, layers: int, size: int, noise: int) -> LabelledGraph:
    """A random layer (labelled nodes and edges inside it, links to the next layer) repeated
    ``layers`` times, with ``noise`` random extra edges and a random head and tail."""
    inner = [(int(a), int(b)) for a, b in rng.integers(0, size, (size + 2, 2)) if a != b]
    links = [(int(a), int(b)) for a, b in rng.integers(0, size, (2, 2))]
    labels = rng.integers(0, 3, size).tolist()
    node_labels: list[int] = [7]
    edges: list[tuple[int, int]] = []
    edge_labels: list[int] = []
    for layer in range(layers):
        base = 1 + layer * size
        node_labels += labels
        for a, b in inner:
            edges.append((base + a, base + b))
            edge_labels.append((a + b) % 2)
        if layer:
            for a, b in links:
                edges.append((base - size + a, base + b))
                edge_labels.append(2)
    edges.append((0, 1))
    edge_labels.append(3)
    n = len(node_labels)
    node_labels.append(8)
    edges.append((n - 1, n))
    edge_labels.append(3)
    for a, b in rng.integers(0, n + 1, (noise, 2)).tolist():
        if a != b:
            edges.append((a, b))
            edge_labels.append(int(rng.integers(0, 4)))
    return LabelledGraph(np.array(node_labels), np.array(edges, dtype=np.int64), np.array(edge_labels))


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), layers=st.integers(2, 30), size=st.integers(1, 7), noise=st.integers(0, 7), claim=st.integers(0, 9), iterations=st.integers(0, 2))
def test_lockstep_equals_its_earlier_form(seed: int, layers: int, size: int, noise: int, claim: int, iterations: int) -> None:
    """From every colour class of 2 or more nodes as seeds (nodes claimed at random), the
    same copies, steps and keys as the earlier lock step, at every number of WL iterations
    a user can set (0 leaves coarse classes, where copies disagree on candidates)."""
    rng = np.random.default_rng(seed)
    g = _indexed(_stack(rng, layers, size, noise), "label", "label")
    color = _wl_colors(g, iterations)
    gr = _Growth.of(g, color)
    gr.claimed[rng.choice(g.num_nodes, min(claim, g.num_nodes), replace=False)] = True
    for c in np.unique(color).tolist():
        seeds = np.flatnonzero((color == c) & ~gr.claimed).tolist()
        if len(seeds) >= 2:
            assert _lockstep(seeds, gr) == reference_lockstep(seeds, gr)


@settings(max_examples=30, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), layers=st.integers(2, 30), size=st.integers(2, 6))
def test_stacks_fold_into_their_layers(seed: int, layers: int, size: int) -> None:
    """A clean stack (no extra edges) whose layer is connected folds; every family is
    checked exactly inside `find_repeated_subgraphs`."""
    rng = np.random.default_rng(seed)
    fold = find_repeated_subgraphs(_stack(rng, layers, size, 0), iterations=0)
    for region in fold.regions:
        assert region.shape[0] >= 2 and region.shape[1] >= 2


def _reference_ids(keys: np.ndarray) -> np.ndarray:
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


@settings(max_examples=150, deadline=None, derandomize=True)
@given(keys=st.lists(st.integers(-3, 6), min_size=1, max_size=14), dense=st.booleans(), unsigned=st.booleans())
def test_first_appearance_ids_equal_the_definition(keys: list[int], dense: bool, unsigned: bool) -> None:
    """Ids already dense in order of first appearance are taken as they are; any other keys
    (negative, gaps, out of order, unsigned) are renumbered; int64 either way."""
    x = np.array(keys, dtype=np.int64)
    if dense:
        x = _reference_ids(x)
    if unsigned:
        x = (x - x.min()).astype(np.uint64)
    got = first_appearance_ids(x)
    assert got.dtype == np.int64 and np.array_equal(got, _reference_ids(x))

