"""Overhead of the campaign runner: a fork server vs a fresh interpreter per run.

    python benchmarks/bench_bench.py [--runs 20] [--instance placement-small-1] [--formulation baechi_etf]

Every campaign run gets its own process. The baseline starts a fresh ``python`` per run
(imports of numpy, scipy, distplan and the solver packages each time); the runner forks
each run from a preloaded fork server. Both execute the same child body on the same spec,
one run at a time. Reported: seconds per run (process start to result on disk), the
solve's own wall seconds inside the run (the same work in both), the overhead (the
difference) and the speed-up as a ratio against the baseline in the same session. A
second table times the SQLite store: inserting the records one transaction each (as a
campaign does) and reading them back.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from distplan.bench.campaign import parse_campaign  # noqa: E402
from distplan.bench.forkserver import ForkServer, run_spec  # noqa: E402
from distplan.bench.store import Store, canonical_json  # noqa: E402


def fresh_interpreter(spec: dict, workdir: Path) -> tuple[float, float]:
    spec_path, result_path = workdir / "s.json", workdir / "r.json"
    spec_path.write_text(canonical_json(spec))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", f"from distplan.bench.forkserver import _child_main; _child_main({str(spec_path)!r}, {str(result_path)!r})"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - t0
    rec = json.loads(result_path.read_text())
    result_path.unlink()
    return elapsed, float(rec["wall_seconds"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--instance", default="placement-small-1")
    parser.add_argument("--formulation", default="baechi_etf")
    parser.add_argument("--backend", default="highs")
    args = parser.parse_args()
    campaign = parse_campaign({"time_limit": 60, "formulations": [args.formulation], "backends": [args.backend], "instances": [args.instance], "repetitions": args.runs})
    specs = campaign.runs()
    print(f"{len(specs)} runs of {args.formulation} on {args.instance} ({args.backend}), one at a time")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fresh = [fresh_interpreter(s, work) for s in specs]
        server = ForkServer([specs[0]["kind"]], [args.backend])
        t_boot = time.perf_counter()
        server.ensure_running()
        boot = time.perf_counter() - t_boot
        forked = []
        for s in specs:
            t0 = time.perf_counter()
            rec = run_spec(s, server)
            assert rec is not None and rec["verdict"] == "accepted", rec
            forked.append((time.perf_counter() - t0, float(rec["wall_seconds"])))
        server.close()
        rows = [("fresh interpreter per run (baseline)", fresh), ("fork server (distplan bench)", forked)]
        base = statistics.median(t for t, _ in fresh)
        print(f"\n{'method':<38} {'median s/run':>12} {'solve wall s':>12} {'overhead s':>11} {'speed-up':>9}")
        for name, data in rows:
            per = statistics.median(t for t, _ in data)
            inner = statistics.median(w for _, w in data)
            print(f"{name:<38} {per:>12.4f} {inner:>12.4f} {per - inner:>11.4f} {base / per:>8.1f}x")
        print(f"fork server boot (once per campaign): {boot:.3f} s")

        db = work / "b.db"
        records = []
        for k, s in enumerate(specs * 10):
            records.append({"run_key": f"{k:024d}", "instance": s["instance"], "instance_hash": s["instance_hash"], "kind": s["kind"], "formulation": s["formulation"], "backend": s["backend"], "termination": "finished", "status": "feasible", "objective": 1.0})
        with Store(db) as store:
            t0 = time.perf_counter()
            for r in records:
                store.insert_run(r)
            insert = time.perf_counter() - t0
            t0 = time.perf_counter()
            n = len(store.runs())
            read = time.perf_counter() - t0
        print(f"\n{'store (SQLite, WAL)':<38} {'rows':>6} {'seconds':>9} {'ms/row':>8}")
        print(f"{'insert, one transaction per run':<38} {len(records):>6} {insert:>9.3f} {1e3 * insert / len(records):>8.3f}")
        print(f"{'read all rows':<38} {n:>6} {read:>9.3f} {1e3 * read / n:>8.3f}")


if __name__ == "__main__":
    main()
