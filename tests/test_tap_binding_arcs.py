"""tap's label pass with its arcs filtered by their Lagrangian bound (`_kept_arcs`) and its
small steps in Python lists (`SMALL_STEP`), distplan/formulations/sharding/chain_dp.py:
the same labels, plan and bound as the pass over every arc in numpy (the earlier form),
against brute force on small random walks and on tight GPTs."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding.chain_dp import _kept_arcs, _label_dp, solve_walk_dp
from tests.test_tap_binding_incumbent import _budget_case, _plans, _small_walk, _valid
from tests.test_tap_dp import RANDOM_WALK_CASES, _one_chain
from tests.test_tap_exact import tight

chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")

#: (FILTER_ARCS, SMALL_STEP): the earlier form, the filter with numpy steps, with Python steps
FORMS = [(False, 0), (True, 0), (True, 10**9)]


def _passes(walk: Any, budget: float, lam: float, upper: float, incumbent: Any, lam_c: float | None) -> list[tuple[Any, float]]:
    a, fe = walk.chain.arcs, walk.front_end
    mem_to_go = walk.to_go(a["memory"], fe.mem)
    lag_to_go = walk.sweep(lam, False).value
    completion = None if lam_c is None else walk.sweep(lam_c, False)
    out = []
    for filt, small in FORMS:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "FILTER_ARCS", filt)
            m.setattr(chain_dp, "SMALL_STEP", small)
            out.append(_label_dp(walk, budget, lam, upper, mem_to_go, lag_to_go, None, 1e9, completion, incumbent))
    return out


def _same(x: Any, y: Any) -> None:
    assert (x is None) == (y is None)
    if x is not None:
        assert (x.cost, x.memory, x.bound, x.labels) == (y.cost, y.memory, y.bound, y.labels)
        assert np.array_equal(x.path, y.path) and np.array_equal(x.explicit, y.explicit)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    **RANDOM_WALK_CASES,
    where=st.floats(0.0, 1.0),
    over=st.sampled_from([0.0, 0.01, 0.3, np.inf]),
    lam_c=st.sampled_from([None, 0.25, 50.0]),
)
def test_filtered_and_python_passes_equal_the_plain_pass_and_brute_force(seed: int, W: int, stages: int, copies: int, lam: float, where: float, over: float, lam_c: float | None) -> None:
    """With memory binding and a cost cap at, above or far above the optimum (brute force),
    the pass with the arc filter (numpy steps, then Python steps) keeps the same labels
    and returns the same plan, memory and bound, bit for bit, as the pass over every arc;
    the plan is a cheapest one within budget; the least dropped bound it reports is no
    larger than the plain pass's (up to rounding) and above the optimum."""
    walk, plans, budget, opt = _budget_case(seed, W, stages, copies, where)
    upper = opt * (1 + over)
    (old, d_old), (num, d_num), (py, d_py) = _passes(walk, budget, lam, upper, None, lam_c)
    _same(old, num)
    _same(old, py)
    assert d_num == d_py
    assert d_num <= d_old * (1 + 1e-9) + 1e-12
    assert old is not None and old.cost == pytest.approx(opt, rel=1e-12, abs=1e-12)
    assert _valid(walk, py.path) and py.memory <= budget and py.bound <= py.cost  # type: ignore[union-attr]
    if np.isfinite(d_num):
        assert d_num > opt * (1 - 1e-9) - 1e-12  # (above the cut, never below the optimum)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 4), stages=st.integers(1, 2), copies=st.integers(1, 3), lam=st.sampled_from([0.0, 0.5, 3.0]), cut=st.floats(-1.0, 40.0))
def test_an_arc_is_left_out_only_when_every_path_through_it_is_above_the_cut(seed: int, W: int, stages: int, copies: int, lam: float, cut: float) -> None:
    """Brute force over every plan: a plan whose Lagrangian weight (cost + lam x (memory -
    budget), budget 0 here) is at most the cut takes only kept arcs at every step, and the
    least bound reported for the arcs left out is at most the weight of any plan that
    takes one."""
    walk = _small_walk(seed, W, stages, copies)
    a = walk.chain.arcs  # type: ignore[attr-defined]
    lag_less = walk.sweep(lam, False).value  # type: ignore[attr-defined]
    kept, least = _kept_arcs(walk, lam, lag_less, cut)  # type: ignore[arg-type]
    for c, m, _, seq, _ in _plans(walk):
        weight = c + lam * m
        taken = all(e in kept[t][int(a["prev"][e])] for t, e in enumerate(seq))
        if weight <= cut:
            assert taken
        if not taken:
            assert least <= weight * (1 + 1e-9) + 1e-9
    assert all(len(set(x)) == len(x) for step in kept for x in step)


@pytest.mark.parametrize(("layers", "mesh", "frac"), [(6, 8, 0.3), (8, 4, 0.02), (7, 8, 0.05), (6, (2, 2), 0.05)])
def test_tight_gpts_give_the_same_plan_with_and_without_the_filter(layers: int, mesh: Any, frac: float) -> None:
    """On tight GPTs (heterogeneous links), the whole walk with the filter and Python steps
    returns the plan, cost, memory, bound and label count of the earlier form, bit for
    bit, with memory binding (the plan is within budget, the bound at most its cost)."""
    chain, graph, start, end = _one_chain(tight(layers, mesh, frac, 2.5e10))
    runs = []
    for filt, small in FORMS:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "FILTER_ARCS", filt)
            m.setattr(chain_dp, "SMALL_STEP", small)
            runs.append(solve_walk_dp(chain, graph, start, end))
    for r in runs[1:]:
        _same(runs[0], r)
    assert runs[0] is not None and runs[0].memory <= graph.memory_budget and runs[0].bound <= runs[0].cost


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(65, 400), keys=st.integers(1, 12), values=st.integers(1, 30), base=st.integers(0, 5))
def test_pareto_rows_by_key_runs_equal_the_three_key_sort(seed: int, n: int, keys: int, values: int, base: int) -> None:
    """`pareto_rows` with few keys (each key's running least cost after a sort by key and
    memory) returns the rows of the three-key sort (`FEW_KEYS` 0), in the same order, ties
    included (few distinct values make equal memories and costs common), and they are the
    undominated rows, one per distinct point of each key."""
    chain_fronts = importlib.import_module("distplan.formulations.sharding.chain_fronts")
    rng = np.random.default_rng(seed)
    key = base + rng.integers(0, keys, n)
    cost = rng.integers(0, values, n) * 0.125
    mem = rng.integers(0, values, n).astype(float)
    few = chain_fronts.pareto_rows(key, cost, mem)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "FEW_KEYS", 0)
        many = chain_fronts.pareto_rows(key, cost, mem)
    assert np.array_equal(few, many)
    got = {(int(key[i]), cost[i], mem[i]) for i in few.tolist()}
    assert len(got) == few.size
    want = {(int(key[i]), cost[i], mem[i]) for i in range(n) if not np.any((key == key[i]) & (cost <= cost[i]) & (mem <= mem[i]) & ((cost < cost[i]) | (mem < mem[i])))}
    assert got == want


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 4), stages=st.integers(1, 2), copies=st.integers(1, 3), lam=st.sampled_from([0.0, 0.5, 3.0]))
def test_forward_values_arc_by_arc_equal_the_dense_stage_matrices(seed: int, W: int, stages: int, copies: int, lam: float) -> None:
    """`_Walk.from_start` arc by arc (walks above `DENSE_STATES` states) equals its dense
    form on the same walk, bit for bit (review sound5: no test walk had more than 64 states,
    so an inflated weight in the arc-by-arc branch went unseen)."""
    from unittest import mock

    from distplan.formulations.sharding import chain_dp

    walk = _small_walk(seed, W, stages, copies)
    dense = walk.from_start(lam)  # type: ignore[attr-defined]
    with mock.patch.object(chain_dp, "DENSE_STATES", 0):
        sparse = walk.from_start(lam)  # type: ignore[attr-defined]
    assert np.array_equal(dense, sparse)
