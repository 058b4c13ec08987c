"""Exact search over schedule states, by time (integral durations, no delays).

A best-first search over states reached at integer times (Bellman's principle applied to
scheduling states; for pipelines, a state is how far each block has got). Some optimum has
(1) integral start times (fix every device's sequence: the earliest starts along those
sequences are integral and keep every memory prefix), and (2) each block's micro-batches
in index order (sorting a block's start times keeps dependencies, device use and memory:
`milp.py`). So a schedule is a path of states at t = 0, 1, 2, ... where a state is

* ``count[b]``: how many micro-batches of block b have started (memory on device d is
  ``sum_b mem[b] * count[b]`` over its blocks), and
* ``rem[b]``: time (integer seconds) the last started operation of b still runs.

At each time any set of ready operations on disjoint devices may start (the empty set
included: waiting can pay). Operation (b, k) is ready when its devices are idle, memory
stays within capacity, and every dependency's operation k has ended.

The search keeps each state at its earliest time only (a later visit is dominated: the
earlier one can do the same thereafter, shifted) and prunes a state at time t when
``t + (least remaining time)`` exceeds the target (remaining work per device, remaining
instances of a block plus its tail). It expands the open states by least
``t + least remaining`` (A*: Hart, Nilsson & Raphael, IEEE Trans. SSC 1968; ties to the
latest t), a state again when reached earlier than before, so the first complete state
taken out is an optimum. Stopped early, ``min(target + 1, least open t + least
remaining)`` is still a lower bound: an optimum whose every state is at its earliest time
(one exists, by the dominance) has a state open at its earliest time. A state that reaches
the top is bounded again by the one-machine relaxations (`one_machine_bound`; Carlier,
EJOR 1982) and put back when that bound is larger. (X shape, 4 stages, N = 4, B/W split,
memory 3, from tessel's 45 s: the breadth-first search of before stopped at 600,000
states with bound 35; this one finds 36 in ~450,000, and the bound 36 from ~50,000. NN
shape, 4 stages, N = 4, B/W split, memory 4, from 41 s: 39 proven in ~1,600 states, where
the breadth-first search stopped at 20,000 states.)

A ready operation that cannot be in anyone's way starts at once (no subset leaves it
out): when no other block on its devices can start before it would end (their heads from
the state) and it frees memory (or its devices' allocations never exceed the capacity).
Any schedule that starts it later can start it now instead: on its devices it moves
ahead only of operations that start after it would end (it overlaps none of them), the
memory prefixes it moves into only drop (or stay within a capacity never reached), its
dependencies have ended and its successors gain slack; nothing ends later. The rule
depends on the state only, so the earliest-time dominance still holds (NN shape, 8
stages, N = 2, B/W split, memory 2: 364 states prove 37 from 39, 35,000 without it).

What it proves is the instance's optimum in exact arithmetic: the times are integers, the
durations exact integers (`bound_is_exact`; `applicable` also takes durations within
1e-12 of one), and the memory test accepts every prefix the evaluator accepts (its
threshold with room for floating-point sums, `_capacity`). Plans that use the evaluator's
time tolerance (overlaps up to 1e-7 x makespan) are not covered; neither are they by any
other bound.

Barriers at the head or tail of the DAG (`barriers.py`) are stacked first and last and
their time is added (exact for blocks with no memory and no delays), so the search runs
on the rest, where memory keeps the states few: Tessel's NN shape, memory 4, N = 16 takes
about 50k states (1 s of CPU) to prove 153 optimal.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from distplan.formulations.pipeline.barriers import Stacking, barrier_time, stacked_plan, stacking
from distplan.formulations.pipeline.common import block_tail, device_capacities, integral_data, predecessor_lists
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate, make_plan

#: most states kept (each a few hundred bytes) before the search stops with its open states' bound
MAX_STATES = 600_000
#: the states reached but pruned are remembered too (``seen``: not bounded again), up to
#: this many per state kept, so that their memory is capped with the budget's: ~100 bytes
#: each against a few hundred for a kept one, so the full budget of `MAX_STATES` holds at
#: most ~0.6 GB (review rev15 found 6.7 reached per kept state on X shape, 8 stages, N =
#: 4, 120 MB at 80,000 kept, and 47 on a small X case; uncapped, 600,000 kept could reach
#: tens of millions)
SEEN_PER_STATE = 8


@dataclass
class SearchOutcome:
    """What the search proved (times in seconds). ``value``: the optimum (with ``start``,
    (B, N)) when found below the target; ``bound``: a lower bound on the optimum;
    ``complete``: the search finished (then bound = value, or target + 1 when no schedule
    of makespan <= target exists). A search its budget stopped says which under
    ``info["cut_by"]``: ``"max_states"`` (the states kept, or `SEEN_PER_STATE` times as
    many reached) or ``"deadline"``."""

    bound: float
    complete: bool
    value: float | None = None
    start: np.ndarray | None = None
    states: int = 0
    info: dict[str, object] = field(default_factory=dict)


def applicable(inst: PipelineInstance) -> bool:
    """Makespan objective, integral durations of at least 1 s, no dependency delays."""
    if inst.objective != "makespan" or inst.n_blocks == 0:
        return False
    _, _, lag = inst.edges
    return integral_data(inst) and bool(np.all(inst.duration >= 1) and np.all(lag == 0))


def bound_is_exact(inst: PipelineInstance) -> bool:
    """The search's bounds hold in exact arithmetic: besides `applicable`, every duration
    is an exact integer (`applicable` rounds those within 1e-12). Its memory test accepts
    every prefix the evaluator does (`_capacity`), its times are integers."""
    return applicable(inst) and integral_data(inst, exact=True)


def search_makespan(inst: PipelineInstance, target: int, deadline: float | None = None, max_states: int = MAX_STATES) -> SearchOutcome:
    """Least makespan among schedules of makespan <= ``target`` (integer seconds), by the
    best-first state search of the module docstring. ``deadline``: a
    ``time.perf_counter()`` value after which it stops (with its open states' bound);
    ``max_states``: most states kept (opened), and `SEEN_PER_STATE` times as many
    reached (``info["reached"]``), before it stops likewise."""
    if not applicable(inst):
        raise ValueError(f"{inst.name}: the state search needs the makespan objective, integral durations >= 1 and no delays")
    nb, n, nd = inst.n_blocks, inst.micro_batches, inst.n_devices
    dur = [int(x) for x in np.round(inst.duration)]
    mem = inst.memory.tolist()
    devs = [np.flatnonzero(inst.device_mask[b]).tolist() for b in range(nb)]
    on = [np.flatnonzero(inst.device_mask[:, d]).tolist() for d in range(nd)]
    cap = device_capacities(inst, proof=True).tolist()  # (`common.proof_capacity`: every schedule the evaluator accepts)
    bits = [sum(1 << d for d in devs[b]) for b in range(nb)]
    preds = [[a for a, _ in p] for p in predecessor_lists(inst)]
    tail = [int(x) for x in np.round(block_tail(inst))]
    allocating = [m > 0 for m in mem]
    radix = n + 1
    width = max(dur)

    def key(c: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int]) -> int:
        k = 0
        for x in c:
            k = k * radix + x
        for x in r:
            k = k * width + x
        return k

    # key increment of starting block b (count + 1, remaining time 0 -> dur - 1)
    step = [radix ** (nb - 1 - b) * width**nb + (dur[b] - 1) * width ** (nb - 1 - b) for b in range(nb)]

    topo = [(b, preds[b]) for b in inst.topo_order.tolist()]
    big = 1 << 62

    def least_remaining(c: tuple[int, ...] | list[int], r: tuple[int, ...] | list[int], head: list[int] | None = None) -> int:
        # head[b]: least time until operation (b, c[b]) may start (its dependencies' ops
        # c[b] end first; an unstarted one waits for its own block's earlier ops)
        if head is None:
            head = [0] * nb
        for b, pb in topo:
            kb = c[b]
            if kb >= n:
                continue
            h = 0
            for a in pb:
                ca = c[a]
                if ca > kb + 1:
                    continue
                if ca == kb + 1:
                    v = r[a]
                else:
                    v = head[a] if head[a] > r[a] else r[a]
                    v += (kb - ca + 1) * dur[a]
                if v > h:
                    h = v
            head[b] = h
        # a block: its running operation, then its remaining ones, then its tail
        lb = 0
        for b in range(nb):
            rb = r[b]
            if c[b] < n:
                v = (head[b] if head[b] > rb else rb) + (n - c[b]) * dur[b] + tail[b]
            elif rb:
                v = rb + tail[b]
            else:
                continue
            if v > lb:
                lb = v
        # a device: busy until its running operation ends, idle until one of its unstarted
        # operations may start, then all of them, then the least tail among their blocks
        for blocks in on:
            work = 0
            running = 0
            first = big
            last = big
            for b in blocks:
                if r[b] > running:
                    running = r[b]
                kb = c[b]
                if kb < n:
                    work += (n - kb) * dur[b]
                    if head[b] < first:
                        first = head[b]
                    if tail[b] < last:
                        last = tail[b]
            if work:
                v = (running if running > first else first) + work + last
                if v > lb:
                    lb = v
        return lb

    qtail = op_tails(dur, preds, inst.topo_order.tolist(), n)

    def one_machine(c: tuple[int, ...], r: tuple[int, ...]) -> int:
        return one_machine_bound(c, r, n, dur, devs, on, topo, qtail)

    # a ready operation o is started at once when it cannot be in the way: no other block
    # on its devices may start before o would end (their heads), and moving o ahead of
    # them keeps every memory prefix within capacity (o frees memory, or the device's
    # allocations never exceed it). From any schedule that starts o later, move o to now:
    # its device orders change only by o passing operations that start after it would end,
    # dependencies only gain slack, so nothing ends later
    near = [sorted({x for d in devs[b] for x in on[d]} - {b}) for b in range(nb)]
    movable = [mem[b] <= 0 or all(n * sum(max(mem[x], 0.0) for x in on[d]) <= cap[d] for d in devs[b]) for b in range(nb)]
    zero = tuple([0] * nb)
    # best first (A*; Hart, Nilsson & Raphael 1968): open states by least ``t + least
    # remaining`` (then latest t: a dive towards a complete state), each kept at the
    # earliest time it was reached (``seen``: also the states pruned there; reached no
    # earlier, they are dominated or pruned again) and expanded again when reached earlier
    lr0 = least_remaining(zero, zero)
    if lr0 > target:
        return SearchOutcome(float(target + 1), True, states=1)
    root = key(zero, zero)
    seen: dict[int, int] = {root: 0}
    kept = 1
    # (t + least remaining, -t, order, key, path, bounded by one_machine_bound); a path is
    # (previous path, time, blocks started then), None at the root
    Path = tuple[object, int, tuple[int, ...]] | None
    heap: list[tuple[int, int, int, int, Path, bool]] = [(lr0, 0, 0, root, None, False)]
    order = 1
    floor = lr0  # the largest least open bound so far (each one is a lower bound)
    raised = [0, 0, 0]  # one-machine bounds taken, those that raised a state, that pruned one
    while heap:
        # (the deadline at every state: one expands up to 2^ready subsets, ~2 ms a state
        # on x shape, 8 stages, N = 3, B/W split, so every 256th ran ~0.5 s past it)
        if heap[0][0] > floor:
            floor = heap[0][0]
        over = kept > max_states or len(seen) > SEEN_PER_STATE * max_states
        if over or (deadline is not None and time.perf_counter() > deadline):
            why: dict[str, object] = {"stopped at bound": floor, "one machine": raised, "reached": len(seen), "cut_by": "max_states" if over else "deadline"}
            return SearchOutcome(float(min(target + 1, floor)), False, states=kept, info=why)
        f, neg_t, _, k, path, refined = heapq.heappop(heap)
        t = -neg_t
        if seen[k] < t:
            continue  # reached earlier since
        if f == t:  # complete at t: every open state has t + least remaining >= t
            return SearchOutcome(float(t), True, float(t), _starts(inst, path), kept, {"one machine": raised, "reached": len(seen)})
        c, r = _decode(k, nb, radix, width)
        if ONE_MACHINE and not refined:
            # the one-machine bound only on the states that reach the top (lazily)
            v = t + one_machine(c, r)
            raised[0] += 1
            if v > target:
                raised[2] += 1
                continue
            if v > f:
                raised[1] += 1
                heapq.heappush(heap, (v, neg_t, order, k, path, True))
                order += 1
                continue
        hd = [0] * nb
        least_remaining(c, r, hd)  # (the heads, for the rule below)
        busy = 0
        for b in range(nb):
            if r[b]:
                busy |= bits[b]
        ready: list[int] = []
        forced: list[int] = []
        for b in range(nb):
            kb = c[b]
            if kb >= n or bits[b] & busy:
                continue
            if any(c[a] <= kb or (c[a] == kb + 1 and r[a]) for a in preds[b]):
                continue
            if allocating[b] and any(sum(mem[x] * c[x] for x in on[d]) + mem[b] > cap[d] for d in devs[b]):
                continue
            if movable[b] and all(c[x] >= n or hd[x] >= dur[b] for x in near[b]):
                forced.append(b)
            else:
                ready.append(b)
        subsets: list[tuple[int, tuple[int, ...]]] = [(0, tuple(forced))]
        for b in ready:
            subsets += [(m | bits[b], s + (b,)) for m, s in subsets if not m & bits[b]]
        base_r = [x - 1 if x > 0 else 0 for x in r]
        base_k = key(c, base_r)
        for _, chosen in subsets:
            k2 = base_k  # a chosen block is idle: its remaining time goes 0 -> dur - 1
            for b in chosen:
                k2 += step[b]
            if seen.get(k2, big) <= t + 1:
                continue
            seen[k2] = t + 1
            c2 = list(c)
            r2 = list(base_r)
            for b in chosen:
                c2[b] += 1
                r2[b] = dur[b] - 1
            lr = least_remaining(c2, r2)
            if lr < f - t - 1:  # (the parent's bound less the step: Mero's pathmax)
                lr = f - t - 1
            if t + 1 + lr > target:
                continue  # (reached again no earlier, it would be pruned again)
            kept += 1
            heapq.heappush(heap, (t + 1 + lr, -t - 1, order, k2, (path, t, chosen), False))
            order += 1
    return SearchOutcome(float(target + 1), True, states=kept, info={"one machine": raised, "reached": len(seen)})


def op_tails(dur: list[int], preds: list[list[int]], topo: list[int], n: int) -> list[list[int]]:
    """``q[b][k]``: least time (integer seconds) from the end of operation (b, k) to the end
    of any schedule with each block's micro-batches in index order: the longest path of
    durations after it, through its successors' operation k and its own block's
    operation k + 1 (which starts after (b, k) ends)."""
    nb = len(dur)
    succ: list[list[int]] = [[] for _ in range(nb)]
    for b in range(nb):
        for a in preds[b]:
            succ[a].append(b)
    q = [[0] * n for _ in range(nb)]
    for k in range(n - 1, -1, -1):
        for b in reversed(topo):
            v = q[b][k + 1] + dur[b] if k + 1 < n else 0
            for s in succ[b]:
                w = dur[s] + q[s][k]
                if w > v:
                    v = w
            q[b][k] = v
    return q


def one_machine_bound(
    c: tuple[int, ...] | list[int],
    r: tuple[int, ...] | list[int],
    n: int,
    dur: list[int],
    devs: list[list[int]],
    on: list[list[int]],
    topo: list[tuple[int, list[int]]],
    q: list[list[int]],
) -> int:
    """Least remaining time (integer seconds) from a state, by one-machine relaxations.

    Every unstarted operation (b, k) gets a head (earliest start: its devices free, its
    block's previous operation and its dependencies' operation k ended, by the longest
    path through the unstarted ones) and a tail ``q[b][k]`` (`op_tails`). Each device
    alone, with preemption allowed, must still run its unstarted operations within their
    heads and then wait their tails: Jackson's preemptive schedule (run the released
    operation of largest tail) is optimal for that relaxation, 1|r_j, pmtn|max C_j + q_j
    (Carlier, EJOR 1982; Carlier & Pinson, Management Science 1989, the job-shop bound).
    Any schedule from the state (each block's micro-batches in index order) is a feasible
    schedule of every relaxation, so the largest value bounds its remaining time."""
    nb = len(dur)
    run = [0] * len(on)
    lb = 0
    for b in range(nb):
        rb = r[b]
        if rb:
            for d in devs[b]:
                if rb > run[d]:
                    run[d] = rb
            v = rb + q[b][c[b] - 1]
            if v > lb:
                lb = v
    heads: list[list[int]] = [[] for _ in range(nb)]
    for b, pb in topo:
        kb = c[b]
        if kb >= n:
            continue
        h = 0
        for d in devs[b]:
            if run[d] > h:
                h = run[d]
        hs = heads[b]
        for k in range(kb, n):
            for a in pb:
                ca = c[a]
                if ca > k + 1:
                    continue
                v = r[a] if ca == k + 1 else heads[a][k - ca] + dur[a]
                if v > h:
                    h = v
            hs.append(h)
            h += dur[b]
    for blocks in on:
        jobs = [(heads[b][k - c[b]], q[b][k], dur[b]) for b in blocks for k in range(c[b], n)]
        if not jobs:
            continue
        jobs.sort()
        # Jackson's preemptive schedule: ready heap of (-tail, remaining time)
        ready: list[tuple[int, int]] = []
        now = jobs[0][0]
        i, m = 0, len(jobs)
        while i < m or ready:
            if not ready and jobs[i][0] > now:
                now = jobs[i][0]
            while i < m and jobs[i][0] <= now:
                heapq.heappush(ready, (-jobs[i][1], jobs[i][2]))
                i += 1
            negq, left = heapq.heappop(ready)
            nxt = jobs[i][0] if i < m else big_int
            if now + left <= nxt:
                now += left
                if now - negq > lb:
                    lb = now - negq
            else:
                heapq.heappush(ready, (negq, left - (nxt - now)))
                now = nxt
    return lb


big_int = 1 << 62
#: bound the states that reach the top of the search by `one_machine_bound` too
ONE_MACHINE = True


def _decode(k: int, nb: int, radix: int, width: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(count, remaining) of a state from its key."""
    r = [0] * nb
    for i in range(nb - 1, -1, -1):
        k, r[i] = divmod(k, width)
    c = [0] * nb
    for i in range(nb - 1, -1, -1):
        k, c[i] = divmod(k, radix)
    return tuple(c), tuple(r)


def _starts(inst: PipelineInstance, path: object) -> np.ndarray:
    """(B, N) start times (seconds) along a search path: nested (previous path, time,
    blocks started at that time), None at the root; each block's micro-batches in order."""
    steps: list[tuple[int, tuple[int, ...]]] = []
    node = path
    while node is not None:
        assert isinstance(node, tuple)
        prev, at, chosen = node
        steps.append((int(at), tuple(chosen)))
        node = prev
    start = np.zeros((inst.n_blocks, inst.micro_batches))
    count = [0] * inst.n_blocks
    for t, chosen in reversed(steps):
        for b in chosen:
            start[b, count[b]] = t
            count[b] += 1
    return start


def stackable(inst: PipelineInstance) -> Stacking | None:
    """The head and tail barriers and the instance without them (no delays, as the search
    needs) when none of them has memory (stacking them first and last is then exact),
    else None."""
    stack = stacking(inst, zero_delays=True)
    return stack if stack is not None and np.all(inst.memory[stack.ends] == 0.0) else None


def prove_makespan(
    inst: PipelineInstance, incumbent: float, deadline: float | None = None, max_states: int = MAX_STATES
) -> tuple[PipelinePlan | None, SearchOutcome]:
    """Search for a schedule better than ``incumbent`` (seconds) on the instance without its
    stackable barriers; returns a plan (stacked, checked by the evaluator) when a better
    one exists, and the outcome on the whole instance's scale (barrier time added).
    ``max_states``: as `search_makespan`."""
    if not applicable(inst):
        raise ValueError(f"{inst.name}: the state search needs the makespan objective, integral durations >= 1 and no delays")
    stack = stackable(inst)
    sub = inst if stack is None else stack.rest
    extra = 0.0 if stack is None else barrier_time(inst, stack.ends)
    if sub is None:
        # nothing but stackable barriers: their time is a bound; nothing is left to search
        return None, SearchOutcome(bound=extra, complete=False, info={"barrier time": extra})
    target = math.ceil(incumbent - extra - 1e-9) - 1
    out = search_makespan(sub, target, deadline, max_states)
    out.bound += extra
    out.info["barrier time"] = extra
    if out.value is None or out.start is None:
        return None, out
    out.value += extra
    inner = make_plan(sub, out.start, {"schedule": "state search"})
    if stack is not None:
        return stacked_plan(inst, stack, inner), out
    return (inner if evaluate(inst, inner).feasible else None), out
