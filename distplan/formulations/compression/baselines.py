"""Baselines: all-reduce everything, Poseidon's sufficient-factor rule, greedy by saving.

Poseidon (Zhang et al., USENIX ATC 2017) broadcasts sufficient factors of an M x N weight
whenever the batch K satisfies K < M N / (M + N), and all-reduces otherwise. The greedy
baseline takes, gradient by gradient in order of saving, the method that saves the most
serial time (channel + encode + decode + redundant compute) against all-reduce, as long as
memory fits. All three leave the channel in release order.
"""

from __future__ import annotations

import numpy as np

from distplan.errors import InfeasibleError
from distplan.formulations.compression.costs import cost_data, memory_terms
from distplan.formulations.registry import Outcome, RunContext
from distplan.models.compression_eval import memory_limit
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan, make_plan


def allreduce_plan(inst: CompressionInstance) -> CompressionPlan:
    """Every gradient by ring all-reduce, nothing duplicated."""
    return make_plan(inst, np.zeros(inst.n_ops, dtype=bool), ["allreduce"] * inst.n_gradients)


def _tree_mask(inst: CompressionInstance, g: int) -> np.ndarray:
    return inst.eligible & (inst.tree == g)


def _memory_use(inst: CompressionInstance, dup: np.ndarray) -> np.ndarray:
    cd = cost_data(inst)
    dup_bytes, bcast_bytes = memory_terms(inst)
    b = dup[cd.cand_dst] & ~dup[cd.cand_src]
    return cd.memory_base + dup_bytes @ dup.astype(float) + bcast_bytes @ b.astype(float)


def poseidon_plan(inst: CompressionInstance) -> CompressionPlan:
    """SFB (the gradient's whole eligible tree duplicated) when factor_rows < M N / (M + N)."""
    dup = np.zeros(inst.n_ops, dtype=bool)
    for g, grad in enumerate(inst.gradients):
        p = int(inst.grad_op[g])
        if grad.shape is None or grad.factor_rows is None or not inst.eligible[p]:
            continue
        m, n = grad.shape
        if grad.factor_rows < m * n / (m + n):
            dup |= _tree_mask(inst, g)
    used = _memory_use(inst, dup)
    over = used - inst.device_capacity
    if np.any(used > memory_limit(inst.device_capacity)):
        d = int(np.argmax(used - memory_limit(inst.device_capacity)))
        raise InfeasibleError(
            f"{inst.name}: Poseidon's rule duplicates ops that need {used[d]:.6g} bytes on device "
            f"{inst.devices[d].name}, which holds {inst.device_capacity[d]:.6g} (over by {over[d]:.6g} bytes)",
            {"device": inst.devices[d].name, "over_bytes": float(over[d])},
        )
    methods = ["sfb" if dup[p] else "allreduce" for p in inst.grad_op.tolist()]
    return make_plan(inst, dup, methods)


def poseidon_if_fits(inst: CompressionInstance) -> CompressionPlan | None:
    """`poseidon_plan`, or None when the rule overflows memory (no candidate then)."""
    try:
        return poseidon_plan(inst)
    except InfeasibleError:
        return None


def greedy_plan(inst: CompressionInstance) -> CompressionPlan:
    """Per gradient the method with the largest serial saving over all-reduce; gradients by
    decreasing saving; sfb only while memory fits."""
    cd = cost_data(inst)
    G = inst.n_gradients
    best_method = ["allreduce"] * G
    best_saving = np.zeros(G)
    for opt in cd.options:
        if opt.method == "allreduce":
            continue
        cost = opt.channel_seconds + float(opt.encode_seconds.max(initial=0.0)) + float(opt.decode_seconds.max(initial=0.0))
        saving = cd.grad_allreduce_seconds[opt.gradient] - cost
        if saving > best_saving[opt.gradient]:
            best_saving[opt.gradient], best_method[opt.gradient] = saving, opt.method
    trees: dict[int, np.ndarray] = {}
    fallback: dict[int, str] = {}
    for g in range(G):
        p = int(inst.grad_op[g])
        if not inst.eligible[p]:
            continue
        tree = _tree_mask(inst, g)
        into = tree[cd.cand_dst] & ~tree[cd.cand_src]
        extra = float(((inst.replicas[tree] - 1)[:, None] * cd.class_time[tree]).sum(axis=0).max(initial=0.0))
        saving = cd.grad_allreduce_seconds[g] - float(cd.cand_seconds[into].sum()) - extra
        if saving > best_saving[g]:
            fallback[g] = best_method[g]
            best_saving[g], best_method[g] = saving, "sfb"
            trees[g] = tree
    dup = np.zeros(inst.n_ops, dtype=bool)
    for g in np.argsort(-best_saving, kind="stable").tolist():
        if best_method[g] != "sfb":
            continue
        trial = dup | trees[g]
        if np.all(_memory_use(inst, trial) <= memory_limit(inst.device_capacity)):
            dup = trial
        else:
            best_method[g] = fallback[g]
    return make_plan(inst, dup, best_method)


def without_gradients(inst: CompressionInstance) -> Outcome | None:
    """An instance with no gradient has nothing to send and nothing to duplicate for: its
    one plan (all compute) for the programs that schedule gradients, which would be empty;
    None when it has gradients."""
    if inst.n_gradients:
        return None
    return Outcome(plan=allreduce_plan(inst), info={"gradients": 0})


def run_allreduce_all(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    inst.check_base_memory()
    return Outcome(plan=allreduce_plan(inst))


def run_poseidon(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    inst.check_base_memory()
    return Outcome(plan=poseidon_plan(inst))


def run_greedy(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    inst.check_base_memory()
    return Outcome(plan=greedy_plan(inst))
