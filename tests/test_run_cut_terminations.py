"""A run that time or its own budget cut says so in its termination (review rev26: a
benchmark counting limit-hit runs by termination missed these).

placement_search's local search stopped by the time limit ended "finished" (its info said
``search_stopped: time limit``); placement_milp on an instance where its model is not exact
(pairs left out) ended "finished" although its only solver call had hit the limit, or had
been killed after it (CBC). A heuristic, or a program not exact on the instance, ends
"finished" only when it ran to completion."""

from __future__ import annotations

import distplan
from distplan.instances import load_instance
from distplan.solvers.result import Termination
from distplan.verify import check_result


def verified(res: distplan.Result, name: str) -> None:
    assert check_result(res.to_dict(), load_instance(name), require_version=True) == []


def test_placement_search_stopped_by_its_time_limit_says_time_limit() -> None:
    res = distplan.solve("gpt2-xl-dgx1", "placement_search", time_limit=0.5)
    assert res.termination is Termination.TIME_LIMIT
    assert res.info["search_cut"] == "time_limit"
    verified(res, "gpt2-xl-dgx1")


def test_placement_search_stopped_by_max_evals_says_iteration_limit() -> None:
    res = distplan.solve("gnmt-v2-4gpu", "placement_search", max_evals=20)
    assert res.termination is Termination.ITERATION_LIMIT
    assert res.info["search_cut"] == "max_evals" and res.info["search_evaluations_total"] >= 20
    verified(res, "gnmt-v2-4gpu")
    forged = res.to_dict()
    del forged["info"]["search_cut"]  # the run's own limit, unrecorded: verify refuses it
    assert any(field == "termination" for field, _ in check_result(forged, load_instance("gnmt-v2-4gpu"), require_version=True))


def test_placement_search_that_meets_the_bound_finished() -> None:
    res = distplan.solve("placement-small-1", "placement_search", time_limit=30)
    assert res.termination is Termination.FINISHED and res.status.value == "optimal"
    assert "search_cut" not in res.info


def test_a_program_not_exact_here_cut_by_its_limit_says_time_limit() -> None:
    # 6 s: its model takes 1.3 s to build on an idle 2-core host and over 2 s on a busy
    # one (a 2 s limit then stopped the build, before any solver call); the MILP's gap
    # stays ~25% for minutes, so the limit still cuts it
    res = distplan.solve("gnmt-v2-4gpu-channels", "placement_milp", time_limit=6)
    assert res.info["exact_model"] is False  # (pairs left out: not exact on this instance)
    assert any(r.termination in (Termination.TIME_LIMIT, Termination.KILLED) for r in res.solver_results)
    assert res.termination is Termination.TIME_LIMIT and res.status.value == "feasible"
    verified(res, "gnmt-v2-4gpu-channels")
