"""Classic pipeline schedules as sequence generators: GPipe, 1F1B, interleaved 1F1B,
ZB-H1 and ZB-H2.

Each schedule fixes the order of operations on every device; start times are the
earliest the dependencies (with their delays) and the orders allow (`common.asap`). On a
device, the operations of one micro-batch are grouped in *units*: its forward blocks
(F), its backward blocks (B, and with them the W blocks unless the schedule splits them)
in the order of their dependency depth. Warm-up counts are derived from the placement:
a device's 1F1B warm-up is the number of other devices its forward blocks feed (p-1-s for
stage s of a plain pipeline); devices that share a multi-device block use one common
warm-up so that the shared block has the same place in every sequence.

References: GPipe (Huang et al., NeurIPS 2019); 1F1B (PipeDream-Flush, Narayanan et al.,
ICML 2021); interleaved 1F1B (Narayanan et al., SC'21, Megatron's virtual-stage order);
ZB-H1 / ZB-H2 (Qi et al., Zero Bubble Pipeline Parallelism, ICLR 2024).

Every schedule takes the run's ``deadline`` (a ``time.perf_counter()`` value or None) and
raises `DeadlineReached` past it, checked once per device or search step (1F1B's shrinking
warm-up, the greedy's events): on 32 stages and 256 micro-batches 1F1B alone takes seconds.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.deadline import DeadlineReached, baseline_deadline, check, past
from distplan.formulations.pipeline import vshape
from distplan.formulations.pipeline.common import (
    Orders,
    SequenceCycleError,
    asap,
    block_depth,
    check_capacity,
    check_size,
    fitting_peaks,
    greedy,
    orders_from_starts,
)
from distplan.formulations.registry import Outcome, RunContext
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate, make_plan

F, B, W = 0, 1, 2


class DeviceUnits:
    """Per device: the blocks of each unit kind, in dependency-depth order."""

    def __init__(self, inst: PipelineInstance, deadline: float | None = None):
        depth = block_depth(inst)
        self.inst = inst
        #: the run's deadline: `each` checks it between chunks of micro-batches
        self.deadline = deadline
        self.depth = depth
        key = np.lexsort((np.arange(inst.n_blocks), depth))
        rank = np.empty(inst.n_blocks, dtype=np.int64)
        rank[key] = np.arange(inst.n_blocks)
        self.rank = rank
        self.blocks: list[dict[int, list[int]]] = []
        for d in range(inst.n_devices):
            on = [b for b in key.tolist() if inst.device_mask[b, d]]
            self.blocks.append({r: [b for b in on if inst.role_code[b] == r] for r in (F, B, W)})
        self._sorted: dict[tuple[int, tuple[int, ...]], list[int]] = {}

    def unit(self, d: int, kinds: tuple[int, ...], m: int) -> list[int]:
        """Operations of micro-batch ``m`` on device ``d`` of the given roles, in depth order."""
        n = self.inst.micro_batches
        blocks = self._sorted.get((d, kinds))
        if blocks is None:
            blocks = self._sorted[(d, kinds)] = sorted((b for r in kinds for b in self.blocks[d][r]), key=lambda b: self.rank[b])
        return [b * n + m for b in blocks]

    def each(self, d: int, kinds: tuple[int, ...]) -> list[list[int]]:
        """``[unit(d, kinds, m) for m in range(N)]``, built as one array (N of a million:
        a second where the list comprehension took several)."""
        grid = self._grid(d, kinds)
        out: list[list[int]] = []
        for lo in range(0, grid.shape[0], _CHUNK):
            check(self.deadline, "the classic schedule's units")
            out.extend(grid[lo : lo + _CHUNK].tolist())
        return out

    def each_flat(self, d: int, kinds: tuple[int, ...]) -> list[int]:
        """The units of `each` concatenated."""
        check(self.deadline, "the classic schedule's units")
        return self._grid(d, kinds).reshape(-1).tolist()

    def _grid(self, d: int, kinds: tuple[int, ...]) -> np.ndarray:
        n = self.inst.micro_batches
        blocks = np.asarray(self.unit(d, kinds, 0), dtype=np.int64) if n else np.zeros(0, dtype=np.int64)
        return blocks[None, :] + np.arange(n, dtype=np.int64)[:, None]


def downstream_devices(inst: PipelineInstance) -> np.ndarray:
    """(D,) number of other devices holding forward blocks reachable from the device's
    forward blocks (the 1F1B warm-up of a plain pipeline's stage: p - 1 - s)."""
    fwd = inst.role_code == F
    out = np.zeros(inst.n_devices, dtype=np.int64)
    for d in range(inst.n_devices):
        mine = np.flatnonzero(fwd & inst.device_mask[:, d])
        if mine.size == 0:
            continue
        reach = inst.reach[mine].any(axis=0) & fwd
        devs = inst.device_mask[reach].any(axis=0)
        devs[d] = False
        out[d] = int(devs.sum())
    return out


def device_groups(inst: PipelineInstance) -> np.ndarray:
    """(D,) group id: devices connected through multi-device blocks share a group (the
    connected components of the devices' co-occurrence in blocks)."""
    blocks, devices = np.nonzero(inst.device_mask)
    lead = np.argmax(inst.device_mask, axis=1)[blocks]  # each block's first device, per (block, device) pair
    graph = sp.coo_matrix((np.ones(devices.size), (lead, devices)), shape=(inst.n_devices, inst.n_devices))
    _, labels = connected_components(graph, directed=False)
    return np.asarray(labels, dtype=np.int64)


def _group_max(values: np.ndarray, groups: np.ndarray) -> np.ndarray:
    out = values.copy()
    for g in np.unique(groups):
        out[groups == g] = values[groups == g].max()
    return out


#: micro-batches (or tokens) between two deadline checks of the classic schedules' loops
_CHUNK = 1 << 16


def _pattern(queues: dict[str, list[list[int]]], tokens: Iterable[str], deadline: float | None = None) -> list[int]:
    """Concatenate units popped from the named queues in token order (empty queues skip);
    `DeadlineReached` past ``deadline`` (checked every `_CHUNK` tokens)."""
    seq: list[int] = []
    units = {name: iter(q) for name, q in queues.items()}
    for i, tok in enumerate(tokens):
        if deadline is not None and not i % _CHUNK:
            check(deadline, "the classic schedule's order")
        unit = next(units[tok], None)
        if unit is not None:
            seq.extend(unit)
    return seq


# -- GPipe / 1F1B -----------------------------------------------------------------------------


def gpipe_orders(inst: PipelineInstance, deadline: float | None = None) -> Orders:
    """All forward units (micro-batch order), then all backward units."""
    units = DeviceUnits(inst, deadline)
    orders: Orders = []
    for d in range(inst.n_devices):
        check(deadline, "the gpipe schedule")
        orders.append(units.each_flat(d, (F,)) + units.each_flat(d, (B, W)))
    return orders


Queues = list[tuple[list[list[int]], list[list[int]]]]


def one_f_one_b_queues(inst: PipelineInstance, per_block: bool = False, units: DeviceUnits | None = None, deadline: float | None = None) -> Queues:
    """Per device, 1F1B's forward and backward units in the order they are taken (they do
    not depend on the warm-up; see `one_f_one_b_orders`). `DeadlineReached` past
    ``deadline``."""
    units = DeviceUnits(inst, deadline) if units is None else units
    out: Queues = []
    period = float(inst.device_work().max()) if per_block else 0.0
    for d in range(inst.n_devices):
        check(deadline, "the 1f1b schedule")
        if per_block:
            # blocks in the order of an ideal pipelined run: depth + m * (busiest device's
            # work), ties by operation id
            fq = [[op] for op in _ideal_order(units, d, (F,), period)]
            bq = [[op] for op in _ideal_order(units, d, (B, W), period)]
        else:
            fq = units.each(d, (F,))
            check(deadline, "the 1f1b schedule")
            bq = units.each(d, (B, W))
        out.append((fq, bq))
    return out


def _ideal_order(units: DeviceUnits, d: int, kinds: tuple[int, ...], period: float) -> list[int]:
    """The operations of device ``d`` of the given roles by (depth + m ``period``, id)."""
    n = units.inst.micro_batches
    ops = units._grid(d, kinds).reshape(-1)
    key = units.depth[ops // n] + (ops % n) * period
    return ops[np.lexsort((ops, key))].tolist()


def one_f_one_b_orders(
    inst: PipelineInstance, warmup: np.ndarray, per_block: bool = False, queues: Queues | None = None, deadline: float | None = None
) -> Orders:
    """``warmup[d]`` forward units, then one forward and one backward unit alternately,
    then the remaining backward units. With ``per_block`` a unit is a single block (a
    device holding several stages, e.g. the X shape, alternates per block) and the
    warm-up counts blocks. ``queues``: `one_f_one_b_queues` of the same ``per_block``,
    when the caller has them."""
    queues = one_f_one_b_queues(inst, per_block) if queues is None else queues
    orders: Orders = []
    for d, (fq, bq) in enumerate(queues):
        check(deadline, "the 1f1b schedule")
        total = len(fq)
        w = int(min(warmup[d], total))
        tokens = ["F"] * w + ["F", "B"] * max(total, len(bq)) + ["B"] * len(bq)
        orders.append(_pattern({"F": fq, "B": bq}, tokens, deadline))
    return orders


def _memory_error(inst: PipelineInstance, name: str, peaks: np.ndarray) -> InfeasibleError:
    cap = inst.capacity
    d = int(np.argmax(peaks - cap))
    return InfeasibleError(
        f"{inst.name}: the {name} schedule needs memory {peaks[d]:.6g} on device {inst.devices[d]} "
        f"(capacity {cap[d]:.6g}, over by {peaks[d] - cap[d]:.6g})",
        details={"schedule": name, "peak_memory": {inst.devices[k]: float(peaks[k]) for k in range(inst.n_devices)}},
    )


def gpipe(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    orders = gpipe_orders(inst, deadline)
    ok, peaks = fitting_peaks(inst, orders)
    if not ok:
        raise _memory_error(inst, "gpipe", peaks)
    return asap(inst, orders, deadline=deadline), {"schedule": "gpipe"}


def one_f_one_b(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """1F1B with the placement's warm-up, per micro-batch unit and per block (the better
    of the two); when memory is short the warm-up shrinks (all devices together, down to
    one unit in flight)."""
    natural = _group_max(downstream_devices(inst), device_groups(inst))
    units = DeviceUnits(inst, deadline)
    nf = np.array([len(units.blocks[d][F]) for d in range(inst.n_devices)])
    found: list[tuple[float, np.ndarray, dict]] = []
    peaks_seen = np.zeros(inst.n_devices)
    deadlocked = False  # a warm-up whose memory fits, in an order that deadlocks
    for per_block in (False, True):
        check(deadline, "the 1f1b schedule")
        queues = one_f_one_b_queues(inst, per_block, units, deadline)
        warm = natural * (nf if per_block else 1) + (nf - 1 if per_block else 0)
        warm = np.maximum(warm, 0)
        while True:
            candidates = [warm] if np.ptp(warm) == 0 else [warm, np.full_like(warm, warm.min())]
            done = False
            for cand in candidates:
                orders = one_f_one_b_orders(inst, cand, per_block, queues, deadline)
                ok, peaks = fitting_peaks(inst, orders)
                peaks_seen = peaks
                if not ok:
                    continue
                try:
                    start = asap(inst, orders, deadline=deadline)
                except SequenceCycleError:
                    deadlocked = True
                    continue
                span = float((start + inst.duration[:, None]).max() - start.min())
                found.append((span, start, {"schedule": "1f1b", "per_block": per_block, "warmup": [int(x) for x in cand]}))
                done = True
                break
            if done or warm.max() == 0:
                break
            warm = np.maximum(warm - 1, 0)
    if not found and deadlocked and fitting_peaks(inst, orders)[0]:
        # the least warm-up fits the memory, but its order deadlocks: not a memory shortfall
        # (it had said "needs memory 1 (capacity 1, over by 0)" on the x shape)
        raise InfeasibleError(
            f"{inst.name}: the 1f1b schedule has no order that fits: the warm-ups within the memory capacity "
            "(down to one micro-batch in flight) deadlock on this placement",
            details={"schedule": "1f1b", "peak_memory": {inst.devices[k]: float(peaks_seen[k]) for k in range(inst.n_devices)}},
        )
    if not found:
        raise _memory_error(inst, "1f1b", peaks_seen)
    best = min(found, key=lambda f: f[0])
    return best[1], best[2]


# -- interleaved 1F1B (Megatron virtual stages) ------------------------------------------------


def interleaved_orders(inst: PipelineInstance, deadline: float | None = None) -> tuple[Orders, int]:
    """Megatron's interleaved order: forward virtual micro-batches in groups of p
    micro-batches per chunk, backward with chunks reversed, warm-up
    ``2 (p - r - 1) + (v - 1) p`` for the device of pipeline rank r."""
    units = DeviceUnits(inst, deadline)
    n, p = inst.micro_batches, inst.n_devices
    counts = {(len(units.blocks[d][F]), len(units.blocks[d][B])) for d in range(p)}
    if len(counts) != 1 or next(iter(counts))[0] != next(iter(counts))[1] or next(iter(counts))[0] < 1:
        raise InputError(
            "schedule", f"{inst.name}: interleaved 1F1B needs the same number of forward and backward chunks on every device",
            "build the instance with `distplan make pipeline --shape interleaved` (Python: make_pipeline('interleaved', ...))",
        )
    v = next(iter(counts))[0]
    first_depth = np.array([units.depth[units.blocks[d][F][0]] for d in range(p)])
    rank = np.empty(p, dtype=np.int64)
    rank[np.argsort(first_depth, kind="stable")] = np.arange(p)
    groups = [list(range(g, min(g + p, n))) for g in range(0, n, p)]
    orders: Orders = []
    for d in range(p):
        check(deadline, "the interleaved_1f1b schedule")
        fq: list[list[int]] = []
        bq: list[list[int]] = []
        fb = units.blocks[d][F]
        bb = units.blocks[d][B]
        wb = units.blocks[d][W]
        for grp in groups:
            for c in range(v):
                for m in grp:
                    fq.append([fb[c] * n + m])
            for c in range(v):
                for m in grp:
                    ops = [bb[c] * n + m]
                    ops += [w * n + m for w in wb if inst.reach[bb[c], w] and inst.device_mask[w, d]]
                    bq.append(ops)
        total = len(fq)
        warm = min(2 * (p - int(rank[d]) - 1) + (v - 1) * p, total)
        tokens = ["F"] * warm + ["F", "B"] * (total - warm) + ["B"] * warm
        seq = _pattern({"F": fq, "B": bq}, tokens, deadline)
        if wb:
            listed = set(seq)
            seq += [w * n + m for m in range(n) for w in wb if w * n + m not in listed]
        orders.append(seq)
    return orders, v


def interleaved_1f1b(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    orders, v = interleaved_orders(inst, deadline)
    start, info = _ordered(inst, "interleaved_1f1b", orders, "the interleaved order deadlocks on this placement", deadline=deadline)
    return start, {**info, "chunks": v}


# -- Zero Bubble handcrafted schedules -----------------------------------------------------------


def _need_split(inst: PipelineInstance, name: str) -> None:
    if not np.any(inst.role_code == W):
        raise InputError(
            "schedule", f"{inst.name}: {name} needs backward blocks split into B and W", "build with `distplan make pipeline --weight-time W` (Python: make_pipeline(..., weight_time=W))"
        )


def zb_h1_orders(inst: PipelineInstance, deadline: float | None = None) -> Orders:
    """ZB-H1 on stage i of p: p-i-1 warm-up F, then i times (F, B) with W deferred, then
    (F, B, W) while forwards remain, then (B, W), then the remaining W (same in-flight
    micro-batches as 1F1B; Qi et al. 2024, Sec. 2.1)."""
    units = DeviceUnits(inst, deadline)
    n = inst.micro_batches
    down = _group_max(downstream_devices(inst), device_groups(inst))
    p = int(down.max()) + 1
    orders: Orders = []
    for d in range(inst.n_devices):
        check(deadline, "the zb_h1 schedule")
        i = p - 1 - int(down[d])
        fq = units.each(d, (F,))
        bq = units.each(d, (B,))
        check(deadline, "the zb_h1 schedule")
        wq = units.each(d, (W,))
        seq: list[int] = []
        f = b = w = 0
        for _ in range(p - i - 1):
            if f < n:
                seq += fq[f]
                f += 1
        for _ in range(i):
            if f < n:
                seq += fq[f] + bq[b]
                f += 1
                b += 1
        while f < n:
            if not f & 0xFFFF:
                check(deadline, "the zb_h1 schedule")
            seq += fq[f] + bq[b] + wq[w]
            f += 1
            b += 1
            w += 1
        while b < n:
            if not b & 0xFFFF:
                check(deadline, "the zb_h1 schedule")
            seq += bq[b] + wq[w]
            b += 1
            w += 1
        while w < n:
            seq += wq[w]
            w += 1
        orders.append(seq)
    return orders


def zb_h1(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    _need_split(inst, "zb_h1")
    return _ordered(inst, "zb_h1", zb_h1_orders(inst, deadline), "the ZB-H1 order deadlocks on this placement", deadline)


def zb_h2(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """ZB-H2: up to 2p-1 micro-batches in flight per device (Qi et al. 2024, Sec. 2.2):
    every free device starts a ready B first, else a forward while its memory stays
    within (2p-1) micro-batches' activations, else a deferred W (filling the tail)."""
    _need_split(inst, "zb_h2")
    down = _group_max(downstream_devices(inst), device_groups(inst))
    p = int(down.max()) + 1
    fwd_mem = np.array([inst.memory[(inst.role_code == F) & inst.device_mask[:, d]].clip(min=0).sum() for d in range(inst.n_devices)])
    limit = np.minimum(inst.capacity, (2 * p - 1) * fwd_mem)
    rank = {F: 1, B: 0, W: 2}
    rank_of = [rank[r] for r in inst.role_code.tolist()]
    start = greedy(inst, lambda b, m: (rank_of[b], m, b), limit, deadline=deadline)
    orders = _orders_of(inst, start)
    return asap(inst, orders, deadline=deadline), {"schedule": "zb_h2"}


def _ordered(inst: PipelineInstance, name: str, orders: Orders, deadlock: str | None = None, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """The earliest starts (B, N, seconds) of the schedule ``name``'s device ``orders``;
    `InfeasibleError` when they exceed a device's memory, `InputError` (saying
    ``deadlock``) when they contradict the dependencies."""
    ok, peaks = fitting_peaks(inst, orders)
    if not ok:
        raise _memory_error(inst, name, peaks)
    try:
        start = asap(inst, orders, deadline=deadline)
    except SequenceCycleError:
        raise InputError("schedule", f"{inst.name}: {deadlock or f'the {name} order deadlocks on this instance'}", "use 1f1b") from None
    return start, {"schedule": name}


def zb_v(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """ZB-V on the V placement (Qi et al. 2024, arXiv 2401.10241 v2; `vshape.zb_v_orders`)."""
    return _ordered(inst, "zb_v", vshape.zb_v_orders(inst, deadline), deadline=deadline)


def v_min(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """V-Min building block (Qi et al., NeurIPS 2024; `vshape.building_block_orders`)."""
    return _ordered(inst, "v_min", vshape.building_block_orders(inst, "v_min", deadline), deadline=deadline)


def v_half(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """V-Half building block (Qi et al., NeurIPS 2024; `vshape.building_block_orders`)."""
    return _ordered(inst, "v_half", vshape.building_block_orders(inst, "v_half", deadline), deadline=deadline)


def v_zb(inst: PipelineInstance, deadline: float | None = None) -> tuple[np.ndarray, dict]:
    """V-ZB greedy within 1F1B's memory (Qi et al., NeurIPS 2024; `vshape.v_zb_start`)."""
    start = vshape.v_zb_start(inst, deadline)
    return _ordered(inst, "v_zb", _orders_of(inst, start), deadline=deadline)


def _orders_of(inst: PipelineInstance, start: np.ndarray) -> Orders:
    return orders_from_starts(inst, start)


#: each takes the instance and the run's deadline (None: no limit)
SCHEDULES: dict[str, Callable[[PipelineInstance, float | None], tuple[np.ndarray, dict]]] = {
    "gpipe": gpipe,
    "1f1b": one_f_one_b,
    "interleaved_1f1b": interleaved_1f1b,
    "zb_h1": zb_h1,
    "zb_h2": zb_h2,
    "zb_v": zb_v,
    "v_min": v_min,
    "v_half": v_half,
    "v_zb": v_zb,
}


def baseline_plan(inst: PipelineInstance, name: str, deadline: float | None = None) -> PipelinePlan:
    """The plan of one classic schedule (raises when it does not fit in memory, and
    `DeadlineReached` past ``deadline``)."""
    check_capacity(inst)
    start, info = SCHEDULES[name](inst, deadline)
    start = start - start.min()
    return make_plan(inst, start, info)


def best_baseline(inst: PipelineInstance, deadline: float | None = None) -> tuple[str, PipelinePlan] | None:
    """The classic schedule with the least objective that fits in memory (or None);
    `DeadlineReached` past ``deadline`` (callers that use it as an optional incumbent
    call `baseline_incumbent`, which keeps the schedules done by then)."""
    found: list[tuple[float, str, PipelinePlan]] = []
    _collect(inst, deadline, found)
    return _least(found)


#: the order `_collect` computes the classic schedules in: gpipe first, the cheapest (one
#: order, one earliest-start pass; it fails at once where memory is short), so that a run
#: stopped early still has a plan; then the ones usually shortest (zero-bubble and V
#: schedules; each raises at once where it does not apply), so that a run whose deadline
#: stops the list keeps the best it could have had in that time (a 64-stage,
#: 2000-micro-batch pipeline at a 10 s limit kept gpipe, 10252, where zb_h1 gives 10189 and
#: zb_h2 10126: they came last)
COMPUTE_ORDER: tuple[str, ...] = ("gpipe", "v_zb", "zb_v", "v_half", "v_min", "zb_h2", "zb_h1", "interleaved_1f1b", "1f1b")


def _collect(inst: PipelineInstance, deadline: float | None, found: list[tuple[float, str, PipelinePlan]], first_deadline: float | None = None) -> None:
    """Append (objective, name, plan) of every classic schedule that fits in memory to
    ``found``, in `COMPUTE_ORDER` (those done stay when `DeadlineReached` stops it).
    ``first_deadline``: the deadline of the schedules tried while ``found`` is empty,
    when later than ``deadline`` (the first plan may take longer than the others get)."""
    later = first_deadline is not None and deadline is not None and first_deadline > deadline
    for name in sorted(SCHEDULES, key=lambda name: COMPUTE_ORDER.index(name) if name in COMPUTE_ORDER else len(COMPUTE_ORDER)):
        until = first_deadline if later and not found else deadline
        check(until, "the classic schedules")  # (one that does not apply raises before its own check)
        try:
            plan = baseline_plan(inst, name, until)
        except (InfeasibleError, InputError):
            continue
        chk = evaluate(inst, plan)
        if chk.feasible:
            found.append((chk.objective, name, plan))


def _least(found: list[tuple[float, str, PipelinePlan]]) -> tuple[str, PipelinePlan] | None:
    """Of `_collect`'s schedules, the least objective; among those within 1e-12 of it, the
    first in `SCHEDULES` order."""
    if not found:
        return None
    least = min(item[0] for item in found)
    rank = {name: k for k, name in enumerate(SCHEDULES)}
    _, name, plan = min((item for item in found if item[0] <= least + 1e-12), key=lambda item: rank[item[1]])
    return name, plan


def baseline_incumbent(inst: PipelineInstance, deadline: float | None, first_deadline: float | None = None) -> tuple[str, PipelinePlan] | None:
    """`best_baseline` as an optional incumbent: when ``deadline`` passes first, the best
    of the schedules done by then (None without any). ``first_deadline`` (later than
    ``deadline``): until one schedule is done, the schedules run on to it, so that a run
    that gave its baselines a share of its time still has a plan when the first classic
    schedule takes longer than that share (as on 528k operations)."""
    if past(deadline) and past(first_deadline):
        return None
    found: list[tuple[float, str, PipelinePlan]] = []
    with contextlib.suppress(DeadlineReached):  # the schedules done by then stay
        _collect(inst, deadline, found, first_deadline)
    return _least(found)


def make_run(name: str) -> Callable[[PipelineInstance, RunContext], Outcome]:
    def run(inst: PipelineInstance, ctx: RunContext) -> Outcome:
        check_size(inst)
        # at least `BASELINE_GRACE` (a limit used up while the command loaded: review
        # rev23, 1f1b exited 4 at --time-limit 0.3); past that `DeadlineReached` escapes
        return Outcome(plan=baseline_plan(inst, name, baseline_deadline(ctx.deadline)))

    run.__name__ = f"run_{name}"
    return run
