"""GPT-style transformer training graphs as sharding instances.

`transformer(layers, hidden, heads, seq, batch, vocab, ffn=4*hidden, mesh=8, device=...)`
builds the forward graph of a pre-LayerNorm GPT (token + position embedding, ``layers``
blocks of attention and MLP with residual connections, final LayerNorm, LM head and
cross-entropy loss); the backward pass and optimizer are implied by the training costs of
the sharding cost model. Dims: b (batch), s (sequence), h (hidden), t (q/k/v), a (heads),
d (head size), f (FFN), v (vocabulary). The sequence dim is never split unless
``sequence_split=True``. The vocabulary is padded to a multiple of 128 x the largest mesh
axis, as Megatron-LM pads it to 128 x its tensor-parallel degree.

Per block (Narayanan et al., SC'21 FLOP convention): ln1, fused qkv projection
``[b,s,h] x [h,t,a,d]``, attention, output projection ``[b,s,a,d] x [a,d,h]``, residual
add, ln2, fc1 ``[b,s,h] x [h,f]``, GeLU, fc2 ``[b,s,f] x [f,h]``, residual add: 24bsh^2 +
4bs^2h forward FLOPs.

Default interconnect (per mesh axis): an axis of at most 8 devices inside a node uses
NVLink (240 GB/s bus bandwidth, 2 us per ring step); other axes use InfiniBand at
25 GB/s per GPU (200 Gb/s HDR) and 10 us per step. On a 2-D mesh axis 0 spans nodes and
axis 1 the GPUs of a node.
"""

from __future__ import annotations

import math
from typing import Any

from distplan.errors import InputError
from distplan.models.sharding import Mesh, Op, Param, ShardingInstance, Training

NVLINK = (240e9, 2e-6)
INFINIBAND = (25e9, 10e-6)

#: public model shapes (Radford et al. 2019 for GPT-2 XL; Brown et al. 2020 for GPT-3)
PRESETS: dict[str, dict[str, int]] = {
    "gpt2-xl": {"layers": 48, "hidden": 1600, "heads": 25, "seq": 1024, "vocab": 50257},
    "gpt3-175b": {"layers": 96, "hidden": 12288, "heads": 96, "seq": 2048, "vocab": 50257},
}


def default_links(shape: tuple[int, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(bandwidth bytes/s, latency s) per axis of a mesh, see the module docstring."""
    bw: list[float] = []
    lat: list[float] = []
    for axis, size in enumerate(shape):
        inner = axis == len(shape) - 1 and size <= 8
        link = NVLINK if inner else INFINIBAND
        bw.append(link[0])
        lat.append(link[1])
    return tuple(bw), tuple(lat)


def transformer(
    layers: int,
    hidden: int,
    heads: int,
    seq: int,
    batch: int,
    vocab: int,
    ffn: int | None = None,
    mesh: int | tuple[int, ...] | list[int] = 8,
    device: str = "A100-80GB",
    *,
    bandwidth: tuple[float, ...] | None = None,
    latency: tuple[float, ...] | None = None,
    memory: float | None = None,
    name: str | None = None,
    dtype: str = "fp16",
    flash: bool = False,
    sequence_split: bool = False,
    pad_vocab: bool = True,
    optimizer_bytes_per_param: float = 16.0,
    all_to_all: bool = True,
) -> ShardingInstance:
    """A GPT-style training graph on a device mesh (see the module docstring).

    ``memory`` is bytes per device (default: the device's); ``bandwidth`` (bytes/s) and
    ``latency`` (s) are per mesh axis (default: NVLink inside a node, InfiniBand across).
    """
    if hidden % heads:
        raise InputError("heads", f"hidden {hidden} is not a multiple of heads {heads}", "choose heads dividing hidden")
    for key, value in (("layers", layers), ("hidden", hidden), ("heads", heads), ("seq", seq), ("batch", batch), ("vocab", vocab)):
        if not isinstance(value, int) or value < (0 if key == "layers" else 1):
            raise InputError(key, f"expected a positive integer, got {value!r}")
    shape = (mesh,) if isinstance(mesh, int) else tuple(int(m) for m in mesh)
    if not 1 <= len(shape) <= 3 or min(shape) < 1:
        raise InputError("mesh", f"{mesh!r} is not a mesh shape of 1 to 3 positive axis sizes", "give e.g. 8 or (2, 4)")
    for key, given in (("bandwidth", bandwidth), ("latency", latency)):
        if given is not None and len(given) != len(shape):
            raise InputError(key, f"{len(given)} values for a {len(shape)}-axis mesh", "give one value per mesh axis")
    if memory is not None and not (math.isfinite(memory) and memory > 0):
        raise InputError("memory", f"{memory!r} bytes per device is not a number > 0", "give the memory per device in bytes")
    ffn = 4 * hidden if ffn is None else ffn
    if pad_vocab:
        multiple = 128 * max(shape)
        vocab = int(math.ceil(vocab / multiple) * multiple)
    bw_default, lat_default = default_links(shape)
    links = Mesh(
        shape=shape,
        bandwidth=tuple(bandwidth) if bandwidth is not None else bw_default,
        latency=tuple(latency) if latency is not None else lat_default,
        device=device,
        memory=memory,
        all_to_all=all_to_all,
    )
    dims = {"b": batch, "s": seq, "h": hidden, "t": 3, "a": heads, "d": hidden // heads, "f": ffn, "v": vocab}
    bsh = ("b", "s", "h")
    ops: list[Op] = [
        Op("tokens", "input", ("b", "s"), dtype="int32"),
        Op("embed", "embedding", bsh, ("tokens",), (Param("wte", ("v", "h")), Param("wpe", ("s", "h")))),
    ]
    x = "embed"
    for i in range(layers):
        p = f"l{i}."
        ops += [
            Op(p + "ln1", "layernorm", bsh, (x,), (Param("gamma", ("h",)), Param("beta", ("h",)))),
            Op(p + "qkv", "linear", ("b", "s", "t", "a", "d"), (p + "ln1",), (Param("w", ("h", "t", "a", "d")), Param("bias", ("t", "a", "d")))),
            Op(p + "attn", "attention", ("b", "s", "a", "d"), (p + "qkv",), attrs={"qkv_dim": "t", "seq_dim": "s", "head_dim": "d", "causal": True, "flash": flash}),
            Op(p + "proj", "linear", bsh, (p + "attn",), (Param("w", ("a", "d", "h")), Param("bias", ("h",)))),
            Op(p + "res1", "elementwise", bsh, (p + "proj", x)),
            Op(p + "ln2", "layernorm", bsh, (p + "res1",), (Param("gamma", ("h",)), Param("beta", ("h",)))),
            Op(p + "fc1", "linear", ("b", "s", "f"), (p + "ln2",), (Param("w", ("h", "f")), Param("bias", ("f",)))),
            Op(p + "gelu", "elementwise", ("b", "s", "f"), (p + "fc1",), attrs={"flops_per_element": 8}),
            Op(p + "fc2", "linear", bsh, (p + "gelu",), (Param("w", ("f", "h")), Param("bias", ("h",)))),
            Op(p + "res2", "elementwise", bsh, (p + "fc2", p + "res1")),
        ]
        x = p + "res2"
    ops += [
        Op("ln_f", "layernorm", bsh, (x,), (Param("gamma", ("h",)), Param("beta", ("h",)))),
        Op("head", "linear", ("b", "s", "v"), ("ln_f",), (Param("w", ("h", "v")),)),
        Op("loss", "loss", ("b", "s"), ("head",), dtype="fp32"),
    ]
    mesh_txt = "x".join(str(s) for s in shape)
    return ShardingInstance(
        name=name or f"gpt-l{layers}-h{hidden}-b{batch}-mesh{mesh_txt}",
        mesh=links,
        training=Training("b", optimizer_bytes_per_param=optimizer_bytes_per_param),
        dims=dims,
        ops=ops,
        dtype=dtype,
        never_split=() if sequence_split else ("s",),
        tensor_parallel_dims=("a", "f", "v"),
        description=(
            f"GPT-style transformer: {layers} layers, hidden {hidden}, {heads} heads, seq {seq}, "
            f"batch {batch}, vocab {vocab}, ffn {ffn}, on a {mesh_txt} mesh of {device}"
        ),
    )


def preset(model: str, batch: int = 8, mesh: int | tuple[int, ...] = 8, device: str = "A100-80GB", **kwargs: Any) -> ShardingInstance:
    """A named model shape (``gpt2-xl``, ``gpt3-175b``); ``kwargs`` override its fields
    (e.g. ``layers=4`` for a GPT-3-shaped model of 4 layers) or go to `transformer`."""
    if model not in PRESETS:
        raise InputError("model", f"unknown preset {model!r}", f"use one of: {', '.join(PRESETS)}")
    shape: dict[str, Any] = {**PRESETS[model]}
    for key in list(kwargs):
        if key in shape:
            shape[key] = kwargs.pop(key)
    kwargs.setdefault("name", f"{model}-l{shape['layers']}-b{batch}-mesh{'x'.join(str(m) for m in ((mesh,) if isinstance(mesh, int) else mesh))}")
    return transformer(batch=batch, mesh=mesh, device=device, **shape, **kwargs)


def gpt2_xl(batch: int = 8, mesh: int | tuple[int, ...] = 8, device: str = "A100-40GB", **kwargs: Any) -> ShardingInstance:
    """GPT-2 XL (1.5 B parameters: 48 layers, hidden 1600, 25 heads, seq 1024)."""
    return preset("gpt2-xl", batch=batch, mesh=mesh, device=device, **kwargs)


def gpt3_175b(batch: int = 8, mesh: int | tuple[int, ...] = 8, device: str = "A100-80GB", **kwargs: Any) -> ShardingInstance:
    """GPT-3 175B (96 layers, hidden 12288, 96 heads, seq 2048)."""
    return preset("gpt3-175b", batch=batch, mesh=mesh, device=device, **kwargs)
