"""Builders of compression instances: BERT-large, GPT-2 medium, VGG-16, MLPs and large
synthetic graphs, data-parallel on a TAG-like heterogeneous cluster.

Layer shapes are analytic (Devlin et al. 2019 for BERT-large: 24 layers, d=1024, 16 heads,
FFN 4096, vocabulary 30522; Radford et al. 2019 for GPT-2 medium: 24 layers, d=1024, FFN 4096,
vocabulary 50257, 1024 positions; Simonyan & Zisserman 2015 for VGG-16). Op times come from
the roofline of `distplan.models.catalogue` (float32, since the 1080 Ti has no fast float16).
A linear layer y = x W (x: K x M, W: M x N) has a forward op, an input-gradient op ``dx``
and a weight-gradient op ``dw``; ``dw`` is eligible for duplication and reads x (K M values)
and dy (K N values): those are the sufficient factors. The cluster follows TAG's topologies
(ylxdzsw/tag: V100 / P100 / 1080 Ti, intra-node 8,000 / 20,000 and inter-node 2,810 in its
code's units, read here as MB/s): two GPUs per node, PCIe 8 GB/s inside a node (NVLink
20 GB/s between the V100s) and 2.81 GB/s between nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from distplan.models.catalogue import device as catalogue_device
from distplan.models.common import FORMAT

F32 = 4
GiB = 1024**3
#: bytes every device holds besides the model state: CUDA context, framework, workspace
FRAMEWORK_BYTES = 1 * GiB
#: Adam in float32: weights, gradient, two moments (bytes per parameter)
STATE_BYTES_PER_PARAM = 16


def tag_cluster(gpus_per_node: int = 2, types: Iterable[str] = ("V100", "P100", "1080Ti")) -> dict[str, Any]:
    """The ``cluster`` section: one node per type with ``gpus_per_node`` GPUs each."""
    devices: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for n, t in enumerate(types):
        names = [f"{t.lower()}-{n}.{k}" for k in range(gpus_per_node)]
        devices.extend({"name": nm, "type": t, "node": f"node{n}"} for nm in names)
        if t.startswith("V100"):
            links.extend({"a": a, "b": b, "bandwidth": 20e9} for i, a in enumerate(names) for b in names[i + 1 :])
    return {"devices": devices, "intra_node_bandwidth": 8e9, "inter_node_bandwidth": 2.81e9, "links": links}


class GraphBuilder:
    """Collects ops (execution order), edges and gradients of one data-parallel graph."""

    def __init__(self, cluster: dict[str, Any]):
        self.cluster = cluster
        self.types = sorted({d["type"] for d in cluster["devices"]})
        self.ops: list[dict[str, Any]] = []
        self.updates: list[dict[str, Any]] = []
        self.edges: list[dict[str, Any]] = []
        self.gradients: list[dict[str, Any]] = []
        self.params = 0
        self.activation_bytes = 0.0

    def seconds(self, flops: float, nbytes: float) -> dict[str, float]:
        """Roofline seconds per device type (float32)."""
        return {t: catalogue_device(t).roofline_seconds(flops, nbytes, "fp32") for t in self.types}

    def op(self, name: str, flops: float, nbytes: float, role: str, memory: float = 0.0, eligible: bool = False) -> str:
        self.ops.append({"name": name, "role": role, "compute_seconds": self.seconds(flops, nbytes), "memory_bytes": float(memory), "eligible": eligible})
        if role == "forward":
            self.activation_bytes += memory
        return name

    def edge(self, src: str, dst: str, nbytes: float) -> None:
        self.edges.append({"src": src, "dst": dst, "bytes": float(nbytes)})

    def gradient(
        self,
        name: str,
        producer: str,
        params: int,
        shape: tuple[int, int] | None = None,
        factor_rows: int | None = None,
        density: float = 1.0,
        update_bytes: float | None = None,
    ) -> None:
        """A float32 gradient of ``params`` values and its update op (Adam, or a row
        scatter-add of ``update_bytes`` for sparse lookups)."""
        upd = f"upd.{name}"
        if update_bytes is None:
            flops, nbytes = 10.0 * params, 7.0 * F32 * params
        else:
            flops, nbytes = 0.0, update_bytes
        self.updates.append({"name": upd, "role": "update", "compute_seconds": self.seconds(flops, nbytes), "memory_bytes": 0.0, "eligible": False})
        self.edge(producer, upd, F32 * params)
        g: dict[str, Any] = {"name": name, "op": producer, "update": upd, "bytes": float(F32 * params), "dtype": "float32", "density": float(density)}
        if shape is not None:
            g["shape"] = [int(shape[0]), int(shape[1])]
        if factor_rows is not None:
            g["factor_rows"] = int(factor_rows)
        self.gradients.append(g)

    def count_params(self, n: int) -> None:
        self.params += int(n)

    def linear_forward(self, name: str, src: str, K: int, M: int, N: int, extra_flops: float = 0.0) -> str:
        """Forward op of y = x W + b (x: K x M); it saves its output (K N floats)."""
        self.count_params(M * N + N)
        op = self.op(f"{name}.fwd", 2.0 * K * M * N + extra_flops, F32 * (K * M + M * N + K * N), "forward", memory=F32 * K * N)
        self.edge(src, op, F32 * K * M)
        return op

    def linear_backward(self, name: str, x_src: str, dy_src: str, K: int, M: int, N: int, need_dx: bool = True) -> str | None:
        """``dx`` (unless the input needs no gradient) and the eligible ``dw`` of a linear
        layer; returns the ``dx`` op (the next upstream gradient)."""
        dx = None
        if need_dx:
            dx = self.op(f"{name}.dx", 2.0 * K * M * N, F32 * (K * N + M * N + K * M), "backward")
            self.edge(dy_src, dx, F32 * K * N)
        dw = self.op(f"{name}.dw", 2.0 * K * M * N + K * N, F32 * (K * M + K * N + M * N), "backward", eligible=True)
        self.edge(x_src, dw, F32 * K * M)
        self.edge(dy_src, dw, F32 * K * N)
        self.gradient(name, dw, M * N + N, shape=(M, N), factor_rows=K)
        return dx

    def elementwise(self, name: str, src: str, elements: float, role: str, reads: float = 2.0, memory: bool = True) -> str:
        op = self.op(name, 8.0 * elements, reads * F32 * elements, role, memory=F32 * elements if memory else 0.0)
        self.edge(src, op, F32 * elements)
        return op

    def document(self, name: str, description: str, batch_size: int, codecs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The instance document; every device reserves the model state and the framework."""
        reserved = STATE_BYTES_PER_PARAM * self.params + FRAMEWORK_BYTES
        cluster = dict(self.cluster)
        cluster["devices"] = [{**d, "reserved_bytes": float(reserved)} for d in self.cluster["devices"]]
        return {
            "format": FORMAT,
            "kind": "compression",
            "name": name,
            "description": description,
            "batch_size": int(batch_size),
            "cluster": cluster,
            "graph": {"ops": self.ops + self.updates, "edges": self.edges, "gradients": self.gradients},
            "codecs": list(codecs or []),
        }


def transformer(
    name: str,
    *,
    layers: int,
    d: int,
    heads: int,
    ffn: int,
    vocab: int,
    seq: int,
    batch: int,
    positions: int,
    masked_fraction: float | None,
    pooler: bool,
    cluster: dict[str, Any] | None = None,
    description: str = "",
) -> dict[str, Any]:
    """A BERT-style (``masked_fraction`` set: MLM head on masked tokens, pooler) or GPT-style
    (language-model head on every token) transformer; word embeddings tied to the output."""
    b = GraphBuilder(cluster or tag_cluster())
    K = batch * seq
    inp = b.op("input", 0.0, F32 * K, "forward", memory=F32 * K)
    b.count_params(vocab * d + positions * d + 2 * d)
    emb = b.elementwise("emb.fwd", inp, K * d, "forward", reads=3.0)
    x = emb
    saved: list[dict[str, str]] = []
    for layer in range(layers):
        p = f"l{layer}"
        qkv = b.linear_forward(f"{p}.qkv", x, K, d, 3 * d)
        attn_flops = 4.0 * batch * seq * seq * d
        attn = b.op(f"{p}.attn.fwd", attn_flops, F32 * (K * 3 * d + batch * heads * seq * seq + K * d), "forward", memory=F32 * (K * d + batch * heads * seq * seq))
        b.edge(qkv, attn, F32 * K * 3 * d)
        out = b.linear_forward(f"{p}.out", attn, K, d, d)
        ln1 = b.elementwise(f"{p}.ln1.fwd", out, K * d, "forward")
        b.count_params(2 * d)
        f1 = b.linear_forward(f"{p}.ffn1", ln1, K, d, ffn, extra_flops=8.0 * K * ffn)
        f2 = b.linear_forward(f"{p}.ffn2", f1, K, ffn, d)
        ln2 = b.elementwise(f"{p}.ln2.fwd", f2, K * d, "forward")
        b.count_params(2 * d)
        saved.append({"x": x, "qkv": qkv, "attn": attn, "ln1": ln1, "f1": f1, "ln2": ln2})
        x = ln2
    if masked_fraction is not None:
        Km = max(1, int(round(masked_fraction * K)))
        head_in = b.op("mlm.gather.fwd", 0.0, 2.0 * F32 * Km * d, "forward", memory=F32 * Km * d)
        b.edge(x, head_in, F32 * K * d)
        tr = b.linear_forward("mlm.transform", head_in, Km, d, d, extra_flops=16.0 * Km * d)
        logits = b.op("mlm.decoder.fwd", 2.0 * Km * d * vocab, F32 * (Km * d + vocab * d + Km * vocab), "forward", memory=F32 * Km * vocab)
        b.edge(tr, logits, F32 * Km * d)
        rows = Km
        dec_in = tr
    else:
        rows = K
        lnf = b.elementwise("lnf.fwd", x, K * d, "forward")
        b.count_params(2 * d)
        logits = b.op("lm_head.fwd", 2.0 * K * d * vocab, F32 * (K * d + vocab * d + K * vocab), "forward", memory=F32 * K * vocab)
        b.edge(lnf, logits, F32 * K * d)
        dec_in = lnf
    if pooler:
        pool = b.linear_forward("pooler", x, batch, d, d)
        nsp = b.op("nsp.fwd", 4.0 * batch * d, F32 * (batch * d + 2 * d), "forward", memory=F32 * batch * 2)
        b.edge(pool, nsp, F32 * batch * d)
    loss = b.op("loss", 6.0 * rows * vocab, 3.0 * F32 * rows * vocab, "backward", memory=F32 * rows * vocab)
    b.edge(logits, loss, F32 * rows * vocab)
    # backward: head
    head_name = "mlm.decoder" if masked_fraction is not None else "lm_head"
    d_head = b.op(f"{head_name}.dx", 2.0 * rows * d * vocab, F32 * (rows * vocab + vocab * d + rows * d), "backward")
    b.edge(loss, d_head, F32 * rows * vocab)
    hdw = b.op(f"{head_name}.dw", 2.0 * rows * d * vocab, F32 * (rows * d + rows * vocab + vocab * d), "backward", eligible=True)
    b.edge(dec_in, hdw, F32 * rows * d)
    b.edge(loss, hdw, F32 * rows * vocab)
    if masked_fraction is not None:
        b.count_params(vocab)  # the decoder bias
    b.gradient("emb.word.output", hdw, vocab * d + (vocab if masked_fraction is not None else 0), shape=(d, vocab), factor_rows=rows)
    if masked_fraction is not None:
        dtr = b.linear_backward("mlm.transform", head_in, d_head, rows, d, d)
        assert dtr is not None
        dx = b.op("mlm.gather.bwd", 0.0, 2.0 * F32 * K * d, "backward")
        b.edge(dtr, dx, F32 * rows * d)
    else:
        dx = b.elementwise("lnf.bwd", d_head, K * d, "backward", memory=False)
        b.gradient("lnf", dx, 2 * d)
    if pooler:
        dnsp = b.op("nsp.bwd", 4.0 * batch * d, F32 * batch * d, "backward")
        b.edge(nsp, dnsp, F32 * batch * 2)
        dpool = b.linear_backward("pooler", x, dnsp, batch, d, d)
        assert dpool is not None
        merge = b.op("pooler.merge.bwd", K * d, 2.0 * F32 * K * d, "backward")
        b.edge(dx, merge, F32 * K * d)
        b.edge(dpool, merge, F32 * batch * d)
        dx = merge
    for layer in reversed(range(layers)):
        p = f"l{layer}"
        s = saved[layer]
        dln2 = b.elementwise(f"{p}.ln2.bwd", dx, K * d, "backward", reads=3.0, memory=False)
        df2 = b.linear_backward(f"{p}.ffn2", s["f1"], dln2, K, ffn, d)
        assert df2 is not None
        df1 = b.linear_backward(f"{p}.ffn1", s["ln1"], df2, K, d, ffn)
        assert df1 is not None
        dln1 = b.elementwise(f"{p}.ln1.bwd", df1, K * d, "backward", reads=3.0, memory=False)
        b.gradient(f"{p}.ln", dln1, 4 * d)
        dout = b.linear_backward(f"{p}.out", s["attn"], dln1, K, d, d)
        assert dout is not None
        dattn = b.op(f"{p}.attn.bwd", 2.0 * 4.0 * batch * seq * seq * d, 2.0 * F32 * (K * 3 * d + batch * heads * seq * seq + K * d), "backward")
        b.edge(dout, dattn, F32 * K * d)
        b.edge(s["qkv"], dattn, F32 * K * 3 * d)
        dqkv = b.linear_backward(f"{p}.qkv", s["x"], dattn, K, d, 3 * d)
        assert dqkv is not None
        dx = dqkv
    # embeddings: the word-embedding lookup gradient is sparse (rows of the tokens seen)
    small = b.op("emb.small.bwd", 2.0 * K * d, 2.0 * F32 * K * d, "backward")
    b.edge(dx, small, F32 * K * d)
    b.gradient("emb.small", small, positions * d + 2 * d)
    lookup = b.op("emb.word.lookup.bwd", K * d, 2.0 * F32 * K * d, "backward", eligible=True)
    b.edge(inp, lookup, F32 * K)
    b.edge(dx, lookup, F32 * K * d)
    density = min(1.0, K / vocab)
    b.gradient("emb.word.lookup", lookup, vocab * d, shape=(vocab, d), factor_rows=K, density=density, update_bytes=2.0 * F32 * K * d)
    # the tied output gradient and the lookup gradient are two sync units of one weight
    return b.document(name, description, batch)


def bert_large(batch: int = 2, seq: int = 128, layers: int = 24, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """BERT-large pre-training (MLM on 15 % of tokens, pooler + NSP), per-replica batch."""
    return transformer(
        f"bert-large-b{batch}-s{seq}" + ("" if layers == 24 else f"-l{layers}"),
        layers=layers,
        d=1024,
        heads=16,
        ffn=4096,
        vocab=30522,
        seq=seq,
        batch=batch,
        positions=512,
        masked_fraction=0.15,
        pooler=True,
        cluster=cluster,
        description=f"BERT-large, {layers} layers, batch {batch} x {seq} tokens per replica, data-parallel on V100+P100+1080Ti",
    )


def gpt2_medium(batch: int = 1, seq: int = 256, layers: int = 24, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """GPT-2 medium (345M) language modelling, per-replica batch."""
    return transformer(
        f"gpt2-medium-b{batch}-s{seq}" + ("" if layers == 24 else f"-l{layers}"),
        layers=layers,
        d=1024,
        heads=16,
        ffn=4096,
        vocab=50257,
        seq=seq,
        batch=batch,
        positions=1024,
        masked_fraction=None,
        pooler=False,
        cluster=cluster,
        description=f"GPT-2 medium, {layers} layers, batch {batch} x {seq} tokens per replica, data-parallel on V100+P100+1080Ti",
    )


VGG16: tuple[int | str, ...] = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def vgg16(batch: int = 16, image: int = 224, classes: int = 1000, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """VGG-16 (13 3x3 convolutions + 3 fully-connected layers) on ImageNet-size images."""
    b = GraphBuilder(cluster or tag_cluster())
    x = b.op("input", 0.0, F32 * batch * image * image * 3, "forward", memory=F32 * batch * image * image * 3)
    hw, cin = image, 3
    convs: list[dict[str, Any]] = []
    for k, layer in enumerate(VGG16):
        if layer == "M":
            hw //= 2
            x = b.elementwise(f"pool{k}.fwd", x, batch * hw * hw * cin, "forward")
            convs.append({"pool": x, "hw": hw, "c": cin})
            continue
        cout = int(str(layer))
        rows = batch * hw * hw
        b.count_params(9 * cin * cout + cout)
        op = b.op(f"conv{k}.fwd", 2.0 * rows * 9 * cin * cout, F32 * (rows * (cin + cout) + 9 * cin * cout), "forward", memory=F32 * rows * cout)
        b.edge(x, op, F32 * rows * cin)
        convs.append({"name": f"conv{k}", "in": x, "out": op, "rows": rows, "cin": cin, "cout": cout, "first": k == 0})
        x, cin = op, cout
    flat = cin * hw * hw
    fcs = [("fc6", flat, 4096), ("fc7", 4096, 4096), ("fc8", 4096, classes)]
    fc_in = []
    for name, m, n in fcs:
        fc_in.append(x)
        x = b.linear_forward(name, x, batch, m, n, extra_flops=batch * n)
    loss = b.op("loss", 6.0 * batch * classes, 3.0 * F32 * batch * classes, "backward", memory=F32 * batch * classes)
    b.edge(x, loss, F32 * batch * classes)
    dy = loss
    for (name, m, n), src in reversed(list(zip(fcs, fc_in))):
        nxt = b.linear_backward(name, src, dy, batch, m, n)
        assert nxt is not None
        dy = nxt
    for c in reversed(convs):
        if "pool" in c:
            dy = b.elementwise(str(c["pool"]).replace(".fwd", ".bwd"), dy, batch * c["hw"] * c["hw"] * c["c"] * 4, "backward", memory=False)
            continue
        rows, cin_, cout = c["rows"], c["cin"], c["cout"]
        relu = b.elementwise(f"{c['name']}.relu.bwd", dy, rows * cout, "backward", memory=False)
        if not c["first"]:
            dx = b.op(f"{c['name']}.dx", 2.0 * rows * 9 * cin_ * cout, F32 * (rows * (cin_ + cout) + 9 * cin_ * cout), "backward")
            b.edge(relu, dx, F32 * rows * cout)
        dw = b.op(f"{c['name']}.dw", 2.0 * rows * 9 * cin_ * cout, F32 * (rows * (cin_ + cout) + 9 * cin_ * cout), "backward", eligible=True)
        b.edge(c["in"], dw, F32 * rows * cin_)
        b.edge(relu, dw, F32 * rows * cout)
        b.gradient(c["name"], dw, 9 * cin_ * cout + cout, shape=(9 * cin_, cout), factor_rows=rows)
        if not c["first"]:
            dy = dx
    return b.document(f"vgg16-b{batch}", f"VGG-16, batch {batch} images of {image}x{image} per replica, data-parallel on V100+P100+1080Ti", batch)


def mlp(widths: list[int], batch: int, cluster: dict[str, Any] | None = None, name: str | None = None) -> dict[str, Any]:
    """A multilayer perceptron (linear layers of the given widths) — small test instances."""
    b = GraphBuilder(cluster or tag_cluster())
    x = b.op("input", 0.0, F32 * batch * widths[0], "forward", memory=F32 * batch * widths[0])
    ins = []
    for k in range(len(widths) - 1):
        ins.append(x)
        x = b.linear_forward(f"fc{k}", x, batch, widths[k], widths[k + 1])
    loss = b.op("loss", 6.0 * batch * widths[-1], 3.0 * F32 * batch * widths[-1], "backward", memory=F32 * batch * widths[-1])
    b.edge(x, loss, F32 * batch * widths[-1])
    dy = loss
    for k in reversed(range(len(widths) - 1)):
        nxt = b.linear_backward(f"fc{k}", ins[k], dy, batch, widths[k], widths[k + 1], need_dx=k > 0)
        dy = nxt if nxt is not None else dy
    return b.document(name or f"mlp-{'x'.join(map(str, widths))}-b{batch}", f"MLP {widths}, batch {batch}", batch)


def synthetic(ops: int, seed: int = 0, cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    """A large random graph of about ``ops`` ops: a chain of linear layers of random widths
    whose weight gradients are computed by small eligible trees (a matmul, then one or two
    eligible post-processing ops such as a cast or a loss-scale), to time ``tag_sfb``."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder(cluster or tag_cluster())
    batch = int(rng.integers(8, 64))
    widths = [int(w) for w in rng.choice([64, 128, 256, 512, 1024], size=max(2, ops // 6 + 1))]
    x = b.op("input", 0.0, F32 * batch * widths[0], "forward", memory=F32 * batch * widths[0])
    ins = []
    for k in range(len(widths) - 1):
        ins.append(x)
        x = b.linear_forward(f"fc{k}", x, batch, widths[k], widths[k + 1])
    loss = b.op("loss", 6.0 * batch * widths[-1], 3.0 * F32 * batch * widths[-1], "backward")
    b.edge(x, loss, F32 * batch * widths[-1])
    dy = loss
    for k in reversed(range(len(widths) - 1)):
        m, n = widths[k], widths[k + 1]
        dx = None
        if k > 0:
            dx = b.op(f"fc{k}.dx", 2.0 * batch * m * n, F32 * (batch * (m + n) + m * n), "backward")
            b.edge(dy, dx, F32 * batch * n)
        dw = b.op(f"fc{k}.dw", 2.0 * batch * m * n, F32 * (batch * (m + n) + m * n), "backward", eligible=True)
        b.edge(ins[k], dw, F32 * batch * m)
        b.edge(dy, dw, F32 * batch * n)
        last = dw
        for step in range(int(rng.integers(1, 4))):
            post = b.op(f"fc{k}.post{step}", m * n, 2.0 * F32 * m * n, "backward", eligible=True)
            b.edge(last, post, F32 * m * n)
            if rng.random() < 0.5:  # a second input, e.g. a loss scale or a mask
                b.edge(dy, post, F32 * batch * n)
            last = post
        b.gradient(f"fc{k}", last, m * n + n, shape=(m, n), factor_rows=batch)
        dy = dx if dx is not None else dy
    return b.document(f"synthetic-{ops}-s{seed}", f"random linear chain with eligible gradient trees, about {ops} ops", batch)
