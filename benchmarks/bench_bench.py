"""Overhead of the campaign runner: a fork server vs a fresh interpreter per run.

    python benchmarks/bench_bench.py [--runs 20] [--instance placement-small-1] [--formulation baechi_etf] [--kill]

Every campaign run gets its own process. The baseline starts a fresh ``python`` per run
(imports of numpy, scipy, distplan and the solver packages each time); the runner forks
each run from a preloaded fork server. Both execute the same child body on the same spec,
one run at a time. Reported: seconds per run (process start to result on disk), the
solve's own wall seconds inside the run (the same work in both), the overhead (the
difference) and the speed-up as a ratio against the baseline in the same session. A
second table times the SQLite store: inserting the records one transaction each (as a
campaign does) and reading them back. ``--kill`` adds a third: a campaign whose one run is
a long CBC solve, started in a process group of its own with a private TMPDIR, killed with
SIGKILL (the whole group) once CBC runs; reported are the seconds until no process of the
campaign is left and until its temp folders are gone (the reaper's work).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
        [sys.executable, "-c", f"from distplan.bench.forkserver import run_process_main; run_process_main({str(spec_path)!r}, {str(result_path)!r})"],
        check=True,
        env=env,
        stdout=subprocess.DEVNULL,
    )
    elapsed = time.perf_counter() - t0
    rec = json.loads(result_path.read_text())
    result_path.unlink()
    return elapsed, float(rec["wall_seconds"])


KILL_CAMPAIGN = """
name = "killed"
time_limit = 120.0
threads = 1
formulations = ["placement_milp"]
backends = ["pulp-cbc"]
instances = [{generator = "random_layered_dag", n_ops = 60, seed = 3, n_devices = 4}]
"""


def kill_cleanup() -> tuple[float, float, int]:
    """(seconds until every process is gone, seconds until no temp folder is left, processes
    of the campaign at the kill) after SIGKILL of a campaign's process group."""
    import psutil

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "tmp").mkdir()
        (work / "c.toml").write_text(KILL_CAMPAIGN)
        env = dict(os.environ, TMPDIR=str(work / "tmp"), PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-m", "distplan", "bench", "run", str(work / "c.toml"), "--db", str(work / "r.db"), "--quiet"]
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        driver = psutil.Process(proc.pid)
        deadline = time.monotonic() + 120
        def solving() -> bool:  # CBC on the model (not the version probe of campaign loading)
            try:
                return any("cbc" in p.name() for p in driver.children(recursive=True)) and any((work / "tmp").rglob("distplan-cbc-*"))
            except psutil.Error:
                return False

        while not solving():
            if time.monotonic() > deadline:
                raise RuntimeError("CBC never started")
            time.sleep(0.05)
        procs = driver.children(recursive=True)
        t0 = time.perf_counter()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        psutil.wait_procs(procs, timeout=60)
        t_procs = time.perf_counter() - t0
        while any((work / "tmp").rglob("distplan-*")):
            if time.perf_counter() - t0 > 60:
                raise RuntimeError(f"temp folders left: {list((work / 'tmp').rglob('distplan-*'))}")
            time.sleep(0.02)
        return t_procs, time.perf_counter() - t0, len(procs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--instance", default="placement-small-1")
    parser.add_argument("--formulation", default="baechi_etf")
    parser.add_argument("--backend", default="highs")
    parser.add_argument("--kill", action="store_true", help="also time the clean-up after SIGKILL of a campaign's process group")
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
    if args.kill:
        t_procs, t_dirs, n_procs = kill_cleanup()
        print(f"\n{'SIGKILL of a campaign process group':<38} {'procs':>6} {'all gone s':>10} {'no temp s':>10}")
        print(f"{'one CBC run (reaper + PDEATHSIG)':<38} {n_procs:>6} {t_procs:>10.3f} {t_dirs:>10.3f}")


if __name__ == "__main__":
    main()
