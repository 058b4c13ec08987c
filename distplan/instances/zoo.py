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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from distplan.errors import InputError
from distplan.instances.layergraph import DTYPE_BYTES, GENERATOR_VERSION, OPTIMIZERS, Edge, LayerGraph, LayerOp
from distplan.instances.zoo_llama import LLAMA_MODELS, llama_builder
from distplan.instances.zoo_llama import describe as describe_llama
from distplan.models.catalogue import ClusterSpec
from distplan.models.catalogue import cluster as catalogue_cluster

__all__ = ["DTYPE_BYTES", "GENERATOR_VERSION", "MODELS", "OPTIMIZERS", "TRANSFORMERS", "Edge", "LayerGraph", "LayerOp", "ZooModel", "make_placement", "model_graph"]


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


def _no_llama_options(micro_batches: int | None, granularity: str | None) -> None:
    if micro_batches is not None:
        raise InputError("micro_batches", "only Llama-class zoo models are built with micro-batches", f"use one of: {', '.join(LLAMA_MODELS)}")
    if granularity is not None:
        raise InputError("granularity", "only Llama-class zoo models have a granularity choice", f"use one of: {', '.join(LLAMA_MODELS)}")


def _transformer_builder(cfg: TransformerConfig) -> Callable[..., LayerGraph]:
    def build(batch: int | None = None, seq: int | None = None, dtype: str = "fp16", micro_batches: int | None = None, granularity: str | None = None) -> LayerGraph:
        _no_llama_options(micro_batches, granularity)
        return transformer_graph(cfg, batch, seq, dtype)

    return build


def _cnn_builder(fn: Callable[..., LayerGraph]) -> Callable[..., LayerGraph]:
    def build(batch: int | None = None, seq: int | None = None, dtype: str = "fp16", micro_batches: int | None = None, granularity: str | None = None) -> LayerGraph:
        _no_llama_options(micro_batches, granularity)
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
    **{c.name: ZooModel(c.name, describe_llama(c), llama_builder(c), c.source) for c in LLAMA_MODELS.values()},
}


def model_graph(
    model: str,
    batch: int | None = None,
    seq: int | None = None,
    dtype: str = "fp16",
    *,
    micro_batches: int | None = None,
    granularity: str | None = None,
) -> LayerGraph:
    """The forward `LayerGraph` of a zoo model by name. ``micro_batches`` and ``granularity``
    ("kernel" or "module") apply to the Llama-class models (`distplan.instances.zoo_llama`)."""
    if model not in MODELS:
        raise InputError("model", f"unknown model {model!r}", f"use one of: {', '.join(MODELS)}")
    return MODELS[model].build(batch=batch, seq=seq, dtype=dtype, micro_batches=micro_batches, granularity=granularity)


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
    micro_batches: int | None = None,
    granularity: str | None = None,
) -> dict[str, Any]:
    """A placement document: ``model`` (zoo name or `LayerGraph`) on ``cluster`` (catalogue
    name such as ``"dgx1"`` / ``"dgx1:4"``, or a `ClusterSpec`), each device capped at
    ``memory_limit`` bytes. ``backward`` adds backward and optimizer-update ops (training).
    ``memory_model`` ("simple" or "liveness") is written to the document's ``model`` section.
    ``micro_batches`` (gradient accumulation) and ``granularity`` ("kernel" / "module") apply
    to the Llama-class models."""
    spec = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    spec = spec.with_memory_limit(memory_limit)
    if isinstance(model, LayerGraph):
        graph, model_name, source = model, model.name, "user LayerGraph"
    else:
        graph = model_graph(model, batch, seq, dtype, micro_batches=micro_batches, granularity=granularity)
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
            **({"micro_batches": micro_batches} if micro_batches is not None else {}),
            **({"granularity": granularity} if granularity is not None else {}),
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
