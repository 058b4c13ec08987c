"""A tessel or pipeline_milp run whose time limit passed before it started (a fresh
``distplan solve`` counts its own loading: 0.2-0.4 s here) still returns its classic
schedule: the baselines get at least `deadline.BASELINE_GRACE`, as the bandwidth
formulations' and the placement heuristics' do. Tessel raised NoSolutionError at every
limit up to 0.3 s in a fresh command (the search and the fallback each got a quarter of
no time), pipeline_milp on every bundled pipeline instance."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

import distplan
from distplan.errors import DistplanError, NoSolutionError
from distplan.formulations.deadline import BASELINE_GRACE
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline
from distplan.solvers.result import Termination
from distplan.verify import check_result


def _v4x8():
    """The issue's V shape: 4 stages, 8 micro-batches, B/W split, unlimited memory (its
    optimum is 35 s, zb_h2's schedule)."""
    return make_pipeline("v", 4, 8, forward_time=1.0, backward_time=2.0, weight_time=1.0)


def test_limit_passed_before_the_run_returns_the_classic_schedule():
    inst = _v4x8()
    t0 = time.perf_counter()
    res = distplan.solve(inst, "tessel", time_limit=0.05, started=t0 - 1.0)  # (1 s of "loading")
    took = time.perf_counter() - t0
    assert res.plan is not None and res.termination is Termination.TIME_LIMIT
    assert res.info["completion"].startswith("baseline ")
    assert res.info["cut_by"] == {"repetend_search": "time_limit"}
    assert res.objective == pytest.approx(35.0)  # re-evaluated: the best classic schedule
    assert check_result(res.to_dict(), inst, require_version=True) == []  # `distplan verify`
    # the grace, the evaluation and the solver-free bounds (their own grace) and no more
    assert took <= BASELINE_GRACE + 0.5, took


def test_limit_passed_without_baselines_is_no_solution():
    """The grace is the baselines': a run told not to compute them still has no plan."""
    with pytest.raises(NoSolutionError, match="before the limit"):
        distplan.solve(_v4x8(), "tessel", time_limit=0.05, started=time.perf_counter() - 1.0, baselines=False)


def test_fresh_command_at_a_tiny_limit_returns_a_plan(tmp_path: Path):
    """The user's case: a fresh ``distplan solve --time-limit 0.02 --json`` (the limit is
    gone before the formulation starts), one JSON document with a plan, exit 0."""
    path = tmp_path / "v4x8.json"
    path.write_text(json.dumps(_v4x8().to_dict()))
    proc = subprocess.run([sys.executable, "-m", "distplan", "solve", str(path), "--formulation", "tessel", "--time-limit", "0.02", "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["termination"] == "time_limit" and doc["objective"] == pytest.approx(35.0)
    assert doc["timings"]["wall_seconds"] <= 0.02 + 2.0  # the hard limit's allowance (`test_first_contact`)


def baseline_objectives(inst) -> dict[str, float]:
    """The evaluated objective of every baseline formulation that applies to ``inst``."""
    out = {}
    for name in ("1f1b", "gpipe", "zb_h1", "zb_h2", "interleaved_1f1b", "zb_v", "v_min", "v_half", "v_zb"):
        with contextlib.suppress(DistplanError):  # (does not apply, or does not fit the memory)
            out[name] = distplan.solve(inst, name).objective
    assert out
    return out


@pytest.mark.parametrize("name", ["pipeline-tessel-vshape", "pipeline-zb-p4-m12-comm1", "pipeline-vshape-p8"])
def test_pipeline_milp_with_its_limit_passed_returns_the_best_baseline(name: str):
    """Its warm start, the best classic schedule (`baselines.baseline_incumbent`), is the
    plan: no baseline formulation beats it."""
    inst = load_instance(name)
    best = min(baseline_objectives(inst).values())
    res = distplan.solve(inst, "pipeline_milp", time_limit=0.05, started=time.perf_counter() - 1.0)
    assert res.plan is not None and res.objective <= best
    assert res.termination in (Termination.TIME_LIMIT, Termination.OPTIMAL)  # (optimal: it meets a proven bound)
    assert check_result(res.to_dict(), inst, require_version=True) == []


def test_pipeline_milp_keeps_its_warm_start_when_the_retiming_passes_the_limit(monkeypatch: pytest.MonkeyPatch):
    """Review rev25: pipeline_milp retimed its warm start (a checked classic schedule)
    after the limit, 0.46 s on 524,288 operations (interleaved, 64 stages, N = 512). The
    retiming of a warm start now stops at the run's deadline and the warm start's own
    times stand; here the retiming is made to reach it."""
    from distplan.formulations.deadline import DeadlineReached
    from distplan.formulations.pipeline import milp

    deadlines: list[float | None] = []

    def retime_past_the_limit(inst, orders, ctx=None, deadline=None):  # type: ignore[no-untyped-def]
        deadlines.append(deadline)
        raise DeadlineReached("the earliest-start schedule ran out of time")

    monkeypatch.setattr(milp, "retime", retime_past_the_limit)
    inst = _v4x8()
    res = distplan.solve(inst, "pipeline_milp", time_limit=60)
    assert deadlines and deadlines[-1] is not None
    assert res.plan is not None and res.objective == pytest.approx(35.0)
    assert res.termination in (Termination.TIME_LIMIT, Termination.OPTIMAL)
    assert check_result(res.to_dict(), inst, require_version=True) == []


def test_tessel_first_classic_schedule_may_take_more_than_its_share(monkeypatch: pytest.MonkeyPatch):
    """A limited tessel gives its classic schedules a quarter of its time; on 528k
    operations (interleaved, 64 stages, N = 512) the first, gpipe, takes ~0.5 s, more than
    that quarter at a 1 s limit, and the run returned no plan (the repetend search needing
    longer still). Above `CHEAP_OPS` operations (here made 0) the first schedule that
    applies now runs on to the run's deadline; the others keep the quarter. Here gpipe is
    made to take 1 s of a 3 s limit and the repetend search to run out of time."""
    from distplan.formulations.deadline import DeadlineReached, check
    from distplan.formulations.pipeline import baselines, tessel

    got: dict[str, float | None] = {}

    def slow_gpipe(inst, deadline):  # type: ignore[no-untyped-def]
        got["gpipe"] = deadline
        time.sleep(1.0)
        check(deadline, "the gpipe schedule")
        return baselines.gpipe(inst, deadline)

    def one_f_one_b(inst, deadline):  # type: ignore[no-untyped-def]
        got["1f1b"] = deadline
        return baselines.one_f_one_b(inst, deadline)

    def search_out_of_time(inst, ctx, params):  # type: ignore[no-untyped-def]
        raise DeadlineReached("the repetend search ran out of time")

    monkeypatch.setattr(baselines, "SCHEDULES", {"gpipe": slow_gpipe, "1f1b": one_f_one_b})
    monkeypatch.setattr(tessel, "_budgeted_search", search_out_of_time)
    monkeypatch.setattr(tessel, "CHEAP_OPS", 0)
    inst = _v4x8()
    t0 = time.perf_counter()
    res = distplan.solve(inst, "tessel", time_limit=3.0)
    assert res.plan is not None and res.termination is Termination.TIME_LIMIT
    assert res.info["completion"] in ("baseline gpipe", "baseline 1f1b")
    assert got["gpipe"] is not None and got["gpipe"] >= t0 + 2.9  # the run's deadline
    # the others keep the quarter (0.75 s: more than the baselines' grace), which passed
    # while gpipe ran: 1f1b is not started (before, it started and stopped at its check)
    assert "1f1b" not in got
    assert check_result(res.to_dict(), inst, require_version=True) == []


@pytest.mark.parametrize("formulation", ["tessel", "pipeline_milp", "1f1b"])
def test_a_classic_schedule_of_a_few_tenths_of_a_second_still_comes_back(formulation: str, monkeypatch: pytest.MonkeyPatch):
    """Review rev26: on an NN pipeline of 16 stages and 128 micro-batches 1F1B takes 0.26 s,
    more than the baselines' grace then (0.1 s), and a fresh command at a limit of 0.02 s
    exited 4 with tessel, pipeline_milp and 1f1b. Here 1F1B is made to take 0.3 s and the
    limit has passed before the run: its plan comes back."""
    from distplan.formulations.deadline import check
    from distplan.formulations.pipeline import baselines

    def slow_1f1b(inst, deadline):  # type: ignore[no-untyped-def]
        time.sleep(0.3)
        check(deadline, "the 1f1b schedule")
        return baselines.one_f_one_b(inst, deadline)

    monkeypatch.setattr(baselines, "SCHEDULES", {"1f1b": slow_1f1b})
    inst = _v4x8()
    res = distplan.solve(inst, formulation, time_limit=0.05, started=time.perf_counter() - 1.0)
    assert res.plan is not None and res.objective == pytest.approx(distplan.solve(inst, "1f1b").objective)
    assert check_result(res.to_dict(), inst, require_version=True) == []
