"""Pipelines whose times span nine orders of magnitude (a 1e9 s link delay or block beside
1 s blocks): the repetend searches walked one period at a time up to ~1e9 (tessel and
pipeline_milp ran past a 5 s limit for minutes, and without a limit did not end), and the
bound's candidate periods tried ~1e9 denominators. Times beyond `MAX_SECONDS` are refused
at parse time (a start of 2**60 s rounds by more than a second)."""

from __future__ import annotations

import math
import re
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.errors import InputError
from distplan.formulations.pipeline.modulo import MAX_PERIOD_UNITS, cyclic_blocks, least_fitting_period, modulo_backtrack
from distplan.formulations.pipeline.repetend import largest_fraction_below
from distplan.formulations.pipeline.residue import residue_search
from distplan.instances.pipelines import zero_bubble_case
from distplan.models.common import MAX_SECONDS
from distplan.models.pipeline import PipelineInstance


def _case(comm_delay: float = 0.0, first_duration: float = 1.0) -> PipelineInstance:
    doc = zero_bubble_case(stages=4, micro_batches=6).to_dict()
    doc["comm_delay"] = comm_delay
    doc["blocks"][0]["duration"] = first_duration
    return PipelineInstance.from_dict(doc)


#: (instance, its optimum): the F/B/W chain of 4 stages, 6 micro-batches, memory 8
CASES = {
    "link-delay-1e9": (_case(comm_delay=1e9), 12000000021.0),
    "block-1e9": (_case(first_duration=1e9), 6000000012.0),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("formulation", ["tessel", "pipeline_milp"])
def test_searches_end_at_once_and_reach_the_optimum(case: str, formulation: str) -> None:
    inst, optimum = CASES[case]
    res = distplan.solve(inst, formulation, time_limit=10)  # they take ~0.3 s; stepping took ~10 s a case
    assert res.termination.value in ("finished", "optimal")  # not stopped by the limit
    assert res.check is not None and res.check.feasible
    assert res.objective == optimum
    assert res.bound is not None and res.bound <= res.objective


def test_a_period_beyond_the_cap_is_left_undecided_without_a_search() -> None:
    inst, _ = CASES["block-1e9"]
    cy = cyclic_blocks(inst, 1)
    period = MAX_PERIOD_UNITS + 1
    assert residue_search(cy, inst, 4, period).status == "undecided"
    assert modulo_backtrack(cy, inst, 4, period) == (None, 0)


def test_least_fitting_period_is_the_flat_length_over_the_offsets() -> None:
    inst, _ = CASES["link-delay-1e9"]
    cy = cyclic_blocks(inst, 1)
    # F0..F3, B3..B0 in a chain with a 1e9 s delay on each of the 6 device changes, then W0
    flat = 6 * 1e9 + 9.0
    assert least_fitting_period(cy, 3) == pytest.approx(flat / 3, rel=1e-12)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 10**4), st.integers(1, 97), st.integers(1, 300))
def test_largest_fraction_below_matches_every_denominator(p: int, q: int, n: int) -> None:
    x = Fraction(p, q)
    assert largest_fraction_below(x, n) == max(Fraction(math.ceil(x * h) - 1, h) for h in range(1, n + 1))


def test_times_beyond_the_range_are_refused() -> None:
    doc = zero_bubble_case(stages=4, micro_batches=6).to_dict()
    doc["comm_delay"] = 2.0**60
    with pytest.raises(InputError, match=re.escape(f"beyond the largest value taken, {MAX_SECONDS:g} s")):
        PipelineInstance.from_dict(doc)


def test_the_periods_below_the_flat_length_are_skipped_not_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    """One residue search per period tried: the periods below the least fitting one are
    refuted together, not one call each (about 1e9 / 3 calls here)."""
    from distplan.formulations.pipeline import repetend

    calls: list[int] = []

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(int(args[3]))  # type: ignore[call-overload]
        return residue_search(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(repetend, "residue_search", counted)
    inst, optimum = CASES["link-delay-1e9"]
    assert distplan.solve(inst, "tessel", time_limit=10).objective == optimum
    assert calls and len(calls) <= 4 and min(calls) > MAX_PERIOD_UNITS, calls


def test_a_period_is_proven_least_only_when_its_bound_reaches_it() -> None:
    """Times of 5000 s units put the period above `MAX_PERIOD_UNITS`, so the rate MILP
    decides it; its "optimal" is a gap on the rate (1e-6 absolute on a rate of 3e-5) and
    left the period 3.4% above its bound while the plan said proven (review rev14 #1)."""
    from distplan.instances.pipelines import make_pipeline

    s = 5000.0
    inst = make_pipeline("v", 4, 8, forward_time=s, backward_time=2 * s, weight_time=s, shard_time=s, memory_capacity=2.0)
    info = distplan.solve(inst, "tessel", time_limit=60).plan.info
    assert info["period"] > MAX_PERIOD_UNITS
    assert not info["period_proven_optimal"] or info["period_bound"] >= info["period"], info
