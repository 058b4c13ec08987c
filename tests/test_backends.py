"""Exchangeable backends: the same models on every registered backend that can take them.

Known optima (LPs with ranged rows, free variables, a maximization and an objective offset;
MILPs incl. a knapsack and an assignment problem whose optima are found by enumeration),
infeasible and unbounded models, bounds on finished and truncated runs, time limits,
warm starts, options, status-map coverage, process isolation and MPS/LP export.
Parametrizations are derived from the backend registry and the declared capabilities.
"""

from __future__ import annotations

import importlib
import itertools
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

import highspy
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import backend_names, backend_params, skip_unless_available, takes_lp, takes_milp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distplan.modeling.export import write_model
from distplan.modeling.model import ConstraintSpec, LinExpr, Model, ModelArrays
from distplan.solvers import base
from distplan.solvers.base import Backend, BackendError, Capabilities, SolveOptions, all_backends, get_backend, register_backend
from distplan.solvers.common import MILP_FEASIBILITY_TOLERANCE
from distplan.solvers.isolation import run_isolated
from distplan.solvers.result import LIMIT_TERMINATIONS, SolutionStatus, SolverResult, Termination

# -- parametrization from the registry ---------------------------------------------------




def milp_with_bound(b: Backend) -> bool:
    return b.capabilities.milp and b.capabilities.reports_bound


LP_BACKENDS = backend_params(takes_lp)
MILP_BACKENDS = backend_params(takes_milp)
BOUND_BACKENDS = backend_params(milp_with_bound)
WARM_BACKENDS = backend_params(lambda b: b.capabilities.milp and b.capabilities.warm_start)
ALL_BACKENDS = backend_params()


def tolerance(name: str) -> float:
    """Relative agreement demanded: 1e-6, or 1e-4 for first-order (low-accuracy) solvers."""
    if name.startswith("cvxpy-"):
        spec_of = getattr(importlib.import_module("distplan.solvers.cvxpy_backend"), "solver_spec", None)
        spec = spec_of(name) if spec_of is not None else None
        if spec is not None and getattr(spec, "accuracy", "high") == "low":
            return 1e-4
    return 1e-6


def close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(1.0, abs(a), abs(b))


# -- fixtures with known optima ----------------------------------------------------------


@dataclass
class Case:
    """A model and its known optimum (None for infeasible / unbounded cases)."""

    name: str
    build: Callable[[], Model]
    optimum: float | None
    expect: frozenset[Termination]


OPTIMAL = frozenset({Termination.OPTIMAL})


def lp_ranged_free() -> Model:
    """Free variables, a ranged row, an equality, a free row and an offset: 4.75 at (0.75, 0.25)."""
    m = Model("lp-ranged-free")
    x = m.add_vars("x", 2, lb=-np.inf, ub=np.inf)
    m.add_constraints("range", ranged(x[0] + x[1], 1.0, 3.0))
    m.add_constraints("diff", x[0] - x[1] == 0.5)
    m.add_constraints("loose", x[0] - 2 * x[1] <= 3)
    m.add_constraints("free", x[0] + 5 * x[1] <= np.inf)
    m.minimize(2 * x[0] + x[1] + 3)
    return m


def ranged(expr: LinExpr, lo: float, hi: float) -> ConstraintSpec:
    """lo <= expr <= hi as one ranged row block."""
    spec = expr >= lo
    return ConstraintSpec(spec.A, spec.lo, spec.lo + (hi - lo))


def lp_max_offset() -> Model:
    """max 3x + 2y + 10 s.t. x + y <= 4, x + 3y <= 6, x <= 3: 21 at (3, 1)."""
    m = Model("lp-max-offset")
    v = m.add_vars("v", 2)
    m.add_constraints("a", v[0] + v[1] <= 4)
    m.add_constraints("b", v[0] + 3 * v[1] <= 6)
    m.add_constraints("c", v[0] <= 3)
    m.maximize(3 * v[0] + 2 * v[1] + 10)
    return m


def lp_diet() -> Model:
    """min 2a + 3b s.t. a + 2b >= 8, 3a + b >= 9: 13 at (2, 3)."""
    m = Model("lp-diet")
    a = m.add_vars("a", 2)
    m.add_constraints("protein", a[0] + 2 * a[1] >= 8)
    m.add_constraints("energy", 3 * a[0] + a[1] >= 9)
    m.minimize(2 * a[0] + 3 * a[1])
    return m


def lp_transport() -> Model:
    """Balanced transportation (supplies 20, 30; demands 10, 25, 15): 465, supplier 0 sending
    all 20 units where it saves most over supplier 1 (demand 1, 6 per unit)."""
    m = Model("lp-transport")
    cost = np.array([[8.0, 6.0, 10.0], [9.0, 12.0, 13.0]])
    x = m.add_vars("ship", (2, 3))
    m.add_constraints("supply", x.sum(axis=1) == np.array([20.0, 30.0]))
    m.add_constraints("demand", x.sum(axis=0) == np.array([10.0, 25.0, 15.0]))
    m.minimize((cost * x).sum())
    return m


KNAP_W = np.array([12, 7, 11, 8, 9, 6, 14, 5, 10, 13], dtype=float)
KNAP_V = np.array([24, 13, 23, 15, 16, 11, 29, 9, 20, 25], dtype=float)
KNAP_CAP = 40.0


def knapsack() -> Model:
    m = Model("knapsack")
    x = m.add_vars("take", KNAP_W.size, vtype="binary")
    m.add_constraints("capacity", (KNAP_W * x).sum() <= KNAP_CAP)
    m.maximize((KNAP_V * x).sum() + 1.5)
    return m


def knapsack_optimum() -> tuple[float, np.ndarray]:
    best, arg = -1.0, np.zeros(KNAP_W.size)
    for bits in itertools.product((0, 1), repeat=KNAP_W.size):
        x = np.array(bits, dtype=float)
        if x @ KNAP_W <= KNAP_CAP and x @ KNAP_V > best:
            best, arg = float(x @ KNAP_V), x
    return best + 1.5, arg


ASSIGN_COST = np.array([[9, 2, 7, 8, 6], [6, 4, 3, 7, 5], [5, 8, 1, 8, 4], [7, 6, 9, 4, 3], [4, 9, 6, 2, 8]], dtype=float)


def assignment() -> Model:
    m = Model("assignment")
    x = m.add_vars("assign", ASSIGN_COST.shape, vtype="binary")
    m.add_constraints("each-worker", x.sum(axis=1) == 1)
    m.add_constraints("each-task", x.sum(axis=0) == 1)
    m.minimize((ASSIGN_COST * x).sum())
    return m


def assignment_optimum() -> float:
    n = ASSIGN_COST.shape[0]
    return float(min(sum(ASSIGN_COST[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n))))


def milp_general_int() -> Model:
    """General integers with negative bounds, a continuous variable, max and offset:
    max x + y + z + 0.5 s.t. 2x + 2y + z <= 7, x, y in [-3, 5] integer, z in [0, 0.4]: 3.9."""
    m = Model("milp-general-int")
    x = m.add_vars("x", 2, lb=-3, ub=5, vtype="integer")
    z = m.add_vars("z", 1, ub=0.4)
    m.add_constraints("c", 2 * x[0] + 2 * x[1] + z[0] <= 7)
    m.maximize(x[0] + x[1] + z[0] + 0.5)
    return m


def milp_facility() -> Model:
    """Two facilities (fixed cost 10, 12; capacity 6 each) serve demands 3 + 4 at unit cost
    1 from the first and 2 from the second: both must open, the first ships 6 and the second
    1, so 10 + 12 + 6 + 2 = 30 (also found by enumerating open/closed patterns)."""
    m = Model("milp-facility")
    y = m.add_vars("open", 2, vtype="binary")
    q = m.add_vars("ship", (2, 2))
    m.add_constraints("demand", q.sum(axis=0) == np.array([3.0, 4.0]))
    m.add_constraints("capacity", q.sum(axis=1) - 6 * y <= 0)
    m.minimize(10 * y[0] + 12 * y[1] + (np.array([[1.0, 1.0], [2.0, 2.0]]) * q).sum())
    return m


def facility_optimum() -> float:
    best = math.inf
    for open_ in itertools.product((0, 1), repeat=2):
        cap = 6 * np.array(open_, dtype=float)
        if cap.sum() < 7:
            continue
        # ship greedily from the cheaper open facility (costs do not depend on the customer)
        from_first = min(cap[0], 7.0)
        cost = 10 * open_[0] + 12 * open_[1] + from_first * 1 + (7 - from_first) * 2
        best = min(best, cost)
    return best


def lp_infeasible() -> Model:
    m = Model("lp-infeasible")
    x = m.add_vars("x", 2)
    m.add_constraints("at-least", x.sum() >= 5)
    m.add_constraints("at-most", x.sum() <= 4)
    m.minimize(x.sum())
    return m


def milp_infeasible() -> Model:
    """2x = 3 with x integer: the LP relaxation is feasible, the MILP is not."""
    m = Model("milp-infeasible")
    x = m.add_vars("x", 1, ub=10, vtype="integer")
    m.add_constraints("parity", 2 * x[0] == 3)
    m.minimize(x.sum())
    return m


def lp_unbounded() -> Model:
    m = Model("lp-unbounded")
    x = m.add_vars("x", 2)
    m.add_constraints("a", x[0] - x[1] <= 1)
    m.maximize(x[0] + x[1])
    return m


def milp_unbounded() -> Model:
    m = Model("milp-unbounded")
    x = m.add_vars("x", 2, vtype="integer")
    m.add_constraints("a", x[0] - x[1] <= 1)
    m.minimize(-x[0] - x[1])
    return m


INFEASIBLE = frozenset({Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED})
UNBOUNDED = frozenset({Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED})

LP_CASES = [
    Case("lp-ranged-free", lp_ranged_free, 4.75, OPTIMAL),
    Case("lp-max-offset", lp_max_offset, 21.0, OPTIMAL),
    Case("lp-diet", lp_diet, 13.0, OPTIMAL),
    Case("lp-transport", lp_transport, 465.0, OPTIMAL),
    Case("lp-infeasible", lp_infeasible, None, INFEASIBLE),
    Case("lp-unbounded", lp_unbounded, None, UNBOUNDED),
]
MILP_CASES = [
    Case("knapsack", knapsack, knapsack_optimum()[0], OPTIMAL),
    Case("assignment", assignment, assignment_optimum(), OPTIMAL),
    Case("milp-general-int", milp_general_int, 3.9, OPTIMAL),
    Case("milp-facility", milp_facility, facility_optimum(), OPTIMAL),
    Case("milp-infeasible", milp_infeasible, None, INFEASIBLE),
    Case("milp-unbounded", milp_unbounded, None, UNBOUNDED),
]
EXACT = SolveOptions(mip_gap=0.0)  # HiGHS's default relative gap is 1e-4: ask for exact optima


def test_fixture_optima_are_what_the_docstrings_say() -> None:
    """The hand-derived optima, re-derived independently of any backend."""
    best = math.inf  # transportation, by enumerating supplier 0's integral shipments
    for a in range(0, 11):  # supplier 0 -> demand 0
        for b in range(0, 21 - a):  # supplier 0 -> demand 1
            c = 20 - a - b  # supplier 0 -> demand 2
            if c < 0 or c > 15 or b > 25:
                continue
            rest = (10 - a, 25 - b, 15 - c)
            cost = 8 * a + 6 * b + 10 * c + 9 * rest[0] + 12 * rest[1] + 13 * rest[2]
            best = min(best, cost)
    assert best == 465.0
    assert assignment_optimum() == 14.0
    assert knapsack_optimum()[0] == 82.5
    assert facility_optimum() == 30.0


def check_case(name: str, case: Case, options: SolveOptions = EXACT) -> SolverResult:
    arrays = case.build().to_arrays()
    res = get_backend(name).solve(arrays, options)
    assert res.termination in case.expect, (name, case.name, res.termination, res.raw_status, res.message)
    if case.optimum is None:
        assert res.status is not SolutionStatus.OPTIMAL
        if res.termination is Termination.INFEASIBLE:
            assert res.values is None
        return res
    assert res.status is SolutionStatus.OPTIMAL
    assert res.objective is not None and close(res.objective, case.optimum, tolerance(name)), (res.objective, case.optimum)
    assert res.values is not None and res.values.shape == (arrays.num_vars,)
    assert close(float(arrays.c @ res.values + arrays.offset), case.optimum, tolerance(name))
    assert res.backend == name and res.backend_version
    return res


def check_bound(name: str, case: Case, res: SolverResult, declared: bool, what: str) -> None:
    """A backend that ``declared`` it reports bounds gave one on the solved ``case``, on the
    right side of its objective and of the known optimum."""
    if case.optimum is None or not declared:
        return
    arrays = case.build().to_arrays()
    assert res.bound is not None, f"{name} declares {what} bounds but gave none on a solved {what}"
    slack = 1e-6 * max(1.0, abs(case.optimum))
    if arrays.sense == "min":
        assert res.bound <= res.objective + slack and res.bound <= case.optimum + slack
    else:
        assert res.bound >= res.objective - slack and res.bound >= case.optimum - slack


@pytest.mark.parametrize("case", LP_CASES, ids=[c.name for c in LP_CASES])
@pytest.mark.parametrize("name", LP_BACKENDS)
def test_lp_known_optima(name: str, case: Case) -> None:
    check_bound(name, case, check_case(name, case), get_backend(name).capabilities.reports_lp_bound, "LP")


@pytest.mark.parametrize("case", MILP_CASES, ids=[c.name for c in MILP_CASES])
@pytest.mark.parametrize("name", MILP_BACKENDS)
def test_milp_known_optima_and_bounds(name: str, case: Case) -> None:
    check_bound(name, case, check_case(name, case), get_backend(name).capabilities.reports_bound, "MILP")


def test_every_backend_that_takes_lps_agrees_on_every_lp() -> None:
    """Differential: all available LP backends give one value per fixture (1e-6 relative)."""
    names = [n for n in backend_names(takes_lp) if get_backend(n).available()]
    assert "highs" in names
    for case in LP_CASES:
        if case.optimum is None:
            continue
        arrays = case.build().to_arrays()
        values = {n: get_backend(n).solve(arrays, EXACT).objective for n in names}
        ref = values["highs"]
        assert ref is not None
        bad = {n: v for n, v in values.items() if v is None or not close(v, ref, tolerance(n))}
        assert not bad, (case.name, ref, bad)


# -- random MILPs (hypothesis) -----------------------------------------------------------


@st.composite
def random_milps(draw: st.DrawFn) -> ModelArrays:
    """Small bounded MILPs, feasible by construction (rows hold at a drawn point)."""
    n_int = draw(st.integers(1, 4))
    n_cont = draw(st.integers(0, 2))
    n_rows = draw(st.integers(1, 4))
    m = Model("random-milp")
    lo_i = np.array(draw(st.lists(st.integers(-3, 0), min_size=n_int, max_size=n_int)), dtype=float)
    hi_i = lo_i + np.array(draw(st.lists(st.integers(0, 5), min_size=n_int, max_size=n_int)), dtype=float)
    xi = m.add_vars("xi", n_int, lb=lo_i, ub=hi_i, vtype="integer")
    xc = m.add_vars("xc", n_cont, lb=-2.0, ub=3.0)
    point = np.concatenate(
        [
            np.array([draw(st.integers(int(a), int(b))) for a, b in zip(lo_i, hi_i)], dtype=float),
            np.array(draw(st.lists(st.integers(-4, 6), min_size=n_cont, max_size=n_cont)), dtype=float) / 2.0,
        ]
    )
    n = n_int + n_cont
    A = np.array(draw(st.lists(st.integers(-3, 3), min_size=n_rows * n, max_size=n_rows * n)), dtype=float).reshape(n_rows, n)
    kinds = draw(st.lists(st.sampled_from(["<=", ">=", "=="]), min_size=n_rows, max_size=n_rows))
    slack = np.array(draw(st.lists(st.integers(0, 3), min_size=n_rows, max_size=n_rows)), dtype=float)
    expr_rows = [(A[r, :n_int] * xi).sum() + ((A[r, n_int:] * xc).sum() if n_cont else 0.0) for r in range(n_rows)]
    for r, (kind, e) in enumerate(zip(kinds, expr_rows)):
        at = float(A[r] @ point)
        if kind == "<=":
            m.add_constraints(f"r{r}", e <= at + slack[r])
        elif kind == ">=":
            m.add_constraints(f"r{r}", e >= at - slack[r])
        else:
            m.add_constraints(f"r{r}", e == at)
    c = np.array(draw(st.lists(st.integers(-5, 5), min_size=n, max_size=n)), dtype=float)
    obj = (c[:n_int] * xi).sum() + ((c[n_int:] * xc).sum() if n_cont else 0.0) + float(draw(st.integers(-3, 3)))
    if draw(st.booleans()):
        m.maximize(obj)
    else:
        m.minimize(obj)
    return m.to_arrays()


MILP_NAMES_AVAILABLE = [n for n in backend_names(takes_milp) if get_backend(n).available()]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrays=random_milps())
def test_random_milps_every_milp_backend_finds_the_same_optimum(arrays: ModelArrays) -> None:
    results = {n: get_backend(n).solve(arrays, EXACT) for n in MILP_NAMES_AVAILABLE}
    ref = results["highs"]
    assert ref.termination is Termination.OPTIMAL and ref.objective is not None
    # a solver's point is feasible within its feasibility tolerance, so its objective may
    # differ from the true optimum by up to that tolerance times ||c||_1 (SCIP: -1.9e-6 for 0)
    feasibility = MILP_FEASIBILITY_TOLERANCE * float(np.abs(arrays.c).sum())
    for n, r in results.items():
        assert r.termination is Termination.OPTIMAL, (n, r.termination, r.raw_status, r.message)
        assert r.objective is not None, n
        assert abs(r.objective - ref.objective) <= 1e-6 * max(1.0, abs(ref.objective)) + feasibility, (n, r.objective, ref.objective)
        if r.bound is not None:  # reported bounds carry their margin: no slack here
            if arrays.sense == "min":
                assert r.bound <= ref.objective + feasibility and r.bound <= r.objective, (n, r.bound, r.objective)
            else:
                assert r.bound >= ref.objective - feasibility and r.bound >= r.objective, (n, r.bound, r.objective)


# -- limits, truncated runs and isolation -------------------------------------------------

PLANTED_OPTIMUM = 100.0


def planted_market_split(m: int = 4, n: int = 40, seed: int = 11) -> ModelArrays:
    """A market-split MILP (Cornuejols & Dawande 1999; hard for branch and bound) with a
    planted exact split, written as max 100 - sum of deviations: the optimum is 100, while
    the LP bound is 100 from the start and finding the split takes long."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 100, size=(m, n)).astype(float)
    planted = rng.integers(0, 2, size=n).astype(float)
    d = a @ planted
    mod = Model("market-split")
    x = mod.add_vars("x", n, vtype="binary")
    over = mod.add_vars("over", m)
    under = mod.add_vars("under", m)
    mod.add_constraints("split", (x.expr()[None, :] * a).sum(axis=1) + over - under == d)
    mod.maximize(PLANTED_OPTIMUM - over.sum() - under.sum())
    return mod.to_arrays()


@pytest.mark.parametrize("name", MILP_BACKENDS)
def test_time_limit_is_honoured_and_truncated_bounds_are_valid(name: str) -> None:
    """A hard MILP with time_limit=1 s returns within time_limit + grace (+1 s start-up);
    it is a limit termination (or killed), never "optimal" unless proven, and any bound
    and incumbent bracket the known optimum."""
    arrays = planted_market_split()
    backend = get_backend(name)
    if name.startswith("pyomo-"):
        importlib.import_module("pyomo.environ")  # import cost is not the solver's time
    options = SolveOptions(time_limit=1.0, grace=3.0)
    t0 = time.perf_counter()
    res = backend.solve(arrays, options)
    elapsed = time.perf_counter() - t0
    assert elapsed <= 1.0 + 3.0 + 1.0, elapsed
    if res.termination is Termination.OPTIMAL:  # found the planted split: must be proven
        assert res.objective is not None and close(res.objective, PLANTED_OPTIMUM, 1e-6)
    else:
        assert res.termination in LIMIT_TERMINATIONS, (res.termination, res.raw_status, res.message)
        assert res.status is not SolutionStatus.OPTIMAL
    if res.objective is not None:
        assert res.objective <= PLANTED_OPTIMUM + 1e-6
    if res.bound is not None:
        assert res.bound >= PLANTED_OPTIMUM - 1e-6, (name, res.bound)
    if backend.runs_isolated(arrays, options):
        assert res.extra.get("isolated") is True


#: raw options that stop a backend's branch and bound after a few nodes
NODE_LIMIT_OPTIONS: dict[str, dict[str, object]] = {
    "highs": {"mip_max_nodes": 3},
    "pulp-highs": {"mip_max_nodes": 3},
    "pyomo-highs": {"mip_max_nodes": 3},
    "pulp-cbc": {"maxNodes": 3},
    "pyomo-cbc": {"maxNodes": 3},
    "scip": {"limits/nodes": 3},
}


@pytest.mark.parametrize("name", [p for p in BOUND_BACKENDS if p.id in NODE_LIMIT_OPTIONS])  # type: ignore[attr-defined]
def test_node_limited_minimization_brackets_the_known_optimum(name: str) -> None:
    """min 7 + deviations of the planted market split (optimum 7) stopped after 3 nodes:
    bound <= 7 <= objective, and a stopped search is not called optimal."""
    arrays = planted_market_split(seed=5)
    arrays.sense = "min"
    arrays.c = -arrays.c
    arrays.offset = 7.0
    res = get_backend(name).solve(arrays, SolveOptions(time_limit=20.0, raw=NODE_LIMIT_OPTIONS[name]))
    if res.termination is not Termination.OPTIMAL:
        assert res.termination in LIMIT_TERMINATIONS, (res.termination, res.raw_status)
        assert res.status is not SolutionStatus.OPTIMAL
    assert res.bound is not None, f"{name} reported no bound after a node limit"
    assert res.bound <= 7.0 + 1e-6
    if res.objective is not None:
        assert res.objective >= 7.0 - 1e-6


#: raw options that stop a backend's search after one node with its heuristics off
FIRST_NODE_OPTIONS: dict[str, dict[str, object]] = {
    "highs": {"mip_max_nodes": 1, "mip_heuristic_effort": 0.0},
    "pulp-highs": {"mip_max_nodes": 1, "mip_heuristic_effort": 0.0},
    "pyomo-highs": {"mip_max_nodes": 1, "mip_heuristic_effort": 0.0},
    "cvxpy-HIGHS": {"highs_options": {"mip_max_nodes": 1, "mip_heuristic_effort": 0.0}},
    "pulp-cbc": {"maxNodes": 1},
    "pyomo-cbc": {"maxNodes": 1},
    "scip": {"limits/nodes": 1},
}


@pytest.mark.parametrize("name", [p for p in MILP_BACKENDS if p.id in FIRST_NODE_OPTIONS])  # type: ignore[attr-defined]
def test_a_search_stopped_before_a_feasible_point_returns_no_values(name: str) -> None:
    """Pure feasibility of the planted market split (a x = d, x binary), stopped after one
    node: a backend that found no feasible point says so (status none, no values, no
    objective) and one that found some returns a feasible one. cvxpy 1.9 unpacks HiGHS's
    column values at a limit even when HiGHS holds none; they were read as a plan (x = 0,
    "feasible" at objective 0; alpa_ilp stopped at its limit: a plan 7 times over the
    memory budget, a PlanCheckError instead of "no solution")."""
    rng = np.random.default_rng(11)
    a = rng.integers(0, 100, size=(4, 40)).astype(float)
    d = a @ rng.integers(0, 2, size=40).astype(float)
    mod = Model("split-feasibility")
    x = mod.add_vars("x", 40, vtype="binary")
    mod.add_constraints("split", (x.expr()[None, :] * a).sum(axis=1) == d)
    mod.minimize(x.sum())
    arrays = mod.to_arrays()
    res = get_backend(name).solve(arrays, SolveOptions(time_limit=20.0, raw=FIRST_NODE_OPTIONS[name]))
    assert res.status is not SolutionStatus.OPTIMAL or res.termination is Termination.OPTIMAL
    if res.status is SolutionStatus.NONE:
        assert res.objective is None and res.values is None, (res.termination, res.objective)
        assert res.termination in LIMIT_TERMINATIONS, (res.termination, res.raw_status)
        if name == "cvxpy-HIGHS":  # HiGHS's own status, read through cvxpy (its name, in cvxpy 1.9)
            assert res.termination is Termination.NODE_LIMIT, (res.termination, res.raw_status)
    else:
        assert res.values is not None
        assert np.allclose(a @ res.values, d, atol=1e-6), (res.termination, res.raw_status)


def _sleeping_solve(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    """A 'solver' that starts a long-running binary and waits for it (a CBC stuck in preprocessing)."""
    proc = subprocess.Popen(["sleep", "60"])
    with open(options.raw["pidfile"], "w") as fh:
        fh.write(f"{proc.pid}\n{tempfile.gettempdir()}")
    proc.wait()
    raise AssertionError("the sleeping solver should have been killed")


def _quick_solve(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    return get_backend("highs").solve(arrays, options.with_(raw={}))


def _failing_solve(arrays: ModelArrays, options: SolveOptions, warm_start: np.ndarray | None) -> SolverResult:
    raise RuntimeError("solver crashed")


def _pid_gone(pid: int, wait: float = 3.0) -> bool:
    end = time.perf_counter() + wait
    while time.perf_counter() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        with open(f"/proc/{pid}/stat") as fh:  # a zombie awaiting its reaper counts as gone
            if fh.read().split(")")[-1].split()[0] == "Z":
                return True
        time.sleep(0.05)
    return False


def test_isolation_kills_the_whole_process_group_after_time_limit_plus_grace(tmp_path: object) -> None:
    pidfile = os.path.join(str(tmp_path), "pid")
    options = SolveOptions(time_limit=0.5, grace=0.5, raw={"pidfile": pidfile})
    t0 = time.perf_counter()
    res = run_isolated(_sleeping_solve, lp_diet().to_arrays(), options, None, backend="sleeper")
    elapsed = time.perf_counter() - t0
    assert res.termination is Termination.KILLED and res.status is SolutionStatus.NONE
    assert res.values is None and res.objective is None and res.bound is None
    assert 1.0 <= elapsed < 3.0
    with open(pidfile) as fh:
        pid, scratch = fh.read().split("\n")
    assert _pid_gone(int(pid))  # the solver binary the child started died with it
    assert os.path.basename(scratch).startswith("distplan-isolated-") and not os.path.exists(scratch)


def test_isolation_returns_the_childs_result_and_reports_its_crash() -> None:
    arrays = lp_diet().to_arrays()
    ok = run_isolated(_quick_solve, arrays, SolveOptions(time_limit=10.0), None, backend="highs")
    assert ok.termination is Termination.OPTIMAL and ok.objective == pytest.approx(13.0)
    assert ok.values is not None and ok.extra["isolated"] is True
    bad = run_isolated(_failing_solve, arrays, SolveOptions(time_limit=10.0), None, backend="crasher")
    assert bad.termination is Termination.ERROR and "solver crashed" in bad.message
    assert bad.status is SolutionStatus.NONE


# -- warm start, options, logs -------------------------------------------------------------


@pytest.mark.parametrize("name", WARM_BACKENDS)
def test_warm_start_with_the_optimum_keeps_it(name: str) -> None:
    arrays = knapsack().to_arrays()
    opt, x = knapsack_optimum()
    res = get_backend(name).solve(arrays, EXACT, warm_start=x)
    assert res.termination is Termination.OPTIMAL and res.objective == pytest.approx(opt, rel=1e-9)
    if name == "scip":
        assert res.extra["warm_start_accepted"] is True
    if name.endswith("-cbc"):
        assert "MIPStart values read" in res.log  # CBC confirms it read the start


@pytest.mark.parametrize("name", MILP_BACKENDS)
def test_threads_seed_gap_options_and_captured_log(name: str) -> None:
    """Solves in one process with changing thread counts (HiGHS keeps one global scheduler
    per process: a second count failed with status 'Notset' before it was reset)."""
    arrays = knapsack().to_arrays()
    for threads in (None, 1, 2, 1):
        res = get_backend(name).solve(arrays, SolveOptions(threads=threads, seed=7, mip_gap=0.0))
        assert res.termination is Termination.OPTIMAL, (threads, res.raw_status, res.message)
        assert res.objective == pytest.approx(knapsack_optimum()[0])
        assert res.log.strip(), f"{name} captured no solver log"
        assert res.solve_seconds >= 0 and res.handover_seconds >= 0


def test_highs_threads_are_per_thread() -> None:
    """HiGHS keeps a scheduler per calling thread: another thread's run at threads=2 does not
    make the main thread's 1-thread scheduler fit threads=2 (one number for the process had
    the last run fail with status 'Notset')."""
    import threading

    from distplan.solvers.highs import solve as solve_in_process

    arrays = knapsack().to_arrays()
    assert solve_in_process(arrays, SolveOptions(threads=1), None).termination is Termination.OPTIMAL
    other: list[SolverResult] = []
    thread = threading.Thread(target=lambda: other.append(solve_in_process(arrays, SolveOptions(threads=2), None)))
    thread.start()
    thread.join()
    assert other[0].termination is Termination.OPTIMAL
    res = solve_in_process(arrays, SolveOptions(threads=2), None)
    assert res.termination is Termination.OPTIMAL, res.raw_status


def test_a_forked_child_solves_after_the_parent_ran_highs_threads() -> None:
    """A process forked after HiGHS's scheduler started its workers used to wait forever in
    its first MIP (the workers do not exist in the child), and then, once the child reset
    the scheduler, hung now and then in that reset (a worker had held the mutex the reset
    locks at the fork: 8 of 3,100 forks of a 300-800 MB parent). The forking thread's
    workers are stopped before the fork: none of them exists once the pool has forked (the
    check that fails every time a child-side reset comes back; the child's solve catches it
    rarely), and the child solves."""
    import multiprocessing

    from distplan.solvers.highs import solve as solve_in_process

    arrays = knapsack().to_arrays()
    # threads=1 first: the run at threads=2 makes its scheduler, with one worker thread
    assert solve_in_process(arrays, SolveOptions(threads=1), None).termination is Termination.OPTIMAL
    before = _thread_ids()
    assert solve_in_process(arrays, SolveOptions(threads=2), None).termination is Termination.OPTIMAL
    workers = _thread_ids() - before
    assert workers, "the run at threads=2 started no worker thread"
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(1) as pool:
        # joined before the fork; a joined thread can stay listed a moment longer
        deadline = time.monotonic() + 10.0
        while workers & _thread_ids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not workers & _thread_ids(), "HiGHS's workers outlived the fork"
        async_result = pool.apply_async(_knapsack_objective_in_child)
        assert async_result.get(timeout=30) == pytest.approx(knapsack_optimum()[0])


def _thread_ids() -> set[str]:
    return set(os.listdir("/proc/self/task"))


def _knapsack_objective_in_child() -> float | None:
    from distplan.solvers.highs import solve as solve_in_process

    return solve_in_process(knapsack().to_arrays(), SolveOptions(threads=2), None).objective


@pytest.mark.parametrize("name", backend_params(lambda b: b.capabilities.milp))
def test_verbose_streams_the_log(name: str, capfd: pytest.CaptureFixture[str]) -> None:
    arrays = knapsack().to_arrays()
    get_backend(name).solve(arrays, SolveOptions(verbose=False))
    quiet = capfd.readouterr()
    assert quiet.out == "" and quiet.err == "", quiet
    res = get_backend(name).solve(arrays, SolveOptions(verbose=True))
    loud = capfd.readouterr()
    assert loud.out == "", f"{name} wrote its log to stdout"
    assert len(loud.err) > 20, loud
    assert res.log.strip()


# -- registry guards and status maps ---------------------------------------------------------


def test_parametrized_lists_are_derived_from_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    registered = {b.name for b in all_backends()}
    assert {p.id for p in ALL_BACKENDS} == registered  # type: ignore[attr-defined]
    assert {p.id for p in LP_BACKENDS} == {b.name for b in all_backends() if b.capabilities.lp}  # type: ignore[attr-defined]
    assert {p.id for p in MILP_BACKENDS} == {b.name for b in all_backends() if b.capabilities.milp}  # type: ignore[attr-defined]
    expected = {"highs", "pulp-cbc", "pulp-highs", "pyomo-highs", "pyomo-cbc", "pyomo-glpk", "scip"}
    assert expected <= registered
    # a newly registered backend is picked up by the same derivation
    highs = get_backend("highs")
    newcomer = Backend(
        name="test-newcomer",
        description="HiGHS under another name (registry guard test)",
        capabilities=Capabilities(lp=True, milp=True),
        requires=("highspy",),
        extra=None,
        solve_fn=highs.solve_fn,
        version_fn=highs.version_fn,
        status_map=highs.status_map,
    )
    monkeypatch.setitem(base._REGISTRY, newcomer.name, newcomer)
    assert "test-newcomer" in backend_names(takes_milp)
    assert "test-newcomer" in {p.id for p in backend_params(takes_lp)}  # type: ignore[attr-defined]
    with pytest.raises(ValueError):
        register_backend(newcomer)


#: CBC's final "Result - <status><minor>" phrases (CbcSolver.cpp, statusName[] x minor[])
CBC_MINOR = (
    "Optimal solution found",
    "Linear relaxation infeasible",
    "Optimal solution found (within gap tolerance)",
    "node limit",
    "time limit",
    "user ctrl-c",
    "solution limit",
    "Linear relaxation unbounded",
    "Problem proven infeasible",
)


def _pulp_pairs() -> set[object]:
    import pulp

    return set(itertools.product(pulp.LpStatus.values(), pulp.LpSolution.values()))


def _legacy_pyomo() -> set[object]:
    from pyomo.opt import TerminationCondition

    return {t.name for t in TerminationCondition}


def _contrib_pyomo() -> set[object]:
    from pyomo.contrib.solver.common.results import TerminationCondition

    return {t.name for t in TerminationCondition}


def _scip_statuses() -> set[object]:
    import pyscipopt

    return {name.lower() for name in dir(pyscipopt.SCIP_STATUS) if not name.startswith("_")}


def _cvxpy_statuses() -> set[object]:
    import cvxpy.settings as s

    names = ("OPTIMAL", "OPTIMAL_INACCURATE", "INFEASIBLE", "INFEASIBLE_INACCURATE", "UNBOUNDED",
             "UNBOUNDED_INACCURATE", "USER_LIMIT", "SOLVER_ERROR", "INFEASIBLE_OR_UNBOUNDED")
    return {getattr(s, n) for n in names if hasattr(s, n)}


def _highs_statuses() -> set[object]:
    return set(highspy.HighsModelStatus.__members__.values())


#: each backend's solver status vocabulary: a new backend must add its own entry here
STATUS_ENUMS: dict[str, Callable[[], set[object]]] = {
    "highs": _highs_statuses,
    "pulp-cbc": lambda: _pulp_pairs() | set(CBC_MINOR),
    "pulp-highs": lambda: _pulp_pairs() | _highs_statuses(),
    "pyomo-highs": _contrib_pyomo,
    "pyomo-cbc": _legacy_pyomo,
    "pyomo-glpk": _legacy_pyomo,
    "scip": _scip_statuses,
    "cvxpy-": _cvxpy_statuses,  # prefix: every cvxpy-<SOLVER> backend
}


@pytest.mark.parametrize("name", ALL_BACKENDS)
def test_status_map_covers_the_solvers_status_enum(name: str) -> None:
    key = name if name in STATUS_ENUMS else next((k for k in STATUS_ENUMS if k.endswith("-") and name.startswith(k)), None)
    assert key is not None, f"backend {name!r} has no status vocabulary listed in STATUS_ENUMS"
    missing = STATUS_ENUMS[key]() - set(get_backend(name).status_map)
    assert not missing, f"{name}: unmapped solver statuses {sorted(map(str, missing))}"
    assert all(isinstance(v, Termination) or v is None for v in get_backend(name).status_map.values())


def test_cbc_result_lines_and_rounded_bounds_are_read_conservatively() -> None:
    from distplan.solvers.pulp_backend import parse_cbc_log, parse_cbc_result

    for minor in CBC_MINOR:
        assert parse_cbc_result(minor) is not None
        assert parse_cbc_result("Stopped on " + minor) is not None
    assert parse_cbc_result("Stopped on time limit") is Termination.TIME_LIMIT
    assert parse_cbc_result("Run abandoned") is Termination.ERROR
    log = (
        "Cbc0005I Partial search - best objective 12 (best possible 11.4567), took 10 iterations and 4 nodes\n"
        "\nResult - Stopped on node limit\n\nObjective value:                12.00000000\n"
        "Lower bound:                    11.457\nGap:                            0.05\nEnumerated nodes:               4\n"
    )
    parsed = parse_cbc_log(log)
    assert parsed.termination is Termination.NODE_LIMIT and parsed.has_solution and parsed.nodes == 4
    assert parsed.lower_bound is not None
    assert 11.4566 <= parsed.lower_bound <= 11.4567  # the weaker of the two rounded readings, made safe
    none = parse_cbc_log("Result - Stopped on time limit\nNo feasible solution found\nLower bound:  3.000\n")
    assert none.has_solution is False and none.lower_bound == pytest.approx(2.9995)


# -- export round trip ------------------------------------------------------------------------

EXPORT_CASES = [
    pytest.param(lp_ranged_free, 4.75, "mps", id="lp-ranged-free.mps"),
    pytest.param(lp_max_offset, 21.0, "mps", id="lp-max-offset.mps"),
    pytest.param(knapsack, 82.5, "mps", id="knapsack.mps"),
    pytest.param(milp_general_int, 3.9, "mps", id="general-int.mps"),
    pytest.param(lp_diet, 13.0, "lp", id="lp-diet.lp"),
    pytest.param(lp_ranged_free, 4.75, "lp", id="lp-ranged-free.lp"),
    pytest.param(knapsack, 82.5, "lp", id="knapsack.lp"),
    pytest.param(milp_general_int, 3.9, "lp", id="general-int.lp"),
]


@pytest.mark.parametrize(("build", "optimum", "ext"), EXPORT_CASES)
def test_export_round_trips_through_highs(build: Callable[[], Model], optimum: float, ext: str, tmp_path: object) -> None:
    model = build()
    path = os.path.join(str(tmp_path), f"model.{ext}")
    write_model(model.to_arrays(), path)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    status = h.readModel(path)
    assert status == highspy.HighsStatus.kOk
    assert h.getNumCol() == model.num_vars
    h.setOptionValue("mip_rel_gap", 0.0)
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    value = h.getInfo().objective_function_value
    assert value == pytest.approx(optimum, rel=1e-9)


def test_an_optimal_claim_with_an_open_gap_is_only_feasible() -> None:
    """HiGHS 1.16 answered "Optimal" with its bound 15% below its incumbent after mapping a
    MIP start wrongly into presolved space: such a claim must not stand."""
    arrays = knapsack().to_arrays()

    def claims_optimal(a: ModelArrays, options: SolveOptions, warm: np.ndarray | None) -> SolverResult:
        return SolverResult(backend="liar", backend_version="0", termination=Termination.OPTIMAL, status=SolutionStatus.OPTIMAL,
                            objective=100.0, bound=85.0 if a.sense == "min" else 115.0)

    highs = get_backend("highs")
    liar = Backend(name="liar", description="claims optimal", capabilities=Capabilities(lp=True, milp=True), requires=(),
                   extra=None, solve_fn=claims_optimal, version_fn=lambda: "0", status_map=highs.status_map)
    res = liar.solve(arrays, SolveOptions(mip_gap=1e-4))
    assert res.termination is Termination.OPTIMAL and res.status is SolutionStatus.FEASIBLE
    assert "said optimal" in res.message
    honest = get_backend("highs").solve(arrays, SolveOptions(mip_gap=1e-4))
    assert honest.status is SolutionStatus.OPTIMAL


def test_a_backend_missing_its_solver_program_says_which() -> None:
    """pyomo-glpk said "install pyomo" with pyomo installed and glpsol missing; a backend
    whose modules are there names what it lacks."""
    import dataclasses

    glpk = get_backend("pyomo-glpk")
    assert "glpsol" in glpk.program
    lacking = dataclasses.replace(glpk, name="lacking", requires=("json",), availability_fn=lambda: False, program="the foo solver")
    with pytest.raises(BackendError, match=r"'lacking' is not available here: json is installed, the foo solver is not"):
        lacking.check_can_take(None)
    without = dataclasses.replace(lacking, requires=("no_such_module_here",))
    with pytest.raises(BackendError, match=r"not available here: install no_such_module_here"):
        without.check_can_take(None)
    assert all(b.program for b in all_backends() if b.availability_fn is not None)


def _presolve_trap() -> ModelArrays:
    """Found by the random-MILP test above: x0 in [-1, 0], x1 in [0, 2], x2 = x3 = 0 integer,
    x4 in [-2, 3]; 2 x1 + x4 >= 4, x1 + x4 <= 3, -3 x0 + x1 - x4 = 2, and an empty row.
    Feasible: (0, 2, 0, 0, 0) and (-1, 1, 0, 0, 2); max x4 = 2. SciPy 1.17.1's HiGHS presolve
    calls it infeasible (so does scipy.optimize.milp on the three live variables)."""
    A = np.array([[0, 2, 0, 0, 1], [0, -1, 0, 0, -1], [-3, 1, 0, 0, -1], [0, 0, 0, 0, 0]], dtype=float)
    return ModelArrays(
        name="presolve-trap",
        c=np.array([0.0, 0.0, 0.0, 0.0, 1.0]),
        offset=0.0,
        A=sp.csr_matrix(A),
        row_lo=np.array([4.0, -3.0, 2.0, -np.inf]),
        row_hi=np.array([np.inf, np.inf, 2.0, 0.0]),
        col_lo=np.array([-1.0, 0.0, 0.0, 0.0, -2.0]),
        col_hi=np.array([0.0, 2.0, 0.0, 0.0, 3.0]),
        integrality=np.array([1, 1, 1, 1, 0], dtype=np.int8),
        sense="max",
        var_blocks=[("xi", 4, False), ("xc", 1, False)],
        con_blocks=[("r0", 1), ("r1", 1), ("r2", 1), ("r3", 1)],
    )


def _preprocessing_trap() -> ModelArrays:
    """Found by the random-MILP test above: max x1 + x3 with x0 in [0, 0] and x1 in [0, 2]
    integer, x2, x3 in [-2, 3]; 3 x1 - x2 - x3 >= -0.5, x2 + x3 >= 0.5, and an empty row.
    Feasible: (0, 2, 0, 3) with value 5, the optimum. CBC 2.10.3's preprocessing calls it
    "Integer infeasible"; without preprocessing CBC finds 5."""
    A = np.array([[0, 3, -1, -1], [0, 0, 1, 1], [0, 0, 0, 0]], dtype=float)
    return ModelArrays(
        name="preprocessing-trap",
        c=np.array([0.0, 1.0, 0.0, 1.0]),
        offset=0.0,
        A=sp.csr_matrix(A),
        row_lo=np.array([-0.5, 0.5, -np.inf]),
        row_hi=np.array([np.inf, np.inf, 0.0]),
        col_lo=np.array([0.0, 0.0, -2.0, -2.0]),
        col_hi=np.array([0.0, 2.0, 3.0, 3.0]),
        integrality=np.array([1, 1, 0, 0], dtype=np.int8),
        sense="max",
        var_blocks=[("xi", 2, False), ("xc", 2, False)],
        con_blocks=[("r0", 1), ("r1", 1), ("r2", 1)],
    )


@pytest.mark.parametrize("trap, optimum", [(_presolve_trap, 2.0), (_preprocessing_trap, 5.0)], ids=["presolve", "cbc-preprocessing"])
@pytest.mark.parametrize("name", backend_params(takes_milp))
def test_a_feasible_milp_that_a_presolve_calls_infeasible(name: str, trap: Callable[[], ModelArrays], optimum: float) -> None:
    """cvxpy-SCIPY's infeasible MILPs are checked again without presolve, and the CBC
    backends' without preprocessing, the second verdict standing; every MILP backend finds
    the optimum of both traps."""
    res = get_backend(name).solve(trap(), EXACT)
    assert res.termination is Termination.OPTIMAL, (name, res.termination, res.raw_status)
    assert res.objective == pytest.approx(optimum, abs=1e-6)


#: the backends that run CBC (its preprocessing recheck), skipped where not installed
CBC_BACKENDS = [pytest.param(name, id=name, marks=skip_unless_available(name)) for name in ("pulp-cbc", "pyomo-cbc")]


@pytest.mark.parametrize("name", CBC_BACKENDS)
def test_a_cbc_infeasible_verdict_is_kept_when_the_user_set_preprocessing(name: str) -> None:
    """The recheck is skipped when ``raw`` sets preprocessing (any abbreviation CBC takes):
    then the user's setting decides, and the log holds one run."""
    backend = get_backend(name)
    default = backend.solve(_preprocessing_trap(), EXACT)
    assert "with preprocessing" in default.extra.get("preprocess_recheck", ""), default.extra
    chosen = backend.solve(_preprocessing_trap(), EXACT.with_(raw={"preproc": "on"}))
    assert "preprocess_recheck" not in chosen.extra, chosen.extra


@pytest.mark.parametrize("name", CBC_BACKENDS)
def test_which_cbc_infeasible_verdicts_are_checked_again(name: str) -> None:
    """One given on the continuous relaxation (x integer, 2 <= x <= 1 as rows) is not
    solved again: preprocessing never ran. 2 x = 3 (x integer) has a feasible relaxation
    and is; CBC 2.10.3 crashes without preprocessing there, so the verdict stands,
    marked unconfirmed."""
    backend = get_backend(name)
    lp_infeasible = Model("lp-infeasible")
    x = lp_infeasible.add_vars("x", 1, ub=10, vtype="integer")
    lp_infeasible.add_constraints("low", x[0] >= 2)
    lp_infeasible.add_constraints("high", x[0] <= 1)
    lp_infeasible.minimize(x.sum())
    res = backend.solve(lp_infeasible.to_arrays(), EXACT)
    assert res.termination is Termination.INFEASIBLE and "preprocess_recheck" not in res.extra, (res.termination, res.extra)
    res = backend.solve(milp_infeasible().to_arrays(), EXACT)
    assert res.termination is Termination.INFEASIBLE, (res.termination, res.message)
    assert res.extra.get("preprocess_recheck", "").startswith("infeasible with preprocessing, unconfirmed"), res.extra
