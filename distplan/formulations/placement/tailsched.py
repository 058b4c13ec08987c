"""Re-timing a fixed device assignment: each device runs the available op with the longest
tail first (Schrage's rule).

The list schedulers (`listsched`) place ops in earliest-finish order, so short ops that do
not lead anywhere (resnet's weight updates, which wait only for their own gradient) take a
device as soon as they are ready and push the critical chain back. Here the assignment is
fixed and only the order changes: whenever a device is free it starts, among the ops on it
whose inputs have arrived, the one with the longest tail (the longest path from its start
to the end of the graph, with this assignment's transfer delays on cut edges, seconds);
when none has arrived it waits for the next. This is Schrage's non-delay rule for
1|r_j|max(C_j + q_j) (Schrage, "Obtaining optimal solutions to resource constrained
network scheduling problems", 1971; used by Carlier, EJOR 11(1), 1982), applied on every
device at once.

The order it finds is then timed by the evaluator's own simulation
(`schedule_fixed_placement` with that order), which honours the instance's communication
model, so under Baechi's channel model the tails are lower estimates and the plan is still
exactly what the evaluator will measure.
"""

from __future__ import annotations

import heapq

import numpy as np

from distplan.errors import InputError
from distplan.formulations.placement.listsched import Schedule, evaluated_schedule
from distplan.formulations.placement.relaxation import heads_tails
from distplan.models.placement_evaluate import schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def tail_priority_order(inst: PlacementInstance, device: np.ndarray, level: np.ndarray | None = None) -> np.ndarray:
    """Start times (seconds, independent links) of Schrage's rule on every device for the
    assignment ``device`` (module docstring); they order each device's ops. ``level``: the
    graph's `relaxation.longest_path_levels`, when the caller keeps them."""
    n, m = inst.n_ops, inst.n_devices
    dev = np.asarray(device, dtype=np.int64)
    dur = inst.time[np.arange(n), dev]
    delay = inst.delay(np.arange(inst.n_edges), dev[inst.src], dev[inst.dst])
    succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, c in zip(inst.src.tolist(), inst.dst.tolist(), delay.tolist()):
        succ[a].append((b, c))
    durl = dur.tolist()
    tail = heads_tails(inst, dur, delay, level)[1].tolist()
    devl = dev.tolist()
    indeg = np.bincount(inst.dst, minlength=n).tolist()
    ready = [0.0] * n
    pending: list[list[tuple[float, int]]] = [[] for _ in range(m)]  # (arrival, op)
    avail: list[list[tuple[float, int]]] = [[] for _ in range(m)]  # (-tail, op)
    for v in range(n):
        if indeg[v] == 0:
            heapq.heappush(pending[devl[v]], (0.0, v))
    free = [0.0] * m
    start = [0.0] * n
    for _ in range(n):
        best_t, best_d = float("inf"), -1
        for d in range(m):
            if avail[d]:
                t = free[d]
            elif pending[d]:
                t = max(free[d], pending[d][0][0])
            else:
                continue
            if t < best_t:
                best_t, best_d = t, d
        d, t = best_d, best_t
        pend, av = pending[d], avail[d]
        while pend and pend[0][0] <= t:
            _, v = heapq.heappop(pend)
            heapq.heappush(av, (-tail[v], v))
        _, v = heapq.heappop(av)
        start[v] = t
        f = t + durl[v]
        free[d] = f
        for b, c in succ[v]:
            if f + c > ready[b]:
                ready[b] = f + c
            indeg[b] -= 1
            if indeg[b] == 0:
                heapq.heappush(pending[devl[b]], (ready[b], b))
    return np.asarray(start)


def tail_priority_schedule(inst: PlacementInstance, device: np.ndarray) -> Schedule | None:
    """The assignment ``device`` ordered by `tail_priority_order` and timed by the
    evaluator's simulation; None when the evaluator rejects it (memory)."""
    dev = np.asarray(device, dtype=np.int64)
    order = tail_priority_order(inst, dev)
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(inst.n_ops)
    key = np.empty(inst.n_ops)
    key[np.lexsort((pos, order))] = np.arange(inst.n_ops)  # ties (zero-time ops): graph order
    try:
        start = schedule_fixed_placement(inst, dev, order_key=key)
    except InputError:
        return None
    return evaluated_schedule(inst, make_plan(inst, dev, start))


def polished(inst: PlacementInstance, sched: Schedule) -> Schedule:
    """``sched`` or its assignment re-timed by `tail_priority_schedule`, whichever ends
    first."""
    other = tail_priority_schedule(inst, sched.device)
    return other if other is not None and other.makespan < sched.makespan else sched
