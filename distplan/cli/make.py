"""`distplan make KIND ...`: build instances from the zoo, the catalogue and the generators.

Every size is bounded (the maxima below, named in each option's help), so that a typo such
as ``--ops 1000000000`` or ``--stages 100000`` is a named error (exit 2) before any work,
not a process killed for memory or running for minutes (review rev16 D6). The maxima are
far beyond real models: a Llama-3 70B training step is 80 layers and about 30k ops.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from distplan.cli.args import (
    add_output,
    given_flags,
    nonneg_float,
    nonneg_int,
    positive_float,
    positive_int,
    positive_int_at_most,
)
from distplan.cli.importers import add_make_placement, cmd_make_placement
from distplan.cli.output import say_wrote, wrote_line
from distplan.errors import InputError
from distplan.instances.generators import MAX_DEVICES, MAX_OPS
from distplan.models.common import instance_from_dict, write_json
from distplan.models.pipeline import MAX_MICRO_BATCHES, PipelineInstance
from distplan.models.sharding import MAX_MESH_DEVICES

#: the pipeline shapes `make pipeline --shape` takes (`instances.pipelines.SHAPES`, not
#: imported here: a test holds the two equal)
PIPELINE_SHAPES = "v, x, m, k, nn, interleaved, v2"

#: most axes a sharding mesh has (the schema's mesh.shape)
MAX_MESH_AXES = 3
#: most transformer layers (`make sharding`; the deepest real models have about 130)
MAX_LAYERS = 4096
#: most sequences per batch and tokens per sequence (`make sharding`, `make placement`,
#: `make pipeline --model`): 2**20 each
MAX_BATCH = 2**20
MAX_SEQ = 2**20
#: most pipeline stages, chunks per device and stages x chunks (`make pipeline`: 1024
#: stages take 2.5 s; 100,000 ran for minutes)
MAX_STAGES = 1024
MAX_CHUNKS = 64
MAX_VIRTUAL_STAGES = 4096
#: most micro-batches of a Llama-class `make placement` graph (each copies the step's ops:
#: 64 micro-batches of Llama-3 70B are about 430k ops)
MAX_PLACEMENT_MICRO_BATCHES = 64


def _floats(option: str, text: str | None, axes: int, *, positive: bool) -> tuple[float, ...] | None:
    """One finite number per mesh axis (> 0, or >= 0 unless ``positive``)."""
    if text is None:
        return None
    try:
        values = tuple(float(x) for x in text.split(","))
    except ValueError:
        raise InputError(option, f"{text!r} is not a comma-separated list of numbers", "write one number per mesh axis, e.g. 240,25") from None
    if len(values) != axes:
        raise InputError(option, f"{len(values)} value(s) for a {axes}-axis mesh", "give one value per mesh axis, e.g. 240,25 for --mesh 2x4")
    for v in values:
        if not math.isfinite(v) or v < 0 or (positive and v == 0):
            raise InputError(option, f"{v:g} is not a finite number {'> 0' if positive else '>= 0'}", "give one value per mesh axis")
    return values


def _mesh(text: str) -> int | tuple[int, ...]:
    try:
        parts = tuple(int(x) for x in text.lower().split("x"))
    except ValueError:
        raise InputError("--mesh", f"{text!r} is not a mesh shape", "write e.g. 8 or 2x4") from None
    if any(p < 1 for p in parts):
        raise InputError("--mesh", f"{text!r} has an axis of {min(parts)} devices", "every axis needs at least 1 device, e.g. 8 or 2x4")
    if len(parts) > MAX_MESH_AXES:
        raise InputError("--mesh", f"{text!r} has {len(parts)} axes", f"a mesh has 1 to {MAX_MESH_AXES} axes, e.g. 8, 2x4 or 2x2x2")
    if math.prod(parts) > MAX_MESH_DEVICES:
        raise InputError("--mesh", f"{text!r} has {math.prod(parts)} devices, beyond the {MAX_MESH_DEVICES} a mesh may have", "give a smaller mesh")
    return parts[0] if len(parts) == 1 else parts


def cmd_make_sharding(args: argparse.Namespace) -> int:
    from distplan.instances.transformer import PRESETS, preset, transformer

    family = "llama" if args.model in _llama_models() else "transformer" if args.model == "transformer" else "preset" if args.model in PRESETS else None
    if family is None:
        raise InputError("--model", f"unknown model {args.model!r}", f"use one of: transformer, {', '.join([*PRESETS, *_llama_models()])}")
    _refuse_ignored_sharding(args, family)
    mesh = _mesh(args.mesh)
    axes = 1 if isinstance(mesh, int) else len(mesh)
    bandwidth = _floats("--bandwidth-gbs", args.bandwidth_gbs, axes, positive=True)
    latency = _floats("--latency-us", args.latency_us, axes, positive=False)
    kw: dict[str, Any] = {
        "mesh": mesh,
        "device": args.device or "A100-80GB",
        "bandwidth": None if bandwidth is None else tuple(b * 1e9 for b in bandwidth),
        "latency": None if latency is None else tuple(x * 1e-6 for x in latency),
        "memory": None if args.memory_gb is None else args.memory_gb * 1e9,
        "flash": args.flash,
        "sequence_split": args.sequence_split,
        "name": args.name,
    }
    if family == "llama":
        inst = _make_llama_sharding(args, kw)
    elif family == "transformer":
        missing = [f for f in ("layers", "hidden", "heads", "seq") if getattr(args, f) is None]
        if missing:
            raise InputError(f"--{missing[0]}", "needed for --model transformer", "give --layers --hidden --heads --seq")
        inst = transformer(args.layers, args.hidden, args.heads, args.seq, args.batch, DEFAULT_VOCAB if args.vocab is None else args.vocab, ffn=args.ffn, **kw)
    else:
        extra = {k: getattr(args, k) for k in ("layers", "seq") if getattr(args, k) is not None}
        inst = preset(args.model, batch=args.batch, **kw, **extra)
    instance_from_dict(inst.to_dict())  # what is written must load: --mesh 10000000 wrote a file no command read
    inst.to_json(args.output)
    say_wrote(sharding_summary(args.output, inst))
    return 0


#: `make sharding --vocab`'s default for ``--model transformer`` (GPT-2's vocabulary)
DEFAULT_VOCAB = 50257
#: the `make sharding` options each model family does not read
SHARDING_OPTIONS_IGNORED = {
    "transformer": ("cluster", "no_flash"),
    "preset": ("hidden", "heads", "vocab", "ffn", "cluster", "no_flash"),
    "llama": ("hidden", "heads", "vocab", "ffn", "device", "flash"),
}


def _refuse_ignored_sharding(args: argparse.Namespace, family: str) -> None:
    """`InputError` naming an option the model family does not read (``--hidden`` with a
    Llama model, ``--cluster`` with a GPT: they were dropped silently, review rev25)."""
    given = given_flags(args, SHARDING_OPTIONS_IGNORED[family])
    if given:
        why = {
            "--device": "the device is the --cluster's",
            "--flash": "flash attention is the Llama models' default (--no-flash turns it off)",
            "--cluster": "only Llama models take a cluster; give --device, --bandwidth-gbs, --latency-us",
            "--no-flash": "flash attention is off unless --flash",
        }.get(given[0], "the model's shape is its own")
        raise InputError(given[0], f"has no effect with --model {args.model} ({why})", f"leave out {', '.join(given)}")


def _llama_models() -> list[str]:
    from distplan.instances.zoo_llama import LLAMA_MODELS

    return list(LLAMA_MODELS)


def _make_llama_sharding(args: argparse.Namespace, kw: dict[str, Any]) -> Any:
    """A Llama-class zoo model on a mesh of a catalogue cluster (--cluster; --device is the
    cluster's); --bandwidth-gbs / --latency-us override the cluster's links per axis."""
    from distplan.instances.zoo_sharding import llama_sharding

    return llama_sharding(
        args.model,
        batch=args.batch,
        mesh=kw["mesh"],
        cluster=args.cluster or "8xh100-sxm-ib",
        seq=args.seq,
        layers=args.layers,
        memory=kw["memory"],
        flash=not args.no_flash,
        sequence_split=args.sequence_split,
        bandwidth=kw["bandwidth"],
        latency=kw["latency"],
        name=args.name,
    )


def sharding_summary(path: str, inst: Any) -> str:
    """One line on a new sharding instance: size, and whether its least memory per device
    (every op at its most memory-saving strategy) fits the budget."""
    from distplan.formulations.sharding.alpa_ilp import memory_shortfall
    from distplan.formulations.sharding.costgraph import build_cost_graph
    from distplan.models.sharding import GB, bytes_over

    s = inst.summary()
    least = memory_shortfall(build_cost_graph(inst))[0]
    state = s["parameters"] * inst.training.optimizer_bytes_per_param / inst.mesh.num_devices
    # (what the evaluator accepts: the formulations' infeasibility proofs use the same limit)
    fits = "fits" if not bytes_over(least, inst.memory_budget) else "does NOT fit (every formulation will report it infeasible)"
    return (
        f"wrote {path}: sharding {s['name']}: {s['ops']} ops, {s['parameters'] / 1e9:.1f} B parameters, mesh {s['mesh']}, "
        f"batch {s['batch']}; least memory {least / GB:.1f} GB per device (parameters + optimizer state at best "
        f"{state / GB:.1f} GB) of {inst.memory_budget / GB:.1f} GB: {fits}"
    )


def cmd_make_pipeline(args: argparse.Namespace) -> int:
    from distplan.instances.pipelines import SHAPES, make_pipeline, pipeline_from_model

    interleaved = SHAPES.get(str(args.shape or "v").lower()) == "interleaved"
    _refuse_ignored(args, interleaved)
    args.chunks = 2 if args.chunks is None else args.chunks
    if interleaved and args.stages * args.chunks > MAX_VIRTUAL_STAGES:
        raise InputError(
            "--chunks", f"{args.stages} stages x {args.chunks} chunks are {args.stages * args.chunks} pipeline stages, more than the largest taken, {MAX_VIRTUAL_STAGES}", "give fewer stages or chunks"
        )
    if args.model is not None:
        inst = pipeline_from_model(
            args.model,
            args.stages,
            args.micro_batches,
            args.cluster or "h100-sxm",
            shape=args.shape or "v",
            chunks=args.chunks,
            batch=args.batch,
            seq=args.seq,
            split_backward=args.split_backward,
            memory_capacity=args.memory,
            name=args.name,
        )
        _write_pipeline(inst, args.output)
        return 0
    if args.shape is None:
        raise InputError("--shape", "needed unless --model is given", "give --shape v (or x, m, k, nn, interleaved, v2), or --model llama3-8b")
    inst = make_pipeline(
        args.shape,
        args.stages,
        args.micro_batches,
        forward_time=TOY_DEFAULTS["forward_time"] if args.forward_time is None else args.forward_time,
        backward_time=TOY_DEFAULTS["backward_time"] if args.backward_time is None else args.backward_time,
        weight_time=args.weight_time,
        chunks=args.chunks,
        memory_capacity=args.memory,
        comm_delay=TOY_DEFAULTS["comm_delay"] if args.comm_delay is None else args.comm_delay,
        mode=TOY_DEFAULTS["mode"] if args.mode is None else args.mode,
        name=args.name,
    )
    _write_pipeline(inst, args.output)
    return 0


#: `make pipeline` options of the model-free shapes (their defaults) and of ``--model``
TOY_DEFAULTS: dict[str, Any] = {"forward_time": 1.0, "backward_time": 3.0, "weight_time": None, "comm_delay": 0.0, "mode": "training"}
MODEL_OPTIONS = ("cluster", "batch", "seq", "split_backward")


def _refuse_ignored(args: argparse.Namespace, interleaved: bool) -> None:
    """`InputError` naming an option the asked pipeline would ignore: block times with
    ``--model`` (they come from its layer costs), model options without it, ``--chunks``
    on a shape other than interleaved (they were silently dropped)."""
    if args.model is not None:
        toy = given_flags(args, tuple(TOY_DEFAULTS))
        if toy:
            raise InputError(toy[0], "has no effect with --model (block times, memory and delays come from the model's layer costs)", f"leave out {', '.join(toy)}")
    else:
        model = given_flags(args, MODEL_OPTIONS)
        if model:
            raise InputError(model[0], "applies only with --model", f"give --model (e.g. llama3-8b), or leave out {', '.join(model)}")
    if args.chunks is not None and not interleaved:
        raise InputError("--chunks", "only the interleaved shape has a number of chunks per device (v2 has 2)", "give --shape interleaved, or leave out --chunks")


def _write_pipeline(inst: PipelineInstance, output: str) -> None:
    """Write ``inst`` unless it has more operations than any pipeline formulation plans
    (`check_size`: an instance every solve refused was written, review rev24b)."""
    from distplan.formulations.pipeline.common import check_size  # (the formulations load on need)

    try:
        check_size(inst)
    except InputError as exc:
        raise InputError("--micro-batches", exc.problem, exc.fix) from None
    inst.to_json(output)
    say_wrote(wrote_line(output, inst.summary()))


def cmd_make_random(args: argparse.Namespace) -> int:
    from distplan.instances import generators

    makers: dict[str, Callable[..., Any]] = {"layered": generators.random_layered_dag, "series-parallel": generators.series_parallel, "chain": generators.chain_of_blocks}
    fn = makers[args.generator]
    if args.generator == "chain" and args.ops * 8 > MAX_OPS:  # --ops counts blocks of 8 ops
        raise InputError("--ops", f"{args.ops} blocks of 8 ops are {args.ops * 8} ops, more than the largest taken, {MAX_OPS}", f"give at most {MAX_OPS // 8} blocks")
    doc = fn(args.ops, n_devices=args.devices, seed=args.seed)
    write_json(doc, args.output)
    say_wrote(f"wrote {args.output}: {len(doc['graph']['ops'])} ops, {len(doc['graph']['edges'])} edges")
    return 0


def cmd_make_placement_bounded(args: argparse.Namespace) -> int:
    """`make placement` with its sizes in range (`importers.cmd_make_placement` builds it):
    ``--batch 1000000000000`` wrote an instance holding 1e12 GB (review rev16 D6)."""
    for option, value, most in (("--batch", args.batch, MAX_BATCH), ("--seq", args.seq, MAX_SEQ), ("--micro-batches", args.micro_batches, MAX_PLACEMENT_MICRO_BATCHES)):
        if value is not None and value > most:
            raise InputError(option, f"{value} is more than the largest taken, {most}", "give a smaller value")
    return cmd_make_placement(args)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    make = sub.add_parser("make", help="create an instance (placement, sharding, pipeline, random DAG)")
    kinds = make.add_subparsers(dest="make_kind", metavar="KIND", required=True)
    add_make_placement(kinds)
    kinds.choices["placement"].set_defaults(func=cmd_make_placement_bounded)

    p = kinds.add_parser("sharding", help="a transformer training graph on a device mesh (Alpa/TAP sharding)")
    p.add_argument("--model", default="transformer", help="transformer (give the shape), gpt2-xl, gpt3-175b, llama3-8b or llama3-70b")
    p.add_argument("--cluster", default=None, help="catalogue cluster giving a Llama model's mesh device and links (default 8xh100-sxm-ib)")
    p.add_argument("--layers", type=positive_int_at_most(MAX_LAYERS), default=None, help=f"at most {MAX_LAYERS}")
    p.add_argument("--hidden", type=positive_int, default=None)
    p.add_argument("--heads", type=positive_int, default=None)
    p.add_argument("--seq", type=positive_int_at_most(MAX_SEQ), default=None, help=f"at most {MAX_SEQ}")
    p.add_argument("--batch", type=positive_int_at_most(MAX_BATCH), default=8, help=f"at most {MAX_BATCH}")
    p.add_argument("--vocab", type=positive_int, default=None, help=f"vocabulary size (--model transformer; default {DEFAULT_VOCAB})")
    p.add_argument("--ffn", type=positive_int, default=None, help="FFN width (default 4 x hidden)")
    p.add_argument("--mesh", default="8", help="mesh shape: 8 or 2x4")
    p.add_argument("--device", default=None, help="mesh device (default A100-80GB; Llama models: the --cluster's)")
    p.add_argument("--memory-gb", type=positive_float, default=None, help="memory per device (default: the device's)")
    p.add_argument("--bandwidth-gbs", default=None, help="bandwidth per mesh axis, GB/s, e.g. 240,25")
    p.add_argument("--latency-us", default=None, help="latency per mesh axis, microseconds, e.g. 2,10")
    p.add_argument("--flash", action="store_true", help="flash attention (no s x s score tensors kept)")
    p.add_argument("--no-flash", action="store_true", help="Llama models: eager attention (score tensors kept; flash is their default)")
    p.add_argument("--sequence-split", action="store_true", help="allow sequence-parallel strategies")
    p.add_argument("--name", default=None)
    add_output(p, "-o", "--output", required=True)
    p.set_defaults(func=cmd_make_sharding)

    p = kinds.add_parser("pipeline", help=f"a pipeline placement ({PIPELINE_SHAPES}) for repetend scheduling")
    p.add_argument("--shape", default=None, help=f"{PIPELINE_SHAPES} (with --model: v, interleaved or v2, default v)")
    p.add_argument("--model", default=None, help="zoo model (e.g. llama3-8b, gpt2-xl): block times and memory from its layer costs")
    p.add_argument("--cluster", default=None, help="with --model: catalogue cluster whose first devices run the stages (default h100-sxm)")
    p.add_argument("--batch", type=positive_int_at_most(MAX_BATCH), default=None, help=f"with --model: sequences per micro-batch (at most {MAX_BATCH})")
    p.add_argument("--seq", type=positive_int_at_most(MAX_SEQ), default=None, help=f"with --model: sequence length (at most {MAX_SEQ})")
    p.add_argument("--split-backward", action="store_true", help="with --model: zero-bubble B/W split of the backward blocks")
    p.add_argument("--stages", type=positive_int_at_most(MAX_STAGES), required=True, help=f"at most {MAX_STAGES}")
    p.add_argument("--micro-batches", type=positive_int_at_most(MAX_MICRO_BATCHES), required=True, help=f"at most {MAX_MICRO_BATCHES}")
    p.add_argument("--forward-time", type=positive_float, default=None, help="seconds per forward block (default 1; not with --model)")
    p.add_argument("--backward-time", type=positive_float, default=None, help="seconds per backward block, B + W unless split (default 3; not with --model)")
    p.add_argument("--weight-time", type=positive_float, default=None, help="seconds of the W part (zero-bubble B/W split; not with --model: --split-backward)")
    p.add_argument("--chunks", type=positive_int_at_most(MAX_CHUNKS), default=None, help=f"virtual chunks per device (interleaved only, default 2; at most {MAX_CHUNKS}, and stages x chunks at most {MAX_VIRTUAL_STAGES})")
    p.add_argument("--memory", type=positive_float, default=None, help="memory capacity per device (the blocks' units; with --model bytes, default the device's)")
    p.add_argument("--comm-delay", type=nonneg_float, default=None, help="seconds between blocks on different devices (default 0; not with --model)")
    p.add_argument("--mode", default=None, choices=["training", "inference"], help="default training (not with --model)")
    p.add_argument("--name", default=None)
    add_output(p, "-o", "--output", required=True)
    p.set_defaults(func=cmd_make_pipeline)

    p = kinds.add_parser("random", help="a seeded random placement DAG (scaling studies)")
    p.add_argument("--generator", default="layered", choices=["layered", "series-parallel", "chain"])
    p.add_argument("--ops", type=positive_int_at_most(MAX_OPS), required=True, help=f"ops (chain: blocks of 8 ops); at most {MAX_OPS} ops")
    p.add_argument("--devices", type=positive_int_at_most(MAX_DEVICES), default=4, help=f"at most {MAX_DEVICES}")
    p.add_argument("--seed", type=nonneg_int, default=0)
    add_output(p, "-o", "--output", required=True)
    p.set_defaults(func=cmd_make_random)
