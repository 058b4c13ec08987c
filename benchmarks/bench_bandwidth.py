"""Benchmark of the bandwidth (LIBRA) formulations on the bundled cases.

    python benchmarks/bench_bandwidth.py [--repeat 5] [--quick]
    python benchmarks/bench_bandwidth.py fast [--repeat 20] [--quick]
    python benchmarks/bench_bandwidth.py baselines [--backend cvxpy-SCS ...] [--quick]

``fast`` (issue 20): the formulation time of ``libra_perf`` and ``libra_perf_per_cost`` per
call, with the conic programs handed to Clarabel directly (``convex.DIRECT``, the default) and
through cvxpy's parametrized programs (the path before), in the same run: the first call of a
fresh process (a child that imports distplan, then times its first solve), the median warm
call, build (structure + values) and solver time summed over the run's solver calls, the
ratio cvxpy / direct, and the largest relative difference of the optima of the two paths.

``baselines``: ``libra_perf_per_cost`` against the baselines on its own objective, time x
cost (s x USD) as the independent evaluator (`distplan.models.bandwidth_eval`) computes it for
each plan, on every bundled LIBRA case and every installed convex backend (or those named):
the ratio baseline / libra_perf_per_cost for ``equal_bw``, ``proportional_to_traffic`` and the
time-optimal ``libra_perf`` plan, which of its candidates the formulation returned, and the
gap to its safe bound; a ratio below 1 (a baseline beats it) is marked LOSES and the exit
status is 1. tests/test_bandwidth_per_cost_baselines.py checks a few of the cases.

Otherwise four tables:

1. speed of ``libra_perf`` (end to end through ``distplan.solve``): the first solve of a
   case in this process ("cold": cvxpy compiles the parametrized program for that shape)
   and the median of repeated solves ("warm": the compiled program is reused), with the
   formulation build, canonicalization (hand-over) and solver times reported separately;
   the baseline is a straightforward cvxpy model of the same program (one
   ``t >= m * inv_pos(B_d)`` row per layer, phase and dimension, as LIBRA's Gurobi model
   has), built and solved with CLARABEL in the same run; ratio = baseline / ours;
2. ``libra_perf_per_cost``: cold and warm wall time and the number of convex solves;
3. quality: speedup of libra_perf over equal_bw (same constraints, hence the same total
   bandwidth), perf-per-cost gains, libra_perf vs libra_perf_lp agreement and the gaps to
   their safe (exact-arithmetic) bounds;
4. ``libra_perf_per_cost`` against the baselines on time x cost (the ``baselines`` table, on
   the default backend).

Times are wall-clock seconds on this machine, shown in ms; the machine may be shared, so
medians of repeats are the figures to compare.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distplan.api import solve  # noqa: E402
from distplan.instances import bundled, load_instance  # noqa: E402
from distplan.models.bandwidth_eval import collective_traffic, evaluate  # noqa: E402
from distplan.models.bandwidth_instance import BandwidthInstance  # noqa: E402
from distplan.models.bandwidth_plan import BandwidthPlan  # noqa: E402


def naive_cvxpy_seconds(inst: BandwidthInstance) -> tuple[float, float]:
    """Build + solve a straightforward (non-aggregated, non-parametrized) cvxpy model."""
    import cvxpy as cp

    t0 = time.perf_counter()
    D = inst.num_dims
    B = cp.Variable(D, nonneg=True)
    cons: list[Any] = []
    times: list[Any] = []
    for layer in inst.layers:
        for coll in layer.collectives:
            m = np.asarray(collective_traffic(coll.type, coll.bytes, coll.npus)) / 1e9  # GB
            if not (m > 0).any():
                continue
            t = cp.Variable(nonneg=True)
            for d in np.flatnonzero(m > 0):
                cons.append(t >= m[d] * cp.inv_pos(B[d]))
            times.append(t)
    names = [d.name for d in inst.dimensions]
    if inst.total_bandwidth is not None:
        sense, value = inst.total_bandwidth
        expr = cp.sum(B)
        cons.append(expr == value / 1e9 if sense == "==" else (expr <= value / 1e9 if sense == "<=" else expr >= value / 1e9))
    for con in inst.linear:
        expr = sum(c * B[names.index(n)] for n, c in con.coeffs)
        rhs = con.rhs / 1e9
        cons.append(expr == rhs if con.sense == "==" else (expr <= rhs if con.sense == "<=" else expr >= rhs))
    prob = cp.Problem(cp.Minimize(cp.sum(cp.hstack(times))), cons)
    prob.solve(solver="CLARABEL")
    total = time.perf_counter() - t0
    return total, float(prob.value)


def ms(x: float) -> str:
    return f"{x * 1e3:8.2f}"


_FIRST_CALL = """
import sys, time, warnings
warnings.simplefilter("ignore")
from distplan.formulations.bandwidth import convex, per_cost
from distplan.formulations.registry import RunContext
from distplan.instances import load_instance
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions
convex.DIRECT = sys.argv[3] == "direct"
inst = load_instance(sys.argv[1])
run = convex.run_libra_perf if sys.argv[2] == "libra_perf" else per_cost.run_libra_perf_per_cost
ctx = RunContext(get_backend("cvxpy-CLARABEL"), SolveOptions(), {})
t0 = time.perf_counter()
run(inst, ctx)
print(time.perf_counter() - t0)
"""


def first_call_seconds(name: str, formulation: str, path: str) -> float:
    """Seconds of the first formulation call in a fresh process (imports excluded, compiles included)."""
    import subprocess

    out = subprocess.run([sys.executable, "-c", _FIRST_CALL, name, formulation, path], capture_output=True, text=True, check=True,
                         cwd=str(Path(__file__).resolve().parents[1]))
    return float(out.stdout.strip().splitlines()[-1])


def bench_fast(names: list[str], repeat: int) -> None:
    """The fast convex path against cvxpy's, per case and formulation (see the module docstring)."""
    from distplan.formulations.bandwidth import convex, per_cost
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import get_backend
    from distplan.solvers.options import SolveOptions

    backend = get_backend("cvxpy-CLARABEL")
    print("== fast convex path: formulation ms per call; direct = Clarabel standard form, cvxpy = parametrized (DPP) ==")
    head = (f"{'case':<28} {'formulation':<20} {'first dir':>9} {'first cvx':>9} {'warm dir':>9} {'warm cvx':>9} "
            f"{'build dir':>9} {'solve dir':>9} {'build cvx':>9} {'solve cvx':>9} {'cvx/dir':>7} {'same opt':>9}")
    print(head)
    print("-" * len(head))
    worst: dict[str, list[float]] = {}
    for name in names:
        inst = load_instance(name)
        for formulation, run in (("libra_perf", convex.run_libra_perf), ("libra_perf_per_cost", per_cost.run_libra_perf_per_cost)):
            row: dict[str, Any] = {}
            for path in ("direct", "cvxpy"):
                convex.DIRECT = path == "direct"
                first = first_call_seconds(name, formulation, path)
                walls, builds, solves = [], [], []
                out = None
                for _ in range(repeat if formulation == "libra_perf" else max(3, repeat // 4)):
                    ctx = RunContext(backend, SolveOptions(), {})
                    t0 = time.perf_counter()
                    out = run(inst, ctx)
                    walls.append(time.perf_counter() - t0)
                    builds.append(sum(r.build_seconds + r.handover_seconds for r in ctx.solver_results))
                    solves.append(sum(r.solve_seconds for r in ctx.solver_results))
                assert out is not None and out.claimed_objective is not None
                row[path] = (first, statistics.median(walls), statistics.median(builds), statistics.median(solves), out.claimed_objective)
            convex.DIRECT = True
            d, c = row["direct"], row["cvxpy"]
            same = abs(d[4] - c[4]) / abs(c[4])
            worst.setdefault(formulation, []).extend([d[0], d[1], same])
            print(f"{name:<28} {formulation:<20} {ms(d[0])} {ms(c[0])} {ms(d[1])} {ms(c[1])} {ms(d[2])} {ms(d[3])} {ms(c[2])} {ms(c[3])} "
                  f"{c[1] / d[1]:7.1f} {same:9.1e}")
    for formulation, vals in worst.items():
        firsts, warms, sames = vals[0::3], vals[1::3], vals[2::3]
        print(f"{formulation}: max first {max(firsts) * 1e3:.1f} ms, max warm {max(warms) * 1e3:.2f} ms, "
              f"median warm {statistics.median(warms) * 1e3:.2f} ms, max optimum difference {max(sames):.1e}")


#: the plans libra_perf_per_cost is compared with on time x cost
PER_COST_BASELINES = ("equal_bw", "proportional_to_traffic", "libra_perf")


def time_x_cost(inst: BandwidthInstance, plan: BandwidthPlan) -> float:
    """Time x cost (s x USD) of ``plan``'s bandwidths, by the evaluator (whatever objective
    the plan was chosen for)."""
    check = evaluate(inst, BandwidthPlan(bandwidth=dict(plan.bandwidth), objective="time_x_cost"))
    assert check.feasible, check.violations
    return check.objective


def per_cost_vs_baselines(names: list[str], backends: list[str | None]) -> int:
    """The ``baselines`` table (module docstring); returns how many (case, backend, baseline)
    a baseline beats libra_perf_per_cost on."""
    from distplan.solvers.base import get_backend

    print("== libra_perf_per_cost vs baselines on time x cost (evaluator): ratio = baseline / libra_perf_per_cost ==")
    head = (f"{'case':<28} {'backend':<15} {'PxC s*USD':>12} " + " ".join(f"{b[:12]:>14}" for b in PER_COST_BASELINES)
            + f" {'safe gap':>9} {'ms':>8}  plan_from")
    print(head)
    print("-" * len(head))
    losses = 0
    worst = np.inf
    for backend in backends:
        if backend is not None and not get_backend(backend).available():
            print(f"{backend}: not installed here, skipped")
            continue
        for name in names:
            inst = load_instance(name)
            assert isinstance(inst, BandwidthInstance)
            t0 = time.perf_counter()
            res = solve(inst, "libra_perf_per_cost", backend)
            wall = time.perf_counter() - t0
            ours = time_x_cost(inst, res.plan)
            ratios = [time_x_cost(inst, solve(inst, b).plan) / ours for b in PER_COST_BASELINES]
            worst = min(worst, *ratios)
            marks = ["LOSES" if r < 1 else "" for r in ratios]
            losses += sum(1 for m in marks if m)
            cells = " ".join(f"{r:14.10f}" if not m else f"{r:9.6f} {m}" for r, m in zip(ratios, marks, strict=True))
            print(f"{name:<28} {res.backend:<15} {ours:12.6g} {cells} {res.gap or 0.0:9.2e} {ms(wall)}  {res.info.get('plan_from')}")
    print(f"least ratio {worst:.12f}; {losses} case(s) where a baseline beats libra_perf_per_cost")
    return losses


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "fast":
        fp = argparse.ArgumentParser(description="fast convex path (issue 20)")
        fp.add_argument("--repeat", type=int, default=20)
        fp.add_argument("--quick", action="store_true", help="3 cases only")
        fargs = fp.parse_args(argv[1:])
        cases = sorted(n for n, e in bundled().items() if e["kind"] == "bandwidth")
        warnings.simplefilter("ignore")
        bench_fast(cases[:3] if fargs.quick else cases, fargs.repeat)
        return 0
    if argv and argv[0] == "baselines":
        bp = argparse.ArgumentParser(description="libra_perf_per_cost against the baselines on time x cost")
        bp.add_argument("--backend", action="append", help="a convex backend (repeatable); default: every installed one")
        bp.add_argument("--quick", action="store_true", help="3 cases only")
        bargs = bp.parse_args(argv[1:])
        from distplan.solvers.base import all_backends

        cases = sorted(n for n, e in bundled().items() if e["kind"] == "bandwidth")
        chosen: list[str | None] = list(bargs.backend or [b.name for b in all_backends() if b.capabilities.convex and b.available()])
        warnings.simplefilter("ignore")
        return 1 if per_cost_vs_baselines(cases[:3] if bargs.quick else cases, chosen) else 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="3 cases only")
    args = ap.parse_args(argv)
    names = sorted(n for n, e in bundled().items() if e["kind"] == "bandwidth")
    if args.quick:
        names = names[:3]
    warnings.simplefilter("ignore")
    import cvxpy  # noqa: F401  (import time is not part of any solve)

    # warm the interpreter paths (not the per-shape compiled programs) on a throwaway instance
    solve(load_instance(names[0]), "equal_bw")

    print("== libra_perf: end to end (ms); cold = first solve of the case in this process ==")
    print(f"{'case':<28} {'naive cvxpy':>11} {'cold':>8} {'warm':>8} {'build':>8} {'canon':>8} {'solve':>8} {'naive/warm':>10}")
    perf: dict[str, Any] = {}
    for name in names:
        inst = load_instance(name)
        t0 = time.perf_counter()
        first = solve(inst, "libra_perf")
        cold = time.perf_counter() - t0
        walls, builds, canons, solves = [], [], [], []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            res = solve(inst, "libra_perf")
            walls.append(time.perf_counter() - t0)
            builds.append(res.timings["build_seconds"])
            canons.append(res.timings["handover_seconds"])
            solves.append(res.timings["solve_seconds"])
        naive = [naive_cvxpy_seconds(inst) for _ in range(max(2, args.repeat // 2))]
        naive_t = statistics.median(n[0] for n in naive)
        warm = statistics.median(walls)
        perf[name] = {"res": first, "cold": cold, "warm": warm, "naive_value": naive[0][1]}
        print(f"{name:<28} {ms(naive_t):>11} {ms(cold)} {ms(warm)} {ms(statistics.median(builds))} "
              f"{ms(statistics.median(canons))} {ms(statistics.median(solves))} {naive_t / warm:10.1f}")
    colds = [v["cold"] for v in perf.values()]
    warms = [v["warm"] for v in perf.values()]
    print(f"max cold {max(colds) * 1e3:.1f} ms, max warm {max(warms) * 1e3:.1f} ms (target 20 ms)")

    print("\n== libra_perf_per_cost: wall (ms) and convex solves ==")
    print(f"{'case':<28} {'cold':>8} {'warm':>8} {'solves':>7} {'gap':>9}")
    ppc: dict[str, Any] = {}
    for name in names:
        inst = load_instance(name)
        t0 = time.perf_counter()
        res = solve(inst, "libra_perf_per_cost")
        cold = time.perf_counter() - t0
        walls = []
        for _ in range(max(1, args.repeat // 2)):
            t0 = time.perf_counter()
            solve(inst, "libra_perf_per_cost")
            walls.append(time.perf_counter() - t0)
        ppc[name] = res
        print(f"{name:<28} {ms(cold)} {ms(statistics.median(walls))} {len(res.solver_results):7d} {res.gap or 0.0:9.2e}")

    print("\n== quality: speedup over equal_bw, perf-per-cost gain, conic vs LP ==")
    print(f"{'case':<28} {'T equal ms':>10} {'T perf ms':>10} {'speedup':>8} {'PxC gain':>8} {'vs perf':>8} "
          f"{'LIBRA PPC':>10} {'perf-lp rel':>11} {'LP gap':>9} {'safe gap':>9}")
    for name in names:
        inst = load_instance(name)
        p = perf[name]["res"]
        eq = solve(inst, "equal_bw")
        lp = solve(inst, "libra_perf_lp")
        best = ppc[name]
        assert eq.check is not None and p.check is not None
        t_eq = eq.check.details["time_seconds"]
        t_perf = p.check.details["time_seconds"]
        pc_eq = eq.check.details["time_x_cost"]
        pc_perf = p.check.details["time_x_cost"]
        rel = abs(p.objective - lp.objective) / lp.objective
        print(f"{name:<28} {t_eq * 1e3:10.3f} {t_perf * 1e3:10.3f} {t_eq / t_perf:8.3f} {pc_eq / best.objective:8.3f} "
              f"{pc_perf / best.objective:8.3f} {best.objective / 10:10.4g} {rel:11.2e} {lp.info['relative_gap']:9.2e} "
              f"{p.info.get('relative_gap', float('nan')):9.2e}")
    print("\nPxC gain = (time x cost of equal_bw) / (optimal time x cost); vs perf = same for the libra_perf allocation;")
    print("LIBRA PPC = optimal time_ns * cost_usd / 1e10 (the reference's PerfPerCostOpt objective).")
    print()
    return 1 if per_cost_vs_baselines(names, [None]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
