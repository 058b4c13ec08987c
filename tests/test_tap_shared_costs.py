"""The cost model's fast paths (issue 16, tap's shared path) give the floats of the plain
definitions, bit for bit: op costs, strategies, layouts and resharding, on every op
signature of the bundled sharding instances and of GPTs on 1-D, 2-D and 3-D meshes."""

from __future__ import annotations

import dataclasses
import itertools
import math
import random
from collections import Counter
from typing import Any

import pytest

import distplan
from distplan.api import _load
from distplan.formulations.sharding import least_op_costs
from distplan.instances import bundled
from distplan.instances.transformer import transformer
from distplan.models.sharding import ShardingInstance, ShardingPlan, evaluate
from distplan.models.sharding_costs import (
    CostContext,
    OpSemantics,
    Spec,
    Strategy,
    TensorSem,
    all_gather_seconds,
    all_reduce_seconds,
    all_to_all_seconds,
    enumerate_strategies,
    follow_strategy,
    op_cost,
    reshard_seconds,
    strategy_name,
    strategy_problem,
    tensor_spec,
)


def reference_op_cost(sem: OpSemantics, strategy: Strategy, ctx: CostContext) -> tuple[float, float, float, float]:
    """`op_cost` as written before its fast paths (compute, communication, parameter bytes,
    activation bytes): the definition in the module docstring, shard counts tensor by tensor."""
    sizes = ctx.axis_sizes
    split = [(axis, label) for axis, label in enumerate(strategy) if label is not None]
    out = sem.output

    def shards(labels: tuple[str, ...]) -> int:
        n = 1
        for axis, label in split:
            if label in labels:
                n *= sizes[axis]
        return n

    out_part = out.nbytes / shards(out.labels)
    in_part = [t.nbytes / shards(t.labels) for t in sem.inputs]
    param_shards = [shards(t.labels) for t in sem.params]
    saved_shards = [shards(t.labels) for t in sem.saved]
    if sem.zero_cost:
        compute = 0.0
    else:
        split_all = 1
        for axis, _ in split:
            split_all *= sizes[axis]
        traffic = sum([*in_part, *[t.nbytes / n for t, n in zip(sem.params, param_shards)], out_part])
        if sem.saved:
            traffic += sum([2 * t.nbytes / n for t, n in zip(sem.saved, saved_shards)])
        fwd = ctx.device.roofline_seconds(sem.flops / split_all, traffic, out.dtype)
        compute = (1.0 + ctx.backward_factor) * fwd
    comm = 0.0
    for axis, label in split:
        if label not in out.labels:
            comm += all_reduce_seconds(out_part, axis, ctx)
        for t, part in zip(sem.inputs, in_part):
            if t.grad and label not in t.labels:
                comm += all_reduce_seconds(part, axis, ctx)
        for t, n in zip(sem.params, param_shards):
            if label not in t.labels:
                comm += all_reduce_seconds(t.nbytes / n, axis, ctx)
    param_bytes = sum([t.numel / n for t, n in zip(sem.params, param_shards)]) * ctx.optimizer_bytes_per_param
    act = sum([t.nbytes / n for t, n in zip(sem.saved, saved_shards)])
    if sem.saves_output:
        act += out_part
    return compute, comm, param_bytes, act


def reference_strategies(sem: OpSemantics, ctx: CostContext) -> list[Strategy]:
    """`enumerate_strategies` by its definition: every combination that `strategy_problem` accepts."""
    return [c for c in itertools.product([None, *sem.split_labels], repeat=len(ctx.axis_sizes)) if strategy_problem(sem, c, ctx) is None]


def reference_one_way(nbytes: float, src: Spec, dst: Spec, ctx: CostContext) -> float:
    """One way of `reshard_seconds` as written before its fast paths: slices, then
    all-to-alls, then gathers, axis by axis (seconds)."""
    cur = list(src)
    sizes = ctx.axis_sizes
    total = 0.0
    for axis in range(len(cur)):
        if cur[axis] == -1 and dst[axis] != -1:
            cur[axis] = dst[axis]
    for phase in ("all_to_all", "gather"):
        for axis in range(len(cur)):
            if cur[axis] == dst[axis]:
                continue
            if (phase == "gather") != (dst[axis] == -1):
                continue
            span = nbytes / math.prod(sizes[b] for b in range(len(cur)) if b != axis and cur[b] != -1)
            if phase == "gather":
                total += all_gather_seconds(span, axis, ctx)
            else:
                if not ctx.all_to_all:
                    return math.inf
                total += all_to_all_seconds(span, axis, ctx)
            cur[axis] = dst[axis]
    return total


def reference_reshard(tensor: TensorSem, src: Spec, dst: Spec, ctx: CostContext) -> float:
    if src == dst:
        return 0.0
    t = reference_one_way(tensor.nbytes, src, dst, ctx)
    if tensor.grad:
        t += reference_one_way(tensor.nbytes, dst, src, ctx)
    return t


def reference_spec(tensor: TensorSem, strategy: Strategy) -> Spec:
    return tuple(tensor.labels.index(label) if (label is not None and label in tensor.labels) else -1 for label in strategy)


def _instances() -> list[ShardingInstance]:
    out: list[Any] = [_load(name) for name, entry in sorted(bundled().items()) if entry["kind"] == "sharding"]
    for mesh, bandwidth in ((4, None), (8, (25e9,)), ((2, 4), (25e9, 240e9)), ((2, 2, 2), None)):
        out.append(transformer(2, 256, 4, 128, 8, 1000, mesh=mesh, device="V100", bandwidth=bandwidth, name="gpt"))
    out.append(transformer(2, 256, 4, 128, 8, 1000, mesh=(2, 2), device="V100", name="no-a2a").with_memory(None))
    out[-1].mesh = dataclasses.replace(out[-1].mesh, all_to_all=False)
    out.append(transformer(2, 96, 3, 20, 6, 50, mesh=(3, 2), device="A100-80GB", name="odd"))  # splits that do not divide
    return out


INSTANCES = _instances()


def _signatures(inst: ShardingInstance) -> list[OpSemantics]:
    first: dict[int, int] = {}
    for k, sid in enumerate(inst.signature_ids):
        first.setdefault(sid, k)
    return [inst.semantics(k) for k in first.values()]


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: f"{i.name}-{'x'.join(map(str, i.mesh.shape))}")
def test_op_cost_equals_the_definition_bit_for_bit(inst: ShardingInstance) -> None:
    """Every signature under every combination of split labels (valid or not): the four
    numbers of `op_cost` are the reference's floats exactly (== on floats, no tolerance),
    and `seconds` / `memory` are their sums."""
    ctx = inst.cost_context
    compared = 0
    for sem in _signatures(inst):
        for combo in itertools.product([None, *sem.split_labels], repeat=len(ctx.axis_sizes)):
            got = op_cost(sem, combo, ctx)
            want = reference_op_cost(sem, combo, ctx)
            assert (got.compute, got.communication, got.param_bytes, got.activation_bytes) == want, (inst.name, sem.type, combo)
            assert got.seconds == want[0] + want[1] and got.memory == want[2] + want[3]
            assert all(math.isfinite(x) and x >= 0 for x in want)
            compared += 1
    assert compared >= len(_signatures(inst))


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: f"{i.name}-{'x'.join(map(str, i.mesh.shape))}")
def test_enumerated_strategies_equal_the_definition(inst: ShardingInstance) -> None:
    """The same strategies in the same order (replicated first)."""
    ctx = inst.cost_context
    for sem in _signatures(inst):
        got = enumerate_strategies(sem, ctx)
        assert got == reference_strategies(sem, ctx), (inst.name, sem.type)
        assert got[0] == (None,) * len(ctx.axis_sizes)


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: f"{i.name}-{'x'.join(map(str, i.mesh.shape))}")
def test_layouts_and_resharding_equal_the_definition(inst: ShardingInstance) -> None:
    """`tensor_spec` for every tensor of every signature under every combination, and
    `reshard_seconds` for every pair of layouts of every tensor (all-to-all allowed or not:
    inf where it is needed)."""
    ctx = inst.cost_context
    for sem in _signatures(inst):
        combos = list(itertools.product([None, *sem.split_labels], repeat=len(ctx.axis_sizes)))
        for tensor in (*sem.inputs, sem.output, *sem.params):
            specs = {reference_spec(tensor, c) for c in combos}
            for c in combos:
                assert tensor_spec(tensor, c) == reference_spec(tensor, c)
            if len(ctx.axis_sizes) <= 2:  # every layout, also those no strategy makes
                specs |= set(itertools.product(range(-1, len(tensor.labels)), repeat=len(ctx.axis_sizes)))
            layouts = sorted(specs)[:40]  # (3-D meshes: 40 of them, -1s first)
            for a in layouts:
                for b in layouts:
                    got, want = reshard_seconds(tensor, a, b, ctx), reference_reshard(tensor, a, b, ctx)
                    assert got == want, (inst.name, tensor, a, b)


@pytest.mark.parametrize("inst", INSTANCES, ids=lambda i: f"{i.name}-{'x'.join(map(str, i.mesh.shape))}")
def test_least_op_costs_equals_the_definition(inst: ShardingInstance) -> None:
    """The solver-free bound: per signature (ascending ids) its count times the least
    seconds over every strategy, zero-cost ops included, as the same float."""
    ctx = inst.cost_context
    counts = Counter(inst.signature_ids)
    first: dict[int, int] = {}
    for k, sid in enumerate(inst.signature_ids):
        first.setdefault(sid, k)
    want = 0.0
    for sid in sorted(first):
        sem = inst.semantics(first[sid])
        want += counts[sid] * min(op_cost(sem, s, ctx).seconds for s in reference_strategies(sem, ctx))
    assert least_op_costs(inst)[0].value == want


@pytest.mark.parametrize("inst", INSTANCES[:4] + INSTANCES[-4:], ids=lambda i: f"{i.name}-{'x'.join(map(str, i.mesh.shape))}")
def test_evaluator_equals_a_plain_recomputation(inst: ShardingInstance) -> None:
    """Random plans (followers keep their input's layout): the evaluator's time, its three
    parts, memory and slowest ops are those of a plain loop over the ops in op order
    (op costs from the reference definition, resharding per input), bit for bit."""
    ctx = inst.cost_context
    rng = random.Random(len(inst.ops))
    for _ in range(3):
        chosen: list[Strategy] = []
        for k in range(len(inst.ops)):
            sem = inst.semantics(k)
            if inst.producers[k] and sem.follows:
                p = inst.producers[k][0]
                chosen.append(follow_strategy(sem, reference_spec(inst.semantics(p).output, chosen[p]), ctx))
            else:
                chosen.append(rng.choice(reference_strategies(sem, ctx)))
        plan = ShardingPlan({op.name: strategy_name(s) for op, s in zip(inst.ops, chosen)})
        compute = comm = reshard = params = acts = 0.0
        per_op = []
        for k, op in enumerate(inst.ops):
            c, m, pb, ab = reference_op_cost(inst.semantics(k), chosen[k], ctx)
            compute, comm, params, acts = compute + c, comm + m, params + pb, acts + ab
            edge = 0.0
            for j, p in enumerate(inst.producers[k]):
                out = inst.semantics(p).output
                edge += reference_reshard(out, reference_spec(out, chosen[p]), reference_spec(inst.semantics(k).inputs[j], chosen[k]), ctx)
            reshard += edge
            per_op.append((c + m + edge, op.name))
        check = evaluate(inst, plan)
        assert check.objective == compute + comm + reshard
        d = check.details
        assert (d["compute_seconds"], d["collective_seconds"], d["resharding_seconds"]) == (compute, comm, reshard)
        assert (d["param_state_bytes"], d["activation_bytes"], d["memory_bytes"]) == (params, acts, params + acts)
        assert d["slowest_ops"] == [{"op": n, "seconds": t} for t, n in sorted(per_op, reverse=True)[:5]]
        assert check.feasible == (params + acts <= inst.memory_budget * (1 + 1e-9) and math.isfinite(check.objective))


def test_evaluator_lists_every_violation_in_op_order() -> None:
    """A plan with one of each fault: the violations come op by op (missing strategy,
    malformed name, a split the op does not allow, a follower off its input's layout),
    then the unknown op; no sums are reported for it."""
    inst = _load("gpt-1layer-tp8")
    good = distplan.solve(inst, "data_parallel").plan
    assert good is not None and evaluate(inst, good).feasible
    names = dict(good.strategies)
    del names["embed"]
    names["l0.ln1"] = "Q"
    names["l0.qkv"] = "S(zz)"
    gelu = inst.semantics(inst.index["l0.gelu"])
    names["l0.gelu"] = next(strategy_name(s) for s in enumerate_strategies(gelu, inst.cost_context) if strategy_name(s) != names["l0.gelu"])
    names["ghost"] = "R"
    check = evaluate(inst, ShardingPlan(names))
    assert not check.feasible and check.objective == math.inf and not check.details
    patterns = ["op 'embed' has no strategy", "op 'l0.ln1': strategy ", "op 'l0.qkv': strategy 'S(zz)' ", "op 'l0.gelu' (", "the plan names an unknown op 'ghost'"]
    assert len(check.violations) == len(patterns)
    for got, want in zip(check.violations, patterns):
        assert got.startswith(want), (got, want)


def test_an_edge_of_several_links_sums_them_link_by_link() -> None:
    """`CostTables._edge_costs` over several links (no bundled skeleton edge has more than
    one, so the summing path is otherwise never run): the first link's array as it is,
    then each further link's added, as np.zeros + the per-link arrays in link order."""
    import numpy as np

    from distplan.formulations.sharding.costgraph import CostTables, build_skeleton

    checked = 0
    for inst in INSTANCES[:4]:
        sk = build_skeleton(inst)
        for e in range(min(len(sk.edge_u), 12)):
            u, v = int(sk.edge_u[e]), int(sk.edge_v[e])
            links = sk.edge_links(e)
            one = CostTables(inst)._edge_costs(sk, u, v, links)
            if not np.any(one):
                continue
            got = CostTables(inst)._edge_costs(sk, u, v, links * 3)  # the edge's links three times over
            assert np.array_equal(got, np.zeros(one.shape) + one + one + one), (inst.name, e)
            assert not np.array_equal(got, one), (inst.name, e)
            checked += 1
    assert checked >= 4
