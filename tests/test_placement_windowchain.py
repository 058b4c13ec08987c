"""The module windows' assignments combined over the waist chain (`windowchain`): on small
training graphs (forward fork-join blocks, their gradients co-located with them) it reaches
the brute-force optimum over all co-location-consistent assignments, which the greedy
gluing (`segments.glued_assignment`) misses; it never does worse than its fallback by
its own measure, and it keeps its deadline."""

from __future__ import annotations

import itertools
import time
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.placement import windowchain as wc
from distplan.formulations.placement.improve import SearchProblem
from distplan.formulations.placement.segments import cut_waists, glued_assignment
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def training(times: list[float], nbytes: list[float], modules: int = 2, devices: int = 2, update: float = 0.0) -> PlacementInstance:
    """A traced training step: joins ``c0`` .. ``c<modules>`` (0.5 s each) with a fork-join
    block of two branches between consecutive joins (forward), then the gradient joins in
    reverse with the gradient block of each branch, co-located with its forward op (and
    each gradient join with its join). ``times`` and ``nbytes``: per branch op (forward
    blocks first), its time (seconds) and the bytes of its in- and out-edge. Links: 1 byte/s
    and 0.1 s (with three devices or more, the link g0-g2 at 0.25 byte/s). ``update`` > 0:
    each gradient op feeds a weight update of that many seconds, co-located with it (a
    sink outside every window)."""
    ops: list[dict[str, Any]] = []
    edges: list[dict[str, Any]] = []

    def op(name: str, t: float, group: str) -> None:
        ops.append({"name": name, "time": t, "memory": 1.0, "colocate": group})

    def edge(a: str, b: str, x: float) -> None:
        edges.append({"src": a, "dst": b, "bytes": x})

    k = 0
    op("c0", 0.5, "c0")
    for i in range(modules):
        for br in "ab":
            op(f"f{i}{br}", times[k], f"L{i}{br}")
            edge(f"c{i}", f"f{i}{br}", nbytes[k])
            edge(f"f{i}{br}", f"c{i + 1}", nbytes[k])
            k += 1
        op(f"c{i + 1}", 0.5, f"c{i + 1}")
    op(f"c{modules}.grad", 0.5, f"c{modules}")
    edge(f"c{modules}", f"c{modules}.grad", 1.0)
    for i in reversed(range(modules)):
        for br in "ab":
            op(f"g{i}{br}", times[k], f"L{i}{br}")
            edge(f"c{i + 1}.grad", f"g{i}{br}", nbytes[k])
            edge(f"g{i}{br}", f"c{i}.grad", nbytes[k])
            if update > 0:
                op(f"u{i}{br}", update, f"L{i}{br}")
                edge(f"g{i}{br}", f"u{i}{br}", 0.0)
            k += 1
        op(f"c{i}.grad", 0.5, f"c{i}")
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "training",
        "graph": {"ops": ops, "edges": edges},
        "cluster": {
            "devices": [{"name": f"g{d}", "memory": 1e9} for d in range(devices)],
            "bandwidth": 1.0,
            "latency": 0.1,
            "links": [{"src": "g0", "dst": "g2", "bandwidth": 0.25}] if devices > 2 else [],
        },
    }
    inst = instance_from_dict(doc)
    assert isinstance(inst, PlacementInstance)
    return inst


def every_assignment(inst: PlacementInstance) -> list[np.ndarray]:
    """Every co-location-consistent device per op."""
    g = np.unique(inst.colocation_groups(), return_inverse=True)[1]
    return [np.asarray(a)[g] for a in itertools.product(range(inst.n_devices), repeat=int(g.max()) + 1)]


def window_options(inst: PlacementInstance, chain: list[int]) -> dict[bytes, list[np.ndarray]]:
    """Every assignment of every window, filed as the window solver files them."""
    return {w.key: every_assignment(w.sub) for w in wc.chain_windows(inst, chain)}


# two random draws (times 1..5 s, bytes 0..3) where the greedy gluing is 2.6 and 4.4 s worse
CASES = [
    ([4.0, 3.0, 1.0, 1.0, 5.0, 4.0, 5.0, 3.0], [3.0, 1.0, 1.0, 3.0, 0.0, 1.0, 0.0, 1.0]),
    ([2.0, 1.0, 4.0, 2.0, 3.0, 5.0, 2.0, 2.0], [0.0, 3.0, 0.0, 2.0, 0.0, 3.0, 2.0, 2.0]),
]


def _case(times: list[float], nbytes: list[float]) -> tuple[PlacementInstance, list[int], dict[bytes, list[np.ndarray]]]:
    inst = training(times, nbytes)
    chain = cut_waists(inst)
    assert [inst.op_names[v] for v in chain] == ["c0", "c1", "c2", "c2.grad", "c1.grad", "c0.grad"]
    return inst, chain, window_options(inst, chain)


@pytest.mark.parametrize(("times", "nbytes"), CASES)
def test_chained_start_reaches_the_brute_force_optimum(times: list[float], nbytes: list[float]) -> None:
    """Given every window assignment, the chained plan is the best of all 2^7 assignments
    (each timed like the search times it), and strictly better than the greedy gluing."""
    inst, chain, found = _case(times, nbytes)
    prob = SearchProblem(inst)
    spans = [s.makespan for s in map(prob.schedule, every_assignment(inst)) if s is not None]
    optimum = min(spans)
    zero = np.zeros(inst.n_ops, dtype=np.int64)
    got = wc.chained_start(inst, chain, found, [zero])
    assert got is not None
    assert got.makespan == pytest.approx(optimum, abs=1e-9)
    check = evaluate(inst, make_plan(inst, got.device, got.start))
    assert check.feasible and check.objective == pytest.approx(got.makespan, abs=1e-12)
    glued = prob.schedule(glued_assignment(inst, chain, found, zero))
    assert glued is not None and glued.makespan > optimum + 1.0
    # and the sum it minimizes is the makespan here (nothing outside the windows)
    assignment = wc.chained_assignment(inst, chain, found, zero)
    assert assignment is not None and assignment[1] == pytest.approx(optimum, abs=1e-9)


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.lists(st.integers(1, 5), min_size=8, max_size=8), st.lists(st.integers(0, 3), min_size=8, max_size=8))
def test_chained_start_is_optimal_on_random_training_graphs(times: list[int], nbytes: list[int]) -> None:
    """Random branch times and bytes: the chained plan matches the brute-force optimum over
    co-location-consistent assignments."""
    inst = training([float(t) for t in times], [float(b) for b in nbytes])
    chain = cut_waists(inst)
    found = window_options(inst, chain)
    prob = SearchProblem(inst)
    optimum = min(s.makespan for s in map(prob.schedule, every_assignment(inst)) if s is not None)
    got = wc.chained_start(inst, chain, found, [np.zeros(inst.n_ops, dtype=np.int64)])
    assert got is not None and got.makespan == pytest.approx(optimum, abs=1e-9)


def test_no_worse_than_its_fallback_by_its_own_measure() -> None:
    """With no window assignment filed, the candidates are the fallback (renamed, and with
    every choice of the waists): its sum is at most the fallback's, for any fallback."""
    inst, chain, _ = _case(*CASES[0])
    prob = SearchProblem(inst)
    rng = np.random.default_rng(3)
    options = every_assignment(inst)
    for k in rng.choice(len(options), 5, replace=False).tolist():
        fallback = options[k]
        got = wc.chained_assignment(inst, chain, {}, fallback)
        assert got is not None
        own = sum(prob_w.schedule(fallback[w.ops]).makespan for w, prob_w in ((w, SearchProblem(w.sub)) for w in wc.chain_windows(inst, chain)))  # type: ignore[union-attr]
        own += float(inst.time[chain, 0].sum())
        assert got[1] <= own + 1e-12
        # and the same sum is the chained plan's makespan
        assert prob.schedule(got[0]).makespan == pytest.approx(got[1], abs=1e-9)  # type: ignore[union-attr]


def test_two_fallbacks_share_one_program_and_keep_the_better_plan() -> None:
    """`milp.run` passes two fallbacks (the heuristic plan and the glued one): the plan is
    the better of the two fallbacks' chained plans, each timed by the evaluator, and never
    worse than either alone."""
    inst, chain, found = _case(*CASES[0])
    options = every_assignment(inst)
    rng = np.random.default_rng(5)
    for _ in range(3):
        a, b = (options[k] for k in rng.choice(len(options), 2, replace=False).tolist())
        both = wc.chained_start(inst, chain, found, [a, b])
        alone = [wc.chained_start(inst, chain, found, [f]) for f in (a, b)]
        assert both is not None and all(s is not None for s in alone)
        assert both.makespan == pytest.approx(min(s.makespan for s in alone if s is not None), abs=1e-12)
        assert evaluate(inst, make_plan(inst, both.device, both.start)).objective == pytest.approx(both.makespan, abs=1e-12)


def test_keeps_its_deadline() -> None:
    """A deadline already passed: no plan, at once; a deadline far away: the optimum; on
    Inception-like chains of hundreds of waists the deadline is checked per waist and per
    component (gpt2-medium-dgx1: 19.5 s past a 3 s budget before it was)."""
    inst, chain, found = _case(*CASES[1])
    zero = np.zeros(inst.n_ops, dtype=np.int64)
    t0 = time.perf_counter()
    assert wc.chained_start(inst, chain, found, [zero], deadline=time.perf_counter() - 1.0) is None
    assert wc.chain_windows(inst, chain, deadline=time.perf_counter() - 1.0) is None
    assert time.perf_counter() - t0 < 1.0
    got = wc.chained_start(inst, chain, found, [zero], deadline=time.perf_counter() + 600.0)
    assert got is not None and evaluate(inst, make_plan(inst, got.device, got.start)).feasible


def test_components_are_tied_by_colocation() -> None:
    """The forward block and its gradient block are one component; the joins are the
    waist variables, one per co-located pair."""
    inst, chain, _ = _case(*CASES[0])
    windows = wc.chain_windows(inst, chain)
    names = [sorted(inst.op_names[v] for v in w.ops) for w in windows]
    assert ["c0", "c1", "f0a", "f0b"] in names and ["c0.grad", "c1.grad", "g0a", "g0b"] in names
    assert ["c2", "c2.grad"] in names  # an empty module between two waists: their transfer
    program = wc.chain_program(inst, chain)
    assert program is not None
    tied = [sorted(tuple(sorted(inst.op_names[v] for v in program.windows[w].ops)) for w in members) for members, _, _ in program.parts]
    assert [("c0", "c1", "f0a", "f0b"), ("c0.grad", "c1.grad", "g0a", "g0b")] in tied
    assert [("c1", "c2", "f1a", "f1b"), ("c1.grad", "c2.grad", "g1a", "g1b")] in tied
    assert [("c2", "c2.grad")] in tied and len(tied) == 3
    # each component touches the waist variables of its joins, adjacent in chain order
    assert all(len(scope) <= 2 for _, _, scope in program.parts)


def test_no_start_when_the_windows_do_not_describe_the_plan() -> None:
    """Weight updates of 10 s (sinks outside every window) decide the makespan: the plan
    ends far beyond the sum of its windows, so there is no start (within ``fit``), unless
    any excess is allowed."""
    inst = training(*CASES[0], update=10.0)
    chain = cut_waists(inst)
    assert [inst.op_names[v] for v in chain][:3] == ["c0", "c1", "c2"]
    found = window_options(inst, chain)
    zero = [np.zeros(inst.n_ops, dtype=np.int64)]
    got = wc.chained_assignment(inst, chain, found, zero[0])
    assert got is not None
    assert wc.chained_start(inst, chain, found, zero) is None
    loose = wc.chained_start(inst, chain, found, zero, fit=np.inf)
    assert loose is not None and loose.makespan > got[1] + 5.0


def test_placement_milp_starts_from_the_chained_plan() -> None:
    """`milp.run` offers the chained plan as its start: on a case where the greedy gluing
    misses the optimum, placement_milp's incumbent is the chained plan, and with
    ``chain_share`` 0 it is not (the MILP proves the same optimum either way)."""
    inst = training(*CASES[0])
    quiet = {"search_share": 0.0, "relaxation_share": 0.0, "relaxation_search_share": 0.0, "module_ops": 0}
    on = distplan.solve(inst, "placement_milp", time_limit=30, **quiet)
    off = distplan.solve(inst, "placement_milp", time_limit=30, chain_share=0.0, **quiet)
    assert on.info["incumbent"] == "module windows' assignments chained over the waists"
    assert off.info["incumbent"] != on.info["incumbent"]
    assert on.objective == pytest.approx(off.objective, rel=1e-9)


def own_best(inst: PlacementInstance, chain: list[int]) -> dict[bytes, list[np.ndarray]]:
    """Each window's own best assignment only (the first of its optima), as a window
    solver that sees one window at a time files it."""
    found = {}
    for w in wc.chain_windows(inst, chain) or []:
        prob = SearchProblem(w.sub)
        spans = [(s.makespan, k) for k, s in enumerate(map(prob.schedule, every_assignment(w.sub))) if s is not None]
        found[w.key] = [every_assignment(w.sub)[min(spans)[1]]]
    return found


def test_joint_instance_costs_a_pair_as_the_sum_of_its_windows() -> None:
    """The joint instance of a forward block and its gradient block ends, for any
    assignment, at the sum of the two windows' makespans (the joined waists are
    co-located), and ties each co-location group to one device."""
    inst, chain, _ = _case(*CASES[0])
    program = wc.chain_program(inst, chain)
    assert program is not None
    members = next(m for m, _, _ in program.parts if len(m) == 2)
    windows = [program.windows[w] for w in members]
    built = wc.joint_instance(inst, windows)
    assert built is not None
    joined, ops = built
    assert joined.n_ops == sum(w.ops.size for w in windows)
    groups = joined.colocation_groups()
    assert np.array_equal(np.unique(groups, return_inverse=True)[1], np.unique(inst.colocation_groups()[ops], return_inverse=True)[1])
    prob = SearchProblem(joined)
    for full in every_assignment(inst)[::5]:
        parts = sum(SearchProblem(w.sub).schedule(full[w.ops]).makespan for w in windows)  # type: ignore[union-attr]
        assert prob.schedule(full[ops]).makespan == pytest.approx(parts, abs=1e-9)  # type: ignore[union-attr]


def test_joint_pairs_reach_the_optimum_the_windows_alone_miss() -> None:
    """Filed with each window's own optimum only, the forward and gradient optima of a
    block disagree on the shared layers: the chain of filed plans ends at 26.2 s, the
    joint re-solve of each pair finds the brute-force optimum 24.4 s; never worse than
    without it on random training graphs."""
    inst = training([5.0, 2.0, 3.0, 3.0, 4.0, 3.0, 1.0, 5.0], [2.0, 0.0, 3.0, 2.0, 0.0, 2.0, 2.0, 0.0])
    chain = cut_waists(inst)
    found = own_best(inst, chain)
    zero = [np.zeros(inst.n_ops, dtype=np.int64)]
    optimum = min(s.makespan for s in map(SearchProblem(inst).schedule, every_assignment(inst)) if s is not None)
    alone = wc.chained_start(inst, chain, found, zero, joint=False)
    joint = wc.chained_start(inst, chain, found, zero)
    assert alone is not None and joint is not None
    assert alone.makespan == pytest.approx(26.2, abs=1e-9) and optimum == pytest.approx(24.4, abs=1e-9)
    assert joint.makespan == pytest.approx(optimum, abs=1e-9)
    assert evaluate(inst, make_plan(inst, joint.device, joint.start)).objective == pytest.approx(optimum, abs=1e-9)
    rng = np.random.default_rng(11)
    for _ in range(4):
        other = training([float(t) for t in rng.integers(1, 6, 8)], [float(b) for b in rng.integers(0, 4, 8)])
        ch = cut_waists(other)
        filed = own_best(other, ch)
        z = [np.zeros(other.n_ops, dtype=np.int64)]
        a, b = wc.chained_start(other, ch, filed, z, joint=False), wc.chained_start(other, ch, filed, z)
        assert a is not None and b is not None and b.makespan <= a.makespan + 1e-12


def test_the_joint_phases_keep_the_deadline() -> None:
    """Six blocks on four devices with weight updates (every window assignment filed, a DP
    of several seconds when unbounded): a 0.3 s budget ends within it (loosely), and any
    plan it returns is one the evaluator accepts."""
    rng = np.random.default_rng(1)
    inst = training([float(t) for t in rng.integers(1, 6, 24)], [float(b) for b in rng.integers(0, 4, 24)], modules=6, devices=4, update=0.3)
    chain = cut_waists(inst)
    found = window_options(inst, chain)
    t0 = time.perf_counter()
    got = wc.chained_start(inst, chain, found, [np.zeros(inst.n_ops, dtype=np.int64)], deadline=time.perf_counter() + 0.3, fit=np.inf)
    assert time.perf_counter() - t0 < 0.3 + 0.7
    if got is not None:
        assert evaluate(inst, make_plan(inst, got.device, got.start)).feasible
