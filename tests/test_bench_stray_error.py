"""A benchmark database row that stored a result and also an error text: a run that returns
a result records no error (`bench.record.execute_run`), so an error text beside a result
is an edited or damaged row, and `distplan verify DB` says so. A failed run's error text
(it stores no result) is no problem."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from distplan.bench.campaign import parse_campaign
from distplan.bench.runner import run_campaign
from distplan.bench.verify import verify_database


def test_an_error_text_beside_a_stored_result_is_a_problem(tmp_path: Path) -> None:
    campaign = parse_campaign({"name": "e", "time_limit": 10, "threads": 1, "formulations": ["megatron", "tap"], "backends": ["highs"], "instances": ["gpt-4layer-memtight"]}, base=tmp_path)
    db = tmp_path / "runs.db"
    run_campaign(campaign, db, progress=False)
    con = sqlite3.connect(str(db))
    rows = {f: (r, e) for f, r, e in con.execute("SELECT formulation, result_json, error FROM runs")}
    assert rows["megatron"][0] in (None, "") and rows["megatron"][1], "megatron does not fit: a failed run with its error"
    assert rows["tap"][0] and rows["tap"][1] is None
    report = verify_database(db)
    assert report.ok, report.problems
    con.execute("UPDATE runs SET error = ? WHERE formulation = 'tap'", ("NoSolutionError: nothing found\nmore",))
    con.commit()
    report = verify_database(db)
    assert not report.ok
    said = [p for p in report.problems if "error: 'NoSolutionError: nothing found'" in str(p)]
    assert said and "records no error" in str(said[0]), report.problems
