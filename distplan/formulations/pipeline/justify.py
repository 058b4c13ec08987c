"""Forward-backward improvement (double justification) of a pipeline schedule.

The justification technique of resource-constrained project scheduling (Li & Willis,
EJOR 1992; Valls, Ballestín & Quintanilla, EJOR 2005): given a schedule of makespan C,
schedule the operations backward in time (the reversed dependency graph, each operation
as late as possible, in decreasing order of its finish time), then forward again in
increasing order of the backward schedule's start times (`compaction.list_schedule`, the
parallel generation scheme). The backward pass orders every device by latest start, so
operations with a long remaining path (the last micro-batches' forward passes in a
cool-down) move ahead of operations with slack (backward passes of earlier micro-batches
that a repetend's start-time priorities keep first), and the forward pass compacts again.
The parallel scheme does not guarantee that a pass is no longer (nor do memory limits),
so the passes stop at the first that is not shorter and the caller re-scores every
result with the evaluator.

The backward pass ignores memory (it only makes priorities); the forward pass keeps each
device's memory prefix within the given limits. Times in seconds, memory in bytes.
"""

from __future__ import annotations

import numpy as np

from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.pipeline.common import schedule_objective
from distplan.formulations.pipeline.compaction import guided, list_schedule
from distplan.models.pipeline import PipelineBlock, PipelineInstance


def reversed_instance(inst: PipelineInstance) -> PipelineInstance:
    """The instance with every dependency reversed (same delays) and no memory: its
    schedules read backward in time (micro-batch m as N - 1 - m) are schedules of ``inst``
    without memory limits."""
    succ: dict[str, list[str]] = {b.name: [] for b in inst.blocks}
    for b in inst.blocks:
        for dep in b.deps:
            succ[dep].append(b.name)
    src, dst, lag = inst.edges
    names = [b.name for b in inst.blocks]
    delay = {(names[int(a)], names[int(c)]): float(g) for a, c, g in zip(src.tolist(), dst.tolist(), lag.tolist())}
    blocks = [
        PipelineBlock(
            name=b.name,
            duration=b.duration,
            devices=b.devices,
            memory=0.0,
            deps=tuple(succ[b.name]),
            dep_delays=tuple((s, delay[(b.name, s)]) for s in succ[b.name]),
            role=b.role,
        )
        for b in inst.blocks
    ]
    return inst.with_(blocks=blocks, memory_capacity=None)


def justify(
    inst: PipelineInstance,
    start: np.ndarray,
    limits: list[np.ndarray],
    passes: int = 4,
    rev: PipelineInstance | None = None,
    deadline: float | None = None,
) -> list[np.ndarray]:
    """Up to ``passes`` forward-backward passes from ``start`` ((B, N) seconds); the next
    pass starts from the shortest forward schedule of this one, and the passes stop when
    it is not shorter than the schedule it came from. ``limits`` are the forward passes'
    memory limits (bytes per device, as `compaction.guided`). Returns every forward
    schedule made, retimed to earliest starts (the caller checks them with the evaluator);
    empty when the forward passes deadlock under every limit. At ``deadline`` (a
    ``time.perf_counter()`` value) the passes stop and the schedules made so far are
    returned (the caller tells a stop by the deadline from `deadline.past`)."""
    rev = reversed_instance(inst) if rev is None else rev
    unlimited = np.full(inst.n_devices, np.inf)
    out: list[np.ndarray] = []
    current = np.asarray(start, dtype=float)
    value = schedule_objective(inst, current)
    for _ in range(passes):
        end = current + inst.duration[:, None]
        try:
            back = list_schedule(rev, (-end)[:, ::-1], unlimited, deadline)
            if back is None:  # cannot happen without memory; kept for safety
                break
            latest = -(back[:, ::-1] + inst.duration[:, None])  # backward start times, negated
            made = guided(inst, latest, limits, deadline)
        except DeadlineReached:
            break
        if not made:
            break
        out.extend(made)
        best = min(made, key=lambda s: schedule_objective(inst, s))
        new = schedule_objective(inst, best)
        if new >= value - 1e-9:
            break
        current, value = best, new
    return out
