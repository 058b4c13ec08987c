"""Builders of pipeline instances: the standard placements of a micro-batch on devices.

``make_pipeline(shape, stages, micro_batches, **kw)`` returns a `PipelineInstance`:

* ``v`` (``vshape``): a plain p-stage pipeline (GPipe/1F1B placement): forward blocks on
  devices 0..p-1, backward blocks in reverse order.
* ``x`` (``xshape``, Chimera-like; Li & Hoefler SC'21): two independent pipelines per
  micro-batch, one down the devices and one up.
* ``m`` (``mshape``): a first and a last block sharded over all devices (e.g. an embedding)
  around a plain pipeline.
* ``k`` (``kshape``): two half-pipelines joined by a block on all devices (loss / SPMD).
* ``nn`` (``nnshape``): two blocks on all devices, one first and one in the middle.
* ``interleaved``: ``chunks`` model chunks per device (Narayanan et al., SC'21); stage
  ``s`` runs on device ``s % p``; chunk times are the stage time divided by ``chunks``.
* ``v2`` (``vchunks``): the V placement of Zero Bubble's ZB-V and of "Pipeline Parallelism
  with Controllable Memory" (Qi et al., NeurIPS 2024): 2p stages, device d holds stages d
  and 2p-1-d (the forward pass goes down the devices and comes back up); chunk times and
  memory are the stage values divided by 2, so a device's work per micro-batch equals a
  plain pipeline stage's.

The M, K and NN shapes follow Tessel's ``examples/simulator/cases_tessel.py`` (Lin et al.,
HPCA 2024): a stage forward block takes ``forward_time`` with memory ``+forward_memory``,
a backward block ``backward_time`` with memory ``-forward_memory``, a block sharded over
all devices ``shard_time`` with memory 0 (the K shape's joint block holds memory like a
stage). Tessel's toy costs are the defaults: forward 1, backward 3, memory +1/-1.

Giving ``weight_time`` splits every stage backward block into B (input gradient, on the
critical path, ``backward_time``, ``backward_memory``) and W (weight gradient, only after
its B, ``weight_time``, ``weight_memory``) as in Zero Bubble (Qi et al., ICLR 2024). Their
memory defaults split the forward memory in two halves (Zero Bubble: +2, -1, -1).

Times are seconds and memory bytes (any consistent units work: Tessel counts activations).
``mode="inference"`` drops backward blocks and (unless given) forward memory.

``pipeline_from_model(model, stages, micro_batches, cluster)`` cuts a zoo model's layers
into stages and takes each stage's block times and memory from the model's layer costs.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.catalogue import ClusterSpec
from distplan.models.pipeline import PipelineBlock, PipelineInstance

SHAPES = {
    "v": "v",
    "vshape": "v",
    "x": "x",
    "xshape": "x",
    "m": "m",
    "mshape": "m",
    "k": "k",
    "kshape": "k",
    "nn": "nn",
    "nnshape": "nn",
    "interleaved": "interleaved",
    "i": "interleaved",
    "v2": "v2",
    "vchunks": "v2",
}


class _Builder:
    """Collects blocks of one micro-batch with chain dependencies."""

    def __init__(self, devices: list[str]):
        self.devices = devices
        self.blocks: list[PipelineBlock] = []
        self.deps: dict[str, list[str]] = {}

    def add(self, name: str, role: str, duration: float, devices: list[int], memory: float, after: list[str]) -> str:
        self.deps[name] = [d for d in after if d]
        self.blocks.append(PipelineBlock(name, float(duration), tuple(self.devices[d] for d in devices), float(memory), (), (), role))
        return name

    def build(self) -> list[PipelineBlock]:
        return [PipelineBlock(b.name, b.duration, b.devices, b.memory, tuple(self.deps[b.name]), (), b.role) for b in self.blocks]


def make_pipeline(
    shape: str,
    stages: int,
    micro_batches: int,
    *,
    forward_time: float = 1.0,
    backward_time: float = 3.0,
    weight_time: float | None = None,
    forward_memory: float | None = None,
    backward_memory: float | None = None,
    weight_memory: float | None = None,
    shard_time: float = 1.0,
    chunks: int = 2,
    memory_capacity: float | dict[str, float] | None = None,
    comm_delay: float = 0.0,
    mode: str = "training",
    objective: str = "makespan",
    name: str | None = None,
    device_prefix: str = "d",
) -> PipelineInstance:
    """A pipeline instance of a standard placement (see the module docstring)."""
    kind = SHAPES.get(shape.lower())
    if kind is None:
        raise InputError("shape", f"unknown pipeline shape {shape!r}", f"use one of: {', '.join(sorted(set(SHAPES.values())))}")
    if not isinstance(stages, int) or stages < 1:
        raise InputError("stages", f"expected a positive integer, got {stages!r}")
    if kind in ("x", "m", "k", "nn") and stages < 2:
        raise InputError("stages", f"the {kind} shape needs at least 2 devices")
    if not isinstance(micro_batches, int) or micro_batches < 1:
        raise InputError("micro_batches", f"expected a positive integer, got {micro_batches!r}")
    if mode not in ("training", "inference"):
        raise InputError("mode", f"unknown mode {mode!r}", "use training or inference")
    train = mode == "training"
    fmem = forward_memory if forward_memory is not None else (1.0 if train else 0.0)
    split = weight_time is not None
    if split:
        bmem = backward_memory if backward_memory is not None else -fmem / 2
        wmem = weight_memory if weight_memory is not None else -fmem / 2
    else:
        bmem = backward_memory if backward_memory is not None else -fmem
        wmem = 0.0
    p = stages
    devices = [f"{device_prefix}{i}" for i in range(p)]
    bld = _Builder(devices)
    if kind == "interleaved" and (not isinstance(chunks, int) or chunks < 1):
        raise InputError("chunks", f"expected a positive integer, got {chunks!r}")
    scale = 1.0 / chunks if kind == "interleaved" else 0.5 if kind == "v2" else 1.0

    def backward(tag: str, dev: int, after: str) -> str:
        """A stage backward block (and its W block when split); returns the B block."""
        b = bld.add(f"B{tag}", "B", backward_time * scale, [dev], bmem * scale, [after])
        if split:
            bld.add(f"W{tag}", "W", float(weight_time) * scale, [dev], wmem * scale, [b])  # type: ignore[arg-type]
        return b

    def chain(tags: list[str], devs: list[int], head: str | None, with_backward: bool = True) -> tuple[str, str | None]:
        """Forward blocks along ``devs`` then backward blocks in reverse; returns (last F, last B)."""
        prev = head
        for tag, dev in zip(tags, devs):
            prev = bld.add(f"F{tag}", "F", forward_time * scale, [dev], fmem * scale, [prev] if prev else [])
        last_f = prev
        if not (train and with_backward):
            return last_f, None  # type: ignore[return-value]
        for tag, dev in zip(tags[::-1], devs[::-1]):
            prev = backward(tag, dev, prev)  # type: ignore[arg-type]
        return last_f, prev  # type: ignore[return-value]

    everyone = list(range(p))
    label = kind
    if kind == "v":
        chain([str(s) for s in range(p)], everyone, None)
    elif kind == "interleaved":
        nst = chunks * p
        chain([str(s) for s in range(nst)], [s % p for s in range(nst)], None)
        label = f"interleaved{chunks}"
    elif kind == "v2":
        chain([str(s) for s in range(2 * p)], everyone + everyone[::-1], None)
    elif kind == "x":
        chain([f"a{s}" for s in range(p)], everyone, None)
        chain([f"b{s}" for s in range(p)], everyone[::-1], None)
    elif kind == "m":
        head = bld.add("SF", "F", shard_time, everyone, 0.0, [])
        _, last_b = chain([str(s) for s in range(p)], everyone, head)
        if train:
            bld.add("SB", "B", shard_time, everyone, 0.0, [last_b])  # type: ignore[list-item]
    elif kind == "nn":
        mid = p // 2
        prev = bld.add("S1F", "F", shard_time, everyone, 0.0, [])
        for s in range(p):
            if s == mid:
                prev = bld.add("S2F", "F", shard_time, everyone, 0.0, [prev])
            prev = bld.add(f"F{s}", "F", forward_time, [s], fmem, [prev])
        if train:
            back = list(range(p))[::-1]
            for k, s in enumerate(back):
                if k == mid:
                    prev = bld.add("S2B", "B", shard_time, everyone, 0.0, [prev])
                prev = backward(str(s), s, prev)
            bld.add("S1B", "B", shard_time, everyone, 0.0, [prev])
    elif kind == "k":
        half = p // 2
        left, right = list(range(half)), list(range(half, p))
        prev_l: str | None = None
        for s in left:
            prev_l = bld.add(f"F{s}", "F", forward_time, [s], fmem, [prev_l] if prev_l else [])
        prev_r: str | None = None
        for s in right:
            prev_r = bld.add(f"F{s}", "F", forward_time, [s], fmem, [prev_r] if prev_r else [])
        join = bld.add("JF", "F", shard_time, everyone, fmem, [prev_l, prev_r])  # type: ignore[list-item]
        if train:
            jb = bld.add("JB", "B", shard_time, everyone, -fmem, [join])
            for side in (left, right):
                prev = jb
                for s in side[::-1]:
                    prev = backward(str(s), s, prev)
    if split:
        label += "-zb"
    blocks = bld.build()
    doc_name = name or f"{label}-p{p}-n{micro_batches}" + ("-infer" if not train else "")
    desc = (
        f"{label} placement on {p} devices, {micro_batches} micro-batches; F {forward_time:g} s"
        + (f", B {backward_time:g} s" if train else "")
        + (f", W {weight_time:g} s" if split else "")
        + f", memory per F {fmem:g}"
    )
    data: dict[str, Any] = {
        "format": "distplan/1",
        "kind": "pipeline",
        "name": doc_name,
        "description": desc,
        "mode": mode,
        "objective": objective,
        "devices": devices,
        "memory_capacity": memory_capacity,
        "micro_batches": micro_batches,
        "comm_delay": comm_delay,
        "blocks": [
            {"name": b.name, "role": b.role, "duration": b.duration, "devices": list(b.devices), "memory": b.memory, "deps": list(b.deps)}
            for b in blocks
        ],
    }
    return PipelineInstance.from_dict(data)


def tessel_case(shape: str, memory: float, micro_batches: int, stages: int = 4, mode: str = "training") -> PipelineInstance:
    """Tessel's simulator placements (``cases_tessel.py``): F span 1 memory +1, B span 3
    memory -1, full-shard blocks span 1 memory 0; one capacity for all devices."""
    return make_pipeline(
        shape,
        stages,
        micro_batches,
        forward_time=1.0,
        backward_time=3.0,
        forward_memory=1.0,
        memory_capacity=memory,
        mode=mode,
        name=f"tessel-{SHAPES[shape]}shape-p{stages}-mem{memory:g}-n{micro_batches}",
    )


def zero_bubble_case(stages: int = 4, micro_batches: int = 12, comm_delay: float = 0.0, memory_limit: float = 8.0) -> PipelineInstance:
    """Zero Bubble's ILP setting (Qi et al., ICLR 2024): F = B = W = 1, memory +2/-1/-1 per
    stage, limit 8 (1F1B's with 4 stages), objective = longest per-stage span."""
    return make_pipeline(
        "v",
        stages,
        micro_batches,
        forward_time=1.0,
        backward_time=1.0,
        weight_time=1.0,
        forward_memory=2.0,
        backward_memory=-1.0,
        weight_memory=-1.0,
        memory_capacity=memory_limit,
        comm_delay=comm_delay,
        objective="device_span",
        name=f"zb-p{stages}-m{micro_batches}-comm{comm_delay:g}",
    )


_LAYER_INDEX = re.compile(r"^(?:mb\d+\.)?(?:layers\.|h|layer)(\d+)\.")


def pipeline_from_model(
    model: str,
    stages: int,
    micro_batches: int,
    cluster: str | ClusterSpec = "h100-sxm",
    *,
    shape: str = "v",
    chunks: int = 2,
    batch: int | None = None,
    seq: int | None = None,
    dtype: str = "bf16",
    split_backward: bool = False,
    memory_capacity: float | None = None,
    name: str | None = None,
) -> PipelineInstance:
    """A pipeline instance whose block times come from a zoo model's layer costs.

    The transformer layers of ``model`` (a zoo name: Llama-class, GPT-2 or BERT, built at
    module granularity with one micro-batch of ``batch`` x ``seq``) are cut into contiguous
    stages of near-equal layer counts (the embedding joins the first stage, the final norm,
    output layer and loss the last). A stage's F block lasts the sum of its forward ops'
    roofline times on the device it runs on (the first ``stages`` devices of ``cluster``), its
    B block the sum of their backward ops'; with ``split_backward`` the weight-gradient half
    of every parameterized op's backward (1x its forward FLOPs of the 2x) becomes a W block
    (Zero Bubble, Qi et al. ICLR 2024). An F block holds the activations its stage stashes for
    one micro-batch (bytes), freed by its B (half by B and half by W when split). Each
    device's capacity is its memory (or ``memory_capacity`` bytes) less the weights,
    gradients and Adam state of its stages (2 + 2 + 12 bytes per parameter). ``comm_delay``
    is the largest stage-boundary transfer: activation bytes / pair bandwidth + latency.
    ``shape``: ``v`` (one stage per device), ``interleaved`` (``chunks`` stages per device,
    stage j on device j mod stages) or ``v2`` (2 x ``stages`` stages, device d holding
    stages d and 2 x stages - 1 - d: the V placement of ZB-V and the V-schedules). The
    optimizer step after the flush is not a block.
    """
    from distplan.instances.zoo import MODELS, model_graph
    from distplan.instances.zoo_llama import LLAMA_MODELS
    from distplan.models.catalogue import cluster as catalogue_cluster

    kind = SHAPES.get(shape.lower())
    if kind not in ("v", "interleaved", "v2"):
        raise InputError("shape", f"a pipeline from a model is built for shapes v, interleaved and v2, not {shape!r}")
    if not isinstance(stages, int) or stages < 1:
        raise InputError("stages", f"expected a positive integer, got {stages!r}")
    if not isinstance(micro_batches, int) or micro_batches < 1:
        raise InputError("micro_batches", f"expected a positive integer, got {micro_batches!r}")
    if kind == "interleaved" and (not isinstance(chunks, int) or chunks < 1):
        raise InputError("chunks", f"expected a positive integer, got {chunks!r}")
    if model not in MODELS:
        raise InputError("model", f"unknown model {model!r}", f"use one of: {', '.join(MODELS)}")
    spec = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    if spec.n_devices < stages:
        raise InputError("stages", f"{stages} stages need {stages} devices, {spec.name!r} has {spec.n_devices}")
    options: dict[str, Any] = {"micro_batches": 1, "granularity": "module"} if model in LLAMA_MODELS else {}
    graph = model_graph(model, batch, seq, dtype, **options).training("adam")
    n_stages = stages * (chunks if kind == "interleaved" else 2 if kind == "v2" else 1)
    index = graph.index
    layer_of = np.full(len(graph.ops), -1, dtype=np.int64)
    seen_layer = False
    for k, op in enumerate(graph.ops):
        if op.phase != "forward":
            continue
        m = _LAYER_INDEX.match(op.name)
        if m:
            layer_of[k] = int(m.group(1))
            seen_layer = True
        elif seen_layer:
            layer_of[k] = -2  # after the last layer: the head
    n_layers = int(layer_of.max()) + 1
    if n_layers < n_stages:
        raise InputError("stages", f"{model!r} has {n_layers} layers, fewer than the {n_stages} stages asked for", "use fewer stages (or chunks)")
    cut = [(j * n_layers) // n_stages for j in range(n_stages + 1)]
    stage_of_layer = np.searchsorted(np.array(cut[1:]), np.arange(n_layers), side="right")
    fwd_stage = np.where(layer_of >= 0, stage_of_layer[np.maximum(layer_of, 0)], np.where(layer_of == -1, 0, n_stages - 1))
    stage = np.empty(len(graph.ops), dtype=np.int64)
    for k, op in enumerate(graph.ops):
        stage[k] = fwd_stage[k] if op.phase == "forward" else fwd_stage[index[op.info["forward"]]]
    # (v2: down the devices and back up, device d holding stages d and 2 stages - 1 - d)
    device_of_stage = [j if j < stages else 2 * stages - 1 - j for j in range(n_stages)] if kind == "v2" else [j % stages for j in range(n_stages)]
    types = spec.device_types[:stages]
    per_type = graph.times(sorted(set(types)))
    fwd = np.zeros(n_stages)
    bwd = np.zeros(n_stages)
    wgt = np.zeros(n_stages)
    act = np.zeros(n_stages)
    static = np.zeros(n_stages)
    for k, op in enumerate(graph.ops):
        j = int(stage[k])
        t = float(per_type[types[device_of_stage[j]]][k])
        mem = op.params + op.buffers if op.memory is None else op.memory
        if op.phase == "forward":
            fwd[j] += t
            act[j] += mem - op.params - op.buffers
            static[j] += op.params + op.buffers
        elif op.phase == "backward":
            fwd_op = graph.ops[index[op.info["forward"]]]
            w = 0.5 * t if (split_backward and fwd_op.params > 0) else 0.0
            bwd[j] += t - w
            wgt[j] += w
            static[j] += mem
        else:  # optimizer update: its state stays, its time is after the flush
            static[j] += mem
    devices = list(spec.device_names[:stages])
    bw, lat = spec.pair_matrices()
    inbound = np.zeros(n_stages)  # seconds to receive a stage's inputs from earlier stages
    for e in graph.edges:
        if graph.ops[e.src].phase == "forward" and graph.ops[e.dst].phase == "forward":
            a, b = int(stage[e.src]), int(stage[e.dst])
            da, db = device_of_stage[a], device_of_stage[b]
            if a != b and da != db:
                inbound[b] += e.bytes / bw[da, db] + lat[da, db]
    delay = float(inbound.max())
    base = [float(m) for m in spec.memory()[:stages]] if memory_capacity is None else [float(memory_capacity)] * stages
    capacity: dict[str, float] = {}
    for d in range(stages):
        held = float(static[[j for j in range(n_stages) if device_of_stage[j] == d]].sum())
        if held >= base[d]:
            raise InputError("stages", f"device {devices[d]!r} holds {held / 1e9:.1f} GB of weights, gradients and optimizer state, more than its {base[d] / 1e9:.1f} GB", "use more stages or a larger memory capacity")
        capacity[devices[d]] = base[d] - held
    bld = _Builder(devices)
    prev = ""
    for j in range(n_stages):
        prev = bld.add(f"F{j}", "F", fwd[j], [device_of_stage[j]], act[j], [prev])
    for j in reversed(range(n_stages)):
        share = act[j] / 2 if split_backward else act[j]
        prev = bld.add(f"B{j}", "B", bwd[j], [device_of_stage[j]], -share, [prev])
        if split_backward:
            bld.add(f"W{j}", "W", wgt[j], [device_of_stage[j]], -(act[j] - share), [prev])
    placement = "interleaved" + str(chunks) if kind == "interleaved" else kind
    label = f"{model}-{placement}{'-zb' if split_backward else ''}-p{stages}-n{micro_batches}"
    data: dict[str, Any] = {
        "format": "distplan/1",
        "kind": "pipeline",
        "name": name or label,
        "description": (
            f"{graph.name} in {n_stages} stages on {stages} devices of {spec.name} ({types[0]}), {micro_batches} micro-batches; "
            f"per-stage F {fwd.min() * 1e3:.3g}-{fwd.max() * 1e3:.3g} ms, B {bwd.min() * 1e3:.3g}-{bwd.max() * 1e3:.3g} ms (roofline)"
        ),
        "mode": "training",
        "objective": "makespan",
        "devices": devices,
        "memory_capacity": capacity,
        "micro_batches": micro_batches,
        "comm_delay": delay,
        "blocks": [
            {"name": b.name, "role": b.role, "duration": b.duration, "devices": list(b.devices), "memory": b.memory, "deps": list(b.deps)}
            for b in bld.build()
        ],
    }
    return PipelineInstance.from_dict(data)
