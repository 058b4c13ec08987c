"""Small graph utilities on edge arrays (ops/blocks numbered 0..n-1): cycles and orders."""

from __future__ import annotations

import heapq

import numpy as np


def find_cycle(n: int, src: np.ndarray, dst: np.ndarray) -> list[int] | None:
    """One directed cycle as a list of node ids, or None (iterative DFS)."""
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist()):
        adj[a].append(b)
    color = [0] * n
    parent = [-1] * n
    for root in range(n):
        if color[root]:
            continue
        stack = [(root, 0)]
        color[root] = 1
        while stack:
            v, k = stack[-1]
            if k < len(adj[v]):
                stack[-1] = (v, k + 1)
                w = adj[v][k]
                if color[w] == 0:
                    color[w] = 1
                    parent[w] = v
                    stack.append((w, 0))
                elif color[w] == 1:
                    cyc = [v]
                    while cyc[-1] != w:
                        cyc.append(parent[cyc[-1]])
                    return cyc[::-1]
            else:
                color[v] = 2
                stack.pop()
    return None


def topological_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Kahn's order, smallest id first among ready nodes (deterministic); on a graph with a
    cycle the nodes on or after it are missing (check with `find_cycle`)."""
    indeg = np.bincount(dst, minlength=n).astype(np.int64)
    order_e = np.argsort(src, kind="stable")
    starts = np.searchsorted(src[order_e], np.arange(n + 1))
    heap = [int(v) for v in np.flatnonzero(indeg == 0)]
    heapq.heapify(heap)
    out: list[int] = []
    while heap:
        v = heapq.heappop(heap)
        out.append(v)
        for e in order_e[starts[v] : starts[v + 1]]:
            w = int(dst[e])
            indeg[w] -= 1
            if indeg[w] == 0:
                heapq.heappush(heap, w)
    return np.asarray(out, dtype=np.int64)
