"""``distplan measure-codecs INSTANCE -o OUT.json``: measure lossless codecs on tensors
shaped like the instance's gradients and record them in its ``codecs`` section."""

from __future__ import annotations

import argparse

from distplan.cli.args import add_output, nonneg_int, positive_int
from distplan.cli.output import say_wrote
from distplan.cli.progress import Progress
from distplan.errors import InputError
from distplan.instances import load_document
from distplan.instances.codec_measure import DEFAULT_CODECS, CodecSpec, measure_instance
from distplan.models.common import instance_from_dict, write_json


def cmd_measure_codecs(args: argparse.Namespace) -> int:
    doc = load_document(args.instance)
    inst = instance_from_dict(doc)
    if inst.kind != "compression":
        raise InputError("kind", f"{args.instance} is a {inst.kind} instance", "measure codecs of a compression instance")
    specs: tuple[CodecSpec, ...] = DEFAULT_CODECS
    if args.codecs:
        wanted = [c.strip() for c in args.codecs.split(",") if c.strip()]
        known = {s.name: s for s in DEFAULT_CODECS}
        for w in wanted:
            if w not in known:
                raise InputError("--codecs", f"unknown codec {w!r}", f"use some of: {', '.join(known)}")
        specs = tuple(known[w] for w in wanted)
    with Progress(f"measuring {len(specs)} codecs on {args.instance}"):  # (19 s at 5e7 elements, silent until its end)
        out = measure_instance(doc, specs, elements=args.elements, repeat=args.repeat, seed=args.seed)
    instance_from_dict(out)  # the result must still be a valid instance
    write_json(out, args.out)
    for c in out["codecs"]:
        ratios = ", ".join(f"{p}: {r:.4f}" for p, r in c["ratio"].items())
        enc = min(c["encode_bytes_per_second"].values())
        dec = min(c["decode_bytes_per_second"].values())
        print(f"{c['name']:<14} {ratios}   encode {enc / 1e9:.3f} GB/s, decode {dec / 1e9:.3f} GB/s")
    say_wrote(f"wrote {args.out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("measure-codecs", help="measure zstandard / lz4 / sparse-index on gradient-like tensors, record them in a compression instance")
    p.add_argument("instance", help="compression instance (file or bundled name)")
    add_output(p, "-o", "--out", required=True, help="output instance JSON (.json or .json.gz)")
    p.add_argument("--elements", type=positive_int, default=1 << 20, help="elements per measured tensor")
    p.add_argument("--repeat", type=positive_int, default=3, help="runs per measurement (best is kept)")
    p.add_argument("--seed", type=nonneg_int, default=0)
    p.add_argument("--codecs", default=None, help=f"comma-separated subset of: {', '.join(s.name for s in DEFAULT_CODECS)}")
    p.set_defaults(func=cmd_measure_codecs)
