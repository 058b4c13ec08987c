"""The exact continuous bandwidth formulations have the baselines' plans in hand from the start.

``equal_bw`` and ``proportional_to_traffic`` (`finish.baselines`) were computed after a
formulation's own solves and skipped once the run's limit had passed, and
``libra_perf_lp``'s rounds never looked at them:

* on cvxpy-OSQP, libra-resnet50-3d-total500 ran all 500 rounds (890 s; every LP stops at
  OSQP's ``max_iter``), although proportional_to_traffic's plan, returned at the end, is
  within 1.6e-7 of its safe bound; with a 30 s limit it returned its own plan, 1% worse;
* libra_perf_per_cost at a 0.05 s limit returned its own plan (time x cost 11719.47683)
  where proportional_to_traffic's gives 11719.47563.

Now the baselines come first (with a small grace when the limit has already passed) and
are ``libra_perf_lp``'s first incumbent. Also: rounds cut by ``max_rounds`` end
"iteration_limit" (they said the last LP's "optimal" on HiGHS), which ``distplan verify``
accepts from the record; and a run whose limit passed before anything ran says so when it
has no plan. Limits are passed or replaced by a clock that counts solver calls; nothing
asserts a duration."""

from __future__ import annotations

import time
import warnings
from typing import Any

import pytest

from distplan import solve
from distplan.errors import NoSolutionError
from distplan.formulations.bandwidth import outer
from distplan.formulations.bandwidth.outer import STALL_ROUNDS, run_libra_perf_lp
from distplan.formulations.bandwidth.per_cost import run_libra_perf_per_cost
from distplan.formulations.registry import RunContext, get_formulation
from distplan.instances import load_instance
from distplan.models.bandwidth import BandwidthInstance, BandwidthPlan
from distplan.models.bandwidth_eval import evaluate
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions
from distplan.solvers.result import LIMIT_TERMINATIONS, Termination
from distplan.verify import check_solver_calls
from tests.conftest import skip_unless_available

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

RESNET = "libra-resnet50-3d-total500"  # proportional_to_traffic's plan is the optimum
OSQP = pytest.param("cvxpy-OSQP", marks=skip_unless_available("cvxpy-OSQP"))
HIGHS = pytest.param("highs", marks=skip_unless_available("highs"))
#: far above any run here: a limit given but never reached
GENEROUS = 600.0


def _instance(name: str) -> BandwidthInstance:
    inst = load_instance(name)
    assert isinstance(inst, BandwidthInstance)
    return inst


def _objective(inst: BandwidthInstance, bandwidth: dict[str, float], objective: str) -> float:
    """The evaluator's value of a plan's bandwidths for ``objective`` ("time" or "time_x_cost")."""
    check = evaluate(inst, BandwidthPlan(bandwidth=dict(bandwidth), objective=objective))
    assert check.feasible, check.violations
    return check.objective


def _baseline_values(inst: BandwidthInstance, objective: str) -> dict[str, float]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {b: _objective(inst, solve(inst, b).plan.bandwidth, objective) for b in ("equal_bw", "proportional_to_traffic")}


class _OutOfTimeAfter(RunContext):
    """A run whose time limit has passed once ``calls`` solver calls are recorded (the clock
    replaced, so that where the run stops does not depend on the machine's speed)."""

    def __init__(self, formulation: str, backend: str, calls: int, **params: Any):
        form = get_formulation("bandwidth", formulation)
        super().__init__(get_backend(backend), SolveOptions(time_limit=GENEROUS, mip_gap=1e-4), {**form.params, **params})
        self.calls = calls

    def remaining_time(self) -> float | None:
        return 0.0 if len(self.solver_results) >= self.calls else super().remaining_time()


@pytest.mark.parametrize("backend", [OSQP])
def test_osqp_rounds_stop_once_a_baseline_is_proven(backend: str) -> None:
    """libra-resnet50-3d-total500 on OSQP: no LP improves on proportional_to_traffic's
    plan, whose safe bound is within the gap tolerance, so the stall test ends the rounds
    after STALL_ROUNDS (they ran to max_rounds; capped here so that a regression fails fast)."""
    inst = _instance(RESNET)
    base = _baseline_values(inst, "time")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve(inst, "libra_perf_lp", backend, time_limit=GENEROUS, max_rounds=STALL_ROUNDS + 5)
    assert r.info["stopped"] == "closed" and r.info["stalled"], r.info["stopped"]
    assert r.info["rounds"] <= STALL_ROUNDS
    assert r.info["plan_from"] == "baseline proportional_to_traffic"
    assert r.objective is not None and r.objective <= min(base.values())
    assert r.termination not in LIMIT_TERMINATIONS, r.termination
    assert r.status.value == "optimal" and r.gap is not None and r.gap <= r.gap_tolerance
    assert check_solver_calls(r.to_dict()) == []


@pytest.mark.parametrize("backend", [OSQP, HIGHS])
def test_lp_rounds_cut_by_the_limit_return_no_worse_than_a_baseline(backend: str) -> None:
    """The limit passes after 3 LPs: the plan returned is the best of the LPs' and the
    baselines' (with OSQP, its own lost to proportional_to_traffic's by 1%: the baselines
    were skipped after the deadline)."""
    inst = _instance(RESNET)
    base = _baseline_values(inst, "time")
    ctx = _OutOfTimeAfter("libra_perf_lp", backend, calls=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_libra_perf_lp(inst, ctx)
    assert out.plan is not None and out.termination is Termination.TIME_LIMIT
    assert out.info["stopped"] == "time_limit" and out.info["rounds"] == 3
    assert _objective(inst, out.plan.bandwidth, "time") <= min(base.values())
    assert set(out.info["candidates"]) >= {"baseline equal_bw", "baseline proportional_to_traffic"}


def test_per_cost_cut_by_the_limit_returns_no_worse_than_a_baseline() -> None:
    """The limit passes after the first solve: the search's plan (11719.47683) lost to
    proportional_to_traffic's (11719.47563), skipped after the deadline."""
    inst = _instance(RESNET)
    base = _baseline_values(inst, "time_x_cost")
    ctx = _OutOfTimeAfter("libra_perf_per_cost", "cvxpy-CLARABEL", calls=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_libra_perf_per_cost(inst, ctx)
    assert out.plan is not None and out.termination is Termination.TIME_LIMIT
    assert _objective(inst, out.plan.bandwidth, "time_x_cost") <= min(base.values())
    assert out.info["plan_from"] == "baseline proportional_to_traffic"


@pytest.mark.parametrize(("formulation", "objective", "backend"), [
    ("libra_perf", "time", None), ("libra_perf_lp", "time", None), ("libra_perf_per_cost", "time_x_cost", None),
    pytest.param("libra_perf_per_cost", "time_x_cost", "cvxpy-SCS", marks=skip_unless_available("cvxpy-SCS")),
])
def test_a_limit_passed_before_the_run_still_returns_a_baseline(formulation: str, objective: str, backend: str | None) -> None:
    """The limit had passed before the formulation started (a cold import takes a 0.05 s
    limit): the baselines still get a small grace, so the plan is no worse than theirs
    (libra_perf_lp started no LP and raised NoSolutionError; libra_perf_per_cost returned
    the search's plan, its Clarabel solves given 1 ms each, or on SCS, whose first solve is
    not started, no plan)."""
    inst = _instance(RESNET)
    base = _baseline_values(inst, objective)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve(inst, formulation, backend, time_limit=0.05, started=time.perf_counter() - 1.0)
    assert r.objective is not None and r.objective <= min(base.values())
    assert "baseline proportional_to_traffic" in r.info["candidates"]
    if formulation == "libra_perf_lp" or backend == "cvxpy-SCS":  # no solve of its own ran
        assert r.termination is Termination.TIME_LIMIT and r.info["plan_from"] == "baseline proportional_to_traffic"
    assert check_solver_calls(r.to_dict()) == []


def test_no_plan_after_the_limit_says_the_limit_passed(monkeypatch: pytest.MonkeyPatch) -> None:
    """No LP ran (the limit had passed) and no baseline gave a plan: the message said
    'neither its allocation ... nor a baseline's meets the constraints'."""
    monkeypatch.setattr(outer, "baselines", lambda ctx, inst, prog: [])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(NoSolutionError, match="time limit passed before its solver found an allocation") as err:
            solve("libra-msft1t-3d-total500", "libra_perf_lp", time_limit=0.05, started=time.perf_counter() - 1.0)
    assert "meets the constraints" not in str(err.value)
    assert err.value.exit_code == 4


@pytest.mark.parametrize("backend", [HIGHS, OSQP])
def test_rounds_cut_by_max_rounds_end_iteration_limit(backend: str) -> None:
    """``max_rounds=2`` on libra-msft1t-3d-total500 (1.2% open): the run's own round limit
    stopped it, so it ends "iteration_limit" (on HiGHS it said its last LP's "optimal"), and
    `distplan verify` accepts that from ``info["stopped"]`` alone."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve("libra-msft1t-3d-total500", "libra_perf_lp", backend, max_rounds=2)
    assert r.info["stopped"] == "max_rounds" and r.info["rounds"] == 2
    assert r.termination is Termination.ITERATION_LIMIT
    assert r.status.value == "feasible"
    doc = r.to_dict()
    assert check_solver_calls(doc) == []
    if backend == "highs":  # its last LP ended optimal: the record of the reason is what allows it
        doc["info"]["stopped"] = "closed"
        assert [f for f, _ in check_solver_calls(doc)] == ["termination"]
        doc["info"]["stopped"] = "max_rounds"
        doc["formulation"] = "libra_perf"
        assert [f for f, _ in check_solver_calls(doc)] == ["termination"]
