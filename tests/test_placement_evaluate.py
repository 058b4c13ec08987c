"""The placement evaluator's makespan is that of a plan meeting every constraint exactly:
start times accepted within the checks' tolerance (1e-7 x makespan per arc) cannot add up
along a chain to a makespan below the exact earliest schedule in the plan's orders, nor
below a proven bound."""

from __future__ import annotations

import numpy as np
import pytest
from test_placement_bounds import tiny

import distplan
from distplan.models.placement_evaluate import evaluate, retimed_makespan
from distplan.models.placement_plan import make_plan


@pytest.mark.parametrize("cross", [False, True])
def test_starts_squeezed_within_tolerance_do_not_lower_the_makespan(cross: bool) -> None:
    """A chain of 40 ops of 1 s (alternating devices when ``cross``, 1 s per transfer): each
    start 0.99 x tolerance earlier than its input allows still passes the checks, but the
    makespan stays the exact one (40 s on one device, 79 s alternating)."""
    n = 40
    inst = tiny(n, [(k, k + 1, 1) for k in range(n - 1)], [1] * n, [0] * n, 1, 0, "independent", False)
    device = np.array([k % 2 if cross else 0 for k in range(n)])
    exact = float(n + (n - 1 if cross else 0))
    tol = 1e-7 * exact
    start = np.array([k * (2.0 if cross else 1.0) - 0.99 * tol * k for k in range(n)])
    check = evaluate(inst, make_plan(inst, device, start))
    assert check.feasible, check.violations
    assert float((start + 1.0).max()) < exact  # the plan's own end: squeezed
    assert check.objective == exact
    assert retimed_makespan(inst, device, start) == exact


def test_proven_bound_holds_against_squeezed_plans() -> None:
    """placement-small-1: its proven bound is not above any accepted plan, squeezed or not."""
    inst = distplan.load_instance("placement-small-1")
    res = distplan.solve(inst, "placement_milp", time_limit=20)
    assert res.bound is not None and res.plan is not None
    plan = res.plan
    start = np.asarray(plan.start, dtype=float)
    order = np.argsort(start, kind="stable")
    squeezed = start.copy()
    squeezed[order] -= 0.99e-7 * res.objective * np.arange(inst.n_ops)  # earlier, the later the op
    squeezed = np.maximum(squeezed, 0.0)
    check = evaluate(inst, make_plan(inst, np.asarray(plan.device), squeezed))
    if check.feasible:
        assert check.objective >= res.bound


def test_a_start_below_zero_within_tolerance_is_re_timed() -> None:
    """A 2-op chain of 1 s started 5e-8 s early (accepted within the tolerance) ends at the
    exact 2 s, not 2 - 5e-8."""
    inst = tiny(2, [(0, 1, 0)], [1, 1], [0, 0], 1, 0, "independent", False)
    check = evaluate(inst, make_plan(inst, np.array([0, 0]), np.array([-5e-8, 1 - 5e-8])))
    assert check.feasible, check.violations
    assert check.objective == 2.0


def test_re_timing_keeps_the_plans_order_of_tied_ops() -> None:
    """o0 (5 s) and o1 (0 s) both start at 0 on g0; o1 -> o2 -> o3 (2 s each) on g1, o3
    started 1e-9 s early. Re-timed in the plan's order (o1, the shorter, first on g0 as the
    overlap check orders them) the makespan is 5 s; taking o0 first would give 9 s."""
    inst = tiny(4, [(1, 2, 0), (2, 3, 0)], [5, 0, 2, 2], [0] * 4, 1, 0, "independent", False)
    device = np.array([0, 0, 1, 1])
    start = np.array([0.0, 0.0, 0.0, 2.0 - 1e-9])
    check = evaluate(inst, make_plan(inst, device, start))
    assert check.feasible, check.violations
    assert check.objective == 5.0
    assert retimed_makespan(inst, device, start) == 5.0
