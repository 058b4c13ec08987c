"""`chain_fronts.pareto_rows` on costs and memories with infinities, signed zeros and NaN:
its three paths (a Python sort up to `SMALL_PARETO` rows, running minima up to `FEW_KEYS`
keys, the three-key sort) return the same rows in the same order, and all refuse NaN by
name (ValueError) where they used to place it each their own way."""

from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

chain_fronts = importlib.import_module("distplan.formulations.sharding.chain_fronts")

#: (SMALL_PARETO, FEW_KEYS) of each path: Python sort, running minima per key, three-key sort
PATHS = {"python": (10**9, 0), "few keys": (0, 10**9), "three keys": (0, 0)}
#: few distinct values, so that equal costs and memories (and -0.0 against 0.0) are common
VALUES = [0.0, -0.0, 0.5, 1.0, 2.0, math.inf, -math.inf, math.nan]


def _rows(path: str, key: np.ndarray, cost: np.ndarray, mem: np.ndarray) -> np.ndarray | str:
    small, few = PATHS[path]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(chain_fronts, "SMALL_PARETO", small)
        m.setattr(chain_fronts, "FEW_KEYS", few)
        try:
            return chain_fronts.pareto_rows(key, cost, mem)
        except ValueError as err:
            return str(err)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(data=st.lists(st.tuples(st.integers(0, 3), st.sampled_from(VALUES), st.sampled_from(VALUES)), min_size=1, max_size=120), nan=st.booleans())
def test_pareto_paths_agree_on_infinities_signed_zeros_and_nan(data: list[tuple[int, float, float]], nan: bool) -> None:
    """Every path returns the same rows on the same input, or all refuse it (ValueError
    naming NaN) when a cost or a memory is NaN; without NaN the rows are the undominated
    ones, one per distinct (key, cost, memory) point (inf and -inf included)."""
    if not nan:
        data = [(k, c, m) for k, c, m in data if not (math.isnan(c) or math.isnan(m))] or [(0, 0.0, 0.0)]
    key = np.array([k for k, _, _ in data], dtype=np.int64)
    cost = np.array([c for _, c, _ in data])
    mem = np.array([m for _, _, m in data])
    got = {path: _rows(path, key, cost, mem) for path in PATHS}
    if np.isnan(cost).any() or np.isnan(mem).any():
        assert all(isinstance(g, str) and "NaN" in g for g in got.values()), got
        return
    first = got["python"]
    assert isinstance(first, np.ndarray)
    for g in got.values():
        assert isinstance(g, np.ndarray) and np.array_equal(g, first), got
    points = {(int(key[i]), float(cost[i]), float(mem[i])) for i in first.tolist()}
    assert len(points) == first.size
    n = key.size
    want = {(int(key[i]), float(cost[i]), float(mem[i])) for i in range(n) if not np.any((key == key[i]) & (cost <= cost[i]) & (mem <= mem[i]) & ((cost < cost[i]) | (mem < mem[i])))}
    assert points == want


def test_a_nan_cost_after_a_key_first_row_is_refused_not_dropped() -> None:
    """The case found: with few keys, a NaN cost turned the running minimum NaN and every
    later row of its key was dropped, where the three-key sort kept them (NaN last)."""
    key = np.zeros(70, dtype=np.int64)
    mem = np.arange(70, dtype=float)
    cost = np.arange(70, 0, -1, dtype=float)
    cost[1] = math.nan
    for path in PATHS:
        assert isinstance(_rows(path, key, cost, mem), str)
    # infinities (inf x 0 would be NaN) are no NaN: the same rows on every path
    cost[1], mem[0] = math.inf, 0.0
    rows = {path: _rows(path, key, cost, mem) for path in PATHS}
    assert all(isinstance(r, np.ndarray) and np.array_equal(r, rows["python"]) for r in rows.values())
