"""tap's dynamic program (distplan/formulations/sharding/chain_dp.py) on its fast paths
against their general forms, bit for bit: `_Walk.weighed` in one grouped pass over every
front row and arc (`_Walk._grouped`) against front by front and stage by stage
(`_Walk._weighed_each`), on random walks with many ties and on tight GPTs end to end."""

from __future__ import annotations

import importlib
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from tests.test_tap_dp import _random_walk
from tests.test_tap_exact import tight

chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")


def _flat(tables: Any) -> list[np.ndarray]:
    (sw, sr), (ew, er), mats = tables
    return [sw, sr, ew, er] + [x for pair in mats for x in pair]


def _equal(x: Any, y: Any) -> None:
    for a, b in zip(_flat(x), _flat(y), strict=True):
        assert a.shape == b.shape and a.dtype == b.dtype
        assert np.array_equal(a, b)


@settings(max_examples=120, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 5), stages=st.integers(1, 2), copies=st.integers(1, 3), lam=st.sampled_from([0.0, 0.125, 0.5, 3.0, 1e300]))
def test_grouped_weights_equal_the_per_key_sorts(seed: int, W: int, stages: int, copies: int, lam: float) -> None:
    """Least weight per start state, end state and (stage, from, to) pair, and the row or
    arc that has it (the first of equal weights: costs and memories on a coarse grid tie
    often; lam 1e300 makes some weights infinite), the same arrays as `_best_per_key`'s."""
    walk = _random_walk(np.random.default_rng(seed), W, stages, copies)
    got = walk._grouped(lam)  # type: ignore[attr-defined]
    assert got is not None
    _equal(got, walk._weighed_each(lam))  # type: ignore[attr-defined]
    _equal(walk.weighed(lam), got)  # type: ignore[attr-defined]


def test_grouped_weights_defer_on_nan_and_on_empty_walks() -> None:
    """A NaN weight (where a minimum and `_best_per_key`'s sort differ) and a walk without
    front rows or arcs leave `weighed` to the per-key form."""
    walk = _random_walk(np.random.default_rng(7), 3, 2, 2)
    walk.front_start.cost[0] = np.nan  # type: ignore[attr-defined]
    assert walk._grouped(0.5) is None  # type: ignore[attr-defined]
    _equal(walk.weighed(0.5), walk._weighed_each(0.5))  # type: ignore[attr-defined]
    empty = _random_walk(np.random.default_rng(7), 2, 1, 1)
    empty.stage_arcs = [np.zeros(0, dtype=np.int64)]  # type: ignore[attr-defined]
    for t, k in ((empty.front_start, "key_start"), (empty.front_end, "key_end")):  # type: ignore[attr-defined]
        t.cost, t.mem = t.cost[:0], t.mem[:0]
        setattr(empty, k, getattr(empty, k)[:0])
    assert empty._grouped(0.5) is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("layers,mesh,frac", [(6, 4, 0.05), (6, 4, 0.3), (5, (2, 2), 0.1)])
def test_tap_with_grouped_weights_equals_the_per_key_form(layers: int, mesh: Any, frac: float) -> None:
    """tap on tight GPTs: objective, bound and plan bit for bit with `weighed` grouped and
    per key."""
    inst = tight(layers, mesh, frac)
    fast = distplan.solve(inst, "tap")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp._Walk, "_grouped", lambda self, lam: None)
        slow = distplan.solve(inst, "tap")
    assert (fast.objective, fast.bound, fast.status) == (slow.objective, slow.bound, slow.status)
    assert fast.plan is not None and slow.plan is not None
    assert fast.plan.strategies == slow.plan.strategies
