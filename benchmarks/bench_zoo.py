"""Benchmarks of instance creation: generators, the analytic zoo, the bundled library, the importer.

Run: python benchmarks/bench_zoo.py [--quick] [--no-import]
     python benchmarks/bench_zoo.py llama [--repeats 3] [--sharding-batch 32] [--models llama3-8b,...]

``llama`` (issue 20): a Llama-3 8B training step (forward, backward, Adam; 4 micro-batches
of 8,192 tokens, one op per CUDA kernel) as a placement instance on an H100 SXM node, solved
by m-ETF; as a sharding instance on an 8x8 H100 mesh (8 nodes, NDR InfiniBand) with the
device memory as budget, solved by ``tap`` (and without a budget, to show whether memory
binds); and as a pipeline instance (4 stages), solved by 1F1B and ZB-H1. Build, load and
solve seconds are timed separately (median of ``--repeats``; tap once unless asked).

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


def _median(xs: list[float]) -> float:
    return float(np.median(xs))


def bench_llama(models: list[str], repeats: int, sharding_batch: int, tap_repeats: int, time_limit: float, parts: tuple[str, ...] = ("placement", "sharding", "pipeline")) -> None:
    if "placement" in parts:
        bench_llama_placement(models, repeats, time_limit)
    if "sharding" in parts:
        bench_llama_sharding(sharding_batch, tap_repeats, time_limit)
    if "pipeline" in parts:
        bench_llama_pipeline(time_limit)


def bench_llama_placement(models: list[str], repeats: int, time_limit: float) -> None:
    import tempfile

    from distplan.models.common import write_json

    print(f"\n## Llama-class placement: make_placement, write + load, m-ETF (median of {repeats}; seconds)")
    print(f"{'model':<14} {'cluster':<14} {'ops':>6} {'edges':>6} {'build s':>8} {'load s':>7} {'etf s':>7} {'makespan ms':>12} {'bound ms':>9} {'fwd PFLOP':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for item in models:
            name, _, cluster_name = item.partition("@")
            cluster_name = cluster_name or "h100-sxm"
            builds, loads, solves = [], [], []
            res = doc = None
            for _ in range(repeats):
                doc, tb = timed(make_placement, name, cluster_name, dtype="bf16")
                path = Path(tmp) / f"{name}.json"
                write_json(doc, str(path))
                inst, tl = timed(load_instance, str(path))
                res, ts = timed(distplan.solve, inst, formulation="baechi_etf", time_limit=time_limit)
                builds.append(tb)
                loads.append(tl)
                solves.append(ts)
            assert res is not None and doc is not None and res.check.feasible
            bound = res.bound if res.bound is not None else float("nan")
            print(
                f"{name:<14} {cluster_name:<14} {len(doc['graph']['ops']):>6} {len(doc['graph']['edges']):>6} {_median(builds):>8.2f} {_median(loads):>7.2f} "
                f"{_median(solves):>7.2f} {res.objective * 1e3:>12.1f} {bound * 1e3:>9.1f} {doc['meta']['totals']['forward_flops'] / 1e15:>10.3f}"
            )



def bench_llama_sharding(sharding_batch: int, tap_repeats: int, time_limit: float) -> None:
    from distplan.instances.zoo_sharding import llama_sharding

    print(f"\n## llama3-8b sharding, batch {sharding_batch} x 8192, 8x8 H100 mesh (8xh100-sxm-ib), tap (time limit {time_limit:g} s)")
    print(f"{'memory':<10} {'ops':>5} {'build s':>8} {'tap s':>7} {'status':>9} {'iteration ms':>13} {'bound ms':>9} {'GB/device':>10} {'budget GB':>10}")
    inst, tb = timed(llama_sharding, "llama3-8b", sharding_batch)
    free = llama_sharding("llama3-8b", sharding_batch, memory=1e15)
    for label, case, reps in (("device", inst, tap_repeats), ("unbounded", free, 1)):
        times, res = [], None
        for _ in range(reps):
            res, ts = timed(distplan.solve, case, formulation="tap", time_limit=time_limit)
            times.append(ts)
        assert res is not None
        mem = res.check.details["memory_bytes"] / 1e9
        bound = res.bound if res.bound is not None else float("nan")
        print(
            f"{label:<10} {len(case.ops):>5} {tb:>8.3f} {_median(times):>7.2f} {res.status.value:>9} {res.objective * 1e3:>13.2f} {bound * 1e3:>9.2f} "
            f"{mem:>10.2f} {case.memory_budget / 1e9:>10.1f}"
        )



def bench_llama_pipeline(time_limit: float) -> None:
    from distplan.instances.pipelines import pipeline_from_model

    print("\n## llama3-8b pipeline on h100-sxm (4 stages, 16 micro-batches), block times from layer costs")
    print(f"{'instance':<30} {'build s':>8} {'schedule':>9} {'solve s':>8} {'makespan s':>11}")
    for split, formulation in ((False, "1f1b"), (True, "zb_h1")):
        pinst, tb = timed(pipeline_from_model, "llama3-8b", 4, 16, "h100-sxm", split_backward=split)
        res, ts = timed(distplan.solve, pinst, formulation=formulation, time_limit=time_limit)
        print(f"{pinst.name:<30} {tb:>8.3f} {formulation:>9} {ts:>8.3f} {res.objective:>11.4f}")


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "llama":
        lp = argparse.ArgumentParser(description="Llama-class instances (issue 20)", prog="bench_zoo.py llama")
        lp.add_argument("--models", default="llama3-8b", help="comma-separated zoo models for the placement part, MODEL[@CLUSTER] (default cluster h100-sxm)")
        lp.add_argument("--repeats", type=int, default=3, help="repeats of build/load/m-ETF (median)")
        lp.add_argument("--tap-repeats", type=int, default=1, help="repeats of the memory-bound tap solve (median)")
        lp.add_argument("--sharding-batch", type=int, default=32, help="global batch (sequences of 8,192 tokens)")
        lp.add_argument("--time-limit", type=float, default=120.0, help="seconds per solve")
        lp.add_argument("--parts", default="placement,sharding,pipeline", help="comma-separated parts to run")
        la = lp.parse_args(sys.argv[2:])
        bench_llama(la.models.split(","), la.repeats, la.sharding_batch, la.tap_repeats, la.time_limit, tuple(la.parts.split(",")))
        return 0
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
