"""Expert plans evaluated by the same cost model: data parallelism and Megatron-LM.

The plans are built by `distplan.formulations.sharding.expert_plans` (which says how);
both formulations raise `InfeasibleError` with the missing memory when their plan does
not fit.
"""

from __future__ import annotations

from distplan.formulations.registry import Formulation, Outcome, RunContext
from distplan.formulations.sharding.alpa_ilp import unfolded
from distplan.formulations.sharding.expert_plans import check_fits, data_parallel_plan, megatron_plan
from distplan.models.sharding import ShardingInstance


def run_data_parallel(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    instance = unfolded(instance, "data_parallel")
    plan = data_parallel_plan(instance)
    check_fits(instance, plan, "data_parallel")
    return Outcome(plan=plan)


def run_megatron(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    instance = unfolded(instance, "megatron")
    plan = megatron_plan(instance, int(ctx.param("tp_axis", -1)))
    check_fits(instance, plan, "megatron")
    return Outcome(plan=plan)


DATA_PARALLEL = Formulation(
    kind="sharding",
    name="data_parallel",
    solves=(),
    description="baseline: split the batch over the mesh, replicate every weight",
    program="algorithm",
    run=run_data_parallel,
    reference="data parallelism (all-reduce of gradients)",
)
MEGATRON = Formulation(
    kind="sharding",
    name="megatron",
    solves=(),
    description="baseline: Megatron-LM tensor parallelism (column/row MLP, head-split attention, vocab-parallel)",
    program="algorithm",
    run=run_megatron,
    reference="Shoeybi et al., Megatron-LM, 2019; Narayanan et al., SC'21",
    params={"tp_axis": -1},
    #: the mesh axis of tensor parallelism; -1: the fastest (`megatron_plan`)
    least={"tp_axis": -1},
)
