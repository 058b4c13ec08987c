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
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

import networkx as nx

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


def _adjacency(G: nx.DiGraph, edge_label: str, edge_ids: dict[Hashable, int]) -> tuple[dict[Hashable, list[tuple[int, Hashable]]], dict[Hashable, list[tuple[int, Hashable]]]]:
    out: dict[Hashable, list[tuple[int, Hashable]]] = {n: [] for n in G.nodes}
    inn: dict[Hashable, list[tuple[int, Hashable]]] = {n: [] for n in G.nodes}
    for u, v, lab in G.edges(data=edge_label):
        eid = edge_ids.setdefault(lab, len(edge_ids))
        out[u].append((eid, v))
        inn[v].append((eid, u))
    return out, inn


def wl_colors(G: nx.DiGraph, node_label: str = "label", edge_label: str = "label", iterations: int = 2) -> dict[Hashable, int]:
    """Directed Weisfeiler-Lehman colours (successors and predecessors, with edge labels).

    Colour ids are assigned in order of first appearance in ``G.nodes``, so they are
    deterministic for a given node order.
    """
    out, inn = _adjacency(G, edge_label, {})
    return _wl_levels(G, node_label, out, inn, iterations)[-1]


def _wl_levels(
    G: nx.DiGraph,
    node_label: str,
    out: Mapping[Hashable, list[tuple[int, Hashable]]],
    inn: Mapping[Hashable, list[tuple[int, Hashable]]],
    iterations: int,
) -> list[dict[Hashable, int]]:
    ids: dict[Any, int] = {}
    color = {n: ids.setdefault(G.nodes[n][node_label], len(ids)) for n in G.nodes}
    levels = [color]
    for _ in range(iterations):
        ids = {}
        new: dict[Hashable, int] = {}
        for n in G.nodes:
            sig = (
                color[n],
                tuple(sorted((e, color[m]) for e, m in out[n])),
                tuple(sorted((e, color[m]) for e, m in inn[n])),
            )
            new[n] = ids.setdefault(sig, len(ids))
        color = new
        levels.append(color)
    return levels


def check_family(G: nx.DiGraph, family: Family, node_label: str = "label", edge_label: str = "label") -> None:
    """Exact isomorphism check: the position-wise map from copy 0 to every copy preserves
    node labels and the labelled edges of the induced subgraphs. Raises FoldingError."""
    label_ids: dict[Any, int] = {}
    label_id = {n: label_ids.setdefault(G.nodes[n][node_label], len(label_ids)) for n in G.nodes}
    out, _ = _adjacency(G, edge_label, {})
    _check(family.copies, label_id, out)


def _check(copies: list[list[Hashable]], label_id: Mapping[Hashable, int], out: Mapping[Hashable, list[tuple[int, Hashable]]]) -> None:
    """`check_family` on integer node and edge labels."""
    first = copies[0]
    seen: set[Hashable] = set()
    for c, copy in enumerate(copies):
        if len(copy) != len(first):
            raise FoldingError(f"copy {c} has {len(copy)} nodes, copy 0 has {len(first)}")
        if seen.intersection(copy) or len(set(copy)) != len(copy):
            raise FoldingError(f"copy {c} overlaps another copy")
        seen.update(copy)

    def inner_edges(copy: list[Hashable]) -> list[tuple[int, int, int]]:
        pos = {n: j for j, n in enumerate(copy)}
        return sorted((pos[u], pos[v], e) for u in copy for e, v in out[u] if v in pos)

    ref_labels = [label_id[n] for n in first]
    ref_edges = inner_edges(first)
    for c, copy in enumerate(copies[1:], start=1):
        if [label_id[n] for n in copy] != ref_labels:
            raise FoldingError(f"copy {c} has node labels that differ from copy 0")
        if inner_edges(copy) != ref_edges:
            raise FoldingError(f"copy {c} is not isomorphic to copy 0 under the position map")


def _grow(
    seeds: list[Hashable],
    claimed: set[Hashable],
    label_id: Mapping[Hashable, int],
    color: Mapping[Hashable, int],
    order: Mapping[Hashable, int],
    out: Mapping[Hashable, list[tuple[int, Hashable]]],
    inn: Mapping[Hashable, list[tuple[int, Hashable]]],
) -> list[list[Hashable]]:
    """Grow regions around the seeds in lock step (see the module docstring)."""
    k = len(seeds)
    copies: list[list[Hashable]] = [[s] for s in seeds]
    local = set(seeds)
    queue: deque[int] = deque([0])
    while queue:
        j = queue.popleft()
        for direction, adj in enumerate((out, inn)):
            per_copy: list[dict[tuple[int, int, int, int], list[Hashable]]] = []
            for c in range(k):
                groups: dict[tuple[int, int, int, int], list[Hashable]] = {}
                for e, m in adj[copies[c][j]]:
                    if m in claimed or m in local:
                        continue
                    groups.setdefault((direction, e, label_id[m], color[m]), []).append(m)
                per_copy.append(groups)
            for key, cands0 in per_copy[0].items():
                lists = [pc.get(key) for pc in per_copy]
                if any(lst is None or len(lst) != len(cands0) for lst in lists):
                    continue
                ordered = [sorted(lst, key=lambda m: order[m]) for lst in lists]  # type: ignore[arg-type]
                for r in range(len(cands0)):
                    tup = [ordered[c][r] for c in range(k)]
                    if len(set(tup)) < k or any(m in local for m in tup):
                        continue
                    for c in range(k):
                        copies[c].append(tup[c])
                    local.update(tup)
                    queue.append(len(copies[0]) - 1)
    return copies


def find_repeated_subgraphs(
    G: nx.DiGraph,
    node_label: str = "label",
    edge_label: str = "label",
    *,
    min_copies: int = 2,
    min_size: int = 2,
    iterations: int = 2,
    max_seed_trials: int = 6,
) -> FoldMap:
    """Families of disjoint isomorphic regions of ``G`` and every node's representative.

    Regions have at least ``min_size`` nodes and families at least ``min_copies`` copies.
    Every family returned passed `check_family`.
    """
    nodes = list(G.nodes)
    order = {n: k for k, n in enumerate(nodes)}
    label_ids: dict[Any, int] = {}
    label_id = {n: label_ids.setdefault(G.nodes[n][node_label], len(label_ids)) for n in nodes}
    edge_ids: dict[Hashable, int] = {}
    out, inn = _adjacency(G, edge_label, edge_ids)
    levels = _wl_levels(G, node_label, out, inn, iterations)
    color = levels[-1]

    claimed: set[Hashable] = set()
    families: list[Family] = []
    rejected: set[int] = set()
    while len(nodes) - len(claimed) >= min_copies * min_size:
        classes: dict[int, list[Hashable]] = {}
        for n in nodes:
            if n not in claimed and color[n] not in rejected:
                classes.setdefault(color[n], []).append(n)
        candidates = sorted((c for c, members in classes.items() if len(members) >= min_copies), key=lambda c: (-len(classes[c]), order[classes[c][0]]))
        if not candidates:
            break
        eligible = len(nodes) - len(claimed)
        best: list[list[Hashable]] | None = None
        best_cover = 0
        tried = candidates[:max_seed_trials]
        for col in tried:
            copies = _grow(classes[col], claimed, label_id, color, order, out, inn)
            if len(copies[0]) < min_size:
                rejected.add(col)
                continue
            if len(copies) * len(copies[0]) <= best_cover:
                continue  # may still fold in a later round
            try:
                _check(copies, label_id, out)
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
        families.append(Family(best))
        for copy in best:
            claimed.update(copy)

    representative: dict[Hashable, Hashable] = {}
    copy_of: dict[Hashable, tuple[int, int]] = {}
    multiplicity: dict[Hashable, int] = {}
    for f, fam in enumerate(families):
        for c, copy in enumerate(fam.copies):
            for j, n in enumerate(copy):
                representative[n] = fam.copies[0][j]
                copy_of[n] = (f, c)
        for n in fam.copies[0]:
            multiplicity[n] = fam.num_copies
    for n in nodes:
        if n not in representative:
            representative[n] = n
            multiplicity[n] = 1
    stats = {
        "nodes": len(nodes),
        "folded_nodes": len(multiplicity),
        "families": [{"copies": fam.num_copies, "nodes_per_copy": fam.size} for fam in families],
        "wl_iterations": iterations,
    }
    return FoldMap(families, representative, copy_of, multiplicity, stats)
