"""The series composition over waist ops (`placement.waist`): on random tiny DAGs (3-5 ops,
2 devices, both communication models, both memory models) the composed bound over any
chain of ops, each after the one before, never exceeds the brute-force optimum (the
evaluator's own timing of every assignment and order); on a fixture it equals the
optimum, so a bound inflated by any amount fails. Integral data: sums are exact."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_placement_bounds import brute_force, on_solved_tiny_instances, tiny, tiny_instances

import distplan
from distplan.formulations.placement.relaxation import heads_tails
from distplan.formulations.placement.waist import best_composition, composed_bound, waist_bound, waist_chain
from distplan.models.placement_instance import PlacementInstance


def _chains(inst: PlacementInstance) -> list[list[int]]:
    """Every chain of one or two ops, the second a descendant of the first."""
    n = inst.n_ops
    reach = np.zeros((n, n), dtype=bool)
    reach[inst.src, inst.dst] = True
    for k in range(n):
        reach |= reach[:, [k]] & reach[[k], :]
    out = [[v] for v in range(n)]
    out += [[a, b] for a in range(n) for b in range(n) if reach[a, b]]
    return out


@on_solved_tiny_instances(15)
def test_composed_bound_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    inst, opt = solved
    for chain in _chains(inst):
        value = composed_bound(inst, chain)
        assert value <= opt, f"chain {chain}: {value} > optimum {opt}"
    full = waist_chain(inst, unrelated_share=1.0)
    if full:
        value, used = best_composition(inst, full)
        assert value <= opt, f"best sub-chain {used} of {full}: {value} > optimum {opt}"
        assert value >= composed_bound(inst, full) - 1e-9 and value >= composed_bound(inst, used) - 1e-9
    b = waist_bound(inst, unrelated_share=1.0)
    if b is not None:
        assert b.value <= opt and b.grade == "safe"


@settings(max_examples=25, deadline=None)
@given(tiny_instances(), st.data())
def test_induced_instance_keeps_the_edges_inside(inst: PlacementInstance, data: st.DataObject) -> None:
    keep = np.asarray(data.draw(st.lists(st.booleans(), min_size=inst.n_ops, max_size=inst.n_ops)))
    sub = inst.induced(keep)
    ops = np.flatnonzero(keep)
    assert sub.op_names == [inst.op_names[v] for v in ops]
    assert np.array_equal(sub.time, inst.time[ops])
    inside = {(int(a), int(b), float(x)) for a, b, x in zip(inst.src, inst.dst, inst.edge_bytes) if keep[a] and keep[b]}
    assert {(int(ops[a]), int(ops[b]), float(x)) for a, b, x in zip(sub.src, sub.dst, sub.edge_bytes)} == inside
    assert sub.communication == inst.communication and sub.memory_model == inst.memory_model


def two_forks(comm: str) -> PlacementInstance:
    """a (1 s) feeds b and c (2 s each), both feed the waist w (1 s), which feeds d and e
    (2 s each), both feeding f (1 s); every link costs 10 s, so no cut pays off and the
    optimum is everything on one device: 11 s. The critical path is 7 s."""
    edges = [(0, 1, 0), (0, 2, 0), (1, 3, 0), (2, 3, 0), (3, 4, 0), (3, 5, 0), (4, 6, 0), (5, 6, 0)]
    return tiny(7, edges, [1, 2, 2, 1, 2, 2, 1], [0] * 7, 1, 10, comm, False)


@pytest.mark.parametrize("comm", ["independent", "channels"])
def test_composition_over_the_waist_reaches_the_optimum(comm: str) -> None:
    """Each fork runs on one machine (5 s), so 5 + 1 + 5 = 11 s, the optimum (brute force
    on a 5-op sub-instance each side: the full 7 ops are too many to enumerate here)."""
    inst = two_forks(comm)
    p = inst.time.min(axis=1)
    r, q = heads_tails(inst, p)
    assert float((r + p + q).max()) == 7.0
    for side in (np.array([1, 1, 1, 1, 0, 0, 0], bool), np.array([0, 0, 0, 1, 1, 1, 1], bool)):
        assert brute_force(inst.induced(side)) == 6.0  # a fork and the waist on one device
    assert waist_chain(inst, unrelated_share=0.0) == [0, 3, 6]
    assert composed_bound(inst, [3]) == pytest.approx(11.0, abs=1e-5)  # bisected to 1e-7 relative
    assert composed_bound(inst, [3]) <= 11.0
    assert composed_bound(inst, [0, 3, 6]) == 7.0  # split finer, each fork loses its join
    value, used = best_composition(inst, [0, 3, 6])
    assert used != [0, 3, 6] and composed_bound(inst, used) == value
    assert 11.0 - 1e-5 < value <= 11.0
    b = waist_bound(inst)
    assert b is not None and 11.0 - 1e-5 < b.value <= 11.0
    # the optimum: everything on one device (any plan with a cut pays 10 s on some path)
    res = distplan.solve(inst, "single_device")
    assert res.objective == 11.0
    with pytest.raises(ValueError):
        composed_bound(inst, [4, 5])  # e does not follow d


def test_waist_bound_in_placement_bounds() -> None:
    res = distplan.solve(two_forks("channels"), "placement_bounds", time_limit=10)
    assert res.bound is not None and 11.0 - 1e-5 < res.bound <= 11.0


@pytest.mark.parametrize("share", [0.05, 0.0])
def test_waist_bound_in_placement_milp(share: float) -> None:
    """placement_milp lists the series composition among its bounds (its makespan's lower
    bound in the MILP), and leaves it out when ``waist_share`` is 0."""
    res = distplan.solve(two_forks("independent"), "placement_milp", time_limit=10, waist_share=share)
    waists = [b for b in res.bounds if b.source.startswith("series composition over waist ops")]
    assert len(waists) == (1 if share > 0 else 0)
    assert all(11.0 - 1e-5 < b.value <= 11.0 for b in waists)
    assert res.objective == 11.0 and res.bound is not None and res.bound <= res.objective
