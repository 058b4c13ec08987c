"""Sharding formulations: Alpa's ILP, TAP folding, data-parallel and Megatron baselines."""

from __future__ import annotations

from collections import Counter

from distplan.formulations.registry import Bound, register, register_bounds, register_folder
from distplan.formulations.sharding.alpa_ilp import ALPA_ILP
from distplan.formulations.sharding.baselines import DATA_PARALLEL, MEGATRON
from distplan.formulations.sharding.tap import TAP, fold_sharding
from distplan.models.sharding import ShardingInstance
from distplan.models.sharding_costs import enumerate_strategies, op_cost


def least_op_costs(inst: ShardingInstance) -> list[Bound]:
    """Solver-free bound (seconds): every op at its cheapest strategy, no resharding
    (resharding costs are >= 0). Computed once per distinct op signature, times its count,
    signatures in order of their ids. An op that costs nothing (`OpSemantics.zero_cost`)
    adds nothing: replicated, it has no compute and no collective, and no strategy costs
    less than 0 seconds."""
    ctx = inst.cost_context
    ids = inst.signature_ids
    counts = Counter(ids)
    op_of = dict(zip(ids, range(len(ids))))  # an op of every signature (they share their semantics)
    total = 0.0
    for sid in sorted(op_of):
        sem = inst.semantics(op_of[sid])
        if sem.zero_cost:
            continue
        total += counts[sid] * min(op_cost(sem, st, ctx).seconds for st in enumerate_strategies(sem, ctx))
    return [Bound(total, "every op at its cheapest strategy, resharding ignored")]


register(ALPA_ILP)
register(TAP)
register(DATA_PARALLEL)
register(MEGATRON)
register_folder("sharding", fold_sharding)
register_bounds("sharding", least_op_costs)
