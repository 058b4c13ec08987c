"""The sharding evaluator's one-pass form (checks once per distinct strategy, sums over
columns; `distplan.models.sharding.evaluate`) against a plain op-by-op evaluation: on
random plans, valid or with faults of every kind, the same feasibility, objective,
violations (same messages, same order) and details, bit for bit."""

from __future__ import annotations

import heapq
import math
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.api import _load
from distplan.instances.transformer import transformer
from distplan.models.sharding import GB, TIGHTEST_POINT, ShardingInstance, ShardingPlan, evaluate
from distplan.models.sharding_costs import (
    Strategy,
    enumerate_strategies,
    follow_strategy,
    op_cost,
    parse_strategy,
    reshard_seconds,
    strategy_name,
    strategy_problem,
    tensor_spec,
)


def plain_evaluate(inst: ShardingInstance, plan: ShardingPlan) -> tuple[bool, float, list[str], dict[str, Any]]:
    """The evaluator written op by op without caches: checks, then (for a plan without a
    fault) running sums in op order."""
    ctx = inst.cost_context
    ndim = len(inst.mesh.shape)
    violations: list[str] = []
    chosen: list[Strategy] = []
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        name = plan.strategies.get(op.name)
        if name is None:
            violations.append(f"op {op.name!r} has no strategy")
            chosen.append(tuple([None] * ndim))
            continue
        try:
            strategy = parse_strategy(name, ndim)
        except ValueError as exc:
            violations.append(f"op {op.name!r}: strategy {exc}")
            chosen.append(tuple([None] * ndim))
            continue
        problem = strategy_problem(sem, strategy, ctx)
        if problem is not None:
            violations.append(f"op {op.name!r}: strategy {name!r} {problem}")
        elif op.inputs and sem.follows:
            p = inst.producers[k][0]
            want = follow_strategy(sem, tensor_spec(inst.semantics(p).output, chosen[p]), ctx)
            if want != strategy:
                violations.append(f"op {op.name!r} ({op.type}) follows its input {op.inputs[0]!r}: its strategy is {strategy_name(want)!r}, not {name!r}")
        chosen.append(strategy)
    for extra in sorted(set(plan.strategies) - set(inst.index)):
        violations.append(f"the plan names an unknown op {extra!r}")
    if violations:
        return False, math.inf, violations, {}
    compute = comm = reshard = params = acts = 0.0
    per_op = []
    for k, op in enumerate(inst.ops):
        c = op_cost(inst.semantics(k), chosen[k], ctx)
        compute += c.compute
        comm += c.communication
        params += c.param_bytes
        acts += c.activation_bytes
        edge = 0.0
        for j, p in enumerate(inst.producers[k]):
            out = inst.semantics(p).output
            edge += reshard_seconds(out, tensor_spec(out, chosen[p]), tensor_spec(inst.semantics(k).inputs[j], chosen[k]), ctx)
        reshard += edge
        per_op.append((c.compute + c.communication + edge, op.name))
    objective, memory, budget = compute + comm + reshard, params + acts, inst.memory_budget
    if objective == math.inf:
        violations.append("a resharding needs an all-to-all, which this mesh does not allow (mesh.all_to_all false)")
    if memory > budget * (1 + 1e-9):
        missing = f"{(memory - budget) / GB:.3f} GB" if memory - budget >= 1e6 else f"{memory - budget:,.0f} bytes"
        violations.append(f"memory: every device needs {memory / GB:.3f} GB at {TIGHTEST_POINT}, the budget is {budget / GB:.3f} GB ({missing} missing)")
    details = {
        "compute_seconds": compute,
        "collective_seconds": comm,
        "resharding_seconds": reshard,
        "memory_bytes": memory,
        "param_state_bytes": params,
        "activation_bytes": acts,
        "memory_budget_bytes": budget,
        "devices": inst.mesh.num_devices,
        "slowest_ops": [{"op": n, "seconds": t} for t, n in heapq.nlargest(5, per_op)],
    }
    return not violations, objective, violations, details


def _instances() -> list[ShardingInstance]:
    gpt = transformer(2, 256, 4, 128, 8, 1000, mesh=8, device="V100", bandwidth=(25e9,), name="gpt8")
    mesh2 = transformer(2, 256, 4, 128, 8, 1000, mesh=(2, 4), device="V100", bandwidth=(25e9, 240e9), name="gpt2x4")
    no_a2a = transformer(1, 256, 4, 128, 8, 1000, mesh=(2, 2), device="V100", name="no-a2a").with_memory(1e6)
    no_a2a.mesh = type(no_a2a.mesh)(no_a2a.mesh.shape, no_a2a.mesh.bandwidth, no_a2a.mesh.latency, no_a2a.mesh.device, no_a2a.mesh.memory, False)
    return [gpt, mesh2, no_a2a, _load("gpt-1layer-tp8")]


INSTANCES = _instances()
FAULTS = ("none", "missing", "malformed", "bad split", "off layout", "unknown op", "memory")


def _random_plan(inst: ShardingInstance, rng: random.Random, fault: str) -> ShardingPlan:
    ctx = inst.cost_context
    chosen: list[Strategy] = []
    for k in range(len(inst.ops)):
        sem = inst.semantics(k)
        if inst.producers[k] and sem.follows:
            p = inst.producers[k][0]
            chosen.append(follow_strategy(sem, tensor_spec(inst.semantics(p).output, chosen[p]), ctx))
        else:
            chosen.append(rng.choice(enumerate_strategies(sem, ctx)))
    names: dict[str, Any] = {op.name: strategy_name(s) for op, s in zip(inst.ops, chosen)}
    ops = [op.name for op in inst.ops]
    for _ in range(rng.randint(1, 3)):
        victim = rng.choice(ops)
        if fault == "missing":
            names.pop(victim, None)
        elif fault == "malformed":
            names[victim] = rng.choice(["Q", "S(", "", "RRRR", None])
        elif fault == "bad split":
            names[victim] = "S(nope)" + "R" * (len(inst.mesh.shape) - 1)
        elif fault == "off layout":
            followers = [inst.ops[k].name for k in range(len(inst.ops)) if inst.producers[k] and inst.semantics(k).follows]
            victim = rng.choice(followers)
            k = inst.index[victim]
            others = [strategy_name(s) for s in enumerate_strategies(inst.semantics(k), ctx) if strategy_name(s) != names[victim]]
            if others:
                names[victim] = rng.choice(others)
        elif fault == "unknown op":
            names[f"ghost{rng.randint(0, 9)}"] = "R" * len(inst.mesh.shape)
    if fault == "memory":
        return ShardingPlan({n: "R" * len(inst.mesh.shape) for n in ops})
    return ShardingPlan(names)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(which=st.integers(0, len(INSTANCES) - 1), seed=st.integers(0, 2**31), fault=st.sampled_from(FAULTS))
def test_evaluator_equals_the_plain_op_by_op_form(which: int, seed: int, fault: str) -> None:
    inst = INSTANCES[which]
    plan = _random_plan(inst, random.Random(seed), fault)
    check = evaluate(inst, plan)
    want = plain_evaluate(inst, plan)
    assert (check.feasible, check.objective, check.violations, check.details) == want
    if fault in ("missing", "bad split", "unknown op"):
        assert not check.feasible and check.violations  # the fault is always found


def test_every_fault_kind_is_reported() -> None:
    """Each fault kind, alone, makes a plan of the 2x4 GPT infeasible (so the test above
    compares the op-by-op messages, not only valid plans); replicated everywhere overflows
    the budget of the small instance and shows the memory message."""
    rng = random.Random(5)
    for fault in FAULTS[1:6]:
        check = evaluate(INSTANCES[1], _random_plan(INSTANCES[1], rng, fault))
        assert not check.feasible and check.violations, fault
    over = evaluate(INSTANCES[2], _random_plan(INSTANCES[2], rng, "memory"))
    assert not over.feasible and "GB missing" in over.violations[-1]


def _two_input_instance() -> ShardingInstance:
    """x -> y (linear) and two bmm ops: z = bmm(x, y), whose first input is resharded under
    most plans (not only its last), and u = bmm(x, x), one producer in both slots."""
    from distplan.models.common import instance_from_dict

    return instance_from_dict(
        {
            "format": "distplan/1",
            "kind": "sharding",
            "name": "two-inputs",
            "mesh": {"shape": [4], "bandwidth": [25e9], "latency": [2e-6], "device": "V100"},
            "training": {"batch_dim": "b", "optimizer_bytes_per_param": 16.0, "backward_factor": 2.0},
            "graph": {
                "dims": {"b": 8, "s": 128, "h": 256, "f": 512},
                "dtype": "fp16",
                "never_split": [],
                "tensor_parallel_dims": ["h", "f", "s"],
                "ops": [
                    {"name": "x", "type": "input", "out": ["b", "s", "h"]},
                    {"name": "y", "type": "linear", "inputs": ["x"], "out": ["b", "s", "f"], "params": [{"name": "w", "dims": ["h", "f"]}]},
                    {"name": "z", "type": "bmm", "inputs": ["x", "y"], "out": ["b", "h", "f"]},
                    {"name": "u", "type": "bmm", "inputs": ["x", "x"], "out": ["b", "h"]},
                ],
            },
        }
    )


def test_every_input_of_a_many_input_op_is_resharded() -> None:
    """On every plan of a graph whose ops take two inputs (two producers, or one producer in
    both slots), the evaluator equals the op-by-op form bit for bit, and some plans reshard a
    first input at a cost: fails when an op keeps only its last input's resharding, or when
    the per-op sum is taken in another order (review of the one-pass evaluator: no bundled
    instance reshards a non-last input)."""
    import itertools

    inst = _two_input_instance()
    ctx = inst.cost_context
    options = [[strategy_name(s) for s in enumerate_strategies(inst.semantics(k), ctx)] for k in range(len(inst.ops))]
    z, x = inst.index["z"], inst.index["x"]
    first_resharded = 0
    for names in itertools.product(*options):
        plan = ShardingPlan(dict(zip([op.name for op in inst.ops], names)))
        check = evaluate(inst, plan)
        assert (check.feasible, check.objective, check.violations, check.details) == plain_evaluate(inst, plan), names
        out = inst.semantics(x).output
        nd = len(inst.mesh.shape)
        first = reshard_seconds(out, tensor_spec(out, parse_strategy(names[x], nd)), tensor_spec(inst.semantics(z).inputs[0], parse_strategy(names[z], nd)), ctx)
        first_resharded += first > 0
    assert first_resharded > 100
