"""`distplan plot`: charts of plans (Gantt of a placement or a pipeline schedule, ...)."""

from __future__ import annotations

import argparse
import importlib
from typing import Any

from distplan.api import solve
from distplan.cli.args import add_output
from distplan.cli.output import say_wrote
from distplan.errors import InputError
from distplan.instances import load_instance
from distplan.kinds import KINDS
from distplan.models.common import kind_spec, read_json

#: chart file suffixes (formats matplotlib writes by suffix; JPEG, TIFF and WebP through Pillow)
CHART_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")

#: kind -> "module:function" drawing (instance, plan, path), from the kind table
PLOTTERS = {name: kind.plotter for name, kind in KINDS.items() if kind.plotter is not None}


def require_matplotlib() -> None:
    """A named error (exit 2) when matplotlib is missing: the chart modules import it only
    inside their drawing functions, so importing them proves nothing."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise InputError("plot", f"charts need matplotlib ({exc})", "pip install 'distplan[plot]'") from None


def plotter(kind: str) -> Any:
    spec = PLOTTERS.get(kind)
    if spec is None:
        raise InputError("kind", f"no chart is defined for {kind} plans", f"plot one of: {', '.join(PLOTTERS)}")
    require_matplotlib()
    mod, _, fn = spec.partition(":")
    try:
        return getattr(importlib.import_module(mod), fn)
    except ImportError as exc:
        raise InputError("plot", f"charts need matplotlib ({exc})", "pip install 'distplan[plot]'") from None


def cmd_plot(args: argparse.Namespace) -> int:
    inst = load_instance(args.instance)
    if inst.kind == "bandwidth":
        return _plot_pareto(inst, args)
    draw = plotter(inst.kind)
    if args.plan:
        plan = kind_spec(inst.kind).read_plan(inst, read_json(args.plan))
    elif args.formulation:
        plan = solve(inst, formulation=args.formulation, backend=args.backend, time_limit=args.time_limit, fold=args.fold).plan
    else:
        raise InputError("plot", "nothing to plot", "give a PLAN.json or --formulation F")
    out = draw(inst, plan, args.out)
    say_wrote(f"wrote {out}")
    return 0


def _plot_pareto(inst: Any, args: argparse.Namespace) -> int:
    """Bandwidth instances: the time-vs-cost Pareto curve of `libra_perf_per_cost`, with the
    chosen points marked and the bandwidth per dimension as bars."""
    require_matplotlib()
    try:
        from distplan.models.bandwidth_plot import plot_pareto
    except ImportError as exc:
        raise InputError("plot", f"charts need matplotlib ({exc})", "pip install 'distplan[plot]'") from None
    res = solve(inst, formulation=args.formulation or "libra_perf_per_cost", backend=args.backend, time_limit=args.time_limit)
    out = plot_pareto(res, args.out)
    say_wrote(f"wrote {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plot", help="chart (PNG) of a plan: Gantt of a placement or pipeline schedule, Pareto curve of bandwidth")
    p.add_argument("instance")
    p.add_argument("plan", nargs="?", help="plan JSON (from `solve --out`); or use --formulation")
    p.add_argument("--formulation", "-f", default=None)
    p.add_argument("--backend", "-b", default=None)
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("--fold", action="store_true")
    add_output(p, "--out", "-o", required=True, suffixes=CHART_SUFFIXES, help="output PNG (or PDF, SVG: by suffix)")
    p.set_defaults(func=cmd_plot)
