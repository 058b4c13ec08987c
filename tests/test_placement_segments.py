"""The series composition over cut waists with each module's optimum
(`placement.segments`): on random tiny DAGs (3-5 ops, 2 devices, both communication
models, both memory models) the composition over any chain of ops, each after the one
before, with every window bounded by its brute-force optimum (the strongest bound a window
can have) or by the placement MILP, never exceeds the brute-force optimum of the whole
instance; on a fork-join fixture it equals the optimum, which the waist composition does
not reach, so a bound inflated by any amount fails. Integral data: sums are exact."""

from __future__ import annotations

import copy
import time

import numpy as np
import pytest
from hypothesis import assume
from test_placement_bounds import brute_force, on_solved_tiny_instances, tiny
from test_placement_channels_waist import _chains

import distplan
from distplan.formulations.placement.listsched import Schedule
from distplan.formulations.placement.milp import glued_start, identical_devices, run, window_bound
from distplan.formulations.placement.relaxation import interchangeable
from distplan.formulations.placement.segments import compose, cut_waists, glued_assignment, module_bound, window_instance
from distplan.formulations.placement.waist import waist_bound
from distplan.formulations.registry import RunContext
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions


def exact(sub: PlacementInstance, until: float, lower: float, stage: int) -> float:
    """A window's brute-force optimum (seconds), checked against the bound it is given.
    A valid window bound only under independent links: under channels the evaluator's
    greedy re-simulation of a window alone can end later than the window inside a plan
    (the segments module docstring), so there the composition must use proven bounds."""
    opt = brute_force(sub)
    assert lower <= opt, f"segment bound {lower} above the window's optimum {opt}"
    return opt


def _context(**params: float) -> RunContext:
    return RunContext(get_backend("highs"), SolveOptions(time_limit=20.0, threads=1), dict(params))


@on_solved_tiny_instances(7)
def test_composition_never_exceeds_brute_force_optimum(solved: tuple[PlacementInstance, float]) -> None:
    inst, opt = solved
    for chain in _chains(inst) if inst.communication == "independent" else []:
        c = compose(inst, chain, exact)
        assert c.value <= opt, f"chain {chain}: {c.value} > optimum {opt}"
        assert c.solved <= c.modules
    ctx = _context()
    b = module_bound(inst, lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage), deadline=time.perf_counter() + 10)
    if b is not None:
        assert b.value <= opt and b.grade in ("safe", "solver")


@on_solved_tiny_instances(8)
def test_window_instance_optimum_bounds_the_window(solved: tuple[PlacementInstance, float]) -> None:
    """Every window of a two-waist chain: its optimum (zero-time endpoints) plus the two
    waists' fastest times and the parts before and after never exceed the optimum."""
    inst, opt = solved
    assume(inst.communication == "independent")  # see `exact`
    p = inst.time.min(axis=1)
    for chain in _chains(inst):
        if len(chain) != 2:
            continue
        a, b = chain
        reach = np.zeros((inst.n_ops, inst.n_ops), dtype=bool)
        reach[inst.src, inst.dst] = True
        for k in range(inst.n_ops):
            reach |= reach[:, [k]] & reach[[k], :]
        module = reach[a] & reach[:, b]
        sub = window_instance(inst, module, a, b)
        assert sub.n_ops == int(module.sum()) + 2 and sub.time[[0, -1]].max() == 0.0
        assert brute_force(sub) + p[a] + p[b] <= opt


def fork_join(comm: str, latency: int) -> PlacementInstance:
    """w0 (1 s) feeds three branches of 2 s each, all joined by w1 (1 s); 2 devices, every
    link costs ``latency`` s. Latency 1: a branch moved to the other device pays 1 s each
    way, so 2 + 2 on one device against 1 + 2 + 1 on the other: 1 + 4 + 1 = 6 s. Latency
    2: moving pays nothing back, 1 + 6 + 1 = 8 s. The critical path is 4 s."""
    edges = [(0, 1, 0), (0, 2, 0), (0, 3, 0), (1, 4, 0), (2, 4, 0), (3, 4, 0)]
    return tiny(5, edges, [1, 2, 2, 2, 1], [0] * 5, 1, latency, comm, False)


@pytest.mark.parametrize("comm", ["independent", "channels"])
@pytest.mark.parametrize(("latency", "optimum"), [(1, 6.0), (2, 8.0)])
def test_module_optimum_reaches_the_optimum(comm: str, latency: int, optimum: float) -> None:
    inst = fork_join(comm, latency)
    assert brute_force(inst) == optimum
    assert cut_waists(inst) == [0, 4]
    old = waist_bound(inst)
    assert old is not None and old.value < optimum - 0.5  # the segment bounds miss the transfers
    b = module_bound(inst, exact)
    assert b is not None and optimum - 1e-6 < b.value <= optimum and b.grade == "solver"
    assert module_bound(inst, None) is not None and module_bound(inst, None).grade == "safe"
    if comm == "independent":  # the MILP under both models: the differential test above
        ctx = _context()
        milp = module_bound(inst, lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage), deadline=time.perf_counter() + 10)
        assert milp is not None and optimum - 1e-5 < milp.value <= optimum


def test_repeated_windows_are_solved_once() -> None:
    """Two identical fork-joins in series: the second window is the first one's data."""
    edges = [(0, 1, 0), (0, 2, 0), (1, 3, 0), (2, 3, 0), (3, 4, 0), (3, 5, 0), (4, 6, 0), (5, 6, 0)]
    inst = tiny(7, edges, [1, 2, 2, 1, 2, 2, 1], [0] * 7, 1, 1, "independent", False)
    calls: list[int] = []

    def counting(sub: PlacementInstance, until: float, lower: float, stage: int) -> float:
        calls.append(sub.n_ops)
        return exact(sub, until, lower, stage)

    c = compose(inst, cut_waists(inst), counting, max_ops=2)
    assert cut_waists(inst) == [0, 3, 6]
    assert calls == [4, 4]  # the window of either fork-join (two branches, two ends), once a stage
    # each fork: its first waist and one branch on one device, the other branch (1 s later)
    # and the join on the other: 3 s between the waists, the brute-force optimum
    assert c.value == 1 + 3 + 1 + 3 + 1 == brute_force(inst.induced(np.array([1, 1, 1, 1, 0, 0, 0], bool))) + 3 + 1 and c.solved == 2


@pytest.mark.parametrize("share", [0.3, 0.0])
def test_module_bound_in_placement_milp(share: float) -> None:
    """placement_milp lists the composition among its bounds, and leaves it out when
    ``module_share`` is 0; its plan is the optimum, 6 s."""
    inst = fork_join("independent", 1)
    out = run(inst, _context(module_share=share, waist_share=0.0, module_ops=0))  # (on any number of ops)
    found = [b for b in out.bounds if b.source.startswith("series composition over cut waists")]
    assert len(found) == (1 if share > 0 else 0)
    assert all(6.0 - 1e-5 < b.value <= 6.0 for b in found)
    assert out.claimed_objective == pytest.approx(6.0)


def test_module_windows_run_above_module_ops() -> None:
    """On a few ops the whole MILP proves the optimum faster than the windows' MILPs prove
    their bound: placement_milp runs the windows only above ``module_ops`` ops (30 by
    default), and the optimum is the same either way."""
    inst = fork_join("independent", 1)
    assert inst.n_ops <= 30
    default = distplan.solve(inst, formulation="placement_milp", waist_share=0.0, time_limit=30)
    asked = distplan.solve(inst, formulation="placement_milp", waist_share=0.0, module_ops=inst.n_ops - 1, time_limit=30)
    assert not any(b.source.startswith("series composition over cut waists") for b in default.bounds)
    assert any(b.source.startswith("series composition over cut waists") for b in asked.bounds)
    assert default.objective == asked.objective == pytest.approx(6.0) and default.status.value == asked.status.value == "optimal"


def test_module_share_is_a_registered_parameter() -> None:
    """`distplan.solve` accepts ``module_share`` (it rejects parameters a formulation does
    not register) and the run's bounds follow it."""
    inst = fork_join("independent", 1)
    for share, listed in ((0.3, 1), (0.0, 0)):
        res = distplan.solve(inst, formulation="placement_milp", module_share=share, waist_share=0.0, module_ops=0, time_limit=30)
        assert sum(b.source.startswith("series composition over cut waists") for b in res.bounds) == listed


@on_solved_tiny_instances(4)
def test_window_bound_on_devices_that_differ(solved: tuple[PlacementInstance, float]) -> None:
    """Device 1 twice as slow and 1 s more: the window MILP runs on `interchangeable` (stage 0, every op
    at its fastest time) and then on the instance as it is (stage 1); both bounds stay at
    or below the brute-force optimum of every window."""
    inst, _ = solved
    slow = copy.copy(inst)
    slow.time = inst.time * np.array([1.0, 2.0]) + np.array([0.0, 1.0])
    slow.document = None
    assume(np.isfinite(brute_force(slow)))
    assert not identical_devices(slow) and identical_devices(interchangeable(slow))
    ctx = _context()
    for chain in _chains(slow):
        if len(chain) == 2:
            a, b = chain
            module = np.zeros(slow.n_ops, dtype=bool)
            module[[v for v in range(slow.n_ops) if v not in chain]] = True
            sub = window_instance(slow, module, a, b)
            window_opt = brute_force(sub)
            for stage in (0, 1):
                value = window_bound(sub, ctx, time.perf_counter() + 5, 0.0, stage)
                assert value is None or value <= window_opt, f"stage {stage}: {value} > {window_opt}"


def _glued(inst: PlacementInstance, fallback: np.ndarray) -> tuple[Schedule | None, dict[bytes, list[np.ndarray]]]:
    """The glued start of placement_milp: the module windows solved by the MILP, their
    assignments glued over the cut waists (``fallback`` elsewhere) and evaluated."""
    ctx = _context()
    windows: dict[bytes, list[np.ndarray]] = {}
    waists: list[int] = []
    module_bound(inst, lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage, found=windows), deadline=time.perf_counter() + 2, waists=waists)
    assert waists == cut_waists(inst)
    return glued_start(inst, waists, windows, fallback), windows


@pytest.mark.parametrize(("latency", "optimum"), [(1, 6.0), (2, 8.0)])
def test_glued_start_of_fork_join_is_the_optimum(latency: int, optimum: float) -> None:
    """One module between the waists: its window's MILP incumbent, with the waists' real
    times, is the optimum, from a fallback of every op on one device (8 s at latency 1)."""
    inst = fork_join("independent", latency)
    s, windows = _glued(inst, np.zeros(inst.n_ops, dtype=np.int64))
    assert windows and s is not None
    assert evaluate(inst, make_plan(inst, s.device, s.start)).objective == pytest.approx(s.makespan)
    assert s.makespan == pytest.approx(optimum) and brute_force(inst) == optimum


def test_glued_start_renames_devices_at_the_waists() -> None:
    """Two identical fork-joins in series (one window, solved once): the second copy's
    devices are swapped so that the middle waist stays where the first module ends it;
    without the swap its branches pay a transfer more (11 s). The glued plan is the
    optimum, 1 + 3 + 1 + 3 + 1 = 9 s: the composition with brute-force windows proves 9 s
    a lower bound (`test_repeated_windows_are_solved_once`)."""
    edges = [(0, 1, 0), (0, 2, 0), (1, 3, 0), (2, 3, 0), (3, 4, 0), (3, 5, 0), (4, 6, 0), (5, 6, 0)]
    inst = tiny(7, edges, [1, 2, 2, 1, 2, 2, 1], [0] * 7, 1, 1, "independent", False)
    s, windows = _glued(inst, np.zeros(inst.n_ops, dtype=np.int64))
    assert len(windows) >= 1 and s is not None
    assert s.makespan == pytest.approx(9.0) == compose(inst, cut_waists(inst), exact, max_ops=2).value
    assert evaluate(inst, make_plan(inst, s.device, s.start)).feasible


@on_solved_tiny_instances(5)
def test_glued_start_is_a_valid_plan(solved: tuple[PlacementInstance, float]) -> None:
    """On random tiny instances (both models): the glued assignment gives every op a
    device, keeps co-location groups together, and its plan, when it fits, is one the
    evaluator accepts, never below the brute-force optimum."""
    inst, opt = solved
    windows: dict[bytes, list[np.ndarray]] = {}
    waists: list[int] = []
    ctx = _context()
    module_bound(inst, lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage, found=windows), deadline=time.perf_counter() + 2, waists=waists)
    fallback = np.zeros(inst.n_ops, dtype=np.int64)
    dev = glued_assignment(inst, waists, windows, fallback)
    assert dev.shape == (inst.n_ops,) and dev.min(initial=0) >= 0 and dev.max(initial=0) < inst.n_devices
    groups = inst.colocation_groups()
    for g in np.unique(groups):
        assert np.unique(dev[groups == g]).size == 1
    s = glued_start(inst, waists, windows, fallback)
    if s is not None:
        check = evaluate(inst, make_plan(inst, s.device, s.start))
        assert check.feasible and check.objective == pytest.approx(s.makespan) and s.makespan >= opt - 1e-9
