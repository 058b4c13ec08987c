"""Raw solver options that change what a result means are distplan's own and refused
(`distplan.solvers.reserved`): the run's time limit and gap, and objective cutoffs. Review
rev23: ``--solver-option objective_bound=0`` made pipeline_milp claim 109.5 s optimal, with
a "proven" bound of 109.5 s, beside a 105.5 s plan, placement_milp claim a wrong optimum
and alpa_ilp call a feasible instance infeasible; the option was not in the record, so
`distplan verify` passed them."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conftest import backend_params, skip_unless_available

import distplan
from distplan.errors import InputError
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline
from distplan.solvers import reserved
from distplan.solvers.base import get_backend
from distplan.verify import check_result

#: per backend: (a reserved option of each kind, an option it keeps) -- every backend that
#: names reserved options has a row
RESERVED: dict[str, tuple[list[dict[str, Any]], dict[str, Any]]] = {
    "highs": ([{"time_limit": 100.0}, {"mip_rel_gap": 0.5}, {"mip_abs_gap": 10.0}, {"objective_bound": 0.0}, {"objective_target": 0.0}], {"mip_heuristic_effort": 0.1}),
    "pulp-highs": ([{"objective_bound": 0.0}, {"time_limit": 100.0}], {"mip_heuristic_effort": 0.1}),
    "pyomo-highs": ([{"objective_bound": 0.0}, {"mip_rel_gap": 0.5}], {"mip_heuristic_effort": 0.1}),
    "scip": ([{"limits/time": 100.0}, {"limits/gap": 0.5}, {"limits/primal": 0.0}, {"limits/dual": 0.0}], {"presolving/maxrounds": -1}),
    "pulp-cbc": ([{"sec": 100}, {"ratio": 0.5}, {"allowableGap": 1.0}, {"cuto": 0.0}], {"cuts": "on"}),
    "pyomo-cbc": ([{"-Seconds": 100}, {"ratioGap": 0.5}, {"cutoff": 0.0}], {"cuts": "on"}),
    "pyomo-glpk": ([{"tmlim": 100}, {"mipgap": 0.5}], {}),
    "cvxpy-HIGHS": ([{"objective_bound": 0.0}, {"highs_options": {"mip_rel_gap": 0.5}}, {"time_limit": 100.0}], {"mip_heuristic_effort": 0.1}),
    "cvxpy-SCIP": ([{"scip_params": {"limits/primal": 0.0}}, {"scip_params": {"limits/time": 100.0}}], {"scip_params": {"presolving/maxrounds": -1}}),
    "cvxpy-SCIPY": ([{"scipy_options": {"mip_rel_gap": 0.5}}, {"scipy_options": {"time_limit": 100.0}}], {"scipy_options": {"presolve": True}}),
    "cvxpy-CLARABEL": ([{"time_limit": 100.0}], {"max_iter": 100}),
    "cvxpy-SCS": ([{"time_limit_secs": 100.0}], {"max_iters": 100000}),
    "cvxpy-OSQP": ([{"time_limit": 100.0}], {"max_iter": 100000}),
    "cvxpy-CBC": ([{"maximumSeconds": 100}, {"allowableFractionGap": 0.5}], {"maximumNodes": 1000}),
    "cvxpy-GLPK_MI": ([], {}),
    "cvxpy-ECOS": ([{"feastol": 1e-3}], {"max_iters": 100}),
}


def test_every_backend_with_reserved_options_is_covered() -> None:
    from distplan.solvers.base import all_backends

    named = {b.name for b in all_backends() if b.reserved_fn is not None and any(b.reserved_fn(raw) for raw in ({"time_limit": 1}, {"tmlim": 1}, {"sec": 1}, {"limits/time": 1}, {"time_limit_secs": 1}))}
    assert named <= set(RESERVED), named - set(RESERVED)
    assert get_backend("highs").reserved_fn is not None  # the embedded default


@pytest.mark.parametrize("backend", sorted(RESERVED))
def test_the_backends_tables(backend: str) -> None:
    """The tables themselves (no solver needed): each reserved option is found, with why
    and what to give instead; the kept option is not."""
    fn = get_backend(backend).reserved_fn
    assert fn is not None
    refused, kept = RESERVED[backend]
    for raw in refused:
        got = fn(raw)
        assert got is not None, raw
        name, why, instead = got
        assert name.split(".")[0] in raw and why and instead
    assert fn(kept) is None


def test_cbc_abbreviations_are_matched_as_cbc_matches_them() -> None:
    """CBC takes any prefix of a name from its shortest (``sec``, ``ratio``, ``cuto``) in
    any case: its time limit, gaps and cutoff are refused with their own reason under every
    spelling."""
    for key in ("sec", "seco", "SECONDS", "-sec", "ratio", "ratioGap", "allow", "cuto", "cutoff", "timeM"):
        got = reserved.cbc_reserved({key: 1})
        assert got is not None and got[1] != reserved.NOT_VETTED[0], key


def test_cbc_takes_only_its_accepted_options_and_plain_values() -> None:
    """Review rev23b: ``max`` (and ``direction=max``) made CBC maximise and report the
    maximum as a proven minimum; ``inc``/``Increment`` escaped the backends' exact
    ``increment`` check and gave a false bound; ``cutoff=0`` as a key and ``doH=-cutoff=0``
    as a value smuggled a cutoff in."""
    for key in ("cuts", "cutsOnOff", "maxN", "maxNodes", "maxSo", "heur", "randomSeed", "log"):
        assert reserved.cbc_reserved({key: 1}) is None, key
    # (``increment``: CBC ended "optimal" at 44.2 ms where 42.5 ms exists, review rev23c)
    for key in ("max", "maximize", "Max", "direction", "inc", "Increment", "increment", "doH", "cutoff=0", "cuto=0", "se", "cut"):
        assert reserved.cbc_reserved({key: 1}) is not None, key
    for value in ("-cutoff=0", "-max", "1 -cutoff 0"):
        assert reserved.cbc_reserved({"cuts": value}) is not None, value
    assert reserved.cbc_reserved({"maxN": "-1"}) is None  # (a negative number is a value)


def test_only_options_that_change_no_proof_are_accepted() -> None:
    """Review rev23b: HiGHS's dual_feasibility_tolerance=1e5 "proved" 117.5 s beside a
    105.5 s plan. Tolerances, and anything else not listed, are refused."""
    for raw in ({"dual_feasibility_tolerance": 1e5}, {"primal_feasibility_tolerance": 1.0}, {"mip_feasibility_tolerance": 0.1}, {"solver": "pdlp"}):
        assert reserved.highs_reserved(raw) is not None, raw
    assert reserved.scip_reserved({"numerics/feastol": 1e-2}) is not None
    assert reserved.scip_reserved({"constraints/linear/enable": False}) is not None
    assert reserved.scip_reserved({"heuristics/rens/freq": -1}) is None


@pytest.mark.parametrize("backend", backend_params(lambda b: b.reserved_fn is not None and b.capabilities.milp))
def test_a_reserved_option_is_refused_before_solving(backend: str) -> None:
    refused, _ = RESERVED[backend]
    for raw in refused:
        with pytest.raises(InputError, match=r"^solver_options\.\S+: \S+ is refused by distplan: "):
            distplan.solve("placement-small-1", "placement_milp", backend=backend, solver_options=raw)


def test_the_review_case_is_refused_and_the_cli_names_it(tmp_path, capfd: pytest.CaptureFixture[str]) -> None:
    """The reviewer's pipex.json: pipeline_milp claimed 109.5 s optimal; tessel has 105.5 s."""
    inst = make_pipeline("x", 4, 12, memory_capacity=4.0, comm_delay=0.5)
    with pytest.raises(InputError, match="objective_bound is refused"):
        distplan.solve(inst, "pipeline_milp", time_limit=5, solver_options={"objective_bound": 0})
    from distplan.cli import main

    path = tmp_path / "pipex.json"
    path.write_text(json.dumps(inst.to_dict()))
    assert main(["solve", str(path), "-f", "pipeline_milp", "--solver-option", "objective_bound=0", "--json"]) == 2
    out, err = capfd.readouterr()
    assert json.loads(out)["error"]["exit_code"] == 2 and "solver_options.objective_bound" in err


def test_the_record_keeps_the_raw_options_and_verify_flags_a_reserved_one() -> None:
    res = distplan.solve("placement-small-1", "placement_milp", time_limit=30, solver_options={"mip_heuristic_effort": 0.1})
    doc = res.to_dict()
    assert doc["options"]["solver_options"] == {"mip_heuristic_effort": 0.1}
    calls = [k for k, c in enumerate(doc["solver_results"]) if c["backend"] == "highs"]
    assert calls and all(doc["solver_results"][k]["options"]["solver_options"] == {"mip_heuristic_effort": 0.1} for k in calls)
    inst = load_instance("placement-small-1")
    assert check_result(doc, inst, require_version=True) == []
    forged = copy.deepcopy(doc)
    forged["solver_results"][calls[-1]]["options"]["solver_options"]["objective_bound"] = 0.0
    problems = check_result(forged, inst)
    assert any(where == f"solver_results[{calls[-1]}].options.solver_options.objective_bound" for where, _ in problems), problems


def test_a_version_3_record_must_keep_its_raw_options_an_older_need_not() -> None:
    from distplan.solvers.result import RECORD_VERSION_KEY, SOLVER_OPTIONS_SINCE

    inst = load_instance("placement-small-1")
    doc = distplan.solve(inst, "placement_milp", time_limit=30).to_dict()
    assert doc[RECORD_VERSION_KEY] >= SOLVER_OPTIONS_SINCE == 3
    dropped = copy.deepcopy(doc)
    del dropped["solver_results"][-1]["options"]["solver_options"]
    assert any(where == f"solver_results[{len(doc['solver_results']) - 1}].options.solver_options" for where, _ in check_result(dropped, inst)), "a dropped field passed"
    assert check_result({**dropped, RECORD_VERSION_KEY: 2}, inst) == []  # (written before version 3)


def test_verify_flags_null_raw_options_and_an_unknown_backend() -> None:
    """Review rev23b: a version-3 record whose ``solver_options`` is null, or whose call
    names a backend this distplan does not know beside raw options, passed."""
    inst = load_instance("placement-small-1")
    doc = distplan.solve(inst, "placement_milp", time_limit=30).to_dict()
    last = len(doc["solver_results"]) - 1
    nulled = copy.deepcopy(doc)
    nulled["solver_results"][last]["options"]["solver_options"] = None
    assert any(where == f"solver_results[{last}].options.solver_options" for where, _ in check_result(nulled, inst))
    unknown = copy.deepcopy(doc)
    unknown["solver_results"][last]["backend"] = "HiGHS"
    unknown["solver_results"][last]["options"]["solver_options"] = {"objective_bound": 0}
    assert any(where == f"solver_results[{last}].options.solver_options" for where, _ in check_result(unknown, inst))


def test_raw_values_are_recorded_as_json_values() -> None:
    """Review rev23b: an infinite value was written as a bare ``Infinity`` (no JSON), and a
    numpy integer as the text ``'np.int64(1000)'``."""
    import numpy as np

    from distplan.solvers.base import SolveOptions
    from distplan.solvers.result import options_record

    record = options_record(SolveOptions(raw={"mip_max_nodes": np.int64(1000), "x": float("inf"), "n": {"y": np.float64(0.5)}}))
    assert record["solver_options"] == {"mip_max_nodes": 1000, "x": "inf", "n": {"y": 0.5}}
    json.dumps(record, allow_nan=False)


@pytest.mark.parametrize("backend", [pytest.param("cvxpy-CLARABEL", marks=skip_unless_available("cvxpy-CLARABEL"))])
def test_an_accepted_option_on_the_direct_clarabel_path_is_applied_and_verifies(backend: str) -> None:
    """Review rev23c: libra_perf solved by its direct Clarabel path ignored ``max_iter=1``,
    and the record named a backend whose options verify could not vet; with raw options it
    goes through cvxpy, which hands them to Clarabel."""
    inst = load_instance("libra-gpt3-3d-total500")
    res = distplan.solve(inst, "libra_perf", backend=backend, solver_options={"max_iter": 1})
    assert res.solver_results[0].termination.value == "iteration_limit"
    assert all(r.backend == backend for r in res.solver_results)
    assert check_result(res.to_dict(), inst, require_version=True) == []


@pytest.mark.parametrize("backend", ["pyomo-highs", "cvxpy-HIGHS"])
def test_highs_limits_are_taken_only_where_the_record_maps_them(backend: str) -> None:
    """Review rev23c: through cvxpy a node-limit stop was recorded as a time limit with a
    "feasible" objective of 0 and no solution, through Pyomo as an iteration limit."""
    fn = get_backend(backend).reserved_fn
    assert fn is not None
    for name in sorted(reserved.HIGHS_LIMITS):
        assert fn({name: 1}) is not None, (backend, name)
    for mapped in ("highs", "pulp-highs"):  # (`highs.node_limit`: tests/test_highs_node_limit.py)
        assert get_backend(mapped).reserved_fn({"mip_max_nodes": 1}) is None  # type: ignore[misc]
