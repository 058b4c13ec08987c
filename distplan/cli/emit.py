"""``distplan emit PLAN.json --target torch-pipelining|dtensor|megatron -o OUT``.

PLAN.json is a plan written by ``distplan solve --out`` or a result written by ``--result``;
the instance is ``--instance FILE`` or the one the document names (a bundled name or the
source path a result records). Without ``-o`` the text goes to stdout.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from distplan.cli.args import add_output, positive_int
from distplan.cli.output import say_wrote
from distplan.cli.plan_file import warn_other_instance
from distplan.emit import TARGETS, emit
from distplan.errors import InputError
from distplan.instances import load_instance
from distplan.models.common import read_json


def _modules(pairs: list[str] | None, path: str | None) -> dict[str, object] | None:
    out: dict[str, object] = {}
    if path:
        doc = read_json(path)
        if not isinstance(doc, dict):
            raise InputError("--modules-file", "expected a JSON object {op name: module name or list of names}")
        out.update(doc)
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key or not raw:
            raise InputError("--module", f"{pair!r} is not OP=MODULE", "write e.g. --module l{i}.fc1=layers.{i}.mlp.w1")
        out[key] = raw.split(",") if "," in raw else raw
    return out or None


def cmd_emit(args: argparse.Namespace) -> int:
    doc = read_json(args.plan)
    if not isinstance(doc, dict):
        raise InputError(str(args.plan), "not a plan document", "write one with `distplan solve ... --out PLAN.json`")
    options: dict[str, Any] = {}
    modules = _modules(args.module, args.modules_file)
    if modules is not None:
        if args.target != "dtensor":
            raise InputError("--module", "module names are for --target dtensor")
        options["modules"] = modules
    if args.num_layers is not None:
        if args.target != "megatron":
            raise InputError("--num-layers", "the layer count is for --target megatron")
        options["num_layers"] = args.num_layers
    inst = None
    if args.instance is not None:
        inst = load_instance(args.instance)
        warn_other_instance(inst, doc, args.plan)
    text = emit(doc, args.target, inst, **options)
    if args.output:
        with open(args.output, "w") as fh:
            fh.write(text)
        say_wrote(f"wrote {args.output} ({args.target})")
    else:
        sys.stdout.write(text)
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("emit", help="write a plan for a training runtime (PyTorch pipelining, DTensor, Megatron-LM)")
    p.add_argument("plan", help="plan (solve --out) or result (solve --result) JSON")
    p.add_argument("--target", "-t", required=True, choices=TARGETS)
    p.add_argument("--instance", "-i", default=None, help="instance file or bundled name (default: the one the plan names)")
    p.add_argument("--module", action="append", metavar="OP=MODULE[,MODULE]", help="dtensor: module name(s) of an op; l{i} matches layer numbers (repeatable)")
    p.add_argument("--modules-file", default=None, help="dtensor: JSON object {op name: module name or list}")
    p.add_argument("--num-layers", type=positive_int, default=None, help="megatron: transformer layers (default: one per pipeline stage)")
    add_output(p, "-o", "--output", default=None, help="output file (default: stdout)")
    p.set_defaults(func=cmd_emit)


