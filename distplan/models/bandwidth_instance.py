"""LIBRA bandwidth provisioning: the instance and its JSON form.

Units: bytes/s per NPU, USD per byte/s, seconds, bytes. A `BandwidthInstance` holds the
records of a ``distplan/1`` document of kind ``bandwidth`` (read by
`distplan.models.bandwidth_parse`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distplan.models.bandwidth_parse import parse_fields
from distplan.models.bandwidth_records import GB, PHASES, Dimension, Layer, LinearConstraint
from distplan.models.common import FORMAT, JsonDocument


@dataclass
class BandwidthInstance(JsonDocument):
    """A LIBRA bandwidth-provisioning instance (kind ``bandwidth``)."""

    name: str
    dimensions: tuple[Dimension, ...]
    layers: tuple[Layer, ...]
    training_loop: str = "no_overlap"
    #: (sense, bytes/s): sum of all B_d
    total_bandwidth: tuple[str, float] | None = None
    #: USD: network cost must not exceed it
    cost_budget: float | None = None
    linear: tuple[LinearConstraint, ...] = ()
    description: str = ""
    workload_name: str = ""
    total_npus: int | None = None
    workload_npus: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "bandwidth"

    @property
    def num_dims(self) -> int:
        return len(self.dimensions)

    @property
    def npus(self) -> int:
        """Number of NPUs: the product of the dimension sizes."""
        return math.prod(d.size for d in self.dimensions)

    def dim_index(self) -> dict[str, int]:
        return {d.name: k for k, d in enumerate(self.dimensions)}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> BandwidthInstance:
        return BandwidthInstance(**parse_fields(data))

    def to_dict(self) -> dict[str, Any]:
        return _serialize(self)

    def summary(self) -> dict[str, Any]:
        dims = ", ".join(f"{d.name}:{d.block}x{d.size}" for d in self.dimensions)
        n_coll = sum(len(layer.collectives) for layer in self.layers)
        cons = []
        if self.total_bandwidth is not None:
            cons.append(f"sum B {self.total_bandwidth[0]} {self.total_bandwidth[1] / GB:g} GB/s")
        if self.cost_budget is not None:
            cons.append(f"cost <= {self.cost_budget:g} USD")
        cons.extend(c.name for c in self.linear)
        return {
            "name": self.name,
            "kind": self.kind,
            "workload": self.workload_name,
            "npus": self.npus,
            "dimensions": dims,
            "layers": len(self.layers),
            "collectives": n_coll,
            "compute_seconds": sum(sum(layer.compute) for layer in self.layers),
            "training_loop": self.training_loop,
            "constraints": "; ".join(cons) or "(bounds only)",
        }


def _serialize(inst: BandwidthInstance) -> dict[str, Any]:
    dims = []
    for d in inst.dimensions:
        item: dict[str, Any] = {"name": d.name, "size": d.size, "block": d.block}
        if d.cost_class is not None:
            item["cost_class"] = d.cost_class
        item["price_link"] = d.price_link
        if d.block == "switch":
            item["price_switch"] = d.price_switch
            item["price_nic"] = d.price_nic
        item["min_bandwidth"] = d.min_bandwidth
        item["max_bandwidth"] = None if math.isinf(d.max_bandwidth) else d.max_bandwidth
        if d.bandwidth_options is not None:
            item["bandwidth_options"] = list(d.bandwidth_options)
        dims.append(item)
    net: dict[str, Any] = {"dimensions": dims}
    if inst.total_npus is not None:
        net["total_npus"] = inst.total_npus
    work: dict[str, Any] = {"name": inst.workload_name, "training_loop": inst.training_loop}
    if inst.workload_npus is not None:
        work["npus"] = inst.workload_npus
    work["layers"] = [
        {
            "name": layer.name,
            "compute": dict(zip(PHASES, layer.compute, strict=True)),
            "collectives": [{"phase": c.phase, "type": c.type, "bytes": c.bytes, "npus": list(c.npus)} for c in layer.collectives],
        }
        for layer in inst.layers
    ]
    cons: dict[str, Any] = {}
    if inst.total_bandwidth is not None:
        cons["total_bandwidth"] = {"sense": inst.total_bandwidth[0], "value": inst.total_bandwidth[1]}
    if inst.cost_budget is not None:
        cons["cost_budget"] = inst.cost_budget
    cons["linear"] = [{"name": c.name, "coeffs": dict(c.coeffs), "sense": c.sense, "rhs": c.rhs} for c in inst.linear]
    out: dict[str, Any] = {"format": FORMAT, "kind": "bandwidth", "name": inst.name}
    if inst.description:
        out["description"] = inst.description
    out["network"] = net
    out["workload"] = work
    out["constraints"] = cons
    if inst.metadata:
        out["metadata"] = inst.metadata
    return out
