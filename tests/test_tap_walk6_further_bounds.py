"""tap's label pass with further Lagrangian bounds (distplan/formulations/sharding/chain_dp.py:
`LABEL_MULTIPLIERS`, `_further_bounds`, `_Walk.to_go_many`): a label is also bounded at
multiples of the dual's lam, which drops labels whose memory is far from their share of the
budget; the plan and its cost stay those of the pass without them (brute force on small
random walks, the earlier pass on tight GPTs), with fewer labels."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding.chain_dp import _further_bounds, _label_dp, solve_walk_dp
from tests.test_tap_binding_incumbent import _budget_case, _valid
from tests.test_tap_dp import RANDOM_WALK_CASES, _one_chain, _random_walk
from tests.test_tap_exact import tight

chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 5), stages=st.integers(1, 2), copies=st.integers(1, 4), dense=st.booleans())
def test_to_go_many_equals_to_go_per_multiplier(seed: int, W: int, stages: int, copies: int, dense: bool) -> None:
    """For each multiplier, the values to go of `to_go_many` are `to_go`'s bit for bit, on
    the dense stage matrices and arc by arc (``DENSE_STATES`` 0)."""
    walk = _random_walk(np.random.default_rng(seed), W, stages, copies)
    a, fe = walk.chain.arcs, walk.front_end  # type: ignore[attr-defined]
    lams = [0.0, 0.37, 1.9e-3, 3.3]
    with pytest.MonkeyPatch.context() as m:
        if not dense:
            m.setattr(chain_dp, "DENSE_STATES", 0)
        many = walk.to_go_many(lams)  # type: ignore[attr-defined]
        for k, lam in enumerate(lams):
            assert np.array_equal(many[k], walk.to_go(a["cost"] + lam * a["memory"], fe.cost + lam * fe.mem))  # type: ignore[attr-defined]


def _pass(walk: Any, budget: float, lam: float, upper: float, multipliers: tuple[float, ...], small: int) -> tuple[Any, float]:
    a, fe = walk.chain.arcs, walk.front_end
    mem_to_go = walk.to_go(a["memory"], fe.mem)
    lag_to_go = walk.sweep(lam, False).value
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "LABEL_MULTIPLIERS", multipliers)
        m.setattr(chain_dp, "FURTHER_LABELS", 0)
        m.setattr(chain_dp, "SMALL_STEP", small)
        return _label_dp(walk, budget, lam, upper, mem_to_go, lag_to_go, None, 1e9, None, None, _further_bounds(walk, lam))


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    **RANDOM_WALK_CASES,
    where=st.floats(0.0, 1.0),
    over=st.sampled_from([0.0, 0.01, 0.3, np.inf]),
)
def test_further_bounds_keep_the_optimum_with_fewer_labels(seed: int, W: int, stages: int, copies: int, lam: float, where: float, over: float) -> None:
    """With memory binding and a cost cap at or above the optimum (brute force), the pass
    with further multipliers returns a cheapest plan within budget (the pass without them
    does too), keeps at most as many labels, reports a least dropped bound above the
    optimum, and its numpy and Python steps agree bit for bit."""
    walk, plans, budget, opt = _budget_case(seed, W, stages, copies, where)
    upper = opt * (1 + over) * (1 + 1e-9)
    plain, _ = _pass(walk, budget, lam, upper, (), 0)
    num, d_num = _pass(walk, budget, lam, upper, (0.5, 1.25), 0)
    py, d_py = _pass(walk, budget, lam, upper, (0.5, 1.25), 10**9)
    assert plain is not None and num is not None and py is not None
    assert num.cost == pytest.approx(opt, rel=1e-12, abs=1e-12) and plain.cost == pytest.approx(opt, rel=1e-12, abs=1e-12)
    assert num.memory <= budget and _valid(walk, num.path) and num.labels <= plain.labels
    assert (num.cost, num.memory, num.bound, num.labels, d_num) == (py.cost, py.memory, py.bound, py.labels, d_py)
    assert np.array_equal(num.path, py.path) and np.array_equal(num.explicit, py.explicit)
    if np.isfinite(d_num):
        assert d_num > opt * (1 - 1e-9) - 1e-12


@pytest.mark.parametrize(("layers", "mesh", "frac"), [(8, 4, 0.02), (7, 8, 0.05), (12, 4, 0.05), (12, 8, 0.3)])
def test_tight_gpts_give_the_same_plan_with_fewer_labels(layers: int, mesh: Any, frac: float) -> None:
    """On tight GPTs the whole walk with the further bounds returns the plan, cost, memory
    and bound of the walk without them, bit for bit, with fewer labels (261 -> 234, 312 ->
    178, 888 -> 469, 434 -> 328 when written)."""
    chain, graph, start, end = _one_chain(tight(layers, mesh, frac, 2.5e10))
    runs = []
    for multipliers in [(), (0.5, 1.25)]:
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "LABEL_MULTIPLIERS", multipliers)
            runs.append(solve_walk_dp(chain, graph, start, end))
    old, new = runs
    assert old is not None and new is not None
    assert (old.cost, old.memory, old.bound) == (new.cost, new.memory, new.bound)
    assert np.array_equal(old.path, new.path) and np.array_equal(old.explicit, new.explicit)
    assert new.labels < old.labels


def test_further_tables_are_made_once_with_the_memory_to_go() -> None:
    """The tables to go at the further multipliers are made once for all the walk's passes
    (several here: a first cap just above the Lagrangian bound, no incumbent to cap at), on
    dense walks in the one pass that makes the memory to go (`_to_go_tables`), with the
    values of `to_go` and `to_go_many` bit for bit."""
    chain, graph, start, end = _one_chain(tight(12, 4, 0.05, 2.5e10))
    made: list[Any] = []
    passes: list[int] = []
    tables_of, label_dp = chain_dp._to_go_tables, chain_dp._label_dp

    def counted(walk: Any, lam: float) -> Any:
        got = tables_of(walk, lam)
        made.append((walk, lam, got))
        return got

    def counted_pass(*args: Any) -> Any:
        passes.append(1)
        return label_dp(*args)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "_to_go_tables", counted)
        m.setattr(chain_dp, "_label_dp", counted_pass)
        m.setattr(chain_dp, "FIRST_GAP", 1e-7)
        m.setattr(chain_dp, "INCUMBENT_GAP", 0.0)
        assert solve_walk_dp(chain, graph, start, end) is not None
    assert len(made) == 1 and len(passes) > 1
    walk, lam, (mem_to_go, further) = made[0]
    a, fe = walk.chain.arcs, walk.front_end
    assert lam > 0 and walk.W <= chain_dp.DENSE_STATES
    assert np.array_equal(mem_to_go, walk.to_go(a["memory"], fe.mem))
    lams = [lam * x for x in chain_dp.LABEL_MULTIPLIERS]
    many = walk.to_go_many(lams)
    assert [x for x, _ in further()] == lams
    assert all(np.array_equal(g, many[k]) for k, (_, g) in enumerate(further()))
