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
from distplan.formulations.compression.costs import CostData, cost_data, memory_terms
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
    return greedy_from_savings(inst, *coded_savings(cd, inst.n_gradients), sfb_savings(inst, cd))


def coded_savings(cd: CostData, n_gradients: int) -> tuple[list[str], np.ndarray]:
    """Per gradient the coded method (a codec) of the largest serial saving over all-reduce
    (seconds: all-reduce's channel time less the method's channel, encode and decode
    time), and that saving; "allreduce" and 0 where none saves."""
    best_method = ["allreduce"] * n_gradients
    best_saving = np.zeros(n_gradients)
    for opt in cd.options:
        if opt.method == "allreduce":
            continue
        cost = opt.channel_seconds + float(opt.encode_seconds.max(initial=0.0)) + float(opt.decode_seconds.max(initial=0.0))
        saving = cd.grad_allreduce_seconds[opt.gradient] - cost
        if saving > best_saving[opt.gradient]:
            best_saving[opt.gradient], best_method[opt.gradient] = saving, opt.method
    return best_method, best_saving


def sfb_savings(inst: CompressionInstance, cd: CostData) -> dict[int, tuple[float, np.ndarray]]:
    """Per gradient whose producer is eligible, the serial saving of sfb over all-reduce
    (seconds: its all-reduce less the broadcasts into its tree and the tree's redundant
    compute) and the tree's ops (ascending). Each tree's ops and the candidate arcs into
    them are gathered once: a mask of every op and every arc per gradient took 1.2 s on
    46,080 ops and 10,000 gradients (review rev31); gathered in ascending order, the sums
    add the same numbers in the same order as the masks did."""
    G = inst.n_gradients
    tree_of = np.where(inst.eligible, inst.tree, -1)
    by_tree = np.argsort(tree_of, kind="stable")
    tree_start = np.searchsorted(tree_of[by_tree], np.arange(G + 1))
    by_dst = np.argsort(cd.cand_dst, kind="stable")
    dst_start = np.searchsorted(cd.cand_dst[by_dst], np.arange(inst.n_ops + 1))
    out: dict[int, tuple[float, np.ndarray]] = {}
    for g in range(G):
        if not inst.eligible[int(inst.grad_op[g])]:
            continue
        ops = by_tree[tree_start[g] : tree_start[g + 1]]
        arcs = np.sort(np.concatenate([by_dst[dst_start[v] : dst_start[v + 1]] for v in ops.tolist()])) if ops.size else np.zeros(0, dtype=np.int64)
        into = arcs[tree_of[cd.cand_src[arcs]] != g]
        extra = float(((inst.replicas[ops] - 1)[:, None] * cd.class_time[ops]).sum(axis=0).max(initial=0.0))
        out[g] = (cd.grad_allreduce_seconds[g] - float(cd.cand_seconds[into].sum()) - extra, ops)
    return out


def greedy_from_savings(inst: CompressionInstance, best_method: list[str], best_saving: np.ndarray, sfb: dict[int, tuple[float, np.ndarray]]) -> CompressionPlan:
    """The greedy plan from each gradient's best coded method (`coded_savings`) and its sfb
    saving and tree (`sfb_savings`, the ops as indices or a mask): sfb where it saves more,
    then gradients by decreasing saving, sfb admitted only while memory fits (else the
    gradient keeps its coded method)."""
    best_method, best_saving = list(best_method), best_saving.copy()
    fallback: dict[int, str] = {}
    for g, (saving, _) in sfb.items():
        if saving > best_saving[g]:
            fallback[g] = best_method[g]
            best_saving[g], best_method[g] = saving, "sfb"
    dup = np.zeros(inst.n_ops, dtype=bool)
    for g in np.argsort(-best_saving, kind="stable").tolist():
        if best_method[g] != "sfb":
            continue
        trial = dup.copy()
        trial[sfb[g][1]] = True
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
