"""Memory-driven path cuts: a lower bound that charges the transfers memory forces on a path.

Take a path P = (v_1, ..., v_k) of the graph. In any plan, cutting P where consecutive ops
sit on different devices splits it into maximal segments, each on one device; that device
then holds the whole colocation group of every op of the segment, so the groups' memory
must fit what the evaluator accepts of its capacity (`PlacementInstance.accepted_memory`,
not the bare capacity: review rev16 D1). Every cut between v_i and v_{i+1} delays v_{i+1}
by at least the smallest delay of an edge v_i -> v_{i+1} over device pairs, so

    makespan >= sum_i p_min(v_i) + min over partitions of P into segments whose groups'
                memory fits the largest device, of the delays at the cuts.

The minimum is a shortest path over cut positions (dynamic programming, O(k) with two
pointers, since a segment that fits stays fitting when shortened, and a sliding-window
minimum). Segments are checked one by one (two segments on one device are not added up),
which only lowers the bound. It holds under both communication models (a transfer is never
faster than its smallest delay) and both memory models (under the liveness model what is
held to the end, persistent memory and unconsumed outputs, is charged). The paths tried are the longest path at
fastest times and the longest paths through the heaviest colocation groups. Seconds, bytes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterator

import numpy as np

from distplan.formulations.deadline import past
from distplan.formulations.placement.relaxation import charged_memory, heads_tails
from distplan.formulations.registry import Bound, round_down
from distplan.models.placement_instance import PlacementInstance

SOURCE = "memory-driven cuts on a path (path length + cheapest feasible cuts)"


def best_neighbours(inst: PlacementInstance, p: np.ndarray, r: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per op, the predecessor a with the largest (r_a + p_a, -a) and the successor b with the
    largest (p_b + q_b, -b) (-1: none): the steps of `longest_path_through`, found for all
    ops at once (review rev16 D3: rebuilding the adjacency per path took 0.08 s a path on
    27,083 ops)."""
    n = inst.n_ops
    pred = np.full(n, -1, dtype=np.int64)
    succ = np.full(n, -1, dtype=np.int64)
    src, dst = np.asarray(inst.src, dtype=np.int64), np.asarray(inst.dst, dtype=np.int64)
    if src.size:
        o = np.lexsort((src, -(r[src] + p[src]), dst))
        first = np.ones(o.size, dtype=bool)
        first[1:] = dst[o][1:] != dst[o][:-1]
        pred[dst[o][first]] = src[o][first]
        o = np.lexsort((dst, -(p[dst] + q[dst]), src))
        first = np.ones(o.size, dtype=bool)
        first[1:] = src[o][1:] != src[o][:-1]
        succ[src[o][first]] = dst[o][first]
    return pred, succ


def longest_path_through(
    inst: PlacementInstance, p: np.ndarray, v: int, r: np.ndarray, q: np.ndarray, neighbours: tuple[np.ndarray, np.ndarray] | None = None
) -> list[int]:
    """The ops of a longest path (weights ``p``, seconds) through op ``v``, first op first
    (``neighbours``: `best_neighbours` of the same weights, when the caller keeps them)."""
    pred, succ = best_neighbours(inst, p, r, q) if neighbours is None else neighbours
    path = [v]
    u = v
    while pred[u] >= 0:
        u = int(pred[u])
        path.append(u)
    path.reverse()
    u = v
    while succ[u] >= 0:
        u = int(succ[u])
        path.append(u)
    return path


def cheapest_cuts(path: list[int], group: np.ndarray, gmem: np.ndarray, cap: float, cut_cost: np.ndarray) -> float:
    """Least total ``cut_cost[i]`` (cut between path[i] and path[i + 1]) over partitions of
    ``path`` into segments whose colocation groups' memory (``gmem`` per group) is at most
    ``cap`` (bytes: the evaluator's accepting limit, `PlacementInstance.accepted_memory`, for
    a bound); inf when some op alone does not fit."""
    k = len(path)
    if k == 0:
        return 0.0
    gs = group[path].tolist()
    count: dict[int, int] = {}
    held = 0.0
    left = 0
    best = [math.inf] * k  # best[b]: cheapest partition of path[0..b]
    window: deque[int] = deque()  # candidate cut positions a - 1 (increasing best + cost)
    for b in range(k):
        g = gs[b]
        count[g] = count.get(g, 0) + 1
        if count[g] == 1:
            held += float(gmem[g])
        while held > cap and left <= b:
            h = gs[left]
            count[h] -= 1
            if count[h] == 0:
                held -= float(gmem[h])
            left += 1
        if left > b:
            return math.inf
        if b > 0:  # a cut between b - 1 and b may start the last segment at b
            val = best[b - 1] + float(cut_cost[b - 1])
            while window and best[window[-1]] + float(cut_cost[window[-1]]) >= val:
                window.pop()
            window.append(b - 1)
        while window and window[0] + 1 < left:
            window.popleft()
        options = []
        if left == 0:
            options.append(0.0)
        if window:
            a = window[0]
            options.append(best[a] + float(cut_cost[a]))
        best[b] = min(options) if options else math.inf
    return best[k - 1]


def path_cut_bound(inst: PlacementInstance, paths: int = 8, deadline: float | None = None) -> Bound | None:
    """The best `cheapest_cuts` bound (seconds) over the longest path and the longest paths
    through the ``paths`` colocation groups with the most memory; None when it is no
    better than the path's length (memory never forces a cut) or for one device. Each
    path's bound holds alone: past ``deadline`` (a ``time.perf_counter()`` value) no
    further path is tried and the best so far is kept. None when called past ``deadline``;
    once started, the first path (the longest) is always tried: O(V + E) array work like
    the critical path's (0.1 s on 27,083 ops), which the grace `solve` gives the
    solver-free bounds after a run that used its whole limit covers (review rev16 D3)."""
    if inst.n_devices < 2 or inst.n_ops == 0 or past(deadline):
        return None
    p = inst.time.min(axis=1)
    r, q = heads_tails(inst, p)
    group = inst.colocation_groups()
    mem = charged_memory(inst)
    gmem = np.bincount(group, weights=mem)
    cap = float(inst.accepted_memory().max())  # what the evaluator accepts, not the bare capacity
    if gmem.sum() <= cap:
        return None
    best: tuple[float, float] | None = None
    for path, cost in candidate_paths(inst, p, r, q, group, gmem, paths, deadline, first_always=True):
        cuts = cheapest_cuts(path, group, gmem, cap, cost)
        length = float(p[path].sum())
        if math.isfinite(cuts) and (best is None or length + cuts > best[0]):
            best = (length + cuts, cuts)
    if best is None or best[1] <= 0:
        return None
    return Bound(round_down(best[0]), SOURCE, "safe")


def candidate_paths(
    inst: PlacementInstance,
    p: np.ndarray,
    r: np.ndarray,
    q: np.ndarray,
    group: np.ndarray,
    gmem: np.ndarray,
    paths: int,
    deadline: float | None = None,
    first_always: bool = False,
) -> Iterator[tuple[list[int], np.ndarray]]:
    """The longest path and the longest paths through the ``paths`` groups with the most
    memory, each with the cost of a cut after each of its ops (the largest smallest delay
    of the edges between two consecutive ops, seconds); none started past ``deadline``
    but, with ``first_always``, the first."""
    cmin = inst.min_delay()
    pair_cost: dict[tuple[int, int], float] = {}
    for a, b, c in zip(inst.src.tolist(), inst.dst.tolist(), cmin.tolist()):
        if c > pair_cost.get((a, b), -1.0):
            pair_cost[(a, b)] = c
    through = [int(np.argmax(r + p + q))]
    for g in np.argsort(-gmem, kind="stable")[:paths].tolist():
        members = np.flatnonzero(group == g)
        through.append(int(members[np.argmax(r[members] + p[members] + q[members])]))
    seen: set[tuple[int, ...]] = set()
    neighbours = best_neighbours(inst, p, r, q)
    for v in through:
        if past(deadline) and (seen or not first_always):
            return
        path = longest_path_through(inst, p, v, r, q, neighbours)
        if tuple(path) in seen:
            continue
        seen.add(tuple(path))
        yield path, np.array([pair_cost[(a, b)] for a, b in zip(path[:-1], path[1:])])
