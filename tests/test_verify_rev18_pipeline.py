"""Review rev18, pipeline_milp's "no schedule of value <= U" (F14's premise,
`pipeline.milp.below_incumbent_premise`), four holes:

* fractional U: the time-indexed model floors U, so "empty at 14.99999" proves nothing
  <= 14 only; a bound above floor(U) + 1 (15.99999) passed. The premise holds the bound
  to floor(U) + 1 on both paths (a solver call's verdict, a model empty by construction).
* U printed with ``{:g}``: U >= 1e6 rounded (1,000,007 -> "1e+06"), and verify, which reads
  U back, failed honest results. U is printed exactly (`milp.exact_value`).
* a missing or malformed ``value_at_most`` on the infeasible time-indexed call was an old
  record with no limit on U. Malformed (not a finite real number): a problem. Missing: the
  call's model size must equal the model's rebuilt at U (restricted lower, it has fewer
  variables; a record without the size is a problem: every model record keeps it); where
  no rebuild can be made here, an older record, noted (`registry.Unchecked`).
* the "empty by construction" rebuild raised `ClosureTooLarge` (a traceback) or took
  14 GB: it is bounded before building (`milp.rebuild_below`, `milp.REBUILD_MAX_BYTES`),
  and what cannot be rebuilt "cannot be re-checked here": the bound is rejected, named.
"""

from __future__ import annotations

import copy
import json
import math
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import backend_params, cli_run, takes_milp
from test_verify_rev17 import refix

import distplan
from distplan.formulations.pipeline import milp
from distplan.formulations.pipeline.opmodel import CLOSURE_MAX_OPS, ClosureTooLarge
from distplan.formulations.registry import Unchecked
from distplan.instances.pipelines import make_pipeline
from distplan.models.common import canonical_json, write_json
from distplan.models.pipeline import PipelineInstance
from distplan.verify import check_result

Doc = dict[str, Any]

NO_SCHEDULE = "pipeline_milp: no schedule of value <= "
PREMISE = "distplan.formulations.pipeline.milp:below_incumbent_premise"
#: the infeasible time-indexed call (v-shape p = 4, N = 4: optimum 28, "<= 27 infeasible")
#: and the model empty by construction (x-shape p = 3, N = 1: optimum 15, "<= 14")
CALL_CASE = ("v", 4, 4)
EMPTY_CASE = ("x", 3, 1)

_SOLVED: dict[str, tuple[PipelineInstance, Doc]] = {}


def solved(inst: PipelineInstance, backend: str, formulation: str = "pipeline_milp", **kw: Any) -> tuple[PipelineInstance, Doc]:
    """The instance and a deep copy of its honest result (solved once per session; the
    time-indexed model unless ``kw`` says otherwise)."""
    kw = {"model": "time_indexed", "time_limit": 30, **kw} if formulation == "pipeline_milp" else kw
    key = f"{inst.name}|{inst.duration.tolist()}|{formulation}|{backend}|{json.dumps(kw, sort_keys=True)}"
    if key not in _SOLVED:
        result = distplan.solve(inst, formulation, **({"backend": backend} if formulation == "pipeline_milp" else {}), **kw)
        _SOLVED[key] = inst, json.loads(canonical_json(result.to_dict()))
    inst, doc = _SOLVED[key]
    return inst, copy.deepcopy(doc)


def _verify(doc: Doc, inst: PipelineInstance, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``distplan verify`` of ``doc`` written to a file, the instance given as a file."""
    write_json(inst.to_dict(), tmp_path / "instance.json")
    write_json(doc, tmp_path / "result.json")
    rc, out, err = cli_run(["verify", str(tmp_path / "result.json"), "--instance", str(tmp_path / "instance.json")], capsys)
    assert "Traceback" not in out + err, out + err
    return rc, out


def _no_schedule(doc: Doc) -> int | None:
    found = [k for k, b in enumerate(doc["bounds"]) if b["source"].startswith(NO_SCHEDULE)]
    return found[0] if found else None


def _call_proof(backend: str) -> tuple[PipelineInstance, Doc, int, Doc]:
    """The honest result whose time-indexed call ended infeasible below the incumbent, the
    index of its bound and the call's model record; skipped where ``backend`` reports no
    such verdict (it proves the optimum by a dual bound instead)."""
    inst, doc = solved(make_pipeline(*CALL_CASE), backend)
    k = _no_schedule(doc)
    if k is None or milp.INFEASIBLE_CALL not in doc["bounds"][k]["source"]:
        # only where a dual bound proved the optimum instead (else the proof went missing)
        assert doc["status"] == "optimal" and not str(doc["bound_source"]).startswith(NO_SCHEDULE), (doc["status"], doc["bound_source"])
        pytest.skip(f"{backend} reports no infeasible time-indexed call below the incumbent here: {[b['source'] for b in doc['bounds']]}")
    (model,) = [c["extra"]["model"] for c in doc["solver_results"] if c["extra"]["model"]["name"].endswith("-time-indexed")]
    return inst, doc, k, model


def _delayed(doc: Doc, by: float) -> None:
    """The plan's last operation started ``by`` time units later, the objective with it (a
    worse plan, which a forged bound then claims optimal)."""
    starts = doc["plan"]["start"]
    last = max(starts, key=lambda o: max(starts[o]))
    starts[last] = [s + by for s in starts[last]]
    doc["objective"] += by


def _restate(doc: Doc, k: int, cap: float | str, value: float) -> None:
    """Bound ``k`` restated as "no schedule of value <= ``cap``" of ``value`` (its detail kept)."""
    detail = doc["bounds"][k]["source"].split(" (", 1)[1]
    doc["bounds"][k]["source"] = f"{NO_SCHEDULE}{cap} ({detail}"
    doc["bounds"][k]["value"] = value
    refix(doc)


def _unmet(out: str, k: int, *why: str) -> bool:
    return f"bounds[{k}].source: " in out and PREMISE in out and all(w in out for w in why)


# 1. fractional U ----------------------------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_fractional_u_of_an_infeasible_call_proves_floor_u_plus_1_only(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, model = _call_proof(backend)
    assert model["value_at_most"] == 27 and doc["objective"] == 28
    _delayed(doc, 1.0)  # 29: only 28 is proved
    model["value_at_most"] = 27.99999  # the same model as at 27 (the horizon is floored)
    _restate(doc, k, repr(27.99999), 28.99999)
    assert doc["status"] == "optimal"
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, "the bound 28.99999 is above floor(U) + 1 = 28"), out


def test_a_fractional_u_empty_by_construction_proves_floor_u_plus_1_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(make_pipeline(*EMPTY_CASE), "highs")  # (no solver call: no backend to vary)
    k = _no_schedule(doc)
    assert k is not None and "infeasible by construction" in doc["bounds"][k]["source"] and doc["objective"] == 15
    honest = copy.deepcopy(doc)
    _restate(honest, k, repr(14.99999), 15.0)  # "empty at 14.99999" is "empty at 14": 15 holds
    assert check_result(honest, inst) == []
    doc["plan"]["start"]["Bb0"] = [13.0]  # the last backward one unit later: 16
    doc["objective"] = 16.0
    _restate(doc, k, repr(14.99999), 15.99999)
    assert doc["status"] == "optimal"
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, "the bound 15.99999 is above floor(U) + 1 = 15"), out


# 2. U printed exactly -----------------------------------------------------------------


def test_u_is_printed_so_that_it_reads_back_exactly() -> None:
    for cap in (14.0, 999_999.0, 1_049_999.0, 123_456_789.0, 2.0**53, 14.5, 0.1 + 0.2, 1e300):
        text = milp.exact_value(cap)
        found = milp.NO_SCHEDULE.search(f"{NO_SCHEDULE}{text} (time-indexed model infeasible, highs)")
        assert found is not None and float(found.group(1)) == cap, (cap, text)
    assert milp.exact_value(1_049_999.0) == "1049999" and milp.exact_value(27.0) == "27"


#: v-shape p = 2, N = 1 in units of 125,001: optimum 1,000,008, U = 1,000,007 ("1e+06" with
#: {:g}, which verify read back as 1,000,000: the call's value_at_most below it); its time-indexed model has ~1.5M (empty) rows: through PuLP's file round trip
#: (pulp-highs, ~18 s) and SCIP's model layer (scip, cvxpy-*: 5 s) it passes this file's
#: budget; the format of U is the formulation's, not the backend's
LARGE_UNITS = 125_001.0
_SLOW_LARGE = ("pulp-highs", "scip", "cvxpy-HIGHS", "cvxpy-SCIP")


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_an_honest_proof_in_large_time_units_verifies_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if backend in _SLOW_LARGE:
        pytest.skip(f"{backend} takes 5-18 s to load this model's ~1.5M empty rows; the printing of U tested here is the formulation's, the same on every backend")
    inst, doc = solved(make_pipeline("v", 2, 1, forward_time=LARGE_UNITS, backward_time=3 * LARGE_UNITS), backend)
    assert doc["objective"] == 1_000_008 and doc["status"] == "optimal"
    k = _no_schedule(doc)
    if k is None:  # only where a dual bound proved the optimum instead (else the proof went missing)
        assert not str(doc["bound_source"]).startswith(NO_SCHEDULE) and doc["bound"] is not None, (doc["bound_source"], doc["bounds"])
        pytest.skip(f"{backend} proves the optimum by a dual bound here, with no infeasible call below it")
    assert doc["bounds"][k]["source"].startswith(f"{NO_SCHEDULE}1000007 ("), doc["bounds"][k]["source"]
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


# 3. value_at_most missing or malformed ------------------------------------------------


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("recorded", ["27", True, None, [], -1e400, "nan"])
def test_a_malformed_value_at_most_exits_1(recorded: Any, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, model = _call_proof(backend)
    model["value_at_most"] = math.nan if recorded == "nan" else recorded
    problems = check_result(doc, inst)
    assert [p for p, _ in problems] == [f"bounds[{k}].source"] and "not a finite real number" in problems[0][1], problems
    if recorded != "nan":  # (NaN is no JSON)
        rc, out = _verify(doc, inst, tmp_path, capsys)
        assert rc == 1 and _unmet(out, k, "records value_at_most", "not a finite real number"), out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_dropped_value_at_most_with_u_raised_exits_1(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc, k, model = _call_proof(backend)
    _delayed(doc, 3.0)  # 31, claimed optimal by "nothing <= 30"
    del model["value_at_most"]
    _restate(doc, k, 30, 31.0)
    assert doc["status"] == "optimal"
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, "records no value_at_most", "is not the time-indexed model restricted to values <= U = 30"), out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
@pytest.mark.parametrize("variables", ["inflated", "dropped"])
def test_a_dropped_value_at_most_with_u_raised_and_the_size_forged_exits_1(variables: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Review read18 findings 1, 2: the model's ``variables`` raised above the model's at
    the claimed U (which any model restricted lower has fewer of), or dropped (every model
    record keeps them), with value_at_most dropped: not the model at U."""
    inst, doc, k, model = _call_proof(backend)
    _delayed(doc, 3.0)
    del model["value_at_most"]
    _restate(doc, k, 30, 31.0)
    if variables == "inflated":
        model["variables"] *= 10
        expected = "is not the time-indexed model restricted to values <= U = 30"
    else:
        del model["variables"]
        expected = "records neither value_at_most nor its model's variables"
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, expected), out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_a_call_record_without_value_at_most_at_its_own_u_verifies_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record written before calls kept value_at_most: its model is the one rebuilt at U."""
    inst, doc, k, model = _call_proof(backend)
    del doc["record_version"]  # (nor its format version)
    del model["value_at_most"]
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out


def test_a_call_record_that_cannot_be_compared_is_noted_not_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """No value_at_most, and the model at U cannot be rebuilt here to compare its size
    with: accepted as an older record, `registry.Unchecked` (verify notes it). The model
    is rebuilt once for all the calls that need it (review read18 finding 5)."""
    inst = make_pipeline(*CALL_CASE)
    source = f"{NO_SCHEDULE}27 ({milp.INFEASIBLE_CALL}highs)"
    call: Doc = {"termination": "infeasible", "extra": {"model": {"name": "v-p4-n4-milp-time-indexed", "variables": 145}}}
    rebuilds: list[float] = []

    def too_large(inst_: Any, cap: float) -> tuple[None, str]:
        rebuilds.append(cap)
        return None, "cannot be re-checked here (too large)"

    monkeypatch.setattr(milp, "rebuild_below", too_large)
    with pytest.raises(Unchecked, match="records no value_at_most .an older record."):
        milp.below_incumbent_premise(inst, {"value": 28.0, "source": source}, [copy.deepcopy(call) for _ in range(50)])
    assert rebuilds == [27.0]


def test_an_old_record_that_cannot_be_compared_verifies_with_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    """An older result whose infeasible call keeps no value_at_most, where the model at U
    cannot be rebuilt here: accepted, and the notes say what was not checked."""
    inst, doc, k, model = _call_proof("highs")
    del doc["record_version"]  # (an older result recorded no format version either)
    del model["value_at_most"]
    monkeypatch.setattr(milp, "rebuild_below", lambda inst_, cap: (None, "cannot be re-checked here (too large)"))
    notes: list[str] = []
    problems = check_result(doc, inst, notes)
    assert not [p for p in problems if p[0] == f"bounds[{k}].source"], problems
    assert any(f"bounds[{k}]" in n and "not checked" in n and "value_at_most" in n for n in notes), notes


# 4. rebuilds too large to make here ---------------------------------------------------


def _claimed_by_construction(inst: PipelineInstance, formulation: str) -> tuple[Doc, int]:
    """A schedule of another formulation, relabelled pipeline_milp's, with the claim that
    the time-indexed model below it is empty by construction (a forger's)."""
    _, doc = solved(inst, "", formulation)
    doc["formulation"] = "pipeline_milp"
    cap = doc["objective"] - 1
    doc["bounds"].append({"value": cap + 1, "source": f"{NO_SCHEDULE}{milp.exact_value(cap)} (infeasible by construction)", "grade": "solver", "kind": "proof"})
    refix(doc)
    return doc, len(doc["bounds"]) - 1


def test_a_rebuild_just_over_the_size_cap_is_not_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    units = 70_000.0  # (x-shape p = 3, N = 1: 2.5M steps at U = 1,049,999, ~3.05 GiB estimated)
    inst = make_pipeline("x", 3, 1, forward_time=units, backward_time=3 * units)
    doc, k = _claimed_by_construction(inst, "1f1b")
    size = milp.rebuild_bytes(milp.restricted_problem(inst, doc["objective"] - 1))
    assert milp.REBUILD_MAX_BYTES < size < 1.1 * milp.REBUILD_MAX_BYTES, size
    t0 = time.perf_counter()
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, "cannot be re-checked here", "GiB to rebuild"), out
    assert time.perf_counter() - t0 < 5.0  # (estimated, not built)


def test_a_rebuild_of_more_operations_than_the_closure_takes_is_not_made() -> None:
    mb = CLOSURE_MAX_OPS // 16 + 1  # (v-shape p = 8: 16 blocks)
    inst = make_pipeline("v", 8, mb)
    assert inst.n_blocks * mb > CLOSURE_MAX_OPS
    why = milp.below_incumbent_premise(inst, {"value": 4500.0, "source": f"{NO_SCHEDULE}4499 (infeasible by construction)"}, [])
    assert why is not None and "cannot be re-checked here" in why and f"more than the {CLOSURE_MAX_OPS}" in why, why


@pytest.mark.parametrize("raised", [ClosureTooLarge("the closure would not fit"), MemoryError()])
def test_a_rebuild_that_fails_is_named_not_a_traceback(raised: BaseException, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(make_pipeline(*EMPTY_CASE), "highs")
    k = _no_schedule(doc)
    assert k is not None

    def fail(*args: Any, **kw: Any) -> Any:
        raise raised

    monkeypatch.setattr(milp, "build_ti_model", fail)
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and _unmet(out, k, "cannot be re-checked here", type(raised).__name__), out


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_honest_small_proofs_by_construction_still_verify_clean(backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inst, doc = solved(make_pipeline(*EMPTY_CASE), backend)
    k = _no_schedule(doc)
    assert k is not None and "infeasible by construction" in doc["bounds"][k]["source"]
    assert milp.rebuild_bytes(milp.restricted_problem(inst, doc["objective"] - 1)) < 1e6
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 0, out
