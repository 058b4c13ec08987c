"""The layer graph shared by the analytic zoo and the PyTorch importer.

`LayerGraph` holds forward ops (`LayerOp`: FLOPs, bytes moved, parameter, output and buffer
bytes) and tensor edges (bytes). `LayerGraph.training()` derives backward ops (2x forward
FLOPs; activation-gradient edges mirror the forward edges) and optimizer update ops fed by
parameter-gradient edges (``"gradient": true``, bytes = parameter bytes). Training memory
follows ZeRO's accounting (Rajbhandari et al. 2020): mixed-precision Adam holds 2 + 2 + 12
bytes per parameter (weights, gradients, fp32 master/momentum/variance). Op times come from
the roofline of each device type of a cluster (`DeviceSpec.roofline_seconds`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.catalogue import ClusterSpec, DeviceSpec, device
from distplan.models.graphs import topological_order

GENERATOR_VERSION = "1"
DTYPE_BYTES = {"fp16": 2, "bf16": 2, "fp32": 4, "float16": 2, "bfloat16": 2, "float32": 4, "fp64": 8, "float64": 8}
OPTIMIZERS = ("adam", "sgd")


# -- the layer graph ------------------------------------------------------------------------------


@dataclass
class LayerOp:
    """One op: forward FLOPs, bytes read + written (roofline memory term), parameter bytes,
    output bytes. ``seconds`` fixes its time on every device (measured or user-given)."""

    name: str
    type: str
    flops: float = 0.0
    bytes_moved: float = 0.0
    params: float = 0.0
    output: float = 0.0
    buffers: float = 0.0
    seconds: float | None = None
    phase: str = "forward"
    #: bytes held on its device; None: params + buffers (inference) -- set by `training()`
    memory: float | None = None
    #: False for ops whose output carries no gradient (integer masks, index arithmetic)
    differentiable: bool = True
    #: name of the op owning parameters this op shares (tied weights)
    shares_params_of: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass
class Edge:
    src: int
    dst: int
    bytes: float
    gradient: bool = False


class LayerGraph:
    """A DAG of `LayerOp`s with tensor edges (bytes), colocation groups and the dtype of its math."""

    def __init__(self, name: str, dtype: str = "fp16"):
        if dtype not in DTYPE_BYTES:
            raise InputError("dtype", f"unknown dtype {dtype!r}", f"use one of {', '.join(DTYPE_BYTES)}")
        self.name = name
        self.dtype = dtype
        self.ops: list[LayerOp] = []
        self.edges: list[Edge] = []
        self.index: dict[str, int] = {}
        self.colocate: dict[int, str] = {}
        self.training_of: str | None = None  # optimizer name once `training()` ran

    @property
    def elem(self) -> int:
        """Bytes per element of the model dtype."""
        return DTYPE_BYTES[self.dtype]

    def __len__(self) -> int:
        return len(self.ops)

    def add_op(self, op: LayerOp) -> int:
        if op.name in self.index:
            raise InputError("graph.ops", f"duplicate op name {op.name!r}", "give every op a unique name")
        self.index[op.name] = len(self.ops)
        self.ops.append(op)
        return self.index[op.name]

    def add(
        self,
        name: str,
        type: str,
        *,
        flops: float = 0.0,
        params: float = 0.0,
        output: float = 0.0,
        inputs: Sequence[str | tuple[str, float]] = (),
        bytes_moved: float | None = None,
        extra_read: float = 0.0,
        **info: Any,
    ) -> str:
        """Add an op fed by ``inputs`` (op names, or (name, bytes) for part of an output).
        Bytes moved default to inputs + output + params + ``extra_read`` (bytes)."""
        pairs: list[tuple[int, float]] = []
        for item in inputs:
            src, nbytes = (item, None) if isinstance(item, str) else item
            if src not in self.index:
                raise InputError(f"op {name!r}", f"input {src!r} is not an op yet", "add producers before consumers")
            k = self.index[src]
            pairs.append((k, float(self.ops[k].output if nbytes is None else nbytes)))
        moved = (sum(b for _, b in pairs) + output + params + extra_read) if bytes_moved is None else bytes_moved
        k = self.add_op(LayerOp(name, type, float(flops), float(moved), float(params), float(output), info=dict(info)))
        for src_id, nbytes_in in pairs:
            self.edges.append(Edge(src_id, k, nbytes_in))
        return name

    def connect(self, src: str, dst: str, nbytes: float, gradient: bool = False) -> None:
        self.edges.append(Edge(self.index[src], self.index[dst], float(nbytes), gradient))

    def colocate_ops(self, names: Sequence[str], group: str) -> None:
        for nm in names:
            self.colocate[self.index[nm]] = group

    # -- totals -------------------------------------------------------------------------------
    def total_flops(self, phase: str | None = None, types: Sequence[str] | None = None) -> float:
        return float(sum(o.flops for o in self.ops if (phase is None or o.phase == phase) and (types is None or o.type in types)))

    def total_params(self) -> float:
        """Parameter bytes (forward ops; tied weights counted once)."""
        return float(sum(o.params for o in self.ops if o.phase == "forward"))

    # -- training graph ----------------------------------------------------------------------
    def training(self, optimizer: str | None = "adam", backward_factor: float = 2.0, colocate_backward: bool = True) -> LayerGraph:
        """A new graph with backward ops (``<op>.grad``: ``backward_factor`` x forward FLOPs and
        time, 2x bytes moved) and, with an optimizer, update ops (``<op>.update``) fed by
        parameter-gradient edges. Forward ops then also hold their output (stashed for the
        backward pass). Only ops a gradient reaches get a backward op. With
        ``colocate_backward`` a forward op, its backward op and its update share one
        colocation group (named after the forward op, or its own group), as TensorFlow's
        ``colocate_gradients_with_ops`` does in Baechi's graphs: the update holds the
        optimizer state of the weights the forward op reads."""
        if self.training_of is not None:
            raise InputError("backward", "the graph already has backward ops")
        if optimizer is not None and optimizer not in OPTIMIZERS:
            raise InputError("optimizer", f"unknown optimizer {optimizer!r}", f"use one of {OPTIMIZERS} or None")
        n = len(self.ops)
        succ: list[list[int]] = [[] for _ in range(n)]
        pred: list[list[int]] = [[] for _ in range(n)]
        for e in self.edges:
            succ[e.src].append(e.dst)
            pred[e.dst].append(e.src)
        src = np.array([e.src for e in self.edges], dtype=np.int64)
        dst = np.array([e.dst for e in self.edges], dtype=np.int64)
        order = topological_order(n, src, dst).tolist()
        if len(order) != n:
            raise InputError("graph.edges", "the layer graph has a cycle", "check the model definition")
        requires = [False] * n
        for v in order:
            op = self.ops[v]
            requires[v] = op.differentiable and (op.params > 0 or op.shares_params_of is not None or any(requires[u] for u in pred[v]))
        needs = [False] * n
        for v in reversed(order):
            needs[v] = requires[v] and (not succ[v] or any(needs[s] for s in succ[v]))

        out = LayerGraph(self.name, self.dtype)
        elem = self.elem
        for k, op in enumerate(self.ops):
            stash = op.output if needs[k] else 0.0
            out.add_op(_copy_op(op, memory=op.params + op.buffers + stash))
        out.edges = [Edge(e.src, e.dst, e.bytes, e.gradient) for e in self.edges]
        out.colocate = dict(self.colocate)
        group_of = {k: self.colocate.get(k, self.ops[k].name) for k in range(n)}

        in_grad_bytes = [0.0] * n  # bytes of the activation gradients a backward op emits
        for e in self.edges:
            if needs[e.src]:
                in_grad_bytes[e.dst] += e.bytes
        grads: dict[int, int] = {}
        for v in reversed(order):
            if not needs[v]:
                continue
            op = self.ops[v]
            act_grad = in_grad_bytes[v]
            g = out.add_op(
                LayerOp(
                    f"{op.name}.grad",
                    op.type,
                    flops=backward_factor * op.flops,
                    bytes_moved=2.0 * op.bytes_moved,
                    params=0.0,
                    output=act_grad,
                    seconds=None if op.seconds is None else backward_factor * op.seconds,
                    phase="backward",
                    memory=op.params,
                    info={**op.info, "forward": op.name},
                )
            )
            grads[v] = g
            if colocate_backward:  # the forward op, its gradient and its update: one group
                out.colocate[v] = group_of[v]
                out.colocate[g] = group_of[v]
            if not any(needs[s] for s in succ[v]):  # gradient seed at an output / the loss
                out.edges.append(Edge(v, g, op.output))
        for e in self.edges:
            if needs[e.src] and needs[e.dst]:
                out.edges.append(Edge(grads[e.dst], grads[e.src], e.bytes))

        if optimizer is not None:
            state_per_elem = (12.0 if elem < 4 else 8.0) if optimizer == "adam" else 0.0
            for v in range(n):
                op = self.ops[v]
                if op.params <= 0 or v not in grads:
                    continue
                elems = op.params / elem
                state = state_per_elem * elems
                u = out.add_op(
                    LayerOp(
                        f"{op.name}.update",
                        f"optimizer.{optimizer}",
                        flops=(12.0 if optimizer == "adam" else 2.0) * elems,
                        bytes_moved=2.0 * state + 3.0 * op.params,
                        phase="update",
                        memory=state,
                        info={"forward": op.name},
                    )
                )
                if colocate_backward:
                    out.colocate[u] = group_of[v]
                out.edges.append(Edge(grads[v], u, op.params, gradient=True))
            for v in range(n):  # tied weights: their gradient goes to the owner's update
                owner = self.ops[v].shares_params_of
                if owner is not None and v in grads:
                    w = self.index[owner]
                    upd = out.index.get(f"{owner}.update")
                    if upd is not None:
                        out.edges.append(Edge(grads[v], upd, self.ops[w].params, gradient=True))
        out.training_of = optimizer or "none"
        return out

    # -- document -------------------------------------------------------------------------------
    def times(self, types: Sequence[str], devices: Mapping[str, DeviceSpec] | None = None) -> dict[str, np.ndarray]:
        """Seconds per op for each device type: fixed ``seconds``, else the roofline of the
        catalogue device (or of ``devices[type]``, a `DeviceSpec` with other constants)."""
        flops = np.array([o.flops for o in self.ops])
        moved = np.array([o.bytes_moved for o in self.ops])
        fixed = np.array([math.nan if o.seconds is None else o.seconds for o in self.ops])
        dtype = "fp32" if self.elem >= 4 else "fp16"
        out: dict[str, np.ndarray] = {}
        for t in types:
            spec = (devices or {}).get(t) or device(t)
            roof = spec.roofline_array(flops, moved, dtype)
            out[t] = np.where(np.isnan(fixed), roof, fixed)
        return out

    def to_document(
        self,
        cluster: ClusterSpec,
        name: str | None = None,
        meta: dict[str, Any] | None = None,
        model: dict[str, Any] | None = None,
        devices: Mapping[str, DeviceSpec] | None = None,
    ) -> dict[str, Any]:
        """A ``distplan/1`` placement document on ``cluster`` (seconds, bytes)."""
        types = cluster.type_names()
        per_type = self.times(types, devices)
        ops: list[dict[str, Any]] = []
        for k, op in enumerate(self.ops):
            t: Any
            if len(types) == 1:
                t = float(per_type[types[0]][k])
            else:
                t = {ty: float(per_type[ty][k]) for ty in types}
            mem = op.params + op.buffers if op.memory is None else op.memory
            row: dict[str, Any] = {"name": op.name, "time": t, "memory": float(mem)}
            if op.output:
                row["output"] = float(op.output)
            if k in self.colocate:
                row["colocate"] = self.colocate[k]
            row["type"] = op.type
            row["phase"] = op.phase
            row["flops"] = float(op.flops)
            if op.params:
                row["params"] = float(op.params)
            for key, value in op.info.items():
                row.setdefault(key, value)
            ops.append(row)
        edges = []
        for e in self.edges:
            row = {"src": self.ops[e.src].name, "dst": self.ops[e.dst].name, "bytes": float(e.bytes)}
            if e.gradient:
                row["gradient"] = True
            edges.append(row)
        doc: dict[str, Any] = {
            "format": "distplan/1",
            "kind": "placement",
            "name": name or f"{self.name}-{cluster.name}",
            "graph": {"ops": ops, "edges": edges},
            "cluster": cluster.placement_section(),
        }
        if model:
            doc["model"] = model
        doc["meta"] = {**(meta or {})}
        return doc


def _copy_op(op: LayerOp, **changes: Any) -> LayerOp:
    fields = dict(op.__dict__)
    fields["info"] = dict(op.info)
    fields.update(changes)
    return LayerOp(**fields)
