"""Hard time limits in the pipeline formulations' own phases.

Each test slows one phase down (a monkeypatched helper that sleeps on every call) so that
a run which ignores the deadline there overruns the allowance of `test_first_contact`
(T + max(2 s, 10% of T)) by seconds, while a run that checks it stops within it: with its
best plan so far and termination TIME_LIMIT, or with `NoSolutionError` when it has none.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from conftest import closure_late_until

import distplan
from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.pipeline import baselines, justify, opmodel
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.models.pipeline import PipelineInstance, evaluate
from distplan.solvers.result import Termination


def allowed(limit: float) -> float:
    return limit + max(2.0, 0.1 * limit)


def nn_case() -> PipelineInstance:
    """NN shape, 4 stages, 16 micro-batches, B/W split, comm delay: 13 memory checks in
    1F1B, 16 in the best baseline, 15 justification list schedules in tessel, 12 memory
    and energy-cut rows blocks of the disjunctive model (none of them proven optimal)."""
    return make_pipeline("nn", 4, 16, weight_time=0.7, memory_capacity=6.0, comm_delay=0.3)


def slow_down(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, seconds: float) -> list[int]:
    """Make ``module.name`` sleep ``seconds`` before each call; returns the call log."""
    real: Callable[..., Any] = getattr(module, name)
    calls: list[int] = []

    def slow(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        time.sleep(seconds)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, slow)
    return calls


def timed_solve(inst: PipelineInstance, formulation: str, limit: float, **params: Any) -> tuple[distplan.Result | NoSolutionError, float]:
    t0 = time.perf_counter()
    try:
        out: distplan.Result | NoSolutionError = distplan.solve(inst, formulation=formulation, time_limit=limit, **params)
    except NoSolutionError as exc:
        out = exc
    return out, time.perf_counter() - t0


def test_1f1b_stops_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """1F1B's shrinking warm-up (13 memory checks of 0.3 s here): past the limit the
    baseline has no plan, and says so (V4: 32 stages, 256 micro-batches, 9.6 s at 0.5)."""
    calls = slow_down(monkeypatch, baselines, "fitting_peaks", 0.3)
    out, took = timed_solve(nn_case(), "1f1b", 0.5)
    assert took <= allowed(0.5), f"{took:.2f} s after {len(calls)} checks"
    assert isinstance(out, NoSolutionError) and "before the limit" in str(out)


def test_tessel_skips_the_baselines_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tessel's classic-schedule candidates are an optional incumbent: past the limit
    they are cut short and the repetend's candidates stand (V3). Every classic schedule
    is made slow (the greedy ones call no `fitting_peaks`), and the list of them is cut
    at the deadline even where the next does not apply (it raised before its own check:
    a 1 s run took 2.2 s and returned nothing)."""
    calls = slow_down(monkeypatch, baselines, "baseline_plan", 0.3)
    out, took = timed_solve(nn_case(), "tessel", 1.0)
    assert took <= allowed(1.0), f"{took:.2f} s after {len(calls)} checks"
    assert isinstance(out, distplan.Result) and out.termination is Termination.TIME_LIMIT
    assert not any(name.startswith("baseline") for name in out.plan.info["completion_candidates"])


def test_tessel_justification_stops_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The forward-backward passes (15 list schedules of 0.4 s here) stop at the limit;
    the best candidate so far is the plan, time-limited (V3: 4.5 s of them at T = 1)."""
    calls = slow_down(monkeypatch, justify, "guided", 0.4)
    inst = nn_case()
    out, took = timed_solve(inst, "tessel", 2.5)
    assert took <= allowed(2.5), f"{took:.2f} s after {len(calls)} passes"
    assert 1 <= len(calls) < 15
    assert isinstance(out, distplan.Result) and out.termination is Termination.TIME_LIMIT
    assert out.plan.info["stopped"] == "time limit" and evaluate(inst, out.plan).feasible


def test_pipeline_milp_warm_starts_stop_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The best baseline and the stacked-barrier schedule (mshape has barriers) are
    skipped past the limit (V2: 3.2 s and 1.9 s of them at T = 1)."""
    calls = slow_down(monkeypatch, baselines, "fitting_peaks", 0.3)
    out, took = timed_solve(tessel_case("m", 4, 16), "pipeline_milp", 1.0)
    assert took <= allowed(1.0), f"{took:.2f} s after {len(calls)} checks"
    if isinstance(out, distplan.Result):
        assert out.termination is Termination.TIME_LIMIT


def test_pipeline_milp_model_build_stops_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The disjunctive model's build (memory rows and energy cuts per device, 0.5 s each
    here) stops at the limit and the warm start is the plan (V2: a 12.7 s build at T = 1,
    then a solver started with 0.01 s)."""
    calls = slow_down(monkeypatch, opmodel, "_pair_terms", 0.5)
    inst = nn_case()
    out, took = timed_solve(inst, "pipeline_milp", 3.0, model="disjunctive")
    assert took <= allowed(3.0), f"{took:.2f} s after {len(calls)} blocks"
    assert isinstance(out, distplan.Result) and out.termination is Termination.TIME_LIMIT
    assert out.info["model"]["disjunctive"]["termination"] == "time_limit (model build)"
    assert evaluate(inst, out.plan).feasible


def test_pipeline_milp_stops_a_closure_at_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The transitive closure checks the run's deadline as it goes (`graphs.transitive_closure`'s
    checkpoint; 32 stages, 256 micro-batches took 6.3 s at T = 1): slowed past the limit
    at its first checkpoint, the build stops there."""
    monkeypatch.setattr(opmodel, "transitive_closure", closure_late_until(opmodel.transitive_closure, time.perf_counter() + 3.05))
    out, took = timed_solve(nn_case(), "pipeline_milp", 3.0, model="disjunctive")
    assert took <= 3.0 + 0.5
    assert isinstance(out, distplan.Result) and out.termination is Termination.TIME_LIMIT
    assert out.info["model"]["disjunctive"]["termination"] == "time_limit (model build)"


def unbalanced_case() -> PipelineInstance:
    """The V shape, capacity 4, where B3 frees nothing: device d3 ends every schedule
    holding 16 activations (16 micro-batches x +1)."""
    blocks: list[dict[str, Any]] = []
    for s in range(4):
        blocks.append({"name": f"F{s}", "role": "F", "duration": 1.0, "devices": [f"d{s}"], "memory": 1.0, "deps": [f"F{s - 1}"] if s else []})
    for s in (3, 2, 1, 0):
        blocks.append(
            {"name": f"B{s}", "role": "B", "duration": 3.0, "devices": [f"d{s}"], "memory": 0.0 if s == 3 else -1.0, "deps": [f"B{s + 1}" if s < 3 else "F3"]}
        )
    data = {
        "format": "distplan/1",
        "kind": "pipeline",
        "name": "unbalanced",
        "mode": "training",
        "objective": "makespan",
        "devices": ["d0", "d1", "d2", "d3"],
        "memory_capacity": 4.0,
        "micro_batches": 16,
        "comm_delay": 0.0,
        "blocks": blocks,
    }
    return PipelineInstance.from_dict(data)


@pytest.mark.parametrize("formulation", ["tessel", "pipeline_milp", "gpipe", "1f1b"])
def test_memory_that_is_never_freed_is_infeasible_for_every_formulation(formulation: str) -> None:
    """All N micro-batches leave 16 on d3 whatever the order: every formulation says so,
    with the same proof (tessel and pipeline_milp had raised ValueError, exit 1)."""
    with pytest.raises(InfeasibleError, match=r"device d3 needs at least 16 \(capacity 4, short by 12\)"):
        distplan.solve(unbalanced_case(), formulation=formulation)
