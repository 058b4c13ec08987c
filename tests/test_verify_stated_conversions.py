"""A solver call's bound is audited against the conversion its formulation states, and is
linked by the formulation, never guessed.

Every formulation that reports a solver call's bound passes the record of the call that
proved it (``solver_record``): `distplan.solve` no longer ties an unlinked one to the call
with the largest bound. The conversion of a call's bound to the result's units is stated
once, beside the formulation that applies it, and named by its `registry.BoundSource`
(placement: microseconds less the margin, over the time factor; alpa_ilp and tap: over the
objective scale; pipeline_milp: rounded up on integral data; libra_discrete: plus the
compute seconds; the others: the call's own bound). `distplan verify` holds a linked bound
to that conversion of its call's recorded bound (the conversion a call's record kept at
solve time, derived from the bound itself, is gone), and rejects a result whose bound
rests on a solver call's bound linked to no call, whatever its status.
"""

from __future__ import annotations

import copy
import functools
import json
import math
from pathlib import Path
from typing import Any

import pytest
from conftest import TAKES, backend_params, cli_run

import distplan
from distplan.formulations.registry import BOUND_SOURCES, bound_source, formulations, get_formulation
from distplan.instances import load_document
from distplan.instances.pipelines import make_pipeline
from distplan.models.common import canonical_json, instance_from_dict, write_json
from distplan.solvers.result import relative_gap
from distplan.verify import check_result

Doc = dict[str, Any]

#: a placement instance where m-SCT's precondition holds (one device type, uniform links,
#: every transfer shorter than every op): its LP value is a bound
SCT_DOC: Doc = {
    "format": "distplan/1", "kind": "placement", "name": "sct-homogeneous",
    "graph": {
        "ops": [{"name": n, "time": t, "memory": 1.0} for n, t in (("a", 1.0), ("b", 2.0), ("c", 1.5), ("d", 1.0), ("e", 0.5))],
        "edges": [{"src": s, "dst": d, "bytes": b} for s, d, b in (("a", "b", 1e3), ("a", "c", 1e3), ("b", "d", 1e3), ("c", "d", 1e3), ("a", "e", 10.0))],
    },
    "cluster": {"devices": [{"name": "d0", "memory": 100.0, "type": "A"}, {"name": "d1", "memory": 100.0, "type": "A"}], "bandwidth": 1e9, "latency": 1e-5},
    "model": {"memory": "simple", "communication": "channels"},
}


def _kiloseconds() -> Any:
    """placement-small-2 with times of kiloseconds: its programs run with times scaled by a
    power of two (`time_unit`), and their bounds are mapped back by it."""
    doc = copy.deepcopy(dict(load_document("placement-small-2")))
    for op in doc["graph"]["ops"]:
        op["time"] *= 1e4
    doc["cluster"]["latency"] *= 1e4
    doc["name"] = "placement-small-2-kiloseconds"
    return instance_from_dict(doc)


def _menus() -> Any:
    """libra-gpt3-3d-total500 with bandwidth menus of its own: libra_discrete's MILP then
    proves a bound of the instance."""
    doc = copy.deepcopy(dict(load_document("libra-gpt3-3d-total500")))
    for dim in doc["network"]["dimensions"]:
        dim["bandwidth_options"] = [k * 25e9 for k in range(1, 21)]
    doc["name"] = "libra-gpt3-3d-total500-menus"
    return instance_from_dict(doc)


def _sct() -> Any:
    return instance_from_dict(copy.deepcopy(SCT_DOC))


#: one honest run of every solver bound source: (instance: a bundled name or a factory,
#: formulation, parameters)
CASES: dict[str, tuple[Any, str, dict[str, Any]]] = {
    "placement_milp": ("placement-small-2", "placement_milp", {}),
    "placement_milp-kiloseconds": (_kiloseconds, "placement_milp", {}),
    "placement_bounds": ("placement-small-2", "placement_bounds", {}),
    "placement_bounds-kiloseconds": (_kiloseconds, "placement_bounds", {}),
    "baechi_sct": (_sct, "baechi_sct", {}),
    "alpa_ilp": ("gpt-4layer-memtight", "alpa_ilp", {}),
    "tap-lp": ("gpt-4layer-memtight", "tap", {"exact": False}),
    "tap-walk": ("gpt-4layer-memtight", "tap", {"dp": False}),
    "pipeline_milp": ("pipeline-tessel-vshape", "pipeline_milp", {}),
    "libra_discrete": (_menus, "libra_discrete", {}),
    "codec_select": ("compression-mlp-small", "codec_select", {}),
}


def _instance(case: str) -> Any:
    inst = CASES[case][0]
    return distplan.load_instance(inst) if isinstance(inst, str) else inst()


@functools.cache
def _solved(case: str, backend: str) -> str:
    """The result of ``case`` on ``backend``, as written to a file (JSON text: each test
    reads its own copy)."""
    _, formulation, params = CASES[case]
    result = distplan.solve(_instance(case), formulation, backend=backend, time_limit=20, **params)
    return canonical_json(result.to_dict())


def _params() -> list[Any]:
    out = []
    for case, (_, formulation, _) in CASES.items():
        form = get_formulation(_instance(case).kind, formulation)
        for param in backend_params(TAKES[form.program]):
            out.append(pytest.param(case, *param.values, id=f"{case}-{param.id}", marks=param.marks))
    return out


PARAMS = _params()


def _solver_entries(doc: Doc) -> list[tuple[int, Doc]]:
    return [(k, e) for k, e in enumerate(doc["bounds"]) if e.get("kind") == "solver"]


def _set_bound(doc: Doc, value: float) -> None:
    """The result's bound raised with a listed bound (its gap recomputed), as a forger would."""
    if doc["bound"] is None or value > doc["bound"]:
        doc["bound"] = value
        doc["gap"] = relative_gap(doc["objective"], value)


def _verify(doc: Doc, inst: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """``distplan verify`` of ``doc`` written to a file, the instance given as a file."""
    write_json(inst.to_dict(), tmp_path / "instance.json")
    write_json(doc, tmp_path / "result.json")
    rc, out, _ = cli_run(["verify", str(tmp_path / "result.json"), "--instance", str(tmp_path / "instance.json")], capsys)
    return rc, out


@pytest.mark.parametrize(("case", "backend"), PARAMS)
def test_honest_results_verify_clean_with_every_solver_bound_linked(case: str, backend: str) -> None:
    doc = json.loads(_solved(case, backend))
    notes: list[str] = []
    assert check_result(doc, _instance(case), notes) == []
    assert not any("linked to no recorded call" in n or "verify does not know" in n for n in notes), notes
    assert all(e.get("solver_call") is not None for _, e in _solver_entries(doc)), doc["bounds"]


def _linked(case: str, backend: str) -> tuple[Doc, int, Doc]:
    doc = json.loads(_solved(case, backend))
    linked = [(k, e) for k, e in _solver_entries(doc) if e.get("solver_call") is not None]
    if not linked:  # only where the solver proved no bound (OSQP's LPs): else a link is missing
        assert doc["solver_results"] and all(c.get("bound") is None for c in doc["solver_results"]), doc["bounds"]
        pytest.skip(f"{backend} reports no dual bound for {case}: no solver bound to forge")
    k, entry = max(linked, key=lambda ke: ke[1]["value"])
    return doc, k, entry


@pytest.mark.parametrize(("case", "backend"), PARAMS)
def test_a_linked_bound_raised_above_its_calls_conversion_exits_1(case: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc, k, entry = _linked(case, backend)
    inst = _instance(case)
    call = doc["solver_results"][entry["solver_call"]]
    allowed = bound_source(doc["formulation"], entry["source"]).convert(call["bound"], inst, call["extra"]["model"])
    assert entry["value"] <= allowed  # the honest value is within its call's conversion
    entry["value"] = allowed + max(abs(allowed) * 1e-9, 1e-12)
    _set_bound(doc, entry["value"])
    rc, out = _verify(doc, inst, tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].value: " in out, out


@pytest.mark.parametrize(("case", "backend"), PARAMS)
def test_a_bound_unlinked_and_raised_exits_1(case: str, backend: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Raised a little above the result's bound, which then rests on a solver call's bound
    that names no call: a problem whatever the status (placement_bounds' results have none)."""
    doc, k, entry = _linked(case, backend)
    del entry["solver_call"]
    entry["value"] = math.nextafter(max(entry["value"], doc["bound"]) * (1 + 1e-9), math.inf)
    _set_bound(doc, entry["value"])
    rc, out = _verify(doc, _instance(case), tmp_path, capsys)
    assert rc == 1 and f"bounds[{k}].solver_call: " in out and "re-solve to link it" in out, out


def test_the_cases_reach_every_solver_bound_source() -> None:
    """A solver bound source added to `BOUND_SOURCES` needs a case above (on HiGHS, every
    case's own source is one of them)."""
    reached = set()
    for case in CASES:
        doc = json.loads(_solved(case, "highs"))
        for _, entry in _solver_entries(doc):
            reached.add(BOUND_SOURCES.index(bound_source(doc["formulation"], entry["source"])))  # type: ignore[arg-type]
    # the generic "<name> dual bound (" (formulations None) is for formulations declared from
    # blocks that state no source of their own: none in the package (test_verify_rev16's
    # some_milp is one)
    wanted = {k for k, s in enumerate(BOUND_SOURCES) if s.kind == "solver" and s.formulations is not None}
    assert wanted <= reached, [BOUND_SOURCES[k].pattern for k in wanted - reached]


def test_conversions_are_the_formulations_own_functions() -> None:
    """One definition: the registry names the function the formulation applies."""
    from distplan.formulations.bandwidth import discrete
    from distplan.formulations.pipeline import milp as pipeline_milp
    from distplan.formulations.placement import relaxation
    from distplan.formulations.sharding import alpa_ilp

    def stated(formulation: str, source: str) -> Any:
        convert = bound_source(formulation, source).convert  # type: ignore[union-attr]
        return getattr(convert, "__wrapped__", convert)  # (a two-argument conversion, adapted)

    assert stated("placement_milp", "placement_milp dual bound (highs, exact)") is relaxation.dual_bound_seconds
    assert stated("placement_bounds", "assignment relaxation (order dropped), MILP dual bound (highs, optimal)") is relaxation.dual_bound_seconds
    assert stated("alpa_ilp", "alpa_ilp dual bound (highs)") is alpa_ilp.dual_bound_seconds
    assert stated("tap", "tap: LP of the folded problem without boundary edges (highs)") is alpa_ilp.dual_bound_seconds
    assert stated("pipeline_milp", "pipeline_milp dual bound (disjunctive, highs)") is pipeline_milp.dual_bound_value
    assert stated("libra_discrete", "libra_discrete MILP dual bound (highs)") is discrete.dual_bound_seconds
    assert bound_source("codec_select", "codec_select dual bound (highs)").convert(2.5, None, {}) == 2.5  # type: ignore[union-attr]


#: for formulations whose kind's small instance does not suit them: one that does
OWN_INSTANCE: dict[str, Any] = {
    "single_device": "placement-small-1",
    "data_parallel": "gpt-2layer-2x2",
    "megatron": "gpt-2layer-2x2",
    "gpipe": "pipeline-mshape-inference",
    "interleaved_1f1b": "pipeline-interleaved-p4-v2",
    "zb_h1": "pipeline-zb-p4-m12-comm1",
    "zb_h2": "pipeline-zb-p4-m12-comm1",
    **dict.fromkeys(("zb_v", "v_min", "v_half", "v_zb"), lambda: make_pipeline("v2", 4, 8, weight_time=1.0)),
}
SMALL = {"placement": "placement-small-2", "sharding": "gpt-4layer-memtight", "compression": "compression-mlp-small", "pipeline": "pipeline-tessel-kshape", "bandwidth": "libra-gpt3-3d-total500"}


@pytest.mark.parametrize("name", [f.name for f in formulations()])
def test_every_formulation_links_the_solver_bounds_it_reports(name: str) -> None:
    """Every registered formulation, on a small bundled instance of its kind, on its
    default backend: each solver call's bound it reports names its call (a formulation
    that left out ``solver_record`` would leave one unlinked)."""
    (form,) = [f for f in formulations() if f.name == name]
    inst = OWN_INSTANCE.get(name, SMALL[form.kind])
    result = distplan.solve(inst() if callable(inst) else inst, name, time_limit=10)
    unlinked = [b.source for b in result.bounds if b.kind == "solver" and b.solver_call is None]
    assert not unlinked
