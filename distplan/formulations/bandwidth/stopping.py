"""Why an exact bandwidth search stopped, and the run termination that says so.

`libra_perf_lp`'s tangent-cut rounds and `libra_perf_per_cost`'s interval search both
record why they stopped (``info["stopped"]``) and end with `run_termination`: the run's
own limits (its time limit, ``max_rounds``, ``max_points``) rather than whatever its last
solver call ended.
"""

from __future__ import annotations

from enum import StrEnum

from distplan.formulations.registry import RunTermination
from distplan.solvers.result import LIMIT_TERMINATIONS, SolverResult, Termination


class Stop(StrEnum):
    """Why a search stopped (``info["stopped"]``)."""

    CLOSED = "closed"  # its own test: the gap closed, a certified stall, or no cut left to add
    ROUNDS = "max_rounds"  # libra_perf_lp's ``max_rounds`` parameter
    POINTS = "max_points"  # libra_perf_per_cost's ``max_points`` parameter
    NARROW = "narrow"  # libra_perf_per_cost: intervals too narrow to split, the gap still open
    STALLED = "stalled"  # libra_perf_per_cost: its bound rose by less than tolerance / 10 over ``stall_points`` evaluations
    DEADLINE = "time_limit"  # the run's time limit
    NUMERICAL = "numerical"  # a relaxation called infeasible after feasible rounds
    FAILED = "failed"  # an LP returned no point (the first one, or a later one for another reason)


#: libra_perf_lp's rounds cut by its ``max_rounds`` end "iteration_limit" (`run_termination`),
#: though its last LP may have ended "optimal"
ROUNDS_CUT = RunTermination(Termination.ITERATION_LIMIT.value, "stopped", frozenset({Stop.ROUNDS.value}), "its tangent-cut rounds stopped at max_rounds")
#: libra_perf_per_cost's interval search cut by its ``max_points`` ends "iteration_limit"
POINTS_CUT = RunTermination(Termination.ITERATION_LIMIT.value, "stopped", frozenset({Stop.POINTS.value}), "its interval search stopped at max_points")


def run_termination(stop: Stop, last: SolverResult) -> Termination:
    """The run's termination: why the search stopped, not why its last solver call did.

    ``time_limit`` only when the run's own limit stopped it; ``iteration_limit`` when its
    ``max_rounds`` / ``max_points`` parameter did (``distplan verify`` accepts that for the
    formulation when ``info["stopped"]`` says so: `ROUNDS_CUT`, `POINTS_CUT`);
    ``finished`` when intervals too narrow to split, or a bound that stopped rising, ended
    it with the gap open. A solver
    call that ended at a limit of its own (OSQP's ``max_iter``: its point is still used,
    and the search ended by its own test) leaves the run "finished", with that call's
    record saying which limit; otherwise the run ends as its last call did, which
    ``distplan verify`` checks against the record. Whether the plan is optimal is the
    status's to say, from the safe bound.
    """
    if stop is Stop.DEADLINE:
        return Termination.TIME_LIMIT
    if stop in (Stop.ROUNDS, Stop.POINTS):
        return Termination.ITERATION_LIMIT
    if stop is Stop.NUMERICAL:
        return Termination.NUMERICAL
    if stop in (Stop.NARROW, Stop.STALLED) or (stop is Stop.CLOSED and last.termination in LIMIT_TERMINATIONS):
        return Termination.FINISHED
    return last.termination
