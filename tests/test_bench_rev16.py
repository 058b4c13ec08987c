"""Review rev16c, bench harness: exports that would overwrite the database (D6), report
folders made for a database that is refused (D7), an interrupted campaign's report (D8),
and per-instance cells over several runs (D9).

The database is built in this process (no campaign driver, no solver process): baechi_etf
on three small placement instances on two backends, one run left out as if the campaign
had been interrupted. About 1 s."""

from __future__ import annotations

import hashlib
import os
import sqlite3
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from distplan.bench.campaign import parse_campaign
from distplan.bench.record import execute_run
from distplan.bench.report import _cell, export_csv, export_parquet, shifted_geometric_mean, summary_json, write_report
from distplan.bench.store import Store
from distplan.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
CAMPAIGN = """
name = "cut"
time_limit = 5.0
threads = 1
algorithms_once = false
formulations = ["baechi_etf"]
backends = ["highs", "pulp-cbc"]
instances = ["placement-small-1", "placement-small-2", "placement-small-3"]
"""


@pytest.fixture(scope="module")
def cut_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """6 runs planned, 5 stored: pulp-cbc's run on placement-small-3 is missing."""
    d = tmp_path_factory.mktemp("rev16")
    campaign = parse_campaign(tomllib.loads(CAMPAIGN), base=d, source=str(d / "cut.toml"), text=CAMPAIGN)
    specs = campaign.runs()
    assert len(specs) == 6
    db = d / "cut.db"
    with Store(db) as store:
        for inst in campaign.instances:
            store.add_instance(inst.instance_hash, inst.name, inst.kind, inst.document)
        store.add_campaign(campaign.name, campaign.source, campaign.text, len(specs))
        for spec in specs:
            if not (spec["backend"] == "pulp-cbc" and spec["instance"] == "placement-small-3"):
                assert store.insert_run(execute_run(spec))
    return db


def _md5(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()


def _is_benchmark_db(path: Path) -> bool:
    with Store(path, create=False) as store:
        return store.count() == 5


# -- D6 -------------------------------------------------------------------------------------------------


def test_export_refuses_to_write_over_the_database(cut_db: Path, tmp_path: Path) -> None:
    """`bench export victim.db --csv victim.db` wrote the CSV over the database, exit 0
    ("wrote 9 runs to victim.db"), after which verify said "not a benchmark database"
    (review rev16c D6). The database itself under any name (same path, another relative
    path, a symlink, a hard link), its SQLite side files and any other SQLite file are
    refused by every export, before anything is written."""
    db = tmp_path / "victim.db"
    db.write_bytes(cut_db.read_bytes())
    before = _md5(db)
    (tmp_path / "link.db").symlink_to(db)
    os.link(db, tmp_path / "hard.db")
    other = tmp_path / "other.sqlite"
    con = sqlite3.connect(str(other))
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    other_before = _md5(other)
    cases = [
        (db, "itself"),
        (tmp_path / "." / "victim.db", "itself"),
        (tmp_path / "link.db", "itself"),
        (tmp_path / "hard.db", "itself"),
        (Path(str(db) + "-wal"), "wal file"),
        (other, "is a SQLite database"),
    ]
    for export in (export_csv, export_parquet):
        for target, what in cases:
            with pytest.raises(InputError, match=what):
                export(db, target)
        with pytest.raises(InputError, match="itself"):  # the database named through the link
            export(tmp_path / "link.db", db)
    assert _md5(db) == before and _md5(other) == other_before and _is_benchmark_db(db)
    assert export_csv(db, tmp_path / "runs.csv") == 5  # an ordinary file is still written
    # the command line: a named error, exit 2, the database untouched
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "distplan", "bench", "export", str(db), "--csv", str(db)], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    # (the command line's check that no output is a file the command reads comes first)
    assert f"--csv: cannot write {db}: it is the file the command reads" in proc.stderr and "Traceback" not in proc.stderr
    assert "wrote" not in proc.stdout + proc.stderr
    assert _md5(db) == before


# -- D7 -------------------------------------------------------------------------------------------------


def test_report_on_a_refused_database_creates_no_folder(tmp_path: Path) -> None:
    """`bench report missing.db` exited 2 but first made `missing-report/`, and `--out a/b/c`
    the whole chain (review rev16c D7): the database is checked before anything is made."""
    (tmp_path / "text.db").write_text("not a database\n")
    con = sqlite3.connect(str(tmp_path / "foreign.db"))
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with Store(tmp_path / "empty.db"):  # a benchmark database without runs
        pass
    for name in ("missing.db", "text.db", "foreign.db", "empty.db"):
        db = tmp_path / name
        with pytest.raises(InputError):
            write_report(db, tmp_path / "a" / "b" / "c", figures=False)
        with pytest.raises(InputError):
            write_report(db, figures=False)  # the default folder, DB-report
        assert not (tmp_path / "a").exists()
        assert not (tmp_path / (db.stem + "-report")).exists()


def test_report_never_writes_over_the_database(cut_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "report.md"  # a database that happens to carry the report's file name
    db.write_bytes(cut_db.read_bytes())
    with pytest.raises(InputError, match="itself"):
        write_report(db, tmp_path, figures=False)
    assert _is_benchmark_db(db)


# -- D8 -------------------------------------------------------------------------------------------------


def test_report_of_an_interrupted_campaign_counts_missing_runs_and_compares_common_instances(cut_db: Path, tmp_path: Path) -> None:
    """An interrupted campaign's report gave each backend an SGM over its own instances
    (HiGHS 6, CBC 5) and did not say that 11 of 16 planned runs were stored (review rev16c
    D8). It now names the missing runs, compares the backends on the instances both have,
    says which instance is left out, and gives the SGM over the instances all solved."""
    text = write_report(cut_db, tmp_path / "rep", figures=False).read_text()
    assert "campaign `cut` planned 6 runs; 5 are stored and **1 is missing**" in text
    assert "baechi_etf / pulp-cbc: 1 (placement-small-3)" in text
    assert "**Not compared:** baechi_etf is compared on the 2 instances" in text
    assert "placement-small-3 (runs on highs only)" in text
    assert "on 2 of 3 instances" in text
    assert "No formulation ran on two or more backends" not in text  # it did; figures were not asked for

    data = summary_json(cut_db)
    assert data["planned_runs"] == [
        {"campaign": "cut", "planned": 6, "stored": 5, "missing": [{"instance": "placement-small-3", "label": "baechi_etf", "backend": "pulp-cbc", "seed": 0, "repetition": 0}]}
    ]
    with Store(cut_db, create=False) as store:
        runs = store.runs()
    rows = {row["backend"]: row for row in data["summary"]}
    for backend, row in rows.items():
        common = [float(r["wall_seconds"]) for r in runs if r["backend"] == backend and r["instance"] != "placement-small-3"]
        own = [float(r["wall_seconds"]) for r in runs if r["backend"] == backend]
        assert row["compared_instances"] == 2 and row["all_solved_instances"] == 2
        assert row["sgm_seconds"] == pytest.approx(shifted_geometric_mean(common))
        assert row["sgm_seconds_all_solved"] == pytest.approx(shifted_geometric_mean(common))
        assert row["sgm_seconds_own"] == pytest.approx(shifted_geometric_mean(own))
    assert rows["highs"]["instances"] == 3 and rows["pulp-cbc"]["instances"] == 2


def test_report_of_a_complete_campaign_says_so(cut_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "whole.db"
    db.write_bytes(cut_db.read_bytes())
    with Store(db) as store:
        store.conn.execute("DELETE FROM runs WHERE instance = 'placement-small-3'")
        store.conn.execute("UPDATE campaigns SET text = replace(text, ', \"placement-small-3\"', '')")
        store.conn.commit()
    text = write_report(db, tmp_path / "rep", figures=False).read_text()
    assert "Campaign `cut` planned 4 runs; all are stored." in text
    assert "Not compared" not in text and " of 2 instances" not in text


# -- D9 -------------------------------------------------------------------------------------------------


def _run(seed: int, wall: float, gap: float | None, objective: float, termination: str = "time_limit", status: str = "feasible") -> dict[str, Any]:
    return {"run_key": f"k{seed}", "exact": True, "bound_only": False, "status": status, "termination": termination, "verdict": "accepted", "wall_seconds": wall, "gap": gap, "objective": objective}


def test_a_cell_of_several_runs_shows_their_ranges_not_the_fastest_run() -> None:
    """Two seeds that both hit the limit read `3.16 lim 21.0% x1.077 (2 runs)`: the fastest
    run's gap and objective (the worse ones) beside a count that reads as a summary of both
    (review rev16c D9). Each figure is now its range over the runs."""
    best = 0.0338886362742959
    rs = [_run(0, 3.18927127899951, 0.135677517877734, 0.0338886362742959), _run(1, 3.16018613699998, 0.209393408472052, 0.0364841584423315)]
    assert _cell(rs, best, set()) == "3.16–3.19 lim 13.6–21.0% x1.000–1.077 (2 runs)"
    mixed = [_run(0, 1.5, None, best, termination="optimal", status="optimal"), _run(1, 3.2, 0.2, best * 1.5)]
    assert _cell(mixed, best, set()) == "1.50–3.20 opt×1 lim×1 20.0% x1.000–1.500 (2 runs)"
    assert _cell(rs[:1], best, set()) == "3.19 lim 13.6%"  # one run: as before
    assert _cell([_run(0, 2.0, 0.1, best), _run(1, 2.0, 0.1, best)], best, set()) == "2.00 lim 10.0% (2 runs)"
