"""Core commands: solve, list, inspect, validate, export, evaluate, verify."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from distplan.api import Result, max_threads, solve
from distplan.cli.args import add_output, positive_float, positive_int_at_most, relative_gap
from distplan.cli.output import say_wrote
from distplan.cli.plan_file import read_plan_file
from distplan.cli.progress import Progress
from distplan.errors import InputError
from distplan.formulations.registry import check_fold, formulations, get_formulation, solver_free_bounds
from distplan.instances import bundled, instance_from_dict, load_document, load_instance
from distplan.modeling.export import MODEL_SUFFIXES, write_model
from distplan.models.common import digest_of, kind_spec, known_kinds, print_json, write_json
from distplan.solvers.base import all_backends


def _fmt(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    if unit == "s":
        return f"{value * 1e3:.3f} ms" if abs(value) < 10 else f"{value:.3f} s"
    return f"{value:.6g}{(' ' + unit) if unit else ''}"


#: an example of each KEY=VALUE option, for its error message
_KEY_VALUE_EXAMPLES = {"--param": "--param theta=0.1", "--solver-option": "--solver-option mip_max_nodes=0"}


def _params(pairs: list[str] | None, option: str = "--param") -> dict[str, Any]:
    """KEY=VALUE pairs of a repeatable ``option`` (values parsed as JSON when they are)."""
    out: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise InputError(option, f"{pair!r} is not KEY=VALUE", f"write e.g. {_KEY_VALUE_EXAMPLES.get(option, option + ' key=value')}")
        try:
            out[key] = json.loads(raw)
        except json.JSONDecodeError:
            out[key] = raw
    return out


def print_result(res: Result, instance: Any) -> None:
    unit = res.objective_unit
    print(f"instance     {res.instance} ({res.kind})")
    print(f"formulation  {res.formulation}   backend {res.backend} {res.backend_version}")
    print(f"termination  {res.termination.value}   status {res.status.value}")
    cut_by = res.info.get("cut_by")
    if isinstance(cut_by, dict) and cut_by:  # (a formulation's own budgets stopped these searches)
        print(f"cut by       {', '.join(f'{search}: {budget}' for search, budget in cut_by.items())}")
    print(f"{res.objective_name:<12} {_fmt(res.objective, unit)}")
    src = f"  [{res.bound_source}; {res.bound_grade}]" if res.bound_source else ""
    print(f"bound        {_fmt(res.bound, unit)}{src}")
    print(f"gap          {_percent(res.gap)}   (optimal when <= {100 * res.gap_tolerance:g} %)")
    t = res.timings
    print(
        f"time         build {t['build_seconds']:.3f} s, hand-over {t['handover_seconds']:.3f} s, "
        f"solve {t['solve_seconds']:.3f} s, total {t['wall_seconds']:.3f} s"
    )
    spec = kind_spec(res.kind)
    if spec.describe is not None and res.check is not None:
        for line in spec.describe(instance, res.plan, res.check):
            print(line)


def cmd_solve(args: argparse.Namespace) -> int:
    # progress covers the whole command: a 200,000-op instance loads for seconds and its
    # result takes a second to write, both silent before (review rev29 D9)
    with Progress(f"solving {args.instance} with {args.formulation}", lines=args.verbose):
        if args.fold:  # refused before a large file loads (review rev30 D11: 4 s on 100,000 ops)
            named = [f for f in formulations() if f.name == args.formulation]
            if len(named) == 1:  # (formulation names are unique across kinds)
                check_fold(named[0], named[0].kind)
        inst = load_instance(args.instance)
        # what `distplan verify` checks the instance against, hashed before the solve so that
        # the time limit covers it as it covers loading (review rev29 D4: 1 s on a
        # 200,000-op instance, after the solve had used the whole limit)
        digest = digest_of(inst)
        res = _solve_args(inst, args)
        # a file as an absolute path, so `emit` / `verify` find it from any folder; a bundled name as is
        source = str(Path(args.instance).resolve()) if Path(args.instance).is_file() else str(args.instance)
        res.info["source"] = source
        res.info["instance_digest"] = digest
        if args.out and res.plan is not None:
            plan_doc = {"format": "distplan/1", "kind": f"{inst.kind}-plan", "instance": inst.name, "source": source, **res.plan.to_dict()}
            write_json(plan_doc, args.out)
        doc = res.to_dict() if args.result or args.json else None
        if args.result:
            write_json(doc, args.result)
        if args.json:
            print_json(doc, sys.stdout)
            sys.stdout.write("\n")
    if not args.json:
        print_result(res, inst)
    return 0


def _solve_args(inst: Any, args: argparse.Namespace) -> Result:
    return solve(
        inst,
        started=getattr(args, "started", None),  # the limit covers the whole command (see cli.main)
        formulation=args.formulation,
        backend=args.backend,
        time_limit=args.time_limit,
        mip_gap=args.mip_gap,
        fold=args.fold,
        threads=args.threads,
        verbose=args.verbose,
        solver_options=_params(args.solver_option, "--solver-option"),
        **_params(args.param),
    )


def cmd_list(args: argparse.Namespace) -> int:
    what = args.what
    if args.kind is not None and args.kind not in known_kinds():
        raise InputError("--kind", f"unknown kind {args.kind!r}", f"use one of: {', '.join(known_kinds())}")
    if args.kind is not None and what == "backends":
        raise InputError("--kind", "backends are not per kind (a formulation's program says which it takes: see `distplan list formulations`)", "leave out --kind, or list formulations or instances")
    if what in (None, "formulations"):
        print("formulations:")
        for f in sorted(formulations(args.kind), key=lambda f: (f.kind, f.name)):
            params = ", ".join(f"{k}={v!r}" for k, v in f.params.items())
            print(f"  {f.kind:<12} {f.name:<24} {f.program:<9} {f.description}" + (f"  [{params}]" if params else ""))
    if what in (None, "backends"):
        print("backends:")
        for b in all_backends():
            caps = ",".join(k for k, v in vars(b.capabilities).items() if v is True)
            missing = b.missing()
            state = b.version() if missing is None else f"not installed ({missing})"
            print(f"  {b.name:<16} {state:<28} {caps}")
    if what in (None, "instances"):
        print("instances:")
        for name, entry in sorted(bundled().items()):
            if args.kind and entry.get("kind") != args.kind:
                continue
            print(f"  {name:<28} {entry.get('kind', ''):<12} {entry.get('size', ''):<24} {entry.get('description', '')}")
    return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    inst = load_instance(args.instance)
    summary = inst.summary()
    bounds = solver_free_bounds(inst)
    if args.json:
        print_json({"summary": summary, "bounds": [{"value": b.value, "source": b.source} for b in bounds]}, sys.stdout)
        sys.stdout.write("\n")
        return 0
    for key, value in summary.items():
        print(f"{key:<24} {value}")
    for b in bounds:
        print(f"bound{'':<19} {b.value:.6g}  [{b.source}]")
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from distplan.models.schema import validate_document

    doc = load_document(args.instance)
    validate_document(doc)
    inst = instance_from_dict(doc)  # (the document read once)
    spec = kind_spec(inst.kind)
    if spec.check_plan_exists is not None:  # a well-formed document no plan can satisfy: exit 3
        spec.check_plan_exists(inst)
    print(f"{args.instance}: valid {inst.kind} instance {inst.name!r}")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    inst = load_instance(args.instance)
    form = get_formulation(inst.kind, args.formulation)
    params = _params(args.param)
    form.check_params(params)
    with Progress(f"building {form.name} on {inst.name}"):
        model, _ = form.build(inst, {**form.params, **params})
    with Progress(f"writing {args.to}"):
        write_model(model.to_arrays(), args.to)
    st = model.stats()
    say_wrote(f"wrote {args.to}: {st['variables']} variables ({st['binaries']} binary, {st['integers']} general integer), {st['rows']} rows, {st['nonzeros']} nonzeros")
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    inst = load_instance(args.instance)
    spec = kind_spec(inst.kind)
    plan = read_plan_file(inst, args.plan)
    check = spec.evaluate(inst, plan)
    if args.json:
        print_json(check.to_dict(), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(f"feasible     {check.feasible}")
        print(f"{spec.objective_name:<12} {_fmt(check.objective, spec.objective_unit)}")
        for v in check.violations[:20]:
            print(f"violation    {v}")
        if spec.describe is not None and check.details:  # a plan rejected before its figures has none
            for line in spec.describe(inst, plan, check):
                print(line)
    return 0 if check.feasible else 3


def cmd_verify(args: argparse.Namespace) -> int:
    from distplan.cli.bench import verify_target

    with Progress(f"verifying {args.path}"):  # a campaign database of many runs takes seconds
        report = verify_target(args.path, args.instance, require_version=args.require_version)
    if args.strict:
        report = report.strictly()
    if args.json:
        print_json({"ok": report.ok, "checked": report.checked, "problems": report.problems, "notes": report.notes, "unredone": report.unredone}, sys.stdout)
        sys.stdout.write("\n")
    else:
        for line in report.lines():
            print(line)
    return 0 if report.ok else 1


def _percent(gap: float | None) -> str:
    """A relative gap in percent; below 0.01 % in scientific notation, so that a gap the
    status counts (2.4e-09 against a tolerance of 0: bounds are rounded down for safety) is
    not shown as "0.00 %" beside status feasible."""
    if gap is None:
        return "-"
    return f"{100 * gap:.2f} %" if gap == 0 or gap >= 1e-4 else f"{100 * gap:.1e} %"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("solve", help="solve an instance (file or bundled name) with a formulation")
    p.add_argument("instance", help="instance file (.json / .json.gz) or bundled name")
    p.add_argument("--formulation", "-f", required=True)
    p.add_argument("--backend", "-b", default=None, help="solver backend (default: the formulation's, HiGHS)")
    p.add_argument("--time-limit", type=positive_float, default=None, help="seconds")
    p.add_argument(
        "--mip-gap",
        type=relative_gap,
        default=None,
        help="relative gap under which a plan counts as optimal (default 1e-4); proven bounds are rounded down "
        "by a small margin (up to ~1e-9 relative, more for solvers' absolute tolerances), so at 0 a plan shows optimal "
        "only when a bound meets it exactly (a bound rounded up on integral data, or a finished exhaustive search); "
        "the termination stays the solver's own word (optimal within its tolerances)",
    )
    p.add_argument("--threads", type=positive_int_at_most(max_threads()), default=None, help=f"solver threads (at most {max_threads()})")
    p.add_argument("--fold", action="store_true", help="fold/coarsen the instance first")
    p.add_argument("--param", action="append", metavar="KEY=VALUE", help="formulation parameter (repeatable)")
    p.add_argument("--solver-option", action="append", metavar="KEY=VALUE", help="raw backend option, e.g. mip_max_nodes=0 (repeatable; a VALUE that reads as JSON is taken as JSON, so a cvxpy solver's nested table is written scip_params='{\"limits/nodes\": 100}'); the time limit, the gap and objective cutoffs are refused: use --time-limit and --mip-gap")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_output(p, "--out", help="write the plan to this JSON file")
    add_output(p, "--result", help="write the whole result (plan, bounds, timings) to this JSON file")
    p.add_argument("--verbose", action="store_true", help="stream the solver log")
    p.set_defaults(func=cmd_solve)

    p = sub.add_parser("list", help="list formulations, backends and bundled instances")
    p.add_argument("what", nargs="?", choices=["formulations", "backends", "instances"])
    p.add_argument("--kind", default=None, help="only the formulations and instances of this kind")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("inspect", help="sizes, totals and solver-free bounds of an instance")
    p.add_argument("instance")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("validate", help="check an instance file against the JSON schema and the format rules")
    p.add_argument("instance")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("export", help="write the model of a formulation to an MPS or LP file")
    p.add_argument("instance")
    p.add_argument("--formulation", "-f", required=True)
    add_output(p, "--to", required=True, suffixes=MODEL_SUFFIXES, help="output file (.mps or .lp)")
    p.add_argument("--param", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("evaluate", help="check a user's plan with the independent evaluator")
    p.add_argument("instance")
    p.add_argument("plan", help="plan JSON (placement: {'device': {op: device}} with optional 'start')")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("verify", help="re-check stored results: evaluator, objective, termination claims")
    p.add_argument("path", help="result JSON written by `solve --result`, or a benchmark database")
    p.add_argument("--instance", default=None, help="instance for a result file (default: the name stored in it)")
    p.add_argument("--require-version", action="store_true", help="accept only results that record their format version (record_version): one without is a problem, not an older record whose missing fields are only noted")
    p.add_argument(
        "--strict", action="store_true",
        help="count a problem every result whose bound and status rest on a formulation's own proof that verify cannot redo "
        "(a state search, a dynamic program, an interval search: it would take the solve again); by default such a result is "
        "listed as unredone and passes when its record holds",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object: ok, checked, problems, notes, unredone (the exit code is the same)")
    p.set_defaults(func=cmd_verify)
