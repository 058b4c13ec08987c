"""The expert plans (Megatron-LM, data parallel) pick each distinct case's strategy once
(`expert_plans._Strategies`: ops of repeated layers share their semantics; 40,965 ops took
0.6 s per plan, review rev25). The plans equal the rule applied to every op on its own."""

from __future__ import annotations

from typing import Any

import pytest

import distplan
from distplan.formulations.sharding import expert_plans
from distplan.instances import bundled
from distplan.instances.transformer import transformer
from distplan.instances.zoo_sharding import llama_sharding
from distplan.models.common import instance_from_dict


def _two_roots() -> Any:
    """Two follower chains of equal ops (so equal semantics) from roots the rules split
    differently: a column-parallel linear (FFN dim) and a graph input (batch dim). The
    chains' last ops share their producer's semantics but not its strategy."""
    doc = distplan.load_instance("gpt-1layer-tp8").to_dict()
    doc["name"] = "two-follower-chains"
    doc["graph"]["dims"]["b"] = 8
    ops: list[dict[str, Any]] = [
        {"name": "x", "type": "input", "out": ["b", "s", "h"]},
        {"name": "fc", "type": "linear", "inputs": ["x"], "out": ["b", "s", "f"], "params": [{"name": "w", "dims": ["h", "f"]}]},
        {"name": "y", "type": "input", "out": ["b", "s", "f"]},
    ]
    for root in ("fc", "y"):  # (a graph input's follower differs from the others: 3 ops)
        for k in range(3):
            ops.append({"name": f"{root}.act{k}", "type": "elementwise", "inputs": [f"{root}.act{k - 1}" if k else root], "out": ["b", "s", "f"]})
    doc["graph"]["ops"] = ops
    return instance_from_dict(doc)


def _cases() -> list[Any]:
    names = sorted(n for n, e in bundled().items() if e.get("kind") == "sharding")
    return [
        *[pytest.param(n, id=n) for n in names],
        pytest.param(transformer(6, 1024, 16, 512, 6, 32000, mesh=(2, 4), sequence_split=True), id="gpt-seqsplit-2x4"),
        pytest.param(llama_sharding("llama3-8b", batch=8, mesh=(2, 4), layers=3), id="llama3-8b-l3-2x4"),
        pytest.param(_two_roots(), id="two-follower-chains"),
    ]


@pytest.mark.parametrize("instance", _cases())
@pytest.mark.parametrize("plan", ["megatron_plan", "data_parallel_plan"])
def test_shared_cases_equal_the_rule_per_op(instance: Any, plan: str, monkeypatch: pytest.MonkeyPatch) -> None:
    inst = distplan.load_instance(instance) if isinstance(instance, str) else instance
    build = getattr(expert_plans, plan)
    shared = build(inst)
    monkeypatch.setattr(expert_plans._Strategies, "pick", lambda self, key, rule, *args: rule(*args))
    assert build(inst).to_dict() == shared.to_dict()
