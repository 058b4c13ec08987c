"""Shared machinery of the pipeline formulations: operations, device sequences, timing.

An *operation* is one (block, micro-batch) pair, numbered ``op = block * N + micro``.
A schedule is represented by one sequence of operations per device (a block on several
devices appears in each of their sequences); `asap` turns sequences into the earliest
start times that respect dependencies (with their delays) and the sequences, and
`retime` picks the times that are optimal for the instance's objective given the
sequences (earliest starts for the makespan, an LP for the longest device span).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import check
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model
from distplan.modeling.scheduling import precedence_with_lag
from distplan.models.pipeline import MEMORY_TOLERANCE, PipelineInstance, capacity_limit, check_net_memory

Orders = list[list[int]]


class SequenceCycleError(ValueError):
    """Device sequences that contradict the dependencies (a schedule would deadlock)."""


@dataclass
class OpArcs:
    """Precedence arcs between operations: ``start[dst] >= start[src] + gap`` (seconds)."""

    src: np.ndarray
    dst: np.ndarray
    gap: np.ndarray


def op_index(inst: PipelineInstance, block: int | np.ndarray, micro: int | np.ndarray) -> np.ndarray:
    return np.asarray(block) * inst.micro_batches + np.asarray(micro)


def dependency_arcs(inst: PipelineInstance, micro_batches: int | None = None) -> OpArcs:
    """Dependency arcs of every micro-batch (gap = duration of the source + delay)."""
    n = inst.micro_batches if micro_batches is None else micro_batches
    src, dst, lag = inst.edges
    m = np.arange(n)
    s = (src[:, None] * n + m[None, :]).reshape(-1)
    t = (dst[:, None] * n + m[None, :]).reshape(-1)
    g = np.repeat(inst.duration[src] + lag, n)
    return OpArcs(s, t, g)


def predecessor_lists(inst: PipelineInstance) -> list[list[tuple[int, float]]]:
    """For every block, its (predecessor block, lag in seconds) pairs."""
    src, dst, lag = inst.edges
    preds: list[list[tuple[int, float]]] = [[] for _ in range(inst.n_blocks)]
    for a, b, g in zip(src.tolist(), dst.tolist(), lag.tolist()):
        preds[b].append((a, g))
    return preds


def block_depth(inst: PipelineInstance) -> np.ndarray:
    """(B,) earliest start (seconds) of each block when one micro-batch runs alone with
    unlimited devices: the longest dependency path (durations + delays) to the block."""
    depth = np.zeros(inst.n_blocks)
    preds = predecessor_lists(inst)
    for v in inst.topo_order.tolist():
        for a, d in preds[v]:
            depth[v] = max(depth[v], depth[a] + inst.duration[a] + d)
    return depth


def block_tail(inst: PipelineInstance) -> np.ndarray:
    """(B,) least time (seconds) from a block's end to the end of its micro-batch."""
    src, dst, lag = inst.edges
    tail = np.zeros(inst.n_blocks)
    succ: list[list[tuple[int, float]]] = [[] for _ in range(inst.n_blocks)]
    for a, b, d in zip(src.tolist(), dst.tolist(), lag.tolist()):
        succ[a].append((b, d))
    for v in inst.topo_order[::-1].tolist():
        for b, d in succ[v]:
            tail[v] = max(tail[v], d + inst.duration[b] + tail[b])
    return tail


#: operations up to which an earliest-start schedule, or the completion of a repetend,
#: takes milliseconds: such a step runs past the deadline (its result is what a stopped
#: run returns); above, it checks the deadline
CHEAP_OPS = 0xFFFF


def asap(inst: PipelineInstance, orders: Orders, release: np.ndarray | None = None, deadline: float | None = None) -> np.ndarray:
    """Earliest start times (B, N) in seconds for the given device sequences.

    Every operation must appear in the sequence of each device of its block. Raises
    `SequenceCycleError` when the sequences and the dependencies form a cycle, and
    `DeadlineReached` past ``deadline`` (a ``time.perf_counter()`` value; checked every
    65,536 operations, and before and after the setup of more than that many).
    """
    nb, n = inst.n_blocks, inst.micro_batches
    nops = nb * n
    big = nops > CHEAP_OPS
    if big:
        check(deadline, "the earliest-start schedule")
    arcs = dependency_arcs(inst)
    if big:  # (each step of the setup takes ~0.5 s on 8M operations: review rev30 D3)
        check(deadline, "the earliest-start schedule")
    src = [arcs.src]
    dst = [arcs.dst]
    gap = [arcs.gap]
    dur_op = np.repeat(inst.duration, n)
    for seq in orders:
        if len(seq) > 1:
            a = np.asarray(seq[:-1], dtype=np.int64)
            b = np.asarray(seq[1:], dtype=np.int64)
            src.append(a)
            dst.append(b)
            gap.append(dur_op[a])
    if big:
        check(deadline, "the earliest-start schedule")
    s_all = np.concatenate(src)
    d_all = np.concatenate(dst)
    g_all = np.concatenate(gap)
    start = np.zeros(nops) if release is None else np.asarray(release, dtype=float).reshape(-1).copy()
    st, done = longest_path_starts(nops, s_all, d_all, g_all, start, deadline if big else None, every=0x10000)
    if done < nops:
        raise SequenceCycleError("the device sequences contradict the dependencies (the schedule would deadlock)")
    return st.reshape(nb, n)


def longest_path_starts(
    n: int, src: np.ndarray, dst: np.ndarray, gap: np.ndarray, start: np.ndarray, deadline: float | None = None, every: int = 0
) -> tuple[np.ndarray, int]:
    """Earliest starts (seconds) of ``n`` operations from ``start`` along arcs
    ``src -> dst`` (``start[dst] >= start[src] + gap``), in Kahn's order, and how many
    operations were reached (fewer than ``n``: the arcs hold a cycle). ``deadline`` is
    checked once the arcs are sorted, and with ``every`` > 0 after each ``every``
    operations (`DeadlineReached`). Plain lists: numpy scalars one at a time cost ~10x
    (6M operations: 17 s, ~3 s this way)."""
    check(deadline, "the earliest-start schedule")
    order = np.argsort(src, kind="stable")
    src, dst, gap = src[order], dst[order], gap[order]
    check(deadline, "the earliest-start schedule")
    ptr = np.searchsorted(src, np.arange(n + 1)).tolist()
    indeg = np.bincount(dst, minlength=n)
    check(deadline, "the earliest-start schedule")
    stack = np.flatnonzero(indeg == 0)[::-1].tolist()
    d_list, g_list = dst.tolist(), gap.astype(float).tolist()
    st, indeg_l = start.tolist(), indeg.tolist()
    check(deadline, "the earliest-start schedule")
    done = 0
    while stack:
        v = stack.pop()
        done += 1
        if every and not done % every:
            check(deadline, "the earliest-start schedule")
        sv = st[v]
        for k in range(ptr[v], ptr[v + 1]):
            w = d_list[k]
            cand = sv + g_list[k]
            if cand > st[w]:
                st[w] = cand
            indeg_l[w] -= 1
            if indeg_l[w] == 0:
                stack.append(w)
    return np.asarray(st, dtype=float), done


def topological_rank(inst: PipelineInstance) -> np.ndarray:
    """(B,) each block's position in the instance's topological order."""
    rank = np.empty(inst.n_blocks, dtype=np.int64)
    rank[inst.topo_order] = np.arange(inst.n_blocks)
    return rank


def orders_from_starts(inst: PipelineInstance, start: np.ndarray) -> Orders:
    """Per device, the operations sorted by start time (ties by block topological rank)."""
    n = inst.micro_batches
    rank = topological_rank(inst)
    out: Orders = []
    flat = np.asarray(start, dtype=float).reshape(-1)
    for d in range(inst.n_devices):
        blocks = np.flatnonzero(inst.device_mask[:, d])
        ops = (blocks[:, None] * n + np.arange(n)[None, :]).reshape(-1)
        key = np.lexsort((rank[ops // n], flat[ops]))
        out.append(ops[key].tolist())
    return out


def gather_ends(inst: PipelineInstance, key: np.ndarray, head: Sequence[int] | np.ndarray, tail: Sequence[int] | np.ndarray) -> np.ndarray:
    """Earliest starts (B, N) in seconds of the device sequences that run the ``head``
    blocks (indices or a (B,) mask) of every micro-batch before everything else and the
    ``tail`` blocks after everything else; within each of the three groups the operations
    keep the order of ``key`` ((B, N): start times or any sort key; ties by topological
    rank, as `orders_from_starts`). Tessel's memory-free ends gathered around a repetend's
    schedule and the barriers stacked around the rest (`barriers.stacked_plan`) are both
    such sequences."""
    key = np.array(key, dtype=float)
    big = float(key.max() - key.min()) + 1.0
    key[head] -= big
    key[tail] += big
    return asap(inst, orders_from_starts(inst, key))


def memory_peaks(inst: PipelineInstance, orders: Orders) -> np.ndarray:
    """(D,) peak of the memory prefix (bytes) along each device sequence."""
    n = inst.micro_batches
    peaks = np.zeros(inst.n_devices)
    for d, seq in enumerate(orders):
        if seq:
            pref = np.cumsum(inst.memory[np.asarray(seq) // n])
            peaks[d] = max(0.0, float(pref.max()))
    return peaks


#: most operations (blocks x micro-batches) a pipeline schedule is planned for: the device
#: sequences, start times and checks hold ~100-300 bytes per operation in Python lists
#: (N = 1e6 micro-batches of 6 blocks: 1-2.3 GB); N = 1e7 (60M operations) ran out of its
#: time limit and toward 10+ GB
MAX_OPERATIONS = 1 << 23


def check_size(inst: PipelineInstance) -> None:
    """`InputError` naming ``micro_batches`` when the run has more than `MAX_OPERATIONS`
    operations (it cannot be planned in reasonable memory)."""
    ops = inst.n_blocks * inst.micro_batches
    if ops > MAX_OPERATIONS:
        most = MAX_OPERATIONS // max(1, inst.n_blocks)
        raise InputError(
            "micro_batches",
            f"{inst.name}: {inst.micro_batches} micro-batches of {inst.n_blocks} blocks are {ops:,} operations, more than the {MAX_OPERATIONS:,} a pipeline schedule is planned for in reasonable memory",
            f"plan at most {most:,} micro-batches: a steady state repeats, its period and bubble do not change with more",
        )


def proof_capacity(cap: float, mem: Sequence[float], n: int) -> float:
    """The most memory a device of capacity ``cap`` holding blocks of memories ``mem``
    over ``n`` micro-batches may hold in a schedule the evaluator accepts, as a
    formulation's own sums find it (the blocks' units): the evaluator's threshold
    (`distplan.models.pipeline.capacity_limit`), with room for the rounding of both sides'
    sums (each prefix sums at most ``n len(mem)`` deltas in floating point: error below
    ``k^2 u max |mem|`` for ``k`` terms, u = 2^-53) and of the threshold itself. What
    proves (an infeasibility, a bound's memory test) compares with it, so that it covers
    every schedule the evaluator accepts; with integral memory and capacity it decides as
    ``<= cap``."""
    if not math.isfinite(cap):
        return math.inf
    return capacity_limit(cap) + MEMORY_TOLERANCE * max(1.0, abs(cap)) + _sum_room(mem, n)


def plan_capacity(cap: float, mem: Sequence[float], n: int) -> float:
    """The most memory a device of capacity ``cap`` may hold, as a formulation's own sums
    find it, in a schedule the evaluator surely accepts: its threshold less the rounding
    room of `proof_capacity` (never below ``cap``)."""
    if not math.isfinite(cap):
        return math.inf
    return max(cap, capacity_limit(cap) - _sum_room(mem, n))


def device_capacities(inst: PipelineInstance, proof: bool) -> np.ndarray:
    """(D,) `proof_capacity` (``proof``) or `plan_capacity` of every device of ``inst``."""
    limit = proof_capacity if proof else plan_capacity
    mask, n = inst.device_mask, inst.micro_batches
    return np.array([limit(float(c), inst.memory[mask[:, d]].tolist(), n) for d, c in enumerate(inst.capacity.tolist())], dtype=float)


def memory_fits(inst: PipelineInstance, orders: Orders) -> bool:
    """Whether the device sequences' memory prefixes stay within what the evaluator surely
    accepts (`plan_capacity`)."""
    return fitting_peaks(inst, orders)[0]


def fitting_peaks(inst: PipelineInstance, orders: Orders) -> tuple[bool, np.ndarray]:
    """`memory_fits`, with the memory peaks per device (the blocks' units)."""
    peaks = memory_peaks(inst, orders)
    return bool(np.all(peaks <= device_capacities(inst, proof=False))), peaks


def _sum_room(mem: Sequence[float], n: int) -> float:
    """Room for the rounding of a memory prefix of at most ``n len(mem)`` deltas (below
    ``k^2 u max |mem|`` for ``k`` terms, u = 2^-53), four times over."""
    k = n * len(mem) + 1
    return 4.0 * k * k * max((abs(x) for x in mem), default=0.0) * 2.0**-53


def check_capacity(inst: PipelineInstance) -> None:
    """Raise `InfeasibleError` when a device's capacity is below the least memory any
    schedule needs there: the least peak of one micro-batch (best order), or what all N
    micro-batches leave held at the end (N times the net memory of the device's blocks,
    when blocks allocate more than they free: every schedule's last prefix), beyond what
    the evaluator accepts (`proof_capacity`: a capacity 4e-10 below a block's memory,
    which the evaluator accepts, was called too small, review rev16 D3). First, an
    `InputError` when a micro-batch frees more than it allocates on a device
    (`check_net_memory`: an instance built in Python is not read through its loader)."""
    check_net_memory(inst)
    need, exact = inst.minimum_memory()
    held = inst.micro_batches * (inst.device_mask.T.astype(float) @ inst.memory)
    least = np.maximum(np.where(exact, need, 0.0), held)
    cap = inst.capacity
    limit = device_capacities(inst, proof=True)
    short = [(d, least[d], cap[d]) for d in range(inst.n_devices) if least[d] > limit[d]]
    if short:
        parts = [f"device {inst.devices[d]} needs at least {nd:.6g} (capacity {cd:.6g}, short by {nd - cd:.6g})" for d, nd, cd in short]
        raise InfeasibleError(
            f"{inst.name}: memory capacity below what any schedule needs: " + "; ".join(parts),
            details={
                "minimum_memory": {inst.devices[d]: float(need[d]) for d in range(inst.n_devices)},
                "held_at_end": {inst.devices[d]: float(held[d]) for d in range(inst.n_devices)},
                "capacity": {inst.devices[d]: (float(cap[d]) if math.isfinite(cap[d]) else None) for d in range(inst.n_devices)},
            },
        )


def schedule_objective(inst: PipelineInstance, start: np.ndarray) -> float:
    """The instance's objective (seconds) of the starts ``start`` ((B, N) or flat): the
    makespan, or the largest device span (first start to last end on a device)."""
    start = np.asarray(start, dtype=float).reshape(inst.n_blocks, inst.micro_batches)
    end = start + inst.duration[:, None]
    if inst.objective == "makespan":
        return float(end.max() - start.min())
    mask = inst.device_mask
    return max(float(end[mask[:, d]].max() - start[mask[:, d]].min()) for d in range(inst.n_devices) if mask[:, d].any())


def integral_data(inst: PipelineInstance, exact: bool = False) -> bool:
    """True when all durations and delays are integers (then optimal times are integers):
    within 1e-12 of one (for searches that round them, whose plans the evaluator checks),
    or, ``exact``, exactly (for a model or bound that holds only on integral data: a
    makespan declared integer over durations 1e-13 below integers had the optimum's
    ceiling as its dual bound, above the evaluated objective)."""
    _, _, lag = inst.edges
    vals = np.concatenate([inst.duration, lag])
    if exact:
        return bool(np.all(vals == np.round(vals)))
    return bool(np.all(np.abs(vals - np.round(vals)) < 1e-12))


@dataclass(frozen=True)
class RetimeIndex:
    """The retiming LP's index (block contract): dependency and device-sequence arcs over the
    (block, micro-batch) operations, each sequence's first and last operation, durations (s)."""

    src: np.ndarray
    dst: np.ndarray
    gap: np.ndarray
    firsts: np.ndarray
    lasts: np.ndarray
    duration: np.ndarray
    horizon: float


def prepare_retime(inst: PipelineInstance, params: Mapping[str, Any]) -> RetimeIndex:
    """``orders``: the device sequences; ``horizon`` (s): the earliest schedule's end."""
    orders: Orders = params["orders"]
    n = inst.micro_batches
    arcs = dependency_arcs(inst)
    dur_op = np.repeat(inst.duration, n)
    seq_src = np.concatenate([np.asarray(s[:-1], dtype=np.int64) for s in orders if len(s) > 1] or [np.zeros(0, np.int64)])
    seq_dst = np.concatenate([np.asarray(s[1:], dtype=np.int64) for s in orders if len(s) > 1] or [np.zeros(0, np.int64)])
    return RetimeIndex(
        np.concatenate([arcs.src, seq_src]),
        np.concatenate([arcs.dst, seq_dst]),
        np.concatenate([arcs.gap, dur_op[seq_src]]),
        np.array([seq[0] for seq in orders if seq], dtype=np.int64),
        np.array([seq[-1] for seq in orders if seq], dtype=np.int64),
        dur_op,
        float(params["horizon"]),
    )


def retime_starts(model: Model, inst: PipelineInstance, index: RetimeIndex) -> None:
    """Start times within [0, horizon] after every dependency and sequence arc."""
    s = model.add_vars("start", index.duration.size, lb=0.0, ub=index.horizon)
    precedence_with_lag(model, s, index.src, index.dst, index.gap, "precedence")


def retime_span(model: Model, inst: PipelineInstance, index: RetimeIndex) -> None:
    """min the longest device span (s)."""
    s = model["start"]
    span = model.add_vars("span", (), lb=0.0)
    model.add_constraints("device-span", s[index.lasts] - s[index.firsts] + index.duration[index.lasts] - span <= 0)
    model.minimize(span)


#: the device sequences fixed, the start times of least longest device span
RETIME = ModelSpec("retime", prepare_retime, (retime_starts, retime_span))


def retime(inst: PipelineInstance, orders: Orders, ctx: RunContext | None = None, deadline: float | None = None) -> np.ndarray:
    """Start times (B, N) optimal for the instance objective given the device sequences.

    Makespan: the earliest starts. Longest device span: an LP over the start times with
    the sequences fixed (solved on the context's backend); without a context, earliest.
    `DeadlineReached` past ``deadline`` (`asap`'s checks: large runs only).
    """
    start = asap(inst, orders, deadline=deadline)
    if inst.objective != "device_span" or ctx is None:
        return start
    model, index = RETIME.build(inst, {"orders": orders, "horizon": float((start + inst.duration[:, None]).max())}, name=f"{inst.name}-retime")
    lasts, firsts = index.lasts, index.firsts
    dur_op = index.duration
    warm = model.vector({"start": start.reshape(-1), "span": float(np.max(start.reshape(-1)[lasts] + dur_op[lasts] - start.reshape(-1)[firsts]))})
    res = ctx.solve_model(model, warm_start=warm)
    if res.values is None:
        return start
    lp = np.asarray(res.values_by_block["start"], dtype=float)
    # snap to the exact longest-path times of the LP's own tight arcs: keep LP times, but
    # re-run the earliest-start pass from them as release times so every arc holds exactly.
    return asap(inst, orders, release=lp, deadline=deadline)


def greedy(
    inst: PipelineInstance,
    priority: Callable[[int, int], tuple],
    limit: np.ndarray,
    *,
    reserve: Callable[[int, int, list[int]], float] | None = None,
    tol: float = 1e-12,
    what: str = "the greedy schedule",
    deadline: float | None = None,
) -> np.ndarray:
    """Event-driven list scheduling of single-device blocks: whenever a device is free it
    starts its ready operation of best ``priority(block, micro)`` whose memory fits under
    ``limit`` (bytes per device), together with ``reserve(device, block, next_micro)``
    bytes kept free for later blocks; each block runs its micro-batches in order. Returns
    (B, N) start times in seconds (ZB-H2's greedy and the V-ZB greedy both run on it);
    `DeadlineReached` past ``deadline`` (checked every 64 events)."""
    n, nb = inst.micro_batches, inst.n_blocks
    if np.any(inst.device_mask.sum(axis=1) != 1):
        raise InputError("schedule", f"{inst.name}: this greedy schedule needs every block on one device", "use 1f1b")
    dev_of = inst.device_mask.argmax(axis=1)
    # plain lists, not numpy scalars: each event reads them a few times per block
    preds = predecessor_lists(inst)
    start: list[list[float | None]] = [[None] * n for _ in range(nb)]
    nxt = [0] * nb
    free_at = [0.0] * inst.n_devices
    mem = [0.0] * inst.n_devices
    dur, need_mem, cap = inst.duration.tolist(), inst.memory.tolist(), np.asarray(limit, dtype=float).tolist()
    on_dev = [np.flatnonzero(dev_of == d).tolist() for d in range(inst.n_devices)]
    events = [0.0]
    done = 0
    steps = 0
    while done < nb * n:
        if not events:
            raise InfeasibleError(f"{inst.name}: {what} deadlocks under the memory limit", details={})
        steps += 1
        if steps % 64 == 0:
            check(deadline, what)
        t = heapq.heappop(events)
        while events and events[0] <= t + 1e-12:
            heapq.heappop(events)
        for d in range(inst.n_devices):
            if free_at[d] > t + 1e-12:
                continue
            best = None
            for b in on_dev[d]:
                m = nxt[b]
                if m >= n:
                    continue
                ready = 0.0  # the latest end (plus lag) of its predecessors' micro-batch m
                for a, g in preds[b]:
                    s_a = start[a][m]
                    if s_a is None:
                        break
                    ready = max(ready, s_a + dur[a] + g)
                else:
                    if ready > t + 1e-12:
                        heapq.heappush(events, ready)
                        continue
                    if need_mem[b] > 0:
                        need = mem[d] + need_mem[b] + (reserve(d, b, nxt) if reserve is not None else 0.0)
                        if need > cap[d] + tol:
                            continue
                    key = priority(b, m)
                    if best is None or key < best[0]:
                        best = (key, b, m)
            if best is not None:
                _, b, m = best
                start[b][m] = t
                nxt[b] += 1
                mem[d] += need_mem[b]
                free_at[d] = t + dur[b]
                heapq.heappush(events, free_at[d])
                done += 1
    return np.array(start, dtype=float)
