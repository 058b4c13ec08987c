"""tap on GPTs whose layers are not all identical (one layer without a bias, or with other
FLOPs for its GELU), memory binding: the consecutive copies tap folds leave the odd layer
explicit, and the walk's fronts join tables with the same live variables. Those tables were
compared by value (``t not in one``), a ValueError (InternalError, exit 1) since the chains
of consecutive blocks (36e0356); tap must equal alpa_ilp's optimum."""

from __future__ import annotations

from typing import Any

import pytest

import distplan
from distplan.instances.transformer import transformer
from distplan.models.sharding import ShardingInstance, evaluate


def _variant(layer: int, change: str) -> ShardingInstance:
    doc: dict[str, Any] = transformer(4, 256, 4, 128, 4, 1000, mesh=8, device="V100").to_dict()
    for op in doc["graph"]["ops"]:
        if change == "no-bias" and op["name"] == f"l{layer}.fc1":
            op["params"] = [p for p in op["params"] if p["name"] != "bias"]
        if change == "gelu-flops" and op["name"] == f"l{layer}.gelu":
            op.setdefault("attrs", {})["flops_per_element"] = 20
    doc["name"] = f"gpt4-{change}-l{layer}"
    return ShardingInstance.from_dict(doc)


@pytest.mark.parametrize("change", ["no-bias", "gelu-flops"])
@pytest.mark.parametrize("layer", [0, 1])
def test_tap_equals_alpa_ilp_with_one_layer_different(layer: int, change: str) -> None:
    base = _variant(layer, change)
    free = distplan.solve(base, "alpa_ilp", mip_gap=1e-9)
    inst = base.with_memory(0.9 * evaluate(base, free.plan).details["memory_bytes"])
    exact = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    tap = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert tap.status.value == "optimal"
    assert tap.objective == pytest.approx(exact.objective, rel=1e-6)
    assert tap.bound is not None and tap.bound <= exact.objective and exact.bound is not None and exact.bound <= tap.objective
