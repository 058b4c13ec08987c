"""A Llama-style decoder from plain ``torch.nn`` (for ``distplan import-torch``).

RMSNorm, rotary position embeddings (Su et al. 2021; the "rotate half" form), grouped-query
attention (Ainslie et al. 2023), SwiGLU MLP (Shazeer 2020) and an untied LM head, with the
shapes of Llama 3 8B (Grattafiori et al. 2024: 32 layers, hidden 4096, 32 heads, 8 KV
heads, FFN 14336, vocabulary 128256; about 8.03e9 parameters) or any smaller config.

Factories take no arguments, so the importer builds them on the meta device (shapes only,
no weights allocated)::

    distplan import-torch examples/llama_style.py:llama3_8b --input-shape 1,2048 -o llama3-8b.json
    distplan import-torch examples/llama_style.py:tiny --input-shape 2,16 -o tiny.json

The module names follow torchtitan's Llama (``tok_embeddings``, ``layers.{i}.attention.wq``
..., ``layers.{i}.feed_forward.w1|w2|w3``, ``norm``, ``output``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class LlamaConfig:
    vocab: int = 128256
    layers: int = 32
    hidden: int = 4096
    heads: int = 32
    kv_heads: int = 8
    ffn: int = 14336
    max_seq: int = 8192
    rope_theta: float = 500000.0
    eps: float = 1e-5


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.head_dim = cfg.hidden // cfg.heads
        self.groups = cfg.heads // cfg.kv_heads
        self.wq = nn.Linear(cfg.hidden, cfg.heads * self.head_dim, bias=False)
        self.wk = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(cfg.hidden, cfg.kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(cfg.heads * self.head_dim, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, s, -1, self.head_dim).transpose(1, 2)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        k = k.repeat_interleave(self.groups, dim=1)
        v = v.repeat_interleave(self.groups, dim=1)
        o = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.w1 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)
        self.w2 = nn.Linear(cfg.ffn, cfg.hidden, bias=False)
        self.w3 = nn.Linear(cfg.hidden, cfg.ffn, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(nn.functional.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.attention_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.attention = Attention(cfg)
        self.ffn_norm = RMSNorm(cfg.hidden, cfg.eps)
        self.feed_forward = FeedForward(cfg)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self, cfg: LlamaConfig):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg.vocab, cfg.hidden)
        self.layers = nn.ModuleList(Block(cfg) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden, cfg.eps)
        self.output = nn.Linear(cfg.hidden, cfg.vocab, bias=False)
        head_dim = cfg.hidden // cfg.heads
        inv = 1.0 / (cfg.rope_theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        angles = torch.outer(torch.arange(cfg.max_seq, dtype=torch.float32), inv)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        s = ids.shape[1]
        cos, sin = self.cos[:s], self.sin[:s]
        x = self.tok_embeddings(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def llama3_8b() -> Llama:
    """Llama 3 8B's shapes (about 8.03e9 parameters)."""
    return Llama(LlamaConfig())


def tiny() -> Llama:
    """The same architecture at toy size (2 layers, hidden 64, 4 heads, 2 KV heads)."""
    return Llama(LlamaConfig(vocab=256, layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, max_seq=64))


def parameter_count(cfg: LlamaConfig) -> int:
    """Parameters of a config (no allocation)."""
    hd = cfg.hidden // cfg.heads
    per_layer = cfg.hidden * (cfg.heads * hd) * 2 + cfg.hidden * (cfg.kv_heads * hd) * 2 + 3 * cfg.hidden * cfg.ffn + 2 * cfg.hidden
    return cfg.vocab * cfg.hidden * 2 + cfg.layers * per_layer + cfg.hidden
