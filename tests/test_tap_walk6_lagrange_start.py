"""tap's Lagrangian search started from the memory-free plan (`_lagrange`'s ``least``,
distplan/formulations/sharding/chain_dp.py): `solve_by_dp` passes the plan it already has
instead of solving the Pareto walk at lam 0 again; the search gives the same multiplier,
bound and plans when that plan is the walk's own, and valid bounds when it comes from a
relaxation (a cheaper point below the walk's hull)."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.sharding.chain_dp import _lagrange
from tests.test_tap_binding_incumbent import _plans, _small_walk
from tests.test_tap_exact import tight

chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")


def test_a_binding_solve_takes_the_memory_free_plan_once() -> None:
    """With memory binding, the only pass at lam 0 is the memory-free one (on the cheapest
    arcs); tap's plan is still alpa_ilp's optimum."""
    inst = tight(6, 8, 0.3, 2.5e10)
    calls: list[float] = []
    scalar = chain_dp._Walk.scalar

    def counted(self: Any, lam: float) -> Any:
        calls.append(lam)
        return scalar(self, lam)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp._Walk, "scalar", counted)
        got = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert calls.count(0.0) == 1 and len(calls) > 2  # (the memory-free pass, then the search's)
    want = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    assert got.objective == pytest.approx(want.objective, rel=1e-9) and got.bound <= got.objective


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 3), stages=st.integers(1, 2), copies=st.integers(1, 3), frac=st.floats(0.0, 1.0), below=st.sampled_from([0.0, 0.5, 3.0]))
def test_the_search_from_a_relaxations_plan_keeps_its_bounds(seed: int, W: int, stages: int, copies: int, frac: float, below: float) -> None:
    """Brute force over every plan: started from the walk's own cheapest plan (``below`` 0:
    its cost and memory as `scalar` gives them) the search returns what it returns from
    ``solve(0.0)``; from a point ``below`` cheaper (a relaxation's plan), its bound is at
    most the least cost within budget and its plan within budget fits."""
    walk = _small_walk(seed, W, stages, copies)
    plans = _plans(walk)
    free = walk.scalar(0.0)  # type: ignore[attr-defined]
    if not plans or free is None:
        return
    mems = sorted(m for _, m, *_ in plans)
    budget = mems[0] + frac * (mems[-1] - mems[0])
    if free[2] <= budget:
        return  # (the memory-free plan fits: solve_by_dp never searches)
    least = (free[1] - below, free[2])
    lam, lower, best, partner = _lagrange(walk.scalar, budget, None, least)  # type: ignore[attr-defined]
    if below == 0.0:
        lam0, lower0, best0, partner0 = _lagrange(walk.scalar, budget, None)  # type: ignore[attr-defined]
        assert (lam, lower, partner) == (lam0, lower0, partner0)
        assert (best is None) == (best0 is None)
        if best is not None:
            assert best[0] == best0[0] and np.array_equal(best[1][1], best0[1][1])
    fits = [c for c, m, *_ in plans if m <= budget]
    if fits:
        assert lower <= min(fits) * (1 + 1e-12) + 1e-12
    if best is not None:
        assert best[1][2] <= budget and best[0] >= min(fits) * (1 - 1e-12) - 1e-12
