"""Commands that create instances: ``import-torch``, ``make placement``, ``catalogue``.

``distplan import-torch MODULE:FACTORY --input-shape 8,128 --device V100 -o graph.json``
exports a PyTorch model (MODULE may be a dotted module or a ``.py`` file; FACTORY a function
or an ``nn.Module`` class called without arguments; a factory may instead return a
``torch.export`` ExportedProgram, whose dynamic dims ``--input-shape`` sizes). ``distplan make placement --model
gpt2-xl --cluster dgx1 -o inst.json`` combines a zoo model and a catalogue cluster.
``distplan catalogue`` lists devices, clusters and zoo models.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import sys
import time
from pathlib import Path
from typing import Any

from distplan.cli.args import add_output, given_flags, positive_int, positive_int_at_most
from distplan.cli.output import say_wrote
from distplan.cli.progress import Progress
from distplan.errors import InputError
from distplan.instances.generators import MAX_DEVICES
from distplan.models.common import MAX_SECONDS, write_json


def _load_factory(spec: str) -> Any:
    from distplan.instances.torch_export import first_line

    mod_name, sep, attr = spec.partition(":")
    if not sep or not mod_name or not attr:
        raise InputError("MODULE:FACTORY", f"{spec!r} has no ':'", "write e.g. mypackage.models:make_model or model.py:Net")
    if mod_name.endswith(".py"):
        path = Path(mod_name)
        if not path.is_file():
            raise InputError("MODULE:FACTORY", f"no file {mod_name!r}", "give an existing .py file")
        sys.path.insert(0, str(path.parent.resolve()))
        loader = importlib.util.spec_from_file_location(path.stem, path)
        if loader is None or loader.loader is None:
            raise InputError("MODULE:FACTORY", f"cannot load {mod_name!r}")
        module = importlib.util.module_from_spec(loader)
        sys.modules[path.stem] = module
        try:
            loader.loader.exec_module(module)
        except Exception as exc:  # the file's own error (syntax, a missing import, ...), in one line
            sys.modules.pop(path.stem, None)
            raise InputError(_where(mod_name, exc), f"cannot be loaded ({first_line(exc)})", f"fix the file; `python {mod_name}` shows the traceback") from None
    else:
        sys.path.insert(0, str(Path.cwd()))
        try:
            module = importlib.import_module(mod_name)
        except ImportError as exc:
            raise InputError("MODULE:FACTORY", f"cannot import {mod_name!r}: {exc}", "check the module name and PYTHONPATH") from None
        except Exception as exc:  # the module's own error at import time
            raise InputError(_where(mod_name, exc), f"cannot be imported ({first_line(exc)})", f"fix the module; `python -c 'import {mod_name}'` shows the traceback") from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError("MODULE:FACTORY", f"{mod_name!r} has no attribute {attr!r}", "name a function or nn.Module class in that module")
        obj = getattr(obj, part)
    return obj


def _where(module: str, exc: BaseException) -> str:
    """The module or file, with the line of a syntax error (``model.py:3``)."""
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f"{exc.filename or module}:{exc.lineno}"
    return module


def _shape(text: str) -> list[int]:
    try:
        dims = [int(x) for x in text.replace("x", ",").split(",") if x.strip()]
    except ValueError:
        raise InputError("--input-shape", f"{text!r} is not a shape", "write e.g. 8,128") from None
    if not dims or any(d <= 0 for d in dims):
        raise InputError("--input-shape", f"{text!r} is not a shape of positive integers", "write e.g. 8,128")
    return dims


def _op_times(pairs: list[str] | None) -> dict[str, float]:
    out: dict[str, float] = {}
    for pair in pairs or []:
        key, sep, raw = pair.rpartition("=")
        try:
            out[key] = float(raw)
        except ValueError:
            sep = ""
        if not sep or not key:
            raise InputError("--op-time", f"{pair!r} is not OP=SECONDS", "write e.g. --op-time aten._fft_r2c.default=2e-4")
        # (the range an op's time has in an instance: -1 and inf were written as given and
        # refused by `validate` after, NaN became a made-up 7e-6 s, review rev31 audit E)
        if not 0.0 <= out[key] <= MAX_SECONDS:
            raise InputError("--op-time", f"{pair!r}: {raw} is not a time in [0, {MAX_SECONDS:g}] seconds", "give a finite number of seconds >= 0, e.g. 2e-4")
    return out


def _size(text: str | None) -> float | None:
    """Bytes from '16e9', '12GiB', '512MB'."""
    if text is None:
        return None
    units = {"kib": 1024, "mib": 1024**2, "gib": 1024**3, "kb": 1e3, "mb": 1e6, "gb": 1e9, "b": 1}
    low = text.strip().lower()
    unit = next((u for u in units if low.endswith(u)), "")
    num, factor = (low[: -len(unit)], units[unit]) if unit else (low, 1)
    try:
        size = float(num) * factor
    except ValueError:
        raise InputError("--memory-limit", f"{text!r} is not a size", "write bytes, or e.g. 12GiB / 512MB") from None
    if not math.isfinite(size) or size <= 0:
        raise InputError("--memory-limit", f"{text!r} is not a size > 0", "write bytes, or e.g. 12GiB / 512MB")
    return size


def cmd_import_torch(args: argparse.Namespace) -> int:
    from distplan.instances.torch_export import require_torch
    from distplan.instances.torch_import import import_torch

    if args.cluster is not None and (ignored := given_flags(args, ("device", "n_devices"))):
        raise InputError(ignored[0], f"--cluster {args.cluster} sets the devices and their times", f"drop {ignored[0]}, or drop --cluster")
    require_torch()  # before loading the model file, whose own `import torch` would fail less helpfully
    factory = _load_factory(args.factory)
    shapes = [_shape(s) for s in args.input_shape]
    t0 = time.perf_counter()
    with Progress(f"importing {args.factory}"):
        doc = import_torch(
            factory,
            shapes if len(shapes) > 1 else shapes[0],
            device=args.device or "V100",
            measure=args.measure,
            backward=not args.no_backward,
            cluster=args.cluster,
            n_devices=args.n_devices or 4,
            memory_limit=_size(args.memory_limit),
            input_dtypes=args.input_dtype,
            precision=args.precision,
            op_times=_op_times(args.op_time),
            optimizer=None if args.optimizer == "none" else args.optimizer,
            name=args.name,
        )
    write_json(doc, args.output)
    tot = doc["meta"]["totals"]
    say_wrote(
        f"wrote {args.output}: {len(doc['graph']['ops'])} ops ({tot['forward_ops']} forward), {len(doc['graph']['edges'])} edges, "
        f"{tot['forward_flops'] / 1e9:.3f} GFLOP forward, {tot['param_bytes'] / 1e6:.2f} MB parameters, "
        f"{len(doc['meta']['fused'])} nodes fused, {len(doc['meta'].get('linear_modules', []))} nn.Linear modules "
        f"(meta.linear_modules), inputs {', '.join(doc['meta'].get('input_dtypes', []))}, {time.perf_counter() - t0:.2f} s"
    )
    return 0


def cmd_make_placement(args: argparse.Namespace) -> int:
    from distplan.instances.zoo import make_placement

    with Progress(f"making {args.model} on {args.cluster}"):
        doc = make_placement(
            args.model,
            args.cluster,
            _size(args.memory_limit),
            batch=args.batch,
            seq=args.seq,
            dtype=args.dtype,
            backward=not args.no_backward,
            optimizer=None if args.optimizer == "none" else args.optimizer,
            name=args.name,
            memory_model=args.memory_model,
            micro_batches=args.micro_batches,
            granularity=args.granularity,
        )
    write_json(doc, args.output)
    mem = sum(op["memory"] for op in doc["graph"]["ops"])
    say_wrote(f"wrote {args.output}: {doc['name']}, {len(doc['graph']['ops'])} ops, {len(doc['graph']['edges'])} edges, {len(doc['cluster']['devices'])} devices, {mem / 1e9:.2f} GB held in total")
    return 0


def cmd_catalogue(args: argparse.Namespace) -> int:
    from distplan.instances.zoo import MODELS
    from distplan.models.catalogue import CLUSTERS, DEVICES

    if args.what in (None, "devices"):
        print("devices:")
        for d in DEVICES.values():
            print(f"  {d.name:<12} fp16 {d.peak_fp16_flops / 1e12:>7.1f} TFLOP/s  fp32 {d.peak_fp32_flops / 1e12:>6.1f} TFLOP/s  {d.memory_bytes / 2**30:>4.0f} GiB  {d.memory_bandwidth / 1e9:>6.0f} GB/s")
    if args.what in (None, "clusters"):
        print("clusters:")
        for c in CLUSTERS.values():
            print(f"  {c.name:<16} {c.description}")
    if args.what in (None, "models"):
        print("models:")
        for m in MODELS.values():
            print(f"  {m.name:<14} {m.description}")
    return 0


def add_make_placement(make_sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``placement`` to a ``make`` command's subparsers (for distplan/cli/make.py)."""
    p = make_sub.add_parser("placement", help="a placement instance from a zoo model and a catalogue cluster")
    p.add_argument("--model", required=True, help="zoo model: gpt2-small|medium|large|xl, bert-base|large, resnet-50, inception-v3, llama3-8b, llama3-70b, mixtral-8x7b")
    p.add_argument("--cluster", required=True, help="catalogue cluster, e.g. dgx1, dgx1:4, dgx-a100, h100-sxm, h100-nvl, 2xh100-sxm-ib, tag-mix (see `distplan catalogue`)")
    p.add_argument("--memory-limit", default=None, help="cap every device at this size (bytes, or e.g. 4GiB)")
    p.add_argument("--batch", type=positive_int, default=None)
    p.add_argument("--seq", type=positive_int, default=None, help="sequence length (transformers)")
    p.add_argument("--dtype", default="fp16", help="fp16 (default) or fp32")
    p.add_argument("--no-backward", action="store_true", help="forward pass only (inference)")
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd", "none"])
    p.add_argument("--memory-model", default=None, choices=["simple", "liveness"])
    p.add_argument("--micro-batches", type=positive_int, default=None, help="Llama-class models: micro-batches per training step (default 4)")
    p.add_argument("--granularity", default=None, choices=["kernel", "module"], help="Llama-class models: one op per CUDA kernel (default) or per module")
    p.add_argument("--name", default=None)
    add_output(p, "-o", "--output", required=True, help="output file (.json or .json.gz)")
    p.set_defaults(func=cmd_make_placement)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("import-torch", help="export a PyTorch model (torch.export) into a placement instance")
    p.add_argument("factory", metavar="MODULE:FACTORY", help="module (or file.py) and a function / nn.Module class building the model (or a function returning its torch.export ExportedProgram)")
    p.add_argument("--input-shape", action="append", required=True, help="shape of one input, e.g. 8,128 (repeat for several inputs)")
    p.add_argument("--device", default=None, help="catalogue device for roofline times (default V100; not with --cluster, whose devices set them)")
    p.add_argument("--cluster", default=None, help="catalogue cluster (default: --n-devices of --device on PCIe 3.0)")
    p.add_argument("--n-devices", type=positive_int_at_most(MAX_DEVICES), default=None, help=f"devices of the default cluster (default 4, at most {MAX_DEVICES}; not with --cluster)")
    p.add_argument("--memory-limit", default=None, help="cap every device at this size (bytes, or e.g. 4GiB)")
    p.add_argument("--measure", action="store_true", help="time each op on this CPU with the torch profiler (median of 3 runs after a warm-up)")
    p.add_argument("--no-backward", action="store_true", help="forward pass only (inference)")
    p.add_argument("--optimizer", default="adam", choices=["adam", "sgd", "none"])
    p.add_argument("--input-dtype", default=None, help="dtype of the inputs (default: int64 for token models: Hugging Face, or an nn.Embedding first layer; else the weights' dtype)")
    p.add_argument("--precision", default=None, help="cast the model to fp16 / bf16 / fp32 before export")
    p.add_argument("--op-time", action="append", metavar="OP=SECONDS", help="time per call of an op the cost model lacks (repeatable)")
    p.add_argument("--name", default=None)
    add_output(p, "-o", "--output", required=True, help="output file (.json or .json.gz)")
    p.set_defaults(func=cmd_import_torch)

    p = sub.add_parser("catalogue", help="list catalogue devices, clusters and zoo models")
    p.add_argument("what", nargs="?", choices=["devices", "clusters", "models"])
    p.set_defaults(func=cmd_catalogue)
