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
from tests.test_tap_binding_incumbent import _budget_case
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


def _old_separator(n: int, P: int, pairs: list[tuple[int, int]], out: set[int], dom: np.ndarray, states: int) -> Any:
    """`chain_fronts._separator` as it was: every pair scanned for every position reached."""
    best: Any = None
    for j in range(n):
        if j in out:
            continue
        seen = {P}
        todo = [P]
        while todo:
            x = todo.pop()
            for a, b in pairs:
                for y in ((b,) if a == x else (a,) if b == x else ()):
                    if y != j and y not in seen:
                        seen.add(y)
                        todo.append(y)
        if seen & out:
            continue
        score = 2.0 * states * float(dom[j])
        if score < states * states and (best is None or score < best[0]):
            best = (score, j, seen - {P})
    return None if best is None else (best[1], best[2])


@settings(max_examples=200, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 9), edges=st.integers(0, 16), states=st.integers(1, 30))
def test_separator_by_neighbour_lists_equals_the_pair_scan(seed: int, n: int, edges: int, states: int) -> None:
    """The separator found through each position's neighbour list is the pair scan's (the
    same position and side), on random graphs with repeated pairs and self-loops."""
    from distplan.formulations.sharding.chain_fronts import _separator

    rng = np.random.default_rng(seed)
    P = n
    pairs = [(int(rng.integers(0, n + 1)), int(rng.integers(0, n))) for _ in range(edges)]
    out = {int(x) for x in rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)}
    dom = rng.integers(1, 8, n + 1)
    assert _separator(n, P, pairs, out, dom, states) == _old_separator(n, P, pairs, out, dom, states)


@settings(max_examples=80, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), n=st.integers(1, 400), keys=st.integers(1, 8), values=st.integers(1, 30))
def test_pareto_rows_few_equals_the_checked_paths(seed: int, n: int, keys: int, values: int) -> None:
    """`pareto_rows_few` (no checks) returns `pareto_rows`' rows on both of its sorted
    paths (running minima per key and the three-key sort), ties included."""
    from distplan.formulations.sharding import chain_fronts

    rng = np.random.default_rng(seed)
    key = rng.integers(0, keys, n)
    cost = rng.integers(0, values, n) * 0.125
    mem = rng.integers(0, values, n).astype(float)
    few = chain_fronts.pareto_rows_few(key, cost, mem)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "SMALL_PARETO", 0)
        assert np.array_equal(few, chain_fronts.pareto_rows(key, cost, mem))
        m.setattr(chain_fronts, "FEW_KEYS", 0)
        assert np.array_equal(few, chain_fronts.pareto_rows(key, cost, mem))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 4), stages=st.integers(1, 2), copies=st.integers(1, 3), lam=st.sampled_from([0.0, 0.25, 3.0]), where=st.floats(0.0, 1.0), over=st.sampled_from([0.0, 0.3, np.inf]))
def test_label_steps_by_few_keys_equal_the_checked_pareto(seed: int, W: int, stages: int, copies: int, lam: float, where: float, over: float) -> None:
    """The label pass's numpy steps (every step, every size: `SMALL_STEP` and
    `SMALL_PARETO` 0) keep the same labels by `pareto_rows_few` as by `pareto_rows`: plan,
    cost, memory, bound, label count and least dropped bound, bit for bit."""
    walk, _, budget, opt = _budget_case(seed, W, stages, copies, where)
    a, fe = walk.chain.arcs, walk.front_end  # type: ignore[attr-defined]
    mem_to_go = walk.to_go(a["memory"], fe.mem)  # type: ignore[attr-defined]
    lag_to_go = walk.sweep(lam, False).value  # type: ignore[attr-defined]
    runs = []
    for few in (True, False):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "SMALL_STEP", 0)
            m.setattr(chain_dp, "SMALL_PARETO", 0)
            m.setattr(chain_dp, "LABEL_FEW_KEYS", few)
            runs.append(chain_dp._label_dp(walk, budget, lam, opt * (1 + over), mem_to_go, lag_to_go, None, 1e9))
    (x, dx), (y, dy) = runs
    assert dx == dy or (np.isnan(dx) and np.isnan(dy))
    assert (x is None) == (y is None)
    if x is not None:
        assert (x.cost, x.memory, x.bound, x.labels) == (y.cost, y.memory, y.bound, y.labels)
        assert np.array_equal(x.path, y.path) and np.array_equal(x.explicit, y.explicit)


@pytest.mark.parametrize("layers,mesh,frac", [(6, 8, 0.05), (7, 4, 0.3)])
def test_tap_with_label_few_keys_equals_the_checked_pareto(layers: int, mesh: Any, frac: float) -> None:
    """tap on tight GPTs: the same objective, bound and plan with the label steps' Pareto
    rows by `pareto_rows_few` and by `pareto_rows`."""
    inst = tight(layers, mesh, frac)
    fast = distplan.solve(inst, "tap")
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_dp, "LABEL_FEW_KEYS", False)
        slow = distplan.solve(inst, "tap")
    assert (fast.objective, fast.bound, fast.status) == (slow.objective, slow.bound, slow.status)
    assert fast.plan is not None and slow.plan is not None
    assert fast.plan.strategies == slow.plan.strategies
