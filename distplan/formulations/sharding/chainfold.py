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
unfolded (their nodes become explicit), so the result is exact in every case.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.formulations.folding import FoldMap
from distplan.formulations.sharding.alpa_ilp import INFINITE_SECONDS
from distplan.formulations.sharding.costgraph import CostGraph, CostTables, Skeleton

#: default cap on the number of boundary states of a chain (joint strategies of its out positions)
MAX_STATES = 4096


# -- chains --------------------------------------------------------------------------------


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

    @property
    def copies(self) -> int:
        return int(self.nodes.shape[0])

    @property
    def positions(self) -> int:
        return int(self.nodes.shape[1])

    @property
    def num_states(self) -> int:
        return int(np.prod(self.out_sizes)) if self.out_sizes.size else 1

    def digits(self, states: np.ndarray) -> np.ndarray:
        """(states, out positions) strategy index of every out position in each state."""
        stride = np.ones(self.out_sizes.size, dtype=np.int64)
        if self.out_sizes.size > 1:
            stride[:-1] = np.cumprod(self.out_sizes[::-1])[::-1][1:]
        return (np.asarray(states, dtype=np.int64)[:, None] // stride[None, :]) % self.out_sizes[None, :]


def find_chains(sk: Skeleton, fold: FoldMap, tables: CostTables, max_states: int = MAX_STATES) -> tuple[list[Chain], dict[str, Any]]:
    """The families of ``fold`` that are chains (see the module docstring), in chain order.

    Families that are not are reported in the returned info (their nodes stay explicit)."""
    u, v = sk.edge_u, sk.edge_v
    family, copy = fold.family_index, fold.copy_index
    n = sk.num_nodes
    position = np.full(n, -1, dtype=np.int64)
    for region in fold.regions:
        position[region] = np.arange(region.shape[1])[None, :]
    candidates: dict[int, Chain] = {}
    rejected: dict[int, str] = {}
    for f, region in enumerate(fold.regions):
        K = region.shape[0]
        touch = np.flatnonzero((family[u] == f) | (family[v] == f))
        both = touch[(family[u[touch]] == f) & (family[v[touch]] == f)]
        cross = both[copy[u[both]] != copy[v[both]]]
        pairs = np.unique(np.stack([copy[u[cross]], copy[v[cross]]], axis=1), axis=0) if cross.size else np.zeros((0, 2), dtype=np.int64)
        succ = np.full(K, -1, dtype=np.int64)
        pred = np.full(K, -1, dtype=np.int64)
        ok = pairs.shape[0] == K - 1
        if ok:
            succ[pairs[:, 0]] = pairs[:, 1]
            pred[pairs[:, 1]] = pairs[:, 0]
            ok = bool(np.all(np.bincount(pairs[:, 0], minlength=K) <= 1) and np.all(np.bincount(pairs[:, 1], minlength=K) <= 1))
        order: list[int] = []
        if ok:
            heads = np.flatnonzero(pred < 0)
            ok = heads.size == 1
            if ok:
                c = int(heads[0])
                while c >= 0 and len(order) <= K:
                    order.append(c)
                    c = int(succ[c])
                ok = len(order) == K
        if not ok:
            rejected[f] = "copies are not joined as one chain"
            continue
        rank = np.empty(K, dtype=np.int64)
        rank[np.array(order)] = np.arange(K)
        # the same links (positions, edge label) between every pair of consecutive copies
        key = np.stack([rank[copy[u[cross]]], position[u[cross]], position[v[cross]], sk.edge_label_id[cross]], axis=1)
        key = key[np.lexsort(key.T[::-1])]
        per = np.bincount(key[:, 0], minlength=K)
        first = key[key[:, 0] == 0][:, 1:]
        if not (np.all(per[: K - 1] == first.shape[0]) and np.array_equal(np.tile(first, (K - 1, 1)), key[:, 1:])):
            rejected[f] = "consecutive copies are joined differently"
            continue
        outside = touch[(family[u[touch]] != f) | (family[v[touch]] != f)]
        out_edges = outside[family[u[outside]] == f]
        in_edges = outside[family[v[outside]] == f]
        r_out = rank[copy[u[out_edges]]]
        r_in = rank[copy[v[in_edges]]]
        if np.any((r_out != 0) & (r_out != K - 1)) or np.any(r_in != 0):
            rejected[f] = "copies inside the chain have edges to other nodes"
            continue
        tail = out_edges[r_out == K - 1]
        out_pos = np.unique(np.concatenate([position[u[cross]], position[u[tail]]]))
        nodes = region[np.array(order)]
        sizes = np.array([len(tables.node(sk, int(nodes[0, j])).strategies) for j in out_pos.tolist()], dtype=np.int64)
        if math.prod(sizes.tolist()) > max_states:
            rejected[f] = f"{math.prod(sizes.tolist())} boundary states (more than {max_states})"
            continue
        in1 = both[(copy[u[both]] == order[1]) & (copy[v[both]] == order[1])]
        link = cross[(copy[u[cross]] == order[0]) & (copy[v[cross]] == order[1])]
        candidates[f] = Chain(f, nodes, out_pos, sizes, in1, link, tail)
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
            first = ch.nodes[0]
            e_first = np.flatnonzero(np.isin(u, first) | np.isin(v, first))
            e_first = e_first[~np.isin(e_first, ch.link_edges)]
            other = np.where(np.isin(u[e_first], first), v[e_first], u[e_first])
            into_first = np.isin(v[e_first], first)
            bad_first = walk[other] & ~(into_first & last_out[other])
            bad_tail = walk[v[ch.tail_edges]]
            if np.any(bad_first) or np.any(bad_tail):
                rejected[f] = "joined to the inside of another chain"
                del candidates[f]
                changed = True
    chains = [candidates[f] for f in sorted(candidates)]
    info = {"chains": [{"family": c.family, "copies": c.copies, "positions": c.positions, "states": c.num_states} for c in chains]}
    if rejected:
        info["unfolded_families"] = {str(f): why for f, why in sorted(rejected.items())}
    return chains, info


# -- Pareto fronts of one copy by bi-criteria variable elimination ----------------------------


@dataclass
class _Table:
    """Rows of partial assignments: live variables, assignment (-1: unset), seconds, bytes."""

    live: list[int]
    asg: np.ndarray
    cost: np.ndarray
    mem: np.ndarray


def _encode(cols: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    key = np.zeros(cols.shape[0], dtype=np.int64)
    for j in range(cols.shape[1]):
        key = key * int(sizes[j]) + cols[:, j]
    return key


def _join(a: _Table, b: _Table, dom: np.ndarray) -> _Table:
    common = [x for x in a.live if x in b.live]
    if common:
        ka = _encode(a.asg[:, common], dom[common])
        kb = _encode(b.asg[:, common], dom[common])
    else:
        ka = np.zeros(a.cost.size, dtype=np.int64)
        kb = np.zeros(b.cost.size, dtype=np.int64)
    ob = np.argsort(kb, kind="stable")
    kbs = kb[ob]
    lo = np.searchsorted(kbs, ka, "left")
    cnt = np.searchsorted(kbs, ka, "right") - lo
    ra = np.repeat(np.arange(ka.size), cnt)
    start = np.cumsum(cnt) - cnt
    rb = ob[lo[ra] + np.arange(ra.size) - start[ra]]
    live = a.live + [x for x in b.live if x not in a.live]
    return _Table(live, np.maximum(a.asg[ra], b.asg[rb]), a.cost[ra] + b.cost[rb], a.mem[ra] + b.mem[rb])


def _pareto(t: _Table, group: list[int], dom: np.ndarray) -> _Table:
    """Keep, per assignment of ``group``, the rows not dominated in (bytes, seconds)."""
    if t.cost.size == 0:
        return _Table(group, t.asg, t.cost, t.mem)
    key = _encode(t.asg[:, group], dom[group]) if group else np.zeros(t.cost.size, dtype=np.int64)
    order = np.lexsort((t.cost, t.mem, key))
    g = np.unique(key, return_inverse=True)[1].reshape(-1)[order]
    r = np.unique(t.cost, return_inverse=True)[1].reshape(-1)[order]
    R = int(r.max()) + 1
    score = g * (R + 1) + (R - r)  # larger = cheaper, groups in increasing blocks
    best = np.maximum.accumulate(score)
    keep = np.ones(order.size, dtype=bool)
    keep[1:] = score[1:] > best[:-1]
    rows = order[keep]
    return _Table(group, t.asg[rows], t.cost[rows], t.mem[rows])


def _finite(cost: np.ndarray) -> np.ndarray:
    return np.isfinite(cost) & (cost < INFINITE_SECONDS)


def _scope_size(x: int, pool: list[_Table], dom: np.ndarray) -> float:
    """Rows of the table that eliminating ``x`` would build (product of its scope's domains)."""
    scope = set().union(*[t.live for t in pool if x in t.live])
    return float(np.prod([float(dom[y]) for y in scope]))


def _eliminate(pool: list[_Table], kept: list[int], dom: np.ndarray) -> _Table:
    """Eliminate every variable of the pool not in ``kept`` (smallest resulting table
    first), keeping per assignment of the remaining variables the Pareto rows; then join
    what is left and keep the Pareto rows per assignment of ``kept``."""
    free = sorted(set().union(*[t.live for t in pool]) - set(kept))
    while free:
        x = min(free, key=lambda y, tabs=pool: _scope_size(y, tabs, dom))
        free.remove(x)
        mine = sorted([t for t in pool if x in t.live], key=lambda t: t.cost.size)
        pool = [t for t in pool if x not in t.live]
        joined = mine[0]
        for t in mine[1:]:
            joined = _join(joined, t, dom)
        pool.append(_pareto(joined, [y for y in joined.live if y != x], dom))
    pool.sort(key=lambda t: t.cost.size)
    joined = pool[0]
    for t in pool[1:]:
        joined = _join(joined, t, dom)
    return _pareto(joined, kept, dom)


def _separator(n: int, P: int, pairs: list[tuple[int, int]], out: set[int], dom: np.ndarray, states: int) -> tuple[int, set[int]] | None:
    """A position j whose removal cuts P (and the positions it reaches) from the out
    positions, with the fewest arcs (states x dom[j] on both sides): (j, P's side) or None."""
    best: tuple[float, int, set[int]] | None = None
    for j in range(n):
        if j in out:
            continue
        seen = {P}
        todo = [P]
        while todo:
            x = todo.pop()
            for a, b in pairs:
                for y in ((b,) if a == x else (a,) if b == x else ()):
                    if y != j and y not in seen:
                        seen.add(y)
                        todo.append(y)
        if seen & out:
            continue
        score = 2.0 * states * float(dom[j])
        if score < states * states and (best is None or score < best[0]):
            best = (score, j, seen - {P})
    return None if best is None else (best[1], best[2])


def segment_fronts(chain: Chain, sk: Skeleton, tables: CostTables) -> dict[str, np.ndarray]:
    """Walk arcs of a chain: the Pareto-optimal copies in (seconds per iteration, bytes per
    device) per (state of the previous copy, state of this copy), exactly.

    Variables: the n positions of a copy and P (the previous copy's boundary state). Factors:
    node costs and memory, edges inside the copy, and the edges from the previous copy
    (over P and their target). Positions are eliminated one by one, keeping per assignment
    of the remaining variables the Pareto rows; rows carry the assignment of every
    eliminated position, so each arc comes with its strategies.

    When one position j separates P from the out positions (the attention output
    projection of a transformer layer), a copy is two arcs in sequence: P -> j (the
    positions on P's side, and j) and j -> state (the rest). A copy's cost and memory are
    the sums of its halves', and a copy made of Pareto-optimal halves dominates any copy
    with the same P, j and state, so the two-stage walk is exact with far fewer arcs.
    Combined state ids: the boundary states first, then the values of j. Returned arrays:
    ``prev``, ``cur`` (state ids), ``first`` (arc leaves a boundary state), ``cost``
    (seconds), ``memory`` (bytes), ``strategy`` (per position, -1 where the arc's half
    does not decide it)."""
    n = chain.positions
    P = n
    rep = chain.nodes[1]
    nodes = [tables.node(sk, int(i)) for i in rep.tolist()]
    S = chain.num_states
    dom = np.array([len(nc.strategies) for nc in nodes] + [S], dtype=np.int64)
    pos_of = {int(node): j for j, node in enumerate(rep.tolist())}
    pos_prev = {int(node): j for j, node in enumerate(chain.nodes[0].tolist())}
    out_index = {int(p): k for k, p in enumerate(chain.out_pos.tolist())}
    V = n + 1

    def table(live: list[int], cols: list[np.ndarray], cost: np.ndarray, mem: np.ndarray) -> _Table:
        ok = _finite(cost)
        asg = np.full((int(ok.sum()), V), -1, dtype=np.int64)
        for x, c in zip(live, cols):
            asg[:, x] = c[ok]
        return _Table(list(live), asg, cost[ok], mem[ok])

    factors: list[_Table] = []
    for j, nc in enumerate(nodes):
        factors.append(table([j], [np.arange(dom[j])], np.asarray(nc.cost, float), np.asarray(nc.memory, float)))
    states = np.arange(S)
    factors.append(table([P], [states], np.zeros(S), np.zeros(S)))
    pairs: list[tuple[int, int]] = []
    for e in chain.internal_edges.tolist():
        a, b = pos_of[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        M = tables.edge(sk, e)
        ia, ib = np.meshgrid(np.arange(dom[a]), np.arange(dom[b]), indexing="ij")
        factors.append(table([a, b], [ia.ravel(), ib.ravel()], M.ravel().astype(float), np.zeros(M.size)))
        pairs.append((a, b))
    digits = chain.digits(states)
    for e in chain.link_edges.tolist():
        a, b = pos_prev[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        M = tables.edge(sk, e)
        ip, ib = np.meshgrid(states, np.arange(dom[b]), indexing="ij")
        factors.append(table([P, b], [ip.ravel(), ib.ravel()], M[digits[:, out_index[a]]].ravel().astype(float), np.zeros(ip.size)))
        pairs.append((P, b))
    out = [int(p) for p in chain.out_pos.tolist()]
    sep = _separator(n, P, pairs, set(out), dom, S)

    def encode_out(t: _Table) -> np.ndarray:
        return _encode(t.asg[:, chain.out_pos], chain.out_sizes) if out else np.zeros(t.cost.size, dtype=np.int64)

    if sep is None:
        front = _eliminate(factors, [P] + out, dom)
        prev, cur, first = front.asg[:, P], encode_out(front), np.ones(front.cost.size, dtype=bool)
        cost, mem, strat = front.cost, front.mem, front.asg[:, :n]
        chain.num_walk_states = S
    else:
        j, side = sep
        one = [t for t in factors if set(t.live) <= side | {P, j}]
        two = [t for t in factors if t not in one]
        h1 = _eliminate(one, [P, j], dom)
        h2 = _eliminate(two + [table([j], [np.arange(dom[j])], np.zeros(dom[j]), np.zeros(dom[j]))], [j] + out, dom)
        prev = np.concatenate([h1.asg[:, P], S + h2.asg[:, j]])
        cur = np.concatenate([S + h1.asg[:, j], encode_out(h2)])
        first = np.concatenate([np.ones(h1.cost.size, dtype=bool), np.zeros(h2.cost.size, dtype=bool)])
        cost, mem = np.concatenate([h1.cost, h2.cost]), np.concatenate([h1.mem, h2.mem])
        s2 = h2.asg[:, :n].copy()
        s2[:, j] = -1
        strat = np.concatenate([h1.asg[:, :n], s2])
        chain.num_walk_states = S + int(dom[j])
    order = np.lexsort((mem, prev, cur))
    return {"prev": prev[order], "cur": cur[order], "first": first[order], "cost": cost[order], "memory": mem[order], "strategy": strat[order]}


# -- explicit cost graph -------------------------------------------------------------------


def explicit_graph(sk: Skeleton, chains: list[Chain], tables: CostTables) -> tuple[CostGraph, np.ndarray, list[np.ndarray]]:
    """Alpa's cost graph over the explicit nodes (everything outside the walk copies), plus
    one cost-free *virtual* node per out position of every chain's last copy, standing for
    that node on the edges leaving the chain. Returns the graph, the skeleton node of each
    explicit node (-1 for virtual ones) and, per chain, the virtual node of each out position."""
    inst = sk.instance
    n = sk.num_nodes
    walk = np.zeros(n, dtype=bool)
    for ch in chains:
        walk[ch.nodes[1:].ravel()] = True
    explicit = np.flatnonzero(~walk)
    index = np.full(n, -1, dtype=np.int64)
    index[explicit] = np.arange(explicit.size)
    origin = list(explicit.tolist())
    virtual: list[np.ndarray] = []
    src_index = index.copy()
    for ch in chains:
        ids = np.arange(len(origin), len(origin) + ch.out_pos.size)
        virtual.append(ids)
        src_index[ch.nodes[-1, ch.out_pos]] = ids
        origin += [-1] * ch.out_pos.size
    skip = walk[sk.edge_u] | walk[sk.edge_v]
    for ch in chains:
        skip[ch.tail_edges] = False
    edges = np.flatnonzero(~skip)
    a = src_index[sk.edge_u[edges]]
    b = index[sk.edge_v[edges]]
    if np.any(a < 0) or np.any(b < 0):
        raise AssertionError("chain folding: an edge touches the inside of a chain")
    node_costs = [tables.node(sk, int(i)) for i in explicit.tolist()]
    node_ops = [sk.node_ops[int(i)] for i in explicit.tolist()]
    strategies = [nc.strategies for nc in node_costs]
    cost = [nc.cost for nc in node_costs]
    memory = [nc.memory for nc in node_costs]
    for ch in chains:
        for j in ch.out_pos.tolist():
            node = int(ch.nodes[-1, j])
            nc = tables.node(sk, node)
            node_ops.append(sk.node_ops[node])
            strategies.append(nc.strategies)
            cost.append(np.zeros(len(nc.strategies)))
            memory.append(np.zeros(len(nc.strategies)))
    graph = CostGraph(
        name=inst.name,
        instance=inst,
        node_ops=node_ops,
        node_strategies=strategies,
        node_cost=cost,
        node_memory=memory,
        edge_u=a,
        edge_v=b,
        edge_cost=[tables.edge(sk, e) for e in edges.tolist()],
        multiplicity=np.ones(len(node_ops), dtype=np.int64),
        memory_budget=inst.memory_budget,
    )
    return graph, np.array(origin, dtype=np.int64), virtual


# -- the walk ------------------------------------------------------------------------------


def euler_walk(start: int, prev: np.ndarray, cur: np.ndarray, counts: np.ndarray) -> list[int] | None:
    """Arc indices of a walk from ``start`` using arc a exactly ``counts[a]`` times
    (Hierholzer), or None when the arcs are not one walk from ``start``."""
    total = int(counts.sum())
    if total == 0:
        return []
    out: dict[int, list[int]] = {}
    for a in np.flatnonzero(counts > 0).tolist():
        out.setdefault(int(prev[a]), []).extend([a] * int(counts[a]))
    stack: list[tuple[int, int]] = [(start, -1)]
    path: list[int] = []
    while stack:
        node, arc = stack[-1]
        if out.get(node):
            a = out[node].pop()
            stack.append((int(cur[a]), a))
        else:
            stack.pop()
            if arc >= 0:
                path.append(arc)
    path.reverse()
    return path if len(path) == total else None


def components_apart(start: int, prev: np.ndarray, cur: np.ndarray, counts: np.ndarray) -> list[np.ndarray]:
    """State sets of the weakly connected components of the used arcs not holding ``start``."""
    used = np.flatnonzero(counts > 0)
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        parent.setdefault(x, x)
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    find(start)
    for a in used.tolist():
        ra, rb = find(int(prev[a])), find(int(cur[a]))
        if ra != rb:
            parent[ra] = rb
    root = find(start)
    groups: dict[int, list[int]] = {}
    for x in list(parent):
        r = find(x)
        if r != root:
            groups.setdefault(r, []).append(x)
    return [np.array(sorted(g), dtype=np.int64) for g in groups.values()]


# -- the folded program ----------------------------------------------------------------------


def _least_copy(ch: Chain) -> float:
    """Least memory of one copy (bytes per device): the least of each stage, summed."""
    a = ch.arcs
    return sum(float(a["memory"][stage].min()) for stage in (a["first"], ~a["first"]) if stage.any())


def build_chain_model(graph: CostGraph, chains: list[Chain], origin: np.ndarray, virtual: list[np.ndarray], *, relax: bool, cuts: list[tuple[int, np.ndarray]], name: str, memory_row: bool = True) -> tuple[Any, dict[str, Any]]:
    """Alpa's ILP over the explicit nodes plus, per chain, the walk rows (module docstring).

    Objective in microseconds, memory row in GiB (as `alpa_ilp`)."""
    from distplan.errors import InfeasibleError
    from distplan.formulations.sharding.alpa_ilp import (
        MEMORY_SCALE,
        OBJECTIVE_SCALE,
        cost_graph_block,
        edge_product_block,
        node_choice_block,
    )
    from distplan.modeling.model import Model, linear_sum
    from distplan.models.sharding import GB, TIGHTEST_POINT

    model = Model(name)
    data: dict[str, Any] = {"params": {"relax": relax}, "graph": graph}
    cost_graph_block(model, None, data)
    node_choice_block(model, None, data)
    edge_product_block(model, None, data)
    s: Any = data["s"]
    free, s_offset = data["free"], data["s_offset"]
    s_col = s.index.reshape(-1)
    # memory: the explicit nodes' smallest memory and each chain's smallest copy move to the right-hand side
    node_min = np.array([float(np.min(m[_finite(c)])) if np.any(_finite(c)) else float(np.min(m)) for m, c in zip(graph.node_memory, graph.node_cost)])
    least = float(node_min.sum()) + sum((ch.copies - 1) * _least_copy(ch) for ch in chains)
    budget = graph.memory_budget
    if memory_row and least > budget * (1 + 1e-12):
        inst = graph.instance
        mesh = "x".join(str(x) for x in inst.mesh.shape)
        raise InfeasibleError(
            f"{graph.name}: memory: device 0 of the {inst.mesh.num_devices}-device {mesh} mesh of {inst.mesh.device} "
            f"(every device holds an equal shard) needs at least {least / GB:.3f} GB at {TIGHTEST_POINT}, "
            f"even with the most memory-saving strategy of every op; it has {budget / GB:.3f} GB: {(least - budget) / GB:.3f} GB missing",
            details={"device": 0, "point": "end of forward", "needed_bytes": least, "budget_bytes": budget, "missing_bytes": least - budget},
        )
    flat_free = free[data["flat_node"]]
    mem_cols = [s_col]
    mem_coeff = [(data["flat_memory"][flat_free] - node_min[data["s_node"]])]
    rhs = budget - float(node_min.sum())
    # objective: every one-hot group (a node's s, a stage's arcs) is shifted by its least
    # cost into the constant, which keeps the solver's bound margin (eps x |c|_1) small
    s_cost, s_node = data["s_cost"], data["s_node"]
    least_cost = np.full(graph.num_nodes, np.inf)
    if s_cost.size:
        np.minimum.at(least_cost, s_node, s_cost)
    least_cost[~np.isfinite(least_cost)] = 0.0
    constant = float(data["constant"]) + float(least_cost[free].sum())
    obj_cols = [s_col, data["e"].index.reshape(-1)]
    obj_coeff = [s_cost - least_cost[s_node], data["e_cost"]]
    walk: list[dict[str, Any]] = []
    for c, ch in enumerate(chains):
        arcs = ch.arcs
        A, S, W, K1 = arcs["cost"].size, ch.num_states, ch.num_walk_states, ch.copies - 1
        x = model.add_vars(f"x{c}", A, lb=0, ub=K1, vtype="continuous" if relax else "integer")
        w = model.add_vars(f"w{c}", S, lb=0, ub=1)
        y = model.add_vars(f"y{c}", S, lb=0, ub=1)
        xc, wc, yc = x.index.reshape(-1), w.index.reshape(-1), y.index.reshape(-1)
        N = model.num_vars
        model.add_constraints(f"start-one{c}", linear_sum(wc, np.ones(S), np.zeros(S, dtype=np.int64), 1, N) == 1)
        digits = ch.digits(np.arange(S))
        for t, pos in enumerate(ch.out_pos.tolist()):
            for tag, states_var, node in (("start", wc, int(np.flatnonzero(origin == ch.nodes[0, pos])[0])), ("end", yc, int(virtual[c][t]))):
                if not free[node]:
                    continue
                size = int(ch.out_sizes[t])
                own = s_col[s_offset[node] + np.arange(size)]
                cols = np.concatenate([states_var, own])
                coeffs = np.concatenate([np.ones(S), -np.ones(size)])
                rows = np.concatenate([digits[:, t], np.arange(size)])
                model.add_constraints(f"{tag}-state{c}.{t}", linear_sum(cols, coeffs, rows, size, N) == 0)
        # w(o) + in(o) - out(o) - y(o) = 0
        cols = np.concatenate([wc, xc, xc, yc])
        coeffs = np.concatenate([np.ones(S), np.ones(A), -np.ones(A), -np.ones(S)])
        rows = np.concatenate([np.arange(S), arcs["cur"], arcs["prev"], np.arange(S)])
        model.add_constraints(f"flow{c}", linear_sum(cols, coeffs, rows, W, N) == 0)
        first = np.flatnonzero(arcs["first"])
        model.add_constraints(f"copies{c}", linear_sum(xc[first], np.ones(first.size), np.zeros(first.size, dtype=np.int64), 1, N) == K1)
        # every stage is taken K - 1 times: its least memory moves to the right-hand side
        shift = np.zeros(A)
        for stage in (arcs["first"], ~arcs["first"]):
            if stage.any():
                shift[stage] = float(arcs["memory"][stage].min())
                rhs -= K1 * float(arcs["memory"][stage].min())
        mem_cols.append(xc)
        mem_coeff.append(arcs["memory"] - shift)
        cost_shift = np.zeros(A)
        for stage in (arcs["first"], ~arcs["first"]):
            if stage.any():
                cost_shift[stage] = float(arcs["cost"][stage].min())
                constant += K1 * float(arcs["cost"][stage].min())
        obj_cols.append(xc)
        obj_coeff.append(arcs["cost"] - cost_shift)
        walk.append({"x": x, "w": w, "y": y})
    for k, (c, states) in enumerate(cuts):
        ch, arcs = chains[c], chains[c].arcs
        inside_prev, inside_cur = np.isin(arcs["prev"], states), np.isin(arcs["cur"], states)
        entering = np.flatnonzero(~inside_prev & inside_cur)
        inner = np.flatnonzero(inside_prev & inside_cur)
        xc, wc = walk[c]["x"].index.reshape(-1), walk[c]["w"].index.reshape(-1)
        stages = 1 + int(ch.num_walk_states > ch.num_states)
        starts = states[states < ch.num_states]
        cols = np.concatenate([wc[starts], xc[entering], xc[inner]])
        coeffs = np.concatenate([np.ones(starts.size), np.ones(entering.size), -np.ones(inner.size) / (stages * (ch.copies - 1))])
        model.add_constraints(f"connect{k}", linear_sum(cols, coeffs, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars) >= 0)
    cols = np.concatenate(mem_cols)
    if memory_row:
        model.add_constraints("memory", linear_sum(cols, np.concatenate(mem_coeff) * MEMORY_SCALE, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars) <= rhs * MEMORY_SCALE)
    cols = np.concatenate(obj_cols)
    expr = linear_sum(cols, np.concatenate(obj_coeff) * OBJECTIVE_SCALE, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars)
    model.minimize(expr.sum() + constant * OBJECTIVE_SCALE)
    data["walk"] = walk
    data["least_memory_bytes"] = least
    return model, data


def _counts(values: np.ndarray) -> np.ndarray | None:
    """Integer counts of arc values, or None when they are not integral."""
    r = np.round(values)
    return r.astype(np.int64) if np.all(np.abs(values - r) <= 1e-6) else None


def _integral_s(res: Any) -> bool:
    v = res.values_by_block.get("s")
    return v is None or bool(np.all(np.minimum(np.abs(v), np.abs(1 - v)) <= 1e-6))


@dataclass
class ChainSolution:
    """Strategy index per skeleton node, and how the program was solved."""

    choice: np.ndarray | None
    objective: float | None  # seconds (the program's value)
    bound: float | None  # seconds, proven (dual bound of a relaxation of Alpa's ILP)
    optimal: bool
    rounds: int
    cuts: int
    lp_integral: bool | None
    last: Any = None


def cheapest_arcs(chain: Chain) -> Chain:
    """The chain with only the cheapest arc per (from, to) pair (least memory among equals):
    enough for the problem without a memory row."""
    import dataclasses

    a = chain.arcs
    order = np.lexsort((a["memory"], a["cost"], a["prev"], a["cur"]))
    key = a["cur"][order] * (chain.num_walk_states + 1) + a["prev"][order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    keep = np.sort(order[first])
    return dataclasses.replace(chain, arcs={k: v[keep] for k, v in a.items()})


def plan_memory(sk: Skeleton, tables: CostTables, choice: np.ndarray) -> float:
    """Bytes per device of a strategy index per skeleton node (the sum of node memories)."""
    return float(sum(float(tables.node(sk, i).memory[k]) for i, k in enumerate(choice.tolist())))


def solve_chains(sk: Skeleton, chains: list[Chain], tables: CostTables, ctx: Any, *, lp_first: bool, max_rounds: int = 50, build_seconds: float = 0.0) -> ChainSolution:
    """Solve the folded program, adding connectivity cuts until every walk is one walk.

    First without the memory row, on the cheapest arc per state pair: that program is exact
    for the problem without memory (a plan's copies can be swapped for the cheapest copies
    with the same ends), a relaxation of the problem with memory, so its plan is optimal
    when it fits the budget. Otherwise the full program (every Pareto arc, memory row)."""
    free = solve_program(sk, [cheapest_arcs(ch) for ch in chains], tables, ctx, lp_first=lp_first, max_rounds=max_rounds, build_seconds=build_seconds, memory_row=False)
    if free.choice is not None and plan_memory(sk, tables, free.choice) <= sk.instance.memory_budget:
        return free
    full = solve_program(sk, chains, tables, ctx, lp_first=lp_first, max_rounds=max_rounds, memory_row=True)
    bounds = [b for b in (free.bound, full.bound) if b is not None]
    full.bound = max(bounds) if bounds else None
    full.rounds += free.rounds
    return full


def _walk_dp(ch: Chain, start: int, weight: np.ndarray) -> tuple[list[int], int] | None:
    """Cheapest walk of the chain's K - 1 copies from ``start`` under arc weights
    (dynamic programming over steps): its arcs and end state, or None."""
    a = ch.arcs
    W, S = ch.num_walk_states, ch.num_states
    steps = (1 + int(W > S)) * (ch.copies - 1)
    dist = np.full(W, np.inf)
    dist[start] = 0.0
    back: list[np.ndarray] = []
    for _ in range(steps):
        cand = dist[a["prev"]] + weight
        order = np.lexsort((cand, a["cur"]))
        first = np.ones(order.size, dtype=bool)
        first[1:] = a["cur"][order][1:] != a["cur"][order][:-1]
        best = order[first]
        arc_of = np.full(W, -1, dtype=np.int64)
        arc_of[a["cur"][best]] = best
        dist = np.full(W, np.inf)
        dist[a["cur"][best]] = cand[best]
        back.append(arc_of)
    if not np.isfinite(dist[:S]).any():
        return None
    end = int(np.argmin(dist[:S]))
    path: list[int] = []
    state = end
    for arc_of in reversed(back):
        arc = int(arc_of[state])
        path.append(arc)
        state = int(a["prev"][arc])
    path.reverse()
    return path, end


def incumbent(sk: Skeleton, graph: CostGraph, chains: list[Chain], origin: np.ndarray, virtual: list[np.ndarray], model: Any, data: dict[str, Any], explicit_choice: np.ndarray) -> np.ndarray | None:
    """A feasible point of the folded program, to start the MILP from (None if none is
    found): the explicit nodes as given (else at their least memory), the walk the
    cheapest under cost + lambda x memory (Lagrangian weight, bisected until it fits)."""
    if len(chains) != 1:
        return None
    ch = chains[0]
    a = ch.arcs
    budget = graph.memory_budget
    finite = [_finite(c) for c in graph.node_cost]
    least_mem = np.array([int(np.flatnonzero(f)[np.argmin(m[f])]) if f.any() else 0 for m, f in zip(graph.node_memory, finite)])
    for choice in (np.array(explicit_choice, dtype=np.int64), least_mem):
        explicit_mem = float(sum(float(m[k]) for m, k in zip(graph.node_memory, choice.tolist())))
        left = budget - explicit_mem
        start_nodes = np.array([int(np.flatnonzero(origin == ch.nodes[0, p])[0]) for p in ch.out_pos.tolist()], dtype=np.int64)
        start = int(_encode(choice[start_nodes][None, :], ch.out_sizes)[0]) if ch.out_pos.size else 0
        found: tuple[list[int], int] | None = None
        lo, hi = 0.0, None
        lam = 0.0
        for _ in range(40):
            got = _walk_dp(ch, start, a["cost"] + lam * a["memory"])
            if got is None:
                return None
            if float(a["memory"][got[0]].sum()) <= left:
                found, hi = got, lam
            else:
                lo = lam
            if hi is None:
                lam = max(1e-18, 8 * lam)
            elif hi - lo <= 1e-6 * hi:
                break
            else:
                lam = 0.5 * (lo + hi)
        if found is None:
            continue
        path, end = found
        choice = choice.copy()
        choice[virtual[0]] = ch.digits(np.array([end]))[0]
        values = np.zeros(model.num_vars)
        free, s_node, s_offset = data["free"], data["s_node"], data["s_offset"]
        s_local = np.arange(s_node.size) - s_offset[s_node]
        values[data["s"].index.reshape(-1)] = (s_local == choice[s_node]).astype(float)
        ent = data["edge_entries"]
        keep = (free[graph.edge_u] & free[graph.edge_v])[ent["edge"]]
        eu, ev = graph.edge_u[ent["edge"][keep]], graph.edge_v[ent["edge"][keep]]
        values[data["e"].index.reshape(-1)] = ((ent["p"][keep] == choice[eu]) & (ent["q"][keep] == choice[ev])).astype(float)
        walk = data["walk"][0]
        values[walk["x"].index.reshape(-1)] = np.bincount(np.array(path, dtype=np.int64), minlength=a["cost"].size)
        values[walk["w"].index.reshape(-1)[start]] = 1.0
        values[walk["y"].index.reshape(-1)[end]] = 1.0
        return values
    return None


def solve_program(sk: Skeleton, chains: list[Chain], tables: CostTables, ctx: Any, *, lp_first: bool, max_rounds: int = 50, build_seconds: float = 0.0, memory_row: bool = True) -> ChainSolution:
    """One folded program (with or without the memory row), cuts added until connected."""
    import time

    from distplan.formulations.sharding.alpa_ilp import DEFAULT_MIP_GAP, OBJECTIVE_SCALE, decode_choice
    from distplan.solvers.result import Termination

    if ctx.options.mip_gap is None:
        ctx.options = ctx.options.with_(mip_gap=DEFAULT_MIP_GAP)
    t0 = time.perf_counter()
    graph, origin, virtual = explicit_graph(sk, chains, tables)
    build_seconds += time.perf_counter() - t0
    cuts: list[tuple[int, np.ndarray]] = []
    bound: float | None = None
    rounds = 0
    lp_integral: bool | None = None
    lp_choice: np.ndarray | None = None
    last = None
    for relax in ([True] if lp_first else []) + [False]:
        while rounds < max_rounds:
            rounds += 1
            t0 = time.perf_counter()
            model, data = build_chain_model(graph, chains, origin, virtual, relax=relax, cuts=cuts, name="tap_lp" if relax else "tap", memory_row=memory_row)
            if model.num_vars == 0:  # every op has a single strategy: nothing to decide
                choice = np.zeros(sk.num_nodes, dtype=np.int64)
                value = float(data["constant"])
                return ChainSolution(choice, value, value, True, rounds, 0, None, None)
            start = None
            if not relax and memory_row and lp_choice is not None and ctx.backend.capabilities.warm_start:
                start = incumbent(sk, graph, chains, origin, virtual, model, data, lp_choice)
            res = ctx.solve_model(model, warm_start=start, build_seconds=time.perf_counter() - t0 + build_seconds)
            build_seconds = 0.0
            last = res
            proven = res.objective if (relax and res.termination is Termination.OPTIMAL) else res.bound
            if proven is not None and res.termination is not Termination.INFEASIBLE:
                value = proven / OBJECTIVE_SCALE
                bound = value if bound is None else max(bound, value)
            if not res.has_solution:
                if relax and res.termination is not Termination.INFEASIBLE:
                    break
                return ChainSolution(None, None, bound, False, rounds, len(cuts), lp_integral, res)
            counts = [_counts(res.values_by_block[f"x{c}"]) for c in range(len(chains))]
            integral = _integral_s(res) and all(k is not None for k in counts)
            if relax:
                lp_integral = integral
                lp_choice = decode_choice(res, data)
                if not integral or res.termination is not Termination.OPTIMAL:
                    break
            explicit_choice = decode_choice(res, data)
            choice = np.full(sk.num_nodes, -1, dtype=np.int64)
            keep = origin >= 0
            choice[origin[keep]] = explicit_choice[keep]
            new_cuts = 0
            for c, ch in enumerate(chains):
                arcs = ch.arcs
                start = int(_encode(choice[ch.nodes[0, ch.out_pos]][None, :], ch.out_sizes)[0]) if ch.out_pos.size else 0
                k = counts[c]
                assert k is not None
                path = euler_walk(start, arcs["prev"], arcs["cur"], k)
                if path is None:
                    for states in components_apart(start, arcs["prev"], arcs["cur"], k):
                        cuts.append((c, states))
                        new_cuts += 1
                    continue
                stages = 1 + int(ch.num_walk_states > ch.num_states)
                steps = arcs["strategy"][np.array(path, dtype=np.int64)].reshape(ch.copies - 1, stages, ch.positions)
                choice[ch.nodes[1:]] = steps.max(axis=1)
                end = explicit_choice[virtual[c]]
                if not np.array_equal(end, choice[ch.nodes[-1, ch.out_pos]]):
                    raise AssertionError("chain folding: the end state disagrees with the last copy")
            if new_cuts:
                continue
            optimal = res.termination is Termination.OPTIMAL
            objective = res.objective / OBJECTIVE_SCALE if res.objective is not None else None
            return ChainSolution(choice, objective, bound, optimal, rounds, len(cuts), lp_integral, res)
    return ChainSolution(None, None, bound, False, rounds, len(cuts), lp_integral, last)
