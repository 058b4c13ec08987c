"""Llama-class training graphs as sharding instances (Alpa / TAP), on catalogue meshes.

`llama_sharding(model, batch, mesh=(8, 8), cluster="8xh100-sxm-ib")` describes the forward
graph of a dense Llama-class model (`distplan.instances.zoo_llama`) in the tensor-dim
language of `distplan.models.sharding`; backward and optimizer are implied by the training
costs of the sharding cost model (backward 2x forward, 16 bytes of parameter state per
parameter for mixed-precision Adam). Dims: b (batch), s (sequence), h (hidden), g (key/value
heads), r (query heads per key/value head), d (head dimension), f (FFN), v (vocabulary).
Per layer (Hugging Face ``LlamaDecoderLayer`` with SDPA attention):

* ``attention_norm``: RMSNorm over h;
* ``wq`` ``[b,s,h] x [h,g,r,d]``, ``wk`` and ``wv`` ``[b,s,h] x [h,g,d]`` (grouped-query
  attention: g key/value heads, each shared by r query heads);
* ``q_rope``, ``k_rope``: rotary embedding, 3 FLOPs per element (x*cos + rotate(x)*sin);
* ``k_repeat``, ``v_repeat``: ``repeat_kv`` materializing r copies ``[b,s,g,d] -> [b,s,g,r,d]``;
* ``attn``: causal attention on q, k, v (flash by default: no score tensor kept);
* ``wo`` ``[b,s,g,r,d] x [g,r,d,h]``, residual add, ``ffn_norm``;
* SwiGLU: ``w1`` (gate) and ``w3`` (up) ``[b,s,h] x [h,f]``, ``swiglu`` (silu(gate) * up,
  5 FLOPs per element), ``w2`` (down) ``[b,s,f] x [f,h]``, residual add;

then the final RMSNorm, the untied output layer ``[b,s,h] x [h,v]`` and the loss. Tensor
parallelism splits g (whole key/value groups, as Megatron-LM splits GQA), f and v. The
sequence dim is never split (``sequence_split=True`` allows it).

Mesh links come from a catalogue cluster of at least ``prod(mesh)`` devices laid out
row-major: mesh axis k joins devices whose ids differ by multiples of the product of the
later axes, and gets the smallest bandwidth and the largest latency among those pairs of
device 0 (on ``8xh100-sxm-ib`` with mesh 8x8: axis 0 spans nodes over NDR InfiniBand,
50 GB/s per GPU; axis 1 the NVSwitch of a node, 450 GB/s). Mixture-of-experts layers are
not described: the sharding cost model has no expert-batched matmul.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from distplan.errors import InputError
from distplan.instances.zoo_llama import LlamaConfig, llama_config
from distplan.models.catalogue import ClusterSpec
from distplan.models.catalogue import cluster as catalogue_cluster
from distplan.models.sharding import Mesh, Op, Param, ShardingInstance, Training


def mesh_links(cluster: str | ClusterSpec, shape: Sequence[int]) -> tuple[tuple[float, ...], tuple[float, ...], str]:
    """(bandwidth bytes/s, latency s) per mesh axis and the device type, from a catalogue
    cluster (see the module docstring)."""
    spec = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    shape = tuple(int(x) for x in shape)
    need = math.prod(shape)
    if spec.n_devices < need:
        raise InputError("cluster", f"{spec.name!r} has {spec.n_devices} devices, a {'x'.join(map(str, shape))} mesh needs {need}", "pick a larger cluster (e.g. 8xh100-sxm-ib) or a smaller mesh")
    types = set(spec.device_types[:need])
    if len(types) != 1:
        raise InputError("cluster", f"the first {need} devices of {spec.name!r} mix types {sorted(types)}", "a sharding mesh has one device type")
    bw, lat = spec.pair_matrices()
    bandwidth: list[float] = []
    latency: list[float] = []
    for axis, size in enumerate(shape):
        stride = math.prod(shape[axis + 1 :])
        peers = np.arange(1, size) * stride
        if peers.size == 0:  # an axis of size 1 carries no traffic
            bandwidth.append(float(spec.bandwidth))
            latency.append(float(spec.latency))
            continue
        bandwidth.append(float(bw[0, peers].min()))
        latency.append(float(lat[0, peers].max()))
    return tuple(bandwidth), tuple(latency), spec.device_types[0]


def llama_sharding(
    model: str | LlamaConfig,
    batch: int = 64,
    mesh: int | Sequence[int] = (8, 8),
    cluster: str | ClusterSpec = "8xh100-sxm-ib",
    *,
    seq: int | None = None,
    layers: int | None = None,
    memory: float | None = None,
    flash: bool = True,
    sequence_split: bool = False,
    dtype: str = "bf16",
    optimizer_bytes_per_param: float = 16.0,
    bandwidth: Sequence[float] | None = None,
    latency: Sequence[float] | None = None,
    name: str | None = None,
) -> ShardingInstance:
    """A training step of a dense Llama-class model as a sharding instance.

    ``batch`` sequences of ``seq`` tokens (default: the model's); ``layers`` overrides the
    depth; ``memory`` bytes per device (default: the device's HBM, so memory binds);
    bandwidth and latency per mesh axis and the device from ``cluster``.
    """
    cfg = llama_config(model)
    if layers is not None:
        cfg = llama_config(cfg, layers=layers)
    if cfg.experts:
        raise InputError("model", f"{cfg.name!r} has mixture-of-experts layers, which sharding instances do not describe", "use a dense model (llama3-8b, llama3-70b) or make a placement instance")
    s = cfg.seq if seq is None else seq
    if not isinstance(batch, int) or batch < 1:
        raise InputError("batch", f"expected a positive integer, got {batch!r}")
    if s > cfg.max_seq:
        raise InputError("seq", f"{s} exceeds the model's maximum sequence length {cfg.max_seq}")
    shape = (int(mesh),) if isinstance(mesh, int) else tuple(int(m) for m in mesh)
    cluster_bw, cluster_lat, device = mesh_links(cluster, shape)
    for key, given in (("bandwidth", bandwidth), ("latency", latency)):
        if given is not None and len(given) != len(shape):
            raise InputError(key, f"{len(given)} values for a {len(shape)}-axis mesh", "give one value per mesh axis")
    bandwidth = cluster_bw if bandwidth is None else tuple(float(x) for x in bandwidth)
    latency = cluster_lat if latency is None else tuple(float(x) for x in latency)
    dims = {"b": batch, "s": s, "h": cfg.hidden, "g": cfg.kv_heads, "r": cfg.heads // cfg.kv_heads, "d": cfg.head_dim, "f": cfg.ffn, "v": cfg.vocab}
    bsh = ("b", "s", "h")
    q_dims = ("b", "s", "g", "r", "d")
    kv_dims = ("b", "s", "g", "d")
    norm = (Param("weight", ("h",)),)
    ops: list[Op] = [
        Op("tokens", "input", ("b", "s"), dtype="int32"),
        Op("tok_embeddings", "embedding", bsh, ("tokens",), (Param("weight", ("v", "h")),)),
    ]
    x = "tok_embeddings"
    for i in range(cfg.layers):
        p = f"layers.{i}."
        ops += [
            Op(p + "attention_norm", "rmsnorm", bsh, (x,), norm),
            Op(p + "wq", "linear", q_dims, (p + "attention_norm",), (Param("weight", ("h", "g", "r", "d")),)),
            Op(p + "wk", "linear", kv_dims, (p + "attention_norm",), (Param("weight", ("h", "g", "d")),)),
            Op(p + "wv", "linear", kv_dims, (p + "attention_norm",), (Param("weight", ("h", "g", "d")),)),
            Op(p + "q_rope", "elementwise", q_dims, (p + "wq",), attrs={"flops_per_element": 3}),
            Op(p + "k_rope", "elementwise", kv_dims, (p + "wk",), attrs={"flops_per_element": 3}),
            Op(p + "k_repeat", "elementwise", q_dims, (p + "k_rope",), attrs={"flops_per_element": 0}),
            Op(p + "v_repeat", "elementwise", q_dims, (p + "wv",), attrs={"flops_per_element": 0}),
            Op(p + "attn", "attention", q_dims, (p + "q_rope", p + "k_repeat", p + "v_repeat"), attrs={"seq_dim": "s", "head_dim": "d", "causal": True, "flash": flash}),
            Op(p + "wo", "linear", bsh, (p + "attn",), (Param("weight", ("g", "r", "d", "h")),)),
            Op(p + "residual1", "elementwise", bsh, (p + "wo", x)),
            Op(p + "ffn_norm", "rmsnorm", bsh, (p + "residual1",), norm),
            Op(p + "w1", "linear", ("b", "s", "f"), (p + "ffn_norm",), (Param("weight", ("h", "f")),)),
            Op(p + "w3", "linear", ("b", "s", "f"), (p + "ffn_norm",), (Param("weight", ("h", "f")),)),
            Op(p + "swiglu", "elementwise", ("b", "s", "f"), (p + "w1", p + "w3"), attrs={"flops_per_element": 5}),
            Op(p + "w2", "linear", bsh, (p + "swiglu",), (Param("weight", ("f", "h")),)),
            Op(p + "residual2", "elementwise", bsh, (p + "w2", p + "residual1")),
        ]
        x = p + "residual2"
    ops += [
        Op("norm", "rmsnorm", bsh, (x,), norm),
        Op("output", "linear", ("b", "s", "v"), ("norm",), (Param("weight", ("h", "v")),)),
        Op("loss", "loss", ("b", "s"), ("output",), dtype="fp32"),
    ]
    mesh_txt = "x".join(str(m) for m in shape)
    cluster_name = cluster if isinstance(cluster, str) else cluster.name
    return ShardingInstance(
        name=name or f"{cfg.name}-l{cfg.layers}-b{batch}-s{s}-mesh{mesh_txt}",
        mesh=Mesh(shape=shape, bandwidth=tuple(bandwidth), latency=tuple(latency), device=device, memory=memory),
        training=Training("b", optimizer_bytes_per_param=optimizer_bytes_per_param),
        dims=dims,
        ops=ops,
        dtype=dtype,
        never_split=() if sequence_split else ("s",),
        tensor_parallel_dims=("g", "f", "v"),
        description=(
            f"{cfg.name}: {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads / {cfg.kv_heads} kv, ffn {cfg.ffn}, "
            f"vocab {cfg.vocab}; batch {batch} x seq {s}; {mesh_txt} mesh of {device} from {cluster_name} ({cfg.source})"
        ),
    )


def sharding_models() -> list[str]:
    """Zoo models `llama_sharding` describes (the dense Llama-class ones)."""
    from distplan.instances.zoo_llama import LLAMA_MODELS

    return [n for n, c in LLAMA_MODELS.items() if not c.experts]


__all__ = ["llama_sharding", "mesh_links", "sharding_models"]

