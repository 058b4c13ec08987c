"""Tessel's own budgets cut its searches: the result says so (`tessel.record_cut`).

A search stopped by one of tessel's budgets (``search_time_limit``, ``proof_time_limit``,
``whole_search_states``, ``whole_search_time_limit``, ``phase_time_limit``, ...) used to
leave the run "finished", as if every search had run to its end. Now ``info["cut_by"]``
maps each cut search to the budget that cut it, the termination is TIME_LIMIT, or
NODE_LIMIT when only placement and state budgets cut it (never "finished" or "optimal"), the status is optimal only where a proven bound closes the gap,
and a bound never exceeds the objective. A run whose searches all finish within their
budgets is reported as before.

Instances (all solved in well under a second):

* V shape, 4 stages, N = 4, memory 3: tessel's completions give 32; the whole-schedule
  state search proves 32 optimal in 337 states (`V_STATES`), its root bound is 28.
* NN shape, 4 stages, N = 3, F 1 s, B 2 s, W 1 s, memory 3: the repetend's period 10 is
  proven by fixed-period probes that take ~0.3 s and ~1 s, and the rate MILP cannot prove
  it in ~0.8 s; the state search proves the plan's 32 optimal in 301 states.
* X shape, 4 stages, N = 12, B/W split, memory 3: the repetend comes from the MILP path
  (its flat-length MILP needs ~0.7 s), and N leaves a steady state, so the warm-up and
  cool-down are completed separately (MILPs with ``phase_time_limit`` > 0).
* Tessel's K shape, memory 4, N = 4 (`tessel_case`): the residue search finds the period
  6 in 185 placements (`K_PERIOD_NODES`) and proves its repetend's flat length least in
  1967 more (`K_FLAT_NODES`), above a ``flat_residue_nodes`` of 1,000 (`LOW_FLAT_NODES`;
  the default, 10,000, proves it).
* Tessel's NN shape, memory 20, N = 16: the least flat length (46 s, 7779 placements,
  `NN_FLAT_NODES`) is shorter than the one the first 1,000 placements reach (48 s).
"""

from __future__ import annotations

from typing import Any

import pytest

import distplan
from distplan.formulations.pipeline.modulo import cyclic_blocks
from distplan.formulations.pipeline.repetend import offsets_range
from distplan.formulations.pipeline.residue import residue_search
from distplan.formulations.pipeline.statesearch import prove_makespan
from distplan.formulations.pipeline.tessel import BUDGETS
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.models.pipeline import PipelineInstance
from distplan.solvers.result import LIMIT_TERMINATIONS, SolutionStatus, Termination
from distplan.verify import check_result

#: tessel's plan and the proven optimum on `_v4`
V_OPTIMUM = 32.0
#: states the whole-schedule search keeps to prove `V_OPTIMUM` on `_v4`
V_STATES = 337
#: placements the residue search takes to find `_k4`'s period, 6 (of ``residue_nodes``)
K_PERIOD_NODES = 185
#: placements the residue search takes to prove the least flat length at that period
#: (``flat_residue_nodes``; `LOW_FLAT_NODES` stops it, the default does not)
K_FLAT_NODES = 1967
#: a ``flat_residue_nodes`` below both cases' proofs (the default before it was raised)
LOW_FLAT_NODES = 1_000
#: the same for `_nn20`, whose least flat length (46 s) `LOW_FLAT_NODES` do not reach (48 s)
NN_FLAT_NODES = 7779


def _v4() -> PipelineInstance:
    return make_pipeline("v", 4, 4, memory_capacity=3.0)


def _nn4() -> PipelineInstance:
    return make_pipeline("nn", 4, 3, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=3.0)


def _x4() -> PipelineInstance:
    return make_pipeline("x", 4, 12, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=3.0)


def _k4() -> PipelineInstance:
    return tessel_case("k", 4.0, 4)


def _nn20() -> PipelineInstance:
    return tessel_case("nn", 20.0, 16)


def _solve(inst: PipelineInstance, **params: Any) -> distplan.Result:
    res = distplan.solve(inst, formulation="tessel", **params)
    assert res.check is not None and res.check.feasible
    return res


def _assert_honest_cut(res: distplan.Result, inst: PipelineInstance, cuts: dict[str, str], ended: Termination = Termination.TIME_LIMIT) -> None:
    """The result reports the cuts ``cuts`` (search -> budget) among its own (none by a
    run time limit it was not given), the limit termination ``ended`` (NODE_LIMIT when
    only placement or state budgets cut it), a status that only a closed gap makes optimal,
    a bound at most the objective, and `distplan.verify` accepts it."""
    assert res.termination is ended
    assert res.termination in LIMIT_TERMINATIONS and res.termination not in (Termination.FINISHED, Termination.OPTIMAL)
    recorded = res.plan.info.get("cut_by", {})
    assert res.info.get("cut_by") == recorded
    for search, budget in cuts.items():
        assert recorded.get(search) == budget, recorded
    assert set(recorded.values()) <= BUDGETS
    if res.options is not None and res.options.get("time_limit") is None:  # no run limit: only tessel's own budgets
        assert "time_limit" not in recorded.values(), recorded
    assert res.objective is not None
    if res.bound is not None:
        assert res.bound <= res.objective
    closed = res.gap is not None and res.gap <= res.gap_tolerance
    assert (res.status is SolutionStatus.OPTIMAL) == closed
    assert check_result(res.to_dict(), inst) == []


def test_state_budget_just_enough_finishes_as_before_and_one_less_is_a_cut() -> None:
    """Defaults, and a state budget of exactly the states the proof keeps: finished,
    optimal, 32 (as before the cut reporting); one state less: cut by
    ``whole_search_states``, its open layer's bound (proven) reported, not optimal."""
    inst = _v4()
    for params in ({}, {"whole_search_states": V_STATES}):
        res = _solve(inst, **params)
        assert res.termination is Termination.FINISHED and res.status is SolutionStatus.OPTIMAL
        assert res.objective == V_OPTIMUM and res.bound == V_OPTIMUM
        assert res.plan.info["whole_search"] == {"complete": True, "states": V_STATES, "bound": V_OPTIMUM}
        assert res.plan.info["period_proven_optimal"]
        assert "cut_by" not in res.plan.info
    res = _solve(inst, whole_search_states=V_STATES - 1)
    _assert_honest_cut(res, inst, {"whole_search": "whole_search_states"}, Termination.NODE_LIMIT)
    record = res.plan.info["whole_search"]
    assert record["complete"] is False and record["cut_by"] == "whole_search_states"
    assert res.objective == V_OPTIMUM and res.bound is not None and res.bound < V_OPTIMUM
    assert res.status is SolutionStatus.FEASIBLE


def test_whole_search_time_budget_cut() -> None:
    """No time for the state search: cut by ``whole_search_time_limit``; the bound it
    reports (its root's, 28) stays, proven, below the optimum."""
    inst = _v4()
    res = _solve(inst, whole_search_time_limit=0.0)
    _assert_honest_cut(res, inst, {"whole_search": "whole_search_time_limit"})
    record = res.plan.info["whole_search"]
    assert record["complete"] is False and record["cut_by"] == "whole_search_time_limit"
    assert res.bound is not None and res.bound <= V_OPTIMUM and res.bound_source is not None and "open layer (stopped)" in res.bound_source
    assert res.status is SolutionStatus.FEASIBLE


def test_repetend_proof_cut_by_its_time_budget() -> None:
    """Probes and the rate MILP given no time: the period is left unproven, cut by
    ``proof_time_limit``. The plan is still proven optimal, by the state search, so the
    status is optimal; without that proof (one state) it is not."""
    inst = _nn4()
    res = _solve(inst, probe_time_limit=0.0, proof_time_limit=0.0)
    _assert_honest_cut(res, inst, {"repetend_search": "proof_time_limit"})
    assert res.plan.info["period_proven_optimal"] is False
    assert res.status is SolutionStatus.OPTIMAL and res.bound == res.objective
    assert res.bound_source is not None and "exact whole-schedule state search" in res.bound_source
    res = _solve(inst, probe_time_limit=0.0, proof_time_limit=0.0, whole_search_states=1)
    _assert_honest_cut(res, inst, {"repetend_search": "proof_time_limit", "whole_search": "whole_search_states"})
    assert res.status is SolutionStatus.FEASIBLE


def test_repetend_search_cut_by_search_time_limit() -> None:
    """``search_time_limit`` of 1.5 s with probes of no time: the rate MILP gets what is
    left of the 1.5 s (it does not prove the period in 3 s), so the search returns its
    repetend unproven, cut by ``search_time_limit`` (the smaller of it and a
    ``proof_time_limit`` of 30 s). (0.5 s was too little on a busy host: the heuristics
    found no repetend in it, the search ran again without the budget, and the proof's
    1 s cut it, review rev29.)"""
    inst = _nn4()
    res = _solve(inst, search_time_limit=1.5, probe_time_limit=0.0, proof_time_limit=30.0)
    _assert_honest_cut(res, inst, {"repetend_search": "search_time_limit"})
    assert res.plan.info["period_proven_optimal"] is False


def test_flat_length_and_phase_milps_cut_by_their_time_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    """The repetend's flat-length MILP given no time (it needs ~0.7 s): cut by
    ``flat_time_limit``; warm-up and cool-down MILPs of 0.01 s: each one its limit
    stopped is named, cut by ``phase_time_limit``. (The phase MILPs solve in ~0.04 s here,
    too close to 0.01 s for a faster machine: each ends at its limit, as a solver stopped
    by it reports, whatever its speed; review rev20.)"""
    from distplan.formulations.pipeline import tessel

    solve_phase = tessel.solve_op_problem

    def stopped_at_its_limit(*args: Any, **kwargs: Any) -> Any:
        s, res, model = solve_phase(*args, **kwargs)
        res.termination = Termination.TIME_LIMIT
        return s, res, model

    monkeypatch.setattr(tessel, "solve_op_problem", stopped_at_its_limit)
    inst = _x4()
    res = _solve(inst, flat_time_limit=0.0, phase_time_limit=0.01)
    info = res.plan.info
    stopped = {f"{phase}_milp" for phase in ("warmup", "cooldown") if info.get(f"{phase}_termination") in {t.value for t in LIMIT_TERMINATIONS}}
    assert stopped, "a 0.01 s phase MILP was expected to stop at its limit"
    _assert_honest_cut(res, inst, {"repetend_flat_length": "flat_time_limit", **dict.fromkeys(stopped, "phase_time_limit")})


@pytest.mark.parametrize(("case", "needed"), [(_k4, K_FLAT_NODES), (_nn20, NN_FLAT_NODES)], ids=["k4", "nn20"])
def test_flat_length_residue_search_cut_by_its_placement_cap(case: Any, needed: int) -> None:
    """The residue search's least flat length within ``flat_residue_nodes`` placements
    (review M1: its cap of 1,000 was fixed and a search it stopped went unrecorded, while
    the MILP path's ``flat_time_limit`` was recorded): at 1,000 and at one placement
    short of the proof, cut by ``flat_residue_nodes`` (the smaller budget; the period is
    still proven); with just enough, and at the default, finished with no cut, and no
    worse."""
    inst = case()
    capped = _solve(inst, flat_residue_nodes=LOW_FLAT_NODES)
    _assert_honest_cut(capped, inst, {"repetend_flat_length": "flat_residue_nodes"}, Termination.NODE_LIMIT)
    assert capped.plan.info["period_proven_optimal"]
    short = _solve(inst, flat_residue_nodes=needed - 1)
    _assert_honest_cut(short, inst, {"repetend_flat_length": "flat_residue_nodes"}, Termination.NODE_LIMIT)
    for enough in (_solve(inst, flat_residue_nodes=needed), _solve(inst)):
        assert enough.termination is Termination.FINISHED and "cut_by" not in enough.plan.info
        assert enough.plan.info["period_proven_optimal"]
        assert capped.objective is not None and enough.objective is not None and enough.objective <= capped.objective


def test_flat_length_residue_search_cut_by_residue_nodes_when_it_is_the_smaller() -> None:
    """``residue_nodes`` leaving the flat-length search fewer placements (500) than
    ``flat_residue_nodes`` (1,000, or more): the cut names ``residue_nodes``."""
    inst = _k4()
    for flat in (LOW_FLAT_NODES, 10 * K_FLAT_NODES):
        res = _solve(inst, residue_nodes=K_PERIOD_NODES + 500, flat_residue_nodes=flat)
        _assert_honest_cut(res, inst, {"repetend_flat_length": "residue_nodes"}, Termination.NODE_LIMIT)
        assert res.plan.info["period_proven_optimal"]


def test_residue_search_says_what_stopped_it() -> None:
    """`residue.residue_search` stopped by its placements says ``node_limit``, by its
    deadline ``deadline`` (the run's time, not a placement budget); finished, neither."""
    inst = _k4()
    cy = cyclic_blocks(inst, 1)
    _, k = offsets_range(inst, 1)
    period, below = 6, 16.0  # `_k4`'s least period; the flat length (s) of its first repetend
    out = residue_search(cy, inst, k, period, minimize_length=True, below=below, node_limit=K_FLAT_NODES - 1)
    assert out.status == "undecided" and out.stopped_by == "node_limit" and out.nodes == K_FLAT_NODES - 1
    late = residue_search(cy, inst, k, period, minimize_length=True, below=below, node_limit=K_FLAT_NODES, deadline=0.0)
    assert late.status == "undecided" and late.stopped_by == "deadline" and late.nodes == K_FLAT_NODES
    done = residue_search(cy, inst, k, period, minimize_length=True, below=below, node_limit=K_FLAT_NODES)
    assert done.status == "infeasible" and done.stopped_by is None and done.nodes == K_FLAT_NODES


@pytest.mark.parametrize(("kwargs", "cut_by"), [({"max_states": 1}, "max_states"), ({"deadline": 0.0}, "deadline")])
def test_state_search_says_what_stopped_it(kwargs: dict[str, Any], cut_by: str) -> None:
    """`statesearch.prove_makespan` stopped by its state budget or its deadline says which;
    finished, it names none."""
    inst = _v4()
    _, out = prove_makespan(inst, V_OPTIMUM + 1, **kwargs)
    assert not out.complete and out.info["cut_by"] == cut_by and out.bound <= V_OPTIMUM
    _, done = prove_makespan(inst, V_OPTIMUM + 1)
    assert done.complete and done.value == V_OPTIMUM and "cut_by" not in done.info


def test_the_cli_summary_says_which_budget_cut_a_search(tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``distplan solve`` prints what cut a run that ends at a limit with no time limit of
    its own (review rev20 M2); a run with no cut prints no such line."""
    from conftest import cli_run

    from distplan.models.common import write_json

    path = tmp_path / "v4.json"
    write_json(_v4().to_dict(), path)
    rc, out, _ = cli_run(["solve", str(path), "-f", "tessel", "--param", "whole_search_states=1"], capsys)
    assert rc == 0 and "termination  node_limit" in out and "cut by       whole_search: whole_search_states" in out, out
    rc, out, _ = cli_run(["solve", str(path), "-f", "tessel"], capsys)
    assert rc == 0 and "termination  finished" in out and "cut by" not in out, out
