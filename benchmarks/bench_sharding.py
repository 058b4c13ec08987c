"""Sharding benchmark: search time of Alpa's ILP vs TAP folding, plan costs, LP integrality.

    python benchmarks/bench_sharding.py            # full run (a few minutes on 2 cores)
    python benchmarks/bench_sharding.py --quick    # 12 and 96 layers only, fewer repeats

Tables:
1. Search time of ``alpa_ilp`` and ``tap`` on GPT-3 175B shapes (hidden 12288, 96 heads,
   seq 2048, batch 8) with 12, 24, 48, 96 layers on 8 devices (1-D) and 64 devices (8x8),
   memory not binding. Search = the formulation's run (cost graph / folding + model build
   + solve + unfold), split into build and solve seconds (every solver call of the run);
   ``tap`` is the exact walk program (its bound is the program's own; the lower-bound LP
   ``certify`` belongs to the shared fold, ``exact=False``, and would be timed apart). Variables before
   and after folding. Speed as ratios within the same run; best of ``--repeat`` runs.
2. Iteration time of the ``data_parallel``, ``megatron``, ``alpa_ilp`` and ``tap`` plans
   (independent evaluator) for GPT-2 XL and a GPT-3-shaped model on 8 devices.
3. How often the LP relaxation of Alpa's ILP is integral on the bundled instances.
4. ``--only exact``: exact folding under memory. ``tap`` (a walk over the boundary states
   of the repeated layers, distplan/formulations/sharding/chainfold.py) against
   ``alpa_ilp`` in the same run, both with a relative MIP gap of 1e-9: the bundled sharding
   instances, and small GPTs (hidden 256, 4 heads, seq 128, batch 8) of 4 to 24 layers on
   meshes of 4 and 8 devices, homogeneous or heterogeneous (one axis at 25 GB/s), with a
   budget a fraction of the way from the least memory to the unconstrained optimum's
   (0.05 and 0.3: binding; 1.0: not binding). "same" = objectives equal within 1e-6
   relative. Wall and CPU seconds (this process and its children) are medians of up to 3
   runs; a run's CPU includes its solver threads' spinning after it returns (read after a
   short sleep, so that it is not charged to the next run); the ratios alpa/tap are summarized over the cases of 24 layers or more.
   Each run starts after that sleep, with its code evicted from the caches (a cold start:
   about +1 ms on a tap solve of 2-5 ms). ``--batch K``: instead, the mean per solve of K
   solves back to back (the first cold, the others warm; every CPU second counted), the
   median of 3 such batches, alpa_ilp's and tap's taken in turn (`paired_batches`: one
   batch disturbed by another process on the host moves no ratio). ``--batch-seconds 0.2``
   also: each batch runs on until it has taken 0.2 s, as ``python -m timeit`` sizes its
   loops (a tap solve of 4 ms then runs ~50 times a batch, alpa_ilp's of 90 ms 5 times):
   steady-state speed, the cold first solve of a batch (+1.5-2.5 ms for tap after the
   sleep) weighing as little for either. ``--exact-layers 24 48``: the GPTs of those layer
   counts only (the bundled instances still run).
5. ``--only llama``: tap on the Llama-3 8B sharding instance (issue 20).
6. ``--only phases``: where a whole ``distplan.solve(inst, "tap")`` spends its CPU time on
   the 24-layer GPTs of table 4 (no alpa_ilp run): skeleton, folding and chains with
   their node cost tables (tap's exact path: consecutive blocks first), the dynamic program (explicit graph, edge tables and fronts
   included), the plan's strategy names, the evaluator and the solver-free bound; best of
   5 batches of at least 50 ms each, in milliseconds.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import distplan  # noqa: E402
from distplan.errors import InfeasibleError  # noqa: E402
from distplan.formulations.registry import RunContext, get_formulation  # noqa: E402
from distplan.instances import bundled  # noqa: E402
from distplan.instances.transformer import gpt2_xl, gpt3_175b  # noqa: E402
from distplan.models.sharding import evaluate  # noqa: E402
from distplan.solvers.base import SolveOptions, get_backend  # noqa: E402


def timed_run(formulation: str, layers: int, mesh: Any, backend: str, time_limit: float, params: dict[str, Any]) -> dict[str, Any]:
    """One run of a formulation on a fresh instance; seconds and model sizes."""
    inst = gpt3_175b(batch=8, mesh=mesh, layers=layers, memory=1e15)
    form = get_formulation("sharding", formulation)
    ctx = RunContext(get_backend(backend), SolveOptions(time_limit=time_limit), {**form.params, **params})
    t0 = time.perf_counter()
    out = form.run(inst, ctx)
    wall = time.perf_counter() - t0
    certify = float(out.info.get("certify_seconds", 0.0))
    check = evaluate(inst, out.plan)
    if not ctx.solver_results:  # tap's dynamic program (chain_dp.py): no solver call, exhaustive
        return {
            "search": wall,
            "build": wall,
            "solve": 0.0,
            "certify": 0.0,
            "variables": out.info.get("variables_folded"),
            "unfolded": out.info.get("variables_unfolded"),
            "objective": check.objective,
            "termination": "optimal" if out.proven_optimal else "finished",
        }
    main = ctx.solver_results[-1]
    solve = sum(r.handover_seconds + r.solve_seconds for r in ctx.solver_results)
    if certify:  # the shared fold's bound LP is the last call, timed apart
        main = ctx.solver_results[0]
        solve = main.handover_seconds + main.solve_seconds
    return {
        "search": wall - certify,
        "build": wall - certify - solve,
        "solve": solve,
        "certify": certify,
        "variables": main.extra.get("model", {}).get("variables"),
        "unfolded": out.info.get("variables_unfolded", main.extra.get("model", {}).get("variables")),
        "objective": check.objective,
        "termination": main.termination.value,
    }


def best_of(n: int, *args: Any) -> dict[str, Any]:
    runs = [timed_run(*args) for _ in range(n)]
    return min(runs, key=lambda r: r["search"])


def search_table(layer_counts: list[int], repeat: int, backend: str, time_limit: float) -> list[str]:
    lines = [f"## 1. Search time, GPT-3 175B shapes, memory not binding (seconds; best of {repeat} for alpa_ilp, {3 * repeat} for tap)", ""]
    header = (
        f"{'mesh':>5} {'layers':>6} | {'alpa build':>10} {'alpa solve':>10} {'alpa total':>10} {'vars':>8} {'LP-first':>8} | "
        f"{'tap build':>9} {'tap solve':>9} {'tap total':>9} {'vars':>6} {'(bound LP)':>10} | {'alpa/tap':>8} {'LP-first/tap':>12} {'tap/tap12':>9} {'same obj':>8}"
    )
    lines += [header, "-" * len(header)]
    # warm-up (imports, first HiGHS call)
    timed_run("tap", 2, 8, backend, time_limit, {})
    for mesh in (8, (8, 8)):
        tap12 = None
        for layers in layer_counts:
            alpa = best_of(max(1, repeat - 1) if layers >= 48 else repeat, "alpa_ilp", layers, mesh, backend, time_limit, {})
            alpa_lp = best_of(max(1, repeat - 1) if layers >= 48 else repeat, "alpa_ilp", layers, mesh, backend, time_limit, {"lp_first": True})
            tap = best_of(3 * repeat, "tap", layers, mesh, backend, time_limit, {"certify": True})
            if tap12 is None:
                tap12 = tap["search"]
            same = abs(tap["objective"] - alpa["objective"]) <= 1e-6 * alpa["objective"]
            m = "x".join(map(str, mesh)) if isinstance(mesh, tuple) else str(mesh)
            lines.append(
                f"{m:>5} {layers:>6} | {alpa['build']:>10.3f} {alpa['solve']:>10.3f} {alpa['search']:>10.3f} {alpa['variables']:>8} {alpa_lp['search']:>8.3f} | "
                f"{tap['build']:>9.3f} {tap['solve']:>9.3f} {tap['search']:>9.3f} {tap['variables']:>6} {tap['certify']:>10.3f} | "
                f"{alpa['search'] / tap['search']:>8.1f} {alpa_lp['search'] / tap['search']:>12.1f} {tap['search'] / tap12:>9.2f} {'yes' if same else 'NO':>8}"
            )
            if alpa["termination"] != "optimal":
                lines.append(f"      alpa_ilp stopped: {alpa['termination']}")
    lines.append("")
    lines.append("vars = variables of the ILP handed to the solver (alpa: unfolded; tap: of its folded program, which")
    lines.append("its dynamic program solves without a solver: tap's time is then all build, its solve 0).")
    lines.append("alpa = alpa_ilp as Alpa runs it (the ILP); LP-first = alpa_ilp with lp_first=True (its LP")
    lines.append("relaxation first, the ILP only when the LP is fractional), the fastest exact run of the")
    lines.append("unfolded problem; tap solves its folded LP first by default.")
    return lines


def comparison_table(backend: str) -> list[str]:
    cases = [
        ("GPT-2 XL, 8x A100-40GB, batch 8", gpt2_xl(batch=8, mesh=8)),
        ("GPT-3-shaped 4 layers, 8x A100-80GB, batch 8", gpt3_175b(batch=8, mesh=8, layers=4)),
        ("GPT-3-shaped 8 layers, 8x A100-80GB, batch 8", gpt3_175b(batch=8, mesh=8, layers=8)),
    ]
    lines = ["## 2. Plan cost (iteration time in ms per the evaluator; memory GB per device)", ""]
    header = f"{'model':<46} " + " ".join(f"{f:>22}" for f in ("data_parallel", "megatron", "alpa_ilp", "tap"))
    lines += [header, "-" * len(header)]
    for label, inst in cases:
        cells = []
        for f in ("data_parallel", "megatron", "alpa_ilp", "tap"):
            try:
                r = distplan.solve(inst, f, backend=None if f in ("data_parallel", "megatron") else backend, time_limit=300)
                assert r.objective is not None and r.check is not None
                cells.append(f"{r.objective * 1e3:9.2f} ms {r.check.details['memory_bytes'] / 1e9:6.1f} GB")
            except InfeasibleError as exc:
                missing = float(exc.details.get("missing_bytes", 0.0))  # type: ignore[arg-type]
                cells.append(f"OOM (+{missing / 1e9:.0f} GB)" if missing else "infeasible")
        lines.append(f"{label:<46} " + " ".join(f"{c:>22}" for c in cells))
    return lines


def lp_table(backend: str) -> list[str]:
    lines = ["## 3. LP relaxation of Alpa's ILP on the bundled sharding instances", ""]
    integral = total = 0
    for name, entry in sorted(bundled().items()):
        if entry["kind"] != "sharding":
            continue
        r = distplan.solve(name, "alpa_ilp", backend=backend, lp_first=True, time_limit=300)
        lp = r.info.get("lp_relaxation", {})
        assert r.objective is not None
        total += 1
        integral += bool(lp.get("integral"))
        lines.append(f"{name:<26} LP {lp.get('objective', float('nan')) * 1e3:10.4f} ms  ILP {r.objective * 1e3:10.4f} ms  integral: {lp.get('integral')}")
    lines.append(f"integral on {integral} of {total} instances")
    return lines


def tight_instance(layers: int, mesh: Any, hetero: bool, frac: float) -> Any:
    """A small GPT whose memory budget is ``frac`` of the way from its least memory (every
    op at its most memory-saving strategy) to the memory of its unconstrained optimum."""
    from distplan.formulations.sharding.alpa_ilp import memory_shortfall
    from distplan.formulations.sharding.costgraph import build_cost_graph
    from distplan.instances.transformer import transformer

    axes = 1 if isinstance(mesh, int) else len(mesh)
    bandwidth = ((25e9,) + (240e9,) * (axes - 1)) if hetero else None
    m = "x".join(map(str, mesh)) if isinstance(mesh, tuple) else str(mesh)
    name = f"gpt-l{layers}-mesh{m}{'-hetero' if hetero else ''}-mem{frac:g}"
    base = transformer(layers, 256, 4, 128, 8, 1000, mesh=mesh, device="V100", memory=1e15, bandwidth=bandwidth, name=name)
    least = memory_shortfall(build_cost_graph(base))[0]
    free = distplan.solve(base, "alpa_ilp", mip_gap=1e-9).check
    assert free is not None
    return base.with_memory(least + frac * (free.details["memory_bytes"] - least))


#: seconds to sleep after each timed solve before reading its CPU time: HiGHS's worker
#: threads keep spinning after a solve returns (4-7.5 ms of CPU within ~6 ms of wall
#: after every alpa_ilp solve on the 24-layer GPTs, measured on 2 cores), so that CPU is
#: the solve's own; read at once, it was charged to the next solve timed (tap's first run
#: after alpa_ilp's last), whose wall time it also slowed on the shared cores
SETTLE_SECONDS = 0.05


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished children (isolated solver runs)."""
    child = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + child.ru_utime + child.ru_stime


def timed_solve(inst: Any, formulation: str, backend: str, time_limit: float, repeat: int = 3) -> dict[str, Any]:
    """Median wall and CPU seconds of up to ``repeat`` solves (one when a solve takes
    more than 5 s), with the last run's objective, status and method. A solve's CPU
    includes its solver threads' spinning after it returns (`SETTLE_SECONDS`); its wall
    time ends when it returns."""
    walls, cpus, solves = [], [], []
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), cpu_seconds()
        r = distplan.solve(inst, formulation, backend=backend, time_limit=time_limit, mip_gap=1e-9)
        walls.append(time.perf_counter() - t0)
        time.sleep(SETTLE_SECONDS)  # (sleeping costs this thread ~0.01 ms of CPU)
        cpus.append(cpu_seconds() - c0)
        solves.append(r.timings["handover_seconds"] + r.timings["solve_seconds"])
        if walls[-1] > 5.0:
            break
    wall, cpu, solve = (float(np.median(x)) for x in (walls, cpus, solves))
    return {"wall": wall, "cpu": cpu, "build": wall - solve, "solve": solve, "objective": r.objective, "status": r.termination.value, "rounds": r.info.get("rounds"), "method": r.info.get("method", "")}


def batch_solve(inst: Any, formulation: str, backend: str, time_limit: float, batch: int, least_seconds: float = 0.0) -> dict[str, Any]:
    """Mean wall and CPU seconds per solve of ``batch`` solves run back to back, then one
    `SETTLE_SECONDS` sleep whose CPU (solver threads still spinning) is the batch's: the
    timeit way. The first solve starts after the previous measurement's sleep, its code and
    data evicted from the caches while idle (on this 2-core VM a warm 2.0 ms tap solve
    takes 3.1 ms right after a 50 ms sleep, and a busy loop first does not help: running
    the same code does); the others run warm. Every CPU second of the batch is counted.
    ``least_seconds``: more solves, until the batch has taken that long (wall), as
    ``python -m timeit`` sizes its loops (at least 0.2 s): the cold first solve then weighs
    as little for a solve of milliseconds as for one of a tenth of a second."""
    t0, c0, runs = time.perf_counter(), cpu_seconds(), 0
    while (runs < batch or time.perf_counter() - t0 < least_seconds) and (runs == 0 or time.perf_counter() - t0 <= 5.0):  # (one run of a slow solve)
        r = distplan.solve(inst, formulation, backend=backend, time_limit=time_limit, mip_gap=1e-9)
        runs += 1
    wall = (time.perf_counter() - t0) / runs
    time.sleep(SETTLE_SECONDS)
    cpu = (cpu_seconds() - c0) / runs
    return {"wall": wall, "cpu": cpu, "objective": r.objective, "status": r.termination.value, "method": r.info.get("method", "")}


#: batches per formulation and case of `paired_batches` (their median is reported)
BATCH_REPEATS = 3


def paired_batches(inst: Any, backend: str, time_limit: float, batch: int, least_seconds: float = 0.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """alpa_ilp's and tap's `batch_solve` taken in turn `BATCH_REPEATS` times (once when a
    batch of alpa_ilp takes more than 5 s), each summarized by the median of its batches'
    wall and CPU seconds per solve: a batch slowed by another process on the shared host
    (once +9 ms on a 4 ms tap solve, seen in a single batch) moves the median of three no
    more than a typical batch."""
    runs: dict[str, list[dict[str, Any]]] = {"alpa_ilp": [], "tap": []}
    for _ in range(BATCH_REPEATS):
        for name in runs:
            runs[name].append(batch_solve(inst, name, backend, time_limit, batch, least_seconds))
        if runs["alpa_ilp"][-1]["wall"] * batch > 5.0:
            break
    out = []
    for got in runs.values():
        median = {key: float(np.median([r[key] for r in got])) for key in ("wall", "cpu")}
        out.append({**got[-1], **median})
    return out[0], out[1]


def layers_of(inst: Any) -> int:
    """Transformer layers of an instance (ops named ``l<i>.*``)."""
    return len({op.name.split(".")[0] for op in inst.ops if re.match(r"l\d+\.", op.name)})


def summary(label: str, ratios: list[float]) -> str:
    if not ratios:
        return f"{label}: no cases"
    return f"{label}: min {min(ratios):.1f}, geometric mean {float(np.exp(np.mean(np.log(ratios)))):.1f}, max {max(ratios):.1f} ({len(ratios)} cases)"


def exact_table(quick: bool, backend: str, time_limit: float, batch: int = 0, least_seconds: float = 0.0, layer_counts: list[int] | None = None) -> list[str]:
    how = f"mean of {batch} solves back to back (`batch_solve`), median of {BATCH_REPEATS} batches" if batch else "median of up to 3 runs"
    if batch and least_seconds:
        how = f"mean of at least {batch} solves and {least_seconds:g} s back to back (`batch_solve`), median of {BATCH_REPEATS} batches"
    lines = [f"## 4. Exact folding under memory: tap vs alpa_ilp (seconds, {how}; MIP gap 1e-9 for both)", ""]
    lines.append(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    header = (
        f"{'instance':<34} {'L':>3} | {'alpa wall':>9} {'alpa cpu':>8} {'ended':>10} | {'tap wall':>8} {'tap cpu':>7} {'method':>6} | "
        f"{'wall x':>7} {'cpu x':>7} {'tap - alpa (rel)':>16} {'same':>4}"
    )
    lines += [header, "-" * len(header)]
    cases: list[tuple[str, Any]] = []
    for name, entry in sorted(bundled().items()):
        if entry["kind"] == "sharding" and not (quick and name.startswith("gpt3-175b")):
            cases.append((name, distplan.load_instance(name)))
    if layer_counts is None:
        layer_counts = [4, 24] if quick else [4, 8, 16, 24]
    meshes: list[tuple[Any, bool]] = [(4, False), (8, False), (4, True), (8, True)] if quick else [(4, False), ((2, 2), True), (8, False), ((2, 4), True), (4, True), (8, True)]
    for layers in layer_counts:
        for mesh, hetero in meshes:
            for frac in (0.05, 0.3, 1.0):
                inst = tight_instance(layers, mesh, hetero, frac)
                cases.append((inst.name, inst))
    wall_24: list[float] = []
    cpu_24: list[float] = []
    worst = 0.0
    for name, inst in cases:
        try:
            if batch:
                alpa, tap = paired_batches(inst, backend, time_limit, batch, least_seconds)
            else:
                alpa = timed_solve(inst, "alpa_ilp", backend, time_limit)
                tap = timed_solve(inst, "tap", backend, time_limit)
        except InfeasibleError:
            lines.append(f"{name:<34} | infeasible")
            continue
        rel = (tap["objective"] - alpa["objective"]) / alpa["objective"]
        worst = max(worst, abs(rel))
        ratio, cpu_ratio = alpa["wall"] / tap["wall"], alpa["cpu"] / tap["cpu"]
        layers = layers_of(inst)
        if layers >= 24:
            wall_24.append(ratio)
            cpu_24.append(cpu_ratio)
        lines.append(
            f"{name:<34} {layers:>3} | {alpa['wall']:>9.3f} {alpa['cpu']:>8.3f} {alpa['status']:>10} | {tap['wall']:>8.3f} {tap['cpu']:>7.3f} {tap['method']:>6} | "
            f"{ratio:>7.1f} {cpu_ratio:>7.1f} {rel:>16.2e} {'yes' if abs(rel) <= 1e-6 else 'NO':>4}"
        )
    lines.append("")
    lines.append(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lines.append(f"largest |tap - alpa| / alpa: {worst:.2e}")
    lines.append(summary("alpa/tap wall at 24 layers or more", wall_24))
    lines.append(summary("alpa/tap CPU at 24 layers or more", cpu_24))
    lines.append("L = transformer layers; ended = alpa_ilp's termination (time_limit: stopped at --time-limit, its ratio a lower bound);")
    lines.append("method = how tap solved its folded program (dp: chain_dp.py, no solver; milp: the walk MILP).")
    return lines


def llama_table(backend: str, time_limit: float) -> list[str]:
    """Issue 20: tap on the Llama-3 8B sharding instance (batch 32 x 8192 tokens, 8x8 H100
    mesh, device memory: binding), folding and chain statistics."""
    from distplan.instances.zoo_sharding import llama_sharding

    inst = llama_sharding("llama3-8b", 32)
    lines = ["## 5. tap on Llama-3 8B (batch 32 x 8192, 8x8 H100 mesh, 80 GB per device)", ""]
    r = timed_solve(inst, "tap", backend, time_limit)
    res = distplan.solve(inst, "tap", backend=backend, time_limit=time_limit)
    lines.append(f"ops {len(inst.ops)}, layers {layers_of(inst) or 32}; families {res.info['folding']['families']}; chains {res.info['chains']['chains']}")
    lines.append(f"tap: wall {r['wall']:.2f} s, cpu {r['cpu']:.2f} s, method {r['method']}, status {r['status']}, iteration {res.objective * 1e3:.3f} ms, bound {res.bound * 1e3:.3f} ms")
    return lines


def best_ms(fn: Any) -> float:
    """CPU milliseconds of one call of ``fn``: best of 5 batches of at least 50 ms."""
    best = float("inf")
    for _ in range(5):
        c0, n = time.process_time(), 0
        while time.process_time() - c0 < 0.05:
            fn()
            n += 1
        best = min(best, (time.process_time() - c0) / n)
    return best * 1e3


def phase_times(inst: Any) -> dict[str, float]:
    """CPU milliseconds of tap's phases on one instance (the steps of ``run_tap``'s exact
    path, then the evaluator and the solver-free bound that ``distplan.solve`` adds), and of
    the whole solve."""
    from distplan.formulations.registry import solver_free_bounds
    from distplan.formulations.sharding.chain_dp import solve_by_dp
    from distplan.formulations.sharding.tap import DEFAULTS, find_walk_chains, plan_of_choice

    form = get_formulation("sharding", "tap")

    def dp() -> Any:  # the chains afresh: the dynamic program stores its Pareto arcs on them
        sk, _, tables, chains, _, _ = find_walk_chains(inst, DEFAULTS)
        ctx = RunContext(get_backend("highs"), SolveOptions(time_limit=300), dict(form.params))
        return sk, solve_by_dp(sk, chains, tables, ctx), tables

    sk, sol, tables = dp()
    plan = plan_of_choice(sk, tables, sol.choice)
    return {
        "chains": best_ms(lambda: find_walk_chains(inst, DEFAULTS)),
        "dp": best_ms(dp),
        "names": best_ms(lambda: plan_of_choice(sk, tables, sol.choice)),
        "eval": best_ms(lambda: evaluate(inst, plan)),
        "bound": best_ms(lambda: solver_free_bounds(inst)),
        "solve": best_ms(lambda: distplan.solve(inst, "tap", time_limit=300, mip_gap=1e-9)),
    }


def phases_table() -> list[str]:
    """Table 6: tap's phases on the 24-layer GPTs of table 4."""
    lines = ["## 6. tap's phases (CPU ms, best of 5 batches)", ""]
    lines.append(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    header = f"{'instance':<34} | {'chains':>6} {'dp':>6} {'names':>6} {'eval':>6} {'bound':>6} | {'phases':>6} {'solve':>6}"
    lines += [header, "-" * len(header)]
    for mesh, hetero in [(4, False), (8, False), (4, True), (8, True)]:
        for frac in (0.05, 0.3, 1.0):
            inst = tight_instance(24, mesh, hetero, frac)
            t = phase_times(inst)
            phases = t["dp"] + t["names"] + t["eval"] + t["bound"]  # dp includes chains
            lines.append(f"{inst.name:<34} | {t['chains']:>6.2f} {t['dp']:>6.2f} {t['names']:>6.2f} {t['eval']:>6.2f} {t['bound']:>6.2f} | {phases:>6.2f} {t['solve']:>6.2f}")
    lines.append("")
    lines.append(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    lines.append("chains = skeleton, fold (consecutive blocks, else the generic folding) and chains with their node cost")
    lines.append("tables (tap.find_walk_chains); dp = chains + the dynamic program (explicit graph and edge tables,")
    lines.append("memory-free pass, fronts and label passes when memory binds); names = strategy names of the plan;")
    lines.append("eval = the evaluator; bound = the solver-free bound; phases = dp + names + eval + bound; solve = the")
    lines.append("whole distplan.solve call.")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="12 and 96 layers, 2 repeats")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", default="highs")
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--only", choices=["search", "compare", "lp", "exact", "llama", "phases"], default=None)
    ap.add_argument("--batch", type=int, default=0, metavar="K", help="table 4: time K solves back to back per formulation and case (CPU per solve, the timeit way; the median of 3 such batches) instead of the median of 3 single runs")
    ap.add_argument("--batch-seconds", type=float, default=0.0, metavar="S", help="with --batch: more solves per batch, until it has taken S seconds (the timeit way: 0.2)")
    ap.add_argument("--exact-layers", type=int, nargs="+", default=None, metavar="L", help="table 4: the GPTs' layer counts (default 4 8 16 24; --quick: 4 24), e.g. 24 48 for the cases of 24 layers or more only")
    args = ap.parse_args()
    layers = [12, 96] if args.quick else [12, 24, 48, 96]
    repeat = 2 if args.quick else args.repeat
    out: list[str] = [f"# bench_sharding (backend {args.backend})", ""]
    if args.only in (None, "search"):
        out += search_table(layers, repeat, args.backend, args.time_limit) + [""]
    if args.only in (None, "compare"):
        out += comparison_table(args.backend) + [""]
    if args.only in (None, "lp"):
        out += lp_table(args.backend) + [""]
    if args.only in (None, "exact"):
        out += exact_table(args.quick, args.backend, args.time_limit, args.batch, args.batch_seconds, args.exact_layers) + [""]
    if args.only in (None, "llama"):
        out += llama_table(args.backend, args.time_limit) + [""]
    if args.only in (None, "phases"):
        out += phases_table()
    print("\n".join(out))


if __name__ == "__main__":
    main()
