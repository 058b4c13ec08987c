"""Benchmarks of instance creation: generators, the analytic zoo, the bundled library, the importer.

Run: python benchmarks/bench_zoo.py [--quick] [--no-import]

1. Generators at 1k / 10k / 100k ops: generation seconds, and for the layered DAG the speed
   ratio against a plain-Python loop building the same distribution (baseline, same run).
2. Zoo models: graph build seconds and document seconds (make_placement), ops and edges.
3. Every bundled zoo instance: load (parse + validate) seconds, then m-ETF and m-TOPO solve
   seconds, makespans, and the solver-free lower bound.
4. PyTorch importer (when torch and transformers are installed): GPT-2 small and XL from a
   config on the meta device, export seconds and total import seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import distplan  # noqa: E402
from distplan.instances import load_instance  # noqa: E402
from distplan.instances.generators import chain_of_blocks, random_layered_dag, series_parallel  # noqa: E402
from distplan.instances.zoo import MODELS, make_placement, model_graph  # noqa: E402


def python_layered_dag(n_ops: int, seed: int = 0) -> dict[str, Any]:
    """Baseline: the layered-DAG distribution built op by op in plain Python."""
    import random

    rng = random.Random(seed)
    w = max(1, round(n_ops**0.5))
    p = min(1.0, 2.0 / w)
    layers: list[list[int]] = []
    k = 0
    while k < n_ops:
        size = min(n_ops - k, rng.randint(max(1, (w + 1) // 2), max(1, w + w // 2)))
        layers.append(list(range(k, k + size)))
        k += size
    ops = [{"name": f"op{i}", "time": rng.lognormvariate(-0.18, 0.6) * 1e-3, "memory": round(rng.lognormvariate(-0.18, 0.6) * 2**26)} for i in range(n_ops)]
    edges = []
    for prev, cur in zip(layers, layers[1:]):
        for v in cur:
            parents = {u for u in prev if rng.random() < p} or {rng.choice(prev)}
            for u in sorted(parents):
                edges.append({"src": f"op{u}", "dst": f"op{v}", "bytes": round(rng.lognormvariate(-0.18, 0.6) * 1.575e7)})
    return {"ops": ops, "edges": edges}


def timed(fn: Any, *args: Any, **kwargs: Any) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def bench_generators(sizes: list[int]) -> None:
    print("\n## generators (seconds; ratio = plain-Python baseline / numpy)")
    print(f"{'generator':<22} {'ops':>8} {'edges':>9} {'numpy s':>9} {'python s':>9} {'ratio':>7}")
    for n in sizes:
        doc, t = timed(random_layered_dag, n, seed=1)
        _, tb = timed(python_layered_dag, n, 1)
        print(f"{'random_layered_dag':<22} {n:>8} {len(doc['graph']['edges']):>9} {t:>9.3f} {tb:>9.3f} {tb / t:>6.1f}x")
        doc, t = timed(series_parallel, n, seed=1)
        print(f"{'series_parallel':<22} {n:>8} {len(doc['graph']['edges']):>9} {t:>9.3f} {'-':>9} {'-':>7}")
        doc, t = timed(chain_of_blocks, n // 10, block_size=10, seed=1)
        print(f"{'chain_of_blocks':<22} {n:>8} {len(doc['graph']['edges']):>9} {t:>9.3f} {'-':>9} {'-':>7}")


def bench_models() -> None:
    print("\n## zoo models on dgx1 (training graphs; build = LayerGraph, document = roofline + JSON dict)")
    print(f"{'model':<14} {'fwd ops':>8} {'ops':>6} {'edges':>6} {'GFLOP fwd':>10} {'params M':>9} {'build s':>8} {'doc s':>7}")
    for name in MODELS:
        g, tb = timed(model_graph, name)
        doc, td = timed(make_placement, name, "dgx1")
        print(
            f"{name:<14} {len(g):>8} {len(doc['graph']['ops']):>6} {len(doc['graph']['edges']):>6} "
            f"{g.total_flops() / 1e9:>10.1f} {g.total_params() / g.elem / 1e6:>9.1f} {tb:>8.4f} {td - tb:>7.4f}"
        )


def bench_bundled(time_limit: float) -> None:
    index = json.loads((ROOT / "distplan" / "instances" / "data" / "index-placement-zoo.json").read_text())
    print("\n## bundled zoo: load, then solve (makespan ms; bound = solver-free lower bound)")
    print(f"{'instance':<32} {'ops':>5} {'dev':>4} {'load s':>7} {'etf ms':>9} {'etf s':>6} {'topo ms':>9} {'topo s':>6} {'bound ms':>9}")
    for name in index:
        inst, tl = timed(load_instance, name)
        etf, te = timed(distplan.solve, inst, formulation="baechi_etf", time_limit=time_limit)
        topo, tt = timed(distplan.solve, inst, formulation="baechi_topo", time_limit=time_limit)
        assert etf.check.feasible and topo.check.feasible
        bound = etf.bound if etf.bound is not None else float("nan")
        print(f"{name:<32} {inst.n_ops:>5} {inst.n_devices:>4} {tl:>7.3f} {etf.objective * 1e3:>9.3f} {te:>6.2f} {topo.objective * 1e3:>9.3f} {tt:>6.2f} {bound * 1e3:>9.3f}")


def bench_import() -> None:
    try:
        import transformers

        from distplan.instances.torch_import import import_torch
    except ImportError:
        print("\n## importer: skipped (needs torch and transformers)")
        return
    print("\n## PyTorch importer: GPT-2 from a transformers config, meta device (seconds)")
    print(f"{'model':<12} {'input':>10} {'fwd ops':>8} {'ops':>6} {'GFLOP fwd':>10} {'analytic':>10} {'export s':>9} {'total s':>8}")
    for label, layers, hidden, heads in (("gpt2-small", 12, 768, 12), ("gpt2-xl", 48, 1600, 25)):
        cfg = transformers.GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, n_positions=1024)
        b, s = 1, 1024
        doc, total = timed(import_torch, lambda cfg=cfg: transformers.GPT2LMHeadModel(cfg), (b, s), cluster="dgx1")
        analytic = layers * (24 * b * s * hidden**2 + 4 * b * s * s * hidden) + 2 * b * s * hidden * cfg.vocab_size
        tot = doc["meta"]["totals"]
        print(
            f"{label:<12} {f'{b}x{s}':>10} {tot['forward_ops']:>8} {len(doc['graph']['ops']):>6} {tot['forward_flops'] / 1e9:>10.1f} "
            f"{analytic / 1e9:>10.1f} {doc['meta']['import_seconds']['export']:>9.2f} {total:>8.2f}"
        )


def main() -> int:
    ap = argparse.ArgumentParser(description="instance-creation benchmarks")
    ap.add_argument("--quick", action="store_true", help="generators up to 10k ops only")
    ap.add_argument("--no-import", action="store_true", help="skip the PyTorch importer")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per solve")
    args = ap.parse_args()
    np.random.seed(0)
    bench_generators([1000, 10_000] if args.quick else [1000, 10_000, 100_000])
    bench_models()
    bench_bundled(args.time_limit)
    if not args.no_import:
        bench_import()
    return 0


if __name__ == "__main__":
    sys.exit(main())
