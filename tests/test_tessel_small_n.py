"""Tessel at small micro-batch counts: with N below twice the repetend's offsets the
unrolled schedule has no steady state (warm-up and cool-down are the whole run), so the
repetend candidates of the least period are completed as whole schedules at N and the
best competes with the other completions (`tessel._pick_repetend`, `_whole_completion`).

Then, the whole schedule being small, the exact state search (`statesearch`) runs within
a budget of states and seconds from the best completion (`tessel._whole_state_search`).

Known optima (pipeline_milp, proven: time-indexed model infeasible below them):
M shape, 8 stages, N = 4, F 2 s, B 1 s, W 3 s, no memory limit: 47 s (tessel gave 50);
K shape, 4 stages, N = 4, F 2 s, B 3 s, W 1 s, memory 8: 35 s (tessel gave 37);
NN shape, 4 stages, N = 3, F 1 s, B 3 s, memory 3: 36 s (tessel gave 38).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

import distplan
from distplan.errors import InfeasibleError, InputError
from distplan.formulations.pipeline import tessel
from distplan.formulations.pipeline.baselines import SCHEDULES
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelineInstance, evaluate

WHOLE = "repetend candidates completed at N"


def m8x4() -> PipelineInstance:
    return make_pipeline("m", 8, 4, forward_time=2.0, backward_time=1.0, weight_time=3.0)


def k4x4() -> PipelineInstance:
    return make_pipeline("k", 4, 4, forward_time=2.0, backward_time=3.0, weight_time=1.0, memory_capacity=8.0)


@pytest.mark.parametrize(("make", "optimum"), [(m8x4, 47.0), (k4x4, 35.0)], ids=["m8x4", "k4x4"])
def test_small_n_within_five_percent_of_the_proven_optimum(make: Any, optimum: float) -> None:
    inst = make()
    res = distplan.solve(inst, formulation="tessel")
    chk = evaluate(inst, res.plan)
    assert chk.feasible and chk.objective == pytest.approx(res.objective)
    assert optimum - 1e-9 <= res.objective <= 1.05 * optimum
    assert res.bound <= res.objective
    # the whole completions of the repetend candidates were made and scored
    info = res.plan.info
    assert WHOLE in info["completion_candidates"]
    assert info["repetend_candidates"] >= 1  # how many are drawn depends on the probes' time limits (load)


@pytest.mark.parametrize("shape", ["v", "x", "k"])
@pytest.mark.parametrize("n", [2, 4])
def test_small_n_never_loses_to_a_baseline(shape: str, n: int) -> None:
    """4 stages, B/W split (F 1, B 2, W 1), memory of 1F1B's peak: tessel is no worse than
    any classic schedule that applies."""
    inst = make_pipeline(shape, 4, n, forward_time=1.0, backward_time=2.0, weight_time=1.0)
    peak = max(d["peak_memory"] for d in evaluate(inst, distplan.solve(inst, formulation="1f1b").plan).details["devices"].values())
    inst = inst.with_(memory_capacity=float(peak))
    res = distplan.solve(inst, formulation="tessel")
    assert evaluate(inst, res.plan).feasible
    for name in SCHEDULES:
        try:
            base = distplan.solve(inst, formulation=name)
        except (InfeasibleError, InputError):
            continue
        assert res.objective <= base.objective + 1e-9, name


def test_whole_completions_stop_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each whole completion made slow (0.5 s before each of up to 12 candidates): a
    limited run stops completing them at its deadline and still returns a checked plan
    within the allowance of the other limit tests (T + 2 s)."""
    real = tessel._whole_completion
    calls: list[int] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(tessel, "_whole_completion", slow)
    inst = k4x4()
    t0 = time.perf_counter()
    res = distplan.solve(inst, formulation="tessel", time_limit=1.5)
    took = time.perf_counter() - t0
    assert took <= 1.5 + 2.0, f"{took:.2f} s after {len(calls)} completions"
    assert calls and len(calls) < res.plan.info["repetend_candidates"]
    assert evaluate(inst, res.plan).feasible


def nn4x3() -> PipelineInstance:
    """NN shape, 4 stages, N = 3, F 1 s, B 3 s, memory 3 (1F1B's peak): optimum 36 s
    (pipeline_milp, time-indexed, ~10 s); the repetend's completions give 38."""
    return make_pipeline("nn", 4, 3, forward_time=1.0, backward_time=3.0, memory_capacity=3.0)


def test_small_n_exact_state_search_reaches_the_optimum() -> None:
    inst = nn4x3()
    res = distplan.solve(inst, formulation="tessel")
    assert evaluate(inst, res.plan).feasible
    assert res.objective == pytest.approx(36.0)
    assert res.plan.info["whole_search"]["complete"]
    assert res.plan.info["completion"] == "whole-schedule state search"


def test_small_n_state_search_can_be_turned_off() -> None:
    res = distplan.solve(k4x4(), formulation="tessel", whole_search_states=0)
    assert "whole_search" not in res.plan.info
    assert res.objective >= 35.0


def test_without_candidates_no_whole_completion() -> None:
    """``repetend_candidates=1`` keeps the search's repetend: no whole completions."""
    res = distplan.solve(k4x4(), formulation="tessel", repetend_candidates=1)
    assert WHOLE not in res.plan.info["completion_candidates"]
