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
   once, or none; nodes belong to at most one copy. The seed class giving the largest
   coverage (copies x region size) is kept; repeat on the remaining nodes.
3. Each family is confirmed by an exact isomorphism check: the position-wise bijection
   between every copy and the representative (copy 0) preserves node labels and the
   labelled induced edges.

`FoldMap.unfold` maps decisions of the representatives back to every node. Sharing the
representative's decisions is a restriction of the original problem (the folded optimum
is an upper bound); see `distplan.formulations.sharding.tap` for a proven lower bound.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import networkx as nx
import numpy as np

T = TypeVar("T")


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
    """Families of copies, and every node's representative."""

    families: list[Family]
    representative: dict[Hashable, Hashable]
    #: folded node -> (family index, copy index)
    copy_of: dict[Hashable, tuple[int, int]]
    #: representative -> number of nodes it stands for (1 when not folded)
    multiplicity: dict[Hashable, int]
    stats: dict[str, Any] = field(default_factory=dict)

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
    light input of `find_repeated_subgraphs` (no networkx graph needs to be built)."""

    node_labels: Sequence[Hashable]
    edges: Sequence[tuple[int, int]]
    edge_labels: Sequence[Hashable]

    @property
    def num_nodes(self) -> int:
        return len(self.node_labels)


@dataclass
class _Indexed:
    """Integer form of a labelled graph: label ids and labelled adjacency lists."""

    names: list[Hashable] | None  # node names (None: the names are 0 .. n-1)
    label: list[int]
    out: list[list[tuple[int, int]]]  # node -> [(edge label id, successor)]
    inn: list[list[tuple[int, int]]]  # node -> [(edge label id, predecessor)]

    def index_of(self) -> dict[Hashable, int]:
        return {n: i for i, n in enumerate(self.names)} if self.names is not None else {}

    def name(self, i: int) -> Hashable:
        return self.names[i] if self.names is not None else i


def _indexed(G: nx.DiGraph | LabelledGraph, node_label: str, edge_label: str) -> _Indexed:
    ids: dict[Hashable, int] = {}
    edge_ids: dict[Hashable, int] = {}
    if isinstance(G, LabelledGraph):
        names: list[Hashable] | None = None
        label = [ids.setdefault(lab, len(ids)) for lab in G.node_labels]
        arcs = [(u, v, edge_ids.setdefault(lab, len(edge_ids))) for (u, v), lab in zip(G.edges, G.edge_labels)]
    else:
        names = list(G.nodes)
        index = {n: i for i, n in enumerate(names)}
        label = [ids.setdefault(G.nodes[n][node_label], len(ids)) for n in names]
        arcs = [(index[u], index[v], edge_ids.setdefault(lab, len(edge_ids))) for u, v, lab in G.edges(data=edge_label)]
    out: list[list[tuple[int, int]]] = [[] for _ in label]
    inn: list[list[tuple[int, int]]] = [[] for _ in label]
    for u, v, e in arcs:
        out[u].append((e, v))
        inn[v].append((e, u))
    return _Indexed(names, label, out, inn)


def wl_colors(G: nx.DiGraph | LabelledGraph, node_label: str = "label", edge_label: str = "label", iterations: int = 2) -> dict[Hashable, int]:
    """Directed Weisfeiler-Lehman colours (successors and predecessors, with edge labels).

    Colour ids are assigned in order of first appearance in the node order, so they are
    deterministic for a given node order.
    """
    g = _indexed(G, node_label, edge_label)
    color = _wl_levels(g, iterations)[-1]
    return {g.name(i): c for i, c in enumerate(color)}


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finalizer on uint64 arrays (wrapping arithmetic): a well-spread hash."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _first_appearance_ids(keys: np.ndarray) -> np.ndarray:
    """Dense ids of equal keys, numbered in order of first appearance."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    rank = np.empty(first.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(first.size)
    return rank[inverse.reshape(-1)]


def _wl_levels(g: _Indexed, iterations: int) -> list[list[int]]:
    """Colour refinement, vectorized: a node's new colour is a hash of its colour and the
    multisets of (edge label, neighbour colour) over successors and predecessors (sums of
    64-bit hashes). A hash collision could only merge colour classes, never split equal
    nodes; every family is checked exactly afterwards, so folding stays exact."""
    color = np.asarray(g.label, dtype=np.int64)
    levels = [color.tolist()]
    if iterations <= 0:
        return levels
    src = np.fromiter((u for u, adj in enumerate(g.out) for _ in adj), dtype=np.int64)
    dst = np.fromiter((v for adj in g.out for _, v in adj), dtype=np.int64)
    lab = np.fromiter((e for adj in g.out for e, _ in adj), dtype=np.int64).astype(np.uint64)
    n = color.size
    with np.errstate(over="ignore"):
        for _ in range(iterations):
            c = color.astype(np.uint64)
            out_sum = np.zeros(n, dtype=np.uint64)
            in_sum = np.zeros(n, dtype=np.uint64)
            np.add.at(out_sum, src, _mix(lab * np.uint64(0x9E3779B97F4A7C15) + c[dst] + np.uint64(1)))
            np.add.at(in_sum, dst, _mix(lab * np.uint64(0xC2B2AE3D27D4EB4F) + c[src] + np.uint64(2)))
            key = _mix(_mix(c + np.uint64(3)) + _mix(out_sum) * np.uint64(3) + _mix(in_sum ^ np.uint64(0x165667B19E3779F9)))
            color = _first_appearance_ids(key)
            levels.append(color.tolist())
    return levels


def check_family(G: nx.DiGraph | LabelledGraph, family: Family, node_label: str = "label", edge_label: str = "label") -> None:
    """Exact isomorphism check: the position-wise map from copy 0 to every copy preserves
    node labels and the labelled edges of the induced subgraphs. Raises FoldingError."""
    g = _indexed(G, node_label, edge_label)
    index = g.index_of()
    copies = [[index[n] for n in copy] for copy in family.copies] if g.names is not None else [[int(n) for n in copy] for copy in family.copies]  # type: ignore[call-overload]
    _check(copies, g)


def _check(copies: list[list[int]], g: _Indexed) -> None:
    """`check_family` on the integer form."""
    first = copies[0]
    seen: set[int] = set()
    for c, copy in enumerate(copies):
        if len(copy) != len(first):
            raise FoldingError(f"copy {c} has {len(copy)} nodes, copy 0 has {len(first)}")
        if seen.intersection(copy) or len(set(copy)) != len(copy):
            raise FoldingError(f"copy {c} overlaps another copy")
        seen.update(copy)

    def inner_edges(copy: list[int]) -> list[tuple[int, int, int]]:
        pos = {n: j for j, n in enumerate(copy)}
        return sorted([(pos[u], pos[v], e) for u in copy for e, v in g.out[u] if v in pos])

    ref_labels = [g.label[n] for n in first]
    ref_edges = inner_edges(first)
    for c, copy in enumerate(copies[1:], start=1):
        if [g.label[n] for n in copy] != ref_labels:
            raise FoldingError(f"copy {c} has node labels that differ from copy 0")
        if inner_edges(copy) != ref_edges:
            raise FoldingError(f"copy {c} is not isomorphic to copy 0 under the position map")


def _grow(seeds: list[int], claimed: bytearray, g: _Indexed, color: list[int]) -> list[list[int]]:
    """Grow regions around the seeds in lock step (see the module docstring)."""
    k = len(seeds)
    copies: list[list[int]] = [[s] for s in seeds]
    local = bytearray(len(claimed))
    for s in seeds:
        local[s] = 1
    label = g.label
    queue: deque[int] = deque([0])
    while queue:
        j = queue.popleft()
        for direction, adj in enumerate((g.out, g.inn)):
            per_copy: list[dict[tuple[int, int, int, int], list[int]]] = []
            for c in range(k):
                groups: dict[tuple[int, int, int, int], list[int]] = {}
                for e, m in adj[copies[c][j]]:
                    if claimed[m] or local[m]:
                        continue
                    groups.setdefault((direction, e, label[m], color[m]), []).append(m)
                per_copy.append(groups)
            for key, cands0 in per_copy[0].items():
                lists = [pc.get(key) for pc in per_copy]
                if any(lst is None or len(lst) != len(cands0) for lst in lists):
                    continue
                ordered = [sorted(lst) for lst in lists]  # type: ignore[type-var]
                for r in range(len(cands0)):
                    tup = [ordered[c][r] for c in range(k)]
                    if len(set(tup)) < k or any(local[m] for m in tup):
                        continue
                    for c in range(k):
                        copies[c].append(tup[c])
                        local[tup[c]] = 1
                    queue.append(len(copies[0]) - 1)
    return copies


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
    n_nodes = len(g.label)
    color = _wl_levels(g, iterations)[-1]

    claimed = bytearray(n_nodes)
    n_claimed = 0
    families: list[list[list[int]]] = []
    rejected: set[int] = set()
    while n_nodes - n_claimed >= min_copies * min_size:
        classes: dict[int, list[int]] = {}
        for n in range(n_nodes):
            if not claimed[n] and color[n] not in rejected:
                classes.setdefault(color[n], []).append(n)
        candidates = sorted((c for c, members in classes.items() if len(members) >= min_copies), key=lambda c: (-len(classes[c]), classes[c][0]))
        if not candidates:
            break
        eligible = n_nodes - n_claimed
        best: list[list[int]] | None = None
        best_cover = 0
        tried = candidates[:max_seed_trials]
        grown: set[int] = set()  # classes that are whole positions of a region grown this round
        for col in tried:
            if col in grown:
                continue  # growing from another position of that region gives it again
            copies = _grow(classes[col], claimed, g, color)
            for position in zip(*copies):
                cols = {color[n] for n in position}
                if len(cols) == 1 and len(classes.get(color[position[0]], ())) == len(position):
                    grown.add(color[position[0]])
            if len(copies[0]) < min_size:
                rejected.add(col)
                continue
            if len(copies) * len(copies[0]) <= best_cover:
                continue  # may still fold in a later round
            try:
                _check(copies, g)
            except FoldingError:
                rejected.add(col)
                continue
            cover = len(copies) * len(copies[0])
            if cover > best_cover:
                best, best_cover = copies, cover
            if best_cover >= 0.9 * eligible:
                break
        if best is None:
            rejected.update(tried)  # every class tried failed
            continue
        families.append(best)
        for copy in best:
            for n in copy:
                claimed[n] = 1
            n_claimed += len(copy)

    name = g.name
    representative: dict[Hashable, Hashable] = {}
    copy_of: dict[Hashable, tuple[int, int]] = {}
    multiplicity: dict[Hashable, int] = {}
    for f, fam in enumerate(families):
        reps = [name(n) for n in fam[0]]
        for c, copy in enumerate(fam):
            for j, n in enumerate(copy):
                node = name(n)
                representative[node] = reps[j]
                copy_of[node] = (f, c)
        for r in reps:
            multiplicity[r] = len(fam)
    for n in range(n_nodes):
        if not claimed[n]:
            node = name(n)
            representative[node] = node
            multiplicity[node] = 1
    stats = {
        "nodes": n_nodes,
        "folded_nodes": len(multiplicity),
        "families": [{"copies": len(fam), "nodes_per_copy": len(fam[0])} for fam in families],
        "wl_iterations": iterations,
    }
    out_families = [Family([[name(n) for n in copy] for copy in fam]) for fam in families]
    return FoldMap(out_families, representative, copy_of, multiplicity, stats)
