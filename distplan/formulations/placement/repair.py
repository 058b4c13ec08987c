"""Memory repair: a plan that fits when no heuristic's plan does (phase one of a two-phase
local search).

The Baechi heuristics (Jeon et al., SoCC 2020) place ops in time order and stop when the
next op fits no device; the packing by memory (`heuristics.packed_assignment`) ignores
time. Under the liveness model neither sees that *when* an op runs decides what a device
holds: on instances where every device assignment fails under the memory-aware list
scheduler, some order of the same ops fits (g727 of review rev12: 64 of 64 assignments
fail with m-ETF's order, brute force over orders finds a plan).

The search is over a device per colocation group and a global order of the ops (a
topological order: each device runs its ops in that order, so no order deadlocks). Its
objective is lexicographic: first the bytes by which the devices' peaks exceed their
capacities (summed over devices), then the makespan, both computed by the independent
evaluator's own scheduler and memory count (`placement_evaluate.schedule_fixed_placement`,
`memory_peaks`) for that device assignment and order. Moves: one group to another device
(groups on over-full devices first), and one op moved within the window its inputs and
consumers leave it in the order. A move is kept when it does not make the objective worse
(sideways moves cross plateaus of equal excess); the search restarts from a random
topological order after ``patience`` moves without improvement, and stops at the
deadline or once a plan fits and ``polish`` further moves have not shortened it. It is
phase one of the classical two-phase method (minimize infeasibility, then the objective;
Glover & Laguna, *Tabu Search*, 1997, sec. 4.4 "strategic oscillation"). Times in
seconds, memory in bytes.
"""

from __future__ import annotations

import time

import numpy as np

from distplan.errors import InputError
from distplan.formulations.placement.listsched import Schedule, evaluated_schedule
from distplan.models.placement_evaluate import memory_peaks, schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan

#: moves without improvement before a restart from a random topological order
PATIENCE = 200
#: moves without a shorter makespan after the first plan that fits before the search stops
POLISH = 200
#: restarts in a row that do not lower the least excess seen before the search gives up
MAX_RESTARTS = 20


def _objective(inst: PlacementInstance, device: np.ndarray, rank: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(bytes over capacity summed over devices, makespan, start times, peak bytes per
    device) of ``device`` with each device running its ops in ``rank`` order."""
    try:
        start = schedule_fixed_placement(inst, device, order_key=rank.astype(float))
    except InputError:  # an order that contradicts the graph (never for a topological rank)
        return float("inf"), float("inf"), np.zeros(inst.n_ops), np.full(inst.n_devices, np.inf)
    peaks = memory_peaks(inst, device, start)
    excess = float(np.maximum(peaks - inst.accepted_memory(), 0.0).sum())  # what the evaluator refuses
    makespan = float((start + inst.time[np.arange(inst.n_ops), device]).max()) if inst.n_ops else 0.0
    return excess, makespan, start, peaks


def _random_topological_order(preds: list[list[int]], succs: list[list[int]], rng: np.random.Generator) -> np.ndarray:
    """A topological order drawn by picking a random ready op at every step."""
    n = len(preds)
    indegree = np.array([len(p) for p in preds])
    ready = [v for v in range(n) if indegree[v] == 0]
    order: list[int] = []
    while ready:
        v = ready.pop(int(rng.integers(len(ready))))
        order.append(v)
        for w in succs[v]:
            indegree[w] -= 1
            if indegree[w] == 0:
                ready.append(w)
    return np.asarray(order, dtype=np.int64)


def repaired_schedule(
    inst: PlacementInstance, deadline: float, start: np.ndarray | None = None, seed: int = 0, max_restarts: int = MAX_RESTARTS
) -> Schedule | None:
    """The best plan that fits found by the memory repair before ``deadline`` (a
    ``time.perf_counter()`` value), as the evaluator schedules it; None when none fits
    (also after ``max_restarts`` restarts in a row that did not lower the least excess
    seen: on an infeasible instance the search would otherwise run to the deadline).
    ``start``: a device assignment to begin with (default: every group on the device with
    the most memory)."""
    n, nd = inst.n_ops, inst.n_devices
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    groups = inst.colocation_groups()
    members = [np.flatnonzero(groups == g) for g in range(int(groups.max()) + 1)]
    preds: list[list[int]] = [[] for _ in range(n)]
    succs: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        preds[b].append(a)
        succs[a].append(b)
    if start is None:
        device = np.full(n, int(np.argmax(inst.device_memory)), dtype=np.int64)
    else:
        device = np.asarray(start, dtype=np.int64).copy()
    order = inst.topo_order().astype(np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    excess, makespan, times, peaks = _objective(inst, device, rank)
    best: Schedule | None = None
    best_key = (excess, makespan)
    stale = 0
    polish_left = POLISH
    least_excess, fruitless = excess, 0
    while time.perf_counter() < deadline:
        if excess == 0.0:
            if best is None or makespan < best.makespan:
                found = evaluated_schedule(inst, make_plan(inst, device, times))
                if found is not None and (best is None or found.makespan < best.makespan):
                    best, polish_left = found, POLISH
            polish_left -= 1
            if polish_left <= 0:
                break
        if stale >= PATIENCE:  # restart: a random order, the current device assignment kept
            fruitless = 0 if best_key[0] < least_excess else fruitless + 1
            least_excess = min(least_excess, best_key[0])
            if best is None and fruitless >= max_restarts:
                break
            order = _random_topological_order(preds, succs, rng)
            rank[order] = np.arange(n)
            excess, makespan, times, peaks = _objective(inst, device, rank)
            best_key, stale = (excess, makespan), 0
            continue
        trial_device, trial_rank = device, rank
        if nd > 1 and rng.random() < 0.5:
            if excess > 0.0:  # a group on a device over its capacity
                over = np.flatnonzero(peaks > inst.accepted_memory())
                pool = np.flatnonzero(np.isin(device, over)) if over.size else np.arange(n)
            else:
                pool = np.arange(n)
            g = int(groups[int(rng.choice(pool))])
            d = int(rng.integers(nd - 1))
            d += d >= int(device[members[g][0]])
            trial_device = device.copy()
            trial_device[members[g]] = d
        else:
            v = int(rng.integers(n))
            lo = max((int(rank[u]) for u in preds[v]), default=-1) + 1
            hi = min((int(rank[w]) for w in succs[v]), default=n) - 1
            if hi <= lo:
                stale += 1
                continue
            to = int(rng.integers(lo, hi + 1))
            now = int(rank[v])
            if to == now:
                stale += 1
                continue
            order = np.argsort(rank)
            order = np.insert(np.delete(order, now), to, v)
            trial_rank = np.empty(n, dtype=np.int64)
            trial_rank[order] = np.arange(n)
        t_excess, t_makespan, t_times, t_peaks = _objective(inst, trial_device, trial_rank)
        key = (t_excess, t_makespan)
        if key <= (excess, makespan):
            stale = 0 if key < best_key else stale + 1
            best_key = min(best_key, key)
            device, rank, excess, makespan, times, peaks = trial_device, trial_rank, t_excess, t_makespan, t_times, t_peaks
        else:
            stale += 1
    return best
