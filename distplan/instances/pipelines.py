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
"""

from __future__ import annotations

from typing import Any

from distplan.errors import InputError
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
    scale = 1.0 / chunks if kind == "interleaved" else 0.5 if kind == "v2" else 1.0
    if kind == "interleaved" and (not isinstance(chunks, int) or chunks < 1):
        raise InputError("chunks", f"expected a positive integer, got {chunks!r}")

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
