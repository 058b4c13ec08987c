"""codec_select without a time limit gets ``default_time_limit`` seconds (60), as
placement_milp does: on compression-bert-large HiGHS had spent more than 49 minutes
closing the last 0.016 % of the gap, with the plan it had after 5 s."""

from __future__ import annotations

import distplan
from distplan.formulations.registry import get_formulation
from distplan.solvers.base import SolveOptions
from distplan.solvers.result import LIMIT_TERMINATIONS


def test_the_policy_gives_a_run_without_a_limit_the_default() -> None:
    form = get_formulation("compression", "codec_select")
    assert form.params["default_time_limit"] == 60.0
    inst = distplan.load_instance("compression-bert-large")
    assert form.policy.options_for(SolveOptions(), inst, form.params).time_limit == 60.0
    assert form.policy.options_for(SolveOptions(time_limit=7.0), inst, form.params).time_limit == 7.0


def test_a_run_without_a_limit_ends_at_the_default_with_its_plan_and_gap() -> None:
    res = distplan.solve(distplan.load_instance("compression-bert-large"), "codec_select", default_time_limit=2.0)
    assert res.termination in LIMIT_TERMINATIONS and res.status.value == "feasible"
    assert res.check.feasible and res.bound is not None and res.bound <= res.objective
