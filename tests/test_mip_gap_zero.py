"""``--mip-gap 0`` as its help says (review rev26: the help claimed 0 "never shows
optimal"): at 0 a plan is optimal exactly when a proven bound meets it (pipeline_milp's
bound rounded up on integral data does), while the termination stays the solver's word
(placement_milp: the solver's optimal within its tolerances, the plan feasible)."""

from __future__ import annotations

import pytest

import distplan
from tests.conftest import cli_run


def test_a_bound_that_meets_the_plan_is_optimal_at_zero() -> None:
    res = distplan.solve("pipeline-zb-p4-m12-comm1", "pipeline_milp", mip_gap=0.0, time_limit=60)
    assert res.gap == 0.0 and res.bound == res.objective and res.status.value == "optimal"


def test_a_margin_below_the_plan_is_feasible_at_zero_whatever_the_solver_says() -> None:
    res = distplan.solve("placement-small-1", "placement_milp", mip_gap=0.0, time_limit=60)
    assert res.gap is not None and res.gap > 0.0 and res.status.value == "feasible"
    assert res.termination.value == "optimal"  # (HiGHS's word, within its tolerances)


def test_the_help_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, _ = cli_run(["solve", "--help"], capsys)
    text = " ".join(out.split())
    assert rc == 0 and "never shows optimal" not in text and "only when a bound meets it exactly" in text
