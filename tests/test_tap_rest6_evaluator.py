"""The sharding evaluator decides each validity rule once per key (`_StrategyRules`), for
its one-pass check and for its op-by-op messages alike: plans with several kinds of fault
at once give the op-by-op messages, and every rule runs once per distinct key."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from test_tap_rest5_evaluator import FAULTS, INSTANCES, _random_plan, plain_evaluate

from distplan.models import sharding
from distplan.models.sharding import ShardingPlan, evaluate
from distplan.models.sharding_costs import enumerate_strategies, strategy_name


def _mixed_plan(which: int, seed: int) -> ShardingPlan:
    """A plan carrying the faults of several random plans at once: a follower may be off
    its input's layout while that input has no strategy or a malformed one."""
    inst = INSTANCES[which]
    rng = random.Random(seed)
    names = dict(_random_plan(inst, rng, "none").strategies)
    for fault in rng.sample(FAULTS[1:6], rng.randint(2, 4)):
        faulty = _random_plan(inst, rng, fault).strategies
        for op in set(names) | set(faulty):
            if faulty.get(op, "?") != names.get(op, "?") or op not in faulty:
                if op in faulty:
                    names[op] = faulty[op]
                elif rng.random() < 0.5:
                    names.pop(op, None)
    return ShardingPlan(names)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(which=st.integers(0, len(INSTANCES) - 1), seed=st.integers(0, 2**31))
def test_mixed_faults_give_the_op_by_op_messages(which: int, seed: int) -> None:
    inst = INSTANCES[which]
    plan = _mixed_plan(which, seed)
    check = evaluate(inst, plan)
    assert (check.feasible, check.objective, check.violations, check.details) == plain_evaluate(inst, plan)


def _counting(monkeypatch, name: str) -> list[tuple]:  # type: ignore[no-untyped-def]
    calls: list[tuple] = []
    real = getattr(sharding, name)

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(sharding, name, counted)
    return calls


def test_each_rule_is_decided_once_per_key(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A rejected plan of the 2x4 GPT (every follower on another strategy than its input's
    layout, one op with a split it does not allow, one malformed name): the messages are the op-by-op ones, and every
    strategy check, follower layout and parse runs once per distinct key, not once per op
    (fails when the messages recheck op by op)."""
    inst = INSTANCES[1]
    rng = random.Random(11)
    plan = _random_plan(inst, rng, "none")
    names = dict(plan.strategies)
    ops = list(inst.index)
    followers = {ops[k] for k in inst._followers}
    for op in followers:  # another strategy the follower allows: off its input's layout
        k = inst.index[op]
        names[op] = next(n for n in map(strategy_name, enumerate_strategies(inst.semantics(k), inst.cost_context)) if n != names[op])
    names[ops[3]] = "S(nope)R"
    names[ops[5]] = "Q"
    plan = ShardingPlan(names)
    problems = _counting(monkeypatch, "strategy_problem")
    layouts = _counting(monkeypatch, "follow_strategy")
    parses = _counting(monkeypatch, "parse_strategy")
    check = evaluate(inst, plan)
    monkeypatch.undo()
    assert (check.feasible, check.objective, check.violations, check.details) == plain_evaluate(inst, plan)
    assert len(check.violations) >= len(followers)
    sig = inst.signature_ids
    own = {(sig[k], names[op]) for k, op in enumerate(ops)}
    assert len(own) < len(ops)  # (ops of equal signature and strategy share their checks)
    assert len(parses) == len(set(names.values()))
    assert len(problems) == len([key for key in own if key[1] != "Q"])
    assert len(set(problems)) == len(problems)
    checked = [inst.index[op] for op in followers if op not in (ops[3], ops[5])]  # (the others fail their own check)
    follower_keys = {(sig[k], names[ops[k]], sig[p], names.get(ops[p])) for k in checked for p in inst.producers[k][:1]}
    assert len(layouts) == len(follower_keys)


def test_names_of_other_types_get_their_own_messages() -> None:
    """Plan values that are not strings but equal each other (1 and True) are each reported
    as given: the rules' memos are keyed by value, so they are parsed apart (review rev6a:
    both were reported as 1)."""
    inst = INSTANCES[0]
    names = dict(_random_plan(inst, random.Random(3), "none").strategies)
    sig = inst.signature_ids
    a, b = next((p, q) for p in range(len(inst.ops)) for q in range(p + 1, len(inst.ops)) if sig[p] == sig[q])
    names[inst.ops[a].name], names[inst.ops[b].name] = 1, True
    plan = ShardingPlan(names)
    check = evaluate(inst, plan)
    assert (check.feasible, check.objective, check.violations, check.details) == plain_evaluate(inst, plan)
    assert any(v.endswith("got True") for v in check.violations) and any(v.endswith("got 1") for v in check.violations)


def test_a_last_op_without_inputs_is_summed() -> None:
    """An op without inputs at the end of the graph (no resharding of its own): the per-op
    resharding sums still have a row for it and the evaluator equals the op-by-op form on
    every plan (review rev6a: `bincount` without its length failed only there, and no
    instance had that shape)."""
    import itertools

    from test_tap_rest5_evaluator import _two_input_instance

    from distplan.models.common import instance_from_dict

    data = _two_input_instance().to_dict()
    data["graph"]["ops"].append({"name": "v", "type": "input", "out": ["b", "s", "h"]})
    inst = instance_from_dict(data)
    ctx = inst.cost_context
    options = [[strategy_name(s) for s in enumerate_strategies(inst.semantics(k), ctx)] for k in range(len(inst.ops))]
    for names in itertools.islice(itertools.product(*options), 0, None, 7):
        plan = ShardingPlan(dict(zip([op.name for op in inst.ops], names)))
        check = evaluate(inst, plan)
        assert (check.feasible, check.objective, check.violations, check.details) == plain_evaluate(inst, plan), names
