"""Compression selection (TAG) benchmarks.

1. TAG's cost program on large synthetic graphs (default 1,000 / 2,000 / 5,000 ops): build,
   hand-over and solve times of the MILP (``tag_sfb objective=tag_cost``) on HiGHS, the extra
   LP-relaxation solve, and the minimum cut (networkx, TAG's price 1) in the same run; ratio =
   MILP formulation time / max-flow time. Both must give the same TAG objective; the LP
   relaxation must be integral. Then the iteration MILP (``tag_sfb``, the default): its
   formulation time, the evaluated iteration time against TAG's cost optimum, and its gap over
   TAG's plans.
2. Iteration time of every formulation against ``allreduce_all`` on the bundled BERT-large,
   GPT-2 medium and VGG-16 instances (``codec_select`` under --time-limit seconds), and whether
   any baseline beats tag_sfb (it must not).

    python benchmarks/bench_compression.py [--sizes 1000,2000,5000] [--time-limit 60] [--skip-table] [--skip-codec-select]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distplan.api import solve  # noqa: E402
from distplan.errors import InputError  # noqa: E402
from distplan.formulations.compression.costs import prune_dangling  # noqa: E402
from distplan.formulations.compression.tag import DEFAULT_ALPHA, min_cut_duplicated  # noqa: E402
from distplan.instances import compression_models as cm  # noqa: E402
from distplan.instances import load_instance  # noqa: E402
from distplan.models.compression_instance import CompressionInstance  # noqa: E402

BASELINES = ("allreduce_all", "sfb_poseidon_rule", "greedy_by_saving")
FORMULATIONS = ("allreduce_all", "sfb_poseidon_rule", "greedy_by_saving", "tag_sfb", "tag_sfb_maxflow", "codec_select")


def bench_tag(sizes: list[int], seed: int) -> None:
    print("TAG's cost program on synthetic graphs (HiGHS; seconds; ratio = MILP formulation / max-flow; api wall includes the evaluator)")
    head = f"{'ops':>6} {'edges':>6} {'elig':>5} {'build':>7} {'handover':>8} {'solve':>7} {'milp total':>10} {'api wall':>8} {'+LP relax':>9} {'maxflow':>8} {'ratio':>6} {'integral':>8} {'agree':>5}"
    print(head)
    print("-" * len(head))
    rows = []
    for n in sizes:
        inst = CompressionInstance.from_dict(cm.synthetic(n, seed=seed))
        milp = solve(inst, "tag_sfb", objective="tag_cost")
        r = milp.solver_results[-1]
        with_lp = solve(inst, "tag_sfb", objective="tag_cost", relaxation=True)
        formulation = milp.timings["formulation_seconds"]
        try:
            t0 = time.perf_counter()
            dup, value, _ = min_cut_duplicated(inst, DEFAULT_ALPHA)
            cut_seconds = time.perf_counter() - t0
        except InputError:  # memory rows can bind: no pure cut
            cut_s, ratio, agree = "-", "-", "n/a"
        else:
            same = abs(milp.info["tag_objective"] - value) <= 1e-9 * max(1.0, abs(value))
            names = tuple(inst.ops[i].name for i in np.flatnonzero(prune_dangling(inst, dup)))
            agree = str(same and milp.plan.duplicated == names)
            cut_s = f"{cut_seconds:.3f}"
            ratio = f"{formulation / max(cut_seconds, 1e-9):.2f}"
        print(
            f"{inst.n_ops:>6} {inst.n_edges:>6} {int(inst.eligible.sum()):>5} {r.build_seconds:>7.3f} {r.handover_seconds:>8.3f} {r.solve_seconds:>7.3f} "
            f"{formulation:>10.3f} {milp.timings['wall_seconds']:>8.3f} {with_lp.timings['formulation_seconds']:>9.3f} {cut_s:>8} "
            f"{ratio:>6} {str(with_lp.info['lp_relaxation']['integral']):>8} {agree:>5}"
        )
        rows.append((inst, milp))
    print()
    print("tag_sfb (iteration MILP) on the same graphs: evaluated iteration ms vs TAG's cost optimum; gap over TAG's plans")
    head = f"{'ops':>6} {'tag_cost ms':>11} {'tag_sfb ms':>10} {'gain':>6} {'MILP build':>10} {'MILP solve':>10} {'formulation':>11} {'space gap':>9}"
    print(head)
    print("-" * len(head))
    for inst, cost in rows:
        it = solve(inst, "tag_sfb")
        r = it.solver_results[-1]
        space = it.info["tag_space"]
        gap = "-" if space["gap"] is None else f"{space['gap']:.1e}"
        print(
            f"{inst.n_ops:>6} {1e3 * cost.objective:>11.3f} {1e3 * it.objective:>10.3f} {cost.objective / it.objective:>6.3f} "
            f"{r.build_seconds:>10.3f} {r.solve_seconds:>10.3f} {it.timings['formulation_seconds']:>11.3f} {gap:>9}"
        )
    print()


def bench_table(time_limit: float, skip_codec_select: bool) -> None:
    print(f"iteration time per formulation (ms; speed-up vs allreduce_all; codec_select time limit {time_limit:g} s)")
    names = {"bert-large": "compression-bert-large", "gpt2-medium": "compression-gpt2-medium", "vgg16": "compression-vgg16"}
    head = f"{'instance':<12} {'formulation':<18} {'iteration ms':>12} {'speed-up':>8} {'status':>9} {'gap':>9} {'methods':<40} {'wall s':>7}"
    print(head)
    print("-" * len(head))
    for short, name in names.items():
        inst = load_instance(name)
        base = None
        results = {}
        for f in FORMULATIONS:
            if f == "codec_select" and skip_codec_select:
                continue
            t0 = time.perf_counter()
            res = solve(inst, f, time_limit=time_limit if f == "codec_select" else None)
            wall = time.perf_counter() - t0
            if base is None:
                base = res.objective
            gap = "-" if res.gap is None else f"{100 * res.gap:.4f}%"
            methods = ", ".join(f"{m}={n}" for m, n in sorted(res.plan.method_counts().items()))
            results[f] = res.objective
            print(f"{short:<12} {f:<18} {1e3 * res.objective:>12.2f} {base / res.objective:>8.3f} {res.status.value:>9} {gap:>9} {methods:<40} {wall:>7.2f}")
        beaten = [b for b in BASELINES if results[b] < results["tag_sfb"]]
        print(f"{short:<12} baselines beating tag_sfb: {', '.join(beaten) or 'none'}")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,2000,5000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--skip-table", action="store_true")
    parser.add_argument("--skip-codec-select", action="store_true", help="leave codec_select out of the table")
    args = parser.parse_args()
    bench_tag([int(s) for s in args.sizes.split(",") if s], args.seed)
    if not args.skip_table:
        bench_table(args.time_limit, args.skip_codec_select)
    return 0


if __name__ == "__main__":
    sys.exit(main())
