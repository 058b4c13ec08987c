"""Every exact MILP formulation gets ``default_time_limit`` seconds (60) when the caller
gives no limit, as placement_milp and codec_select did: without one, alpa_ilp on Llama-3
70B over an 8x8 H100 mesh ran past 400 s and 2.4 GB (review rev16), where 60 s gives a
0.95% gap with its plan and bound; tap's MILP fallback and pipeline_milp had none either."""

from __future__ import annotations

import time

import pytest

import distplan
from distplan.formulations.registry import get_formulation
from distplan.solvers.base import SolveOptions
from distplan.solvers.result import LIMIT_TERMINATIONS

EXACT_MILPS = sorted((f.kind, f.name) for f in distplan.formulations() if f.program == "milp" and f.exact)


def test_the_exact_milps_are_the_ones_expected() -> None:
    assert {n for _, n in EXACT_MILPS} >= {"alpa_ilp", "tap", "pipeline_milp", "placement_milp", "codec_select"}


@pytest.mark.parametrize("kind,name", EXACT_MILPS, ids=[n for _, n in EXACT_MILPS])
def test_an_exact_milp_without_a_limit_gets_the_default(kind: str, name: str) -> None:
    form = get_formulation(kind, name)
    assert form.params["default_time_limit"] == 60.0
    assert form.policy.options_for(SolveOptions(), None, form.params).time_limit == 60.0
    assert form.policy.options_for(SolveOptions(time_limit=7.0), None, form.params).time_limit == 7.0
    assert form.policy.options_for(SolveOptions(), None, {**form.params, "default_time_limit": 3.0}).time_limit == 3.0


def test_alpa_ilp_without_a_limit_ends_at_the_default_with_its_plan_and_bound() -> None:
    t0 = time.perf_counter()
    res = distplan.solve("gpt3-175b-64gpu-nomem", "alpa_ilp", default_time_limit=0.5)
    assert time.perf_counter() - t0 <= 0.5 + 2.0  # (the limit plus the documented grace)
    assert res.options["time_limit"] == 0.5
    assert res.termination in LIMIT_TERMINATIONS or res.status.value == "optimal"
    assert res.check is not None and res.check.feasible and res.bound is not None and res.bound <= res.objective
