"""libra_discrete's menu MILP counts its objective in a unit of its own (review rev31 audit
C, HIGH 1): in seconds its costs were 3e-8 to 7e-7 on LIBRA's DLRM, below HiGHS's dual
feasibility tolerance, and HiGHS ended "optimal" at 3.788 ms with a bound of 3.788 ms
where SCIP and CBC found a plan of 3.776 ms that the evaluator accepts. The unit is
recorded in every call's model record (record version 6) and derived again by `distplan
verify`, which converts the call's bound with it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import distplan
from distplan.formulations.bandwidth.data import prepare
from distplan.formulations.bandwidth.discrete import OBJECTIVE_UNIT, objective_unit_seconds
from distplan.instances import load_document
from distplan.models.common import instance_from_dict
from distplan.verify import check_result
from tests.conftest import backend_params, takes_milp


def menu_instance() -> Any:
    """LIBRA's DLRM on four dimensions, each with its own menu on the 12.5 GB/s grid (the
    audit's instance)."""
    doc = copy.deepcopy(dict(load_document("libra-dlrm-4d-multi")))
    for dim, top in zip(doc["network"]["dimensions"], [500, 500, 200, 200], strict=True):
        dim["bandwidth_options"] = [12.5e9 * k for k in range(1, int(top / 12.5) + 1)]
    doc["name"] = "libra-dlrm-4d-multi-menus"
    return instance_from_dict(doc)


#: the optimum SCIP and CBC found before the change, and every backend finds after it (s)
OPTIMUM = 0.0037759297395555565


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_every_milp_backend_finds_the_menu_optimum_and_no_bound_passes_it(backend: str) -> None:
    inst = menu_instance()
    res = distplan.solve(inst, "libra_discrete", backend=backend, time_limit=60)
    assert res.objective == pytest.approx(OPTIMUM, rel=1e-9)
    assert res.status.value == "optimal"
    assert res.bound is not None and res.bound <= OPTIMUM
    milp = [c for c in res.solver_results if c.model_name == "libra_discrete"]
    assert milp and all(c.extra["model"][OBJECTIVE_UNIT.name] == objective_unit_seconds(prepare(inst)) for c in milp)
    assert check_result(res.to_dict(), inst) == []


def test_the_objective_is_scaled_to_costs_of_at_most_one() -> None:
    from distplan.formulations.bandwidth.discrete import DISCRETE, menus
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import get_backend
    from distplan.solvers.options import SolveOptions

    inst = menu_instance()
    prog = prepare(inst)
    ctx = RunContext(get_backend("highs"), SolveOptions())
    model, _ = DISCRETE.build(prog, {"menus": menus(ctx, prog, 12.5, 400), "accepted": True}, name="libra_discrete")
    costs = abs(model.to_arrays().c)
    assert costs.max() == pytest.approx(1.0) and costs[costs > 0].min() > 1e-3


def _milp_call(doc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in doc["solver_results"] if c["extra"]["model"]["name"] == "libra_discrete")


def test_verify_holds_the_recorded_unit_to_the_instance() -> None:
    inst = menu_instance()
    doc = distplan.solve(inst, "libra_discrete", time_limit=60).to_dict()
    assert check_result(doc, inst) == []
    raised = copy.deepcopy(doc)
    _milp_call(raised)["extra"]["model"][OBJECTIVE_UNIT.name] *= 1.001  # (a larger unit: a larger bound)
    assert any("objective_unit_seconds" in message for _, message in check_result(raised, inst))
    dropped = copy.deepcopy(doc)
    del _milp_call(dropped)["extra"]["model"][OBJECTIVE_UNIT.name]
    assert any("objective_unit_seconds" in f"{name} {message}" for name, message in check_result(dropped, inst))


def test_a_version_5_record_counted_seconds_and_still_verifies() -> None:
    """A result written before the unit (record version 5): its MILP counted seconds, so
    its calls' objective and bound are seconds and their records have no unit."""
    inst = menu_instance()
    doc = distplan.solve(inst, "libra_discrete", time_limit=60).to_dict()
    old = copy.deepcopy(doc)
    old["record_version"] = 5
    call = _milp_call(old)
    unit = call["extra"]["model"].pop(OBJECTIVE_UNIT.name)
    for key in ("objective", "bound"):
        call[key] *= unit
    assert check_result(old, inst) == []
