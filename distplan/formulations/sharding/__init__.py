"""Sharding formulations: Alpa's ILP, TAP folding, data-parallel and Megatron baselines."""

from __future__ import annotations

from distplan.formulations.registry import Bound, register, register_bounds, register_folder
from distplan.formulations.sharding.alpa_ilp import ALPA_ILP
from distplan.formulations.sharding.baselines import DATA_PARALLEL, MEGATRON
from distplan.formulations.sharding.tap import TAP, fold_sharding
from distplan.models.sharding import ShardingInstance
from distplan.models.sharding_costs import enumerate_strategies, op_cost


def least_op_costs(inst: ShardingInstance) -> list[Bound]:
    """Solver-free bound (seconds): every op at its cheapest strategy, no resharding
    (resharding costs are >= 0). Computed once per distinct op signature."""
    ctx = inst.cost_context
    cache: dict[str, float] = {}
    total = 0.0
    for k in range(len(inst.ops)):
        sig = inst.signature(k)
        if sig not in cache:
            sem = inst.semantics(k)
            cache[sig] = min(op_cost(sem, st, ctx).seconds for st in enumerate_strategies(sem, ctx))
        total += cache[sig]
    return [Bound(total, "every op at its cheapest strategy, resharding ignored")]


register(ALPA_ILP)
register(TAP)
register(DATA_PARALLEL)
register(MEGATRON)
register_folder("sharding", fold_sharding)
register_bounds("sharding", least_op_costs)
