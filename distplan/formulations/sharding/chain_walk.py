"""The walk over boundary states (see `distplan.formulations.sharding.chainfold`): Euler-walk
decoding of arc counts, the components a flow leaves apart from the start (for connectivity
cuts), and the warm start (a cheapest walk under cost + lambda x memory, bytes within budget)."""

from __future__ import annotations

from typing import Any

import numpy as np

from distplan.formulations.sharding.chain_fronts import encode_states, finite_mask
from distplan.formulations.sharding.chainfold import Chain
from distplan.formulations.sharding.costgraph import CostGraph, Skeleton
from distplan.models.graphs import component_roots

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
    states = np.unique(np.concatenate([[start], prev[used], cur[used]])).astype(np.int64)
    index = np.searchsorted(states, np.concatenate([prev[used], cur[used]]))
    half = used.size
    labels = component_roots(states.size, index[:half], index[half:])
    home = labels[np.searchsorted(states, start)]
    return [states[labels == g] for g in np.unique(labels) if g != home]


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


def incumbent(sk: Skeleton, graph: CostGraph, chains: list[Chain], origin: np.ndarray, virtual: list[np.ndarray], model: Any, index: Any, explicit_choice: np.ndarray) -> np.ndarray | None:
    """A feasible point of the folded program, to start the MILP from (None if none is
    found): the explicit nodes as given (else at their least memory), the walk the
    cheapest under cost + lambda x memory (Lagrangian weight, bisected until it fits)."""
    if len(chains) != 1:
        return None
    ch = chains[0]
    a = ch.arcs
    budget = graph.memory_budget
    finite = [finite_mask(c) for c in graph.node_cost]
    least_mem = np.array([int(np.flatnonzero(f)[np.argmin(m[f])]) if f.any() else 0 for m, f in zip(graph.node_memory, finite)])
    for choice in (np.array(explicit_choice, dtype=np.int64), least_mem):
        explicit_mem = graph.memory_of(choice)
        left = budget - explicit_mem
        start_nodes = np.array([int(np.flatnonzero(origin == ch.nodes[0, p])[0]) for p in ch.out_pos.tolist()], dtype=np.int64)
        start = int(encode_states(choice[start_nodes][None, :], ch.out_sizes)[0]) if ch.out_pos.size else 0
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
        free, s_node, s_offset = index.free, index.s_node, index.s_offset
        s_local = np.arange(s_node.size) - s_offset[s_node]
        values[model["s"].index.reshape(-1)] = (s_local == choice[s_node]).astype(float)
        ent = index.entries
        keep = (free[graph.edge_u] & free[graph.edge_v])[ent["edge"]]
        eu, ev = graph.edge_u[ent["edge"][keep]], graph.edge_v[ent["edge"][keep]]
        values[model["e"].index.reshape(-1)] = ((ent["p"][keep] == choice[eu]) & (ent["q"][keep] == choice[ev])).astype(float)
        values[model["x0"].index.reshape(-1)] = np.bincount(np.array(path, dtype=np.int64), minlength=a["cost"].size)
        values[model["w0"].index.reshape(-1)[start]] = 1.0
        values[model["y0"].index.reshape(-1)[end]] = 1.0
        return values
    return None
