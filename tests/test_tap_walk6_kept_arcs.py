"""The rounding allowance of `_kept_arcs` (distplan/formulations/sharding/chain_dp.py): an
arc whose Lagrangian bound is above the cut only by the rounding of its sum is kept (a
label through it may weigh exactly the cut, summed its own way), and one above the cut by
more than rounding is left out, with its bound reported."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np

from distplan.formulations.sharding.chain_dp import _kept_arcs, _label_dp, _Walk
from distplan.formulations.sharding.chain_fronts import _Table

#: start front (cost s, memory B), arc, end front; lam and budget: found by a search for a
#: walk whose one plan, summed as the label pass sums it, weighs less than the arc's bound
#: summed as `_kept_arcs` sums it ((least from the start) + (arc weight) + (to go))
START, ARC, END = (1.6, 2.2), (0.1, 3.0), (2.2, 1.3)
LAM, BUDGET = 1.6, 10.0


def _one_arc_walk() -> Any:
    """One state, one step over one arc, one row in each front."""
    arcs = {"prev": np.array([0]), "cur": np.array([0]), "first": np.array([True]), "cost": np.array([ARC[0]]), "memory": np.array([ARC[1]])}
    chain = SimpleNamespace(arcs=arcs, num_walk_states=1)
    fs = _Table([], np.zeros((1, 1), dtype=np.int64), np.array([START[0]]), np.array([START[1]]))
    fe = _Table([], np.zeros((1, 1), dtype=np.int64), np.array([END[0]]), np.array([END[1]]))
    return _Walk(chain, [np.array([0])], 1, arcs["memory"], fs, fe, np.array([0]), np.array([0]))  # type: ignore[arg-type]


def _bounds(walk: Any) -> tuple[np.ndarray, np.ndarray, float, float]:
    """Memory to go, Lagrangian weight to go, the plan's Lagrangian bound after its step as
    `_label_dp` sums it (label weight, then to go less lam x budget), and the arc's as
    `_kept_arcs` sums it."""
    a, fe = walk.chain.arcs, walk.front_end
    mem_to_go = walk.to_go(a["memory"], fe.mem)
    lag_to_go = walk.to_go(a["cost"] + LAM * a["memory"], fe.cost + LAM * fe.mem)
    g = float(lag_to_go[1][0] - LAM * BUDGET)
    label = ((START[0] + ARC[0]) + LAM * (START[1] + ARC[1])) + g
    arc = float(walk.from_start(LAM)[0][0]) + (ARC[0] + LAM * ARC[1]) + g
    return mem_to_go, lag_to_go, label, arc


def test_an_arc_above_the_cut_by_rounding_is_kept_and_its_plan_found() -> None:
    """The cut is the plan's own Lagrangian bound; the arc's bound, summed in another order,
    is above it in the last bits: the arc is kept, and the label pass (cut = that bound)
    returns the plan, which fits the budget. Leaving the arc out (no allowance) loses it."""
    walk = _one_arc_walk()
    mem_to_go, lag_to_go, label, arc = _bounds(walk)
    assert arc > label and arc - label < 1e-14 * abs(label)  # (the case searched for)
    kept, least = _kept_arcs(walk, LAM, lag_to_go - LAM * BUDGET, label)
    assert kept == [[[0]]] and least == np.inf
    res, _ = _label_dp(walk, BUDGET, LAM, label, mem_to_go, lag_to_go, None, 1e9)
    assert res is not None and res.path.tolist() == [0]
    assert res.cost == START[0] + ARC[0] + END[0] and res.memory <= BUDGET


def test_an_arc_above_the_cut_by_more_than_rounding_is_left_out() -> None:
    """The cut 1e-8 of the bound's terms below the arc's bound (beyond the relative 1e-9
    rounding allowance): the arc is left out and its bound is the least reported."""
    walk = _one_arc_walk()
    _, lag_to_go, _, arc = _bounds(walk)
    terms = float(walk.from_start(LAM)[0][0]) + (ARC[0] + LAM * ARC[1]) + abs(float(lag_to_go[1][0] - LAM * BUDGET))
    kept, least = _kept_arcs(walk, LAM, lag_to_go - LAM * BUDGET, arc - 1e-8 * terms)
    assert kept == [[[]]] and least == arc
