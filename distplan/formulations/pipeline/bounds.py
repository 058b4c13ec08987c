"""Solver-free lower bounds on the objective of a pipeline instance (seconds).

Makespan: a device cannot start before the earliest start of its blocks (dependency
depth), must run all N micro-batches' work on it, and after its last block the rest of
that micro-batch still needs the block's tail: ``min head + N * work + min tail``. A block
runs its N instances on the same devices: ``head + N * duration + tail``.
Longest device span: ``N * work`` of the busiest device.
Barriers (blocks on every device, `barriers.py`): their ``N x`` durations plus the two
bounds above on the instance with them contracted.
"""

from __future__ import annotations

from distplan.formulations.pipeline.barriers import barrier_time, contract, contractible
from distplan.formulations.pipeline.common import block_depth, block_tail
from distplan.formulations.registry import Bound
from distplan.models.pipeline import PipelineInstance


def pipeline_bounds(inst: PipelineInstance) -> list[Bound]:
    """Solver-free lower bounds (seconds) on the instance's objective."""
    out = _base_bounds(inst)
    if inst.objective == "makespan":
        drop = contractible(inst)
        sub = contract(inst, drop, zero_delays=True) if drop.any() else None
        if sub is not None:
            rest = max(b.value for b in _base_bounds(sub))
            out.append(Bound(barrier_time(inst, drop) + rest, "barriers contracted: N x barrier durations + device load / block chain of the rest"))
    return out


def _base_bounds(inst: PipelineInstance) -> list[Bound]:
    n = inst.micro_batches
    work = inst.device_work()
    if inst.objective == "device_span":
        return [Bound(float(n * work.max()), "busiest device: N x work per micro-batch")]
    head = block_depth(inst)
    tail = block_tail(inst)
    per_device = 0.0
    for d in range(inst.n_devices):
        on = inst.device_mask[:, d]
        if on.any():
            per_device = max(per_device, float(head[on].min() + n * work[d] + tail[on].min()))
    per_block = float((head + n * inst.duration + tail).max())
    return [
        Bound(per_device, "device load: earliest start + N x work + least tail"),
        Bound(per_block, "block chain: depth + N x duration + tail"),
    ]
