"""Expert plans evaluated by the same cost model: data parallelism and Megatron-LM.

* ``data_parallel``: every op splits the batch dimension over the largest set of mesh
  axes whose product divides the batch; followers and ops without it follow their input.
* ``megatron`` (Shoeybi et al., "Megatron-LM", 2019; Narayanan et al., SC'21): on the
  tensor-parallel axis (the fastest one unless ``tp_axis`` says otherwise) every linear,
  attention, embedding and loss op splits the first of ``graph.tensor_parallel_dims``
  (heads, FFN, vocabulary) it has: column-parallel qkv and fc1, row-parallel output
  projection and fc2 (all-reduce of the output), heads-split attention, vocab-parallel
  embedding, LM head and cross-entropy; normalizations and elementwise ops follow their
  input (replicated). Other axes are data parallel.

Both raise `InfeasibleError` with the missing memory when their plan does not fit.
"""

from __future__ import annotations

import itertools
import math

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.registry import Formulation, Outcome, RunContext
from distplan.formulations.sharding.alpa_ilp import unfolded
from distplan.models.sharding import GB, TIGHTEST_POINT, ShardingInstance, ShardingPlan, missing_text
from distplan.models.sharding_costs import (
    CostContext,
    OpSemantics,
    Strategy,
    follow_strategy,
    op_cost,
    parse_strategy,
    strategy_name,
    strategy_problem,
    tensor_spec,
)

#: op types that Megatron partitions on the tensor-parallel axis
TENSOR_PARALLEL_TYPES = frozenset({"linear", "matmul", "bmm", "embedding", "attention", "loss"})


def _valid(sem: OpSemantics, strategy: list[str | None], ctx: CostContext, drop_order: list[int]) -> Strategy:
    st = list(strategy)
    for axis in drop_order:
        if strategy_problem(sem, tuple(st), ctx) is None:
            break
        st[axis] = None
    return tuple(st)


def _fits(inst: ShardingInstance, plan: ShardingPlan, name: str) -> None:
    ctx = inst.cost_context
    ndim = len(inst.mesh.shape)
    memory = sum(op_cost(inst.semantics(k), parse_strategy(plan.strategies[op.name], ndim), ctx).memory for k, op in enumerate(inst.ops))
    budget = inst.memory_budget
    if memory > budget:
        raise InfeasibleError(
            f"{inst.name}: the {name} plan needs {memory / GB:.3f} GB on every device at {TIGHTEST_POINT}; "
            f"the budget is {budget / GB:.3f} GB ({missing_text(memory - budget)} missing)",
            details={"needed_bytes": memory, "budget_bytes": budget, "missing_bytes": memory - budget},
        )


def data_parallel_plan(inst: ShardingInstance) -> ShardingPlan:
    ctx = inst.cost_context
    shape = inst.mesh.shape
    batch = inst.training.batch_dim
    size = inst.dims[batch]
    best: tuple[int, ...] = ()
    for r in range(len(shape), 0, -1):
        for axes in itertools.combinations(range(len(shape)), r):
            if size % math.prod(shape[a] for a in axes) == 0 and math.prod(shape[a] for a in axes) > math.prod(shape[a] for a in best):
                best = axes
    chosen: list[Strategy] = []
    out: dict[str, str] = {}
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        if batch in sem.split_labels and not (sem.follows and op.inputs):
            st = _valid(sem, [batch if a in best else None for a in range(len(shape))], ctx, list(range(len(shape))))
        elif op.inputs:
            p = inst.index[op.inputs[0]]
            st = follow_strategy(sem, tensor_spec(inst.semantics(p).output, chosen[p]), ctx)
        else:
            st = tuple([None] * len(shape))
        chosen.append(st)
        out[op.name] = strategy_name(st)
    return ShardingPlan(out)


def megatron_plan(inst: ShardingInstance, tp_axis: int = -1) -> ShardingPlan:
    if not inst.tensor_parallel_dims:
        raise InputError("graph.tensor_parallel_dims", "the megatron plan needs the dims tensor parallelism splits", 'e.g. ["a", "f", "v"] (heads, FFN, vocabulary)')
    ctx = inst.cost_context
    shape = inst.mesh.shape
    ndim = len(shape)
    if tp_axis < 0:
        tp = max(range(ndim), key=lambda a: (inst.mesh.bandwidth[a], a))
    elif tp_axis < ndim:
        tp = tp_axis
    else:
        raise InputError("params.tp_axis", f"the mesh has {ndim} axes, got {tp_axis}", f"use 0..{ndim - 1} or -1 (fastest axis)")
    batch = inst.training.batch_dim
    dp_axes = [a for a in range(ndim) if a != tp]
    chosen: list[Strategy] = []
    out: dict[str, str] = {}
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        if sem.type in TENSOR_PARALLEL_TYPES:
            base: list[str | None] = [batch if (a != tp and batch in sem.split_labels) else None for a in range(ndim)]
            st = _valid(sem, base, ctx, dp_axes)
            for dim in inst.tensor_parallel_dims:
                trial = list(st)
                trial[tp] = dim
                if dim in sem.split_labels and strategy_problem(sem, tuple(trial), ctx) is None:
                    st = tuple(trial)
                    break
        elif op.inputs:
            p = inst.index[op.inputs[0]]
            st = follow_strategy(sem, tensor_spec(inst.semantics(p).output, chosen[p]), ctx)
        else:
            st = _valid(sem, [batch if (a != tp and batch in sem.split_labels) else None for a in range(ndim)], ctx, dp_axes)
        chosen.append(st)
        out[op.name] = strategy_name(st)
    return ShardingPlan(out)


def run_data_parallel(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    instance = unfolded(instance, "data_parallel")
    plan = data_parallel_plan(instance)
    _fits(instance, plan, "data_parallel")
    return Outcome(plan=plan)


def run_megatron(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    instance = unfolded(instance, "megatron")
    plan = megatron_plan(instance, int(ctx.param("tp_axis", -1)))
    _fits(instance, plan, "megatron")
    return Outcome(plan=plan)


DATA_PARALLEL = Formulation(
    kind="sharding",
    name="data_parallel",
    description="baseline: split the batch over the mesh, replicate every weight",
    program="algorithm",
    run=run_data_parallel,
    reference="data parallelism (all-reduce of gradients)",
)
MEGATRON = Formulation(
    kind="sharding",
    name="megatron",
    description="baseline: Megatron-LM tensor parallelism (column/row MLP, head-split attention, vocab-parallel)",
    program="algorithm",
    run=run_megatron,
    reference="Shoeybi et al., Megatron-LM, 2019; Narayanan et al., SC'21",
    params={"tp_axis": -1},
)
