"""Review rev16 D5: libra_discrete with the instance's own menus solved its MILP over the
exact rows, while the evaluator accepts each row within ``TOLERANCE`` of its magnitude. On
menu70 (tests/data/bandwidth_rev16_menu70.json, menus 1e-7 GB/s above round speeds, total
== 500 GB/s) HiGHS and CBC took [200, 75.0000001, 175.0000001, 50.0000001] GB/s, 500.0000003
in all (accepted; 0.33366953496, the optimum by brute force over every combination), while
SCIP's "optimal" was 0.3347060151 with a bound above that plan. The MILP's bounds and rows
are now widened to what the evaluator accepts (`discrete.accepted_bounds`,
`safe.accepted_rows`); a plan the evaluator rejects is solved again with the exact
rows, the widened program's bound kept."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import backend_params, takes_milp

import distplan
from distplan.formulations.bandwidth import discrete, safe
from distplan.formulations.bandwidth.data import prepare
from distplan.models.common import instance_from_dict

DATA = Path(__file__).parent / "data"
#: the optimum over every menu combination the evaluator accepts (brute force)
OPTIMUM = 0.33366953496


@pytest.fixture(scope="module")
def menu70() -> distplan.BandwidthInstance:
    return distplan.load_instance(DATA / "bandwidth_rev16_menu70.json")


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_every_backend_finds_the_plan_the_evaluator_accepts(backend: str, menu70: distplan.BandwidthInstance) -> None:
    r = distplan.solve(menu70, "libra_discrete", backend=backend, time_limit=30)
    assert r.check is not None and r.check.feasible
    assert r.objective == pytest.approx(OPTIMUM, rel=1e-9)  # SCIP: 0.3347060151 before
    assert r.bound is not None and r.bound <= r.objective and r.bound <= OPTIMUM


def test_a_widened_plan_the_evaluator_rejects_is_solved_again_with_the_exact_rows(monkeypatch: pytest.MonkeyPatch, menu70: distplan.BandwidthInstance) -> None:
    """Rows widened far beyond the tolerance (made up): the widened program's plan breaks
    the total, the exact rows' plan is returned, and the reported bound is the widened
    program's (below every accepted plan)."""
    real = safe.accepted_excess
    monkeypatch.setattr(safe, "accepted_excess", lambda prog: real(prog) + 1000.0)
    r = distplan.solve(menu70, "libra_discrete", time_limit=30)
    assert r.check is not None and r.check.feasible
    assert len(r.solver_results) == 2
    assert r.bound is not None and r.bound <= OPTIMUM <= r.objective


def test_accepted_rows_split_equalities_and_widen_by_the_accepted_excess() -> None:
    doc = json.loads((DATA / "bandwidth_rev16_menu70.json").read_text())
    doc["constraints"]["total_bandwidth"]["sense"] = "=="
    prog = prepare(instance_from_dict(doc))
    (total,) = prog.rows
    assert total.sense == "=="
    le, ge = safe.accepted_rows(prog)
    assert (le.sense, ge.sense) == ("<=", ">=") and le.path != ge.path
    excess = safe.accepted_excess(prog)[0]
    assert le.rhs == total.rhs + excess and ge.rhs == total.rhs - excess and excess > 0
    low, high = discrete.accepted_bounds(prog)
    assert (low <= prog.lb).all() and (high >= prog.ub).all()
