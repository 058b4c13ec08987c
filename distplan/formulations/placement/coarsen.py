"""Coarsening for placement (Baechi's preprocessing as a reusable graph transform).

1. Grouping: ops sharing a ``colocate`` name form a group; *co-placement* then merges an
   op that has exactly one consumer into its consumer's group.
2. Fusion: every edge inside a group is contracted unless another path joins its ends
   (which would create a cycle). Unlike Baechi's conservative skip (outdeg > 1 and
   indeg > 1), the test here is exact reachability in the current fused graph.
3. A fused op runs its members back to back: time = sum, memory = sum, temporary = the
   largest member temporary plus the outputs consumed only inside the fused op, output =
   the outputs leaving it. Parallel edges between fused ops merge, keeping the largest
   transfer (independent delays run in parallel).

The fused nodes are numbered in topological order: by their first member's topological
position, then renumbered by Kahn's smallest-id-first order of that numbering, so that every
coarse edge goes from a lower to a higher id (the list scheduler's topological order is then
the identity) while its ties, broken by that order, stay those of the first numbering.

`unfold` maps a coarse plan back to every original op (members start back to back from
the fused op's start, in topological order); the result is re-evaluated on the original
instance. Coarsening restricts the plans (members share a device and run together), so it
is not exact: bounds proven on the coarse instance are not kept.
"""

from __future__ import annotations

from collections import deque
from dataclasses import replace
from typing import Any

import numpy as np

from distplan.formulations.deadline import check as check_deadline
from distplan.formulations.placement.listsched_data import kahn_positions as topological_positions
from distplan.formulations.registry import Folding
from distplan.models.graphs import edges_by
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan, make_plan


class _UnionFind:
    """Union-find with path compression. Kept rather than scipy's connected_components: a
    union here depends on the merged group's memory at the moment it is made (groups grow
    one decision at a time), so the groups are not the components of a graph known in
    advance."""

    def __init__(self, n: int):
        self.parent = np.arange(n)

    def find(self, a: int) -> int:
        p = self.parent
        root = a
        while p[root] != root:
            root = p[root]
        while p[a] != root:
            p[a], a = root, p[a]
        return int(root)

    def union(self, a: int, b: int) -> int:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra
        return ra


def coplacement_groups(inst: PlacementInstance) -> np.ndarray:
    """Group id per op: colocation names, then single-consumer ops join their consumer
    (unless the merged group would no longer fit the smallest device)."""
    uf = _UnionFind(inst.n_ops)
    need = inst.memory_need()
    group_need = need.copy()  # indexed by union-find root
    limit = float(inst.device_memory.min())
    first: dict[str, int] = {}
    for v, g in enumerate(inst.colocate):
        if g is not None:
            if g in first:
                ra, rb = uf.find(first[g]), uf.find(v)
                if ra != rb:
                    total = group_need[ra] + group_need[rb]
                    group_need[uf.union(ra, rb)] = total
            else:
                first[g] = v
    consumers: list[set[int]] = [set() for _ in range(inst.n_ops)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        consumers[a].add(b)
    for v in range(inst.n_ops):
        if len(consumers[v]) == 1:
            ra, rb = uf.find(next(iter(consumers[v]))), uf.find(v)
            if ra != rb and group_need[ra] + group_need[rb] <= limit:
                total = group_need[ra] + group_need[rb]
                group_need[uf.union(ra, rb)] = total
    roots = np.array([uf.find(v) for v in range(inst.n_ops)])
    _, ids = np.unique(roots, return_inverse=True)
    return ids


def fuse(inst: PlacementInstance, groups: np.ndarray, deadline: float | None = None) -> np.ndarray:
    """Fused-node id per op: contract intra-group edges that close no other path;
    `DeadlineReached` when ``deadline`` (a ``time.perf_counter()`` value) passes first
    (its path searches take 1.2 s on 27,083 ops)."""
    n = inst.n_ops
    uf = _UnionFind(n)
    succ: list[set[int]] = [set() for _ in range(n)]
    pred: list[set[int]] = [set() for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].add(b)
        pred[b].add(a)
    pos = np.empty(n, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(n)
    intra = np.flatnonzero(groups[inst.src] == groups[inst.dst])
    intra = intra[np.argsort(pos[inst.src[intra]], kind="stable")]
    for step, e in enumerate(intra.tolist()):
        if deadline is not None and not step & 255:
            check_deadline(deadline, "fusing the coarsened graph")
        a, b = uf.find(int(inst.src[e])), uf.find(int(inst.dst[e]))
        if a == b:
            continue
        if len(succ[a]) > 1 and len(pred[b]) > 1 and _other_path(succ, a, b):
            continue
        # contract b into a
        r = uf.union(a, b)
        other = b if r == a else a
        for w in succ[other]:
            pred[w].discard(other)
            if w != r:
                pred[w].add(r)
        for w in pred[other]:
            succ[w].discard(other)
            if w != r:
                succ[w].add(r)
        succ[r] = (succ[a] | succ[b]) - {a, b}
        pred[r] = (pred[a] | pred[b]) - {a, b}
        succ[other] = set()
        pred[other] = set()
    roots = np.array([uf.find(v) for v in range(n)])
    # number fused nodes by their first member's topological position, then renumber them in
    # Kahn's smallest-id-first order of the fused graph (see `coarsen`)
    first_pos: dict[int, int] = {}
    for v in np.argsort(pos).tolist():
        first_pos.setdefault(int(roots[v]), len(first_pos))
    fused = np.array([first_pos[int(r)] for r in roots], dtype=np.int64)
    k = len(first_pos)
    fs, fd = fused[inst.src], fused[inst.dst]
    cross = fs != fd
    _, rank = topological_positions(k, fs[cross], fd[cross])
    return np.asarray(rank, dtype=np.int64)[fused]


def _other_path(succ: list[set[int]], a: int, b: int) -> bool:
    """Is b reachable from a without using the direct edge a -> b?"""
    seen = {a}
    queue = deque(w for w in succ[a] if w != b)
    seen.update(queue)
    while queue:
        v = queue.popleft()
        for w in succ[v]:
            if w == b:
                return True
            if w not in seen:
                seen.add(w)
                queue.append(w)
    return False


def coarsen(inst: PlacementInstance, params: dict[str, Any] | None = None, deadline: float | None = None) -> Folding:
    """Co-placement grouping + exact fusion; returns the coarse instance and the way back.
    `DeadlineReached` when ``deadline`` (a ``time.perf_counter()`` value) passes while
    fusing."""
    groups = coplacement_groups(inst)
    fused = fuse(inst, groups, deadline)
    k = int(fused.max()) + 1 if inst.n_ops else 0
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(inst.n_ops)
    members = [np.empty(0, dtype=np.int64)] * k
    order = np.lexsort((pos, fused))
    bounds = np.searchsorted(fused[order], np.arange(k + 1))
    members = [order[bounds[f] : bounds[f + 1]] for f in range(k)]

    time = np.zeros((k, inst.n_devices))
    np.add.at(time, fused, inst.time)
    memory = np.bincount(fused, weights=inst.memory, minlength=k)
    fs, fd = fused[inst.src], fused[inst.dst]
    leaves = np.zeros(inst.n_ops, dtype=bool)
    leaves[inst.src[fs != fd]] = True
    has_consumer = np.zeros(inst.n_ops, dtype=bool)
    has_consumer[inst.src] = True
    leaves |= ~has_consumer
    output = np.bincount(fused, weights=np.where(leaves, inst.output, 0.0), minlength=k)
    internal = np.bincount(fused, weights=np.where(leaves, 0.0, inst.output), minlength=k)
    temp_max = np.zeros(k)
    np.maximum.at(temp_max, fused, inst.temporary)
    temporary = temp_max + internal

    cross = np.flatnonzero(fs != fd)
    key = fs[cross] * k + fd[cross]
    uniq, inv = np.unique(key, return_inverse=True)
    ebytes = np.zeros(uniq.size)
    np.maximum.at(ebytes, inv, inst.edge_bytes[cross])
    src, dst = uniq // k, uniq % k

    group_of_fused = np.zeros(k, dtype=np.int64)
    group_of_fused[fused] = groups
    counts = np.bincount(group_of_fused)
    colocate = [f"group{int(g)}" if counts[g] > 1 else None for g in group_of_fused]
    names = []
    for f in range(k):
        first = inst.op_names[int(members[f][0])]
        names.append(first if members[f].size == 1 else f"{first}[+{members[f].size - 1}]")

    coarse = replace(  # the same cluster, memory and communication models; a coarser graph
        inst,
        name=f"{inst.name}-coarse",
        op_names=names,
        time=time,
        memory=memory,
        temporary=temporary,
        output=output,
        colocate=colocate,
        src=src.astype(np.int64),
        dst=dst.astype(np.int64),
        edge_bytes=ebytes,
        document=None,
        meta={"coarsened_from": inst.name},
    )

    def unfold(plan: PlacementPlan) -> PlacementPlan:
        device = plan.device[fused]
        if plan.start is None:
            return make_plan(inst, device)
        start = np.empty(inst.n_ops)
        for f in range(k):
            mem = members[f]
            dur = inst.time[mem, plan.device[f]]
            start[mem] = plan.start[f] + np.concatenate([[0.0], np.cumsum(dur)[:-1]])
        return make_plan(inst, device, start)

    stats = {
        "ops": inst.n_ops,
        "edges": inst.n_edges,
        "groups": int(groups.max()) + 1 if inst.n_ops else 0,
        "coarse_ops": k,
        "coarse_edges": int(src.size),
    }
    return Folding(instance=coarse, unfold=unfold, exact=False, stats=stats)


def chain_order(inst: PlacementInstance) -> np.ndarray:
    """A depth-first topological order: Kahn's with a stack (the op made ready last goes
    first), so consecutive ops follow chains of dependent ops rather than a layer of
    independent ones. O(V + E)."""
    n = inst.n_ops
    indeg = np.bincount(inst.dst, minlength=n).tolist()
    order_e = edges_by(inst.src, n)
    starts = np.searchsorted(inst.src[order_e], np.arange(n + 1)).tolist()
    succ = inst.dst[order_e].tolist()
    stack = [v for v in range(n - 1, -1, -1) if indeg[v] == 0]
    order: list[int] = []
    while stack:
        v = stack.pop()
        order.append(v)
        for j in range(starts[v + 1] - 1, starts[v] - 1, -1):
            w = succ[j]
            indeg[w] -= 1
            if indeg[w] == 0:
                stack.append(w)
    return np.asarray(order, dtype=np.int64)


def chain_clusters(inst: PlacementInstance, n_clusters: int, order: np.ndarray | None = None) -> np.ndarray:
    """Cluster id per op: ``n_clusters`` contiguous blocks of `chain_order` (or ``order``).

    Edges between blocks go only from a lower to a higher block id, so the contracted graph
    is acyclic."""
    n = inst.n_ops
    k = max(1, min(int(n_clusters), n))
    order = chain_order(inst) if order is None else order
    cluster = np.empty(n, dtype=np.int64)
    cluster[order] = (np.arange(n) * k) // n
    return cluster


def contract(inst: PlacementInstance, cluster: np.ndarray) -> tuple[PlacementInstance, np.ndarray]:
    """The quotient graph of an acyclic clustering, for a model that needs only times and
    delays (Baechi's SCT LP): a cluster's time per device is the sum of its members' (s),
    parallel edges merge keeping the largest tensor (bytes). Returns the coarse instance and,
    per original edge, its coarse edge id (-1 inside a cluster)."""
    k = int(cluster.max()) + 1 if inst.n_ops else 0
    time = np.zeros((k, inst.n_devices))
    np.add.at(time, cluster, inst.time)
    cs, cd = cluster[inst.src], cluster[inst.dst]
    cross = np.flatnonzero(cs != cd)
    key = cs[cross] * k + cd[cross]
    uniq, inv = np.unique(key, return_inverse=True)
    ebytes = np.zeros(uniq.size)
    np.maximum.at(ebytes, inv, inst.edge_bytes[cross])
    edge_of = np.full(inst.n_edges, -1, dtype=np.int64)
    edge_of[cross] = inv
    zeros = np.zeros(k)
    coarse = replace(
        inst,
        name=f"{inst.name}-clusters{k}",
        op_names=[f"cluster{c}" for c in range(k)],
        time=time,
        memory=zeros,
        temporary=zeros,
        output=zeros,
        colocate=[None] * k,
        src=(uniq // k).astype(np.int64),
        dst=(uniq % k).astype(np.int64),
        edge_bytes=ebytes,
        document=None,
        meta={"contracted_from": inst.name},
    )
    return coarse, edge_of
