"""Pipeline scheduling benchmarks: Tessel's repetend search, the whole-schedule MILP and
the classic schedules.

    python benchmarks/bench_pipeline.py [section ...] [--time-limit S] [--quick]

Sections (default: all):
  baselines  tessel vs the best classic schedule under the same memory (V/X/M, 4 and 8
             devices, 8-64 micro-batches, memory = p activations)
  tessel     Tessel's own placements (vshape, xshape, kshape, mshape, nnshape; 4 devices;
             memory 4, 5, 6, 20): period, proof, unrolled makespan for N = 16 and 64,
             wall and CPU seconds of the whole run (issue 16: every run under 1 s), search
             seconds
  small      pipeline_milp optimum vs tessel on 4 devices, N <= 8
  zb         Zero Bubble's ILP case (p = 4, F = B = W = 1, memory +2/-1/-1, limit 8)
  scaling    search time of tessel vs pipeline_milp for N = 8 ... 128 (build and solve
             times separately; speed as a ratio to tessel at N = 8)
  multi      memory 4 on mshape / nnshape: repetends of 2 and 3 micro-batches against the
             proven one-bubble period of one-micro-batch repetends (Tessel's)
  vs-baselines  tessel against every applicable classic schedule (GPipe, 1F1B, interleaved,
             ZB-H1/H2, ZB-V, V-Min, V-Half, V-ZB) on the V, X, M, K, NN and V2 (two chunks
             per device) shapes, 4 and 8 devices, N = 8, 16, 32, with and without the B/W
             split (F 1, B 3 / F 1, B 2, W 1), at 1F1B's peak memory and unlimited; at
             N <= 8 and p <= --milp-stages, pipeline_milp's result beside it (issue 16)

Times are wall seconds on this machine (shared; other jobs inflate them), with HiGHS's own
solve seconds next to them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import distplan  # noqa: E402
from distplan.errors import InfeasibleError, InputError  # noqa: E402
from distplan.formulations.pipeline.baselines import SCHEDULES  # noqa: E402
from distplan.formulations.pipeline.common import asap, orders_from_starts  # noqa: E402
from distplan.formulations.pipeline.modulo import cyclic_blocks, modulo_backtrack  # noqa: E402
from distplan.formulations.pipeline.repetend import Repetend  # noqa: E402
from distplan.formulations.pipeline.tessel import complete_phases  # noqa: E402
from distplan.formulations.registry import RunContext  # noqa: E402
from distplan.instances.pipelines import make_pipeline, tessel_case, zero_bubble_case  # noqa: E402
from distplan.models.pipeline import PipelineInstance, evaluate, make_plan  # noqa: E402
from distplan.solvers.base import SolveOptions, get_backend  # noqa: E402


def table(header: list[str], rows: list[list[Any]]) -> None:
    cells = [[str(h) for h in header]] + [[_fmt(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(header))]
    for k, r in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(r, width)))
        if k == 0:
            print("  ".join("-" * w for w in width))
    print(flush=True)


def _fmt(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.3f}" if abs(x) < 100 and not float(x).is_integer() else f"{x:g}"
    return str(x)


def best_baseline(inst: PipelineInstance) -> tuple[float, str]:
    best = (math.inf, "-")
    for name in SCHEDULES:
        try:
            r = distplan.solve(inst, formulation=name)
        except (InfeasibleError, InputError):
            continue
        if r.objective < best[0]:
            best = (r.objective, name)
    return best


def timed(inst: PipelineInstance, formulation: str, **kw: Any) -> tuple[distplan.Result, float]:
    t0 = time.perf_counter()
    res = distplan.solve(inst, formulation=formulation, **kw)
    return res, time.perf_counter() - t0


def timed_cpu(inst: PipelineInstance, formulation: str, **kw: Any) -> tuple[distplan.Result, float, float]:
    """The result, its wall seconds and the process's CPU seconds (this process and its
    children: a solver run in isolation counts)."""
    c0 = _cpu()
    res, wall = timed(inst, formulation, **kw)
    return res, wall, _cpu() - c0


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def solve_seconds(res: distplan.Result) -> float:
    return float(sum(r.solve_seconds for r in res.solver_results))


def section_baselines(args: argparse.Namespace) -> None:
    print("== tessel vs the best classic schedule (memory = p activations; F 1 s, B 3 s) ==")
    rows = []
    ns = [8, 16] if args.quick else [8, 16, 32, 64]
    for shape in ("v", "x", "m"):
        for p in (4, 8):
            for n in ns:
                inst = make_pipeline(shape, p, n, memory_capacity=float(p))
                base, name = best_baseline(inst)
                one = distplan.solve(inst, formulation="1f1b").objective
                res, wall = timed(inst, "tessel", time_limit=args.time_limit)
                rows.append([shape, p, n, name, base, one, res.objective, round(res.objective / base, 3), res.plan.info["period"], res.plan.info.get("phases", "warm-up/cool-down"), round(wall, 2)])
    table(["shape", "p", "N", "best baseline", "its time", "1f1b", "tessel", "tessel/best", "period", "completion", "wall s"], rows)


#: Tessel's own Z3 search on its placements, measured on this machine (zhiqi-0/Tessel at
#: 44f72c35, z3-solver 5.4.0, `Composer.compose_n` as examples/simulator/cases_tessel.py
#: runs it with nmicros v 4, x 3, k 3, m 6, nn 6; load 0.2-3): (shape, memory) -> period,
#: makespan N=16, makespan N=64 (`SchedPlan.unroll(N).nsteps`), search seconds (two runs).
TESSEL_Z3 = {
    **{("v", m): (4, 85, 277, "0.6-1.2") for m in (4, 5, 6, 20)},
    **{("x", m): (8, 142, 526, "5.6-8.5") for m in (4, 5, 6, 20)},
    **{("k", m): (6, 103, 391, "1.8-2.1") for m in (4, 5, 6, 20)},
    ("m", 4): (7, 121, 457, "34-48"),
    **{("m", m): (6, 108, 396, "30-45") for m in (5, 6, 20)},
    ("nn", 4): (9, 153, 585, "172-186"),
    ("nn", 5): (9, 152, 584, "202-217"),
    ("nn", 6): (8, 140, 524, "149-190"),
    ("nn", 20): (8, 140, 524, "172-190"),
}


def section_tessel(args: argparse.Namespace) -> None:
    print("== Tessel's placements (4 devices; F 1 / +1, B 3 / -1, full-shard 1 / 0) ==")
    distplan.solve(tessel_case("v", 4, 4), formulation="tessel")  # imports and solver start-up are not the search's
    rows = []
    mems = [4, 20] if args.quick else [4, 5, 6, 20]
    for shape in ("v", "x", "k", "m", "nn"):
        for mem in mems:
            row: list[Any] = [f"{shape}shape", mem]
            inst = tessel_case(shape, mem, 16)
            busy = float(inst.device_work().max())
            for n in (16, 64):
                res, wall, cpu = timed_cpu(tessel_case(shape, mem, n), "tessel", time_limit=args.time_limit)
                info = res.plan.info
                if n == 16:
                    row += [busy, info["period"], info["period_bound"], "yes" if info["period_proven_optimal"] else "no", info["offsets"]]
                row += [res.objective, round(wall, 2), round(cpu, 2), round(info["repetend_search_seconds"], 2)]
            ref = TESSEL_Z3.get((shape, mem))
            row += list(ref) if ref else ["-"] * 4
            rows.append(row)
    table(
        ["placement", "mem", "busy", "period", "bound", "proven", "K", "N=16", "wall s", "cpu s", "search s", "N=64", "wall s", "cpu s", "search s", "Tessel period", "Tessel N=16", "Tessel N=64", "Tessel search s"],
        rows,
    )


def section_small(args: argparse.Namespace) -> None:
    print("== pipeline_milp optimum vs tessel, 4 devices, memory 4 ==")
    rows = []
    for shape in ("v", "x", "m", "k", "nn"):
        for n in (4, 8):
            inst = make_pipeline(shape, 4, n, memory_capacity=4.0)
            m, mwall = timed(inst, "pipeline_milp", time_limit=args.time_limit)
            t, twall = timed(inst, "tessel", time_limit=args.time_limit)
            gap = 100 * (t.objective / m.objective - 1)
            rows.append([shape, n, m.objective, m.bound, m.status.value, round(mwall, 1), m.info["model"]["kind"], t.objective, f"{gap:+.1f}%", round(twall, 2)])
    table(["shape", "N", "milp", "bound", "status", "milp s", "model", "tessel", "tessel vs milp", "tessel s"], rows)


def section_zb(args: argparse.Namespace) -> None:
    print("== Zero Bubble's ILP case: p=4, F=B=W=1, memory +2/-1/-1, limit 8, longest stage span ==")
    rows = []
    cases = [(0.0, 4), (0.0, 8), (0.0, 12), (1.0, 12)]
    for comm, m in cases:
        inst = zero_bubble_case(micro_batches=m, comm_delay=comm)
        base = {n: distplan.solve(inst, formulation=n).objective for n in ("1f1b", "zb_h1", "zb_h2")}
        for model in ("auto", "time_indexed", "disjunctive"):
            res, wall = timed(inst, "pipeline_milp", model=model, warm_start="baselines", time_limit=args.time_limit)
            rows.append([comm, m, base["1f1b"], base["zb_h1"], base["zb_h2"], model, res.objective, res.bound, res.status.value, round(wall, 2), round(solve_seconds(res), 2)])
    table(["comm", "m", "1f1b", "zb_h1", "zb_h2", "model", "milp", "bound", "status", "wall s", "solve s"], rows)


def section_scaling(args: argparse.Namespace) -> None:
    print("== search time vs N: tessel (repetend search, N-independent) vs pipeline_milp (mshape, memory 4) ==")
    rows = []
    base = None
    ns = [8, 16, 32] if args.quick else [8, 16, 32, 64, 128]
    for n in ns:
        inst = tessel_case("m", 4, n)
        t, twall = timed(inst, "tessel", time_limit=args.time_limit)
        m, mwall = timed(inst, "pipeline_milp", warm_start="baselines", time_limit=args.time_limit)
        search = float(t.plan.info["repetend_search_seconds"])
        base = base or search
        mres = [r for r in m.solver_results if r.extra.get("model", {}).get("name", "").endswith(("milp", "time-indexed"))]
        mr = mres[-1] if mres else m.solver_results[-1]
        rows.append(
            [n, round(search, 3), round(search / base, 2), round(twall, 2), t.objective, round(mr.build_seconds, 2), round(mr.solve_seconds, 2), round(mwall / base, 1), m.objective, m.bound, m.status.value]
        )
    table(["N", "tessel search s", "x N=8", "tessel wall s", "tessel", "milp build s", "milp solve s", "milp wall / tessel N=8", "milp", "bound", "status"], rows)


def section_multi(args: argparse.Namespace) -> None:
    print("== memory 4: repetends of u micro-batches (backtracking search, K = 5, 1.5M placements per period) ==")
    rows = []
    cases = [("m", 4)] if args.quick else [("m", 4), ("nn", 4), ("nn", 5)]
    for shape, mem in cases:
        inst16 = tessel_case(shape, mem, 16)
        busy = int(inst16.device_work().max())
        single = distplan.solve(inst16, formulation="tessel").plan.info
        one = int(single["period"])
        for u in (2, 3):
            cy = cyclic_blocks(inst16, u)
            found, tried, t0 = None, [], time.perf_counter()
            for period in range(u * busy, u * one):  # periods that beat u one-micro-batch repetends
                sigma, _ = modulo_backtrack(cy, inst16, 5, period, node_limit=1_500_000)
                tried.append(period)
                if sigma is not None:
                    found = Repetend(sigma, float(period), None, False, 5, u, 0.0)
                    break
            wall = time.perf_counter() - t0
            row: list[Any] = [f"{shape}shape", mem, f"{one} ({'yes' if single['period_proven_optimal'] else 'no'})", u, found.period if found else "-", f"{found.period / u:.2f}" if found else "-", round(wall, 1)]
            for n in (16, 64):
                if found is None:
                    row.append("-")
                    continue
                inst = tessel_case(shape, mem, n)
                ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=30))
                start, _ = complete_phases(inst, found, ctx, 2.0)
                check = evaluate(inst, make_plan(inst, asap(inst, orders_from_starts(inst, start))))
                row.append(check.objective if check.feasible else "invalid")
            row += [TESSEL_Z3[(shape, mem)][1], TESSEL_Z3[(shape, mem)][2]]
            rows.append(row)
    table(["placement", "mem", "period u=1 (proven)", "u", "period u", "per micro-batch", "search s", "N=16", "N=64", "Tessel N=16", "Tessel N=64"], rows)
    print("A '-' is not a proof: the backtracking search is incomplete (it found nothing within its budget).\n")


def vs_instance(shape: str, p: int, n: int, split: bool, memory: str) -> PipelineInstance:
    """The vs-baselines case; ``memory`` is "1f1b" (the 1F1B plan's largest device peak at
    unlimited memory) or "unlimited"."""
    kw: dict[str, Any] = {"forward_time": 1.0, "backward_time": 2.0, "weight_time": 1.0} if split else {"forward_time": 1.0, "backward_time": 3.0}
    inst = make_pipeline(shape, p, n, **kw)
    if memory == "unlimited":
        return inst
    chk = evaluate(inst, distplan.solve(inst, formulation="1f1b").plan)
    peak = max(d["peak_memory"] for d in chk.details["devices"].values())
    return inst.with_(memory_capacity=float(peak))


def section_vs_baselines(args: argparse.Namespace) -> None:
    print("== tessel vs every applicable baseline (makespan, s; F 1 B 3, or F 1 B 2 W 1 with the split) ==")
    header = ["shape", "p", "N", "B/W", "memory", "best baseline", "its time", "tessel", "tessel<=best", "tessel completion", "wall s", "milp", "bound", "status", "tessel vs milp"]
    print("  ".join(header), flush=True)
    rows = []
    ns = [int(x) for x in args.ns.split(",")] if args.ns else ([8, 16] if args.quick else [8, 16, 32])
    stages = [int(x) for x in args.stages.split(",")]
    losses = 0
    for shape in ("v", "x", "m", "k", "nn", "v2"):
        for p in stages:
            for n in ns:
                for split in (False, True):
                    for memory in ("1f1b", "unlimited"):
                        inst = vs_instance(shape, p, n, split, memory)
                        base, name = best_baseline(inst)
                        res, wall = timed(inst, "tessel", time_limit=args.time_limit)
                        row: list[Any] = [shape, p, n, "yes" if split else "no", memory, name, base, res.objective, "ok" if res.objective <= base + 1e-9 else "LOSS", res.plan.info["completion"], round(wall, 2)]
                        losses += res.objective > base + 1e-9
                        if n <= 8 and p <= args.milp_stages:
                            m = distplan.solve(inst, formulation="pipeline_milp", time_limit=args.time_limit)
                            row += [m.objective, m.bound, m.status.value, f"{100 * (res.objective / m.objective - 1):+.1f}%"]
                        else:
                            row += ["-"] * 4
                        print("  ".join(_fmt(c) for c in row), flush=True)
                        rows.append(row)
    print()
    table(header, rows)
    print(f"tessel worse than a baseline in {losses} of {len(rows)} cases\n")


SECTIONS = {"baselines": section_baselines, "tessel": section_tessel, "small": section_small, "zb": section_zb, "scaling": section_scaling, "multi": section_multi, "vs-baselines": section_vs_baselines}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sections", nargs="*", help=f"any of: {', '.join(SECTIONS)} (default: all)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds per MILP solve (pipeline_milp)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes")
    parser.add_argument("--milp-stages", type=int, default=4, help="vs-baselines: run pipeline_milp at N <= 8 up to this many devices")
    parser.add_argument("--stages", default="4,8", help="vs-baselines: device counts, e.g. 4,8")
    parser.add_argument("--ns", default="", help="vs-baselines: micro-batch counts, e.g. 8,16,32 (default: 8,16,32; --quick 8,16)")
    args = parser.parse_args(argv)
    unknown = [s for s in args.sections if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section {unknown[0]!r}; use any of: {', '.join(SECTIONS)}")
    for name in args.sections or list(SECTIONS):
        SECTIONS[name](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
