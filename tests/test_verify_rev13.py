"""Review rev13b: what `distplan verify` re-checks against the evidence in a record.

Solver calls record their options and logs (a raised ``gap_tolerance`` is caught), bound
grades are re-derived from the calls that proved them, ``termination`` from the calls'
terminations; read-only commands refuse foreign databases; damaged fields are named
problems or errors, never tracebacks; the report never shows more than was proven.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

import distplan
from distplan.bench.campaign import load_campaign
from distplan.bench.report import summary_rows
from distplan.bench.runner import run_campaign
from distplan.bench.store import Store
from distplan.bench.verify import Audit, audit_columns, verify_database
from distplan.errors import InputError
from distplan.formulations.registry import Bound
from distplan.instances import load_instance
from distplan.models.common import canonical_json, write_json
from distplan.solvers.result import SolutionStatus, SolverResult, Termination
from distplan.verify import VerifyReport, check_result, verify_path, verify_result


def _doc(result: Any) -> dict[str, Any]:
    """The result as written to a file (a JSON round trip)."""
    return json.loads(canonical_json(result.to_dict()))


@pytest.fixture(scope="module")
def milp() -> dict[str, Any]:
    """An honest HiGHS MILP result (one solver call, proven optimal)."""
    return _doc(distplan.solve("placement-small-2", "placement_milp", time_limit=30))


@pytest.fixture(scope="module")
def inst2() -> Any:
    return load_instance("placement-small-2")


def _fields(problems: list[tuple[str, str]]) -> set[str]:
    return {name for name, _ in problems}


# -- 1: the gap tolerance against the solver calls' mip_gap --------------------------------------


def test_solver_calls_record_their_options(milp: dict[str, Any]) -> None:
    assert milp["solver_results"]
    for call in milp["solver_results"]:
        assert call["options"]["mip_gap"] == milp["gap_tolerance"]
        assert "time_limit" in call["options"]


def test_raised_gap_tolerance_in_a_file_is_caught(milp: dict[str, Any], inst2: Any) -> None:
    bad = copy.deepcopy(milp)
    bad["gap_tolerance"] = 0.2
    problems = check_result(bad, inst2)
    assert "gap_tolerance" in _fields(problems), problems


def test_raised_tolerance_caught_without_solver_calls() -> None:
    # a time-limited run can end before its MILP starts: the run's own options still say
    doc = _doc(distplan.solve("placement-small-4", "baechi_etf"))
    assert doc["solver_results"] == [] and doc["options"]["mip_gap"] == doc["gap_tolerance"]
    doc.update(status="optimal", gap_tolerance=0.5)
    assert "gap_tolerance" in _fields(check_result(doc, load_instance("placement-small-4")))


def test_records_without_options_verify_and_say_so_once(milp: dict[str, Any], inst2: Any) -> None:
    old = copy.deepcopy(milp)
    del old["record_version"]  # (results that kept no options recorded no format version either)
    del old["options"]
    for call in old["solver_results"]:
        del call["options"]
        del call["log"]
    # records that kept no options kept no bound kinds or links either (rev17: a record with
    # those is no old one); a solver bound without its link proves nothing, so the old
    # record's bound is its best other bound
    old["bounds"] = [{k: v for k, v in b.items() if k not in ("kind", "solver_call")} for b in old["bounds"] if "solver_call" not in b]
    old["bound"] = max(b["value"] for b in old["bounds"])
    old["bound_grade"] = next(b["grade"] for b in old["bounds"] if b["value"] == old["bound"])
    old["gap"] = (old["objective"] - old["bound"]) / old["objective"]
    old["gap_tolerance"] = 0.2  # nothing independent to compare it with: not a problem
    assert check_result(old, inst2) == []
    report = VerifyReport()
    verify_result(old, inst2, report)
    verify_result(old, inst2, report)
    notes = [n for n in report.notes if "not cross-checked" in n]
    assert len(notes) == 1 and report.ok


# -- 3: bound grades re-derived from the solver calls ---------------------------------------------


def test_mip_bound_upgraded_to_safe_everywhere_is_caught(milp: dict[str, Any], inst2: Any) -> None:
    bad = copy.deepcopy(milp)
    for entry in bad["bounds"]:
        if entry["value"] == bad["bound"]:
            entry["grade"] = "safe"
    bad["bound_grade"] = "safe"
    for call in bad["solver_results"]:
        call["bound_grade"] = "safe"
    problems = check_result(bad, inst2)
    assert any(name.endswith("bound_grade") and "integer" in msg for name, msg in problems), problems


def test_a_bound_names_the_solver_call_that_proved_it() -> None:
    from distplan.verify import check_solver_calls

    call = SolverResult("highs", "1", Termination.OPTIMAL, SolutionStatus.OPTIMAL, objective=2.0, bound=1.5, bound_grade="solver")
    assert Bound(1.5, "x dual bound", "solver", solver_call=0).to_dict()["solver_call"] == 0
    assert "solver_call" not in Bound(1.0, "critical path", "safe").to_dict()
    doc = {"termination": "optimal", "options": {}, "solver_results": [call.to_dict()], "bounds": [{"value": 1.5, "source": "x", "grade": "safe", "solver_call": 0}]}
    assert "bounds[0].grade" in _fields(check_solver_calls(doc))
    doc["bounds"][0].update(grade="solver", value=1.6)
    assert _fields(check_solver_calls(doc)) == {"bounds[0].value"}
    doc["bounds"][0]["value"] = 1.5
    assert check_solver_calls(doc) == []
    doc["bounds"][0]["solver_call"] = 3
    assert "bounds[0].solver_call" in _fields(check_solver_calls(doc))


def test_only_highs_lp_bounds_can_be_safe() -> None:
    from distplan.verify import check_solver_calls

    lp = SolverResult("highs", "1", Termination.OPTIMAL, SolutionStatus.OPTIMAL, objective=2.0, bound=1.5, bound_grade="safe", extra={"model": {"binaries": 0, "integers": 0}})
    assert check_solver_calls({"options": {}, "solver_results": [lp.to_dict()]}) == []
    cbc = copy.deepcopy(lp)
    cbc.backend = "pulp-cbc"
    assert "solver_results[0].bound_grade" in _fields(check_solver_calls({"options": {}, "solver_results": [cbc.to_dict()]}))


# -- 4: logs stored, capped with a marker --------------------------------------------------------


def test_solver_logs_are_stored_and_capped(milp: dict[str, Any]) -> None:
    from distplan.solvers.result import LOG_CAP_CHARS, capped_log

    assert all(isinstance(c["log"], str) and c["log"] for c in milp["solver_results"])
    long = "x" * (3 * LOG_CAP_CHARS)
    capped = capped_log(long)
    assert len(capped) < LOG_CAP_CHARS + 200 and "characters of this solver log omitted" in capped
    assert capped_log("short") == "short"
    back = SolverResult.from_dict(milp["solver_results"][0])
    assert back.options == milp["solver_results"][0]["options"] and back.log == milp["solver_results"][0]["log"]


# -- 6: termination against the solver calls -----------------------------------------------------


def test_termination_checked_against_the_calls(milp: dict[str, Any], inst2: Any) -> None:
    limited = copy.deepcopy(milp)
    limited["solver_results"][-1]["termination"] = "time_limit"
    limited["termination"] = "time_limit"
    assert "termination" not in _fields(check_result(limited, inst2))
    claimed = copy.deepcopy(limited)
    claimed["termination"] = "optimal"  # time_limit -> optimal
    assert "termination" in _fields(check_result(claimed, inst2))
    killed = copy.deepcopy(limited)
    killed["termination"] = "killed"  # nothing was killed
    assert "termination" in _fields(check_result(killed, inst2))


# -- honest records of every kind verify clean ---------------------------------------------------

HONEST = [
    ("placement-small-1", "baechi_etf", None),  # heuristic, no solver call
    ("placement-small-1", "baechi_sct", "highs"),  # LP: HiGHS's safe dual bound
    ("placement-small-1", "baechi_sct", "pulp-cbc"),
    ("placement-small-1", "placement_bounds", None),  # bounds only
    ("placement-small-4", "placement_milp", "pulp-cbc"),
    ("compression-mlp-small", "tag_sfb", None),
    ("pipeline-zb-p4-m12-comm1", "1f1b", None),
    ("gpt-2layer-2x2", "alpa_ilp", None),
    ("libra-gpt3-3d-total500", "equal_bw", None),
]


@pytest.mark.parametrize(("instance", "formulation", "backend"), HONEST)
def test_honest_results_verify_clean(instance: str, formulation: str, backend: str | None, tmp_path: Path) -> None:
    result = distplan.solve(instance, formulation, backend, time_limit=5)
    path = tmp_path / "r.json"
    write_json(result.to_dict(), path)
    report = verify_path(path)
    assert report.ok, report.problems
    assert not any("not cross-checked" in n or "without their logs" in n for n in report.notes)


@pytest.fixture(scope="module")
def bench_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    d = tmp_path_factory.mktemp("rev13")
    camp = d / "c.toml"
    camp.write_text(
        'name = "rev13"\ntime_limit = 5\nformulations = ["placement_milp", "baechi_sct", "placement_bounds"]\n'
        'backends = ["highs"]\ninstances = ["placement-small-1"]\n'
    )
    db = d / "c.db"
    run_campaign(load_campaign(camp), db, progress=False)
    return db


def test_honest_database_verifies_clean(bench_db: Path) -> None:
    report = verify_database(bench_db)
    assert report.ok, report.problems
    assert not any(n.startswith("MISSING") for n in report.notes)


def test_a_database_audit_says_what_verify_could_not_check(bench_db: Path, tmp_path: Path) -> None:
    """`distplan verify DB` shows the notes `distplan verify FILE` shows for a result (here
    a bound of a source verify does not know, below the result's bound)."""
    import shutil

    db = tmp_path / "noted.db"
    shutil.copy(bench_db, db)
    con = sqlite3.connect(db)
    key, text = next((k, t) for k, t, f in con.execute("SELECT run_key, result_json, formulation FROM runs") if f == "placement_milp")
    doc = json.loads(text)
    doc["bounds"].append({"value": 0.0, "source": "a bound of my own", "grade": "safe", "kind": "proof"})
    con.execute("UPDATE runs SET result_json = ? WHERE run_key = ?", (json.dumps(doc), key))
    con.commit()
    con.close()
    report = verify_database(db)
    assert report.ok, report.problems
    assert any("'a bound of my own'" in n and "a source verify does not know" in n for n in report.notes)


# -- 8: read-only commands refuse foreign databases, untouched -----------------------------------


def test_foreign_and_empty_databases_are_refused_untouched(tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    con = sqlite3.connect(foreign)
    con.execute("create table mine(a)")
    con.commit()
    con.close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    for path in (foreign, empty):
        before = path.read_bytes()
        with pytest.raises(InputError, match="not a benchmark database"):
            Store(path, create=False)
        assert path.read_bytes() == before
    with pytest.raises(InputError, match="not a benchmark database"):
        Store(foreign)  # a campaign does not write into another program's database either
    assert sqlite3.connect(foreign).execute("select name from sqlite_master").fetchall() == [("mine",)]


# -- 9: damaged fields are named, never tracebacks -----------------------------------------------


def test_info_that_is_not_an_object_is_a_problem(tmp_path: Path) -> None:
    doc = _doc(distplan.solve("placement-small-1", "baechi_etf"))
    doc["info"] = "x"
    path = tmp_path / "b.json"
    path.write_text(json.dumps(doc))
    report = verify_path(path)
    assert any("info" in p for p in report.problems)


def test_options_json_list_is_a_problem(bench_db: Path) -> None:
    run = Store(bench_db, create=False).runs()[0]
    run["options_json"] = "[1]"
    assert _fields(audit_columns(run, None)) == {"options_json"}


def test_binary_campaign_file_is_a_named_error(tmp_path: Path) -> None:
    path = tmp_path / "camp.bin"
    path.write_bytes(bytes(range(128, 256)))
    with pytest.raises(InputError, match="not UTF-8"):
        load_campaign(path)


# -- 12: runs missing from a campaign ------------------------------------------------------------


def test_deleted_run_is_reported(bench_db: Path, tmp_path: Path) -> None:
    from distplan.bench.verify import missing_runs

    assert missing_runs([{"name": "c", "planned": 3}], [{"campaign": "c", "run_key": k} for k in "abc"]) == []
    db = tmp_path / "d.db"
    db.write_bytes(bench_db.read_bytes())
    con = sqlite3.connect(db)
    con.execute("delete from runs where rowid = (select min(rowid) from runs)")
    con.commit()
    con.close()
    assert any(n.startswith("MISSING") and "1 not in the database" in n for n in verify_database(db).notes)


# -- 11, 14: the report never claims more than was proven ----------------------------------------


def _run(key: str, **kw: Any) -> dict[str, Any]:
    base = {"run_key": key, "instance_hash": "h", "instance": "i", "formulation": "f", "backend": "highs", "termination": "optimal",
            "status": "feasible", "exact": 1, "bound_only": 0, "verdict": "accepted", "gap": None, "time_limit": 10.0, "wall_seconds": 1.0}
    return {**base, **kw}


def test_displayed_bounds_round_down_objectives_up() -> None:
    from distplan.bench.report import _down, _up

    assert _down(107.99999957) == "107.999999"
    assert _up(107.99999957) == "108.000000"
    assert _up(0.1000000001, 3) == "0.101"
    assert _down(-0.0000001) == "-0.000001"


def test_open_gap_counts_every_unproven_exact_run_and_killed_once() -> None:
    runs = [
        _run("a", gap=0.033),  # folded: ended "optimal" on the folded model, gap open
        _run("b", termination="killed", status="none", verdict=None),
        _run("c", status="optimal", gap=0.0),
    ]
    row = summary_rows(runs, Audit())[0]
    assert row["limit_runs"] == 2 and row["mean_gap_at_limit"] == pytest.approx((0.033 + 1.0) / 2)
    assert row["limit"] == 1 and row["failed"] == 0


def test_bound_only_formulation_is_not_labelled_heuristic() -> None:
    rows = summary_rows([_run("a", exact=0, bound_only=1, status="none", verdict=None, bound=1.0, termination="finished")], Audit())
    assert rows[0]["bound_only"] and rows[0]["mean_gap_at_limit"] is None


# -- 5: bound_grade and gap_tolerance columns, old databases migrated ----------------------------


def test_database_records_grade_and_tolerance_and_migrates_old_ones(bench_db: Path, tmp_path: Path) -> None:
    from distplan.bench.report import export_csv

    runs = {r["formulation"]: r for r in Store(bench_db, create=False).runs()}
    milp = runs["placement_milp"]
    assert milp["bound_grade"] in ("safe", "solver") and milp["gap_tolerance"] == 1e-4
    tampered = {**milp, "bound_grade": "safe" if milp["bound_grade"] == "solver" else "solver"}
    assert "result_json.bound_grade" in _fields(audit_columns(tampered, None))
    old = tmp_path / "old.db"
    old.write_bytes(bench_db.read_bytes())
    con = sqlite3.connect(old)
    con.execute("alter table runs drop column bound_grade")
    con.execute("alter table runs drop column gap_tolerance")
    con.commit()
    con.close()
    assert verify_database(old).ok  # migrated: NULL columns, result_json still checked
    export_csv(old, tmp_path / "old.csv")
    header, *rows = (tmp_path / "old.csv").read_text().splitlines()
    assert "bound_grade" in header.split(",") and "gap_tolerance" in header.split(",")
    assert any("solver" in row or "safe" in row for row in rows)
