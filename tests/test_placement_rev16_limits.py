"""placement_bounds under a short time limit (review rev16 D3): every phase stops at the
run's deadline and keeps what it has. On llama3-70b x 2xh100-sxm-ib (27,083 ops) a limit of
0.05 s had taken 4.5 s in `distplan.solve`: the heuristics, the assignment relaxation's
build and the solver-free path cuts (run without the deadline after a bound-only run) did
not look at it; at 4 s the relaxation's MILP build spent 20 s in the n x n ancestor and
descendant sums. A bound not computed in time is absent, never a wrong one."""

from __future__ import annotations

import time
from functools import cache
from typing import Any

import numpy as np
import pytest

import distplan
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.placement import bounds, descendants, milp, relaxation
from distplan.formulations.registry import RunContext
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict
from distplan.models.placement_instance import PlacementInstance
from distplan.solvers.base import SolveOptions, get_backend

GRACE = 2.0  # README "Optimality, bounds and time limits": max(2 s, 10% of the limit)


@cache
def _instance(n: int = 3000, m: int = 8) -> PlacementInstance:
    """A random layered DAG five ops wide whose memory forces cuts (each device holds 15%
    of it) that cost time (transfers 10 times the default): its path-cut bound is above the
    critical path and the work per device."""
    return instance_from_dict(random_layered_dag(n, m, seed=1, width=5, comm_scale=10.0, memory_fraction=0.15))


def _ctx(time_limit: float | None) -> RunContext:
    return RunContext(get_backend("highs"), SolveOptions(time_limit=time_limit), {})


def test_the_relaxation_build_stops_at_the_deadline() -> None:
    """Past the call's deadline the build raises instead of building the whole model (and
    then not starting the solver): `relaxation_bounds` returns no bound."""
    inst = _instance()
    ctx = _ctx(1e-6)
    time.sleep(0.01)
    with pytest.raises(DeadlineReached):
        relaxation.solve_bound(inst, ctx, None, integral=False, order_nonzeros=0, wait_nonzeros=0, window_nonzeros=0)
    assert relaxation.relaxation_bounds(inst, ctx, 0.0, lp_first_above=0) == []
    assert ctx.solver_results == []  # no model reached a solver


def test_the_energetic_and_precedence_rows_check_the_deadline() -> None:
    inst = _instance(400, 4)
    model, index = relaxation.RELAXATION.build(inst, {"integral": False})
    past = time.perf_counter() - 1.0
    with pytest.raises(DeadlineReached):
        relaxation.energetic_rows(model, inst, model["assign"], model["makespan"], index.r, index.q, 12, past)
    with pytest.raises(DeadlineReached):
        descendants.precedence_load_rows(model, inst, model["head"], model["makespan"], index.P, index.r, index.q, 10_000, past)


def test_the_blocked_precedence_rows_equal_the_dense_ones() -> None:
    """`precedence_load_rows` sums the reach matrix `ROW_BLOCK` ops at a time, from bit
    sets: the same rows as from the dense closure (`precedence_sets`)."""
    inst = _instance(300, 3)
    reach = descendants.precedence_sets(inst)
    bits = descendants._closure_bits(inst, None)
    n = inst.n_ops
    pmax = inst.time.max(axis=1)
    other = np.arange(n, dtype=float)
    for ancestors, rel in ((False, reach), (True, reach.T)):
        sizes, work, least = descendants._set_sums(bits, n, ancestors, pmax, other, None)
        assert np.array_equal(sizes, rel.sum(axis=1))
        assert np.allclose(work, rel.astype(float) @ pmax, rtol=1e-12, atol=0)
        assert np.array_equal(least, np.where(rel, other[None, :], np.inf).min(axis=1, initial=np.inf))
        ops = np.flatnonzero(sizes)[::7]
        sets = descendants._reach_sets(bits, n, ancestors, ops, None)
        assert all(np.array_equal(s, np.flatnonzero(rel[i])) for i, s in zip(ops.tolist(), sets))


def test_a_bound_only_run_gives_the_solver_free_bounds_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a bound-only run the path cuts get the run's deadline (with `solve`'s small
    grace), as after a run with a plan; they had none and took 1.8 s past a 0.05 s limit."""
    seen: list[Any] = []
    real = bounds.path_cut_bound

    def spy(inst: PlacementInstance, paths: int = 8, deadline: float | None = None) -> Any:
        seen.append(deadline)
        return real(inst, paths, deadline)

    monkeypatch.setattr(bounds, "path_cut_bound", spy)
    inst = _instance()
    t0 = time.perf_counter()
    res = distplan.solve(inst, "placement_bounds", time_limit=0.05)
    wall = time.perf_counter() - t0
    assert seen and all(d is not None for d in seen)
    assert wall <= 0.05 + GRACE
    etf = milp.best_heuristic(inst)[0]
    assert res.bound is not None and etf is not None and res.bound <= etf.makespan
    assert res.bound_source == bounds.path_cut_bound(inst).source  # the first path, tried within the grace


def test_path_cuts_try_their_first_path_and_stop_after_it() -> None:
    """Started before its deadline, the path-cut bound tries the longest path (linear
    array work) and no other once the deadline has passed; the value is the full one's
    or below it, and started past its deadline it is absent."""
    from distplan.formulations.placement import pathcut

    inst = _instance()
    full = pathcut.path_cut_bound(inst)
    assert full is not None and full.value > max(b.value for b in bounds.placement_bounds(inst)[:2])
    assert pathcut.path_cut_bound(inst, deadline=time.perf_counter() - 1.0) is None
    p = inst.time.min(axis=1)
    r, q = relaxation.heads_tails(inst, p)
    group = inst.colocation_groups()
    gmem = np.bincount(group, weights=relaxation.charged_memory(inst))
    first = list(pathcut.candidate_paths(inst, p, r, q, group, gmem, 8, time.perf_counter() - 1.0, first_always=True))
    assert len(first) == 1
    assert list(pathcut.candidate_paths(inst, p, r, q, group, gmem, 8, time.perf_counter() - 1.0)) == []
