"""Expert sharding plans, built without a solver: data parallelism and Megatron-LM.

* `data_parallel_plan`: every op splits the batch dimension over the largest set of mesh
  axes whose product divides the batch; followers and ops without it follow their input.
* `megatron_plan` (Shoeybi et al., "Megatron-LM", 2019; Narayanan et al., SC'21): on the
  tensor-parallel axis (the fastest one unless ``tp_axis`` says otherwise) every linear,
  attention, embedding and loss op splits the first of ``graph.tensor_parallel_dims``
  (heads, FFN, vocabulary) it has: column-parallel qkv and fc1, row-parallel output
  projection and fc2 (all-reduce of the output), heads-split attention, vocab-parallel
  embedding, LM head and cross-entropy; normalizations and elementwise ops follow their
  input (replicated). Other axes are data parallel.

They are the ``data_parallel`` and ``megatron`` formulations
(`distplan.formulations.sharding.baselines`) and the incumbents an exact formulation
stopped by its time limit falls back on (`best_expert_plan`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from distplan.errors import InfeasibleError, InputError
from distplan.models.sharding import TIGHTEST_POINT, ShardingInstance, ShardingPlan, bytes_over, bytes_text, evaluate
from distplan.models.sharding_costs import (
    CostContext,
    OpSemantics,
    Strategy,
    follow_strategy,
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


class _Strategies:
    """The strategies an expert rule picks, once per distinct case: ops of repeated layers
    share their `OpSemantics` object (`ShardingInstance.semantics`), so a rule's choice for
    an op depends only on that object and, for a follower, on its producer's object and
    strategy (40,965 ops: 0.6 s -> a few hundred distinct cases, review rev25)."""

    def __init__(self) -> None:
        self._picked: dict[tuple[Any, ...], Strategy] = {}
        self._names: dict[Strategy, str] = {}

    def pick(self, key: tuple[Any, ...], rule: Callable[..., Strategy], *args: Any) -> Strategy:
        """``rule(*args)``'s strategy for the case ``key`` (ids of semantics objects, which
        the instance keeps alive, and strategies)."""
        st = self._picked.get(key)
        if st is None:
            st = self._picked[key] = rule(*args)
        return st

    def follow(self, inst: ShardingInstance, k: int, sem: OpSemantics, chosen: list[Strategy], ctx: CostContext) -> Strategy:
        """Op ``k``'s strategy following its input 0's layout."""
        p = inst.index[inst.ops[k].inputs[0]]
        parent = inst.semantics(p)
        return self.pick(("follow", id(sem), id(parent), chosen[p]), _follow, sem, parent, chosen[p], ctx)

    def name(self, st: Strategy) -> str:
        found = self._names.get(st)
        if found is None:
            found = self._names[st] = strategy_name(st)
        return found


def _follow(sem: OpSemantics, parent: OpSemantics, parent_strategy: Strategy, ctx: CostContext) -> Strategy:
    return follow_strategy(sem, tensor_spec(parent.output, parent_strategy), ctx)


def check_fits(inst: ShardingInstance, plan: ShardingPlan, name: str) -> None:
    """`InfeasibleError` naming the bytes per device a plan misses of the memory budget,
    when the evaluator rejects it for memory (its sum and its tolerance: `evaluate`,
    `bytes_over`). Other faults are left to the evaluator's check of the run's plan."""
    details = evaluate(inst, plan).details
    memory = details.get("memory_bytes")
    budget = inst.memory_budget
    if memory is not None and bytes_over(memory, budget):
        raise InfeasibleError(
            f"{inst.name}: the {name} plan needs {bytes_text(memory)} on every device at {TIGHTEST_POINT}; "
            f"the budget is {bytes_text(budget)} ({bytes_text(memory - budget)} missing)",
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
    memo = _Strategies()
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        if batch in sem.split_labels and not (sem.follows and op.inputs):
            st = memo.pick(("split", id(sem)), _valid, sem, [batch if a in best else None for a in range(len(shape))], ctx, list(range(len(shape))))
        elif op.inputs:
            st = memo.follow(inst, k, sem, chosen, ctx)
        else:
            st = tuple([None] * len(shape))
        chosen.append(st)
        out[op.name] = memo.name(st)
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

    def data_parallel(sem: OpSemantics) -> Strategy:
        return _valid(sem, [batch if (a != tp and batch in sem.split_labels) else None for a in range(ndim)], ctx, dp_axes)

    def tensor_parallel(sem: OpSemantics) -> Strategy:
        st = data_parallel(sem)
        for dim in inst.tensor_parallel_dims:
            trial = list(st)
            trial[tp] = dim
            if dim in sem.split_labels and strategy_problem(sem, tuple(trial), ctx) is None:
                return tuple(trial)
        return st

    chosen: list[Strategy] = []
    out: dict[str, str] = {}
    memo = _Strategies()
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        if sem.type in TENSOR_PARALLEL_TYPES:
            st = memo.pick(("tensor", id(sem)), tensor_parallel, sem)
        elif op.inputs:
            st = memo.follow(inst, k, sem, chosen, ctx)
        else:
            st = memo.pick(("data", id(sem)), data_parallel, sem)
        chosen.append(st)
        out[op.name] = memo.name(st)
    return ShardingPlan(out)


def best_expert_plan(inst: ShardingInstance, tp_axis: int = -1) -> tuple[str, ShardingPlan, float] | None:
    """The expert plan of least evaluated iteration time (seconds) that the evaluator
    accepts: ``(name, plan, seconds)``, None when neither fits the memory budget (or the
    instance names no tensor-parallel dims and data parallelism does not fit)."""
    best: tuple[str, ShardingPlan, float] | None = None
    for name in ("megatron", "data_parallel"):
        try:
            plan = megatron_plan(inst, tp_axis) if name == "megatron" else data_parallel_plan(inst)
        except InputError:  # no tensor-parallel dims: no Megatron plan
            continue
        check = evaluate(inst, plan)
        if check.feasible and (best is None or check.objective < best[2]):
            best = (name, plan, check.objective)
    return best


def expert_if_better(instance: ShardingInstance, plan: ShardingPlan | None, info: dict[str, Any], own: str) -> ShardingPlan | None:
    """A run that did not prove its plan optimal (time limit) returns the expert plan
    (`best_expert_plan`: Megatron-LM or data parallel) instead of its incumbent when the
    evaluator finds the expert plan faster, or when there is no accepted incumbent: an
    exact formulation stopped early never returns less than the baselines a user would
    compare it with. ``info["incumbent"]`` records which plan is returned (``own`` names
    the run's own); an incumbent the evaluator rejects is returned only without an expert
    plan, for the evaluator to name its fault."""
    expert = best_expert_plan(instance)
    if plan is not None:
        check = evaluate(instance, plan)
        if check.feasible and (expert is None or check.objective <= expert[2]):
            info["incumbent"] = own
            return plan
    if expert is None:
        return plan
    name, expert_plan, seconds = expert
    info["incumbent"] = name
    info["objective_seconds"] = seconds
    return expert_plan
