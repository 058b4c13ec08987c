"""Analytic placement instances of well-known models (no torch needed).

Models are built at layer-op granularity from their shapes: FLOPs, parameter bytes and
activation bytes follow from the configuration, op times from the roofline of each
device type in the cluster (`DeviceSpec.roofline_seconds`). `LayerGraph` is the shared
builder (the PyTorch importer produces one too): forward ops, then derived backward ops
(2x forward FLOPs; activation-gradient edges mirror the forward edges) and optimizer
update ops fed by parameter-gradient edges (``"gradient": true``, bytes = parameter
bytes) when a training graph is asked for.

Models: GPT-2 small/medium/large/XL (Radford et al. 2019), BERT-base/large (Devlin et al.
2019), a ResNet-50-like CNN (He et al. 2016, torchvision's v1.5 layout) and an
Inception-v3-like CNN (Szegedy et al. 2016, torchvision's layout without the auxiliary
head). Training memory follows ZeRO's accounting (Rajbhandari et al. 2020): mixed-precision
Adam holds 2 + 2 + 12 bytes per parameter (weights, gradients, fp32 master/momentum/variance).

`make_placement(model, cluster, memory_limit)` returns a ``distplan/1`` placement document.
"""

from __future__ import annotations

import datetime as _dt
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.catalogue import ClusterSpec, DeviceSpec, device
from distplan.models.catalogue import cluster as catalogue_cluster
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
        backward pass). Only ops a gradient reaches get a backward op."""
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
            if colocate_backward:
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


# -- transformers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TransformerConfig:
    """Shape of a transformer: layers, hidden size, heads, vocabulary, maximum sequence."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    max_seq: int
    decoder: bool  # GPT (pre-LN, tied logits) vs BERT (post-LN encoder, MLM head)
    seq: int  # default sequence length
    batch: int  # default batch size
    source: str


TRANSFORMERS: dict[str, TransformerConfig] = {
    c.name: c
    for c in [
        TransformerConfig("gpt2-small", 12, 768, 12, 50257, 1024, True, 1024, 8, "Radford et al. 2019, GPT-2 124M (HF gpt2 config)"),
        TransformerConfig("gpt2-medium", 24, 1024, 16, 50257, 1024, True, 1024, 8, "Radford et al. 2019, GPT-2 355M (HF gpt2-medium config)"),
        TransformerConfig("gpt2-large", 36, 1280, 20, 50257, 1024, True, 1024, 4, "Radford et al. 2019, GPT-2 774M (HF gpt2-large config)"),
        TransformerConfig("gpt2-xl", 48, 1600, 25, 50257, 1024, True, 1024, 4, "Radford et al. 2019, GPT-2 1.5B (HF gpt2-xl config)"),
        TransformerConfig("bert-base", 12, 768, 12, 30522, 512, False, 512, 16, "Devlin et al. 2019, BERT-base uncased (110M)"),
        TransformerConfig("bert-large", 24, 1024, 16, 30522, 512, False, 512, 8, "Devlin et al. 2019, BERT-large uncased (340M)"),
    ]
}


def transformer_graph(cfg: TransformerConfig, batch: int | None = None, seq: int | None = None, dtype: str = "fp16") -> LayerGraph:
    """Forward graph of a GPT-2 / BERT model: per layer LN, QKV, attention scores, softmax,
    attention context, projection, residual adds, MLP (fc1, GeLU, fc2). Matmul FLOPs per layer
    are 24·b·s·h² + 4·b·s²·h, the logits 2·b·s·h·V (FLOPs = 2 x multiply-adds)."""
    b = cfg.batch if batch is None else batch
    s = cfg.seq if seq is None else seq
    if s > cfg.max_seq:
        raise InputError("seq", f"{s} exceeds the model's maximum sequence length {cfg.max_seq}")
    h, a, V = cfg.hidden, cfg.heads, cfg.vocab
    g = LayerGraph(f"{cfg.name}-b{b}-s{s}", dtype)
    E = g.elem
    X = b * s * h * E
    S = b * a * s * s * E
    ids = b * s * 8  # int64 token ids read by the embedding lookups

    g.add("wte", "embedding", params=V * h * E, output=X, bytes_moved=2 * X + ids)
    g.add("wpe", "embedding", params=cfg.max_seq * h * E, output=s * h * E, bytes_moved=2 * s * h * E)
    if cfg.decoder:
        x = g.add("embed", "add", flops=b * s * h, output=X, inputs=["wte", "wpe"])
    else:
        g.add("wtt", "embedding", params=2 * h * E, output=X, bytes_moved=2 * X + ids)
        g.add("embed_sum", "add", flops=2 * b * s * h, output=X, inputs=["wte", "wpe", "wtt"])
        x = g.add("embed_ln", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=["embed_sum"])

    for layer in range(cfg.layers):
        p = f"h{layer}." if cfg.decoder else f"layer{layer}."
        attn_in = g.add(p + "ln1", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=[x]) if cfg.decoder else x
        g.add(p + "qkv", "matmul", flops=6 * b * s * h * h, params=(3 * h * h + 3 * h) * E, output=3 * X, inputs=[attn_in])
        g.add(p + "attn_scores", "bmm", flops=2 * b * s * s * h, output=S, inputs=[(p + "qkv", 2 * X)])
        g.add(p + "softmax", "softmax", flops=5 * b * a * s * s, output=S, inputs=[p + "attn_scores"])
        g.add(p + "attn_context", "bmm", flops=2 * b * s * s * h, output=X, inputs=[p + "softmax", (p + "qkv", X)])
        g.add(p + "proj", "matmul", flops=2 * b * s * h * h, params=(h * h + h) * E, output=X, inputs=[p + "attn_context"])
        res1 = g.add(p + "add1", "add", flops=b * s * h, output=X, inputs=[x, p + "proj"])
        if cfg.decoder:
            mlp_in = g.add(p + "ln2", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=[res1])
        else:
            mlp_in = g.add(p + "ln1", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=[res1])
        g.add(p + "fc1", "matmul", flops=8 * b * s * h * h, params=(4 * h * h + 4 * h) * E, output=4 * X, inputs=[mlp_in])
        g.add(p + "gelu", "gelu", flops=8 * 4 * b * s * h, output=4 * X, inputs=[p + "fc1"])
        g.add(p + "fc2", "matmul", flops=8 * b * s * h * h, params=(4 * h * h + h) * E, output=X, inputs=[p + "gelu"])
        x = g.add(p + "add2", "add", flops=b * s * h, output=X, inputs=[mlp_in if not cfg.decoder else res1, p + "fc2"])
        if not cfg.decoder:
            x = g.add(p + "ln2", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=[x])

    logits = b * s * V * E
    if cfg.decoder:
        g.add("ln_f", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=[x])
        g.add("logits", "matmul", flops=2 * b * s * h * V, output=logits, inputs=["ln_f"], extra_read=V * h * E)
    else:
        g.add("mlm_dense", "matmul", flops=2 * b * s * h * h, params=(h * h + h) * E, output=X, inputs=[x])
        g.add("mlm_gelu", "gelu", flops=8 * b * s * h, output=X, inputs=["mlm_dense"])
        g.add("mlm_ln", "layernorm", flops=8 * b * s * h, params=2 * h * E, output=X, inputs=["mlm_gelu"])
        g.add("logits", "matmul", flops=2 * b * s * h * V, params=V * E, output=logits, inputs=["mlm_ln"], extra_read=V * h * E)
    g.ops[g.index["logits"]].shares_params_of = "wte"  # tied with the token embedding
    g.colocate_ops(["wte", "logits"], "wte")
    g.add("loss", "cross_entropy", flops=5 * b * s * V, output=4, inputs=["logits"], extra_read=b * s * 8)
    return g


# -- CNNs ------------------------------------------------------------------------------------------


class _CNN:
    """Helper tracking (channels, height, width) of each op's output for a CNN at batch b."""

    def __init__(self, name: str, batch: int, dtype: str):
        self.g = LayerGraph(name, dtype)
        self.b = batch
        self.shape: dict[str, tuple[int, int, int]] = {}

    def _out(self, name: str, c: int, hgt: int, wid: int) -> float:
        self.shape[name] = (c, hgt, wid)
        return float(self.b * c * hgt * wid * self.g.elem)

    def input(self, name: str, c: int, hgt: int, wid: int) -> str:
        out = self._out(name, c, hgt, wid)
        self.g.add(name, "input", output=out, bytes_moved=2 * out)
        self.g.ops[-1].differentiable = False
        return name

    def conv(self, name: str, src: str, cout: int, k: tuple[int, int] | int, stride: int = 1, pad: tuple[int, int] | int = 0, bn: bool = True, relu: bool = True, bias: bool = False) -> str:
        """Conv (+ batch norm, ReLU fused into the op): FLOPs 2·b·Hout·Wout·Cout·Cin·kh·kw."""
        cin, hin, win = self.shape[src]
        kh, kw = (k, k) if isinstance(k, int) else k
        ph, pw = (pad, pad) if isinstance(pad, int) else pad
        hout = (hin + 2 * ph - kh) // stride + 1
        wout = (win + 2 * pw - kw) // stride + 1
        out = self._out(name, cout, hout, wout)
        elems = self.b * cout * hout * wout
        flops = 2 * elems * cin * kh * kw + (4 * elems if bn else 0) + (elems if relu else 0)
        params = (cin * cout * kh * kw + (cout if bias else 0) + (2 * cout if bn else 0)) * self.g.elem
        kind = "conv" + ("_bn" if bn else "") + ("_relu" if relu else "")
        self.g.add(name, kind, flops=flops, params=params, output=out, inputs=[src])
        if bn:
            self.g.ops[-1].buffers = 2 * cout * self.g.elem  # running mean / variance
        return name

    def pool(self, name: str, src: str, k: int, stride: int, pad: int = 0, kind: str = "maxpool") -> str:
        c, hin, win = self.shape[src]
        hout = (hin + 2 * pad - k) // stride + 1
        wout = (win + 2 * pad - k) // stride + 1
        out = self._out(name, c, hout, wout)
        self.g.add(name, kind, flops=self.b * c * hout * wout * k * k, output=out, inputs=[src])
        return name

    def global_pool(self, name: str, src: str) -> str:
        c, hin, win = self.shape[src]
        out = self._out(name, c, 1, 1)
        self.g.add(name, "avgpool", flops=self.b * c * hin * win, output=out, inputs=[src])
        return name

    def concat(self, name: str, srcs: Sequence[str]) -> str:
        shapes = [self.shape[s] for s in srcs]
        c = sum(sh[0] for sh in shapes)
        out = self._out(name, c, shapes[0][1], shapes[0][2])
        self.g.add(name, "concat", output=out, inputs=list(srcs))
        return name

    def add_relu(self, name: str, a: str, b: str) -> str:
        c, hgt, wid = self.shape[a]
        out = self._out(name, c, hgt, wid)
        self.g.add(name, "add_relu", flops=2 * self.b * c * hgt * wid, output=out, inputs=[a, b])
        return name

    def fc(self, name: str, src: str, classes: int) -> str:
        c, hgt, wid = self.shape[src]
        cin = c * hgt * wid
        out = self._out(name, classes, 1, 1)
        self.g.add(name, "matmul", flops=2 * self.b * cin * classes, params=(cin * classes + classes) * self.g.elem, output=out, inputs=[src])
        return name

    def loss(self, src: str) -> str:
        c, _, _ = self.shape[src]
        self.g.add("loss", "cross_entropy", flops=5 * self.b * c, output=4, inputs=[src])
        return "loss"


def resnet50_graph(batch: int = 32, dtype: str = "fp16", image: int = 224) -> LayerGraph:
    """ResNet-50-like CNN (He et al. 2016; torchvision v1.5: stride in the 3x3 conv), 25.6 M
    parameters; conv+BN(+ReLU) fused per op, one add+ReLU per bottleneck."""
    n = _CNN(f"resnet50-b{batch}", batch, dtype)
    x = n.input("image", 3, image, image)
    x = n.conv("conv1", x, 64, 7, 2, 3)
    x = n.pool("maxpool", x, 3, 2, 1)
    cin = 64
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]):
        for blk in range(blocks):
            p = f"layer{stage + 1}.{blk}."
            s = stride if blk == 0 else 1
            y = n.conv(p + "conv1", x, width, 1)
            y = n.conv(p + "conv2", y, width, 3, s, 1)
            y = n.conv(p + "conv3", y, 4 * width, 1, relu=False)
            short = n.conv(p + "downsample", x, 4 * width, 1, s, relu=False) if blk == 0 else x
            x = n.add_relu(p + "add_relu", y, short)
            cin = 4 * width
    del cin
    x = n.global_pool("avgpool", x)
    x = n.fc("fc", x, 1000)
    n.loss(x)
    return n.g


def inception_v3_graph(batch: int = 32, dtype: str = "fp16", image: int = 299) -> LayerGraph:
    """Inception-v3-like CNN (Szegedy et al. 2016; torchvision's Inception3 layout without the
    auxiliary classifier), about 23.8 M parameters; each BasicConv2d (conv+BN+ReLU) is one op."""
    n = _CNN(f"inception-v3-b{batch}", batch, dtype)
    x = n.input("image", 3, image, image)
    x = n.conv("Conv2d_1a_3x3", x, 32, 3, 2)
    x = n.conv("Conv2d_2a_3x3", x, 32, 3)
    x = n.conv("Conv2d_2b_3x3", x, 64, 3, 1, 1)
    x = n.pool("maxpool1", x, 3, 2)
    x = n.conv("Conv2d_3b_1x1", x, 80, 1)
    x = n.conv("Conv2d_4a_3x3", x, 192, 3)
    x = n.pool("maxpool2", x, 3, 2)

    def block_a(p: str, x: str, pool_features: int) -> str:
        b1 = n.conv(p + "branch1x1", x, 64, 1)
        b5 = n.conv(p + "branch5x5_2", n.conv(p + "branch5x5_1", x, 48, 1), 64, 5, 1, 2)
        d = n.conv(p + "branch3x3dbl_1", x, 64, 1)
        d = n.conv(p + "branch3x3dbl_2", d, 96, 3, 1, 1)
        d = n.conv(p + "branch3x3dbl_3", d, 96, 3, 1, 1)
        bp = n.conv(p + "branch_pool", n.pool(p + "avgpool", x, 3, 1, 1, "avgpool"), pool_features, 1)
        return n.concat(p + "concat", [b1, b5, d, bp])

    def block_b(p: str, x: str) -> str:
        b3 = n.conv(p + "branch3x3", x, 384, 3, 2)
        d = n.conv(p + "branch3x3dbl_1", x, 64, 1)
        d = n.conv(p + "branch3x3dbl_2", d, 96, 3, 1, 1)
        d = n.conv(p + "branch3x3dbl_3", d, 96, 3, 2)
        bp = n.pool(p + "maxpool", x, 3, 2)
        return n.concat(p + "concat", [b3, d, bp])

    def block_c(p: str, x: str, c7: int) -> str:
        b1 = n.conv(p + "branch1x1", x, 192, 1)
        s = n.conv(p + "branch7x7_1", x, c7, 1)
        s = n.conv(p + "branch7x7_2", s, c7, (1, 7), 1, (0, 3))
        s = n.conv(p + "branch7x7_3", s, 192, (7, 1), 1, (3, 0))
        d = n.conv(p + "branch7x7dbl_1", x, c7, 1)
        d = n.conv(p + "branch7x7dbl_2", d, c7, (7, 1), 1, (3, 0))
        d = n.conv(p + "branch7x7dbl_3", d, c7, (1, 7), 1, (0, 3))
        d = n.conv(p + "branch7x7dbl_4", d, c7, (7, 1), 1, (3, 0))
        d = n.conv(p + "branch7x7dbl_5", d, 192, (1, 7), 1, (0, 3))
        bp = n.conv(p + "branch_pool", n.pool(p + "avgpool", x, 3, 1, 1, "avgpool"), 192, 1)
        return n.concat(p + "concat", [b1, s, d, bp])

    def block_d(p: str, x: str) -> str:
        b3 = n.conv(p + "branch3x3_2", n.conv(p + "branch3x3_1", x, 192, 1), 320, 3, 2)
        s = n.conv(p + "branch7x7x3_1", x, 192, 1)
        s = n.conv(p + "branch7x7x3_2", s, 192, (1, 7), 1, (0, 3))
        s = n.conv(p + "branch7x7x3_3", s, 192, (7, 1), 1, (3, 0))
        s = n.conv(p + "branch7x7x3_4", s, 192, 3, 2)
        bp = n.pool(p + "maxpool", x, 3, 2)
        return n.concat(p + "concat", [b3, s, bp])

    def block_e(p: str, x: str) -> str:
        b1 = n.conv(p + "branch1x1", x, 320, 1)
        t = n.conv(p + "branch3x3_1", x, 384, 1)
        t_a = n.conv(p + "branch3x3_2a", t, 384, (1, 3), 1, (0, 1))
        t_b = n.conv(p + "branch3x3_2b", t, 384, (3, 1), 1, (1, 0))
        d = n.conv(p + "branch3x3dbl_2", n.conv(p + "branch3x3dbl_1", x, 448, 1), 384, 3, 1, 1)
        d_a = n.conv(p + "branch3x3dbl_3a", d, 384, (1, 3), 1, (0, 1))
        d_b = n.conv(p + "branch3x3dbl_3b", d, 384, (3, 1), 1, (1, 0))
        bp = n.conv(p + "branch_pool", n.pool(p + "avgpool", x, 3, 1, 1, "avgpool"), 192, 1)
        return n.concat(p + "concat", [b1, t_a, t_b, d_a, d_b, bp])

    x = block_a("Mixed_5b.", x, 32)
    x = block_a("Mixed_5c.", x, 64)
    x = block_a("Mixed_5d.", x, 64)
    x = block_b("Mixed_6a.", x)
    for p, c7 in (("Mixed_6b.", 128), ("Mixed_6c.", 160), ("Mixed_6d.", 160), ("Mixed_6e.", 192)):
        x = block_c(p, x, c7)
    x = block_d("Mixed_7a.", x)
    x = block_e("Mixed_7b.", x)
    x = block_e("Mixed_7c.", x)
    x = n.global_pool("avgpool", x)
    x = n.fc("fc", x, 1000)
    n.loss(x)
    return n.g


# -- the model registry and make_placement ----------------------------------------------------------


@dataclass(frozen=True)
class ZooModel:
    name: str
    description: str
    build: Callable[..., LayerGraph]
    source: str


def _transformer_builder(cfg: TransformerConfig) -> Callable[..., LayerGraph]:
    def build(batch: int | None = None, seq: int | None = None, dtype: str = "fp16") -> LayerGraph:
        return transformer_graph(cfg, batch, seq, dtype)

    return build


def _cnn_builder(fn: Callable[..., LayerGraph]) -> Callable[..., LayerGraph]:
    def build(batch: int | None = None, seq: int | None = None, dtype: str = "fp16") -> LayerGraph:
        if seq is not None:
            raise InputError("seq", "a CNN has no sequence length", "drop seq (the image size is fixed)")
        return fn(32 if batch is None else batch, dtype)

    return build


MODELS: dict[str, ZooModel] = {
    **{
        c.name: ZooModel(
            c.name,
            f"{'GPT-2 decoder' if c.decoder else 'BERT encoder'}: {c.layers} layers, hidden {c.hidden}, {c.heads} heads",
            _transformer_builder(c),
            c.source,
        )
        for c in TRANSFORMERS.values()
    },
    "resnet-50": ZooModel("resnet-50", "ResNet-50-like CNN, 224x224 images", _cnn_builder(resnet50_graph), "He et al. 2016; torchvision resnet50 layout"),
    "inception-v3": ZooModel("inception-v3", "Inception-v3-like CNN, 299x299 images", _cnn_builder(inception_v3_graph), "Szegedy et al. 2016; torchvision inception_v3 layout (no aux head)"),
}


def model_graph(model: str, batch: int | None = None, seq: int | None = None, dtype: str = "fp16") -> LayerGraph:
    """The forward `LayerGraph` of a zoo model by name."""
    if model not in MODELS:
        raise InputError("model", f"unknown model {model!r}", f"use one of: {', '.join(MODELS)}")
    return MODELS[model].build(batch=batch, seq=seq, dtype=dtype)


def make_placement(
    model: str | LayerGraph,
    cluster: str | ClusterSpec,
    memory_limit: float | None = None,
    *,
    batch: int | None = None,
    seq: int | None = None,
    dtype: str = "fp16",
    backward: bool = True,
    optimizer: str | None = "adam",
    name: str | None = None,
    memory_model: str | None = None,
) -> dict[str, Any]:
    """A placement document: ``model`` (zoo name or `LayerGraph`) on ``cluster`` (catalogue
    name such as ``"dgx1"`` / ``"dgx1:4"``, or a `ClusterSpec`), each device capped at
    ``memory_limit`` bytes. ``backward`` adds backward and optimizer-update ops (training).
    ``memory_model`` ("simple" or "liveness") is written to the document's ``model`` section."""
    spec = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    spec = spec.with_memory_limit(memory_limit)
    if isinstance(model, LayerGraph):
        graph, model_name, source = model, model.name, "user LayerGraph"
    else:
        graph = model_graph(model, batch, seq, dtype)
        model_name, source = model, MODELS[model].source
    if backward and graph.training_of is None:
        graph = graph.training(optimizer)
    label = name or f"{model_name}-{spec.name}"
    meta = {
        "source": f"{source}; analytic shapes, roofline times (distplan.models.catalogue)",
        "parameters": {
            "model": model_name,
            "cluster": spec.name,
            "memory_limit": memory_limit,
            "batch": batch,
            "seq": seq,
            "dtype": dtype,
            "backward": backward,
            "optimizer": optimizer if backward else None,
        },
        "date": _dt.date.today().isoformat(),
        "generator": "distplan.instances.zoo.make_placement",
        "generator_version": GENERATOR_VERSION,
        "totals": {
            "forward_flops": graph.total_flops("forward"),
            "param_bytes": graph.total_params(),
        },
    }
    return graph.to_document(spec, label, meta, {"memory": memory_model} if memory_model else None)
