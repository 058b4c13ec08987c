"""Peak memory of rebuilding a pipeline time-indexed model against `milp.rebuild_bytes`.

`distplan verify` rebuilds the time-indexed model of a pipeline instance restricted to
values <= U (`pipeline.milp.rebuild_below`) only when `rebuild_bytes`, an estimate made
before building, is within `REBUILD_MAX_BYTES`. The estimate must be an upper bound on
what the build really takes. This script builds the model (`timeindexed.build_ti_model`,
as `rebuild_below` does: `milp.restricted_problem(inst, U)`, U = the best classic
schedule's value minus 1, or that value times ``--cap-factor`` cases) of pipeline
instances of shapes v, x and nn, 2-8 stages, 1-300 micro-batches, with block times scaled
by a unit so the step variables range over ~1e3 to ~5e6, each in a FRESH subprocess, and
measures the build's peak resident memory growth: the process's peak RSS (``VmHWM``,
reset with ``/proc/self/clear_refs`` just before the build) minus its RSS before the
build (numpy buffers count: RSS, not tracemalloc, is the measure). The peak of
``resource.getrusage(RUSAGE_SELF).ru_maxrss`` after minus before is printed beside it
(the same after the reset). ``--tracemalloc`` also runs every case again in a second
fresh process under tracemalloc and prints its peak (the build's Python and numpy
allocations) to compare with RSS.

Run from the repository root (one core; ~3-4 minutes, the largest build ~1.5 GB)::

    python benchmarks/bench_rebuild_bytes.py [--quick] [--tracemalloc] [--max-gb 2.5] [--json out.json]

Prints one row per case: the instance (shape, stages p, micro-batches N, unit u, U), the
outcome (``built``, or ``empty`` when the model is infeasible by construction), operations,
step variables (`timeindexed.ti_size`), devices x (floor(bound) + 1), the estimate with
the old constants (600 per step, 300 per device and time step), the current estimate
(`rebuild_bytes`), the measured peak (MB), both ratios estimate / measured and build
seconds; then the smallest and largest ratios, and a least-squares fit of the measured
peaks (bytes per step, per device-step, constant) for refitting the constants.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from typing import Any

OLD_STEP, OLD_ROW = 600, 300

#: (shape, stages, micro-batches, cap factor, target step variables, memory capacity or
#: None): the unit that scales block times is chosen so the step variables come near the
#: target (at least unit 1); U = floor(cap factor x the best classic schedule's value) - 1
CASES: list[tuple[str, int, int, float, float, float | None]] = [
    # few operations, long horizons (operations x time steps dominate)
    ("x", 3, 1, 1.0, 1e3, None),
    ("x", 3, 1, 1.0, 1e5, None),
    ("x", 3, 1, 1.0, 1e6, None),
    ("x", 3, 1, 1.0, 1.8e6, None),
    ("v", 2, 1, 1.0, 1e6, None),  # (no step variables at U: every start is fixed)
    ("v", 2, 2, 1.0, 5e5, None),
    ("nn", 2, 1, 1.5, 1e6, None),
    ("v", 8, 1, 1.0, 2e6, None),
    ("nn", 4, 1, 1.0, 1e6, None),
    ("nn", 8, 2, 1.2, 3e5, None),
    # mid-size
    ("v", 4, 4, 1.0, 1e3, None),
    ("v", 4, 4, 1.0, 1e5, None),
    ("nn", 4, 8, 1.0, 1e4, None),
    ("nn", 4, 8, 1.0, 1e6, None),
    ("x", 4, 8, 1.5, 3e5, None),
    ("v", 8, 32, 1.0, 2.3e4, None),
    ("v", 8, 32, 1.0, 1e6, None),
    ("x", 6, 16, 1.0, 1.5e6, None),
    ("nn", 8, 16, 1.0, 1.5e6, None),
    ("v", 6, 64, 1.5, 2e6, None),
    # with memory rows (capacity per device) and memory-implied precedences
    ("v", 4, 8, 1.0, 1e4, 3.0),
    ("v", 4, 8, 1.0, 1e6, 3.0),
    ("x", 4, 8, 1.0, 5e5, 4.0),
    ("nn", 4, 8, 1.0, 5e5, 3.0),
    ("v", 8, 64, 1.0, 1, 8.0),
    ("v", 4, 200, 1.0, 1, 4.0),
    # many operations at unit 1 (step variables dominate)
    ("v", 4, 200, 1.0, 1, None),
    ("v", 8, 300, 1.0, 1, None),
    ("x", 8, 60, 1.0, 1, None),
    ("x", 2, 200, 1.0, 1, None),
    ("nn", 8, 60, 1.0, 1, None),
    ("nn", 2, 200, 1.0, 1, None),
    ("v", 2, 300, 2.0, 1, None),
]
QUICK = [0, 1, 2, 9, 10, 11, 14, 19]


def _status() -> dict[str, int]:
    """VmRSS and VmHWM of this process (bytes)."""
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = int(value.split()[0]) * 1024
    return out


def problem(
    shape: str, stages: int, micro_batches: int, unit: float, cap_factor: float, capacity: float | None = None
) -> tuple[Any, dict[str, Any]]:
    """The restricted problem `rebuild_below` builds for the case, and its sizes."""
    from distplan.formulations.pipeline import milp
    from distplan.formulations.pipeline.baselines import best_baseline
    from distplan.formulations.pipeline.timeindexed import ti_size
    from distplan.instances.pipelines import make_pipeline
    from distplan.models.pipeline import evaluate

    inst = make_pipeline(shape, stages, micro_batches, forward_time=unit, backward_time=3 * unit, memory_capacity=capacity)
    best = best_baseline(inst)
    assert best is not None
    value = evaluate(inst, best[1]).objective
    cap = float(math.floor(value * cap_factor) - 1) if cap_factor != 1.0 else value - 1
    prob = milp.restricted_problem(inst, cap)
    bound = prob.horizon if prob.objective == "makespan" or prob.span_ub is None else min(prob.horizon, prob.span_ub)
    steps = ti_size(prob)
    times = math.floor(bound + 1e-9) + 1
    rows = prob.mask.shape[1] * times
    pairs = int(prob.mask.sum())
    info = {
        "shape": shape,
        "p": stages,
        "N": micro_batches,
        "unit": unit,
        "mem": capacity,
        "cap": cap,
        "ops": prob.n,
        "steps": steps,
        "rows": rows,
        "pairs_t": pairs * times,
    }
    info["old"] = OLD_STEP * steps + OLD_ROW * rows
    info["estimate"] = milp.rebuild_bytes(prob)
    return prob, info


def measure_one(spec: dict[str, Any], trace: bool) -> dict[str, Any]:
    """Build the case's model in this process; its sizes and peak memory growth."""
    import gc
    import resource
    import tracemalloc

    import numpy as np

    from distplan.errors import InfeasibleError
    from distplan.formulations.pipeline import milp
    from distplan.modeling.model import InfeasibleByConstruction

    prob, info = problem(spec["shape"], spec["p"], spec["N"], spec["unit"], spec["cap_factor"], spec.get("mem"))
    gc.collect()
    if trace:
        tracemalloc.start()
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # (resets VmHWM and ru_maxrss to the current RSS)
    except OSError:
        info["no_reset"] = True
    before = _status()
    ru_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    t0 = time.perf_counter()
    try:
        model, index = milp.build_ti_model(prob, time.perf_counter() + milp.REBUILD_SECONDS)
        info["outcome"] = "built"
        info["vars"] = int(model.num_vars)
        info["implied"] = int(index.implied_arcs)
        info["prec"] = int(np.maximum(index.latest - index.earliest, 0)[index.arcs.dst].sum())
    except (InfeasibleByConstruction, InfeasibleError):
        info["outcome"] = "empty"
    info["seconds"] = time.perf_counter() - t0
    after = _status()
    info["rss_peak"] = after["VmHWM"] - before["VmRSS"]
    info["ru_peak"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - ru_before
    if trace:
        info["trace_peak"] = tracemalloc.get_traced_memory()[1]
    return info


def run_case(spec: dict[str, Any], trace: bool = False) -> dict[str, Any]:
    """`measure_one` in a fresh interpreter."""
    cmd = [sys.executable, __file__, "--one", json.dumps(spec)] + (["--trace"] if trace else [])
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def unit_for(shape: str, stages: int, micro_batches: int, cap_factor: float, target: float, capacity: float | None) -> float:
    """The whole unit that brings the case's step variables (or, without any, operations
    x time steps) near ``target`` (at least 1)."""
    info = problem(shape, stages, micro_batches, 1.0, cap_factor, capacity)[1]
    return float(max(1, round(target / max(info["steps"] or info["pairs_t"], 1))))


def fit(rows: list[dict[str, Any]]) -> list[float]:
    """Least-squares bytes per step, per operation-device pair and time step, per device
    and time step, and constant of the measured peaks (for reference: the constants of
    `rebuild_bytes` are set to cover every case, see milp.py)."""
    import numpy as np

    a = np.array([[r["steps"], r["pairs_t"], r["rows"], 1.0] for r in rows])
    b = np.array([r["rss_peak"] for r in rows], dtype=float)
    return [float(c) for c in np.linalg.lstsq(a, b, rcond=None)[0]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--one", help=argparse.SUPPRESS)
    ap.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--quick", action="store_true", help=f"{len(QUICK)} cases up to ~0.6 GB")
    ap.add_argument("--tracemalloc", action="store_true", help="also measure each case under tracemalloc (a second process)")
    ap.add_argument("--max-gb", type=float, default=2.5, help="skip cases whose estimate x 1.2 passes this (GB)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure_one(json.loads(args.one), args.trace)))
        return
    cases = [CASES[i] for i in QUICK] if args.quick else CASES
    head = f"{'case (mem: capacity)':<30}{'outcome':>8}{'ops':>6}{'implied':>8}{'steps':>9}{'ops x T':>10}{'dev x T':>9}{'old MB':>8}{'est MB':>8}{'peak MB':>8}{'ru MB':>8}{'old/pk':>7}{'est/pk':>7}{'s':>5}"
    if args.tracemalloc:
        head += f"{'trace MB':>9}"
    print(head)
    rows: list[dict[str, Any]] = []
    t_all = time.perf_counter()
    for shape, p, n, factor, target, capacity in cases:
        unit = unit_for(shape, p, n, factor, target, capacity)
        spec = {"shape": shape, "p": p, "N": n, "unit": unit, "cap_factor": factor, "mem": capacity}
        _, info = problem(shape, p, n, unit, factor, capacity)
        guess = max(info["old"], info["estimate"], 400 * info["steps"] + 250 * info["pairs_t"])
        if 1.2 * guess > args.max_gb * 1e9:
            print(f"{shape} p{p} N{n} u{unit:g}: skipped (estimate {guess / 1e6:.0f} MB)")
            continue
        r = run_case(spec)
        if args.tracemalloc:
            r["trace_peak"] = run_case(spec, trace=True)["trace_peak"]
        rows.append(r)
        name = f"{shape} p{p} N{n} u{unit:g} U{r['cap']:g}" + (f" mem{capacity:g}" if capacity else "")
        line = (
            f"{name:<30}{r['outcome']:>8}{r['ops']:>6}{r.get('implied', '-'):>8}{r['steps']:>9}{r['pairs_t']:>10}{r['rows']:>9}{r['old'] / 1e6:>8.1f}{r['estimate'] / 1e6:>8.1f}"
            f"{r['rss_peak'] / 1e6:>8.1f}{r['ru_peak'] / 1e6:>8.1f}{r['old'] / r['rss_peak']:>7.2f}{r['estimate'] / r['rss_peak']:>7.2f}{r['seconds']:>5.1f}"
        )
        if args.tracemalloc:
            line += f"{r['trace_peak'] / 1e6:>9.1f}"
        print(line, flush=True)
    for key, label in (("old", f"old constants ({OLD_STEP}, {OLD_ROW})"), ("estimate", "rebuild_bytes")):
        ratios = [r[key] / r["rss_peak"] for r in rows]
        big = [r[key] / r["rss_peak"] for r in rows if r["rss_peak"] >= 1e8]
        print(
            f"{label}: estimate / peak min {min(ratios):.3f} max {max(ratios):.3f}; peaks >= 100 MB: min {min(big, default=math.nan):.3f} max {max(big, default=math.nan):.3f}"
        )
    step, pair, row, const = fit(rows)
    print(
        f"least squares: {step:.0f} bytes per step variable, {pair:.0f} per operation-device pair and time step, {row:.0f} per device and time step, {const / 1e6:.1f} MB; {len(rows)} cases in {time.perf_counter() - t_all:.0f} s"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
