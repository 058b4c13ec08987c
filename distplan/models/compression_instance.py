"""Compression selection (TAG): the instance, its derived arrays and its JSON form.

Units: seconds, bytes, bytes/second. A `CompressionInstance` holds the records of a
``distplan/1`` document of kind ``compression`` (read by
`distplan.models.compression_parse`) and derives on construction the arrays the
formulations and the evaluator index: op hosting and times per device, edges, link
bandwidths, gradients, eligible-op trees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.models.common import FORMAT, JsonDocument
from distplan.models.compression_parse import parse_fields
from distplan.models.compression_records import DTYPE_BYTES, INDEX_BYTES, TOL, Codec, Device, Edge, Gradient, Op


@dataclass
class CompressionInstance(JsonDocument):
    """A compression-selection instance; arrays below are derived on construction."""

    name: str
    description: str
    batch_size: int
    devices: list[Device]
    ops: list[Op]
    edges: list[Edge]
    gradients: list[Gradient]
    codecs: list[Codec]
    intra_node_bandwidth: float
    inter_node_bandwidth: float
    links: list[tuple[str, str, float]] = field(default_factory=list)
    kind: str = "compression"

    def __post_init__(self) -> None:
        self._derive()

    # -- derived arrays -------------------------------------------------------------------
    def _derive(self) -> None:
        self.op_index = {o.name: i for i, o in enumerate(self.ops)}
        self.device_index = {d.name: k for k, d in enumerate(self.devices)}
        self.gradient_index = {g.name: k for k, g in enumerate(self.gradients)}
        self.codec_index = {c.name: k for k, c in enumerate(self.codecs)}
        n, nd = len(self.ops), len(self.devices)
        self.host = np.zeros((n, nd), dtype=bool)
        #: seconds of op i on device d (0 where not hosted)
        self.time = np.zeros((n, nd))
        for i, o in enumerate(self.ops):
            for dn in o.devices:
                d = self.device_index[dn]
                self.host[i, d] = True
                self.time[i, d] = o.compute_seconds[self.devices[d].type]
        self.replicas = self.host.sum(axis=1).astype(np.int64)
        self.op_memory = np.array([o.memory_bytes for o in self.ops], dtype=float)
        self.eligible = np.array([o.eligible for o in self.ops], dtype=bool)
        self.is_update = np.array([o.role == "update" for o in self.ops], dtype=bool)
        self.edge_src = np.array([self.op_index[e.src] for e in self.edges], dtype=np.int64)
        self.edge_dst = np.array([self.op_index[e.dst] for e in self.edges], dtype=np.int64)
        self.edge_bytes = np.array([e.bytes for e in self.edges], dtype=float)
        bw = np.full((nd, nd), np.inf)
        nodes = [d.node for d in self.devices]
        for a in range(nd):
            for b in range(nd):
                if a != b:
                    bw[a, b] = self.intra_node_bandwidth if nodes[a] == nodes[b] else self.inter_node_bandwidth
        for a_name, b_name, value in self.links:
            a, b = self.device_index[a_name], self.device_index[b_name]
            bw[a, b] = bw[b, a] = value
        #: link bandwidth between devices, bytes/second (inf on the diagonal)
        self.bandwidth = bw
        self.grad_op = np.array([self.op_index[g.op] for g in self.gradients], dtype=np.int64)
        self.grad_update = np.array([self.op_index[g.update] for g in self.gradients], dtype=np.int64)
        self.grad_bytes = np.array([g.bytes for g in self.gradients], dtype=float)
        self.grad_replicas = self.replicas[self.grad_op] if len(self.gradients) else np.zeros(0, np.int64)
        self.device_capacity = np.array([d.memory_bytes for d in self.devices], dtype=float)
        self.device_reserved = np.array([d.reserved_bytes for d in self.devices], dtype=float)
        # the consumer of each eligible op (unique, validated) and the gradient tree it is in
        self.consumer = np.full(n, -1, dtype=np.int64)
        for e_src, e_dst in zip(self.edge_src.tolist(), self.edge_dst.tolist()):
            if self.eligible[e_src]:
                self.consumer[e_src] = e_dst
        grad_of_update = {int(u): k for k, u in enumerate(self.grad_update.tolist())}
        self.tree = np.full(n, -1, dtype=np.int64)
        for i in np.flatnonzero(self.eligible).tolist():
            j = i
            while self.eligible[j]:
                j = int(self.consumer[j])
            self.tree[i] = grad_of_update.get(j, -1)

    # -- convenience ----------------------------------------------------------------------
    @property
    def n_ops(self) -> int:
        return len(self.ops)

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def n_gradients(self) -> int:
        return len(self.gradients)

    def group_bandwidth(self, devices: np.ndarray) -> float:
        """Bottleneck link bandwidth among a replica group, bytes/second (inf for one device)."""
        idx = np.flatnonzero(devices) if devices.dtype == bool else np.asarray(devices)
        if idx.size < 2:
            return math.inf
        return float(self.bandwidth[np.ix_(idx, idx)].min())

    def memory_without_duplication(self) -> np.ndarray:
        """Bytes per device when nothing is duplicated (reserved + every hosted op)."""
        return self.device_reserved + self.host.T.astype(float) @ self.op_memory

    def check_base_memory(self) -> None:
        """Raise `InfeasibleError` naming the device when even the plan without duplication
        does not fit."""
        used = self.memory_without_duplication()
        over = used - self.device_capacity
        if np.any(over > TOL):
            d = int(np.argmax(over))
            raise InfeasibleError(
                f"{self.name}: device {self.devices[d].name} needs {used[d]:.6g} bytes with nothing "
                f"duplicated but holds {self.device_capacity[d]:.6g} (short by {over[d]:.6g} bytes)",
                {"device": self.devices[d].name, "short_bytes": float(over[d])},
            )

    def codec_applies(self, codec: Codec, gradient: Gradient) -> bool:
        """Whether a codec can synchronize a gradient (its profile is measured; sparse-index
        needs a sparse gradient)."""
        if codec.method == "sparse_index":
            return gradient.density < 1.0 and (gradient.profile in codec.ratio or gradient.shape is not None)
        return gradient.profile in codec.ratio

    def codec_ratio(self, codec: Codec, gradient: Gradient) -> float:
        """Compressed / original size. Sparse-index without a measured ratio: density times
        (row bytes + index bytes) / row bytes."""
        if gradient.profile in codec.ratio:
            return codec.ratio[gradient.profile]
        if codec.method == "sparse_index" and gradient.shape is not None:
            row_bytes = gradient.shape[1] * DTYPE_BYTES[gradient.dtype]
            return min(1.0, gradient.density) * (row_bytes + INDEX_BYTES) / row_bytes
        raise InputError(f"codecs[{self.codec_index[codec.name]}].ratio", f"no ratio for profile {gradient.profile!r}", "run `distplan measure-codecs`")

    # -- I/O ------------------------------------------------------------------------------
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> CompressionInstance:
        return CompressionInstance(**parse_fields(data))

    def to_dict(self) -> dict[str, Any]:
        return _serialize(self)

    def summary(self) -> dict[str, Any]:
        types: dict[str, int] = {}
        for d in self.devices:
            types[d.type] = types.get(d.type, 0) + 1
        sparse = sum(1 for g in self.gradients if g.density < 1.0)
        return {
            "name": self.name,
            "kind": self.kind,
            "ops": self.n_ops,
            "edges": self.n_edges,
            "eligible ops": int(self.eligible.sum()),
            "gradients": self.n_gradients,
            "sparse gradients": sparse,
            "gradient bytes": float(self.grad_bytes.sum()),
            "devices": ", ".join(f"{k}x{v}" for k, v in types.items()),
            "nodes": len({d.node for d in self.devices}),
            "intra/inter-node bandwidth (B/s)": f"{self.intra_node_bandwidth:.4g} / {self.inter_node_bandwidth:.4g}",
            "codecs": ", ".join(f"{c.name} ({c.method})" for c in self.codecs) or "(none)",
            "batch size": self.batch_size,
        }



def _serialize(inst: CompressionInstance) -> dict[str, Any]:
    cluster: dict[str, Any] = {
        "devices": [
            {"name": d.name, "type": d.type, "node": d.node, "memory_bytes": d.memory_bytes, "reserved_bytes": d.reserved_bytes}
            for d in inst.devices
        ],
        "intra_node_bandwidth": inst.intra_node_bandwidth,
        "inter_node_bandwidth": inst.inter_node_bandwidth,
    }
    if inst.links:
        cluster["links"] = [{"a": a, "b": b, "bandwidth": bw} for a, b, bw in inst.links]
    ops = []
    for o in inst.ops:
        ops.append(
            {
                "name": o.name,
                "role": o.role,
                "compute_seconds": dict(o.compute_seconds),
                "devices": list(o.devices),
                "memory_bytes": o.memory_bytes,
                "eligible": o.eligible,
            }
        )
    grads = []
    for g in inst.gradients:
        item: dict[str, Any] = {"name": g.name, "op": g.op, "update": g.update, "bytes": g.bytes, "dtype": g.dtype, "density": g.density}
        if g.shape is not None:
            item["shape"] = list(g.shape)
        if g.factor_rows is not None:
            item["factor_rows"] = g.factor_rows
        grads.append(item)
    codecs = []
    for c in inst.codecs:
        item = {
            "name": c.name,
            "method": c.method,
            "lossless": True,
            "library": c.library,
            "level": c.level,
            "ratio": dict(c.ratio),
            "encode_bytes_per_second": dict(c.encode_bytes_per_second),
            "decode_bytes_per_second": dict(c.decode_bytes_per_second),
        }
        if c.measured is not None:
            item["measured"] = dict(c.measured)
        codecs.append(item)
    return {
        "format": FORMAT,
        "kind": "compression",
        "name": inst.name,
        "description": inst.description,
        "batch_size": inst.batch_size,
        "cluster": cluster,
        "graph": {
            "ops": ops,
            "edges": [{"src": e.src, "dst": e.dst, "bytes": e.bytes} for e in inst.edges],
            "gradients": grads,
        },
        "codecs": codecs,
    }
