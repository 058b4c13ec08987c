"""Compression selection (TAG) benchmarks.

1. ``tag_sfb`` on large synthetic graphs (default 1,000 / 2,000 / 5,000 ops): build,
   hand-over and solve times of the MILP on HiGHS, the extra LP-relaxation solve, and the
   minimum cut (networkx) in the same run; ratio = MILP formulation time / max-flow time.
   Both must give the same TAG objective; the LP relaxation must be integral.
2. Iteration time of every formulation against ``allreduce_all`` on the bundled BERT-large,
   GPT-2 medium and VGG-16 instances (``codec_select`` under --time-limit seconds).

    python benchmarks/bench_compression.py [--sizes 1000,2000,5000] [--time-limit 60] [--skip-table]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from distplan.api import solve  # noqa: E402
from distplan.errors import InputError  # noqa: E402
from distplan.instances import compression_models as cm  # noqa: E402
from distplan.instances import load_instance  # noqa: E402
from distplan.models.compression import CompressionInstance  # noqa: E402

FORMULATIONS = ("allreduce_all", "sfb_poseidon_rule", "greedy_by_saving", "tag_sfb", "tag_sfb_maxflow", "codec_select")


def bench_tag(sizes: list[int], seed: int) -> None:
    print("tag_sfb on synthetic graphs (HiGHS; seconds; ratio = MILP formulation / max-flow; api wall includes the evaluator)")
    head = f"{'ops':>6} {'edges':>6} {'elig':>5} {'build':>7} {'handover':>8} {'solve':>7} {'milp total':>10} {'api wall':>8} {'+LP relax':>9} {'maxflow':>8} {'ratio':>6} {'integral':>8} {'agree':>5}"
    print(head)
    print("-" * len(head))
    for n in sizes:
        inst = CompressionInstance.from_dict(cm.synthetic(n, seed=seed))
        milp = solve(inst, "tag_sfb", relaxation=False)
        r = milp.solver_results[-1]
        with_lp = solve(inst, "tag_sfb")
        formulation = milp.timings["formulation_seconds"]
        try:
            cut = solve(inst, "tag_sfb_maxflow")
        except InputError:  # memory rows can bind: no pure cut
            cut_s, ratio, agree = "-", "-", "n/a"
        else:
            same = abs(milp.info["tag_objective"] - cut.info["tag_objective"]) <= 1e-9 * max(1.0, abs(cut.info["tag_objective"]))
            agree = str(same and milp.plan.duplicated == cut.plan.duplicated)
            cut_s = f"{cut.timings['formulation_seconds']:.3f}"
            ratio = f"{formulation / max(cut.timings['formulation_seconds'], 1e-9):.2f}"
        print(
            f"{inst.n_ops:>6} {inst.n_edges:>6} {int(inst.eligible.sum()):>5} {r.build_seconds:>7.3f} {r.handover_seconds:>8.3f} {r.solve_seconds:>7.3f} "
            f"{formulation:>10.3f} {milp.timings['wall_seconds']:>8.3f} {with_lp.timings['formulation_seconds']:>9.3f} {cut_s:>8} "
            f"{ratio:>6} {str(with_lp.info['lp_relaxation']['integral']):>8} {agree:>5}"
        )
    print()


def bench_table(time_limit: float) -> None:
    print(f"iteration time per formulation (ms; speed-up vs allreduce_all; codec_select time limit {time_limit:g} s)")
    names = {"bert-large": "compression-bert-large", "gpt2-medium": "compression-gpt2-medium", "vgg16": "compression-vgg16"}
    head = f"{'instance':<12} {'formulation':<18} {'iteration ms':>12} {'speed-up':>8} {'status':>9} {'gap':>9} {'methods':<40} {'wall s':>7}"
    print(head)
    print("-" * len(head))
    for short, name in names.items():
        inst = load_instance(name)
        base = None
        for f in FORMULATIONS:
            t0 = time.perf_counter()
            res = solve(inst, f, time_limit=time_limit if f == "codec_select" else None)
            wall = time.perf_counter() - t0
            if base is None:
                base = res.objective
            gap = "-" if res.gap is None else f"{100 * res.gap:.4f}%"
            methods = ", ".join(f"{m}={n}" for m, n in sorted(res.plan.method_counts().items()))
            print(f"{short:<12} {f:<18} {1e3 * res.objective:>12.2f} {base / res.objective:>8.3f} {res.status.value:>9} {gap:>9} {methods:<40} {wall:>7.2f}")
    print()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,2000,5000")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-limit", type=float, default=60.0)
    parser.add_argument("--skip-table", action="store_true")
    args = parser.parse_args()
    bench_tag([int(s) for s in args.sizes.split(",") if s], args.seed)
    if not args.skip_table:
        bench_table(args.time_limit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
