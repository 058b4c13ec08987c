"""Pipeline plans as PyTorch's compute-only schedule (``torch.distributed.pipelining``).

A pipeline instance is *a pipeline of stages* when every block occupies one device and
its blocks form the chain PyTorch's pipelining runtime executes: forward blocks
``F_0 -> F_1 -> ... -> F_{S-1}`` (each depends on the previous one only), then one
backward block per stage in reverse order (the first depends on ``F_{S-1}``, each next
one on the previous backward block), on the device of that stage's forward block, and
optionally one weight-gradient block per stage that depends on that stage's backward
block only. Stage ``s`` is the ``s``-th forward block of the chain, which is how PyTorch
numbers stages: with several chunks per device on the interleaved placement stage
``s`` runs on device ``s mod p`` (stage = chunk x devices + device, Narayanan et al.
SC'21; PyTorch's ``ScheduleInterleaved1F1B``), and on the V placement device ``d`` holds
stages ``d`` and ``2p-1-d`` (Qi et al. ICLR 2024; PyTorch's ``ScheduleZBVZeroBubble``).
Ranks are the instance's devices in their listed order.

Actions are ``torch.distributed.pipelining.schedules._Action`` strings
(``schedules.py``, torch 2.13): ``{stage}F{mb}`` forward, ``{stage}B{mb}`` full backward
(a stage without a W block), ``{stage}I{mb}`` input-gradient backward and
``{stage}W{mb}`` weight-gradient backward (a stage with a W block, Zero Bubble's B/W
split). Each rank's row lists its actions in the plan's start-time order; the CSV is what
``_PipelineScheduleRuntime._load_csv(path, format="compute_only")`` reads (one row per
rank, no header).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import networkx as nx
import numpy as np

from distplan.errors import InputError
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate


@dataclass(frozen=True)
class StageLayout:
    """How the blocks of a pipeline instance map to PyTorch stages and actions."""

    #: number of stages S (forward blocks of the chain)
    n_stages: int
    #: rank (device index) of each stage, (S,)
    rank_of_stage: tuple[int, ...]
    #: per block: (stage, action letter among F, B, I, W)
    actions: tuple[tuple[int, str], ...]
    #: True for the stages whose backward is split into I and W
    split: tuple[bool, ...]

    @property
    def n_ranks(self) -> int:
        return max(self.rank_of_stage) + 1

    @property
    def stages_per_rank(self) -> int:
        return self.n_stages // self.n_ranks

    def shape(self) -> str:
        """``plain`` (one stage per rank), ``interleaved`` (stage s on rank s mod p),
        ``v`` (zig-zag: rank d holds stages d and 2p-1-d, ...), or ``other``."""
        p, ranks = self.n_ranks, self.rank_of_stage
        if self.n_stages % p:
            return "other"
        if self.n_stages == p and all(r == s for s, r in enumerate(ranks)):
            return "plain"
        if all(r == s % p for s, r in enumerate(ranks)):
            return "interleaved"
        zig = [(s % p) if (s // p) % 2 == 0 else p - 1 - (s % p) for s in range(self.n_stages)]
        if list(ranks) == zig:
            return "v"
        return "other"


def stage_layout(inst: PipelineInstance) -> StageLayout:
    """The stages of a pipeline instance (see the module docstring), or InputError naming
    the first block that breaks the pipeline-of-stages structure."""
    if inst.mode != "training":
        raise InputError(
            "mode",
            f"instance {inst.name!r} is an inference pipeline; PyTorch's schedule runtime validates a backward per forward",
            "emit a training pipeline (mode training)",
        )
    blocks = inst.blocks
    idx = inst.block_index
    for b in blocks:
        if len(b.devices) != 1:
            raise InputError(
                f"blocks.{b.name}",
                f"block {b.name!r} runs on {len(b.devices)} devices ({', '.join(b.devices)}): not a pipeline of stages",
                "torch-pipelining runs one stage per block and device; plans with sharded or tensor-parallel blocks have no pipelining schedule",
            )
    fwd = [i for i, b in enumerate(blocks) if b.role == "F"]
    bwd = [i for i, b in enumerate(blocks) if b.role == "B"]
    wgt = [i for i, b in enumerate(blocks) if b.role == "W"]
    # the forward chain
    heads = [i for i in fwd if not blocks[i].deps]
    if len(heads) != 1:
        raise InputError(
            "blocks",
            f"{len(heads)} forward blocks have no dependency ({', '.join(blocks[i].name for i in heads)}): a pipeline has one first stage",
            "torch-pipelining needs one chain of forward blocks",
        )
    next_of: dict[int, int] = {}
    for i in fwd:
        deps = blocks[i].deps
        if not deps:
            continue
        if len(deps) != 1 or blocks[idx[deps[0]]].role != "F":
            raise InputError(
                f"blocks.{blocks[i].name}.deps",
                f"forward block {blocks[i].name!r} depends on {list(deps)}, not on one forward block: not a pipeline of stages",
                "torch-pipelining needs each stage's forward to take the previous stage's output only",
            )
        prev = idx[deps[0]]
        if prev in next_of:
            raise InputError(
                f"blocks.{blocks[i].name}.deps",
                f"forward blocks {blocks[next_of[prev]].name!r} and {blocks[i].name!r} both follow {blocks[prev].name!r}: the forward pass branches",
                "torch-pipelining needs one chain of forward blocks",
            )
        next_of[prev] = i
    chain = [heads[0]]
    while chain[-1] in next_of:
        chain.append(next_of[chain[-1]])
    if len(chain) != len(fwd):
        missing = sorted(set(fwd) - set(chain))
        raise InputError("blocks", f"forward block {blocks[missing[0]].name!r} is not on the forward chain", "one chain of forward blocks")
    n_stages = len(chain)
    stage_of = {b: s for s, b in enumerate(chain)}
    dev = inst.device_index
    rank_of_stage = tuple(dev[blocks[b].devices[0]] for b in chain)
    # the backward chain, in reverse stage order
    if len(bwd) != n_stages:
        raise InputError("blocks", f"{n_stages} forward blocks but {len(bwd)} backward blocks", "one backward block per stage")
    bwd_of_stage: dict[int, int] = {}
    expect = chain[-1]
    remaining = set(bwd)
    for s in range(n_stages - 1, -1, -1):
        found = [i for i in remaining if blocks[i].deps == (blocks[expect].name,)]
        if len(found) != 1:
            raise InputError(
                "blocks",
                f"no single backward block of stage {s} depends on {blocks[expect].name!r} alone "
                f"(found {[blocks[i].name for i in found]}): not a pipeline of stages",
                "backward blocks run in reverse stage order, each after the next stage's backward",
            )
        i = found[0]
        if blocks[i].devices != blocks[chain[s]].devices:
            raise InputError(
                f"blocks.{blocks[i].name}.devices",
                f"backward block {blocks[i].name!r} of stage {s} runs on {blocks[i].devices[0]}, its forward {blocks[chain[s]].name!r} on {blocks[chain[s]].devices[0]}",
                "a stage's forward and backward share its device",
            )
        bwd_of_stage[s] = i
        remaining.discard(i)
        expect = i
    stage_of_b = {i: s for s, i in bwd_of_stage.items()}
    split = [False] * n_stages
    w_stage: dict[int, int] = {}
    for i in wgt:
        deps = blocks[i].deps
        if len(deps) != 1 or idx[deps[0]] not in stage_of_b:
            raise InputError(
                f"blocks.{blocks[i].name}.deps",
                f"weight-gradient block {blocks[i].name!r} depends on {list(deps)}, not on one backward block",
                "a W block follows its stage's B block only",
            )
        s = stage_of_b[idx[deps[0]]]
        if split[s]:
            raise InputError(f"blocks.{blocks[i].name}", f"stage {s} has two weight-gradient blocks", "one W block per stage")
        if blocks[i].devices != blocks[chain[s]].devices:
            raise InputError(f"blocks.{blocks[i].name}.devices", f"weight-gradient block {blocks[i].name!r} is not on its stage's device", "a stage's blocks share its device")
        split[s] = True
        w_stage[i] = s
    # no block may depend on a W block (PyTorch's runtime never waits for one)
    for b in blocks:
        for d in b.deps:
            if blocks[idx[d]].role == "W":
                raise InputError(f"blocks.{b.name}.deps", f"block {b.name!r} depends on weight-gradient block {d!r}", "nothing waits for a W block in a pipeline of stages")
    used = {r for r in rank_of_stage}
    if used != set(range(inst.n_devices)):
        idle = [inst.devices[d] for d in range(inst.n_devices) if d not in used]
        raise InputError("devices", f"devices {idle} hold no stage", "PyTorch gives every rank of the pipeline group at least one stage")
    actions: list[tuple[int, str]] = []
    for i, b in enumerate(blocks):
        if b.role == "F":
            actions.append((stage_of[i], "F"))
        elif b.role == "B":
            s = stage_of_b[i]
            actions.append((s, "I" if split[s] else "B"))
        else:
            actions.append((w_stage[i], "W"))
    return StageLayout(n_stages, rank_of_stage, tuple(actions), tuple(split))


def rank_orders(inst: PipelineInstance, plan: PipelinePlan) -> tuple[StageLayout, list[list[str]]]:
    """(stage layout, per rank the action strings in start-time order) of a checked plan.

    The plan must pass the independent evaluator (dependencies, no overlap, memory), so
    every rank's order is consistent with the others' (PyTorch's lowering pass
    ``_add_send_recv`` then finds a send for every receive)."""
    layout = stage_layout(inst)
    if list(plan.block_names) != [b.name for b in inst.blocks]:
        raise InputError("plan", "the plan's blocks are not the instance's", "emit a plan solved for this instance")
    check = evaluate(inst, plan)
    if not check.feasible:
        raise InputError("plan", f"the evaluator rejects the plan: {check.violations[0]}", "emit a feasible plan (see `distplan evaluate`)")
    start = np.asarray(plan.start, dtype=float)
    n = inst.micro_batches
    rank_rank = {"F": 0, "B": 1, "I": 1, "W": 2}
    # One global order of the (block, micro-batch) actions: a topological order of the
    # dependencies that takes the earliest start among the ready actions, ties broken by
    # kind, micro-batch number and the blocks' topological order. Each rank's row is its
    # part of it, so no action precedes its dependency even when the two start together
    # (a block shorter than the evaluator's tolerance) or, within the tolerance, in the
    # wrong order; the rows had been sorted by start and then by the action's text, which
    # put 0B0 before the 1B0 it depends on, and 10F0 before 9F0 (review rev16 D5).
    topo = np.empty(inst.n_blocks, dtype=np.int64)
    topo[inst.topo_order] = np.arange(inst.n_blocks)
    src, dst, _ = inst.edges
    actions = nx.DiGraph()
    actions.add_nodes_from((i, m) for i in range(inst.n_blocks) for m in range(n))
    actions.add_edges_from(((a, m), (b, m)) for a, b in zip(src.tolist(), dst.tolist()) for m in range(n))

    def key(action: tuple[int, int]) -> tuple[float, int, int, int, int]:
        i, m = action
        return (float(start[i, m]), rank_rank[layout.actions[i][1]], m, int(topo[i]), i)

    rows: list[list[str]] = [[] for _ in range(layout.n_ranks)]
    for i, m in nx.lexicographical_topological_sort(actions, key=key):
        stage, act = layout.actions[i]
        rows[layout.rank_of_stage[stage]].append(f"{stage}{act}{m}")
    return layout, rows


def torch_pipelining_csv(inst: PipelineInstance, plan: PipelinePlan) -> str:
    """The compute-only schedule CSV (one row per rank) of a pipeline plan."""
    _, orders = rank_orders(inst, plan)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    for row in orders:
        writer.writerow(row)
    return buf.getvalue()
