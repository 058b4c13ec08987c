"""`distplan plot`: charts of plans (Gantt of a placement or a pipeline schedule, ...)."""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path
from typing import Any

from distplan.api import solve
from distplan.cli.args import add_output, given_flags, positive_float
from distplan.cli.output import say_wrote
from distplan.cli.plan_file import read_plan_file
from distplan.errors import InputError, NoSolutionError
from distplan.instances import load_instance
from distplan.kinds import KINDS
from distplan.models.common import kind_spec
from distplan.solvers.result import LIMIT_TERMINATIONS

#: chart file suffixes (formats matplotlib writes by suffix; JPEG, TIFF and WebP through Pillow)
CHART_SUFFIXES = (".png", ".pdf", ".svg", ".svgz", ".eps", ".ps", ".jpg", ".jpeg", ".tif", ".tiff", ".webp")

#: the bandwidth formulation whose result holds the time-vs-cost Pareto curve
PARETO_FORMULATION = "libra_perf_per_cost"

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
    _check_sources(args, inst.kind)
    if inst.kind == "bandwidth":
        return _plot_pareto(inst, args)
    draw = plotter(inst.kind)
    if args.plan:
        plan = read_plan_file(inst, args.plan)
    else:
        plan = solve(inst, formulation=args.formulation, backend=args.backend, time_limit=args.time_limit, fold=args.fold, started=_started(args)).plan
    out = draw(inst, plan, args.out)
    say_wrote(f"wrote {out}")
    return 0


def _check_sources(args: argparse.Namespace, kind: str) -> None:
    """One source of the plan, and no option that would be ignored: a PLAN.json is drawn as
    it is, so the solving options (-f, -b, --time-limit, --fold) have no use beside it,
    except for bandwidth, whose Pareto curve is solved in every case (-b, --time-limit)."""
    if args.plan and args.formulation:
        raise InputError("plot", "both a PLAN.json and --formulation are given", "give one: the plan to draw, or the formulation to solve")
    if kind == "bandwidth" or args.formulation:
        return
    if not args.plan:
        raise InputError("plot", "nothing to plot", "give a PLAN.json or --formulation F")
    used = given_flags(args, ("backend", "time_limit", "fold"))
    if used:
        raise InputError("plot", f"{', '.join(used)} {'applies' if len(used) == 1 else 'apply'} only when solving, and a PLAN.json is drawn as it is", "leave them out, or give --formulation F instead of the plan")


def _plot_pareto(inst: Any, args: argparse.Namespace) -> int:
    """Bandwidth instances: the time-vs-cost Pareto curve of `libra_perf_per_cost`, with the
    fastest allocation and the time x cost optimum marked, and the bandwidth per dimension
    as bars. A PLAN.json, or another formulation's plan (--formulation), is evaluated and
    marked on the same chart. ``--time-limit`` covers the whole command."""
    require_matplotlib()
    try:
        from distplan.models.bandwidth_plot import plot_pareto
    except ImportError as exc:
        raise InputError("plot", f"charts need matplotlib ({exc})", "pip install 'distplan[plot]'") from None
    points: dict[str, dict[str, Any]] = {}
    started = _started(args)  # both solves count from the command's start: one limit for the whole command
    if args.plan:
        points[Path(args.plan).name] = _evaluated_point(inst, read_plan_file(inst, args.plan))
    elif args.formulation and args.formulation != PARETO_FORMULATION:
        res = solve(inst, formulation=args.formulation, backend=args.backend, time_limit=args.time_limit, fold=args.fold, started=started)
        points[args.formulation] = _evaluated_point(inst, res.plan)
        if args.time_limit is not None and time.perf_counter() - started >= args.time_limit:
            raise NoSolutionError(f"{args.formulation} used the whole --time-limit ({args.time_limit:g} s), leaving none for the Pareto curve of {PARETO_FORMULATION} (raise --time-limit)")
    curve = solve(inst, formulation=PARETO_FORMULATION, backend=args.backend, time_limit=args.time_limit, fold=args.fold, started=started)
    if not curve.info.get("pareto") and curve.termination in LIMIT_TERMINATIONS:
        given = "" if args.time_limit is None else f"; {args.time_limit:g} s was given for the command's solves"
        raise NoSolutionError(f"{PARETO_FORMULATION} stopped at its {curve.termination} before it traced the Pareto curve (raise --time-limit{given})")
    out = plot_pareto(curve, args.out, points=points)
    say_wrote(f"wrote {out}")
    return 0


def _started(args: argparse.Namespace) -> float:
    """When the command began (``time.perf_counter()``, `cli.main`), the start of its limit."""
    started = getattr(args, "started", None)
    return time.perf_counter() if started is None else float(started)


def _evaluated_point(inst: Any, plan: Any) -> dict[str, Any]:
    """The plan's training time (s), network cost (USD) and bandwidth, by the bandwidth
    evaluator; an infeasible plan is drawn too, and says so on stderr."""
    check = kind_spec(inst.kind).evaluate(inst, plan)
    if not check.feasible:
        print(f"warning: the plan is infeasible: {'; '.join(check.violations)}", file=sys.stderr)
    return {"time_seconds": check.details["time_seconds"], "cost_usd": check.details["cost_usd"], "bandwidth": dict(plan.bandwidth)}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("plot", help="chart (PNG) of a plan: Gantt of a placement or pipeline schedule, Pareto curve of bandwidth")
    p.add_argument("instance")
    p.add_argument("plan", nargs="?", help="plan JSON (from `solve --out`) to draw as it is; or use --formulation. Bandwidth: marked on the Pareto curve (optional)")
    p.add_argument("--formulation", "-f", default=None)
    p.add_argument("--backend", "-b", default=None)
    p.add_argument("--time-limit", type=positive_float, default=None, help="seconds for the command's solves, counted from its start (one limit for both solves of a bandwidth chart); drawing the chart comes after, unlimited")
    p.add_argument("--fold", action="store_true")
    add_output(p, "--out", "-o", required=True, suffixes=CHART_SUFFIXES, help="output PNG (or PDF, SVG: by suffix)")
    p.set_defaults(func=cmd_plot)
