"""`distplan verify`: one optimality rule, every stored claim recomputed (issue 15 item 3).

A table of tampers, each applied to an honest result file and to an honest benchmark
database: verify must exit 1 with a message naming the field. Honest results, including
an "optimal" whose gap (3e-5) is inside the recorded tolerance (1e-4), must pass.
"""

from __future__ import annotations

import copy
import json
import math
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import distplan
from distplan.bench.campaign import parse_campaign
from distplan.bench.runner import run_campaign
from distplan.bench.verify import verify_database
from distplan.cli import main as cli_main
from distplan.cli.bench import verify_target
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict
from distplan.solvers.result import relative_gap
from distplan.verify import VerifyReport, check_result

# memory binds: no device holds more than 60% of the ops' memory
GEN = {"generator": "random_layered_dag", "n_ops": 8, "seed": 0, "n_devices": 2, "memory_fraction": 0.6}
Doc = dict[str, Any]


def _instance() -> Any:
    args = {k: v for k, v in GEN.items() if k != "generator"}
    return instance_from_dict(random_layered_dag(**args))


def _serial_on_one_device(doc: Doc) -> Doc:
    """The plan moved to one device in topological order: no overlap, but memory breaks."""
    inst = _instance()
    starts: dict[str, float] = {}
    t = 0.0
    for i in inst.topo_order():
        starts[inst.op_names[i]] = t
        t += float(inst.time[i, 0])
    return {"device": {op: inst.device_names[0] for op in doc["plan"]["device"]}, "start": starts}


def _with_gap(doc: Doc, bound: float) -> None:
    """The result's best bound moved to ``bound`` (in the list of bounds too), gap to match."""
    for entry in doc.get("bounds") or []:
        if entry.get("value") == doc["bound"]:
            entry["value"] = bound
    doc["bound"] = bound
    doc["gap"] = relative_gap(doc["objective"], bound)


def _lower_objective(d: Doc) -> None:
    d["objective"] *= 0.99
    _with_gap(d, min(d["bound"], d["objective"]))  # bound and gap kept consistent with it


def _raise_bound(d: Doc) -> None:
    _with_gap(d, d["objective"] * 1.01)


def _break_memory(d: Doc) -> None:
    d["plan"] = _serial_on_one_device(d)


def _open_gap_optimal(d: Doc) -> None:
    _with_gap(d, d["objective"] * 0.9)  # consistent gap 0.1, status still "optimal"


def _contradicting_gap(d: Doc) -> None:
    d["gap"] = 0.05


#: (name, tamper, the field the message must name)
TAMPERS: list[tuple[str, Callable[[Doc], None], str]] = [
    ("objective lowered", _lower_objective, "objective"),
    ("bound raised above the objective", _raise_bound, "bound"),
    ("plan breaks memory", _break_memory, "plan"),
    ("optimal with an open gap", _open_gap_optimal, "status"),
    ("stored gap contradicts objective and bound", _contradicting_gap, "gap"),
]


@pytest.fixture(scope="module")
def honest(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """An honest placement_milp result (file) and a small honest database."""
    d = tmp_path_factory.mktemp("verify")
    inst_path = d / "inst.json"
    inst_path.write_text(json.dumps(random_layered_dag(**{k: v for k, v in GEN.items() if k != "generator"})))
    res = distplan.solve(str(inst_path), "placement_milp", backend="highs", threads=1)
    doc = json.loads(json.dumps(res.to_dict(), default=str))
    assert doc["status"] == "optimal" and doc["info"]["source"] == str(inst_path)
    campaign = parse_campaign({"name": "verify", "time_limit": 20, "threads": 1, "formulations": ["placement_milp", "baechi_etf"], "backends": ["highs"], "instances": [GEN]}, base=d)
    db = d / "honest.db"
    counts = run_campaign(campaign, db, progress=False)
    assert counts["stored"] == 2
    return {"dir": d, "doc": doc, "db": db}


def _cli_verify(path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``distplan verify PATH`` in this process (the console entry point's own `main`)."""
    capsys.readouterr()
    rc = cli_main(["verify", str(path)])
    out = capsys.readouterr()
    return rc, out.out + out.err


def test_honest_result_and_database_pass(honest: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = honest["dir"] / "r.json"
    path.write_text(json.dumps(honest["doc"]))
    rc, out = _cli_verify(path, capsys)
    assert rc == 0 and "0 problem(s)" in out, out
    report = verify_database(honest["db"])
    assert report.ok, report.problems
    assert report.checked == 2
    assert verify_target(honest["db"]).checked == 2 and verify_target(path).checked == 1  # the CLI's routing


@pytest.mark.parametrize("tolerance", [1e-4, None])  # recorded, or an old result without the field
def test_an_optimal_claim_inside_the_tolerance_passes(honest: dict[str, Any], tolerance: float | None) -> None:
    # what HiGHS reports at its default relative gap: optimal with gap 3e-5 < 1e-4
    doc = copy.deepcopy(honest["doc"])
    _with_gap(doc, doc["objective"] * (1 - 3e-5))
    if tolerance is None:
        del doc["gap_tolerance"]
        del doc["record_version"]  # (an old result recorded no format version either)
    else:
        doc["gap_tolerance"] = tolerance
    assert doc["status"] == "optimal" and 2.9e-5 < doc["gap"] < 3.1e-5
    assert check_result(doc, _instance()) == []
    doc["gap_tolerance"] = 1e-5  # the same claim under a tighter recorded tolerance is false
    # (and in a versioned result that tolerance is not the run's mip_gap either)
    expected = ["status"] if tolerance is None else ["gap_tolerance", "status"]
    assert sorted(name for name, _ in check_result(doc, _instance())) == expected


@pytest.mark.parametrize(("name", "tamper", "field"), TAMPERS, ids=[t[0] for t in TAMPERS])
def test_verify_rejects_a_tampered_result_file(honest: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, tamper: Callable[[Doc], None], field: str) -> None:
    doc = copy.deepcopy(honest["doc"])
    tamper(doc)
    path = tmp_path / "r.json"
    path.write_text(json.dumps(doc))
    rc, out = _cli_verify(path, capsys)
    assert rc == 1, out
    assert f": {field}: " in out, out
    if name == "plan breaks memory":
        assert "memory" in out


def _tamper_db(db: Path, formulation: str, edit: Callable[[Doc, dict[str, Any]], None]) -> None:
    """Apply ``edit(result_document, columns)`` to the run of ``formulation`` and store both back."""
    con = sqlite3.connect(str(db))
    con.row_factory = sqlite3.Row
    row = dict(con.execute("SELECT * FROM runs WHERE formulation = ?", (formulation,)).fetchone())
    result = json.loads(row["result_json"])
    result["plan"] = json.loads(row["plan_json"])
    cols = {k: row[k] for k in ("objective", "bound", "gap", "status")}
    edit(result, cols)
    plan = result.pop("plan")
    con.execute(
        "UPDATE runs SET result_json = ?, plan_json = ?, objective = ?, bound = ?, gap = ?, status = ? WHERE run_key = ?",
        (json.dumps(result), json.dumps(plan), cols["objective"], cols["bound"], cols["gap"], cols["status"], row["run_key"]),
    )
    con.commit()
    con.close()


def _consistently(tamper: Callable[[Doc], None]) -> Callable[[Doc, dict[str, Any]], None]:
    """The tamper applied to result_json and mirrored into the columns (a careful forger)."""

    def edit(result: Doc, cols: dict[str, Any]) -> None:
        tamper(result)
        cols.update({k: result[k] for k in cols})

    return edit


def _only_result_json(result: Doc, cols: dict[str, Any]) -> None:
    result["objective"] *= 0.999


def _only_result_json_status(result: Doc, cols: dict[str, Any]) -> None:
    result["status"] = "feasible"


DB_TAMPERS: list[tuple[str, Callable[[Doc, dict[str, Any]], None], str]] = [
    *((name, _consistently(t), f) for name, t, f in TAMPERS),
    ("result_json objective edited", _only_result_json, "result_json.objective"),
    ("result_json status edited", _only_result_json_status, "result_json.status"),
]


@pytest.mark.parametrize(("name", "edit", "field"), DB_TAMPERS, ids=[t[0] for t in DB_TAMPERS])
def test_verify_rejects_a_tampered_database(honest: dict[str, Any], tmp_path: Path, name: str, edit: Callable[[Doc, dict[str, Any]], None], field: str) -> None:
    db = tmp_path / "t.db"
    shutil.copy(honest["db"], db)
    _tamper_db(db, "placement_milp", edit)
    report = verify_database(db)
    assert not report.ok
    assert any(f": {field}: " in p for p in report.problems), report.problems
    assert all("placement_milp" in p for p in report.problems if "disagreement" not in p)  # the honest run stays clean


def test_verify_cli_exits_1_on_a_tampered_database(honest: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    shutil.copy(honest["db"], db)
    _tamper_db(db, "placement_milp", _only_result_json)
    rc, out = _cli_verify(db, capsys)
    assert rc == 1 and "result_json.objective" in out, out


def test_report_lines_count_problems() -> None:
    report = VerifyReport(checked=2, problems=["x: gap: wrong"])
    assert report.lines()[-1] == "2 result(s) checked, 1 problem(s)" and not report.ok
    assert math.isclose(relative_gap(2.0, 1.0) or 0.0, 0.5)


@pytest.fixture(scope="module")
def heuristic_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CLI result whose bounds are all solver-free (baechi_etf on placement-small-2)."""
    path = tmp_path_factory.mktemp("heuristic") / "r.json"
    assert cli_main(["solve", "placement-small-2", "-f", "baechi_etf", "--result", str(path)]) == 0
    return json.loads(path.read_text())


def _raise_free_bound(d: Doc) -> None:
    """A solver-free bound raised under the objective, the result then "optimal" (review rev11)."""
    _with_gap(d, d["objective"] * (1 - 1e-6))
    d["status"] = "optimal"


TAMPERED_IDENTITY_AND_GRADES: dict[str, tuple[Callable[[Doc], None], str]] = {
    "renamed instance": (lambda d: d.update(instance="placement-small-5"), "instance"),
    "other kind": (lambda d: d.update(kind="sharding"), "kind"),
    "other content": (lambda d: d["info"].update(instance_digest="0" * 16), "info.instance_digest"),
    "nonsense grade": (lambda d: d.update(bound_grade="proven-by-magic"), "bound_grade"),
    "grade of another bound": (lambda d: d.update(bound_grade="solver"), "bound_grade"),
    "raised solver-free bound": (_raise_free_bound, "bounds[2].value"),
    "bound not listed": (lambda d: d.update(bound=d["bound"] * (1 - 1e-3)), "bound"),
    "infeasible with a plan": (lambda d: d.update(termination="infeasible"), "termination"),
    "unknown termination": (lambda d: d.update(termination="done-ish"), "termination"),
}


@pytest.mark.parametrize("tamper", list(TAMPERED_IDENTITY_AND_GRADES), ids=list(TAMPERED_IDENTITY_AND_GRADES))
def test_verify_checks_the_instance_and_the_bounds_it_can_recompute(heuristic_result: Doc, tamper: str) -> None:
    """verify used to accept a result renamed to another instance, a grade that no listed
    bound has, and a solver-free bound raised below the objective (review rev11)."""
    change, field = TAMPERED_IDENTITY_AND_GRADES[tamper]
    assert check_result(heuristic_result, distplan.load_instance("placement-small-2")) == []
    doc = copy.deepcopy(heuristic_result)
    change(doc)
    assert field in [name for name, _ in check_result(doc, distplan.load_instance("placement-small-2"))]


def _execute(statement: str) -> Callable[[Path], None]:
    """A damage done by one SQL statement."""

    def damage(db: Path) -> None:
        con = sqlite3.connect(str(db))
        con.execute(statement)
        con.commit()
        con.close()

    return damage


def _damage_pages(db: Path) -> None:
    data = bytearray(db.read_bytes())
    data[4096 : 4096 * 3] = b"\xff" * (4096 * 2)  # pages after the header overwritten
    db.write_bytes(bytes(data))


DAMAGE: dict[str, Callable[[Path], None]] = {
    "params not JSON": _execute("UPDATE runs SET params_json = '{not json', label = NULL WHERE rowid = 1"),  # a row stored before labels
    "a text number": _execute("UPDATE runs SET time_limit = 'soon' WHERE rowid = 1"),
    "instance not zlib": _execute("UPDATE instances SET document = x'00010203'"),
    "pages overwritten": _damage_pages,
}


COMMANDS: dict[str, list[str]] = {"verify": ["verify"], "report": ["bench", "report", "--json"], "export": ["bench", "export", "--csv", "{dir}/runs.csv"]}
#: (export reads no instance document: a damaged one does not concern it)
DAMAGED_CASES = [pytest.param(COMMANDS[c], d, id=f"{d}-{c}") for c in COMMANDS for d in DAMAGE if not (c == "export" and d == "instance not zlib")]


@pytest.mark.parametrize(("command", "damage"), DAMAGED_CASES)
def test_a_damaged_database_is_a_named_error(honest: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str], damage: str) -> None:
    """Each of these was a traceback (exit 1) in verify, bench report and bench export
    (review rev11); the database is named as damaged (exit 2)."""
    db = tmp_path / "damaged.db"
    shutil.copy(honest["db"], db)
    for extra in ("-wal", "-shm"):
        if Path(str(honest["db"]) + extra).exists():
            shutil.copy(str(honest["db"]) + extra, str(db) + extra)
    con = sqlite3.connect(str(db))
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    con.close()
    DAMAGE[damage](db)
    capsys.readouterr()
    argv = [a.replace("{dir}", str(tmp_path)) for a in command]
    rc = cli_main([*argv[:2], str(db), *argv[2:]] if argv[0] == "bench" else [argv[0], str(db)])
    captured = capsys.readouterr()
    err = captured.err
    assert "Traceback" not in err
    if rc == 1 and argv[0] == "verify":  # verify may report a damaged column as a problem it found
        assert "not JSON" in captured.out + err, captured.out + err
        return
    assert rc == 2, err
    assert "damaged" in err or "not a benchmark database" in err, err
