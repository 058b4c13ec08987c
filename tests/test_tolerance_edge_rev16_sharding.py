"""Review rev16 D2: the sharding evaluator accepts a plan's memory up to ``budget x (1 +
MEMORY_TOLERANCE)``, but alpa_ilp and tap compared the least memory with the exact budget
(``1e-12`` relative): on gpt-4layer-memtight with a budget of 3,838,705,663 bytes, 1 byte
below the least-memory plan (which the evaluator accepts, objective 0.12367323), both said
infeasible ("1 bytes missing", exit 3). What proves (infeasibility, the memory row of a
reported bound, the dynamic program's bound) now compares with the most any accepted plan
holds (`alpa_ilp.memory_limits`), what is returned with the least the evaluator surely
accepts."""

from __future__ import annotations

import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.errors import InfeasibleError
from distplan.formulations.sharding import alpa_ilp
from distplan.models.sharding import MEMORY_TOLERANCE, bytes_over

#: the least memory per device of any plan of gpt-4layer-memtight (bytes), and its optimum there
LEAST = 3838705664.0
OPTIMUM = 0.12367323328170671


@pytest.fixture(scope="module")
def tight() -> distplan.ShardingInstance:
    return distplan.load_instance("gpt-4layer-memtight").with_memory(LEAST - 1.0)


def _check(r: distplan.Result, budget: float) -> None:
    assert r.check is not None and r.check.feasible
    assert r.check.details["memory_bytes"] == LEAST and not bytes_over(LEAST, budget)
    assert r.objective == pytest.approx(OPTIMUM, rel=1e-9)
    assert r.bound is not None and r.bound <= r.objective


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_alpa_ilp_returns_the_plan_the_evaluator_accepts_1_byte_over(backend: str, tight: distplan.ShardingInstance) -> None:
    r = distplan.solve(tight, "alpa_ilp", backend=backend, mip_gap=1e-9)  # InfeasibleError before
    _check(r, tight.memory_budget)


@pytest.mark.parametrize("params", [{}, {"dp": False}, {"exact": False}], ids=["dp", "milp", "shared"])
def test_tap_returns_the_plan_the_evaluator_accepts_1_byte_over(params: dict[str, bool], tight: distplan.ShardingInstance) -> None:
    r = distplan.solve(tight, "tap", mip_gap=1e-9, **params)  # InfeasibleError before (dp and milp)
    _check(r, tight.memory_budget)


def test_a_budget_beyond_the_tolerance_is_still_infeasible() -> None:
    """Past what the evaluator accepts (the least plan's memory over budget x (1 + 2e-9)),
    the shortfall is still proven."""
    inst = distplan.load_instance("gpt-4layer-memtight").with_memory(LEAST / (1 + 2 * MEMORY_TOLERANCE))
    assert bytes_over(LEAST, inst.memory_budget)
    for formulation in ("alpa_ilp", "tap"):
        with pytest.raises(InfeasibleError, match="missing"):
            distplan.solve(inst, formulation)


def test_memory_limits_bracket_what_the_evaluator_accepts() -> None:
    """The plan limit is accepted, just past the proof limit is not; both lie within the
    rounding room of the evaluator's threshold."""
    for budget in (LEAST - 1.0, 4.4e7, 8.5e10, 1.0):
        plan, proof = alpa_ilp.memory_limits(budget)
        assert budget < plan < proof
        assert not bytes_over(plan, budget)
        assert bytes_over(proof * (1 + 1e-12), budget)
        accepted = budget * (1 + MEMORY_TOLERANCE)
        assert plan >= accepted * (1 - 2 * alpa_ilp.MEMORY_ROUNDING) and proof <= accepted * (1 + 2 * alpa_ilp.MEMORY_ROUNDING)


def test_the_memory_row_limit_of_whole_bytes() -> None:
    """Whole-byte memories: the largest whole number within the proof limit (3838705667 at
    a budget of 3838705663: the least plan, 1 byte over, is in), or the budget itself when
    no whole number lies between it and the proof limit (the exact budget's row, so the
    solver's path is the one it was); other memories: the proof limit."""
    import numpy as np

    whole = np.array([1024.0, 2048.0, 3.0])
    assert alpa_ilp.memory_row_limit(LEAST - 1.0, whole) == 3838705667.0
    assert alpa_ilp.memory_row_limit(163298816.0, whole) == 163298816.0
    assert alpa_ilp.memory_row_limit(29168742.4, whole) == 29168742.4
    assert alpa_ilp.memory_row_limit(LEAST - 1.0, whole + 0.5) == alpa_ilp.memory_limits(LEAST - 1.0)[1]
