"""Exact folding of a chain of repeated layers: a walk over boundary states with counts.

TAP (Shi et al., arXiv 2302.00247) folds the repeated blocks of a network and searches
one block; letting every copy share the representative's strategies (autoparallel's
variable sharing) is exact only when memory does not bind: under a memory budget the
copies of a layer may need different strategies. This module keeps the folded size
(independent of the number of copies) and stays exact.

**The chain.** A family of K isomorphic copies found by `distplan.formulations.folding`
is a *chain* when its copies can be ordered pi(0), ..., pi(K-1) so that every edge
between two copies runs from pi(k-1) to pi(k), with the same positions and edge labels
for every k, and no edge joins the walk copies pi(1..K-1) to the rest of the graph except
edges leaving pi(K-1). The *out positions* O are the positions that are the source of an
edge leaving a copy; a copy's *boundary state* is the joint strategy of its O nodes.

**The walk.** The cost of copy pi(k), k >= 1 (node costs, edges inside it, and the
resharding on the edges from pi(k-1)) depends only on the boundary state o of pi(k-1)
and on the copy's own strategies; its memory (bytes per device) only on its own
strategies. So a plan of copies pi(1..K-1) is a walk of K-1 arcs over the boundary
states, arc (o -> o') labelled by the strategies of one copy whose boundary state is o'.
Of all copies with the same (o, o') only the Pareto-optimal ones in (seconds, bytes) can
appear in an optimal plan (replacing a dominated copy keeps the plan feasible and does
not raise its cost), so the arcs are the Pareto fronts per (o, o'), computed exactly by
bi-criteria variable elimination over the copy (`segment_fronts`), as tables of rows.

The folded program (Alpa's ILP, Zheng et al., OSDI 2022, section 4, over the explicit
nodes: everything outside the walk copies, pi(0) included) gets, per chain:

* integer arc counts x_a >= 0 with sum x = K - 1;
* the start state w (joint strategy of pi(0)'s O nodes, tied to their one-hot vectors
  by marginal rows) and the end state y (tied to *virtual* nodes that stand for
  pi(K-1)'s O nodes on the edges leaving the chain);
* flow conservation w(o) + in(o) = out(o) + y(o) at every state;
* memory: sum_a mem_a x_a joins the one memory row.

An integer flow with these rows is a walk from the start state to the end state plus
cycles; it is a single walk (Euler) exactly when its arcs, with the start state, are
connected. Connectivity is imposed lazily: a solution whose support has a component S
of states apart from the start is cut off by ``w(S) + x(into S) >= x(inside S) / (K-1)``,
valid for every walk (a walk using an arc inside S starts in S or enters it), and the
program is solved again. Every row is valid for every plan of the unfolded problem, so
the program is a relaxation of Alpa's ILP whose connected integer solutions are plans of
equal cost: its optimum is the instance optimum and its dual bound is a proven bound.
The size is independent of K: K enters only as the right-hand side K - 1.

Families that are not chains (or whose boundary state space exceeds ``max_states``) are
unfolded (their nodes become explicit), so the result is exact in every case. Region
growth may cut a layer anywhere; a chain's copies are first realigned (`alignments`) to the
boundary crossed by the fewest states (Llama-3 8B: from 17,199 states to 13), then grown by
the copies the folding left explicit at its ends (`grown_copies`: GPT with 24 layers, from 21
copies to 24, which leaves the dynamic program 13 explicit nodes instead of 34).

This module finds the chains; the Pareto arcs are in `chain_fronts`, the walk decoding and
the warm start in `chain_walk`, the folded program and its solve loop in `chain_program`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.formulations.folding import FoldingError, FoldMap, IndexedGraph, check_copies
from distplan.formulations.sharding.costgraph import CostTables, Skeleton, _sequence_keys

#: default cap on the number of boundary states of a chain (joint strategies of its out positions)
MAX_STATES = 4096


# -- chains --------------------------------------------------------------------------------


def _closure(seed: int, pulls: dict[int, list[int]]) -> frozenset[int]:
    """The least shift set holding ``seed``: the positions reachable from it along
    ``pulls`` (b pulls in every internal predecessor a, a -> b inside a copy; a pulls in
    every link successor b, a -> b into the next copy)."""
    shift = {seed}
    stack = [seed]
    while stack:
        for y in pulls.get(stack.pop(), ()):
            if y not in shift:
                shift.add(y)
                stack.append(y)
    return frozenset(shift)


def alignments(nodes: np.ndarray, iu: np.ndarray, iv: np.ndarray, lu: np.ndarray, lv: np.ndarray, tail_pos: np.ndarray, dom: np.ndarray) -> list[np.ndarray]:
    """The copies of a chain with their boundary moved to where the fewest boundary states
    cross it (the region growth may cut a layer in its middle: Llama's copies ran from one
    layer's FFN into the next one's attention projections, four out positions).

    A shift set T of positions takes the copies ``new[k, j] = nodes[k + (j in T), j]``
    (K - 1 copies; the first copy's T nodes and the last copy's others become explicit).
    They are copies again (the chain is periodic) and consecutive as long as no internal
    edge runs from outside T into T and no link from T to outside T (`_closure`). Their
    out positions: sources of internal edges from T to outside it, of links within T or
    within its complement, and of edges leaving the chain from T. Candidates: the closures
    of every single position; the one of fewest states (product of the out positions'
    strategy counts) wins over the chain as it is only when strictly fewer. Returns the
    winner first, then every other alignment of as few states (the caller may prefer the
    one that `grown_copies` grows most)."""
    if nodes.shape[0] < 3:
        return [nodes]
    n = nodes.shape[1]
    internal = list(zip(iu.tolist(), iv.tolist()))
    links = list(zip(lu.tolist(), lv.tolist()))
    sizes = dom.tolist()
    tails = tail_pos.tolist()
    pulls: dict[int, list[int]] = {}
    for a, b in internal:
        pulls.setdefault(b, []).append(a)
    for a, b in links:
        pulls.setdefault(a, []).append(b)

    def states(shift: frozenset[int]) -> float:
        """Boundary states of the copies shifted by ``shift``: the product of the out
        positions' strategy counts (floats multiplied in order: exact integers here)."""
        out = {a for a, b in internal if a in shift and b not in shift}
        out |= {a for a, b in links if (a in shift) == (b in shift)}
        out |= {p for p in tails if p in shift or not shift}
        return math.prod([float(sizes[j]) for j in out], start=1.0)

    scored: list[tuple[float, frozenset[int]]] = [(states(frozenset()), frozenset())]
    seen: set[frozenset[int]] = {frozenset()}
    for j in range(n):
        shift = _closure(j, pulls)
        if len(shift) < n and shift not in seen:
            seen.add(shift)
            scored.append((states(shift), shift))
    least = min(s for s, _ in scored)
    if scored[0][0] > least:  # the chain as grown loses its place unless it ties
        scored.pop(0)
    out = []
    columns = np.arange(n)[None, :]
    for got, shift in scored:
        if got == least:
            take = np.zeros(n, dtype=np.int64)
            take[sorted(shift)] = 1
            out.append(nodes[np.arange(nodes.shape[0] - int(bool(shift)))[:, None] + take[None, :], columns])
    return out


def _chain_of(f: int, nodes: np.ndarray, sk: Skeleton, dom: np.ndarray) -> Chain | str:
    """The chain of copies ``nodes`` (in chain order), or why they are not one: every
    edge touching a copy joins two nodes of one copy, runs from a copy to the next, enters
    the first copy, or leaves the first or the last."""
    u, v = sk.edge_u, sk.edge_v
    K, n = nodes.shape
    copy_of = np.empty(sk.num_nodes, dtype=np.int64)
    copy_of.fill(-1)
    copy_of[nodes] = np.arange(K)[:, None]
    cu, cv = copy_of[u], copy_of[v]
    inside, outside = cu >= 0, cv < 0
    following = inside & (cv == cu + 1)
    ok = (cu == cv) | following | (~inside & (cv == 0)) | (outside & ((cu == 0) | (cu == K - 1))) | (~inside & outside)
    if not ok.all():  # (the last term: an edge touching no copy)
        return "copies inside the chain have edges to other nodes"
    in1 = ((cu == 1) & (cv == 1)).nonzero()[0]
    link = ((cu == 0) & (cv == 1)).nonzero()[0]
    tail = ((cu == K - 1) & outside).nonzero()[0]
    # the out positions: of the sources of the edges to the next copy and of the tail edges
    is_out = np.zeros(sk.num_nodes, dtype=bool)
    is_out[u[following]] = True
    is_out[u[tail]] = True
    out_pos = is_out[nodes].any(axis=0).nonzero()[0]
    return Chain(f, nodes, out_pos, dom[out_pos], in1, link, tail)


@dataclass
class Chain:
    """A family of copies in chain order, its out positions and its walk arcs."""

    family: int
    #: nodes[k, j]: skeleton node at position j of the k-th copy in chain order
    nodes: np.ndarray
    #: out positions (sources of edges leaving a copy), sorted
    out_pos: np.ndarray
    #: strategies per out position (mixed radix of the boundary state, first position slowest)
    out_sizes: np.ndarray
    #: skeleton edges inside copy 1 (chain order) and from copy 0 to copy 1
    internal_edges: np.ndarray
    link_edges: np.ndarray
    #: skeleton edges leaving the last copy (from out positions)
    tail_edges: np.ndarray
    arcs: dict[str, np.ndarray] = field(default_factory=dict)
    #: boundary states plus the values of the separator inside a copy (when there is one)
    num_walk_states: int = 0
    #: the Pareto arcs were found to exceed their row limit (`chain_fronts.TooLarge`): the
    #: chain is left unfolded without making them again
    arcs_too_large: bool = False

    @property
    def copies(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def positions(self) -> int:
        return int(self.nodes.shape[1])

    @property
    def num_states(self) -> int:
        return math.prod(self.out_sizes.tolist())

    def digits(self, states: np.ndarray) -> np.ndarray:
        """(states, out positions) strategy index of every out position in each state."""
        stride = np.ones(self.out_sizes.size, dtype=np.int64)
        if self.out_sizes.size > 1:
            stride[:-1] = np.cumprod(self.out_sizes[::-1])[::-1][1:]
        return (np.asarray(states, dtype=np.int64)[:, None] // stride[None, :]) % self.out_sizes[None, :]


def first_copy_feed(sk: Skeleton, chain: Chain, tables: CostTables) -> np.ndarray | None:
    """The nodes that feed the chain's first copy as a copy feeds the next one, one per out
    position (in the order of ``out_pos``), or None when there are none.

    They exist when the first copy is a copy like the others (its node labels and internal
    edge labels by position those of the second copy, so `CostTables` gives it the same
    arrays) whose only edges to the rest of the graph are the links into the second copy
    and, for every link (out position a -> position b), one edge from a node f_a outside
    the chain into its position b, whose resharding matrix (seconds, rows: f_a's
    strategies) equals the link's; f_a is the same node for every link of a, and distinct
    for distinct a. The first copy's cost then depends on the joint strategy of the f_a
    exactly as a copy's depends on the previous copy's boundary state, and its memory on
    its own strategies only, so it is one more step of the walk from that state (a GPT's
    embedding feeds its first layer so: `chain_dp.solve_by_dp` then leaves only the
    embedding explicit before the walk, not a whole layer)."""
    nodes0, nodes1 = chain.nodes[0].tolist(), chain.nodes[1].tolist()
    labels = sk.node_label_id
    if not np.array_equal(labels[chain.nodes[0]], labels[chain.nodes[1]]):
        return None
    pos0 = {x: j for j, x in enumerate(nodes0)}
    pos1 = {x: j for j, x in enumerate(nodes1)}
    in_chain = np.zeros(sk.num_nodes, dtype=bool)
    in_chain[chain.nodes.ravel()] = True
    in0 = np.zeros(sk.num_nodes, dtype=bool)
    in0[chain.nodes[0]] = True
    u, v, elab = sk.edge_u.tolist(), sk.edge_v.tolist(), sk.edge_label_id.tolist()
    inner0: list[tuple[int, int, int]] = []
    feeds: dict[int, list[int]] = {}  # target position in the first copy -> feeding edges
    links = set(chain.link_edges.tolist())
    for e in (in0[sk.edge_u] | in0[sk.edge_v]).nonzero()[0].tolist():  # (the edges touching the first copy)
        a, b = u[e], v[e]
        if a in pos0 and b in pos0:
            inner0.append((pos0[a], pos0[b], elab[e]))
        elif a in pos0:
            if e not in links:
                return None  # the first copy reaches a node other than the second copy
        elif b in pos0:
            if in_chain[a]:
                return None
            feeds.setdefault(pos0[b], []).append(e)
    inner1 = sorted((pos1[u[e]], pos1[v[e]], elab[e]) for e in chain.internal_edges.tolist())
    if sorted(inner0) != inner1 or sum(map(len, feeds.values())) != len(links):
        return None
    feeder: dict[int, int] = {}  # out position -> its node f_a
    used: set[int] = set()
    for e in chain.link_edges.tolist():
        a, b = pos0[u[e]], pos1[v[e]]
        M = tables.edge(sk, e)
        match = next((f for f in feeds.get(b, []) if f not in used and feeder.get(a, u[f]) == u[f] and np.array_equal(tables.edge(sk, f), M)), None)
        if match is None:
            return None
        used.add(match)
        feeder[a] = u[match]
    out = chain.out_pos.tolist()
    feed = [feeder.get(a, -1) for a in out]
    if min(feed, default=-1) < 0 or len(set(feed)) != len(feed):
        return None  # (an out position that links nowhere has no feeding node)
    return np.array(feed, dtype=np.int64)


Adjacency = tuple[list[list[tuple[int, int]]], list[list[tuple[int, int]]]]


def adjacency(sk: Skeleton) -> Adjacency:
    """Per node, its out-edges as (edge label, head) and its in-edges as (edge label, tail)."""
    out_adj: list[list[tuple[int, int]]] = [[] for _ in range(sk.num_nodes)]
    in_adj: list[list[tuple[int, int]]] = [[] for _ in range(sk.num_nodes)]
    for a, b, lab in zip(sk.edge_u.tolist(), sk.edge_v.tolist(), sk.edge_label_id.tolist()):
        out_adj[a].append((lab, b))
        in_adj[b].append((lab, a))
    return out_adj, in_adj


def _ends(copy: list[int], adjacent: list[list[tuple[int, int]]]) -> set[int]:
    """The other ends of the edges of ``copy``'s nodes in ``adjacent`` (out- or in-edges)."""
    return {y for x in copy for _, y in adjacent[x]}


def _joins_cleanly(end: list[int], inner: list[int], new: list[int], taken: set[int], before: bool, adj: Adjacency) -> bool:
    """Whether copy ``new`` may join a chain (nodes ``taken``) at ``end``, its first copy
    when ``before``, else its last (``inner`` the copy next to ``end`` in the chain): ``end``
    moves inside the chain, so its edges stay within it or run from the copy before and to
    the copy after only; ``new`` has no other edge to or from the chain, and as the last copy
    none from outside."""
    out_adj, in_adj = adj
    prior, after = (set(new), set(inner)) if before else (set(inner), set(new))
    mine = set(end)
    if not (_ends(end, out_adj) <= mine | after and _ends(end, in_adj) <= mine | prior):
        return False
    heads, tails = _ends(new, out_adj) & taken, _ends(new, in_adj)
    return not ((heads - mine or tails & taken) if before else (heads or tails - mine - set(new)))


def grown_copies(nodes: np.ndarray, sk: Skeleton, free: np.ndarray, adj: Adjacency | None = None) -> np.ndarray | None:
    """The copies of a chain grown by whole copies at either end, as long as the explicit
    nodes there hold one more copy: the folding's colour refinement sets the layers next to
    the ends apart (GPT: 24 layers folded as 22 copies, realigned to 21, with three layers
    explicit before the walk and one after), and every layer left explicit enlarges the
    explicit graph, whose Pareto fronts the dynamic program computes.

    A copy before the first one is found from the links into it (the source of each link
    pattern's edge, with its edge and node labels) and the internal edges (a unique
    neighbour with the right labels), and after the last one likewise. It is taken only
    when its nodes are ``free`` (explicit, of no other family) and distinct, have the
    copies' node labels per position, the same internal edges (positions and labels) and
    the same links to the copy it joins, the copy it joins (now inside the chain) has no
    other edge, and it has no other edge to the chain (nor, as the last copy, from outside).
    Costs are a function of the labels (`CostTables`), so a new copy has the copies' costs.
    Returns the grown copies, not checked as a chain (`_widest_chain` checks them), or
    None when no copy joins."""
    n = nodes.shape[1]
    if nodes.shape[0] < 2 or n == 0:
        return None
    node_lab = sk.node_label_id.tolist()
    out_adj, in_adj = adj if adj is not None else adjacency(sk)
    rows = nodes.tolist()
    pos1 = {x: j for j, x in enumerate(rows[1])}
    internal = sorted([(j, pos1[b], lab) for j, a in enumerate(rows[1]) for lab, b in out_adj[a] if b in pos1])
    links = sorted([(j, pos1[b], lab) for j, a in enumerate(rows[0]) for lab, b in out_adj[a] if b in pos1])
    if not links:
        return None
    want = [node_lab[x] for x in rows[0]]
    taken = set(nodes.ravel().tolist())
    is_free = free.tolist()

    def neighbour(x: int, label: int, pos: int, forward: bool) -> int:
        """The one node joined to x by an edge of ``label`` (x its tail when ``forward``)
        with the node label of position ``pos``; -1 when none or several."""
        hit = [y for lab, y in (out_adj[x] if forward else in_adj[x]) if lab == label and node_lab[y] == want[pos]]
        return hit[0] if len(hit) == 1 else -1

    def edges(src: list[int], dst: list[int]) -> list[tuple[int, int, int]]:
        at = {x: j for j, x in enumerate(dst)}
        return sorted([(j, at[b], lab) for j, a in enumerate(src) for lab, b in out_adj[a] if b in at])

    def grow(end: list[int], inner: list[int], before: bool) -> list[int] | None:
        """The copy joining ``end`` (the first copy when ``before``, else the last), whose
        neighbour inside the chain is ``inner``."""
        m = [-1] * n
        for a, b, label in links:
            x = neighbour(end[b], label, a, False) if before else neighbour(end[a], label, b, True)
            j = a if before else b
            if x < 0 or (m[j] >= 0 and m[j] != x):
                return None
            m[j] = x
        changed = True
        while changed:
            changed = False
            for a, b, label in internal:
                if m[a] >= 0 and m[b] < 0:
                    m[b] = neighbour(m[a], label, b, True)
                elif m[b] >= 0 and m[a] < 0:
                    m[a] = neighbour(m[b], label, a, False)
                else:
                    continue
                if m[a] < 0 or m[b] < 0:
                    return None
                changed = True
        if min(m) < 0 or len(set(m)) != n or any(x in taken or not is_free[x] for x in m):
            return None
        if [node_lab[x] for x in m] != want or edges(m, m) != internal:
            return None
        if (edges(m, end) if before else edges(end, m)) != links:
            return None
        return m if _joins_cleanly(end, inner, m, taken, before, (out_adj, in_adj)) else None

    first: list[list[int]] = []
    last: list[list[int]] = []
    for before in (True, False):
        while True:
            chain = first[::-1] + rows + last
            got = grow(chain[0], chain[1], True) if before else grow(chain[-1], chain[-2], False)
            if got is None:
                break
            (first if before else last).append(got)
            taken.update(got)
    if not first and not last:
        return None
    grown = [np.array(first[::-1], dtype=nodes.dtype).reshape(-1, n), nodes, np.array(last, dtype=nodes.dtype).reshape(-1, n)]
    return np.concatenate(grown)


def _widest_chain(f: int, options: list[tuple[np.ndarray, np.ndarray | None]], sk: Skeleton, dom: np.ndarray) -> tuple[np.ndarray, Chain | str]:
    """Of the alignments' copies and their grown copies (None when they did not grow), the
    copies that are most (the first of as many) and their `_chain_of`: an alignment's
    grown copies when they are a chain, else its own. Grown copies are checked only when
    they would win: a check that fails puts the alignment back at its own length."""
    lengths = [(cand if grown is None else grown).shape[0] for cand, grown in options]
    while True:
        i = lengths.index(max(lengths))
        cand, grown = options[i]
        if grown is None:
            return cand, _chain_of(f, cand, sk, dom)
        made = _chain_of(f, grown, sk, dom)
        if not isinstance(made, str):
            return grown, made
        options[i] = (cand, None)
        lengths[i] = cand.shape[0]


#: a run of consecutive blocks (`consecutive_blocks`) is tried from this many repeats of its
#: period's most frequent gap down; the generic folding runs when no candidate is a chain
PERIOD_CANDIDATES = 2


def consecutive_blocks(sk: Skeleton, min_copies: int = 2) -> FoldMap | None:
    """The longest run of consecutive blocks of nodes (in node order, the order of the
    ops: a stack of layers built layer by layer) that are copies of one another, as a fold
    of one family (`FoldMap`), or None when there is none of ``min_copies`` copies.

    A node's signature is its label with the multiset of its edges' (direction, edge
    label, offset of the other end in node order); a block of p nodes repeats where the
    signatures repeat with period p. Periods are tried from the most frequent gap between
    nodes of equal signature (`PERIOD_CANDIDATES` of them); the copies are then checked
    exactly as the folding checks its families (`distplan.formulations.folding`: equal
    node labels per position, the same labelled edges inside every copy), so a run that
    only looked periodic is refused. The chain itself (order, links, alignment, growth by
    the copies at its ends) is `find_chains`'s, as for any fold. Linear in the size of the
    skeleton, against the colour refinement and region growth of `find_repeated_subgraphs`."""
    n = sk.num_nodes
    u, v = sk.edge_u, sk.edge_v
    if n < 2 * max(min_copies, 2) or not u.size:
        return None
    lab = sk.edge_label_id
    labels = int(lab.max()) + 1
    # every node's label (a negative code, so it comes first), then its edges seen from
    # both ends: (code of direction, edge label and offset of the other end), sorted
    code = np.concatenate([-1 - sk.node_label_id, lab * (2 * n + 1) + (v - u + n), (labels + lab) * (2 * n + 1) + (u - v + n)])
    # sorted by node, then code: one integer per item, (node, code - lowest code) in mixed radix
    low = int(code[:n].min())  # (the labels' codes are the lowest)
    span = 2 * labels * (2 * n + 1) - low
    key = np.concatenate([np.arange(n), u, v]) * span + (code - low)
    key.sort()
    sig = _sequence_keys(key // span, key % span, n)  # (only equality matters below)
    # gaps between consecutive nodes of equal signature, by frequency
    by_sig = sig.argsort(kind="stable")
    same = sig[by_sig[1:]] == sig[by_sig[:-1]]
    gaps = (by_sig[1:] - by_sig[:-1])[same]
    if not gaps.size:
        return None
    count = np.bincount(gaps)
    best: tuple[int, int, int] | None = None  # (nodes covered, period, start)
    for p in np.argsort(-count, kind="stable")[:PERIOD_CANDIDATES].tolist():
        if p < 1 or not count[p]:
            continue
        equal = sig[:-p] == sig[p:]
        breaks = np.empty(equal.size - int(equal.sum()) + 2, dtype=np.int64)
        breaks[0], breaks[-1] = -1, equal.size
        breaks[1:-1] = (~equal).nonzero()[0]
        runs = breaks[1:] - breaks[:-1] - 1
        k = int(runs.argmax())
        copies = (int(runs[k]) + p) // p
        if copies >= min_copies and (best is None or copies * p > best[0]):
            best = (copies * p, p, int(breaks[k]) + 1)
    if best is None:
        return None
    covered, p, start = best
    region = start + np.arange(covered, dtype=np.int64).reshape(covered // p, p)
    try:
        check_copies(region, IndexedGraph(None, sk.node_label_id, u, v, sk.edge_label_id))
    except FoldingError:
        return None
    stats = {"nodes": n, "folded_nodes": n - (region.size - p), "families": [{"copies": region.shape[0], "nodes_per_copy": p}], "found_by": "consecutive blocks"}
    return FoldMap(range(n), [region], stats)


def find_chains(sk: Skeleton, fold: FoldMap, tables: CostTables, max_states: int = MAX_STATES) -> tuple[list[Chain], dict[str, Any]]:
    """The families of ``fold`` that are chains (see the module docstring), in chain order.

    Families that are not are reported in the returned info (their nodes stay explicit)."""
    u, v = sk.edge_u, sk.edge_v
    family, copy = fold.family_index, fold.copy_index
    n = sk.num_nodes
    position = np.empty(n, dtype=np.int64)
    position.fill(-1)
    for region in fold.regions:
        position[region] = np.arange(region.shape[1])[None, :]
    candidates: dict[int, Chain] = {}
    rejected: dict[int, str] = {}
    adj: Adjacency | None = None
    fu, fv, cu, cv, pu, pv = family[u], family[v], copy[u], copy[v], position[u], position[v]
    edge_label = sk.edge_label_id
    for f, region in enumerate(fold.regions):
        K, P = region.shape
        from_f, to_f = fu == f, fv == f
        both = (from_f & to_f).nonzero()[0]
        cross = both[cu[both] != cv[both]]
        cu_x, cv_x = cu[cross], cv[cross]
        # the copies in chain order: K - 1 pairs (from, to) joined by edges, and the walk
        # along them from a copy that follows none reaches every copy once (so no copy has
        # two successors or two predecessors, and one copy follows none)
        order: list[int] = []
        codes = sorted(set((cu_x * K + cv_x).tolist()))
        if len(codes) == K - 1:
            succ = dict(divmod(c, K) for c in codes)
            follows = set(succ.values())
            c = next((c for c in range(K) if c not in follows), -1)
            while c >= 0 and len(order) <= K:
                order.append(c)
                c = succ.get(c, -1)
        if len(order) != K:
            rejected[f] = "copies are not joined as one chain"
            continue
        rank = np.empty(K, dtype=np.int64)
        rank[order] = np.arange(K)
        # the same links (positions, edge label) between every pair of consecutive copies:
        # one integer per link, ordered by the rank of its source copy then as the tuples
        # (positions, label), so the links of rank r are row r, sorted
        if K > 1:
            span = P * P * (int(edge_label.max(initial=0)) + 1)
            key = np.sort(rank[cu_x] * span + (pu[cross] * P + pv[cross]) * (span // (P * P)) + edge_label[cross])
            if key.size % (K - 1):
                rejected[f] = "consecutive copies are joined differently"
                continue
            key = key.reshape(K - 1, -1)
            if not ((key // span == np.arange(K - 1)[:, None]).all() and (key % span == key[0] % span).all()):
                rejected[f] = "consecutive copies are joined differently"
                continue
        out_edges = (from_f & ~to_f).nonzero()[0]
        in_edges = (~from_f & to_f).nonzero()[0]
        r_out = rank[cu[out_edges]]
        if ((r_out != 0) & (r_out != K - 1)).any() or (rank[cv[in_edges]] != 0).any():
            rejected[f] = "copies inside the chain have edges to other nodes"
            continue
        tail = out_edges[r_out == K - 1]
        nodes = region[order]
        dom = np.array([len(tables.node(sk, x).strategies) for x in nodes[0].tolist()], dtype=np.int64)
        in0 = both[(cu[both] == order[0]) & (cv[both] == order[0])]
        link = cross[(cu_x == order[0]) & (cv_x == order[1])]
        tail_pos = np.array(sorted(set(pu[tail].tolist())), dtype=np.int64)
        # of the alignments crossed by the fewest states, the one grown into the most copies
        options = []
        adj = adjacency(sk) if adj is None else adj
        explicit = (family < 0) | (family == f)
        for cand in alignments(nodes, pu[in0], pv[in0], pu[link], pv[link], tail_pos, dom):
            free = explicit.copy()
            free[cand.ravel()] = False
            options.append((cand, grown_copies(cand, sk, free, adj)))
        nodes, made = _widest_chain(f, options, sk, dom)
        if isinstance(made, str):
            rejected[f] = made
            continue
        if made.num_states > max_states:
            rejected[f] = f"{made.num_states} boundary states (more than {max_states})"
            continue
        candidates[f] = made
    # the other end of an edge leaving a last copy or touching a first copy must be explicit
    changed = True
    while changed:
        changed = False
        walk = np.zeros(n, dtype=bool)
        last_out = np.zeros(n, dtype=bool)
        for ch in candidates.values():
            walk[ch.nodes[1:].ravel()] = True
            last_out[ch.nodes[-1, ch.out_pos]] = True
        for f, ch in list(candidates.items()):
            in_first = np.zeros(n, dtype=bool)
            in_first[ch.nodes[0]] = True
            keep = in_first[u] | in_first[v]
            keep[ch.link_edges] = False
            e_first = keep.nonzero()[0]
            other = np.where(in_first[u[e_first]], v[e_first], u[e_first])
            into_first = in_first[v[e_first]]
            bad_first = walk[other] & ~(into_first & last_out[other])
            bad_tail = walk[v[ch.tail_edges]]
            if bad_first.any() or bad_tail.any():
                rejected[f] = "joined to the inside of another chain"
                del candidates[f]
                changed = True
    chains = [candidates[f] for f in sorted(candidates)]
    info: dict[str, Any] = {"chains": [{"family": c.family, "copies": c.copies, "positions": c.positions, "states": c.num_states} for c in chains]}
    if rejected:
        info["unfolded_families"] = {str(f): why for f, why in sorted(rejected.items())}
    return chains, info
