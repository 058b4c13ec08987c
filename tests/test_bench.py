"""Benchmark campaigns: expansion, isolated runs, kill and resume, Dask, reports, the audit."""

from __future__ import annotations

import contextlib
import csv
import json
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distplan
from distplan.bench.campaign import load_campaign, parse_bytes, parse_campaign, run_key
from distplan.bench.guarantees import InstanceFacts, etf_guarantee, hanen_munier_guarantee, no_comm_schedule_makespan
from distplan.bench.report import export_csv, export_parquet, profile_ratios, shifted_geometric_mean, write_report
from distplan.bench.runner import run_campaign
from distplan.bench.store import Store
from distplan.bench.verify import audit_database, verify_database
from distplan.errors import InputError
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict
from distplan.solvers.base import all_backends

try:
    import psutil
except ImportError:  # the orphan check needs psutil; everything else runs without it
    psutil = None

ROOT = Path(__file__).resolve().parents[1]
PREFERRED = ["highs", "pulp-cbc", "scip", "pyomo-highs", "pulp-highs"]
_AVAILABLE = {b.name for b in all_backends() if b.available() and b.capabilities.milp}
BACKENDS = [b for b in PREFERRED if b in _AVAILABLE][:3]

# 10 tiny instances (4 and 6 ops on 2 devices, 5 seeds) x 2 formulations x 3 backends = 60 runs
CAMPAIGN = f"""
name = "test-3x20x2"
time_limit = 20.0
grace = 5.0
threads = 1
formulations = ["placement_milp", "baechi_sct"]
backends = {json.dumps(BACKENDS)}
instances = [{{generator = "random_layered_dag", n_ops = [4, 6], seed = [0, 1, 2, 3, 4], n_devices = 2}}]
"""
N_INSTANCES = 10
N_RUNS = N_INSTANCES * 2 * len(BACKENDS)


def _cli(*args: str, **kwargs: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-m", "distplan", *args], cwd=ROOT, env=env, **kwargs)


def _rows(db: Path) -> dict[str, tuple[Any, ...]]:
    con = sqlite3.connect(str(db), timeout=30)
    try:
        return {r[0]: r[1:] for r in con.execute("SELECT run_key, termination, status, objective, bound, verdict FROM runs")}
    finally:
        con.close()


def _count(db: Path) -> int:
    if not db.exists():
        return 0
    try:
        con = sqlite3.connect(str(db), timeout=5)
        try:
            return int(con.execute("SELECT COUNT(*) FROM runs").fetchone()[0])
        finally:
            con.close()
    except sqlite3.OperationalError:  # the table does not exist yet
        return 0


def _alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


@pytest.fixture(scope="module")
def campaign_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("campaign")
    path = d / "c.toml"
    path.write_text(CAMPAIGN)
    return path


@pytest.fixture(scope="module")
def local_db(campaign_file: Path) -> dict[str, Any]:
    """The 60-run campaign through the CLI, killed (SIGKILL) a third of the way, then run again."""
    if len(BACKENDS) < 3:
        pytest.skip(f"needs 3 MILP backends, found {BACKENDS}")
    db = campaign_file.with_name("local.db")
    with open(campaign_file.with_name("first.log"), "wb") as log:
        proc = _cli("bench", "run", str(campaign_file), "--db", str(db), "--jobs", "2", stdout=log, stderr=subprocess.STDOUT)
        deadline = time.time() + 120
        while _count(db) < N_RUNS // 3 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert proc.poll() is None, "the campaign finished before it could be interrupted"
        descendants: list[Any] = []
        if psutil is not None:
            with contextlib.suppress(psutil.Error):
                descendants = psutil.Process(proc.pid).children(recursive=True)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    before = _rows(db)
    # the fork server sees its driver vanish and takes every run process with it
    alive = psutil.wait_procs(descendants, timeout=15)[1] if psutil is not None else []
    second = _cli("bench", "run", str(campaign_file), "--db", str(db), "--jobs", "2", "--quiet", stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = second.communicate(timeout=300)
    return {"db": db, "before": before, "orphans": [p.pid for p in alive], "rc": second.returncode, "out": out.decode(), "err": err.decode()}


# -- campaigns ------------------------------------------------------------------------------------


def test_campaign_expands_into_stable_keys(campaign_file: Path) -> None:
    c = load_campaign(campaign_file)
    specs = c.runs()
    assert len(c.instances) == N_INSTANCES and len({i.instance_hash for i in c.instances}) == N_INSTANCES
    assert len(specs) == N_RUNS and len({s["run_key"] for s in specs}) == N_RUNS
    again = load_campaign(campaign_file).runs()
    assert [s["run_key"] for s in specs] == [s["run_key"] for s in again]
    opts = dict(specs[0]["options"])
    key = run_key(specs[0]["instance_hash"], "placement_milp", {}, "highs", opts, 0, 0)
    assert key == run_key(specs[0]["instance_hash"], "placement_milp", {}, "highs", {**opts, "grace": 99.0}, 0, 0)
    assert key != run_key(specs[0]["instance_hash"], "placement_milp", {}, "highs", {**opts, "time_limit": 1.0}, 0, 0)
    assert key != run_key(specs[0]["instance_hash"], "placement_milp", {}, "highs", opts, 1, 0)


def test_campaign_options_bundled_globs_and_algorithms_once(tmp_path: Path) -> None:
    c = parse_campaign(
        {
            "time_limit": 5,
            "seeds": [0, 1],
            "repetitions": 2,
            "formulations": ["baechi_etf", {"name": "baechi_sct", "params": {"theta": 0.1}}],
            "backends": ["highs", "pulp-cbc"],
            "instances": ["placement-small-[12]"],
        },
        base=tmp_path,
    )
    specs = c.runs()
    assert {i.name for i in c.instances} == {"placement-small-1", "placement-small-2"}
    etf = [s for s in specs if s["formulation"] == "baechi_etf"]
    sct = [s for s in specs if s["formulation"] == "baechi_sct"]
    assert len(etf) == 2 * 2 * 2  # instances x seeds x repetitions, one backend (an algorithm)
    assert len(sct) == 2 * 2 * 2 * 2 and all(s["params"] == {"theta": 0.1} for s in sct)
    assert parse_bytes("4 GiB", "m") == 4 * 2**30 and parse_bytes("512MB", "m") == 512 * 10**6


@pytest.mark.parametrize(
    ("data", "path"),
    [
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "colour": 1}, "colour"),
        ({"formulations": ["baechi_etf"], "instances": ["no-such-instance"]}, "instances[0]"),
        ({"formulations": ["baechi_etf"], "instances": [{"generator": "random_layered_dag", "n_ops": [0]}]}, "instances[0].n_ops"),
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "time_limit": -1}, "time_limit"),
        ({"formulations": [{"name": "baechi_sct", "params": {"tehta": 1}}], "instances": ["placement-small-1"]}, "formulations[0].params.tehta"),
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "backends": ["gurobi-9000"]}, "backends[0]"),
        # review rev11: these loaded, and every run then crashed or was stored as input_error, exit 0
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "time_limit": float("inf")}, "time_limit"),
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "grace": float("inf")}, "grace"),
        ({"formulations": ["baechi_etf"], "instances": ["placement-small-1"], "mip_gap": 5}, "mip_gap"),
        ({"formulations": [{"name": "baechi_sct", "params": {"theta": "x"}}], "instances": ["placement-small-1"]}, "formulations[0].params.theta"),
        ({"formulations": ["placement_milp"], "instances": ["placement-small-1"], "solver_options": {"highs": {"no_such_option": 1}}}, "solver_options.highs.no_such_option"),
        ({"formulations": ["placement_milp"], "instances": ["placement-small-1"], "solver_options": {"nobackend": {"x": 1}}}, "solver_options.nobackend"),
    ],
)
def test_campaign_errors_name_the_field(tmp_path: Path, data: dict[str, Any], path: str) -> None:
    with pytest.raises(InputError) as err:
        parse_campaign(data, base=tmp_path).runs()
    assert err.value.path == path


# -- runs, kill and resume ---------------------------------------------------------------------------


def test_killed_campaign_resumes_with_every_run_exactly_once(local_db: dict[str, Any], campaign_file: Path) -> None:
    assert local_db["rc"] == 0, local_db["err"]
    before = local_db["before"]
    assert 0 < len(before) < N_RUNS
    rows = _rows(local_db["db"])
    assert len(rows) == N_RUNS
    con = sqlite3.connect(str(local_db["db"]))
    assert con.execute("SELECT COUNT(DISTINCT run_key), COUNT(*) FROM runs").fetchone() == (N_RUNS, N_RUNS)
    con.close()
    assert set(rows) == {s["run_key"] for s in load_campaign(campaign_file).runs()}
    for key, values in before.items():  # nothing stored before the kill was lost or rewritten
        assert rows[key] == values
    assert f"{len(before)} already stored" in local_db["out"]
    assert not local_db["orphans"], "run processes outlived their killed driver"
    assert all(v[0] in ("optimal", "finished") and v[4] == "accepted" for v in rows.values())


def test_milp_backends_agree_on_every_instance(local_db: dict[str, Any]) -> None:
    with Store(local_db["db"]) as store:
        runs = store.runs("formulation = 'placement_milp'")
    best: dict[str, list[float]] = {}
    for r in runs:
        assert r["status"] == "optimal" and r["peak_memory_bytes"] > 0 and r["process_seconds"] > 0
        best.setdefault(r["instance_hash"], []).append(r["objective"])
    assert len(best) == N_INSTANCES
    for values in best.values():
        assert max(values) == pytest.approx(min(values), rel=1e-6)


def test_hanging_and_crashing_runs_are_recorded_and_the_campaign_continues(tmp_path: Path) -> None:
    c = parse_campaign(
        {
            "time_limit": 20,
            "formulations": [
                "baechi_etf",
                {"name": "baechi_topo", "time_limit": 0.5, "grace": 0.3, "_test_hang_seconds": 120},
                {"name": "single_device", "_test_exit_code": 3},
                {"name": "baechi_sct", "_test_stray_pidfile": str(tmp_path / "stray.pid")},
            ],
            "instances": [{"generator": "random_layered_dag", "n_ops": [5, 6], "seed": 0, "n_devices": 2}],
        },
        base=tmp_path,
    )
    t0 = time.perf_counter()
    counts = run_campaign(c, tmp_path / "h.db", jobs=2, progress=False)
    assert time.perf_counter() - t0 < 30
    assert counts["stored"] == 8
    with Store(tmp_path / "h.db") as store:
        runs = {(r["instance"], r["formulation"]): r for r in store.runs()}
    for (_, form), r in runs.items():
        if form == "baechi_topo":
            assert r["termination"] == "killed" and r["status"] == "none"
            assert r["process_seconds"] < 5.0 and "time limit 0.5 s + grace 0.3 s" in r["error"]
            assert "test hook: sleeping" in r["error"]  # the stderr tail
        elif form == "single_device":
            assert r["termination"] == "crashed" and "exited with code 3" in r["error"] and "test hook" in r["error"]
        elif form == "baechi_sct":
            assert r["verdict"] == "accepted" and "left behind in its session were killed" in r["error"]
        else:
            assert r["termination"] == "finished" and r["verdict"] == "accepted"
    stray = int((tmp_path / "stray.pid").read_text())
    assert not _alive(stray), "a process the run left behind survived it"


def test_the_same_campaign_on_a_dask_local_cluster_matches(local_db: dict[str, Any], campaign_file: Path, tmp_path: Path) -> None:
    distributed = pytest.importorskip("distributed")
    db = tmp_path / "dask.db"
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        counts = run_campaign(load_campaign(campaign_file), db, executor="dask", client=client, progress=False)
    assert counts["stored"] == N_RUNS
    local, remote = _rows(local_db["db"]), _rows(db)
    assert set(local) == set(remote)
    for key, (term, status, obj, bound, verdict) in local.items():
        r_term, r_status, r_obj, r_bound, r_verdict = remote[key]
        assert (term, status, verdict) == (r_term, r_status, r_verdict)
        assert r_obj == pytest.approx(obj, rel=1e-9)
        assert r_bound == pytest.approx(bound, rel=1e-6)
    with Store(db) as store:
        assert {r["executor"] for r in store.runs()} == {"dask"}


# -- reports, exports and the audit -------------------------------------------------------------------------


def test_report_and_exports(local_db: dict[str, Any], tmp_path: Path) -> None:
    md = write_report(local_db["db"], tmp_path / "rep")
    text = md.read_text()
    for backend in BACKENDS:
        assert f"| placement_milp | {backend} |" in text
    assert "Wrong answers: **0**" in text
    for fig in ("profile-placement_milp.png", "profile-baechi_sct.png", "time-to-target.png", "heuristic-quality.png"):
        assert (tmp_path / "rep" / fig).stat().st_size > 1000
        assert fig in text
    n = export_csv(local_db["db"], tmp_path / "runs.csv")
    with open(tmp_path / "runs.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert n == len(rows) == N_RUNS and "plan_json" not in rows[0] and rows[0]["instance_hash"]
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="pyarrow"):
            export_parquet(local_db["db"], tmp_path / "runs.parquet")
    else:
        assert export_parquet(local_db["db"], tmp_path / "runs.parquet") == N_RUNS


def test_verify_cli_accepts_the_clean_database(local_db: dict[str, Any]) -> None:
    report = verify_database(local_db["db"])
    assert report.ok, report.problems[:3]
    assert report.checked == N_RUNS
    proc = _cli("verify", str(local_db["db"]), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and b"0 problem(s)" in out


def test_the_audit_catches_impossible_bounds_wrong_objectives_and_false_optima(local_db: dict[str, Any], tmp_path: Path) -> None:
    db = tmp_path / "tampered.db"
    shutil.copy(local_db["db"], db)
    with Store(db) as store:
        milp = sorted(store.runs("formulation = 'placement_milp'"), key=lambda r: (r["instance_hash"], r["backend"]))
        first, second = milp[0], milp[1]
        assert first["instance_hash"] == second["instance_hash"]
        # 1. a time-limited run of the same formulation whose "proven" bound is above a feasible objective
        fake = {**first, "run_key": "f" * 24, "backend": "scip", "termination": "time_limit", "status": "none", "objective": None, "plan_json": None, "bound": first["objective"] * 1.5, "gap": None}
        assert store.insert_run(fake)
        assert not store.insert_run(fake)  # a key is stored once
        # 2. a heuristic row whose stored objective is not what its plan achieves
        sct = store.runs("formulation = 'baechi_sct' AND instance_hash = ?", (second["instance_hash"],))[0]
        store.conn.execute("UPDATE runs SET objective = objective * 0.9, bound = NULL WHERE run_key = ?", (sct["run_key"],))
        # 3. an "optimal" with a bound far below the objective
        store.conn.execute("UPDATE runs SET bound = objective * 0.5 WHERE run_key = ?", (second["run_key"],))
        store.conn.commit()
    audit = audit_database(db)
    by_run: dict[str, list[Any]] = {}
    for f in audit.findings:
        by_run.setdefault(f.run_key, []).append(f)
    assert set(by_run) == {"f" * 24, sct["run_key"], second["run_key"]}  # nothing else is blamed
    disagreement = [f for f in by_run["f" * 24] if f.category == "solver disagreement"]
    assert len(disagreement) == 1 and disagreement[0].other_run_key is not None
    assert disagreement[0].other_run_key in disagreement[0].message and "f" * 24 in disagreement[0].message
    assert "run_key mismatch" in {f.category for f in by_run["f" * 24]}  # not the hash of its columns
    assert "objective mismatch" in {f.category for f in by_run[sct["run_key"]]}  # the evaluator disagrees
    assert "result_json.objective mismatch" in {f.category for f in by_run[sct["run_key"]]}  # and so does result_json
    assert "optimal claim" in {f.category for f in by_run[second["run_key"]]}
    report = verify_database(db)
    assert not report.ok and len(report.problems) == len(audit.findings)
    text = write_report(db, tmp_path / "rep", figures=False).read_text()
    assert "Wrong answers: **3**" in text and "solver disagreement" in text


# -- statistics ----------------------------------------------------------------------------------------


def test_shifted_geometric_mean_and_profiles() -> None:
    assert shifted_geometric_mean([0.0, 0.0]) == pytest.approx(0.0)
    assert shifted_geometric_mean([10.0, 30.0]) == pytest.approx(math.sqrt(20 * 40) - 10)
    assert shifted_geometric_mean([5.0], shift=1.0) == pytest.approx(5.0)
    runs = []
    for h, times in (("a", {"x": 1.0, "y": 2.0}), ("b", {"x": 3.0, "y": 1.5})):
        for b, t in times.items():
            runs.append({"run_key": f"{h}{b}", "instance_hash": h, "backend": b, "formulation": "f", "params_json": "{}", "wall_seconds": t, "termination": "optimal", "status": "optimal", "exact": 1})
    runs.append({"run_key": "cy", "instance_hash": "c", "backend": "y", "formulation": "f", "params_json": "{}", "wall_seconds": 4.0, "termination": "optimal", "status": "optimal", "exact": 1})
    runs.append({"run_key": "cx", "instance_hash": "c", "backend": "x", "formulation": "f", "params_json": "{}", "wall_seconds": 9.0, "termination": "killed", "status": "none", "exact": 1})
    ratios = profile_ratios(runs, "f", set())
    assert ratios["x"] == [1.0, 2.0, math.inf]
    assert ratios["y"] == [2.0, 1.0, 1.0]


# -- guarantees -------------------------------------------------------------------------------------------


def _run(inst: Any, form: str, objective: float, params: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"run_key": "k", "instance": inst.name, "formulation": form, "backend": "highs", "objective": objective, "params_json": json.dumps(params or {})}


def test_etf_guarantee_flags_only_certain_violations() -> None:
    inst = instance_from_dict(random_layered_dag(10, n_devices=2, seed=3))
    res = distplan.solve(inst, "baechi_etf")
    facts = InstanceFacts(best_objective=res.objective, best_bound=res.bound)
    ok = etf_guarantee(inst, _run(inst, "baechi_etf", res.objective), facts)
    assert ok.applies and ok.verdict == "holds" and ok.rhs_lower <= ok.rhs_upper
    bad = etf_guarantee(inst, _run(inst, "baechi_etf", ok.rhs_upper * 1.01), facts)
    assert bad.verdict == "violated"
    maybe = etf_guarantee(inst, _run(inst, "baechi_etf", (ok.rhs_lower + ok.rhs_upper) / 2), facts)
    assert maybe.verdict == ("possibly violated" if ok.rhs_upper > ok.rhs_lower * (1 + 1e-6) else "holds")
    hetero = instance_from_dict(random_layered_dag(6, n_devices=2, seed=1))
    hetero.time[:, 1] *= 2  # devices no longer identical
    assert not etf_guarantee(hetero, _run(hetero, "baechi_etf", 1.0), facts).applies


def test_hanen_munier_applies_only_with_small_communication() -> None:
    small = instance_from_dict(random_layered_dag(10, n_devices=3, seed=2, comm_scale=0.01))
    big = instance_from_dict(random_layered_dag(10, n_devices=3, seed=2, comm_scale=2.0))
    facts = InstanceFacts(best_objective=1.0, best_bound=0.9)
    check = hanen_munier_guarantee(small, _run(small, "baechi_sct", 1.0), facts)
    assert check.applies and not check.binding and "rho" in check.precondition
    bw, lat = small.bandwidth[0, 1], small.latency[0, 1]
    rho = float((lat + small.edge_bytes / bw).max() / small.time[:, 0].min())
    assert 0 < rho <= 1
    ratio = 1 + (1 - 1 / 3) * (2 + 2 * rho) / (2 + rho)
    assert check.rhs_upper == pytest.approx(ratio * 1.0) and check.rhs_lower == pytest.approx(ratio * 0.9)
    assert hanen_munier_guarantee(small, _run(small, "baechi_sct", ratio * 1.0001), facts).verdict == "violated"
    assert not hanen_munier_guarantee(big, _run(big, "baechi_sct", 1.0), facts).applies
    assert not hanen_munier_guarantee(small, _run(small, "baechi_sct", 1.0, {"theta": 0.1}), facts).applies


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_ops=st.integers(2, 14), n_devices=st.integers(1, 3), seed=st.integers(0, 10_000), comm=st.sampled_from([0.05, 0.5, 2.0]))
def test_m_etf_meets_hwangs_guarantee_on_random_instances(n_ops: int, n_devices: int, seed: int, comm: float) -> None:
    """Baechi's m-ETF without binding memory is ETF: it must satisfy (2 - 1/m) OPT_nc + C_max."""
    inst = instance_from_dict(random_layered_dag(n_ops, n_devices=n_devices, seed=seed, comm_scale=comm))
    res = distplan.solve(inst, "baechi_etf")
    p = inst.time[:, 0]
    ub = no_comm_schedule_makespan(inst.n_ops, inst.n_devices, p, inst.src, inst.dst)
    assert ub >= max(p.sum() / n_devices, p.max()) - 1e-12
    check = etf_guarantee(inst, _run(inst, "baechi_etf", res.objective), InstanceFacts(best_objective=res.objective, best_bound=res.bound))
    assert check.applies and check.verdict != "violated", (check.objective, check.rhs_upper)
    assert np.isfinite(check.rhs_lower)


def test_entries_differing_by_label_or_options_are_reported_apart(tmp_path: Path) -> None:
    """Two entries of one formulation, told apart only by their label or their own options,
    were merged in the report under the formulation's name (review rev11): the label is
    stored (a column added to older databases when opened) and groups the summary."""
    from distplan.bench.report import summary_json

    data = {
        "name": "labels",
        "time_limit": 10,
        "formulations": [{"name": "baechi_etf", "time_limit": 5}, {"name": "baechi_etf", "label": "etf-again"}],
        "instances": ["placement-small-1"],
    }
    db = tmp_path / "labels.db"
    counts = run_campaign(parse_campaign(data, base=tmp_path), db, progress=False)
    assert counts["stored"] == 2
    labels = sorted(row["formulation"] for row in summary_json(db)["summary"])  # (its label)
    assert labels == ["baechi_etf[time_limit=5.0]", "etf-again"]
    con = sqlite3.connect(str(db))  # a database written before the label column
    con.execute("ALTER TABLE runs DROP COLUMN label")
    con.commit()
    con.close()
    with Store(db, create=False) as store:
        assert {r["label"] for r in store.runs()} == {None}
    assert [row["formulation"] for row in summary_json(db)["summary"]] == ["baechi_etf"]
