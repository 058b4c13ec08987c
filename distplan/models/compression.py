"""Compression selection (TAG): instance, plan and the independent iteration evaluator.

Units: seconds, bytes, bytes/second. The instance is the ``distplan/1`` document of kind
``compression``: a data-parallel training graph whose ops run on replica devices, the
gradients that must be synchronized, the cluster, and the lossless codecs available.

Synchronizing a gradient ``g`` (bytes ``S``, ``M`` replicas, bottleneck bandwidth ``B`` of
its replica group) is one of:

* ``allreduce``: ring all-reduce, ``2 (M-1)/M * S / B`` on the channel;
* ``sfb`` (sufficient-factor broadcasting, Xie et al. 2016; TAG, Zhang et al. arXiv
  2302.06126): the producer of ``g`` and possibly more of its eligible ancestors are
  *duplicated*: every replica computes them over the whole global batch (``M * t`` instead
  of ``t``) from broadcast inputs. Each tensor entering the duplicated set from a
  non-duplicated op is all-gathered, ``(M-1) * bytes / B``; the gradient is then identical on
  every replica and needs no all-reduce;
* a codec (``entropy``: zstandard/lz4; ``sparse_index``: nonzero rows + row indices): each
  replica encodes (``S / encode_bytes_per_second``), the compressed payloads are
  all-gathered, ``(M-1) * ratio * S / B``, and each replica decodes the ``M-1`` others
  (``(M-1) * S / decode_bytes_per_second``) and sums them.

Iteration model (what `evaluate` simulates, per device):

1. compute stream: the non-update ops hosted on the device in document order; an op takes
   its ``compute_seconds`` for the device type, a duplicated op takes 0 here (it runs in
   step 4). Gradient ``g`` is *released* on a device when the stream passes its producer.
2. encode stream (codecs only): items in the plan's channel order, start >= release.
3. the channel (one, shared by every collective): items in the plan's order, one at a
   time, a transfer starts when every replica has released (and encoded) it.
4. sync stream: after the device's compute stream has ended and the transfer is done,
   decode, the duplicated ops of the gradient (full batch) and the update op, in order.

The iteration time is the latest end over all devices. Memory per device: reserved bytes
plus the ops' ``memory_bytes``, a duplicated op holding ``M`` times its memory, plus the
gathered shards of broadcast tensors ``(M-1) * bytes``.

Eligible ops (that may be duplicated) form in-trees toward the gradients: each has exactly
one consumer, an eligible op or the update op of the gradient it produces, and all its
inputs come from ops on the same replica devices. A duplicated op's consumer must be
duplicated too (or be that update op).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.models.catalogue import device as catalogue_device
from distplan.models.common import FORMAT, Check, JsonDocument, KindSpec, name_list, need, number, register_kind

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
ROLES = ("forward", "backward", "update")
CODEC_METHODS = ("entropy", "sparse_index")
BUILTIN_METHODS = ("allreduce", "sfb")
#: bytes of one row index in the sparse-index encoding (int32)
INDEX_BYTES = 4
TOL = 1e-9


def profile_key(dtype: str, density: float) -> str:
    """The key of a gradient's tensor profile in a codec's ``ratio`` table.

    ``"float32"`` for a dense float32 gradient, ``"float32/density=0.008"`` for a sparse one.
    """
    return dtype if density >= 1.0 else f"{dtype}/density={density:.6g}"


@dataclass(frozen=True)
class Device:
    """A GPU: catalogue type, node (for the link bandwidth), memory capacity and the bytes
    already reserved by weights, optimizer state and framework."""

    name: str
    type: str
    node: str
    memory_bytes: float
    reserved_bytes: float


@dataclass(frozen=True)
class Op:
    """An op replicated on ``devices``; ``compute_seconds`` per device type for one replica's
    shard of the batch; ``memory_bytes`` per replica (activations/workspace)."""

    name: str
    compute_seconds: dict[str, float]
    devices: tuple[str, ...]
    memory_bytes: float
    eligible: bool
    role: str


@dataclass(frozen=True)
class Edge:
    """A tensor from ``src`` to ``dst``: ``bytes`` of one replica's shard."""

    src: str
    dst: str
    bytes: float


@dataclass(frozen=True)
class Gradient:
    """A gradient produced by ``op`` and applied by ``update``: ``bytes``, element type,
    row density (fraction of nonzero rows, < 1 for embedding gradients), weight ``shape``
    [rows, cols] and the rows of its sufficient factors per replica (``factor_rows``)."""

    name: str
    op: str
    update: str
    bytes: float
    dtype: str
    density: float
    shape: tuple[int, int] | None
    factor_rows: int | None

    @property
    def profile(self) -> str:
        return profile_key(self.dtype, self.density)


@dataclass(frozen=True)
class Codec:
    """A lossless codec: size ``ratio`` per tensor profile (compressed / original) and
    throughputs per device type in uncompressed bytes per second."""

    name: str
    method: str
    library: str
    level: int | None
    ratio: dict[str, float]
    encode_bytes_per_second: dict[str, float]
    decode_bytes_per_second: dict[str, float]
    measured: dict[str, Any] | None = None


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
        return _parse(data)

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


# -- parsing ---------------------------------------------------------------------------------


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(path, f"expected a non-empty string, got {value!r}")
    return value


def _rate_table(value: Any, path: str, types: set[str], what: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise InputError(path, f"expected an object {{device type: {what}}}")
    out = {str(k): number(v, f"{path}.{k}", positive=True) for k, v in value.items()}
    missing = sorted(types - set(out))
    if missing:
        raise InputError(f"{path}.{missing[0]}", f"missing for device type {missing[0]!r}", f"give the {what} for every device type of the cluster")
    return out


def _parse(data: Mapping[str, Any]) -> CompressionInstance:
    name = _str(data.get("name", "unnamed"), "name")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise InputError("description", "expected a string")
    batch_size = int(number(need(data, "batch_size", ""), "batch_size", positive=True, integer=True))

    cluster = need(data, "cluster", "")
    devs = need(cluster, "devices", "cluster")
    dev_names = name_list(devs, "cluster.devices", "devices")
    if not dev_names:
        raise InputError("cluster.devices", "the device list is empty", "list at least one device")
    devices: list[Device] = []
    for k, d in enumerate(devs):
        path = f"cluster.devices[{k}]"
        dtype = _str(need(d, "type", path), f"{path}.type")
        try:
            spec = catalogue_device(dtype)
        except InputError as exc:
            raise InputError(f"{path}.type", exc.problem, exc.fix) from None
        mem = number(d["memory_bytes"], f"{path}.memory_bytes", positive=True) if "memory_bytes" in d else float(spec.memory_bytes)
        reserved = number(d.get("reserved_bytes", 0.0), f"{path}.reserved_bytes")
        node = _str(d.get("node", dev_names[k]), f"{path}.node")
        devices.append(Device(dev_names[k], dtype, node, mem, reserved))
    types = {d.type for d in devices}
    intra = number(need(cluster, "intra_node_bandwidth", "cluster"), "cluster.intra_node_bandwidth", positive=True)
    inter = number(need(cluster, "inter_node_bandwidth", "cluster"), "cluster.inter_node_bandwidth", positive=True)
    links: list[tuple[str, str, float]] = []
    for k, link in enumerate(cluster.get("links", []) or []):
        path = f"cluster.links[{k}]"
        a, b = _str(need(link, "a", path), f"{path}.a"), _str(need(link, "b", path), f"{path}.b")
        for key, nm in (("a", a), ("b", b)):
            if nm not in dev_names:
                raise InputError(f"{path}.{key}", f"unknown device {nm!r}", "name a device of cluster.devices")
        if a == b:
            raise InputError(path, "a link joins two different devices")
        links.append((a, b, number(need(link, "bandwidth", path), f"{path}.bandwidth", positive=True)))

    graph = need(data, "graph", "")
    raw_ops = need(graph, "ops", "graph")
    op_names = name_list(raw_ops, "graph.ops", "ops")
    op_pos = {nm: i for i, nm in enumerate(op_names)}
    dev_set = set(dev_names)
    ops: list[Op] = []
    for i, o in enumerate(raw_ops):
        path = f"graph.ops[{i}]"
        odevs = o.get("devices", dev_names)
        if not isinstance(odevs, list) or not odevs:
            raise InputError(f"{path}.devices", "expected a non-empty list of device names")
        for k, dn in enumerate(odevs):
            if dn not in dev_set:
                raise InputError(f"{path}.devices[{k}]", f"unknown device {dn!r}", "name a device of cluster.devices")
        if len(set(odevs)) != len(odevs):
            raise InputError(f"{path}.devices", "a device is listed twice")
        op_types = {devices[dev_names.index(dn)].type for dn in odevs}
        raw_cs = need(o, "compute_seconds", path)
        if not isinstance(raw_cs, Mapping):
            raise InputError(f"{path}.compute_seconds", "expected an object {device type: seconds}")
        cs = {str(k): number(v, f"{path}.compute_seconds.{k}") for k, v in raw_cs.items()}
        missing = sorted(op_types - set(cs))
        if missing:
            raise InputError(f"{path}.compute_seconds.{missing[0]}", f"missing for device type {missing[0]!r} of a replica", "give the seconds for every device type the op runs on")
        role = o.get("role", "backward")
        if role not in ROLES:
            raise InputError(f"{path}.role", f"unknown role {role!r}", f"use one of: {', '.join(ROLES)}")
        eligible = o.get("eligible", False)
        if not isinstance(eligible, bool):
            raise InputError(f"{path}.eligible", f"expected true or false, got {eligible!r}")
        if eligible and role == "update":
            raise InputError(f"{path}.eligible", "an update op cannot be duplicated", "set eligible to false")
        if eligible and len(odevs) < 2:
            raise InputError(f"{path}.eligible", "an op with one replica cannot be duplicated (TAG: replication < 2)", "set eligible to false")
        mem = number(o.get("memory_bytes", 0.0), f"{path}.memory_bytes")
        ops.append(Op(op_names[i], cs, tuple(odevs), mem, eligible, role))

    edges: list[Edge] = []
    raw_edges = need(graph, "edges", "graph")
    if not isinstance(raw_edges, list):
        raise InputError("graph.edges", "expected a list of {src, dst, bytes}")
    pairs: set[tuple[str, str]] = set()
    for k, e in enumerate(raw_edges):
        path = f"graph.edges[{k}]"
        src, dst = need(e, "src", path), need(e, "dst", path)
        for key, nm in (("src", src), ("dst", dst)):
            if nm not in op_pos:
                raise InputError(f"{path}.{key}", f"unknown op {nm!r}", "name an op listed in graph.ops")
        if op_pos[src] >= op_pos[dst]:
            raise InputError(path, f"{src!r} -> {dst!r} goes backwards in graph.ops", "list ops in execution (topological) order")
        if ops[op_pos[dst]].eligible and set(ops[op_pos[src]].devices) != set(ops[op_pos[dst]].devices):
            raise InputError(path, f"eligible op {dst!r} takes input from {src!r} on other devices", "eligible ops and their inputs share one replica group")
        pairs.add((src, dst))
        edges.append(Edge(src, dst, number(need(e, "bytes", path), f"{path}.bytes")))

    raw_grads = need(graph, "gradients", "graph")
    grad_names = name_list(raw_grads, "graph.gradients", "gradients")
    gradients: list[Gradient] = []
    update_used: dict[str, int] = {}
    producer_used: dict[str, int] = {}
    for k, g in enumerate(raw_grads):
        path = f"graph.gradients[{k}]"
        op = _str(need(g, "op", path), f"{path}.op")
        upd = _str(need(g, "update", path), f"{path}.update")
        for key, nm in (("op", op), ("update", upd)):
            if nm not in op_pos:
                raise InputError(f"{path}.{key}", f"unknown op {nm!r}", "name an op listed in graph.ops")
        if ops[op_pos[upd]].role != "update":
            raise InputError(f"{path}.update", f"op {upd!r} does not have role 'update'", "give the update op \"role\": \"update\"")
        if ops[op_pos[op]].role == "update":
            raise InputError(f"{path}.op", f"the producer {op!r} is an update op", "name the op that computes the gradient")
        if upd in update_used:
            raise InputError(f"{path}.update", f"update op {upd!r} also applies graph.gradients[{update_used[upd]}]", "give every gradient its own update op")
        if op in producer_used:
            raise InputError(f"{path}.op", f"op {op!r} also produces graph.gradients[{producer_used[op]}]", "one op produces one gradient")
        update_used[upd] = k
        producer_used[op] = k
        if set(ops[op_pos[upd]].devices) != set(ops[op_pos[op]].devices):
            raise InputError(f"{path}.update", f"update op {upd!r} runs on other devices than producer {op!r}", "use the producer's replica devices")
        if (op, upd) not in pairs:
            raise InputError(f"{path}", f"no edge {op!r} -> {upd!r}", "add the gradient edge to graph.edges")
        dtype = g.get("dtype", "float32")
        if dtype not in DTYPE_BYTES:
            raise InputError(f"{path}.dtype", f"unknown dtype {dtype!r}", f"use one of: {', '.join(DTYPE_BYTES)}")
        density = number(g.get("density", 1.0), f"{path}.density", positive=True)
        if density > 1.0:
            raise InputError(f"{path}.density", f"{density} > 1", "give the fraction of nonzero rows, in (0, 1]")
        shape = g.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or len(shape) != 2:
                raise InputError(f"{path}.shape", "expected [rows, cols]")
            shape = (int(number(shape[0], f"{path}.shape[0]", positive=True, integer=True)), int(number(shape[1], f"{path}.shape[1]", positive=True, integer=True)))
        frows = g.get("factor_rows")
        if frows is not None:
            frows = int(number(frows, f"{path}.factor_rows", positive=True, integer=True))
        gradients.append(Gradient(grad_names[k], op, upd, number(need(g, "bytes", path), f"{path}.bytes", positive=True), dtype, density, shape, frows))

    # eligible ops form in-trees ending at a gradient producer
    consumers: list[list[str]] = [[] for _ in ops]
    for e in edges:
        consumers[op_pos[e.src]].append(e.dst)
    grad_of_update = {g.update: g for g in gradients}
    for i, o in enumerate(ops):
        if not o.eligible:
            continue
        path = f"graph.ops[{i}]"
        if len(consumers[i]) != 1:
            raise InputError(path, f"eligible op {o.name!r} has {len(consumers[i])} consumers", "an eligible op feeds exactly one op (an eligible op or its gradient's update)")
        c = consumers[i][0]
        if not ops[op_pos[c]].eligible:
            g = grad_of_update.get(c)
            if g is None or g.op != o.name:
                raise InputError(path, f"eligible op {o.name!r} feeds {c!r}, which is neither eligible nor the update of a gradient it produces", "mark the consumer eligible or the op ineligible")

    codecs: list[Codec] = []
    raw_codecs = data.get("codecs", [])
    codec_names = name_list(raw_codecs, "codecs", "codecs")
    for k, c in enumerate(raw_codecs):
        path = f"codecs[{k}]"
        nm = codec_names[k]
        if nm in BUILTIN_METHODS:
            raise InputError(f"{path}.name", f"{nm!r} is a built-in method name", "rename the codec")
        lossless = c.get("lossless")
        if lossless is not True:
            raise InputError(f"{path}.lossless", f"codec {nm!r} is not declared lossless ({lossless!r}); only exact synchronization is allowed", "remove the codec or use a lossless one")
        method = c.get("method")
        if method not in CODEC_METHODS:
            raise InputError(f"{path}.method", f"unknown method {method!r}", f"use one of: {', '.join(CODEC_METHODS)}")
        raw_ratio = c.get("ratio", {})
        if not isinstance(raw_ratio, Mapping):
            raise InputError(f"{path}.ratio", "expected an object {profile: compressed/original}")
        ratio = {str(p): number(v, f"{path}.ratio.{p}", positive=True) for p, v in raw_ratio.items()}
        level = c.get("level")
        if level is not None:
            level = int(number(level, f"{path}.level", nonneg=False, integer=True))
        measured = c.get("measured")
        if measured is not None and not isinstance(measured, Mapping):
            raise InputError(f"{path}.measured", "expected an object")
        codecs.append(
            Codec(
                nm,
                method,
                str(c.get("library", "")),
                level,
                ratio,
                _rate_table(need(c, "encode_bytes_per_second", path), f"{path}.encode_bytes_per_second", types, "bytes/second"),
                _rate_table(need(c, "decode_bytes_per_second", path), f"{path}.decode_bytes_per_second", types, "bytes/second"),
                dict(measured) if measured is not None else None,
            )
        )
    return CompressionInstance(name, description, batch_size, devices, ops, edges, gradients, codecs, intra, inter, links)


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


# -- plans -----------------------------------------------------------------------------------


@dataclass
class CompressionPlan:
    """Which ops are duplicated, how each gradient is synchronized, the channel order.

    ``sync`` maps every gradient to ``"allreduce"``, ``"sfb"`` (its producer is duplicated)
    or a codec name; ``order`` lists the gradients in channel order (None: by release, i.e.
    the position of the producer in the compute stream).
    """

    duplicated: tuple[str, ...]
    sync: dict[str, str]
    order: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"duplicated": list(self.duplicated), "sync": dict(self.sync)}
        if self.order is not None:
            out["order"] = list(self.order)
        return out

    def method_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.sync.values():
            counts[m] = counts.get(m, 0) + 1
        return counts


def make_plan(inst: CompressionInstance, duplicated: np.ndarray, methods: list[str], order: list[int] | None = None) -> CompressionPlan:
    """A plan from a duplicated-op mask, one method per gradient (index order) and an
    optional channel order of gradient indices."""
    dup = tuple(inst.ops[i].name for i in np.flatnonzero(np.asarray(duplicated, dtype=bool)).tolist())
    sync = {g.name: m for g, m in zip(inst.gradients, methods)}
    ordered = tuple(inst.gradients[k].name for k in order) if order is not None else None
    return CompressionPlan(dup, sync, ordered)


def plan_from_dict(inst: CompressionInstance, data: Mapping[str, Any]) -> CompressionPlan:
    """Read a plan: {"duplicated": [op, ...], "sync": {gradient: method}, "order": [...]}.

    A gradient missing from ``sync`` is ``sfb`` when its producer is duplicated and
    ``allreduce`` otherwise.
    """
    if not isinstance(data, Mapping):
        raise InputError("plan", "expected an object")
    dup_raw = data.get("duplicated", [])
    if not isinstance(dup_raw, list):
        raise InputError("duplicated", "expected a list of op names")
    for k, nm in enumerate(dup_raw):
        if nm not in inst.op_index:
            raise InputError(f"duplicated[{k}]", f"unknown op {nm!r}", "name an op of graph.ops")
    dup = set(dup_raw)
    sync_raw = data.get("sync", {})
    if not isinstance(sync_raw, Mapping):
        raise InputError("sync", "expected an object {gradient: method}")
    valid = set(BUILTIN_METHODS) | set(inst.codec_index)
    for gname, m in sync_raw.items():
        if gname not in inst.gradient_index:
            raise InputError(f"sync.{gname}", f"unknown gradient {gname!r}", "name a gradient of graph.gradients")
        if m not in valid:
            raise InputError(f"sync.{gname}", f"unknown method {m!r}", f"use one of: {', '.join(sorted(valid))}")
    sync = {g.name: str(sync_raw.get(g.name, "sfb" if g.op in dup else "allreduce")) for g in inst.gradients}
    order = data.get("order")
    if order is not None:
        if not isinstance(order, list):
            raise InputError("order", "expected a list of gradient names")
        for k, nm in enumerate(order):
            if nm not in inst.gradient_index:
                raise InputError(f"order[{k}]", f"unknown gradient {nm!r}", "name a gradient of graph.gradients")
        order = tuple(order)
    ordered_dup = tuple(o.name for o in inst.ops if o.name in dup)
    return CompressionPlan(ordered_dup, sync, order)


# -- the independent evaluator ---------------------------------------------------------------


def evaluate(inst: CompressionInstance, plan: CompressionPlan) -> Check:
    """Simulate one iteration of ``plan`` (see the module docstring) and check it.

    Objective: iteration time in seconds. Violations: ineligible or dangling duplication,
    a method that does not match the duplication or does not apply, a bad order, memory
    over capacity (naming the device and the excess in bytes).
    """
    violations: list[str] = []
    devices = inst.devices
    nd = len(devices)
    op_pos = {o.name: i for i, o in enumerate(inst.ops)}
    dup = [False] * len(inst.ops)
    for nm in plan.duplicated:
        i = op_pos.get(nm)
        if i is None:
            violations.append(f"duplicated op {nm!r} does not exist")
            continue
        dup[i] = True
        if not inst.ops[i].eligible:
            violations.append(f"op {nm!r} is duplicated but not eligible")
    consumers: list[list[int]] = [[] for _ in inst.ops]
    producers: list[list[tuple[int, float]]] = [[] for _ in inst.ops]
    for e in inst.edges:
        s, t = op_pos[e.src], op_pos[e.dst]
        consumers[s].append(t)
        producers[t].append((s, e.bytes))
    grad_by_producer = {g.op: g for g in inst.gradients}
    for i, o in enumerate(inst.ops):
        if not dup[i]:
            continue
        for c in consumers[i]:
            c_op = inst.ops[c]
            if dup[c]:
                continue
            g = grad_by_producer.get(o.name)
            if not (g is not None and g.update == c_op.name):
                violations.append(f"duplicated op {o.name!r} feeds {c_op.name!r}, which is not duplicated")

    # replica devices and bottleneck bandwidth of every op's group
    dev_pos = {d.name: k for k, d in enumerate(devices)}

    link_bw = {frozenset((a, b)): value for a, b, value in inst.links}
    bottleneck_cache: dict[tuple[str, ...], float] = {}

    def bottleneck(devs: tuple[str, ...]) -> float:
        if devs in bottleneck_cache:
            return bottleneck_cache[devs]
        best = math.inf
        for a in devs:
            for b in devs:
                if a == b:
                    continue
                da, db = devices[dev_pos[a]], devices[dev_pos[b]]
                bw = inst.intra_node_bandwidth if da.node == db.node else inst.inter_node_bandwidth
                bw = link_bw.get(frozenset((a, b)), bw)
                best = min(best, bw)
        bottleneck_cache[devs] = best
        return best

    # which gradient tree an op belongs to: follow consumers up to an update op
    grad_by_update = {g.update: g.name for g in inst.gradients}

    def tree_gradient(i: int) -> str | None:
        j = i
        seen = 0
        while inst.ops[j].role != "update" and seen <= len(inst.ops):
            if len(consumers[j]) != 1:
                return None
            j = consumers[j][0]
            seen += 1
        return grad_by_update.get(inst.ops[j].name)

    # broadcasts: every edge entering a duplicated op from a non-duplicated op
    bcast_seconds: dict[str, float] = {g.name: 0.0 for g in inst.gradients}
    bcast_bytes_on: list[float] = [0.0] * nd
    dup_ops_of: dict[str, list[int]] = {g.name: [] for g in inst.gradients}
    n_bcast = 0
    bcast_traffic = 0.0
    for i, o in enumerate(inst.ops):
        if not dup[i] or not o.eligible:
            continue
        gname = tree_gradient(i)
        if gname is None:
            violations.append(f"duplicated op {o.name!r} does not lead to a gradient")
            continue
        dup_ops_of[gname].append(i)
        m = len(o.devices)
        bw = bottleneck(o.devices)
        for s, nbytes in producers[i]:
            if dup[s]:
                continue
            n_bcast += 1
            bcast_seconds[gname] += (m - 1) * nbytes / bw
            bcast_traffic += (m - 1) * nbytes
            for dn in o.devices:
                bcast_bytes_on[dev_pos[dn]] += (m - 1) * nbytes

    codec_by_name = {c.name: c for c in inst.codecs}
    for g in inst.gradients:
        method = plan.sync.get(g.name)
        prod_dup = dup[op_pos[g.op]]
        if method is None:
            violations.append(f"gradient {g.name!r} has no synchronization method")
        elif method == "sfb" and not prod_dup:
            violations.append(f"gradient {g.name!r} uses sfb but its producer {g.op!r} is not duplicated")
        elif method != "sfb" and prod_dup:
            violations.append(f"gradient {g.name!r} uses {method} but its producer {g.op!r} is duplicated (it is already identical on every replica)")
        elif method not in BUILTIN_METHODS:
            codec = codec_by_name.get(method)
            if codec is None:
                violations.append(f"gradient {g.name!r}: unknown codec {method!r}")
            elif codec.method == "sparse_index" and g.density >= 1.0:
                violations.append(f"gradient {g.name!r} is dense; sparse-index encoding needs a sparse gradient")
            elif g.profile not in codec.ratio and not (codec.method == "sparse_index" and g.shape is not None):
                violations.append(f"gradient {g.name!r}: codec {method!r} has no ratio for profile {g.profile!r}")

    # memory
    mem = [d.reserved_bytes for d in devices]
    for i, o in enumerate(inst.ops):
        factor = len(o.devices) if dup[i] else 1
        for dn in o.devices:
            mem[dev_pos[dn]] += factor * o.memory_bytes
    for k in range(nd):
        mem[k] += bcast_bytes_on[k]
        if mem[k] > devices[k].memory_bytes * (1 + 1e-9) + TOL:
            violations.append(
                f"device {devices[k].name}: memory {mem[k]:.6g} bytes exceeds its {devices[k].memory_bytes:.6g} "
                f"by {mem[k] - devices[k].memory_bytes:.6g} bytes (duplicated ops and gathered inputs)"
            )

    # order
    names = [g.name for g in inst.gradients]
    if plan.order is not None:
        if sorted(plan.order) != sorted(names):
            violations.append("order must list every gradient exactly once")
            order = None
        else:
            order = list(plan.order)
    else:
        order = None

    # 1. compute streams
    finish: list[dict[int, float]] = [{} for _ in range(nd)]
    stream_end = [0.0] * nd
    for k, d in enumerate(devices):
        clock = 0.0
        for i, o in enumerate(inst.ops):
            if o.role == "update" or d.name not in o.devices:
                continue
            if not dup[i]:
                clock += o.compute_seconds[d.type]
            finish[k][i] = clock
        stream_end[k] = clock

    if order is None:
        order = sorted(names, key=lambda n: (op_pos[inst.gradients[inst.gradient_index[n]].op], inst.gradient_index[n]))
    grad_by_name = {g.name: g for g in inst.gradients}
    enc_free = [0.0] * nd
    sync_free = [0.0] * nd
    channel_free = 0.0
    channel_busy = 0.0
    traffic = 0.0
    schedule: dict[str, dict[str, float]] = {}
    tag_cost = 0.0
    for gname in order:
        g = grad_by_name[gname]
        p = op_pos[g.op]
        gdevs = [dev_pos[dn] for dn in inst.ops[p].devices]
        m = len(gdevs)
        bw = bottleneck(inst.ops[p].devices)
        method = plan.sync.get(gname, "allreduce")
        codec = codec_by_name.get(method)
        # channel seconds of this gradient
        if m < 2:
            chan = 0.0
        elif method == "sfb":
            chan = bcast_seconds[gname]
        elif codec is not None:
            if g.profile in codec.ratio:
                ratio = codec.ratio[g.profile]
            elif codec.method == "sparse_index" and g.shape is not None:
                row = g.shape[1] * DTYPE_BYTES[g.dtype]
                ratio = g.density * (row + INDEX_BYTES) / row
            else:
                ratio = 1.0
            chan = (m - 1) * ratio * g.bytes / bw
            traffic += (m - 1) * ratio * g.bytes
        else:
            chan = 2.0 * (m - 1) / m * g.bytes / bw
            traffic += 2.0 * (m - 1) / m * g.bytes
        ready = 0.0
        for k in gdevs:
            release = finish[k][p]
            if codec is not None and m >= 2:
                start = max(enc_free[k], release)
                enc_free[k] = start + g.bytes / codec.encode_bytes_per_second[devices[k].type]
                ready = max(ready, enc_free[k])
            else:
                ready = max(ready, release)
        c_start = max(channel_free, ready)
        c_end = c_start + chan
        channel_free = c_end
        channel_busy += chan
        update_op = inst.ops[op_pos[g.update]]
        last_end = c_end
        for k in gdevs:
            dtype = devices[k].type
            work = update_op.compute_seconds[dtype]
            if codec is not None and m >= 2:
                work += (m - 1) * g.bytes / codec.decode_bytes_per_second[dtype]
            for i in dup_ops_of[gname]:
                work += len(inst.ops[i].devices) * inst.ops[i].compute_seconds[dtype]
            start = max(sync_free[k], c_end, stream_end[k])
            sync_free[k] = start + work
            last_end = max(last_end, sync_free[k])
        schedule[gname] = {"release": max(finish[k][p] for k in gdevs), "channel_start": c_start, "channel_end": c_end, "done": last_end}
        if method == "sfb" and m >= 2:
            tag_cost -= 2.0 * (m - 1) / m * g.bytes / bw
    traffic += bcast_traffic
    for seconds in bcast_seconds.values():
        tag_cost += seconds
    for i, o in enumerate(inst.ops):
        if dup[i]:
            times = [o.compute_seconds[devices[dev_pos[dn]].type] for dn in o.devices]
            tag_cost += (len(o.devices) - 1) * sum(times) / len(times)
    iteration = max(max(stream_end), max(sync_free), channel_free)
    details = {
        "iteration_seconds": iteration,
        "compute_end_seconds": {d.name: stream_end[k] for k, d in enumerate(devices)},
        "channel_busy_seconds": channel_busy,
        "channel_bytes": traffic,
        "tag_cost_seconds": tag_cost,
        "broadcast_edges": n_bcast,
        "duplicated_ops": int(sum(dup)),
        "methods": plan.method_counts(),
        "memory_bytes": {d.name: mem[k] for k, d in enumerate(devices)},
        "memory_capacity_bytes": {d.name: d.memory_bytes for d in devices},
        "order": order,
        "schedule": schedule,
    }
    return Check(feasible=not violations, objective=iteration, violations=violations, details=details)


def describe(inst: CompressionInstance, plan: CompressionPlan, check: Check) -> list[str]:
    """A few lines about a checked plan: methods, duplication, channel load, memory."""
    d = check.details
    lines = [
        "methods      " + ", ".join(f"{m}={n}" for m, n in sorted(plan.method_counts().items())),
        f"duplicated   {d.get('duplicated_ops', 0)} ops, {d.get('broadcast_edges', 0)} broadcast tensors",
        f"channel      busy {d.get('channel_busy_seconds', 0.0) * 1e3:.3f} ms, {d.get('channel_bytes', 0.0) / 1e6:.3f} MB",
        f"TAG cost     {d.get('tag_cost_seconds', 0.0) * 1e3:.3f} ms (redundant compute + broadcasts - all-reduce avoided)",
    ]
    mem = d.get("memory_bytes", {})
    cap = d.get("memory_capacity_bytes", {})
    for name, used in mem.items():
        lines.append(f"memory       {name:<12} {used / 2**30:8.3f} / {cap.get(name, float('nan')) / 2**30:.3f} GiB")
    return lines


SPEC = register_kind(
    KindSpec(
        kind="compression",
        from_dict=CompressionInstance.from_dict,
        plan_from_dict=plan_from_dict,
        evaluate=evaluate,
        objective_name="iteration",
        objective_unit="s",
        describe=describe,
    )
)
