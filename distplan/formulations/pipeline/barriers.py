"""Barrier blocks: blocks that occupy every device (SPMD / tensor-parallel stages spanning
the whole pipeline, as in Tessel's M- and NN-shaped placements; Lin et al., HPCA 2024).

While a barrier runs, no other block runs anywhere. Two consequences, both exact
arguments (times in seconds):

* **contraction bound.** Take any schedule and delete the time during which barriers
  run (every barrier instance runs alone, so that time is ``N x`` their durations). What
  remains is a schedule of the *contracted* instance: the barriers removed, each
  dependency through them replaced by a direct one, every delay set to zero (a delay may
  have overlapped barrier time). Intervals of the other blocks keep their lengths and
  device orders, starts keep their order on every device, so dependencies and
  one-at-a-time still hold; memory still holds when the removed barriers allocate
  nothing negative (dropping a non-negative delta only lowers the prefixes). Hence
  ``makespan >= N x (barrier durations) + (any lower bound of the contracted instance)``.
* **stacked schedules.** A *head* barrier (all its ancestors are head barriers) can run,
  for every micro-batch, before anything else, and a *tail* barrier (all its descendants
  are tail barriers) after everything else: the rest is then any schedule of the
  instance without them. When every barrier is a head or a tail one (Tessel's M shape),
  such a schedule meets the contraction bound whenever its middle part is optimal.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from distplan.formulations.pipeline.common import gather_ends, topological_rank
from distplan.models.pipeline import PipelineBlock, PipelineInstance, PipelinePlan, evaluate, make_plan


def barrier_blocks(inst: PipelineInstance) -> np.ndarray:
    """(B,) True for the blocks that occupy every device hosting any block."""
    used = inst.device_mask.any(axis=0)
    if not used.any():
        return np.zeros(inst.n_blocks, dtype=bool)
    return np.all(inst.device_mask[:, used], axis=1)


def contract(inst: PipelineInstance, drop: np.ndarray, zero_delays: bool) -> PipelineInstance | None:
    """The instance without the blocks in ``drop`` (B,) bool: a kept block depends on the
    kept blocks it reached through dropped ones. Delays on the kept dependencies stay
    unless ``zero_delays``; dependencies through dropped blocks get no delay of their own
    (the instance's ``comm_delay`` still applies to those across devices unless
    ``zero_delays``, which sets it to zero). None when no block is left."""
    keep = np.flatnonzero(~drop)
    if keep.size == 0:
        return None
    blocks = inst.blocks
    idx = inst.block_index
    direct: dict[int, list[str]] = {}
    for v in inst.topo_order.tolist():  # kept blocks reached through dropped ones
        out: list[str] = []
        for d in blocks[v].deps:
            u = idx[d]
            for w in [d] if not drop[u] else direct[u]:
                if w not in out:
                    out.append(w)
        direct[v] = out
    new: list[PipelineBlock] = []
    for v in keep.tolist():
        b = blocks[v]
        deps = tuple(direct[v])
        if zero_delays:
            delays = tuple((d, 0.0) for d in deps)
        else:
            own = dict(b.dep_delays)
            delays = tuple((d, own[d]) for d in deps if d in own and d in b.deps)
        new.append(replace(b, deps=deps, dep_delays=delays))
    return inst.with_(name=f"{inst.name}-contracted", blocks=new, comm_delay=0.0 if zero_delays else inst.comm_delay)


def contractible(inst: PipelineInstance) -> np.ndarray:
    """(B,) the barriers the contraction bound may remove: those allocating no negative
    memory."""
    return barrier_blocks(inst) & (inst.memory >= 0.0)


def barrier_time(inst: PipelineInstance, drop: np.ndarray) -> float:
    """Seconds during which the dropped barriers run: N x their durations."""
    return float(inst.micro_batches * inst.duration[drop].sum())


def head_tail(inst: PipelineInstance) -> tuple[np.ndarray, np.ndarray]:
    """(head, tail) (B,) bool: barriers whose ancestors are all head barriers, and barriers
    (not heads) whose descendants are all tail barriers."""
    bar = barrier_blocks(inst)
    src, dst, _ = inst.edges
    head = np.zeros(inst.n_blocks, dtype=bool)
    for v in inst.topo_order.tolist():
        head[v] = bool(bar[v]) and bool(np.all(head[src[dst == v]]))
    tail = np.zeros(inst.n_blocks, dtype=bool)
    for v in inst.topo_order[::-1].tolist():
        tail[v] = bool(bar[v]) and not head[v] and bool(np.all(tail[dst[src == v]]))
    return head, tail


@dataclass(frozen=True)
class Stacking:
    """An instance's head and tail barriers ((B,) bool, `head_tail`) and ``rest``, the
    instance without them (`contract`; None when nothing else is left)."""

    head: np.ndarray
    tail: np.ndarray
    rest: PipelineInstance | None

    @property
    def ends(self) -> np.ndarray:
        """(B,) the head and tail barriers together."""
        return self.head | self.tail


def stacking(inst: PipelineInstance, zero_delays: bool = False) -> Stacking | None:
    """The head and tail barriers and the instance without them (its delays set to zero
    with ``zero_delays``, as `contract`); None when the instance has neither."""
    head, tail = head_tail(inst)
    if not (head.any() or tail.any()):
        return None
    return Stacking(head, tail, contract(inst, head | tail, zero_delays))


def stacked_plan(inst: PipelineInstance, stack: Stacking, inner: PipelinePlan) -> PipelinePlan | None:
    """A schedule that runs every head barrier for all micro-batches first, then the rest
    as ``inner`` schedules ``stack.rest``, then every tail barrier; earliest starts along
    those device sequences (`common.gather_ends`). None when the result is infeasible
    (checked by the evaluator)."""
    n = inst.micro_batches
    ends = stack.ends
    rank = topological_rank(inst)
    key = np.empty((inst.n_blocks, n))
    key[~ends] = np.asarray(inner.start, dtype=float)
    key[ends] = rank[ends, None] * n + np.arange(n)  # block by block in topological order
    start = gather_ends(inst, key, stack.head, stack.tail)
    plan = make_plan(inst, start - start.min(), {"schedule": "stacked barriers", "middle": dict(inner.info)})
    return plan if evaluate(inst, plan).feasible else None
