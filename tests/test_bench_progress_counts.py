"""One classification of bench runs for the progress line of ``distplan bench run``, the
report's main table (*limit*, *failed*) and its "Failed runs" section
(`distplan.bench.record.run_outcome`).

Audit: ``placement_milp`` on ``gpt2-xl-dgx1``, time limit 2 s, on highs, pulp-cbc, pyomo-cbc
and scip: the progress line said "solved 1 failed 3 (killed 3)" while the table said failed
0 and limit 1 on every backend and all 4 runs stored accepted plans, and "Failed runs"
listed the 3 ``killed`` runs with no error. A solver killed after its time limit + grace
that returned a plan is a time-limited run with a plan: a limit hit, never a failure.
The records are built directly (no solver runs): the classification is a pure function.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest

from distplan.bench.report import summary_json, write_report
from distplan.bench.runner import Progress
from distplan.bench.store import Store

_BASE: dict[str, Any] = {
    "instance": "gpt2-xl-dgx1",
    "instance_hash": "h1",
    "kind": "placement",
    "formulation": "placement_milp",
    "exact": 1,
    "bound_only": 0,
    "params_json": "{}",
    "options_json": '{"time_limit":2.0}',
    "time_limit": 2.0,
    "termination": "time_limit",
    "status": "feasible",
    "verdict": "accepted",
    "objective": 0.7225,
    "bound": 0.7103,
    "gap": 0.0169,
    "wall_seconds": 3.1,
}


def _rec(key: str, backend: str, **kw: Any) -> dict[str, Any]:
    return {**_BASE, "run_key": key, "backend": backend, **kw}


#: the audit's campaign: one run per backend, all with accepted plans; three solvers killed
AUDIT_RUNS = [
    _rec("r-highs", "highs"),
    _rec("r-pulp", "pulp-cbc", termination="killed"),
    _rec("r-pyomo", "pyomo-cbc", termination="killed"),
    _rec("r-scip", "scip", termination="killed"),
]
#: a run process killed without an answer (a hang: the error says so), and two failures
OTHER_RUNS = [
    _rec("r-hang", "pulp-highs", termination="killed", status="none", verdict=None, objective=None, gap=None,
         error="killed after 7.1 s: time limit 2.0 s + grace 5.0 s passed without an answer"),
    _rec("r-crash", "pyomo-highs", termination="crashed", status="none", verdict=None, objective=None, gap=None,
         error="the run process died from signal SIGSEGV"),
    _rec("r-etf", "highs", formulation="baechi_etf", exact=0, termination="infeasible", status="none", verdict=None,
         objective=None, bound=None, gap=None, error="baechi_etf: the ops do not fit the devices"),
]


@pytest.mark.parametrize(
    ("rec", "outcome"),
    [
        (AUDIT_RUNS[0], "limit"),  # time limit, accepted plan
        (AUDIT_RUNS[1], "limit"),  # killed after time limit + grace, accepted plan: not a failure
        (OTHER_RUNS[0], "limit"),  # killed without a plan: still a limit, not also a failure
        (OTHER_RUNS[1], "failed"),
        (OTHER_RUNS[2], "failed"),  # a heuristic's "infeasible" proves nothing
        (_rec("r-opt", "highs", termination="optimal", status="optimal", gap=0.0), "ok"),
        (_rec("r-err", "highs", termination="error", status="none", verdict=None), "failed"),
        (_rec("r-rej", "highs", termination="plan_rejected", verdict="rejected"), "failed"),
    ],
)
def test_run_outcome_counts_a_killed_run_with_a_plan_as_a_limit_hit(rec: dict[str, Any], outcome: str) -> None:
    from distplan.bench.record import run_outcome  # here: the views' tests below use the public commands only

    assert run_outcome(rec) == outcome


def _progress(runs: list[dict[str, Any]]) -> str:
    stream = io.StringIO()
    bar = Progress(len(runs), stream=stream, enabled=True, interval=0.0)
    for rec in runs:
        bar.add(rec)
    bar.finish()
    return stream.getvalue().strip().splitlines()[-1]


def _failed_section(report: str) -> list[list[str]]:
    """The rows (cells) of the report's "Failed runs" table; [] for "None."."""
    section = report.split("## Failed runs", 1)[1].strip().split("\n\n", 1)[0]
    if section == "None.":
        return []
    return [[c.strip() for c in line.strip("|").split("|")] for line in section.splitlines()[2:]]


def _db(tmp_path: Path, runs: list[dict[str, Any]]) -> Path:
    db = tmp_path / "runs.db"
    with Store(db) as store:
        for rec in runs:
            assert store.insert_run(rec)
    return db


def test_audit_campaign_progress_table_and_failed_section_all_say_limit_not_failed(tmp_path: Path) -> None:
    line = _progress(AUDIT_RUNS)
    assert "limit 4 (killed 3)" in line and "failed 0" in line, line
    db = _db(tmp_path, AUDIT_RUNS)
    rows = summary_json(db)["summary"]
    assert {(r["backend"], r["limit"], r["failed"]) for r in rows} == {(b, 1, 0) for b in ("highs", "pulp-cbc", "pyomo-cbc", "scip")}
    report = write_report(db, tmp_path / "report", figures=False).read_text()
    assert _failed_section(report) == []


def test_the_three_views_count_the_same_runs_as_limit_and_failed(tmp_path: Path) -> None:
    runs = AUDIT_RUNS + OTHER_RUNS
    line = _progress(runs)
    assert "limit 5 (killed 4)" in line and "failed 2" in line, line
    db = _db(tmp_path, runs)
    rows = summary_json(db)["summary"]
    assert sum(r["limit"] for r in rows) == 5 and sum(r["failed"] for r in rows) == 2
    report = write_report(db, tmp_path / "report", figures=False).read_text()
    failed = _failed_section(report)
    assert sorted((r[2], r[3]) for r in failed) == [("highs", "infeasible"), ("pyomo-highs", "crashed")]
    assert all(r[3] != "killed" for r in failed)
    # the hang is named (with its error) as stopped by a limit, not as failed
    hang = report.split("Stopped by a limit without a plan", 1)[1]
    assert "pulp-highs | killed | killed after 7.1 s" in hang
