"""`milp.disjunctive_pairs`: the MILP's no-overlap pairs, chosen block by block under the
run's deadline, equal the pairs of the whole upper triangle ranked at once (the reference
below: every unrelated pair, filtered, the ``cap`` longest by a stable sort)."""

from __future__ import annotations

import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.placement import milp
from distplan.models.graphs import transitive_closure


def reference_pairs(reach: np.ndarray, H: float, r: np.ndarray, q: np.ndarray, pmax: np.ndarray, cap: int) -> tuple[np.ndarray, np.ndarray, int]:
    related = reach | reach.T
    i, j = np.nonzero(np.triu(~related, k=1))
    keep = (H - q[i] - r[j] > 0) & (H - q[j] - r[i] > 0) & ((pmax[i] > 0) | (pmax[j] > 0))
    i, j = i[keep], j[keep]
    if i.size > cap:
        top = np.argsort(-np.minimum(pmax[i], pmax[j]), kind="stable")[:cap]
        i, j = i[top], j[top]
    return i, j, int(keep.sum())


@st.composite
def pair_cases(draw: st.DrawFn) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray, int, int]:
    n = draw(st.integers(1, 40))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    src = np.array([min(a, b) for a, b in edges if a != b], dtype=np.int64)
    dst = np.array([max(a, b) for a, b in edges if a != b], dtype=np.int64)
    reach = transitive_closure(n, src, dst)
    pmax = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 2.0, 5.0]), min_size=n, max_size=n)))  # ties
    r = np.array(draw(st.lists(st.sampled_from([0.0, 1.0, 3.0, 8.0]), min_size=n, max_size=n)))
    q = np.array(draw(st.lists(st.sampled_from([0.0, 2.0, 4.0]), min_size=n, max_size=n)))
    H = float(draw(st.sampled_from([4.0, 10.0, 100.0])))
    cap = draw(st.integers(0, n * n // 2 + 2))
    cells = draw(st.sampled_from([1, 7, 64, 1 << 22]))
    return reach, H, r, q, pmax, cap, cells


@settings(max_examples=300, deadline=None)
@given(pair_cases())
def test_blocks_choose_the_pairs_of_the_whole_triangle(case: tuple[np.ndarray, float, np.ndarray, np.ndarray, np.ndarray, int, int]) -> None:
    reach, H, r, q, pmax, cap, cells = case
    with pytest.MonkeyPatch.context() as m:
        m.setattr(milp, "PAIR_BLOCK_CELLS", cells)
        i, j, kept = milp.disjunctive_pairs(reach, H, r, q, pmax, cap)
    ri, rj, rkept = reference_pairs(reach, H, r, q, pmax, cap)
    assert kept == rkept
    assert i.tolist() == ri.tolist() and j.tolist() == rj.tolist()


def test_a_passed_deadline_stops_the_pairs() -> None:
    reach = np.zeros((50, 50), dtype=bool)
    with pytest.raises(DeadlineReached, match="disjunctive pairs"):
        milp.disjunctive_pairs(reach, 10.0, np.zeros(50), np.zeros(50), np.ones(50), 10, deadline=time.perf_counter() - 1.0)


def test_capped_pairs_make_the_model_a_relaxation() -> None:
    inst = distplan.load_instance("placement-small-1")
    whole = milp.prepare_milp(inst, {})
    capped = milp.prepare_milp(inst, {"max_pairs": 3})
    assert whole.pairs_left_out == 0 and whole.pair_i.size > 3 and whole.exact
    assert capped.pair_i.size == 3 and capped.pairs_left_out == whole.pair_i.size - 3 and not capped.exact
