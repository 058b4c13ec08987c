"""Exact search over schedule states, by time (integral durations, no delays).

A breadth-first dynamic program over integer times (Bellman's principle applied to
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
instances of a block plus its tail). Layers are explored in time order, so the first
complete state reached is an optimum. Stopped early, ``min(target + 1, min over the open
layer of t + least remaining time)`` is still a lower bound: an optimum whose every state
is at its earliest time (one exists, by the dominance) passes through that layer.

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

import math
import time
from dataclasses import dataclass, field

import numpy as np

from distplan.formulations.pipeline.barriers import Stacking, barrier_time, stacked_plan, stacking
from distplan.formulations.pipeline.common import block_tail, integral_data, predecessor_lists
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate, make_plan

#: most states kept (each a few hundred bytes) before the search stops with its layer bound
MAX_STATES = 600_000


@dataclass
class SearchOutcome:
    """What the search proved (times in seconds). ``value``: the optimum (with ``start``,
    (B, N)) when found below the target; ``bound``: a lower bound on the optimum;
    ``complete``: the search finished (then bound = value, or target + 1 when no schedule
    of makespan <= target exists)."""

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
    return applicable(inst) and bool(np.all(inst.duration == np.round(inst.duration)))


def _capacity(cap: float, mem: list[float], n: int) -> float:
    """The memory a device may hold in the search (the blocks' units): the evaluator's threshold,
    ``cap + 1e-9 max(1, |cap|)``, with room for the rounding of both sides' sums (each
    prefix sums at most ``n len(mem)`` deltas in floating point: error below
    ``k^2 u max |mem|`` for ``k`` terms, u = 2^-53; and the threshold's own rounding), so
    that the search covers every schedule the evaluator accepts. With integral memory and
    capacity it decides as ``<= cap``."""
    if not math.isfinite(cap):
        return math.inf
    k = n * len(mem) + 1
    return cap + 2e-9 * max(1.0, abs(cap)) + 4.0 * k * k * max((abs(x) for x in mem), default=0.0) * 2.0**-53


def search_makespan(inst: PipelineInstance, target: int, deadline: float | None = None, max_states: int = MAX_STATES) -> SearchOutcome:
    """Least makespan among schedules of makespan <= ``target`` (integer seconds), by the
    breadth-first state search of the module docstring. ``deadline``: a
    ``time.perf_counter()`` value after which it stops (with its layer bound)."""
    if not applicable(inst):
        raise ValueError(f"{inst.name}: the state search needs the makespan objective, integral durations >= 1 and no delays")
    nb, n, nd = inst.n_blocks, inst.micro_batches, inst.n_devices
    dur = [int(x) for x in np.round(inst.duration)]
    mem = inst.memory.tolist()
    devs = [np.flatnonzero(inst.device_mask[b]).tolist() for b in range(nb)]
    on = [np.flatnonzero(inst.device_mask[:, d]).tolist() for d in range(nd)]
    cap = [_capacity(c, [mem[x] for x in on[d]], n) for d, c in enumerate(inst.capacity.tolist())]
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

    def least_remaining(c: tuple[int, ...], r: tuple[int, ...], head: list[int] | None = None) -> int:
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

    # a ready operation o is started at once when it cannot be in the way: no other block
    # on its devices may start before o would end (their heads), and moving o ahead of
    # them keeps every memory prefix within capacity (o frees memory, or the device's
    # allocations never exceed it). From any schedule that starts o later, move o to now:
    # its device orders change only by o passing operations that start after it would end,
    # dependencies only gain slack, so nothing ends later
    near = [sorted({x for d in devs[b] for x in on[d]} - {b}) for b in range(nb)]
    movable = [mem[b] <= 0 or all(n * sum(max(mem[x], 0.0) for x in on[d]) <= cap[d] for d in devs[b]) for b in range(nb)]
    zero = tuple([0] * nb)
    root = key(zero, zero)
    parent: dict[int, int] = {root: -1}
    pruned: set[int] = set()
    # a layer: the states first reached at time t with t + least remaining <= target (the
    # others are never kept: reached later they would be pruned again), with their heads,
    # and the least t + least remaining among them
    head0 = [0] * nb
    floor = least_remaining(zero, zero, head0)
    layer: dict[int, tuple[tuple[int, ...], tuple[int, ...], list[int]]] = {root: (zero, zero, head0)}
    if floor > target:
        return SearchOutcome(float(target + 1), True, states=1)
    t = 0
    while layer:
        nxt: dict[int, tuple[tuple[int, ...], tuple[int, ...], list[int]]] = {}
        nxt_floor = math.inf
        for k, (c, r, hd) in layer.items():
            # (the deadline at every state: one expands up to 2^ready subsets, ~2 ms a state
            # on x shape, 8 stages, N = 3, B/W split, so every 256th ran ~0.5 s past it)
            if len(parent) > max_states or (deadline is not None and time.perf_counter() > deadline):
                return SearchOutcome(float(min(target + 1, floor)), False, states=len(parent), info={"stopped at time": t})
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
                if k2 in parent or k2 in pruned:
                    continue
                c2 = list(c)
                r2 = list(base_r)
                for b in chosen:
                    c2[b] += 1
                    r2[b] = dur[b] - 1
                ct, rt = tuple(c2), tuple(r2)
                h2 = [0] * nb
                lr = least_remaining(ct, rt, h2)
                if t + 1 + lr > target:
                    pruned.add(k2)  # (reached again later, it would be pruned again)
                    continue
                parent[k2] = k
                if lr == 0:  # complete at t + 1; nothing completes earlier (layers in time order)
                    return SearchOutcome(float(t + 1), True, float(t + 1), _starts(inst, parent, k2, t + 1, radix, width), len(parent))
                nxt[k2] = (ct, rt, h2)
                nxt_floor = min(nxt_floor, t + 1 + lr)
        layer = nxt
        floor = nxt_floor
        t += 1
    return SearchOutcome(float(target + 1), True, states=len(parent))


def _decode(k: int, nb: int, radix: int, width: int) -> tuple[list[int], list[int]]:
    r = [0] * nb
    for i in range(nb - 1, -1, -1):
        k, r[i] = divmod(k, width)
    c = [0] * nb
    for i in range(nb - 1, -1, -1):
        k, c[i] = divmod(k, radix)
    return c, r


def _starts(inst: PipelineInstance, parent: dict[int, int], k: int, t: int, radix: int, width: int) -> np.ndarray:
    """(B, N) start times (seconds) along the path of states ending in ``k`` at time ``t``."""
    nb = inst.n_blocks
    start = np.zeros((nb, inst.micro_batches))
    c, _ = _decode(k, nb, radix, width)
    while parent[k] >= 0:
        t -= 1
        k = parent[k]
        prev, _ = _decode(k, nb, radix, width)
        for b in range(nb):
            if c[b] > prev[b]:
                start[b, prev[b]] = t
        c = prev
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
