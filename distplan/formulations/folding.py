"""Folding of repeated subgraphs: find isomorphic copies, share one set of decisions.

TAP (Shi et al., "TAP: Accelerating Large-Scale DNN Training Through Tensor Automatic
Parallelisation", arXiv 2302.00247) folds the search space over the repeated blocks of a
network; meta-pytorch/autoparallel (``repeated_subgraphs``) lets the copies of a block
share the root copy's decision variables and multiplies their cost by the copy count,
which was measured much faster than equality constraints between copies.

This module is generic: it works on any ``networkx.DiGraph`` whose nodes carry a hashable
label (equal labels = interchangeable nodes, e.g. equal cost vectors) and whose edges
carry a hashable label, and is meant for every kind (sharding, placement, pipeline).

1. Canonical colours by directed Weisfeiler-Lehman refinement over both edge directions
   with edge labels (deterministic colour ids in node order); level r distinguishes nodes
   whose radius-r surroundings differ.
2. Seeds: a colour class (of the deepest level) with at least ``min_copies`` members,
   so copies have identical surroundings: the first and last layer of a stack, next to
   the embedding or the head, stay unfolded, as their optimal decisions often differ
   (``iterations=0`` folds by labels alone). Regions grow in lock step from the seeds:
   a neighbour (same direction, edge label, node label and colour) joins every copy at
   once, or none; nodes belong to at most one copy. Of ``max_seed_trials`` seed classes
   (largest first; a class inside a region grown this round, or growing none, is no trial:
   so a layer is not split in two families) the largest coverage (copies x size) is kept;
   repeat on the remaining nodes.
   From many seeds (``TEMPLATE_SEEDS``) the lock step runs on three of them first (the
   first two, where neighbouring copies meet, and the last); the region is mapped to
   every seed along the steps that grew it (or shifted, when the three copies are
   translates in node numbering), and a vectorized replay of the lock step on all
   seeds confirms that it yields exactly that region; else (or when the template stays
   a single node) the lock step runs on every seed, which stops at the first copy that
   differs. Either way the region is the lock step's.
3. Each family is confirmed by an exact isomorphism check: the position-wise bijection
   from the representative (copy 0) to every copy keeps node labels and labelled edges.

`FoldMap` holds the families as arrays of node indices (`FoldMap.regions`) with arrays
over node indices for vectorized callers, and dicts by node name built on first use.
`FoldMap.unfold` maps decisions of the representatives back to every node. Sharing the
representative's decisions is a restriction of the original problem (the folded optimum
is an upper bound); see `distplan.formulations.sharding.tap` for a proven lower bound.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, TypeVar

import networkx as nx
import numpy as np

T = TypeVar("T")

#: regions grown from at least this many seeds grow on three of them, then are mapped and replayed
TEMPLATE_SEEDS = 24


class FoldingError(RuntimeError):
    """A family of copies is not isomorphic (a bug in the region growth)."""


@dataclass
class Family:
    """Isomorphic copies: ``copies[c][j]`` is the node at position ``j`` of copy ``c``.

    Copy 0 is the representative."""

    copies: list[list[Hashable]]

    @property
    def num_copies(self) -> int:
        return len(self.copies)

    @property
    def size(self) -> int:
        return len(self.copies[0]) if self.copies else 0


@dataclass
class FoldMap:
    """Families of copies, and every node's representative.

    ``regions[f][c, j]`` is the index (in ``nodes``) of the node at position ``j`` of copy
    ``c`` of family ``f``; the arrays over node indices and the dicts by node are derived
    on first use."""

    nodes: Sequence[Hashable]
    regions: list[np.ndarray]
    stats: dict[str, Any] = field(default_factory=dict)

    def _names(self, index: np.ndarray) -> list[Hashable]:
        nodes = self.nodes
        return [nodes[i] for i in index.tolist()]

    @cached_property
    def families(self) -> list[Family]:
        return [Family([self._names(copy) for copy in region]) for region in self.regions]

    @cached_property
    def representative_index(self) -> np.ndarray:
        """Node index -> index of its representative."""
        rep = np.arange(len(self.nodes), dtype=np.int64)
        for region in self.regions:
            rep[region] = region[0]
        return rep

    @cached_property
    def family_index(self) -> np.ndarray:
        """Node index -> its family (-1 when not folded)."""
        fam = np.empty(len(self.nodes), dtype=np.int64)
        fam.fill(-1)
        for f, region in enumerate(self.regions):
            fam[region] = f
        return fam

    @cached_property
    def copy_index(self) -> np.ndarray:
        """Node index -> its copy within its family (-1 when not folded)."""
        copy = np.empty(len(self.nodes), dtype=np.int64)
        copy.fill(-1)
        for region in self.regions:
            copy[region] = np.arange(region.shape[0])[:, None]
        return copy

    @cached_property
    def multiplicity_index(self) -> np.ndarray:
        """Node index -> number of nodes its representative stands for (1 when not folded)."""
        counts = np.array([region.shape[0] for region in self.regions] + [1], dtype=np.int64)
        return counts[self.family_index]

    def _copies(self, copies: slice) -> np.ndarray:
        """Nodes of the given copies of every family (family by family, copy by copy, by position)."""
        return np.concatenate([region[copies].ravel() for region in self.regions] + [np.zeros(0, dtype=np.int64)])

    @cached_property
    def representative(self) -> dict[Hashable, Hashable]:
        order = np.concatenate([self._copies(slice(None)), np.flatnonzero(self.family_index < 0)])
        return dict(zip(self._names(order), self._names(self.representative_index[order])))

    @cached_property
    def copy_of(self) -> dict[Hashable, tuple[int, int]]:
        """Folded node -> (family index, copy index)."""
        folded = self._copies(slice(None))
        return dict(zip(self._names(folded), zip(self.family_index[folded].tolist(), self.copy_index[folded].tolist())))

    @cached_property
    def multiplicity(self) -> dict[Hashable, int]:
        """Representative -> number of nodes it stands for (1 when not folded)."""
        order = np.concatenate([self._copies(slice(0, 1)), np.flatnonzero(self.family_index < 0)])
        return dict(zip(self._names(order), self.multiplicity_index[order].tolist()))

    def same_copy(self, u: Hashable, v: Hashable) -> bool:
        """True when u and v lie in the same copy of the same family (an inner edge)."""
        cu = self.copy_of.get(u)
        return cu is not None and cu == self.copy_of.get(v)

    def unfold(self, values: Mapping[Hashable, T]) -> dict[Hashable, T]:
        """Decisions of representatives -> decisions of every node."""
        return {node: values[rep] for node, rep in self.representative.items()}

    @property
    def representatives(self) -> list[Hashable]:
        return list(self.multiplicity)


@dataclass(frozen=True)
class LabelledGraph:
    """A directed graph on nodes ``0 .. n-1`` with hashable node and edge labels, the
    light input of `find_repeated_subgraphs` (no networkx graph needs to be built).
    Integer numpy arrays are taken as they are (``edges`` as an ``(m, 2)`` array)."""

    node_labels: Sequence[Hashable] | np.ndarray
    edges: Sequence[tuple[int, int]] | np.ndarray
    edge_labels: Sequence[Hashable] | np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.node_labels)


def first_appearance_ids(keys: np.ndarray) -> np.ndarray:
    """Dense ids of equal keys, numbered in order of first appearance. Integer keys that
    already are such ids (none negative, 0 first, and each key at most one above every key
    before it: a skeleton's labels) are returned as they are (int64), without sorting."""
    if keys.dtype.kind in "iu" and keys.size and keys[0] == 0:
        top = np.maximum.accumulate(keys)
        if not (np.diff(top) > 1).any() and keys.min() >= 0:
            return keys.astype(np.int64, copy=False)
    return first_appearance(keys)[0]


def first_appearance(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of equal keys, numbered in order of first appearance, and the index of
    each id's first key (what ``np.unique`` with ``return_index`` and ``return_inverse``
    gives, renumbered; one stable sort, without np.unique's wrapping, which costs more than
    the sort on the small arrays of a skeleton). Keys are integers (labels, codes): values
    that are not equal to themselves (NaN) would each be their own key."""
    keys = np.asarray(keys).reshape(-1)
    if not keys.size:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    order = keys.argsort(kind="stable")
    ordered = keys[order]
    starts = np.empty(keys.size, dtype=bool)
    starts[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=starts[1:])
    first = order[starts]  # the first index of every key (the sort is stable), in key order
    by_first = first.argsort()
    rank = np.empty(first.size, dtype=np.int64)
    rank[by_first] = np.arange(first.size)
    ids = np.empty(keys.size, dtype=np.int64)
    ids[order] = rank[starts.cumsum() - 1]
    return ids, first[by_first]


def _label_ids(labels: Sequence[Hashable] | np.ndarray) -> np.ndarray:
    """Dense ids of hashable labels in order of first appearance."""
    if isinstance(labels, np.ndarray) and labels.dtype.kind in "iub":
        return first_appearance_ids(labels) if labels.size else np.zeros(0, dtype=np.int64)
    ids: dict[Hashable, int] = {}
    return np.fromiter((ids.setdefault(lab, len(ids)) for lab in labels), dtype=np.int64, count=len(labels))


@dataclass
class IndexedGraph:
    """Integer form of a labelled graph: label ids and arcs (with edge label ids)."""

    names: list[Hashable] | None  # node names (None: the names are 0 .. n-1)
    label: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    edge_label: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.label.size

    def nodes(self) -> Sequence[Hashable]:
        return self.names if self.names is not None else range(self.num_nodes)

    def index_of(self, nodes: list[Hashable]) -> np.ndarray:
        """Indices of named nodes."""
        if self.names is None:
            return np.asarray(nodes, dtype=np.int64)
        index = {n: i for i, n in enumerate(self.names)}
        return np.fromiter((index[n] for n in nodes), dtype=np.int64, count=len(nodes))


def _indexed(G: nx.DiGraph | LabelledGraph, node_label: str, edge_label: str) -> IndexedGraph:
    if isinstance(G, LabelledGraph):
        arcs = np.asarray(G.edges, dtype=np.int64).reshape(-1, 2)
        return IndexedGraph(None, _label_ids(G.node_labels), arcs[:, 0], arcs[:, 1], _label_ids(G.edge_labels))
    names = list(G.nodes)
    index = {n: i for i, n in enumerate(names)}
    label = _label_ids([G.nodes[n][node_label] for n in names])
    edges = list(G.edges(data=edge_label))
    src = np.fromiter((index[u] for u, _, _ in edges), dtype=np.int64, count=len(edges))
    dst = np.fromiter((index[v] for _, v, _ in edges), dtype=np.int64, count=len(edges))
    return IndexedGraph(names, label, src, dst, _label_ids([lab for _, _, lab in edges]))


def wl_colors(G: nx.DiGraph | LabelledGraph, node_label: str = "label", edge_label: str = "label", iterations: int = 2) -> dict[Hashable, int]:
    """Directed Weisfeiler-Lehman colours (successors and predecessors, with edge labels).

    Colour ids are assigned in order of first appearance in the node order, so they are
    deterministic for a given node order.
    """
    g = _indexed(G, node_label, edge_label)
    return dict(zip(g.nodes(), _wl_colors(g, iterations).tolist()))


#: SplitMix64's finalizer constants (shifts and multipliers) as uint64 scalars
_SHIFTS = (np.uint64(30), np.uint64(27), np.uint64(31))
_MULTIPLIERS = (np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic): a well-spread hash.
    A new array (``x`` is not changed), updated in place."""
    x = x ^ (x >> _SHIFTS[0])
    x *= _MULTIPLIERS[0]
    x ^= x >> _SHIFTS[1]
    x *= _MULTIPLIERS[1]
    x ^= x >> _SHIFTS[2]
    return x


def _wl_colors(g: IndexedGraph, iterations: int) -> np.ndarray:
    """Colour refinement, vectorized: a node's new colour is a hash of its colour and the
    multisets of (edge label, neighbour colour) over successors and predecessors (sums of
    64-bit hashes). A hash collision could only merge colour classes, never split equal
    nodes; every family is checked exactly afterwards, so folding stays exact."""
    color = g.label
    n = color.size
    lab = g.edge_label.astype(np.uint64)
    # both directions at once: entry e < m is arc e seen from its tail (the sum of node
    # src[e]), entry m + e from its head (the sum of node n + dst[e])
    owner = np.concatenate([g.src, g.dst + n])
    neighbour = np.concatenate([g.dst, g.src])
    with np.errstate(over="ignore"):
        salt = np.concatenate([lab * np.uint64(0x9E3779B97F4A7C15) + np.uint64(1), lab * np.uint64(0xC2B2AE3D27D4EB4F) + np.uint64(2)])
        for _ in range(iterations):
            c = color.astype(np.uint64)
            sums = np.zeros(2 * n, dtype=np.uint64)
            np.add.at(sums, owner, _mix(salt + c[neighbour]))
            parts = _mix(np.concatenate([c + np.uint64(3), sums[:n], sums[n:] ^ np.uint64(0x165667B19E3779F9)]))
            key = _mix(parts[:n] + parts[n : 2 * n] * np.uint64(3) + parts[2 * n :])
            color = first_appearance_ids(key)
    return color


def check_family(G: nx.DiGraph | LabelledGraph, family: Family, node_label: str = "label", edge_label: str = "label") -> None:
    """Exact isomorphism check: the position-wise map from copy 0 to every copy preserves
    node labels and the labelled edges of the induced subgraphs. Raises FoldingError."""
    g = _indexed(G, node_label, edge_label)
    for c, copy in enumerate(family.copies):
        if len(copy) != len(family.copies[0]):
            raise FoldingError(f"copy {c} has {len(copy)} nodes, copy 0 has {len(family.copies[0])}")
    check_copies(g.index_of([n for copy in family.copies for n in copy]).reshape(len(family.copies), -1), g)


def check_copies(region: np.ndarray, g: IndexedGraph) -> None:
    """`check_family` on a (copies x positions) array of node indices, vectorized."""
    k, size = region.shape
    if not size:
        return
    cells = np.arange(region.size)
    flat = region.ravel()
    place = np.empty(g.num_nodes, dtype=np.int64)
    place.fill(-1)
    place[flat] = cells
    if (place[flat] != cells).any():
        _, first = np.unique(region, return_index=True)
        repeated = np.ones(region.size, dtype=bool)
        repeated[first] = False
        raise FoldingError(f"copy {int(np.flatnonzero(repeated)[0]) // size} overlaps another copy")
    bad_label = (g.label[region] != g.label[region[0]]).any(axis=1)
    copy_of = place // size  # (-1 outside the copies, as -1 // size is -1)
    position = place % size
    tail_copy = copy_of[g.src]
    inner = ((tail_copy >= 0) & (tail_copy == copy_of[g.dst])).nonzero()[0]
    copy = tail_copy[inner]
    span = size * size * (int(g.edge_label.max(initial=0)) + 1)
    code = (position[g.src[inner]] * size + position[g.dst[inner]]) * (span // (size * size)) + g.edge_label[inner]
    count = np.bincount(copy, minlength=k)
    bad_edges = count != count[0]
    if not bad_edges.any():  # every copy's codes, sorted: row c is copy c's
        codes = np.sort(copy * span + code).reshape(k, int(count[0])) % span
        bad_edges = (codes != codes[0]).any(axis=1)
    bad = (bad_label | bad_edges).nonzero()[0]
    if bad.size:
        c = int(bad[0])
        what = "has node labels that differ from copy 0" if bad_label[c] else "is not isomorphic to copy 0 under the position map"
        raise FoldingError(f"copy {c} {what}")


@dataclass
class _Growth:
    """What region growth reads: the adjacency of both directions (a node's successors,
    then its predecessors, in arc order) with a key per entry (edge label, neighbour label
    and colour, numbered densely), and the nodes claimed so far."""

    g: IndexedGraph
    start: np.ndarray  # node -> first entry (n + 1)
    middle: np.ndarray  # node -> first predecessor entry
    node: np.ndarray  # entry -> neighbour
    direction: np.ndarray  # entry -> 0 (successor) or 1 (predecessor)
    key: np.ndarray  # entry -> neighbour key
    num_keys: int
    claimed: np.ndarray  # bool per node

    @property
    def packable(self) -> bool:
        """Codes (node, direction, key, neighbour) fit in int64 (the vectorized growth)."""
        n = self.g.num_nodes
        return 2 * n * n * max(self.num_keys, 1) < 2**62

    @staticmethod
    def of(g: IndexedGraph, color: np.ndarray) -> _Growth:
        n, m = g.num_nodes, g.src.size
        tail = np.concatenate([g.src, g.dst])
        order = np.argsort(tail, kind="stable")
        node = np.concatenate([g.dst, g.src])[order]
        direction = (order >= m).astype(np.int64)
        kind = np.concatenate([g.edge_label, g.edge_label])[order] * (int(g.label.max(initial=0)) + 1) + g.label[node]
        # dense ids of (kind, neighbour colour) in lexicographic order
        neighbour_color = color[node]
        by_key = np.lexsort((neighbour_color, kind))
        new_key = np.empty(by_key.size, dtype=bool)
        new_key[:1] = True
        np.not_equal(kind[by_key[1:]], kind[by_key[:-1]], out=new_key[1:])
        new_key[1:] |= neighbour_color[by_key[1:]] != neighbour_color[by_key[:-1]]
        key = np.empty(by_key.size, dtype=np.int64)
        key[by_key] = np.cumsum(new_key) - 1
        start = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(tail, minlength=n), out=start[1:])
        middle = start[:-1] + np.bincount(g.src, minlength=n)
        return _Growth(g, start, middle, node, direction, key, int(key.max(initial=-1)) + 1, np.zeros(n, dtype=bool))

    @cached_property
    def lists(self) -> tuple[list[int], list[int], list[int], list[int]]:
        """Entry starts, predecessor starts, neighbours and keys as Python lists (for the lock step)."""
        return self.start.tolist(), self.middle.tolist(), self.node.tolist(), self.key.tolist()

    @cached_property
    def table(self) -> np.ndarray:
        """Sorted codes ``((node * 2 + direction) * num_keys + key) * n + neighbour`` of
        every entry (`packable` graphs)."""
        n = self.g.num_nodes
        tail = np.repeat(np.arange(n), np.diff(self.start))
        return np.sort(((tail * 2 + self.direction) * self.num_keys + self.key) * n + self.node)


def _lockstep(seeds: list[int], gr: _Growth) -> tuple[list[list[int]], list[int], list[int]]:
    """Grow regions around the seeds in lock step (see the module docstring). Returns the
    copies and, for every position after the seed, the step that added it (2 x parent
    position + direction) and its neighbour key."""
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
            viable: dict[int, int] | None = None  # keys with candidates in every copy so far, and their count
            for c in scan:
                u = copies[c][j]
                groups: dict[int, list[int]] = {}
                for i in range(first[u], middle[u]) if direction == 0 else range(middle[u], first[u + 1]):
                    m = node[i]
                    if claimed[m] or local[m]:
                        continue
                    got = groups.get(key[i])
                    if got is None:
                        groups[key[i]] = [m]
                    else:
                        got.append(m)
                per_copy[c] = groups
                if viable is None:  # copy 0 (scanned first)
                    viable = {g: len(lst) for g, lst in groups.items()}
                else:
                    for g, x in viable.items():
                        if len(groups.get(g, ())) != x:
                            viable = {g: x for g, x in viable.items() if len(groups.get(g, ())) == x}
                            break
                if not viable:
                    break  # no key has the same count in every copy: this step adds nothing
            for group, count in (viable or {}).items():
                if count == 1:
                    tups = [[pc[group][0] for pc in per_copy]]
                else:
                    ordered = [sorted(pc[group]) for pc in per_copy]
                    tups = [[ordered[c][r] for c in range(k)] for r in range(count)]
                for tup in tups:
                    if len(set(tup)) < k or any(local[m] for m in tup):
                        continue
                    for c in range(k):
                        copies[c].append(tup[c])
                        local[tup[c]] = 1
                    steps.append(2 * j + direction)
                    keys.append(group)
                    queue.append(len(copies[0]) - 1)
    return copies, steps, keys


def _gather(start: np.ndarray, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """CSR entries of the given nodes: (index in ``nodes``, entry), node by node."""
    first = start[nodes]
    count = start[nodes + 1] - first
    owner = np.repeat(np.arange(nodes.size), count)
    return owner, np.arange(owner.size) + np.repeat(first - (np.cumsum(count) - count), count)


def _map_template(seeds: np.ndarray, template: list[list[int]], steps: np.ndarray, keys: np.ndarray, gr: _Growth) -> np.ndarray | None:
    """Every seed's copy of a template region grown from ``seeds[0]`` (and two more seeds):
    position p is the neighbour of the copy's node at p's parent position, with p's
    direction and key, of the same rank among such neighbours (by node) as in the
    template; None when a copy has no such neighbour. Positions at equal depth in the
    growth are mapped together. When the template's copies are translates of each other
    (node numbers shifted by their seed's, as in a stack built layer by layer), so are
    the copies mapped."""
    n, size = gr.g.num_nodes, len(template[0])
    shifted = np.asarray(template[0]) + (seeds - seeds[0])[:, None]
    if shifted.min() >= 0 and shifted.max() < n and (np.asarray(template) == shifted[[0, 1, -1]]).all():
        return shifted
    table = gr.table
    parent = steps // 2
    code = (steps % 2) * gr.num_keys + keys  # of positions 1 .. size - 1
    depth = [0] * size
    for p in range(1, size):
        depth[p] = depth[parent[p - 1]] + 1
    node = np.asarray(template[0])
    rank = np.searchsorted(table, (node[parent] * 2 * gr.num_keys + code) * n + node[1:]) - np.searchsorted(table, (node[parent] * 2 * gr.num_keys + code) * n)
    region = np.empty((seeds.size, size), dtype=np.int64)
    region[:, 0] = seeds
    by_depth = np.argsort(depth[1:], kind="stable")
    bounds = np.searchsorted(np.asarray(depth[1:])[by_depth], np.arange(1, max(depth) + 2))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        at = by_depth[lo:hi]  # positions - 1 at this depth
        base = (region[:, parent[at]] * 2 * gr.num_keys + code[at]) * n
        found = table[np.minimum(np.searchsorted(table, base) + rank[at], table.size - 1)] - base
        if found.min() < 0 or found.max() >= n:
            return None
        region[:, at + 1] = found
    return region


def _replays(region: np.ndarray, steps: np.ndarray, gr: _Growth) -> bool:
    """True when the lock step from ``region[:, 0]`` yields exactly ``region``.

    Vectorized replay of every step (2 x position + direction; ``steps[p - 1]`` added
    position p): the candidates of copy c at step s are the unclaimed neighbours of its
    node at the parent position that the region does not hold before s; a key whose
    candidate count is equal in every copy adds its candidates by rank, keys in order of
    first appearance in copy 0. Every accepted candidate must be the region's node at its
    place, and the region's nodes are distinct: so no node is accepted twice in a step,
    the lock step skips no tuple, and the replay is exact. False when the region differs
    (or a step would skip a tuple)."""
    k, size = region.shape
    n = gr.g.num_nodes
    begins = 1 + np.searchsorted(steps, np.arange(2 * size + 1))  # positions present when step s starts
    cell = np.full(n, -1, dtype=np.int64)
    cell[region.ravel()] = np.arange(region.size)
    if (cell[region.ravel()] != np.arange(region.size)).any():
        return False  # a node in two places
    position = np.where(cell >= 0, cell % size, size)
    owner, entry = _gather(gr.start, region.ravel())
    step = 2 * (owner % size) + gr.direction[entry]
    node = gr.node[entry]
    seen = np.flatnonzero(~gr.claimed[node] & (position[node] >= begins[step]))  # candidates, in adjacency order
    if not seen.size:
        return size == 1
    copy = owner[seen] // size
    group = step[seen] * gr.num_keys + gr.key[entry[seen]]
    srt = np.argsort((group * k + copy) * n + node[seen])
    group, copy, seen = group[srt], copy[srt], seen[srt]
    step, node = step[seen], node[seen]
    # runs: the candidates of one key in one copy; spans: the runs of one key (every copy)
    new_span = np.empty(seen.size, dtype=bool)
    new_span[0] = True
    np.not_equal(group[1:], group[:-1], out=new_span[1:])
    new_run = new_span.copy()
    new_run[1:] |= copy[1:] != copy[:-1]
    run = np.flatnonzero(new_run)
    run_of = np.cumsum(new_run) - 1
    span_of = np.cumsum(new_span) - 1
    run_size = np.diff(np.append(run, seen.size))
    run_span = span_of[run]
    runs = np.bincount(run_span)
    total = np.bincount(run_span, weights=run_size)
    accepted = (runs == k) & (np.bincount(run_span, weights=run_size * run_size) * k == total * total)  # equal counts
    # accepted keys in the order the lock step takes them (step, first appearance in copy 0)
    chosen = np.flatnonzero(accepted)
    lead = run[np.searchsorted(run_span, chosen)]  # copy 0's run of each accepted span
    by = np.lexsort((np.minimum.reduceat(seen, run)[run_of[lead]], step[lead]))
    chosen, chosen_step, tuples = chosen[by], step[lead][by], run_size[run_of[lead]][by]
    if not np.array_equal(np.bincount(chosen_step, weights=tuples, minlength=2 * size), np.diff(begins)):
        return False
    before = np.cumsum(tuples) - tuples
    offset = np.zeros(runs.size, dtype=np.int64)
    offset[chosen] = before - before[np.searchsorted(chosen_step, chosen_step)]
    take = accepted[span_of]
    target = (begins[step] + offset[span_of] + np.arange(seen.size) - run[run_of])[take]
    return bool((region[copy[take], target] == node[take]).all())


def _grow(seeds: np.ndarray, gr: _Growth) -> np.ndarray:
    """The lock-step region of the seeds as a (copies x positions) array of nodes; from
    `TEMPLATE_SEEDS` seeds on, grown on a template of three seeds, mapped and replayed
    (unless the template stays a single node: then the lock step on every seed stops
    early, at the first copy that differs)."""
    if seeds.size >= TEMPLATE_SEEDS and gr.packable:
        template, steps, keys = _lockstep([int(seeds[0]), int(seeds[1]), int(seeds[-1])], gr)
        if steps:
            step_array = np.asarray(steps, dtype=np.int64)
            region = _map_template(seeds, template, step_array, np.asarray(keys, dtype=np.int64), gr)
            if region is not None and _replays(region, step_array, gr):
                return region
    return np.array(_lockstep(seeds.tolist(), gr)[0], dtype=np.int64)


def find_repeated_subgraphs(
    G: nx.DiGraph | LabelledGraph,
    node_label: str = "label",
    edge_label: str = "label",
    *,
    min_copies: int = 2,
    min_size: int = 2,
    iterations: int = 2,
    max_seed_trials: int = 6,
) -> FoldMap:
    """Families of disjoint isomorphic regions of ``G`` and every node's representative.

    ``G`` is a ``networkx.DiGraph`` (labels in the ``node_label`` / ``edge_label``
    attributes) or a `LabelledGraph` (nodes ``0 .. n-1``). Regions have at least
    ``min_size`` nodes and families at least ``min_copies`` copies. Every family returned
    passed `check_family`.
    """
    g = _indexed(G, node_label, edge_label)
    n_nodes = g.num_nodes
    color = _wl_colors(g, iterations)
    num_colors = int(color.max(initial=-1)) + 1
    gr = _Growth.of(g, color)

    n_claimed = 0
    regions: list[np.ndarray] = []
    rejected = np.zeros(num_colors, dtype=bool)
    while n_nodes - n_claimed >= min_copies * min_size:
        free = np.flatnonzero(~gr.claimed & ~rejected[color])
        cols = color[free]
        members = free[np.argsort(cols, kind="stable")]  # class by class, in node order
        classes, first, sizes = np.unique(cols, return_index=True, return_counts=True)
        starts = np.cumsum(sizes) - sizes
        class_size = np.zeros(num_colors, dtype=np.int64)
        class_size[classes] = sizes
        candidates = [i for i in np.lexsort((free[first], -sizes)).tolist() if sizes[i] >= min_copies]
        if not candidates:
            break
        eligible = n_nodes - n_claimed
        best: np.ndarray | None = None
        best_cover = 0
        tried: list[int] = []
        grown = np.zeros(num_colors, dtype=bool)  # classes that are whole positions of a region grown this round
        for i in candidates:
            if len(tried) >= max_seed_trials:
                break
            if grown[classes[i]]:  # another position of a region grown this round: not a trial
                continue
            region = _grow(members[starts[i] : starts[i] + sizes[i]], gr)
            k, size = region.shape
            position_colors = color[region]
            whole = (position_colors == position_colors[0]).all(axis=0) & (class_size[position_colors[0]] == k)
            grown[position_colors[0][whole]] = True
            if size < min_size:
                rejected[classes[i]] = True  # never tried again, so not a trial
                continue
            tried.append(i)
            if k * size <= best_cover:
                continue  # may still fold in a later round
            try:
                check_copies(region, g)
            except FoldingError:
                rejected[classes[i]] = True
                continue
            best, best_cover = region, k * size
            if best_cover >= 0.9 * eligible:
                break
        if best is None:
            rejected[classes[tried]] = True  # every class tried failed (or grew no region)
            continue
        regions.append(best)
        gr.claimed[best] = True
        n_claimed += best.size

    families = [{"copies": r.shape[0], "nodes_per_copy": r.shape[1]} for r in regions]
    stats = {"nodes": n_nodes, "folded_nodes": n_nodes - sum(r.size - r.shape[1] for r in regions), "families": families, "wl_iterations": iterations}
    return FoldMap(g.nodes(), regions, stats)
