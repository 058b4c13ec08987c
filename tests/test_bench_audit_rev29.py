"""Campaign defects of the bench audit (rev29): custom generators that raise or return a
non-document (D6), duplicate campaign entries (D5), heuristic quality counted per run
instead of per instance (D8), entry paths, ``fold`` and missing backends (D9), and the run
process's time limit not counting the instance's loading (D3)."""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distplan.bench import forkserver, record
from distplan.bench.campaign import parse_campaign
from distplan.bench.report import summary_json, write_report
from distplan.bench.runner import run_campaign
from distplan.bench.store import Store
from distplan.bench.verify import Audit, QualityRow, verify_database
from distplan.cli import main
from distplan.errors import InputError

GENERATORS = '''
def boom(n):
    raise RuntimeError("generator blew up")


def five(n):
    return 5
'''


def _errors(data: dict[str, Any], tmp_path: Path) -> InputError:
    with pytest.raises(InputError) as err:
        parse_campaign(data, base=tmp_path).runs()
    return err.value


@pytest.fixture
def custom_generators(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A module of custom generators on the path (a fresh name per test: not cached)."""
    name = f"rev29gen_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(GENERATORS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield name
    sys.modules.pop(name, None)


# -- D6: custom generators -------------------------------------------------------------------------


@pytest.mark.parametrize(("function", "said"), [("boom", "raised RuntimeError"), ("five", "returned int 5")])
def test_a_failing_custom_generator_is_named_at_its_generator_key(custom_generators: str, tmp_path: Path, function: str, said: str) -> None:
    # review D6: a traceback (RuntimeError; AttributeError: 'int' object has no attribute 'get'), exit 1
    err = _errors({"formulations": ["baechi_etf"], "instances": [{"generator": f"{custom_generators}:{function}", "n": [1]}]}, tmp_path)
    assert err.path == "instances[0].generator"
    assert said in err.problem


def test_a_failing_custom_generator_exits_2_without_a_traceback(custom_generators: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text(f'formulations = ["baechi_etf"]\ninstances = [{{generator = "{custom_generators}:boom", n = [1]}}]\n')
    rc = main(["bench", "run", "--dry-run", str(campaign), "--db", str(tmp_path / "c.db")])
    err = capsys.readouterr().err
    assert rc == 2
    assert "instances[0].generator" in err and "generator blew up" in err
    assert "Traceback" not in err


def test_a_misspelled_generator_parameter_is_named() -> None:
    # review D6: the error named only instances[0]
    err = _errors({"formulations": ["baechi_etf"], "instances": [{"generator": "random_layered_dag", "n_opz": [10]}]}, Path("."))
    assert err.path == "instances[0].n_opz"
    assert "n_ops" in (err.fix or "")  # the generator's parameters are listed


# -- D5: duplicate entries -------------------------------------------------------------------------

_ONE = {"formulations": ["baechi_etf"], "instances": ["placement-small-1"]}


@pytest.mark.parametrize(
    ("changes", "path"),
    [
        ({"formulations": ["baechi_etf", "baechi_etf"]}, "formulations[1]"),
        ({"formulations": ["baechi_etf", {"name": "baechi_etf", "params": {}}]}, "formulations[1]"),
        ({"formulations": ["placement_milp", "baechi_etf", {"name": "baechi_etf", "kind": "placement"}]}, "formulations[2]"),
        ({"seeds": [0, 1, 0]}, "seeds[2]"),
        ({"formulations": ["placement_milp"], "backends": ["highs", "highs"]}, "backends[1]"),
        ({"instances": ["placement-small-1", "placement-small-1"]}, "instances[1]"),
        ({"instances": ["placement-small-*", {"bundled": ["placement-small-2"]}]}, "instances[1].bundled[0]"),
        ({"instances": [{"generator": "random_layered_dag", "n_ops": 5, "seed": [0, 0]}]}, "instances[0]"),
    ],
)
def test_duplicate_entries_are_named(tmp_path: Path, changes: dict[str, Any], path: str) -> None:
    # review D5: each ran twice under one key ("1 stored meanwhile by another driver"), or
    # (instances) was dropped silently
    err = _errors({**_ONE, **changes}, tmp_path)
    assert err.path == path
    assert "duplicate" in err.problem


def test_duplicate_formulations_exit_2_on_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    campaign = tmp_path / "c.toml"
    campaign.write_text('formulations = ["baechi_etf", "baechi_etf"]\ninstances = ["placement-small-1"]\n')
    rc = main(["bench", "run", "--dry-run", str(campaign), "--db", str(tmp_path / "c.db")])
    err = capsys.readouterr().err
    assert rc == 2 and "formulations[1]: duplicate 'baechi_etf'" in err and "Traceback" not in err


def test_entries_that_differ_are_not_duplicates(tmp_path: Path) -> None:
    data = {
        "formulations": ["baechi_sct", {"name": "baechi_sct", "params": {"theta": 0.5}}, {"name": "baechi_etf", "time_limit": 2.0}, "baechi_etf"],
        "seeds": [0, 1],
        "instances": ["placement-small-1", "placement-small-2"],
    }
    assert len(parse_campaign(data, base=tmp_path).runs()) == 4 * 2 * 2


# -- D9: entry paths, fold, missing backends ------------------------------------------------------


def test_an_unknown_formulation_is_named_by_its_index(tmp_path: Path) -> None:
    err = _errors({"formulations": ["baechi_etf", "baechi_xyz"], "instances": ["placement-small-1"]}, tmp_path)
    assert err.path == "formulations[1]" and "baechi_xyz" in err.problem


def test_fold_on_a_kind_without_folding_is_refused_up_front(tmp_path: Path) -> None:
    # (the registry's get_folder, as `distplan solve --fold` uses it; every run of the kind
    # was stored as input_error)
    err = _errors({"formulations": ["baechi_etf", "1f1b"], "fold": True, "instances": ["placement-small-1", "pipeline-mshape-inference"]}, tmp_path)
    assert err.path == "fold" and "pipeline" in err.problem


def test_fold_with_a_bound_only_formulation_is_refused_up_front(tmp_path: Path) -> None:
    # (registry.check_fold, which `distplan solve --fold` asks first: placement's folding is
    # not exact, so bounds proven on it would not hold; every run was stored as input_error)
    err = _errors({"formulations": ["baechi_etf", "placement_bounds"], "fold": True, "instances": ["placement-small-1"]}, tmp_path)
    assert err.path == "fold" and "placement_bounds proves bounds" in err.problem
    assert len(parse_campaign({"formulations": ["baechi_etf", "placement_bounds"], "fold": False, "instances": ["placement-small-1"]}, base=tmp_path).runs()) == 2


@pytest.mark.parametrize(("modules_installed", "said"), [(True, "pulp is installed, the CBC program is not"), (False, "pip install 'distplan[pulp]'")])
def test_an_unavailable_backend_says_what_is_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], modules_installed: bool, said: str) -> None:
    """pulp-cbc made unavailable here (its solver program missing, or its modules too): the
    campaign, check_can_take and ``distplan list`` all say what is missing
    (`Backend.missing`); a campaign said pip install 'distplan[None]' (review D9), and the
    list advised installing an extra that was installed."""
    import dataclasses
    import importlib.util

    from distplan.solvers import base

    cbc = dataclasses.replace(base.get_backend("pulp-cbc"), availability_fn=lambda: False, program="the CBC program", requires=("pulp",), extra="pulp")
    monkeypatch.setitem(base._REGISTRY, "pulp-cbc", cbc)
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (find_spec(name, *a) if modules_installed else None) if name == "pulp" else find_spec(name, *a))
    assert cbc.missing() == said
    with pytest.raises(base.BackendError, match=re.escape(f"not available here: {said}")):
        cbc.check_can_take()
    err = _errors({"formulations": ["placement_milp"], "backends": ["pulp-cbc"], "skip_unavailable": False, "instances": ["placement-small-1"]}, tmp_path)
    assert err.path == "backends[0]" and said in err.problem
    assert "distplan[None]" not in f"{err.problem} {err.fix}"
    capsys.readouterr()
    assert main(["list", "backends"]) == 0
    (line,) = [line for line in capsys.readouterr().out.splitlines() if line.split()[:1] == ["pulp-cbc"]]
    assert f"not installed ({said})" in line


# -- D8: heuristic quality per instance ----------------------------------------------------------------


def test_quality_summary_counts_instances_not_runs() -> None:
    audit = Audit(quality=[QualityRow("h", "highs", "a", 1.2, "ha"), QualityRow("h", "highs", "a", 1.6, "ha"), QualityRow("h", "highs", "b", 1.0, "hb")])
    (row,) = audit.quality_summary()
    assert row["instances"] == 2 and row.get("runs") == 3
    assert row["min"] == 1.0 and row["max"] == pytest.approx(1.4)  # instance a: the median of 1.2 and 1.6


def test_repetitions_of_one_instance_are_one_instance_in_report_and_verify(tmp_path: Path) -> None:
    # review D8: `1f1b | highs | instances 2` for one instance run twice
    data = {"name": "reps", "time_limit": 10.0, "repetitions": 2, "formulations": ["1f1b"], "instances": ["pipeline-mshape-inference"]}
    db = tmp_path / "r.db"
    counts = run_campaign(parse_campaign(data, base=tmp_path), db, progress=False)
    assert counts["stored"] == 2
    (row,) = summary_json(db)["heuristic_quality"]
    assert row["instances"] == 1 and row.get("runs") == 2
    notes = [n for n in verify_database(db).notes if n.startswith("heuristic 1f1b")]
    assert len(notes) == 1 and "over 1 instance(s) (2 run(s)" in notes[0]
    write_report(db, tmp_path / "rep", figures=False)
    text = (tmp_path / "rep" / "report.md").read_text()
    assert "| 1f1b | highs | 1 | 2 |" in text


# -- D3: loading counts against a run's time limit ----------------------------------------------------


def test_execute_run_passes_its_start_to_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    import distplan.api

    seen: dict[str, Any] = {}

    def fake_solve(*args: Any, **kwargs: Any) -> Any:
        seen.update(kwargs)
        raise InputError("x", "stop here")

    monkeypatch.setattr(distplan.api, "solve", fake_solve)
    spec = parse_campaign({"formulations": ["baechi_etf"], "instances": ["placement-small-1"]}).runs()[0]
    began = time.perf_counter() - 100.0
    rec = record.execute_run(spec, started=began)
    assert seen["started"] == began
    assert rec["wall_seconds"] >= 100.0  # counted from the run's start too


def test_the_run_process_starts_the_clock_before_reading_its_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = parse_campaign({"formulations": ["baechi_etf"], "instances": ["placement-small-1"]}).runs()[0]
    spec["options"].pop("time_limit")  # (no SIGALRM in the test process)
    spec_path = tmp_path / "s.json"
    spec_path.write_text(__import__("json").dumps(spec))
    calls: list[float | None] = []

    def fake_execute(spec: dict[str, Any], started: float | None = None) -> dict[str, Any]:
        calls.append(started)
        return {"run_key": spec["run_key"]}

    monkeypatch.setattr(forkserver, "execute_run", fake_execute)
    before = time.perf_counter()
    forkserver.run_process_main(str(spec_path), str(tmp_path / "r.json"))
    assert len(calls) == 1 and calls[0] is not None and before <= calls[0]


def test_time_before_the_solve_counts_against_the_limit(tmp_path: Path) -> None:
    # the test hook sleeps 1.5 s in the run process before solving (as loading a large
    # instance does); the limit is 1 s, the grace long. Before the fix the solve got its
    # full second and ended optimal; now its limit has passed when it starts
    data = {
        "name": "late",
        "time_limit": 1.0,
        "grace": 60.0,
        "formulations": [{"name": "placement_milp", "_test_hang_seconds": 1.5}],
        "instances": ["placement-small-1"],
    }
    db = tmp_path / "late.db"
    run_campaign(parse_campaign(data, base=tmp_path), db, progress=False)
    with Store(db) as store:
        (rec,) = store.runs()
    assert rec["termination"] == "time_limit"
    assert rec["wall_seconds"] >= 1.5  # the record's time counts from the run's start


def test_findings_are_filed_under_the_claim_they_concern() -> None:
    # (a forged termination read "plan rejected"; a bound that is none of the listed ones
    # read "bound above own objective")
    from distplan.bench.verify import _category

    assert _category("termination", "'optimal' but its last solver call ended time_limit") == "termination claim"
    assert _category("bound", "0.5 is none of the listed bounds") == "bound claim"
    assert _category("bound", "proven bound 2.0 exceeds the objective 1.0 (a bound above a feasible plan is impossible)") == "bound above own objective"
    assert _category("plan", "the evaluator rejects the plan: x") == "infeasible plan"
