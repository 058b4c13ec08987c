"""Review rev16 D3: the pipeline evaluator accepts a memory prefix up to ``capacity +
MEMORY_TOLERANCE x max(1, |capacity|)`` (`distplan.models.pipeline.capacity_limit`), but
`common.check_capacity` compared with ``capacity x (1 + 1e-12)``: with blocks of memory
1 + 4e-10 on devices of capacity 1, every formulation (1f1b, tessel, pipeline_milp) said
"memory capacity below what any schedule needs" (exit 3), although a schedule of one
micro-batch in flight is accepted (makespan 12, the optimum by brute force). What proves
(infeasibility, pipeline_milp's memory rows, the state search) now compares with
`common.proof_capacity`, what is returned with `common.plan_capacity`."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.pipeline.common import check_capacity, plan_capacity, proof_capacity
from distplan.models.common import instance_from_dict
from distplan.models.pipeline import MEMORY_TOLERANCE, capacity_limit, evaluate, make_plan

EPS = 4e-10


def edge(eps: float = EPS) -> distplan.PipelineInstance:
    """2 devices, N = 2, F/B blocks allocating and freeing 1 + eps against capacity 1."""
    blocks = [
        {"name": "F0", "role": "F", "duration": 1.0, "devices": ["d0"], "memory": 1.0 + eps, "deps": []},
        {"name": "F1", "role": "F", "duration": 1.0, "devices": ["d1"], "memory": 1.0 + eps, "deps": ["F0"]},
        {"name": "B1", "role": "B", "duration": 2.0, "devices": ["d1"], "memory": -1.0 - eps, "deps": ["F1"]},
        {"name": "B0", "role": "B", "duration": 2.0, "devices": ["d0"], "memory": -1.0 - eps, "deps": ["B1"]},
    ]
    doc = {"format": "distplan/1", "kind": "pipeline", "name": "ppedge", "mode": "training", "devices": ["d0", "d1"], "micro_batches": 2, "comm_delay": 0.0, "memory_capacity": 1.0, "blocks": blocks}
    return instance_from_dict(doc)


def test_the_evaluator_accepts_one_micro_batch_in_flight() -> None:
    inst = edge()
    start = np.array([[0, 6], [1, 7], [2, 8], [4, 10]], dtype=float)  # rows F0, F1, B1, B0
    c = evaluate(inst, make_plan(inst, start))
    assert c.feasible and c.objective == 12.0
    check_capacity(inst)  # InfeasibleError ("short by 4e-10") before


@pytest.mark.parametrize("formulation", ["1f1b", "tessel"])
def test_heuristics_schedule_the_edge(formulation: str) -> None:
    r = distplan.solve(edge(), formulation)  # InfeasibleError before
    assert r.check is not None and r.check.feasible and r.objective == 12.0
    assert r.bound is None or r.bound <= 12.0


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_pipeline_milp_schedules_the_edge(backend: str) -> None:
    r = distplan.solve(edge(), "pipeline_milp", backend=backend, time_limit=20)  # InfeasibleError before
    assert r.check is not None and r.check.feasible and r.objective == 12.0
    assert r.bound is not None and r.bound <= 12.0


def test_a_shortfall_beyond_the_tolerance_is_still_proven() -> None:
    inst = edge(eps=3 * MEMORY_TOLERANCE)
    with pytest.raises(InfeasibleError, match="capacity below what any schedule needs"):
        check_capacity(inst)
    with pytest.raises(InfeasibleError):
        distplan.solve(inst, "pipeline_milp")


def test_plan_and_proof_capacities_bracket_the_evaluators_threshold() -> None:
    for cap, mem in ((1.0, [1.0, -1.0]), (1e10, [3e9, -3e9, 1.5e9]), (0.5, [0.25])):
        plan, proof = plan_capacity(cap, mem, 4), proof_capacity(cap, mem, 4)
        assert cap <= plan <= capacity_limit(cap) < proof
    assert plan_capacity(float("inf"), [1.0], 2) == proof_capacity(float("inf"), [1.0], 2) == float("inf")
