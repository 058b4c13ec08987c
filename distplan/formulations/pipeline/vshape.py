"""Schedules of the V placement (two model chunks per device, ``make_pipeline("v2", ...)``):
ZB-V, V-Min, V-Half and V-ZB.

On p devices the model has 2p stages; the device of V rank i holds stage i (chunk 0) and
stage 2p-1-i (chunk 1), so the forward pass goes down the devices and comes back up, and
the backward pass does the same in reverse. Every schedule here fixes the order of the
operations on each device; start times are the earliest the dependencies and the orders
allow (`common.asap`, the papers' "eager execution"). Every plan is checked by the
evaluator like any other.

* ``zb_v``: the handcrafted ZB-V schedule (Qi, Wan, Huang, Lin, Zero Bubble (Almost)
  Pipeline Parallelism, ICLR 2024, arXiv 2401.10241 v2, Sec. 6; the same construction as
  PyTorch's ``ScheduleZBVZeroBubble``): rank i runs 2(p-i)-1 chunk-0 forwards, i pairs
  (chunk-1 F, chunk-0 F), p-i triples (chunk-1 F, B, W), then the steady
  (F0 B0 W0 F1 B1 W1) pattern, and a cool-down that defers W. With F = B = W its stage
  span has no bubble at 1F1B's activation memory.
* ``v_min`` and ``v_half``: the building blocks of Qi et al., "Pipeline Parallelism with
  Controllable Memory", NeurIPS 2024 (arXiv 2405.15362), Sec. 4: one micro-batch's
  chunk-0 F, chunk-1 F, chunk-1 B and chunk-0 B of rank i sit at fixed slots of a
  6-slot-periodic grid (V-Min: ``i, 2p-1-i, 2p+d+i, 4p+d-1-i`` with d = 2 when 3 | p;
  V-Half: ``2i, 3p-2-i, 3p+d+2i-1, 6p+d-i-2`` with d = 3 when 2 | p), repeated every 6
  slots; W passes fill the empty slots after their B; the warm-up and cool-down are then
  squeezed (every operation moves to the earliest free slot after its dependencies that
  does not raise the peak memory), and the order is executed eagerly. Their bubbles are
  about 2/3 and 1/2 of 1F1B's at about 1/3 and 1/2 of its activation memory.
* ``v_zb``: the V-ZB schedule of the same paper (the authors' greedy construction, ZB
  repository ``zbv.py``): a free device runs a ready B (chunk 1 first), else a forward
  (chunk 1 first) within 1F1B's activation memory, else a deferred W; a chunk-0 forward
  keeps room for the chunk-1 forwards of the micro-batches in flight (so the greedy cannot
  deadlock on memory).

DualPipeV (DeepSeek-V3) is not offered: its steady state overlaps the forward of one
micro-batch with the backward of another inside one fused F&B block, which the block model
(one operation per device at a time) cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distplan.errors import InputError
from distplan.formulations.deadline import check
from distplan.formulations.pipeline.common import Orders, block_depth, greedy
from distplan.models.pipeline import PipelineInstance

F, B, W = 0, 1, 2


@dataclass
class VLayout:
    """Blocks of the V placement per device (p devices, 2p stages)."""

    rank: np.ndarray  # (D,) V rank i: the device holds stages i and 2p-1-i
    f: np.ndarray  # (D, 2) forward block of chunk 0 and chunk 1
    b: np.ndarray  # (D, 2) backward (input-gradient) block of chunk 0 and chunk 1
    w: np.ndarray  # (D, 2) weight-gradient block of each chunk (-1 without the B/W split)

    @property
    def split(self) -> bool:
        return bool(np.all(self.w >= 0))


def v_layout(inst: PipelineInstance) -> VLayout:
    """The V placement's blocks per device, or an `InputError` naming what differs."""
    fix = "build the instance with `distplan make pipeline --shape v2` (Python: make_pipeline('v2', ...))"
    p = inst.n_devices
    if np.any(inst.device_mask.sum(axis=1) != 1):
        raise InputError("schedule", f"{inst.name}: V-shape schedules need every block on one device", fix)
    dev = inst.device_mask.argmax(axis=1)
    depth = block_depth(inst)
    roles = inst.role_code
    fwd = sorted(np.flatnonzero(roles == F).tolist(), key=lambda b: (depth[b], b))
    bwd = sorted(np.flatnonzero(roles == B).tolist(), key=lambda b: (depth[b], b))
    seq = dev[fwd]
    if len(fwd) != 2 * p or len(set(seq[:p].tolist())) != p or np.any(seq[p:] != seq[:p][::-1]):
        raise InputError("schedule", f"{inst.name}: not a V placement (2p stages, device i holding stages i and 2p-1-i)", fix)
    if inst.mode == "training" and (len(bwd) != 2 * p or np.any(dev[bwd] != seq[::-1])):
        raise InputError("schedule", f"{inst.name}: the backward blocks do not retrace the V placement", fix)
    rank = np.empty(p, dtype=np.int64)
    rank[seq[:p]] = np.arange(p)
    f = np.stack([np.asarray(fwd)[rank], np.asarray(fwd)[2 * p - 1 - rank]], axis=1)
    b = -np.ones((p, 2), dtype=np.int64)
    w = -np.ones((p, 2), dtype=np.int64)
    if len(bwd) == 2 * p:
        arr = np.asarray(bwd)
        b = np.stack([arr[2 * p - 1 - rank], arr[rank]], axis=1)
        names = [blk.name for blk in inst.blocks]
        for d in range(p):
            for c in range(2):
                hits = [k for k in np.flatnonzero(roles == W).tolist() if names[b[d, c]] in inst.blocks[k].deps and dev[k] == d]
                if hits:
                    w[d, c] = hits[0]
    return VLayout(rank, f, b, w)


def _need_split(inst: PipelineInstance, lay: VLayout, name: str) -> None:
    if not lay.split:
        raise InputError("schedule", f"{inst.name}: {name} needs backward blocks split into B and W", "build with `distplan make pipeline --shape v2 --weight-time W` (Python: make_pipeline('v2', ..., weight_time=W))")


# -- ZB-V (handcrafted) ---------------------------------------------------------------------


def zb_v_orders(inst: PipelineInstance, deadline: float | None = None) -> Orders:
    """Per device, the ZB-V order (see the module docstring). With fewer than 2p-1
    micro-batches the order of 2p-1 is built and the missing micro-batches dropped.
    `DeadlineReached` past ``deadline``, checked per device."""
    lay = v_layout(inst)
    _need_split(inst, lay, "zb_v")
    n, p = inst.micro_batches, inst.n_devices
    total = max(2 * p - 1, n)
    orders: Orders = []
    for d in range(p):
        check(deadline, "the zb_v order")
        orders.append([blk * n + m for blk, m in _zb_v_rank(lay, d, p, total) if m < n])
    return orders


def _zb_v_rank(lay: VLayout, d: int, p: int, total: int) -> list[tuple[int, int]]:
    """(block, micro-batch) sequence of ZB-V on device d for ``total`` micro-batches."""
    i = int(lay.rank[d])
    seq: list[tuple[int, int]] = []
    cnt = {"F0": 0, "F1": 0, "B0": 0, "B1": 0, "W0": 0, "W1": 0}
    table = {"F": lay.f, "B": lay.b, "W": lay.w}

    def put(kind: str, c: int) -> None:
        key = f"{kind}{c}"
        seq.append((int(table[kind][d, c]), cnt[key]))
        cnt[key] += 1

    for _ in range(2 * (p - i) - 1):
        put("F", 0)
    for _ in range(i):
        put("F", 1)
        put("F", 0)
    for _ in range(p - i):
        put("F", 1)
        put("B", 1)
        put("W", 1)
    while cnt["F1"] < cnt["F0"] or cnt["F0"] < total:
        if cnt["F0"] < total:
            put("F", 0)
        put("B", 0)
        put("W", 0)
        put("F", 1)
        put("B", 1)
        put("W", 1)
    for _ in range(i):  # cool-down: W deferred
        put("B", 0)
        put("B", 1)
    for _ in range(p - i):
        put("B", 0)
        put("W", 0)
    while cnt["W1"] < cnt["B1"]:
        put("W", 1)
    while cnt["W0"] < cnt["B0"]:
        put("W", 0)
    return seq


# -- V-Min and V-Half (building blocks) -----------------------------------------------------


def building_block_slots(p: int, kind: str) -> np.ndarray:
    """(p, 4) slots of one micro-batch's chunk-0 F, chunk-1 F, chunk-1 B, chunk-0 B on each
    V rank (Qi et al., NeurIPS 2024, Sec. 4); micro-batch m adds 6 m."""
    i = np.arange(p)
    if kind == "v_min":
        d = 2 if p % 3 == 0 else 0
        return np.stack([i, 2 * p - 1 - i, 2 * p + d + i, 4 * p + d - 1 - i], axis=1)
    if kind == "v_half":
        d = 3 if p % 2 == 0 else 0
        return np.stack([2 * i, 3 * p - 2 - i, 3 * p + d + 2 * i - 1, 6 * p + d - i - 2], axis=1)
    raise ValueError(kind)


def building_block_orders(inst: PipelineInstance, kind: str, deadline: float | None = None) -> Orders:
    """Per device, the order of the squeezed building-block schedule (module docstring).
    `DeadlineReached` past ``deadline``, checked per device and per moved operation (the
    squeeze took 27 s on 128 devices x 4,096 micro-batches: review rev30 D4)."""
    lay = v_layout(inst)
    _need_split(inst, lay, kind)
    n, p = inst.micro_batches, inst.n_devices
    base = building_block_slots(p, kind)
    nops = inst.n_blocks * n
    slot = np.full(nops, -1, dtype=np.int64)
    dev_of_block = inst.device_mask.argmax(axis=1)
    m = np.arange(n)
    for d in range(p):
        i = int(lay.rank[d])
        for t, block in enumerate((lay.f[d, 0], lay.f[d, 1], lay.b[d, 1], lay.b[d, 0])):
            slot[block * n + m] = base[i, t] + 6 * m
    # W passes: each empty slot takes a pending W (chunk 1's first), the rest go at the end
    for d in range(p):
        check(deadline, f"the {kind} schedule")
        taken = np.zeros(int(slot[[lay.b[d, 0] * n + n - 1, lay.b[d, 1] * n + n - 1]].max()) + 2 * n + 2, dtype=bool)
        mine = [blk for blk in (lay.f[d, 0], lay.f[d, 1], lay.b[d, 0], lay.b[d, 1])]
        for blk in mine:
            taken[slot[blk * n + m]] = True
        b_at = {int(slot[lay.b[d, c] * n + k]): c for c in range(2) for k in range(n)}
        pending: list[list[int]] = [[], []]  # chunk 1 first
        done = [0, 0]
        for s in range(taken.size):
            if s in b_at:
                c = b_at[s]
                pending[0 if c == 1 else 1].append(int(lay.w[d, c]) * n + done[c])
                done[c] += 1
            elif not taken[s]:
                for q in pending:
                    if q:
                        slot[q.pop(0)] = s
                        taken[s] = True
                        break
    _squeeze(inst, slot, lay, deadline, kind)
    orders: Orders = []
    for d in range(p):
        ops = np.flatnonzero(dev_of_block[np.arange(nops) // n] == d)
        orders.append(ops[np.argsort(slot[ops], kind="stable")].tolist())
    return orders


def _squeeze(inst: PipelineInstance, slot: np.ndarray, lay: VLayout, deadline: float | None = None, kind: str = "building-block") -> None:
    """Move warm-up and cool-down operations (in slot order) to the earliest free slot
    after their dependencies (and the block's previous micro-batch) that keeps the peak
    memory of the device within the schedule's peak; the steady state (from the first
    chunk-0 B on rank 0 to the last chunk-0 F there) stays as built."""
    n, p = inst.micro_batches, inst.n_devices
    nops = slot.size
    dev = inst.device_mask.argmax(axis=1)[np.arange(nops) // n]
    mem = np.repeat(inst.memory, n)
    src, dst, _ = inst.edges
    preds: list[list[int]] = [[] for _ in range(nops)]
    for a, bb in zip(src.tolist(), dst.tolist()):
        check(deadline, f"the {kind} schedule")
        for k in range(n):
            preds[bb * n + k].append(a * n + k)
    for op in range(nops):
        if op % n:
            preds[op].append(op - 1)
    length = int(slot.max()) + 1
    occ = -np.ones((p, length), dtype=np.int64)
    occ[dev, slot] = np.arange(nops)

    def peak(d: int) -> float:
        row = occ[d]
        ops = row[row >= 0]
        return float(np.cumsum(mem[ops]).max(initial=0.0))

    limit = max(peak(d) for d in range(p))
    r0 = int(np.flatnonzero(lay.rank == 0)[0])
    steady_from = int(slot[lay.b[r0, 0] * n])
    steady_to = int(slot[lay.f[r0, 0] * n + n - 1])
    for op in np.argsort(slot, kind="stable").tolist():
        cur = int(slot[op])
        if steady_from <= cur <= steady_to:
            continue
        check(deadline, f"the {kind} schedule")
        d = int(dev[op])
        lo = max((int(slot[q]) + 1 for q in preds[op]), default=0)
        for s in range(lo, cur):
            if occ[d, s] >= 0:
                continue
            occ[d, cur], occ[d, s] = -1, op
            if peak(d) <= limit + 1e-9:
                slot[op] = s
                break
            occ[d, s], occ[d, cur] = -1, op


# -- V-ZB (greedy) ----------------------------------------------------------------------------


def v_zb_start(inst: PipelineInstance, deadline: float | None = None) -> np.ndarray:
    """(B, N) start times of the V-ZB greedy (module docstring), in seconds."""
    lay = v_layout(inst)
    _need_split(inst, lay, "v_zb")
    p, nb = inst.n_devices, inst.n_blocks
    fmem = np.array([max(float(inst.memory[lay.f[d, 0]]), 0.0) + max(float(inst.memory[lay.f[d, 1]]), 0.0) for d in range(p)])
    limit = np.minimum(inst.capacity, p * fmem)
    cls = np.full(nb, 4)
    chunk = np.zeros(nb, dtype=np.int64)
    for d in range(p):
        cls[lay.b[d, 1]], cls[lay.b[d, 0]], cls[lay.f[d, 1]], cls[lay.f[d, 0]] = 0, 1, 2, 3
        chunk[lay.f[d, 1]] = chunk[lay.b[d, 1]] = chunk[lay.w[d, 1]] = 1
    f0_of = {int(lay.f[d, 0]): (d, int(lay.f[d, 1])) for d in range(p)}

    def reserve(d: int, blk: int, nxt: list[int]) -> float:
        """A chunk-0 forward keeps room for the chunk-1 forwards of the micro-batches in flight."""
        if blk not in f0_of:
            return 0.0
        f1 = f0_of[blk][1]
        owed = nxt[blk] + 1 - nxt[f1]
        return owed * max(float(inst.memory[f1]), 0.0)

    cls_of, chunk_of = cls.tolist(), chunk.tolist()
    return greedy(inst, lambda b, m: (cls_of[b], m, -chunk_of[b]), limit, reserve=reserve, tol=1e-9, what="the V-ZB greedy", deadline=deadline)
