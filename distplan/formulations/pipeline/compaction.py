"""Priority list scheduling of a whole pipeline schedule (the parallel schedule-generation
scheme of resource-constrained project scheduling; Kolisch, EJOR 1996).

Given a priority for every (block, micro-batch) operation, e.g. its start time in the
unrolled repetend, time advances from event to event; whenever a device is free it
starts the ready operation (dependencies done, with their delays) of best priority whose
devices are all free and whose memory fits under the limit on each of them. An operation
on several devices that is waiting for one of them reserves the others: they only run
lower-priority operations that end before it can start (backfilling). Each block runs its
micro-batches in order. The schedule is work-conserving: warm-up and cool-down are
compacted around the steady state the priorities describe, and deferred W passes fill
the idle time they leave.
"""

from __future__ import annotations

import heapq
import math

import numpy as np

from distplan.formulations.deadline import check
from distplan.formulations.pipeline.common import SequenceCycleError, asap, orders_from_starts, predecessor_lists
from distplan.models.pipeline import PipelineInstance

EPS = 1e-9


def list_schedule(inst: PipelineInstance, priority: np.ndarray, limit: np.ndarray, deadline: float | None = None) -> np.ndarray | None:
    """(B, N) start times in seconds, or None when the memory ``limit`` (bytes per device)
    leaves no operation startable (a deadlock of this rule, not a proof of infeasibility);
    `DeadlineReached` past ``deadline`` (checked every 64 events)."""
    nb, n, nd = inst.n_blocks, inst.micro_batches, inst.n_devices
    dur = inst.duration
    memory = inst.memory
    devs = [np.flatnonzero(inst.device_mask[b]).tolist() for b in range(nb)]
    preds = predecessor_lists(inst)
    prio = np.asarray(priority, dtype=float).tolist()
    nan = math.nan
    start = [[nan] * n for _ in range(nb)]
    succ: list[list[int]] = [[] for _ in range(nb)]
    for b in range(nb):
        for a, _ in preds[b]:
            succ[a].append(b)
    durs = dur.tolist()
    mems = memory.tolist()
    nxt = [0] * nb
    free_at = [0.0] * nd
    mem = [0.0] * nd
    lim = [float(x) for x in limit]
    events: list[float] = [0.0]
    done = 0
    total = nb * n
    ready: list[float | None] = [None] * nb  # ready time of each block's next micro-batch
    valid = [False] * nb  # ready[b] is up to date

    def ready_time(b: int) -> float | None:
        m = nxt[b]
        if m >= n:
            return None
        t = 0.0
        for a, g in preds[b]:
            s = start[a][m]
            if s != s:  # nan: not started
                return None
            t = max(t, s + durs[a] + g)
        if m > 0:
            t = max(t, start[b][m - 1] + durs[b])
        return t

    steps = 0
    while done < total:
        if not events:
            return None
        steps += 1
        if steps % 64 == 0:
            check(deadline, "the list schedule")
        t = heapq.heappop(events)
        while events and events[0] <= t + EPS:
            heapq.heappop(events)
        # candidate blocks: those with a ready next micro-batch, in priority order
        cands: list[tuple[float, int, int]] = []
        for b in range(nb):
            if not valid[b]:
                ready[b] = ready_time(b)
                valid[b] = True
                r = ready[b]
                if r is not None and r > t + EPS:
                    heapq.heappush(events, r)
            r = ready[b]
            if r is None or r > t + EPS:
                continue
            cands.append((prio[b][nxt[b]], b, nxt[b]))
        cands.sort()
        reserved_until = [math.inf] * nd  # a device waiting for a multi-device op: latest end allowed
        for _, b, m in cands:
            ds = devs[b]
            if any(free_at[d] > t + EPS for d in ds):
                if len(ds) > 1:
                    when = max(free_at[d] for d in ds)
                    for d in ds:
                        if free_at[d] <= t + EPS:
                            reserved_until[d] = min(reserved_until[d], when)
                continue
            if any(t + durs[b] > reserved_until[d] + EPS for d in ds):
                continue
            if mems[b] > 0 and any(mem[d] + mems[b] > lim[d] + EPS * max(1.0, abs(lim[d])) for d in ds):
                continue
            start[b][m] = t
            nxt[b] += 1
            valid[b] = False
            for c in succ[b]:
                if nxt[c] == m:
                    valid[c] = False
            for d in ds:
                mem[d] += mems[b]
                free_at[d] = t + durs[b]
            heapq.heappush(events, t + durs[b])
            done += 1
    return np.asarray(start, dtype=float)


def guided(inst: PipelineInstance, priority: np.ndarray, limits: list[np.ndarray], deadline: float | None = None) -> list[np.ndarray]:
    """List schedules for each memory limit (bytes per device), retimed to the exact
    earliest starts of their device orders; the limits that deadlock are skipped.
    `DeadlineReached` past ``deadline``."""
    out: list[np.ndarray] = []
    seen: list[np.ndarray] = []
    for lim in limits:
        lim = np.minimum(np.asarray(lim, dtype=float), inst.capacity)
        if any(np.array_equal(lim, x) for x in seen):
            continue
        seen.append(lim)
        s = list_schedule(inst, priority, lim, deadline)
        if s is None:
            continue
        try:
            out.append(asap(inst, orders_from_starts(inst, s)))
        except SequenceCycleError:
            continue
    return out
