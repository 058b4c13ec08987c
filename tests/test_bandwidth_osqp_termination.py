"""The termination of ``libra_perf_lp`` says why its rounds stopped, on every LP backend.

With cvxpy-OSQP and a 60 s limit, libra-msft1t-3d-total500 stopped after ~12 s by its own
test (a certified stall), status optimal, yet ended "time_limit", and so did each of its 52
LPs: each LP had stopped at OSQP's own ``max_iter`` (200000), which cvxpy folds into
``user_limit``, and the cvxpy backend read that as the time limit whenever one was given
(OSQP keeps its status in ``info.status``, which was not read); the run then copied the last
LP's termination. Now an LP records the limit it hit, and the run ends "time_limit" only
when its own limit stopped the rounds. Assertions are on records, never on timings: the
limits given are far above what the runs take, or the clock is replaced."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

from distplan import solve
from distplan.formulations.bandwidth.convex import continuous_program
from distplan.formulations.bandwidth.outer import TANGENT_LP, run_libra_perf_lp
from distplan.formulations.registry import RunContext, get_formulation
from distplan.instances import load_instance
from distplan.models.bandwidth import BandwidthInstance
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions
from distplan.solvers.result import LIMIT_TERMINATIONS, Termination
from distplan.verify import check_solver_calls
from tests.conftest import backend_params, skip_unless_available, takes_lp

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

CASE = "libra-msft1t-3d-total500"  # OSQP stops every LP of it at max_iter
#: far above any run here (~12 s on OSQP): a limit that is given but never reached
GENEROUS = 600.0

OSQP = [pytest.param("cvxpy-OSQP", marks=skip_unless_available("cvxpy-OSQP"))]


def _instance(name: str) -> BandwidthInstance:
    inst = load_instance(name)
    assert isinstance(inst, BandwidthInstance)
    return inst


@pytest.mark.parametrize("backend", OSQP)
@pytest.mark.parametrize(("raw", "expected", "raw_status"), [
    ({}, Termination.ITERATION_LIMIT, "maximum iterations reached"),  # its default max_iter (200000)
    ({"max_iter": 25}, Termination.ITERATION_LIMIT, "maximum iterations reached"),
    ({"time_limit": 1e-9}, Termination.TIME_LIMIT, "run time limit reached"),  # OSQP's own limit, reached
])
def test_osqp_says_which_limit_stopped_it(backend: str, raw: dict[str, Any], expected: Termination, raw_status: str) -> None:
    """One tangent-cut LP, a time limit of GENEROUS s for the call: OSQP's iteration limit was
    recorded as "time_limit" (raw status "user_limit", cvxpy's)."""
    ctx = RunContext(get_backend(backend), SolveOptions(time_limit=GENEROUS))
    model, _ = TANGENT_LP.build(continuous_program(_instance(CASE), ctx, "libra_perf_lp"), name="libra_perf_lp")
    r = get_backend(backend).solve(model.to_arrays(), SolveOptions(time_limit=GENEROUS, raw=raw), None)
    assert (r.termination, r.raw_status) == (expected, raw_status)
    assert r.has_solution and r.bound is None  # OSQP's point is kept; it proves no bound


def _cases() -> list[Any]:
    """Every LP backend on CASE but OSQP (its ~11 s run there is
    tests/test_bandwidth_ranges.py's stall test, which checks the same termination); OSQP
    on libra-dlrm-3d-total500, where some of its LPs stop at max_iter and others solve."""
    out = [pytest.param(CASE, *p.values, id=f"{CASE}-{p.id}", marks=p.marks) for p in backend_params(takes_lp) if p.values != ("cvxpy-OSQP",)]  # type: ignore[attr-defined]
    out.append(pytest.param("libra-dlrm-3d-total500", "cvxpy-OSQP", id="libra-dlrm-3d-total500-cvxpy-OSQP",
                            marks=skip_unless_available("cvxpy-OSQP")))
    return out


@pytest.mark.parametrize(("name", "backend"), _cases())
def test_a_run_its_limit_did_not_stop_is_not_time_limited(name: str, backend: str) -> None:
    """The rounds stop by their own test, well within the limit: no record says
    "time_limit", the run's termination is no limit, and the status still follows the safe
    bound (optimal exactly when the gap is within the recorded tolerance)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = solve(name, "libra_perf_lp", backend, time_limit=GENEROUS)
    assert r.info["stopped"] == "closed"
    assert r.termination not in LIMIT_TERMINATIONS, r.termination
    assert all(c.termination is not Termination.TIME_LIMIT for c in r.solver_results), [c.raw_status for c in r.solver_results]
    if backend == "cvxpy-OSQP":  # its LPs that stopped at max_iter say so
        hit = [c for c in r.solver_results if c.raw_status == "maximum iterations reached"]
        assert hit and all(c.termination is Termination.ITERATION_LIMIT for c in hit)
    assert r.bound is not None and r.objective is not None and r.bound <= r.objective
    assert (r.status.value == "optimal") == (r.gap is not None and r.gap <= r.gap_tolerance)
    assert check_solver_calls(r.to_dict()) == []  # the termination is one its records allow


class _OutOfTimeAfter(RunContext):
    """A run whose time limit has passed once ``calls`` solver calls are recorded (the clock
    replaced, so that where the rounds stop does not depend on the machine's speed)."""

    def __init__(self, backend: str, calls: int):
        form = get_formulation("bandwidth", "libra_perf_lp")
        super().__init__(get_backend(backend), SolveOptions(time_limit=GENEROUS, mip_gap=1e-4), dict(form.params))
        self.calls = calls

    def remaining_time(self) -> float | None:
        return 0.0 if len(self.solver_results) >= self.calls else super().remaining_time()


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_rounds_stopped_by_the_run_limit_end_time_limit(backend: str) -> None:
    """The limit passes after 3 rounds: the run ends "time_limit" although its last LP ended
    optimal (HiGHS: the run said "optimal") or at OSQP's max_iter."""
    ctx = _OutOfTimeAfter(backend, calls=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = run_libra_perf_lp(_instance(CASE), ctx)
    assert out.info["rounds"] == 3 and out.info["stopped"] == "time_limit"
    assert out.termination is Termination.TIME_LIMIT
    assert out.plan is not None
