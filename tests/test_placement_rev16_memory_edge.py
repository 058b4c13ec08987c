"""Review rev16 D1: placement at the memory edge. The evaluator accepts a device's peak up to
its capacity x (1 + MEMORY_TOLERANCE) (`PlacementInstance.accepted_memory`); whatever proves
something about every accepted plan (the path-cut and forced bounds, the relaxation's and the
MILP's memory rows, the single-device and op-fit infeasibility claims) must use that limit.
Fixture: ops a -> b of 1e12 and 1e12 + 1 bytes, two devices of 2e12 bytes; both ops on one
device hold capacity + 1 byte, which the evaluator accepts (makespan 2 s, the optimum); the
bare capacity had given a "safe" bound of 12 s, a false "optimal" 12 s (m-TOPO), crashes
(PlanCheckError) and a false exit 3 (single_device)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.placement.forced import forced_bound
from distplan.formulations.placement.pathcut import path_cut_bound
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import MEMORY_TOLERANCE, PlacementInstance
from distplan.models.placement_plan import make_plan

CAP = 2e12


def edge_doc(**model: str) -> dict[str, Any]:
    return {
        "format": "distplan/1",
        "kind": "placement",
        "name": "edge-int",
        "graph": {
            "ops": [{"name": "a", "time": 1.0, "memory": 1e12}, {"name": "b", "time": 1.0, "memory": 1e12 + 1}],
            "edges": [{"src": "a", "dst": "b", "bytes": 1e11}],
        },
        "cluster": {"devices": [{"name": "g0", "memory": CAP}, {"name": "g1", "memory": CAP}], "bandwidth": 1e10, "latency": 0.0},
        "model": {"memory": "simple", "communication": "independent", **model},
    }


@pytest.fixture(scope="module")
def inst() -> PlacementInstance:
    return PlacementInstance.from_dict(edge_doc())


def test_the_evaluator_accepts_both_ops_on_one_device(inst: PlacementInstance) -> None:
    check = evaluate(inst, make_plan(inst, np.array([0, 0]), np.array([0.0, 1.0])))
    assert check.feasible and check.objective == 2.0
    assert np.array_equal(inst.accepted_memory(), inst.device_memory * (1 + MEMORY_TOLERANCE))
    over = inst.with_device_memory(CAP - 2)  # 3 bytes over: refused
    assert not evaluate(over, make_plan(over, np.array([0, 0]), np.array([0.0, 1.0]))).feasible


def test_memory_bounds_hold_for_every_accepted_plan(inst: PlacementInstance) -> None:
    """The path-cut bound had been 11.9999999 (graded safe) and the forced bound proved
    memory splits the ops."""
    b = path_cut_bound(inst)
    assert b is None or b.value <= 2.0
    f = forced_bound(inst, 12.0)
    assert f is None or f.value <= 2.0


@pytest.mark.parametrize("name", ["single_device", "baechi_topo", "baechi_etf", "baechi_sct", "placement_search"])
def test_every_formulation_returns_an_accepted_plan_and_no_false_optimum(inst: PlacementInstance, name: str) -> None:
    r = distplan.solve(inst, name, time_limit=10)
    assert r.check.feasible and r.bound is not None and r.bound <= 2.0 <= r.objective
    if name == "baechi_topo":  # m-TOPO splits the ops: 12 s, not optimal
        assert r.objective == 12.0 and r.status.value == "feasible"
    else:
        assert r.objective == 2.0 and r.status.value == "optimal"


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_the_milp_and_its_relaxation_keep_accepted_plans(inst: PlacementInstance, backend: str) -> None:
    """The memory rows (`relaxation.memory_capacity`) had the bare capacity: the relaxation's
    bound was 11.99999998 and placement_milp crashed (PlanCheckError)."""
    r = distplan.solve(inst, "placement_bounds", backend=backend, time_limit=10)
    assert r.bound is not None and r.bound <= 2.0
    r = distplan.solve(inst, "placement_milp", backend=backend, time_limit=10)
    assert r.check.feasible and r.objective == 2.0 and r.bound is not None and r.bound <= 2.0 and r.status.value == "optimal"


def test_an_op_or_group_within_the_tolerance_is_not_infeasible() -> None:
    """An op of capacity + 1 byte, and a co-location group of capacity + 1 byte, fit what the
    evaluator accepts: no InfeasibleError at parse (it had compared with the bare capacity)."""
    doc = edge_doc()
    doc["graph"]["ops"] = [{"name": "a", "time": 1.0, "memory": CAP + 1}]
    doc["graph"]["edges"] = []
    r = distplan.solve(PlacementInstance.from_dict(doc), "baechi_etf")
    assert r.check.feasible and r.objective == 1.0
    doc = edge_doc()
    for op in doc["graph"]["ops"]:
        op["colocate"] = "g"
    r = distplan.solve(PlacementInstance.from_dict(doc), "baechi_etf")
    assert r.check.feasible and r.objective == 2.0
    doc["graph"]["ops"][1]["memory"] = 1e12 + 3  # 3 bytes over: proven infeasible
    with pytest.raises(InfeasibleError):
        distplan.solve(PlacementInstance.from_dict(doc), "baechi_etf")


def test_single_device_asks_the_evaluator_before_calling_its_plan_infeasible() -> None:
    """Liveness: a -> b -> c hold 5, 5 and 1 bytes (11 in all) but at most 10 at once (a's
    output is freed when b ends); on one device of 10 bytes the single-device plan fits,
    where single_device had said "no single device holds all 11 bytes" (exit 3)."""
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "freed",
        "graph": {
            "ops": [{"name": "a", "time": 1.0, "memory": 0, "output": 5}, {"name": "b", "time": 1.0, "memory": 0, "output": 5}, {"name": "c", "time": 1.0, "memory": 0, "temporary": 1}],
            "edges": [{"src": "a", "dst": "b", "bytes": 1.0}, {"src": "b", "dst": "c", "bytes": 1.0}],
        },
        "cluster": {"devices": [{"name": "g0", "memory": 10}], "bandwidth": 1e9, "latency": 0.0},
        "model": {"memory": "liveness"},
    }
    r = distplan.solve(PlacementInstance.from_dict(doc), "single_device")
    assert r.check.feasible and r.objective == 3.0
    doc["cluster"]["devices"][0]["memory"] = 9  # the peak, 10 bytes, does not fit: exit 3, proven
    with pytest.raises(InfeasibleError, match="no single device holds all"):
        distplan.solve(PlacementInstance.from_dict(doc), "single_device")
