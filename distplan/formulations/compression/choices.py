"""Fixed compression choices: heuristics that pick them and conversions to and from plans.

`min_channel_choice` takes per gradient the way with the least channel time while memory
fits; `improve_choice` is a coordinate descent on the way each gradient is synchronized,
scored by the least schedule (`distplan.formulations.compression.schedule`);
`choice_to_plan` / `choice_from_plan` convert. Units: seconds, bytes.
"""

from __future__ import annotations

import time

import numpy as np

from distplan.formulations.compression.costs import cost_data, memory_terms
from distplan.formulations.compression.schedule import Choice, SelectIndex, least_schedule
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan, make_plan


def _memory_ok(inst: CompressionInstance, dup: np.ndarray, terms: tuple[np.ndarray, np.ndarray]) -> bool:
    cd = cost_data(inst)
    dup_bytes, bcast_bytes = terms
    b = dup[cd.cand_dst] & ~dup[cd.cand_src]
    used = cd.memory_base + dup_bytes @ dup.astype(float) + bcast_bytes @ b.astype(float)
    return bool(np.all(used <= cd.memory_capacity))


def _sfb_variants(inst: CompressionInstance, g: int) -> list[np.ndarray]:
    """Duplicated sets for sfb of gradient g: its whole eligible tree, and its producer alone."""
    p = int(inst.grad_op[g])
    if not inst.eligible[p]:
        return []
    tree = inst.eligible & (inst.tree == g)
    root = np.zeros(inst.n_ops, dtype=bool)
    root[p] = True
    return [tree] if np.array_equal(tree, root) else [tree, root]


def min_channel_choice(inst: CompressionInstance) -> Choice:
    """Per gradient the way with the least channel time (sfb as its whole tree), taken in
    order of saving while memory fits; release order."""
    cd = cost_data(inst)
    terms = memory_terms(inst)
    best = np.full(cd.n_gradients, -1, dtype=np.int64)
    best_tau = np.full(cd.n_gradients, np.inf)
    for o, opt in enumerate(cd.options):
        if opt.channel_seconds < best_tau[opt.gradient]:
            best[opt.gradient], best_tau[opt.gradient] = o, opt.channel_seconds
    fallback = best.copy()
    trees: dict[int, np.ndarray] = {}
    for g in range(cd.n_gradients):
        variants = _sfb_variants(inst, g)
        if not variants:
            continue
        tree = variants[0]
        into = tree[cd.cand_dst] & ~tree[cd.cand_src]
        tau = float(cd.cand_seconds[into].sum())
        if tau < best_tau[g]:
            best[g], best_tau[g], trees[g] = -1, tau, tree
    dup = np.zeros(inst.n_ops, dtype=bool)
    for g in np.argsort(best_tau - cd.grad_allreduce_seconds, kind="stable").tolist():
        if best[g] >= 0:
            continue
        trial = dup | trees[g]
        if _memory_ok(inst, trial, terms):
            dup = trial
        else:
            best[g] = fallback[g]
    return Choice(dup, best, fifo_order(inst))


def improve_choice(inst: CompressionInstance, ch: Choice, si: SelectIndex | None, deadline: float, max_sweeps: int = 4) -> tuple[Choice, int]:
    """Coordinate descent on the way each gradient is synchronized (options, sfb as whole
    tree or producer alone), keeping the order: a change is kept when it lowers (iteration
    time, channel busy time). Stops after ``max_sweeps`` sweeps without change or at
    ``deadline`` (perf_counter seconds). Returns the choice and the number of changes."""
    cd = cost_data(inst)
    terms = memory_terms(inst)
    # each gradient's options, in option order (one pass: a scan of every option per
    # gradient took 2 s on 11,520 ops, past a 2 s limit: review rev30 D2)
    of_option = np.array([o.gradient for o in cd.options], dtype=np.int64)
    by_gradient = np.argsort(of_option, kind="stable")
    opts_of = np.split(by_gradient, np.searchsorted(of_option[by_gradient], np.arange(1, cd.n_gradients)))

    def score(c: Choice) -> tuple[float, float]:
        sched = least_schedule(inst, c, si)
        return (round(sched["iteration"], 12), round(sched["channel_busy"], 12))

    cur = Choice(ch.dup.copy(), ch.option.copy(), ch.order.copy())
    cur_score = score(cur)
    changes = 0
    grads = np.argsort(-cd.grad_allreduce_seconds, kind="stable").tolist()
    for _ in range(max_sweeps):
        changed = False
        for g in grads:
            if time.perf_counter() > deadline:
                return cur, changes
            tree = inst.eligible & (inst.tree == g)
            base_dup = cur.dup & ~tree
            alternatives: list[tuple[int, np.ndarray]] = [(int(o), base_dup) for o in opts_of[g].tolist()]
            alternatives += [(-1, base_dup | v) for v in _sfb_variants(inst, g)]
            for o, dup in alternatives:
                if o == cur.option[g] and np.array_equal(dup, cur.dup):
                    continue
                if o < 0 and not _memory_ok(inst, dup, terms):
                    continue
                option = cur.option.copy()
                option[g] = o
                trial = Choice(dup, option, cur.order)
                sc = score(trial)
                if sc < cur_score:
                    cur, cur_score = trial, sc
                    changes += 1
                    changed = True
        if not changed:
            break
    return cur, changes


def choice_to_plan(inst: CompressionInstance, ch: Choice) -> CompressionPlan:
    cd = cost_data(inst)
    methods = ["sfb" if ch.option[g] < 0 else cd.options[int(ch.option[g])].method for g in range(cd.n_gradients)]
    return make_plan(inst, ch.dup, methods, ch.order.tolist())


def fifo_order(inst: CompressionInstance) -> np.ndarray:
    return np.lexsort((np.arange(inst.n_gradients), inst.grad_op))


def choice_from_plan(inst: CompressionInstance, plan: CompressionPlan) -> Choice:
    """The fixed choices of a plan (for warm starts); the order defaults to release order."""
    cd = cost_data(inst)
    duplicated = set(plan.duplicated)
    dup = np.array([o.name in duplicated for o in inst.ops], dtype=bool)
    option = np.full(cd.n_gradients, -1, dtype=np.int64)
    for o_idx, opt in enumerate(cd.options):
        if plan.sync[inst.gradients[opt.gradient].name] == opt.method:
            option[opt.gradient] = o_idx
    order = np.array([inst.gradient_index[n] for n in plan.order], dtype=np.int64) if plan.order is not None else fifo_order(inst)
    return Choice(dup, option, order)
