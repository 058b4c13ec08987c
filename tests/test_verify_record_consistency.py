"""A result's record against itself (black-box audit of session 28): its ``timings`` and
stored evaluator verdict (``check``), a solver call's bound against that call's own
objective, "finished" over a call that time cut short; and placement_bounds, the one
bound-only formulation, ending ``time_limit`` when time cut its relaxation and exit 3
when its relaxation proves that no placement fits."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.registry import RunContext
from distplan.instances import load_instance
from distplan.models.common import instance_from_dict
from distplan.solvers.result import Termination
from distplan.verify import check_result

Doc = dict[str, Any]
_SOLVED: dict[str, tuple[Any, Doc]] = {}


def _honest(formulation: str = "placement_milp") -> tuple[Any, Doc]:
    """placement-small-3 solved by ``formulation`` (once per session), a deep copy of its record."""
    if formulation not in _SOLVED:
        inst = load_instance("placement-small-3")
        _SOLVED[formulation] = inst, distplan.solve(inst, formulation).to_dict()
    inst, doc = _SOLVED[formulation]
    return inst, copy.deepcopy(doc)


def _fields(doc: Doc, inst: Any) -> set[str]:
    return {name for name, _ in check_result(doc, inst)}


def test_the_honest_records_verify_clean() -> None:
    for formulation in ("placement_milp", "placement_bounds"):
        inst, doc = _honest(formulation)
        assert check_result(doc, inst) == [], formulation


@pytest.mark.parametrize(("edit", "field"), [
    (lambda d: d.update(timings="x"), "timings"),  # verify's overrun note read it as an object: a traceback
    (lambda d: d["timings"].update(wall_seconds="slow"), "timings.wall_seconds"),
    (lambda d: d["timings"].update(solve_seconds=-1.0), "timings.solve_seconds"),
    (lambda d: d.update(check="x"), "check"),
    (lambda d: d["check"].update(feasible=False), "check.feasible"),
    (lambda d: d["check"].update(objective=d["objective"] / 2), "check.objective"),
    # a run and evaluation that add up to more than the wall time (review rev29 D7)
    (lambda d: d["timings"].update(wall_seconds=d["timings"]["formulation_seconds"] / 2), "timings.wall_seconds"),
    (lambda d: d["timings"].update(formulation_seconds=d["timings"]["wall_seconds"] + 3.9), "timings.wall_seconds"),
], ids=["timings-str", "wall-str", "negative-seconds", "check-str", "check-infeasible", "check-objective", "wall-below-run", "run-beyond-wall"])
def test_a_malformed_or_contradicting_record_is_a_named_problem(edit: Any, field: str) -> None:
    inst, doc = _honest()
    edit(doc)
    assert field in _fields(doc, inst)


def test_a_call_bound_on_the_wrong_side_of_its_own_objective_is_a_problem() -> None:
    """Up to the call's objective a raised bound is not caught (verify does not re-solve);
    one unit in the last place above it is, as a model record states its sense."""
    inst, doc = _honest()
    call = doc["solver_results"][0]
    assert call["extra"]["model"]["sense"] == "min"
    call["bound"] = call["objective"]
    assert check_result(doc, inst) == []
    call["bound"] = math.nextafter(call["objective"], math.inf)
    assert _fields(doc, inst) == {"solver_results[0].bound"}
    call["extra"]["model"]["sense"] = "max"  # a maximization's bound is above: no problem
    assert check_result(doc, inst) == []


def test_placement_bounds_cut_by_time_ends_time_limit_and_verify_holds_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """placement_bounds ended "finished" although its relaxation's call ended at its time
    limit (inception-v3 at --time-limit 5); verify did not object. Here the call's
    termination is made time_limit."""
    real = RunContext.solve_model

    def cut(self: RunContext, model: Any, *args: Any, **kwargs: Any) -> Any:
        res = real(self, model, *args, **kwargs)
        res.termination = Termination.TIME_LIMIT
        return res

    monkeypatch.setattr(RunContext, "solve_model", cut)
    inst = load_instance("placement-small-3")
    r = distplan.solve(inst, "placement_bounds")
    assert r.termination is Termination.TIME_LIMIT and r.solver_results
    doc = r.to_dict()
    assert check_result(doc, inst) == []
    doc["termination"] = "finished"
    assert _fields(doc, inst) == {"termination"}


def test_placement_bounds_whose_relaxation_proves_no_placement_fits_exits_3() -> None:
    """Three ops of 11 bytes, two devices of 20: no device holds two of them. The bounds
    reported a finite bound, status none (placement_milp: infeasible, exit 3)."""
    doc = {
        "format": "distplan/1", "kind": "placement", "name": "bin-packing",
        "graph": {"ops": [{"name": f"o{k}", "time": 1.0, "memory": 11} for k in range(3)], "edges": []},
        "cluster": {"devices": [{"name": "g0", "memory": 20}, {"name": "g1", "memory": 20}], "bandwidth": 1e9, "latency": 0.0},
    }
    inst = instance_from_dict(doc)
    for formulation in ("placement_bounds", "placement_milp"):
        with pytest.raises(InfeasibleError, match="no placement fits the devices' memory") as exc:
            distplan.solve(inst, formulation)
        assert exc.value.exit_code == 3


def test_a_bounds_only_result_from_a_file_records_its_source(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``distplan verify FILE`` finds the instance through ``info.source``: placement_bounds
    recorded none, and verify exited 2 ("no file and no bundled instance named ...")."""
    from distplan.cli import main
    from distplan.instances import load_document
    from distplan.models.common import write_json

    path = tmp_path / "inst.json"
    write_json({**dict(load_document("placement-small-3")), "name": "renamed-here"}, path)
    r = distplan.solve(str(path), "placement_bounds")
    assert r.info["source"] == str(path)
    write_json(r.to_dict(), tmp_path / "result.json")
    assert main(["verify", str(tmp_path / "result.json")]) == 0, capsys.readouterr()


@pytest.mark.parametrize("formulation", ["libra_perf", "libra_perf_lp"])
def test_a_bandwidth_result_without_time_terms_verifies_clean(formulation: str) -> None:
    """A workload whose layers carry no collective is a valid instance with no time terms:
    its certificate's (0, D) multipliers came back from JSON as shape (0,), and verify
    called the honest bound unproven."""
    import json

    from distplan.instances import load_document

    doc = json.loads(json.dumps(dict(load_document("libra-dlrm-3d-total500"))))
    doc["workload"]["layers"] = [layer for layer in doc["workload"]["layers"] if not layer["collectives"]][:2]
    assert doc["workload"]["layers"]
    inst = instance_from_dict(doc)
    with pytest.warns(UserWarning):  # (the dimensions carry no traffic)
        r = distplan.solve(inst, formulation)
    record = json.loads(json.dumps(r.to_dict()))
    assert r.status.value == "optimal" and check_result(record, inst) == []
