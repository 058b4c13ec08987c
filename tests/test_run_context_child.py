"""`RunContext.child`: a phase's context never outlives its run, unless the phase is
given a grace (``at_least``, the bandwidth baselines' `deadline.BASELINE_GRACE`)."""

from __future__ import annotations

import time

import pytest

from distplan.formulations.registry import RunContext
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions


def _run(limit: float | None) -> RunContext:
    return RunContext(get_backend("highs"), SolveOptions(time_limit=limit), {"p": 1})


def test_a_child_ends_with_its_run() -> None:
    child = _run(5.0).child(time_limit=60.0)
    assert child.options.time_limit is not None and 4.0 < child.options.time_limit <= 5.0
    assert _run(5.0).child(time_limit=1.0).options.time_limit == pytest.approx(1.0)
    assert _run(None).child().options.time_limit is None


def test_at_least_gives_a_phase_its_grace_past_the_run() -> None:
    run = _run(0.2)
    child = run.child({}, at_least=2.0)
    assert child.options.time_limit == pytest.approx(2.0)
    assert child.deadline is not None and run.deadline is not None and child.deadline > run.deadline + 1.5
    roomy = _run(30.0).child({}, at_least=2.0)  # room enough: the run's deadline
    assert roomy.options.time_limit is not None and 29.0 < roomy.options.time_limit <= 30.0
    assert _run(None).child(at_least=2.0).options.time_limit is None
    assert child.params == {} and time.perf_counter() < child.deadline
