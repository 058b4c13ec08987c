"""Dense min-sum variable elimination for the memory-free problem of chain folding.

Without the memory row the folded problem of `distplan.formulations.sharding.chainfold`
is a plain min-sum problem: the cheapest copy per pair of boundary states (one arc per
pair suffices: a plan's copies can be swapped for the cheapest ones with the same ends)
and, for the explicit nodes before and after the walk, the cheapest assignment per start
state and per end state. Both are computed here by bucket elimination (Dechter, "Bucket
elimination: a unifying framework for reasoning", Artificial Intelligence 113, 1999) on
dense arrays: eliminating a variable adds the arrays of its factors over their joint scope
and takes the minimum along its axis, keeping the argmin to recover the assignment.
Variables go smallest scope first; a scope beyond ``max_rows`` entries gives up (None).
Costs in seconds; infinite costs (`INFINITE_SECONDS`, forbidden reshardings) are never chosen.
"""

from __future__ import annotations

import math

import numpy as np

from distplan.formulations.sharding.alpa_ilp import INFINITE_SECONDS
from distplan.formulations.sharding.chain_fronts import _Table, finite_mask
from distplan.formulations.sharding.chainfold import Chain
from distplan.formulations.sharding.costgraph import CostGraph, CostTables, Skeleton
from distplan.models.graphs import component_roots

Factor = tuple[tuple[int, ...], np.ndarray]


def _finite(x: np.ndarray) -> np.ndarray:
    """The costs (seconds, non-negative) with every forbidden one (infinite,
    `INFINITE_SECONDS`, or NaN) as inf; the argument itself, not a copy, when all are
    finite (the usual case: one comparison instead of a mask), so callers copy before
    they write."""
    x = np.asarray(x, float)
    if x.size and x.max() < INFINITE_SECONDS:  # (NaN compares false: the masked path)
        return x
    return np.where(finite_mask(x), x, np.inf)


def _finite_all(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """`_finite` of each array, with one comparison for them all in the usual case (every
    cost finite: the arrays themselves, as float arrays)."""
    arrays = [np.asarray(x, float) for x in arrays]
    if arrays:
        flat = np.concatenate([x.ravel() for x in arrays])
        if not flat.size or flat.max() < INFINITE_SECONDS:  # (NaN compares false)
            return arrays
    return [_finite(x) for x in arrays]


def pair_factor(u: int, v: int, M: np.ndarray) -> Factor:
    """A factor over two variables, axes in increasing variable order."""
    return ((u, v), M) if u < v else ((v, u), M.T)


def dense_sum(factors: list[Factor], scope: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
    """The sum of ``factors`` (each over a sub-scope of ``scope``, in its order) as one array
    over ``scope`` of ``shape``, broadcast along the variables a factor lacks; added in factor
    order (the same sums as from zeros, since 0 + x = x)."""
    total: np.ndarray | None = None
    for vars_, arr in factors:
        part = arr if vars_ == scope else arr.reshape([d if y in vars_ else 1 for y, d in zip(scope, shape)])
        total = part if total is None else total + part
    if total is None:
        return np.zeros(shape)
    return total if total.shape == shape else np.broadcast_to(total, shape)


def min_sum(dom: list[int], factors: list[Factor], keys: list[int], max_rows: float) -> tuple[np.ndarray, np.ndarray] | None:
    """Least total cost per assignment of ``keys`` (flattened, first key slowest) and the
    assignment of every variable achieving it (rows x variables, -1 for variables in no
    factor), or None when a scope exceeds ``max_rows`` entries."""
    table: dict[int, Factor] = dict(enumerate(factors))
    by_var: dict[int, set[int]] = {}
    for fid, (scope, _) in table.items():
        for y in scope:
            by_var.setdefault(y, set()).add(fid)
    free = sorted(set(by_var) - set(keys))
    # every variable's scope (its factors' variables), kept up to date: eliminating x
    # replaces its factors by one over the rest of its scope, so a variable y of that rest
    # gains the rest and loses x
    scopes: dict[int, set[int]] = {x: set() for x in by_var}
    for vars_, _ in factors:
        for y in vars_:
            scopes[y].update(vars_)
    # the entries of every free variable's scope (what the order goes by), kept up to date
    sizes = {x: math.prod([dom[z] for z in scopes[x]]) for x in free}
    trace: list[tuple[int, tuple[int, ...], np.ndarray]] = []

    def joined(ids: list[int], scope: tuple[int, ...], shape: tuple[int, ...]) -> np.ndarray:
        """The sum of the factors ``ids`` over ``scope`` (`dense_sum`), taken from the table."""
        return dense_sum([table.pop(f) for f in ids], scope, shape)

    next_id = len(factors)
    while free:
        x = min(free, key=sizes.__getitem__)
        free.remove(x)
        scope = tuple(sorted(scopes[x]))
        shape = tuple([dom[z] for z in scope])
        if math.prod(shape) > max_rows:
            return None
        ids = sorted(by_var.pop(x))
        for f in ids:
            for y in table[f][0]:
                if y != x:
                    by_var[y].discard(f)
        total = joined(ids, scope, shape)
        ax = scope.index(x)
        rest = scope[:ax] + scope[ax + 1 :]
        for y in rest:  # their scopes changed
            around = scopes[y]
            around.update(rest)
            around.discard(x)
            if y in sizes:
                sizes[y] = math.prod([dom[z] for z in around])
        trace.append((x, rest, total.argmin(axis=ax)))
        table[next_id] = (rest, np.minimum.reduce(total, axis=ax))
        for y in rest:
            by_var[y].add(next_id)
        next_id += 1
    order = sorted(keys)
    if math.prod(dom[k] for k in keys) > max_rows:
        return None
    total = joined(list(table), tuple(order), tuple([dom[k] for k in order]))
    dense = np.transpose(total, [order.index(k) for k in keys]).reshape(-1) if keys else total.reshape(1)
    digits = np.unravel_index(np.arange(dense.size), [dom[k] for k in keys]) if keys else ()
    assign: dict[int, np.ndarray] = {k: d.astype(np.int64) for k, d in zip(keys, digits)}
    for x, rest, arg in reversed(trace):
        got = arg[tuple(assign[y] for y in rest)]
        assign[x] = got if got.shape == (dense.size,) else np.broadcast_to(got, (dense.size,))
    asg = np.full((dense.size, len(dom)), -1, dtype=np.int64)
    for y, vals in assign.items():
        asg[:, y] = vals
    return dense, asg


def scalar_sides(graph: CostGraph, start_vars: list[int], end_vars: list[int], max_rows: float, lam: float = 0.0, measure: bool = False) -> tuple[_Table, _Table] | None:
    """The cheapest assignment of the explicit nodes per start state and per end state
    under cost + ``lam`` x memory (as tables keyed by ``start_vars`` / ``end_vars``; parts
    joined to neither end go with the start), or None when a part touches both ends or a
    scope is too large. Rows carry the weighted cost and memory 0, or with ``measure``
    each assignment's own cost and memory."""
    dom = graph.strategy_counts().tolist()
    n = len(dom)
    eu, ev = graph.edge_u, graph.edge_v
    comp = component_roots(n, eu, ev).tolist()
    end_comps = {comp[i] for i in end_vars}
    if end_comps & {comp[i] for i in start_vars}:
        return None
    at_end = np.array([c in end_comps for c in comp], dtype=bool)
    sides: list[list[Factor]] = [[], []]
    costs = _finite_all(graph.node_cost)
    # every node's cost + lam x memory (or + 0.0 as before: the same floats, -0.0 included),
    # entry by entry on the concatenation, then one slice per node
    offsets = np.cumsum([0] + [c.size for c in costs]).tolist()
    flat = np.concatenate(costs) if costs else np.zeros(0)
    flat = flat + (lam * np.concatenate([np.asarray(m, float) for m in graph.node_memory]) if lam and costs else 0.0)
    weights = [flat[a:b] for a, b in zip(offsets[:-1], offsets[1:])]
    side_of = at_end.tolist()
    for i in range(n):
        sides[side_of[i]].append(((i,), weights[i]))
    for u, v, M in zip(eu.tolist(), ev.tolist(), _finite_all(graph.edge_cost)):
        sides[side_of[u]].append(pair_factor(u, v, M))
    out: list[_Table] = []
    for side, (factors, keys) in enumerate(zip(sides, (start_vars, end_vars))):
        got = min_sum(dom, factors, keys, max_rows)
        if got is None:
            return None
        dense, asg = got
        ok = np.isfinite(dense)
        asg, cost, mem = asg[ok], dense[ok], np.zeros(int(ok.sum()))
        if measure:
            cost = np.zeros(mem.size)
            nodes = np.flatnonzero(at_end == bool(side))
            for i in nodes.tolist():
                cost += np.asarray(graph.node_cost[i], float)[asg[:, i]]
                mem += np.asarray(graph.node_memory[i], float)[asg[:, i]]
            for e in np.flatnonzero(at_end[eu] == bool(side)).tolist():
                cost += np.asarray(graph.edge_cost[e], float)[asg[:, int(eu[e])], asg[:, int(ev[e])]]
        out.append(_Table(list(keys), asg, cost, mem, 0.0))
    return out[0], out[1]


def cheapest_copy_arcs(chain: Chain, sk: Skeleton, tables: CostTables, max_rows: float) -> dict[str, np.ndarray] | None:
    """The cheapest copy per (previous boundary state, boundary state): the walk arcs of
    the problem without memory (one stage), in the format of `chain_fronts.segment_fronts`;
    None when a scope is too large."""
    n, S = chain.positions, chain.num_states
    rep = chain.nodes[1]
    nodes = [tables.node(sk, int(i)) for i in rep.tolist()]
    dom = [len(nc.strategies) for nc in nodes] + [S]
    P = n
    pos_of = {int(node): j for j, node in enumerate(rep.tolist())}
    pos_prev = {int(node): j for j, node in enumerate(chain.nodes[0].tolist())}
    out_index = {int(p): k for k, p in enumerate(chain.out_pos.tolist())}
    internal = chain.internal_edges.tolist()
    links = chain.link_edges.tolist()
    finite = _finite_all([nc.cost for nc in nodes] + [tables.edge(sk, e) for e in internal + links])
    factors: list[Factor] = [((j,), finite[j]) for j in range(n)]
    factors.append(((P,), np.zeros(S)))
    su, sv = sk.edge_u, sk.edge_v
    for e, M in zip(internal, finite[n:]):
        factors.append(pair_factor(pos_of[int(su[e])], pos_of[int(sv[e])], M))
    digits = chain.digits(np.arange(S))
    for e, M in zip(links, finite[n + len(internal) :]):
        a, b = pos_prev[int(su[e])], pos_of[int(sv[e])]
        factors.append(((b, P), M[digits[:, out_index[a]]].T))
    out = [int(p) for p in chain.out_pos.tolist()]
    got = min_sum(dom, factors, [P] + out, max_rows)
    if got is None:
        return None
    dense, asg = got
    ok = np.flatnonzero(np.isfinite(dense))
    strat = asg[ok, :n]
    memory = np.zeros(ok.size)
    for j, nc in enumerate(nodes):
        memory += np.asarray(nc.memory, float)[strat[:, j]]
    return {"prev": asg[ok, P], "cur": ok % max(1, chain.num_states), "first": np.ones(ok.size, dtype=bool), "cost": dense[ok], "memory": memory, "strategy": strat}
