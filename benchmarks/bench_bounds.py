"""Bounds report: for every bundled instance, the best verified plan, the best proven bound
(with its source and grade) and the certified gap; per kind the median and max gap.

Every registered formulation of the instance's kind runs in its own process (`distplan
solve --json`) under ``--time-limit`` seconds, killed at twice that plus 30 s. Plans are
re-evaluated here by the kind's independent evaluator; a plan the evaluator rejects is not
counted. Plans and bounds are compared within one objective (LIBRA's time and its time x
cost are two). A bound above the best verified objective, by any amount (zero tolerance), is
reported as INVALID and makes the script exit with 1.

    python benchmarks/bench_bounds.py                        # every kind, 20 s per formulation
    python benchmarks/bench_bounds.py --kind placement --time-limit 60 --out bounds.json
    python benchmarks/bench_bounds.py --kind placement --instances gnmt --formulations placement_bounds,baechi_sct

Gap = (objective - bound) / objective. Times in seconds; objectives in the kind's unit.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import distplan
from distplan.instances import bundled, load_instance
from distplan.models.common import kind_spec


def run_one(name: str, formulation: str, time_limit: float, fold: bool) -> tuple[dict[str, Any] | None, str, float]:
    """One `distplan solve` in a child process: (result dict or None, status note, seconds)."""
    cmd = [sys.executable, "-m", "distplan", "solve", name, "-f", formulation, "--time-limit", str(time_limit), "--json"]
    if fold:
        cmd.append("--fold")
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=2 * time_limit + 30)
    except subprocess.TimeoutExpired:
        return None, "killed", time.perf_counter() - t0
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not proc.stdout.strip():
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        return None, f"exit {proc.returncode}: {last[:80]}", wall
    try:
        return json.loads(proc.stdout), "ok", wall
    except json.JSONDecodeError:
        return None, "bad json", wall


def verified_objective(inst: Any, result: dict[str, Any]) -> float | None:
    """The evaluator's objective of the result's plan (None: no plan or rejected)."""
    if not result.get("plan"):
        return None
    spec = kind_spec(inst.kind)
    try:
        plan = spec.plan_from_dict(inst, result["plan"])
        check = spec.evaluate(inst, plan)
    except Exception:  # noqa: BLE001 - a plan that cannot be read is not verified
        return None
    return float(check.objective) if check.feasible else None


def objective_of(result: dict[str, Any] | None, default: str) -> str:
    """What a result's objective and bounds measure (LIBRA's time and time x cost differ):
    plans and bounds are compared only within one objective."""
    return str((result or {}).get("objective_name") or default)


def instance_report(name: str, args: argparse.Namespace) -> dict[str, Any]:
    inst = load_instance(name)
    kind = inst.kind
    wanted = set(args.formulations.split(",")) if args.formulations else None
    runs: list[dict[str, Any]] = []
    primary = kind_spec(kind).objective_name
    best: dict[str, tuple[float, str]] = {}  # per objective: (value, by)
    bounds: list[dict[str, Any]] = []
    for form in distplan.formulations(kind):
        if wanted is not None and form.name not in wanted:
            continue
        for fold in (False, True) if (args.fold and kind == "placement" and not form.bound_only) else (False,):
            label = form.name + (" --fold" if fold else "")
            res, note, wall = run_one(name, form.name, args.time_limit, fold)
            obj = verified_objective(inst, res) if res is not None else None
            measure = objective_of(res, primary)
            runs.append({"formulation": label, "note": note, "seconds": wall, "objective": obj, "objective_name": measure, "bound": res.get("bound") if res else None})
            if obj is not None and (measure not in best or obj < best[measure][0]):
                best[measure] = (obj, label)
            for b in (res or {}).get("bounds", []) or []:
                if b.get("value") is not None and math.isfinite(b["value"]):
                    bounds.append({"value": float(b["value"]), "source": b.get("source", "?"), "grade": b.get("grade", res.get("bound_grade")), "by": label, "objective_name": measure})
            print(f"  {name:<34} {label:<28} {note:<10} {wall:7.1f} s  obj {_f(obj)}  bound {_f(res.get('bound') if res else None)}", file=sys.stderr, flush=True)
    invalid = [b for b in bounds if b["objective_name"] in best and b["value"] > best[b["objective_name"]][0]]
    measure = primary if primary in best or not best else next(iter(best))
    best_obj = best.get(measure)
    own = [b for b in bounds if b["objective_name"] == measure]
    best_b = max(own, key=lambda b: b["value"]) if own else None
    gap = None
    if best_obj is not None and best_b is not None:
        gap = max(0.0, best_obj[0] - best_b["value"]) / max(abs(best_obj[0]), 1e-12)
    return {
        "instance": name,
        "kind": kind,
        "objective_name": measure,
        "objective": best_obj[0] if best_obj else None,
        "plan_by": best_obj[1] if best_obj else None,
        "bound": best_b["value"] if best_b else None,
        "bound_source": best_b["source"] if best_b else None,
        "bound_grade": best_b["grade"] if best_b else None,
        "bound_by": best_b["by"] if best_b else None,
        "gap": gap,
        "invalid_bounds": invalid,
        "runs": runs,
    }


def _f(x: Any) -> str:
    return "-" if x is None else f"{x:.6g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kind", action="append", help="only these kinds (repeatable; default all)")
    parser.add_argument("--instances", default="", help="only instances whose name contains one of these comma-separated strings")
    parser.add_argument("--formulations", default="", help="only these comma-separated formulations")
    parser.add_argument("--time-limit", type=float, default=20.0, help="seconds per formulation run (default 20)")
    parser.add_argument("--fold", action="store_true", help="placement: also run every formulation with --fold")
    parser.add_argument("--out", type=Path, help="write the full report as JSON")
    args = parser.parse_args(argv)
    kinds = set(args.kind) if args.kind else None
    pats = [p for p in args.instances.split(",") if p]
    names = [n for n, e in sorted(bundled().items()) if (kinds is None or e["kind"] in kinds) and (not pats or any(p in n for p in pats))]
    reports = [instance_report(n, args) for n in names]
    print(f"{'instance':<34} {'kind':<12} {'best plan':>12} {'by':<22} {'best bound':>12} {'grade':<7} {'gap':>8}  bound source")
    for r in reports:
        gap = "-" if r["gap"] is None else f"{100 * r['gap']:.2f}%"
        bad = "  INVALID" if r["invalid_bounds"] else ""
        print(f"{r['instance']:<34} {r['kind']:<12} {_f(r['objective']):>12} {str(r['plan_by']):<22} {_f(r['bound']):>12} {str(r['bound_grade'] or '-'):<7} {gap:>8}  {r['bound_source'] or '-'} [{r['bound_by'] or '-'}]{bad}")
    print()
    print(f"{'kind':<12} {'instances':>9} {'with gap':>9} {'median gap':>11} {'max gap':>9} {'invalid':>8}")
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for r in reports:
        by_kind.setdefault(r["kind"], []).append(r)
    for kind, rs in sorted(by_kind.items()):
        gaps = [r["gap"] for r in rs if r["gap"] is not None]
        med = f"{100 * statistics.median(gaps):.2f}%" if gaps else "-"
        mx = f"{100 * max(gaps):.2f}%" if gaps else "-"
        print(f"{kind:<12} {len(rs):>9} {len(gaps):>9} {med:>11} {mx:>9} {sum(bool(r['invalid_bounds']) for r in rs):>8}")
    invalid = [(r["instance"], b) for r in reports for b in r["invalid_bounds"]]
    for name, b in invalid:
        print(f"INVALID: {name}: bound {b['value']!r} ({b['source']}, by {b['by']}) > best verified objective", file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(reports, indent=1, default=str))
    return 1 if invalid else 0


if __name__ == "__main__":
    sys.exit(main())
