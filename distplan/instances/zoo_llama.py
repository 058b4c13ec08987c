"""Llama-class models for the analytic zoo: RMSNorm, rotary embeddings, grouped-query
attention, SwiGLU MLPs and mixture-of-experts layers with top-k routing.

Shapes: Llama 3 8B and 70B (Llama Team, "The Llama 3 Herd of Models", arXiv 2407.21783,
Table 3: 32 / 80 layers, model dimension 4,096 / 8,192, FFN dimension 14,336 / 28,672,
32 / 64 attention heads, 8 key/value heads, vocabulary 128,256, untied output layer,
sequence 8,192) and Mixtral 8x7B (Jiang et al., "Mixtral of Experts", arXiv 2401.04088,
Table 1: 32 layers, dimension 4,096, head dimension 128, hidden dimension 14,336, 32 heads,
8 key/value heads, vocabulary 32,000, 8 experts, top-2 routing).

The graph follows Hugging Face transformers' ``LlamaForCausalLM`` / ``MixtralForCausalLM``
with SDPA (flash) attention. ``granularity="kernel"`` gives one op per CUDA kernel of that
eager implementation: RMSNorm as its 8 kernels (cast to fp32, pow, mean, +eps, rsqrt, mul,
cast back, weight), rotary embedding as 5 kernels per tensor (x*cos, neg, cat, *sin, add),
``repeat_kv`` copies for grouped-query attention, one flash-attention kernel, the transpose
copy of its output, SiLU and the gating product as separate kernels.
``granularity="module"`` fuses each of those into one op (RMSNorm 6 FLOPs per element as in
`distplan.models.sharding_costs`, rotary 3, SiLU-and-product 5). FLOPs: 2 per multiply-add;
attention 4·b·s²·heads·head_dim per layer (the full score matrix, also when causal: the
convention of the existing zoo and of Narayanan et al. SC'21); elementwise kernels one FLOP
per element except SiLU (4), softmax (5) and the rotary add/multiply (1 each).

A training step is ``micro_batches`` micro-batches (gradient accumulation): each runs
forward and backward, the parameter gradients of all of them feed one optimizer update per
weight. The copies of an op in every micro-batch, its backward ops and its update form one
colocation group named after the op (``layers.3.mlp.down_proj``), so weights are held once
and a placement is a layer-to-device assignment with the micro-batches pipelined through it.

Mixture of experts (Mixtral's sparse MoE block): a router matmul (hidden x experts),
softmax, top-k and renormalization of the k weights, a dispatch that gathers the k·T routed
token rows, one SwiGLU expert MLP per expert on ``ceil(capacity_factor·k·T/experts)``
tokens (the balanced load), and a combine that scales and scatter-adds the expert outputs
(2·k·T·hidden FLOPs).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from distplan.errors import InputError
from distplan.instances.layergraph import LayerGraph

GRANULARITIES = ("kernel", "module")


@dataclass(frozen=True)
class LlamaConfig:
    """Shape of a Llama-style decoder (sizes in elements, not bytes)."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    max_seq: int
    seq: int  # default sequence length (tokens)
    batch: int  # default micro-batch size (sequences)
    micro_batches: int  # default micro-batches per training step
    source: str
    experts: int = 0  # 0: a dense SwiGLU MLP per layer
    top_k: int = 0
    capacity_factor: float = 1.0

    def __post_init__(self) -> None:
        for key in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "max_seq", "seq", "batch", "micro_batches"):
            value = getattr(self, key)
            if not isinstance(value, int) or value < (0 if key == "layers" else 1):
                raise InputError(key, f"expected a positive integer, got {value!r}")
        if self.hidden % self.heads:
            raise InputError("heads", f"hidden {self.hidden} is not a multiple of heads {self.heads}")
        if self.heads % self.kv_heads:
            raise InputError("kv_heads", f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}", "grouped-query attention shares each k/v head among heads/kv_heads query heads")
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise InputError("top_k", f"{self.top_k} must be in 1..experts ({self.experts})")
            if not self.capacity_factor > 0:
                raise InputError("capacity_factor", f"{self.capacity_factor!r} must be > 0")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def param_count(self) -> dict[str, int]:
        """Parameters (elements) by part: embedding, attention, mlp (experts), router, norms, output."""
        h, d = self.hidden, self.head_dim
        attn = h * self.heads * d * 2 + h * self.kv_heads * d * 2
        mlp = 3 * h * self.ffn * max(self.experts, 1)
        return {
            "embedding": self.vocab * h,
            "attention": self.layers * attn,
            "mlp": self.layers * mlp,
            "router": self.layers * h * self.experts,
            "norms": (2 * self.layers + 1) * h,
            "output": h * self.vocab,
        }

    def expert_tokens(self, tokens: int) -> int:
        """Tokens each expert processes in a micro-batch of ``tokens`` (balanced load)."""
        return math.ceil(self.capacity_factor * self.top_k * tokens / self.experts)


LLAMA_MODELS: dict[str, LlamaConfig] = {
    c.name: c
    for c in [
        LlamaConfig("llama3-8b", 32, 4096, 32, 8, 14336, 128256, 8192, 8192, 1, 4, "Llama Team 2024, The Llama 3 Herd of Models (arXiv 2407.21783), Table 3, 8B"),
        LlamaConfig("llama3-70b", 80, 8192, 64, 8, 28672, 128256, 8192, 8192, 1, 4, "Llama Team 2024, The Llama 3 Herd of Models (arXiv 2407.21783), Table 3, 70B"),
        LlamaConfig("mixtral-8x7b", 32, 4096, 32, 8, 14336, 32000, 32768, 4096, 1, 4, "Jiang et al. 2024, Mixtral of Experts (arXiv 2401.04088), Table 1", experts=8, top_k=2),
    ]
}


def llama_config(model: str | LlamaConfig, **changes: int | float | str) -> LlamaConfig:
    """A named config (``llama3-8b``, ``llama3-70b``, ``mixtral-8x7b``) with fields changed
    (e.g. ``layers=2`` for a 2-layer model of Llama 3 8B's width)."""
    if isinstance(model, LlamaConfig):
        cfg = model
    elif model in LLAMA_MODELS:
        cfg = LLAMA_MODELS[model]
    else:
        raise InputError("model", f"unknown Llama-class model {model!r}", f"use one of: {', '.join(LLAMA_MODELS)}")
    bad = [k for k in changes if k not in LlamaConfig.__dataclass_fields__]
    if bad:
        raise InputError(bad[0], "not a field of a Llama config", f"use some of: {', '.join(LlamaConfig.__dataclass_fields__)}")
    return replace(cfg, **changes) if changes else cfg  # type: ignore[arg-type]


class _Builder:
    """Adds the ops of one micro-batch; names get the micro-batch prefix, colocation groups
    and shared parameters are keyed by the unprefixed name."""

    def __init__(self, g: LayerGraph, micro_batch: int, micro_batches: int, kernels: bool):
        self.g = g
        self.m = micro_batch
        self.prefix = f"mb{micro_batch}." if micro_batches > 1 else ""
        self.owner = "mb0." if micro_batches > 1 else ""
        self.kernels = kernels

    def op(
        self,
        name: str,
        type: str,
        flops: float,
        output: float,
        inputs: Sequence[str | tuple[str, float]] = (),
        *,
        params: float = 0.0,
        moved: float | None = None,
        differentiable: bool = True,
    ) -> str:
        """Add op ``name`` (unprefixed); ``params`` bytes are held by micro-batch 0's copy, the
        other copies read them (bytes moved include them) and share their gradient."""
        full = self.prefix + name
        ins = [self.prefix + i if isinstance(i, str) else (self.prefix + i[0], i[1]) for i in inputs]
        in_bytes = sum(self.g.ops[self.g.index[i]].output if isinstance(i, str) else i[1] for i in ins)
        bytes_moved = in_bytes + output + params if moved is None else moved
        own = params if self.m == 0 else 0.0
        self.g.add(full, type, flops=flops, params=own, output=output, inputs=ins, bytes_moved=bytes_moved)
        op = self.g.ops[-1]
        op.differentiable = differentiable
        if self.m > 0 and params > 0:
            op.shares_params_of = self.owner + name
        self.g.colocate_ops([full], name)
        return name


def _rmsnorm(bl: _Builder, p: str, x: str, tokens: int, h: int, E: int) -> str:
    """HF LlamaRMSNorm: x.float(); x * rsqrt(mean(x^2) + eps); weight * x.to(dtype)."""
    X, Xf, T4 = tokens * h * E, tokens * h * 4.0, tokens * 4.0
    if not bl.kernels:
        return bl.op(p, "rmsnorm", 6 * tokens * h, X, [x], params=h * E)
    f32 = bl.op(p + ".to_fp32", "cast", tokens * h, Xf, [x])
    sq = bl.op(p + ".pow", "pow", tokens * h, Xf, [f32])
    mean = bl.op(p + ".mean", "mean", tokens * h, T4, [sq])
    eps = bl.op(p + ".add_eps", "add", tokens, T4, [mean])
    rs = bl.op(p + ".rsqrt", "rsqrt", tokens, T4, [eps])
    mul = bl.op(p + ".mul", "mul", tokens * h, Xf, [f32, rs])
    back = bl.op(p + ".to_dtype", "cast", tokens * h, X, [mul])
    return bl.op(p + ".weight", "mul", tokens * h, X, [back], params=h * E)


def _rope(bl: _Builder, p: str, x: str, n: int, table: float, cos: str, sin: str) -> str:
    """Rotary embedding of a tensor of ``n`` elements: x*cos + rotate_half(x)*sin
    (HF apply_rotary_pos_emb); ``table`` bytes of cos (and of sin) are read."""
    E = bl.g.elem
    if not bl.kernels:  # one table op holds cos and sin
        return bl.op(p, "rotary", 3 * n, n * E, [x, (cos, 2 * table)] if cos == sin else [x, (cos, table), (sin, table)])
    a = bl.op(p + ".mul_cos", "mul", n, n * E, [x, (cos, table)])
    neg = bl.op(p + ".neg", "neg", n / 2, n * E / 2, [(x, n * E / 2)])
    cat = bl.op(p + ".cat", "cat", 0, n * E, [neg, (x, n * E / 2)])
    b = bl.op(p + ".mul_sin", "mul", n, n * E, [cat, (sin, table)])
    return bl.op(p + ".add", "add", n, n * E, [a, b])


def _swiglu(bl: _Builder, p: str, x: str | tuple[str, float], tokens: int, h: int, f: int, names: tuple[str, str, str]) -> str:
    """down(silu(gate(x)) * up(x)) on ``tokens`` rows of ``x`` (an op, or (op, bytes) for the
    rows of a dispatch); ``names``: (gate, up, down)."""
    E = bl.g.elem
    F = tokens * f * E
    gate = bl.op(p + names[0], "matmul", 2 * tokens * h * f, F, [x], params=h * f * E)
    up = bl.op(p + names[1], "matmul", 2 * tokens * h * f, F, [x], params=h * f * E)
    if bl.kernels:
        act = bl.op(p + "act_fn", "silu", 4 * tokens * f, F, [gate])
        prod = bl.op(p + "mul", "mul", tokens * f, F, [act, up])
    else:
        prod = bl.op(p + "swiglu", "swiglu", 5 * tokens * f, F, [gate, up])
    return bl.op(p + names[2], "matmul", 2 * tokens * f * h, tokens * h * E, [prod], params=f * h * E)


def _moe(bl: _Builder, p: str, x: str, cfg: LlamaConfig, tokens: int) -> str:
    """Mixtral's sparse MoE block (see the module docstring)."""
    E, h, n_exp, k = bl.g.elem, cfg.hidden, cfg.experts, cfg.top_k
    logits = bl.op(p + "gate", "matmul", 2 * tokens * h * n_exp, tokens * n_exp * E, [x], params=h * n_exp * E)
    if bl.kernels:
        probs = bl.op(p + "router.softmax", "softmax", 5 * tokens * n_exp, tokens * n_exp * 4, [logits])
        top = bl.op(p + "router.topk", "topk", tokens * n_exp * k, tokens * k * 12.0, [probs])
        weights = bl.op(p + "router.renorm", "div", 2 * tokens * k, tokens * k * E, [top])
    else:
        top = weights = bl.op(p + "router", "router", 5 * tokens * n_exp + tokens * n_exp * k + 2 * tokens * k, tokens * k * (E + 8.0), [logits])
    te = cfg.expert_tokens(tokens)
    rows = te * h * E
    dispatch = bl.op(p + "dispatch", "gather", 0, n_exp * rows, [x, (top, tokens * k * 8.0)])
    outs: list[str | tuple[str, float]] = []
    for e in range(n_exp):
        q = f"{p}experts.{e}."
        outs.append(_swiglu(bl, q, (dispatch, rows), te, h, cfg.ffn, ("w1", "w3", "w2")))  # Mixtral: w1 gate, w3 up, w2 down
    outs.append((weights, tokens * k * E))
    return bl.op(p + "combine", "scatter_add", 2 * k * tokens * h, tokens * h * E, outs)


def llama_graph(
    cfg: LlamaConfig | str,
    batch: int | None = None,
    seq: int | None = None,
    dtype: str = "bf16",
    *,
    micro_batches: int | None = None,
    granularity: str = "kernel",
) -> LayerGraph:
    """Forward `LayerGraph` of a Llama-class model for ``micro_batches`` micro-batches of
    ``batch`` sequences of ``seq`` tokens (defaults: the config's). See the module docstring."""
    cfg = llama_config(cfg)
    b = cfg.batch if batch is None else batch
    s = cfg.seq if seq is None else seq
    mbs = cfg.micro_batches if micro_batches is None else micro_batches
    for key, value in (("batch", b), ("seq", s), ("micro_batches", mbs)):
        if not isinstance(value, int) or value < 1:
            raise InputError(key, f"expected a positive integer, got {value!r}")
    if s > cfg.max_seq:
        raise InputError("seq", f"{s} exceeds the model's maximum sequence length {cfg.max_seq}")
    if granularity not in GRANULARITIES:
        raise InputError("granularity", f"unknown granularity {granularity!r}", f"use one of {GRANULARITIES}")
    g = LayerGraph(f"{cfg.name}-b{b}-s{s}" + (f"-mb{mbs}" if mbs > 1 else ""), dtype)
    E = g.elem
    T = b * s
    h, a, kv, d, V = cfg.hidden, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.vocab
    X = T * h * E
    table = b * s * d * E  # one cos or sin table (HF: [b, s, head_dim] in the model dtype)
    for m in range(mbs):
        bl = _Builder(g, m, mbs, granularity == "kernel")
        x = bl.op("embed_tokens", "embedding", 0, X, params=V * h * E, moved=2 * X + T * 8)
        if bl.kernels:
            freqs = bl.op("rotary_emb.freqs", "matmul", T * d, T * d * 2, differentiable=False, moved=T * d * 2 + T * 8)
            emb = bl.op("rotary_emb.cat", "cat", 0, T * d * 4, [freqs], differentiable=False)
            cos = bl.op("rotary_emb.cos", "cos", T * d, table, [emb], differentiable=False)
            sin = bl.op("rotary_emb.sin", "sin", T * d, table, [emb], differentiable=False)
        else:
            cos = bl.op("rotary_emb", "rotary_table", 3 * T * d, 2 * table, differentiable=False, moved=2 * table + T * 8)
            sin = cos
        for layer in range(cfg.layers):
            p = f"layers.{layer}."
            y = _rmsnorm(bl, p + "input_layernorm", x, T, h, E)
            q = bl.op(p + "self_attn.q_proj", "matmul", 2 * T * h * a * d, T * a * d * E, [y], params=h * a * d * E)
            k = bl.op(p + "self_attn.k_proj", "matmul", 2 * T * h * kv * d, T * kv * d * E, [y], params=h * kv * d * E)
            v = bl.op(p + "self_attn.v_proj", "matmul", 2 * T * h * kv * d, T * kv * d * E, [y], params=h * kv * d * E)
            q = _rope(bl, p + "self_attn.q_rope", q, T * a * d, table, cos, sin)
            k = _rope(bl, p + "self_attn.k_rope", k, T * kv * d, table, cos, sin)
            if kv < a:  # HF repeat_kv: expand + reshape materializes heads/kv_heads copies
                k = bl.op(p + "self_attn.repeat_k", "copy", 0, T * a * d * E, [k])
                v = bl.op(p + "self_attn.repeat_v", "copy", 0, T * a * d * E, [v])
            att = bl.op(p + "self_attn.sdpa", "flash_attention", 4 * b * s * s * a * d, T * a * d * E, [q, k, v])
            if bl.kernels:
                att = bl.op(p + "self_attn.transpose", "copy", 0, T * a * d * E, [att])
            o = bl.op(p + "self_attn.o_proj", "matmul", 2 * T * a * d * h, X, [att], params=a * d * h * E)
            r = bl.op(p + "residual1", "add", T * h, X, [x, o])
            y = _rmsnorm(bl, p + "post_attention_layernorm", r, T, h, E)
            if cfg.experts:
                out = _moe(bl, p + "block_sparse_moe.", y, cfg, T)
            else:
                out = _swiglu(bl, p + "mlp.", y, T, h, cfg.ffn, ("gate_proj", "up_proj", "down_proj"))
            x = bl.op(p + "residual2", "add", T * h, X, [r, out])
        y = _rmsnorm(bl, "norm", x, T, h, E)
        logits = bl.op("lm_head", "matmul", 2 * T * h * V, T * V * E, [y], params=h * V * E)
        if bl.kernels:
            f32 = bl.op("loss.to_fp32", "cast", T * V, T * V * 4.0, [logits])
            lsm = bl.op("loss.log_softmax", "log_softmax", 5 * T * V, T * V * 4.0, [f32])
            bl.op("loss.nll", "nll_loss", 2 * T, 4.0, [lsm], moved=T * 4.0 + T * 8 + 4)
        else:
            bl.op("loss", "cross_entropy", 5 * T * V, 4.0, [logits], moved=T * V * E + T * 8 + 4)
    return g


def llama_builder(cfg: LlamaConfig) -> Callable[..., LayerGraph]:
    """The zoo builder of a config: ``build(batch, seq, dtype, micro_batches, granularity)``."""

    def build(batch: int | None = None, seq: int | None = None, dtype: str = "bf16", micro_batches: int | None = None, granularity: str | None = None) -> LayerGraph:
        return llama_graph(cfg, batch, seq, dtype, micro_batches=micro_batches, granularity=granularity or "kernel")

    return build


def describe(cfg: LlamaConfig) -> str:
    """One line for the model list."""
    kind = f"MoE {cfg.experts} experts top-{cfg.top_k}" if cfg.experts else "dense SwiGLU"
    n = sum(cfg.param_count().values())
    return f"Llama-style decoder ({kind}): {cfg.layers} layers, hidden {cfg.hidden}, {cfg.heads} heads / {cfg.kv_heads} kv, {n / 1e9:.2f} B parameters"
