"""Review rev21 of `distplan verify`: a forged m-SCT bound, call options emptied, bench runs
that failed under ``--require-version``, an honest pipeline_milp optimum refused, and the
time limit recorded for libra's direct Clarabel calls.

* m-SCT's LP value is a bound only from the instance's own LP solved to optimality
  (`sct.lp_bound_premise`). A contracted graph's LP renamed ``baechi_sct``, its blocks
  recorded as None (or dropped with its call's termination changed), passed as an older
  record and made a forged result "optimal".
* A call's options are `options_record`'s, every key (as the run's): ``{}`` hid the
  per-call ``mip_gap`` cross-check as ``null`` did.
* A bench run that failed stores no result, only its columns: ``--require-version`` asked
  it for a version all the same.
* A run proven optimal by a bound that rests on no solver call (pipeline_milp's exact
  state search) ends "optimal" whatever its calls ended (a warm start's probe cut by its
  limit): verify refused it.
* A direct Clarabel call records the limit Clarabel was given (`conic.clarabel_limit`),
  each call the run's time left when it started.
"""

from __future__ import annotations

import copy
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_verify_stated_conversions import _sct

import distplan
from distplan.formulations.bandwidth.conic import LEAST_TIME_LIMIT
from distplan.solvers.result import OPTIONS_RECORD_FIELDS
from distplan.verify import check_result

Doc = dict[str, Any]

SCT_SOURCE = "SCT LP value (small-communication precondition holds)"


def _contracted_sct() -> tuple[Any, Doc, int]:
    """An honest m-SCT result whose LP ran on a contracted graph (``lp_max_edges`` 3), and
    the index of that call."""
    inst = _sct()
    doc = distplan.solve(inst, "baechi_sct", lp_max_edges=3).to_dict()
    assert check_result(doc, inst, require_version=True) == []
    k = next(i for i, c in enumerate(doc["solver_results"]) if c["extra"]["model"]["name"].startswith("baechi_sct"))
    assert doc["solver_results"][k]["extra"]["model"]["name"] != "baechi_sct"  # (the contracted graph's LP)
    return inst, doc, k


def _claim_sct_optimum(doc: Doc, k: int) -> Doc:
    """``doc`` forged: its contracted LP passed off as the instance's own, whose value
    bounds the objective, and the result "optimal"."""
    forged = copy.deepcopy(doc)
    forged["solver_results"][k]["extra"]["model"]["name"] = "baechi_sct"
    value = forged["objective"]
    forged["bounds"].append({"value": value, "source": SCT_SOURCE, "grade": "solver", "kind": "solver", "solver_call": k})
    forged.update(bound=value, bound_source=SCT_SOURCE, bound_grade="solver", gap=0.0, status="optimal")
    return forged


def _blocks_none(call: Doc) -> None:
    call["extra"]["model"]["variable_blocks"] = None


def _blocks_dropped_call_cut(call: Doc) -> None:
    del call["extra"]["model"]["variable_blocks"]
    call["termination"] = "time_limit"


def _blocks_empty(call: Doc) -> None:
    call["extra"]["model"]["variable_blocks"] = {}


@pytest.mark.parametrize("tamper", [_blocks_none, _blocks_dropped_call_cut, _blocks_empty], ids=["blocks None", "blocks dropped, call cut", "blocks empty"])
def test_a_contracted_sct_lp_passed_off_as_the_instances_own_is_refused(tamper: Any) -> None:
    inst, doc, k = _contracted_sct()
    forged = _claim_sct_optimum(doc, k)
    tamper(forged["solver_results"][k])
    problems = check_result(forged, inst, require_version=True)
    assert any(name.startswith("bounds[") or name.startswith(f"solver_results[{k}]") for name, _ in problems), problems


@pytest.mark.parametrize("options", [{}, "no mip_gap"])
def test_call_options_must_hold_every_recorded_key(options: Any) -> None:
    inst = distplan.load_instance("libra-dlrm-4d-multi")
    doc = distplan.solve(inst, "libra_perf", time_limit=60).to_dict()
    call = doc["solver_results"][1]
    if options == "no mip_gap":
        del call["options"]["mip_gap"]
        missing = ["mip_gap"]
    else:
        call["options"] = options
        missing = list(OPTIONS_RECORD_FIELDS)
    names = [name for name, _ in check_result(doc, inst)]
    assert names == [f"solver_results[1].options.{m}" for m in missing], names


def test_direct_clarabel_calls_record_the_limit_each_was_given() -> None:
    """Each call's recorded limit is the run's time left when it started (so below the
    run's 60 s, and no larger for a later call), never below what Clarabel is given."""
    doc = distplan.solve("libra-gpt3-3d-total500", "libra_perf_per_cost", time_limit=60).to_dict()
    limits = [c["options"]["time_limit"] for c in doc["solver_results"] if c["backend"] == "clarabel-direct"]
    assert len(limits) > 1
    assert all(LEAST_TIME_LIMIT <= t < 60 for t in limits), limits
    assert limits == sorted(limits, reverse=True), limits


def test_failed_bench_runs_pass_require_version(tmp_path: Path) -> None:
    """A campaign where one run fails (megatron does not fit the memory-tight GPT) and one
    solves: the failed run stored no result and claims nothing, so it needs no version; a
    version dropped from the solved run is still a problem."""
    from distplan.bench.campaign import parse_campaign
    from distplan.bench.runner import run_campaign
    from distplan.bench.verify import verify_database

    campaign = parse_campaign({"name": "f", "time_limit": 10, "threads": 1, "formulations": ["megatron", "tap"], "backends": ["highs"], "instances": ["gpt-4layer-memtight"]}, base=tmp_path)
    db = tmp_path / "runs.db"
    run_campaign(campaign, db, progress=False)
    con = sqlite3.connect(str(db))
    rows = dict(con.execute("SELECT formulation, result_json FROM runs").fetchall())
    assert rows.get("megatron") in (None, "") and rows.get("tap"), rows.keys()
    report = verify_database(db, require_version=True)
    assert report.ok, report.problems
    doc = json.loads(rows["tap"])
    del doc["record_version"]
    con.execute("UPDATE runs SET result_json = ? WHERE formulation = 'tap'", (json.dumps(doc),))
    con.commit()
    con.close()
    assert not verify_database(db, require_version=True).ok


def test_an_optimum_proven_without_a_solver_call_verifies_whatever_the_calls_ended() -> None:
    """pipeline_milp on Tessel's NN placement: its only call (tessel's probe for a warm
    start) ends at its limit, and the exact state search proves the optimum; honest, it
    verifies clean. Without that proof, "optimal" after a cut call is still refused."""
    name = "pipeline-tessel-nnshape"
    inst = distplan.load_instance(name)
    doc = distplan.solve(name, "pipeline_milp", time_limit=30).to_dict()
    assert doc["termination"] == "optimal" and doc["solver_results"][-1]["termination"] == "time_limit"
    proofs = [k for k, b in enumerate(doc["bounds"]) if b["kind"] == "proof" and b.get("solver_call") is None and b["value"] == doc["objective"]]
    assert proofs, doc["bounds"]
    assert check_result(doc, inst, require_version=True) == []
    weaker = copy.deepcopy(doc)
    weaker["bounds"] = [b for k, b in enumerate(doc["bounds"]) if k not in proofs]
    assert "termination" in [name for name, _ in check_result(weaker, inst)]
