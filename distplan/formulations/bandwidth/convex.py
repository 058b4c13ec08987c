"""LIBRA's time objective as a convex (second-order cone) program, and the perf-per-cost sweep.

LIBRA (Won et al., ISPASS 2024, arXiv 2109.11762) writes ``B_d * beta_d = 1`` and solves
a nonconvex QCP with Gurobi. Minimizing time is convex: with s_d >= 1/B_d (``inv_pos``,
a rotated second-order cone) and one epigraph variable per aggregated traffic term,

    minimize  sum_k w_k t_k
    s.t.      t_k >= u_kd s_d        for every (k, d) with u_kd > 0
              s_d >= 1 / B_d         for every dimension with traffic
              instance rows on B,  lb <= B <= ub

The training time is C + the optimum (C = compute seconds). Perf-per-cost (time x cost)
is not convex; `libra_perf_per_cost` minimizes ``c * T*(c)`` over the cost budget c,
where T*(c) = min time s.t. cost(B) <= c is convex and nonincreasing, by an interval
branch-and-bound whose bounds come from the convexity of T* (tangents from the budget's
dual multiplier) and its monotonicity, so the answer is the certified global optimum.
The budget is a cvxpy Parameter: the problem is compiled once (DPP) for the whole sweep.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InputError, NoSolutionError
from distplan.formulations.bandwidth.blocks import lowest_unused, max_bandwidths, optimize_linear
from distplan.formulations.bandwidth.conic import DirectSolver
from distplan.formulations.bandwidth.data import Program, bandwidth_scale, prepare, syntactically_bounded, unbounded_error
from distplan.formulations.bandwidth.diagnose import raise_if_infeasible
from distplan.formulations.bandwidth.safe import budget_line, line_from_multipliers, safe_min_linear, safe_time_bound
from distplan.formulations.registry import Bound, Outcome, RunContext
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_records import GB
from distplan.solvers.result import SolverResult, Termination


def _row_groups(prog: Program) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(A, lo, hi) of the instance rows and the indices of its ==, <= and >= rows."""
    A, lo, hi = prog.rows_matrix()
    eq = np.flatnonzero(lo == hi)
    le = np.flatnonzero(np.isfinite(hi) & (lo != hi))
    ge = np.flatnonzero(np.isfinite(lo) & (lo != hi))
    return A, lo, hi, eq, le, ge


def _padded(k: int) -> int:
    """Number of term slots compiled for k terms (powers of two, so shapes are shared)."""
    return 1 << max(0, (k - 1).bit_length())


@dataclass
class TimeProblem:
    """A parametrized cvxpy problem: min scaled communication seconds over B (GB/s).

    Every number of the instance (traffic, weights, rows, bounds, budget) is a cvxpy
    Parameter, so instances of the same shape (dimensions, dimensions with traffic,
    number of ==/<=/>= rows, padded number of terms) share one compiled (DPP) program:
    `load` sets the values, and cvxpy skips canonicalization on every solve after the
    first. Unused term slots get zero traffic and weight.
    """

    problem: Any
    bandwidth: Any
    params: dict[str, Any]
    used: np.ndarray
    finite_ub: np.ndarray
    slots: int
    budget_constraint: Any | None = None
    #: seconds per objective unit, USD per normalized cost unit, GB/s per variable unit
    time_scale: float = 1.0
    cost_scale: float = 1.0
    bandwidth_scale: float = 1.0

    def load(self, prog: Program, *, time_scale: float, cost_scale: float | None = None) -> None:
        """Set the parameters to ``prog``'s numbers.

        The variable is x = B / bandwidth_scale(prog) and the objective is in units of
        ``time_scale`` seconds, so every quantity the solver sees is O(1) (interior-point
        tolerances are absolute: unscaled, a 1 ms objective would be known to 1e-5 only).
        """
        p = self.params
        sigma = bandwidth_scale(prog)
        A, lo, hi, eq, le, ge = _row_groups(prog)
        p["lb"].value = prog.lb / sigma
        if self.finite_ub.size:
            p["ub"].value = prog.ub[self.finite_ub] / sigma
        if self.used.size:
            K = prog.terms.shape[0]
            traffic = np.zeros((self.slots, self.used.size))
            traffic[:K] = prog.terms[:, self.used]
            weights = np.zeros(self.slots)
            weights[:K] = prog.weights / (time_scale * sigma)
            p["traffic"].value = traffic
            p["weights"].value = weights
        for key, idx, rhs in (("eq", eq, hi), ("le", le, hi), ("ge", ge, lo)):
            if idx.size:
                p[f"A_{key}"].value = A[idx]
                p[f"b_{key}"].value = rhs[idx] / sigma
        if "cost" in p:
            assert cost_scale is not None
            p["cost"].value = prog.cost_per_gbps * sigma / cost_scale
            self.cost_scale = cost_scale
        self.time_scale = time_scale
        self.bandwidth_scale = sigma

    def bandwidth_gbps(self) -> np.ndarray | None:
        """The solution B in GB/s (None before a successful solve)."""
        x = self.bandwidth.value
        return None if x is None else np.asarray(x, dtype=float) * self.bandwidth_scale

    @property
    def budget(self) -> Any:
        return self.params.get("budget")


def _signature(prog: Program, with_budget: bool) -> tuple[Any, ...]:
    _, _, _, eq, le, ge = _row_groups(prog)
    used = tuple(int(k) for k in np.flatnonzero(prog.used))
    finite_ub = tuple(int(k) for k in np.flatnonzero(np.isfinite(prog.ub)))
    return (prog.num_dims, used, _padded(prog.terms.shape[0]), eq.size, le.size, ge.size, finite_ub, with_budget)


_COMPILED: OrderedDict[tuple[Any, ...], TimeProblem] = OrderedDict()
_COMPILED_MAX = 64


def build_time_problem(prog: Program, *, with_budget: bool = False) -> TimeProblem:
    """The convex time program for problems shaped like ``prog`` (cached by shape; call `load`)."""
    key = _signature(prog, with_budget)
    cached = _COMPILED.get(key)
    if cached is not None:
        _COMPILED.move_to_end(key)
        return cached
    import cvxpy as cp

    D = prog.num_dims
    _, _, _, eq, le, ge = _row_groups(prog)
    used = np.flatnonzero(prog.used)
    finite_ub = np.flatnonzero(np.isfinite(prog.ub))
    slots = _padded(prog.terms.shape[0])
    params: dict[str, Any] = {"lb": cp.Parameter(D, name="lb")}
    B = cp.Variable(D, name="bandwidth")
    constraints: list[Any] = [params["lb"] <= B]
    if finite_ub.size:
        params["ub"] = cp.Parameter(finite_ub.size, name="ub")
        constraints.append(B[finite_ub] <= params["ub"])
    objective: Any = cp.Constant(0.0)
    if used.size:
        s = cp.Variable(used.size, name="inv_bandwidth")
        constraints.append(cp.inv_pos(B[used]) <= s)
        t = cp.Variable(slots, name="term_time")
        params["traffic"] = cp.Parameter((slots, used.size), name="traffic", nonneg=True)
        params["weights"] = cp.Parameter(slots, name="weights", nonneg=True)
        rows, cols = np.divmod(np.arange(slots * used.size), used.size)
        constraints.append(t[rows] >= cp.multiply(cp.vec(params["traffic"], order="C"), s[cols]))
        objective = params["weights"] @ t
    for sense, idx in (("eq", eq), ("le", le), ("ge", ge)):
        if not idx.size:
            continue
        params[f"A_{sense}"] = cp.Parameter((idx.size, D), name=f"A_{sense}")
        rhs = params[f"b_{sense}"] = cp.Parameter(idx.size, name=f"b_{sense}")
        lhs = params[f"A_{sense}"] @ B
        constraints.append(lhs == rhs if sense == "eq" else (lhs <= rhs if sense == "le" else lhs >= rhs))
    budget_con = None
    if with_budget:
        params["cost"] = cp.Parameter(D, name="cost", nonneg=True)
        params["budget"] = cp.Parameter(name="cost_budget", nonneg=True)
        budget_con = params["cost"] @ B <= params["budget"]
        constraints.append(budget_con)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    tp = TimeProblem(problem, B, params, used, finite_ub, slots, budget_con)
    _COMPILED[key] = tp
    if len(_COMPILED) > _COMPILED_MAX:
        _COMPILED.popitem(last=False)
    return tp


def time_scale(prog: Program) -> float:
    """A typical communication time (s), so the conic objective is O(1) (solver tolerances are absolute)."""
    if not prog.terms.size:
        return 1.0
    return max(float(prog.weights @ prog.terms.max(axis=1)) / bandwidth_scale(prog), 1e-300)


def reject_menus(prog: Program, formulation: str) -> None:
    for k, opt in enumerate(prog.options):
        if opt is not None:
            raise InputError(
                f"network.dimensions[{k}].bandwidth_options",
                f"dimension {prog.dims[k]} must use one of a menu of link speeds, which {formulation} (continuous) cannot honour",
                "solve with formulation libra_discrete",
            )


def check_bounded(ctx: RunContext, prog: Program) -> None:
    """Raise when a dimension with traffic can get unlimited bandwidth (no minimum exists)."""
    open_dims = np.flatnonzero(prog.used & ~syntactically_bounded(prog))
    if not open_dims.size:
        return
    highest = max_bandwidths(ctx, prog, list(open_dims))
    unbounded = [k for k, v in highest.items() if not np.isfinite(v)]
    if unbounded:
        raise unbounded_error(prog, unbounded)


def no_solution(ctx: RunContext, prog: Program, result: SolverResult, what: str) -> None:
    """After a failed solve: name the conflicting constraints, or report the solver failure."""
    # a used dimension forced to B = 0 makes cone solvers fail numerically rather than
    # report infeasibility, so solver errors are diagnosed too
    if result.termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED, Termination.NUMERICAL,
                              Termination.UNKNOWN, Termination.ERROR):
        raise_if_infeasible(ctx, prog, what)
    if result.termination is Termination.ERROR:
        raise NoSolutionError(f"{prog.instance.name}: {what}: backend {result.backend} failed: {result.message}")


def emit_warnings(prog: Program) -> None:
    for text in prog.warnings:
        warnings.warn(f"{prog.instance.name}: {text}", UserWarning, stacklevel=3)


#: hand the programs to Clarabel directly (`conic`) when the backend is cvxpy-CLARABEL;
#: False: through cvxpy's parametrized programs (the path before; benchmarks compare both)
DIRECT = True


def direct(ctx: RunContext) -> bool:
    """Whether this run solves its conic programs by `conic.DirectSolver`."""
    return DIRECT and ctx.backend.name == "cvxpy-CLARABEL"


def solve_min_time(ctx: RunContext, prog: Program, what: str, duals: list[Any] | None = None) -> tuple[SolverResult, np.ndarray | None, float]:
    """Solve the convex time program once; returns the record (objective and bound in
    communication seconds), B (GB/s) and the objective scale; the solver's multipliers are
    appended to ``duals`` when it gives them."""
    if direct(ctx):
        scale = time_scale(prog)
        solved = DirectSolver(prog, time_scale=scale).solve(time_limit=ctx.remaining_time())
        ctx.solver_results.append(solved.result)
        if solved.bandwidth is None:
            no_solution(ctx, prog, solved.result, what)
        if duals is not None:
            duals.extend(solved.duals)
        return solved.result, solved.bandwidth, scale
    t0 = time.perf_counter()
    tp = build_time_problem(prog)
    scale = time_scale(prog)
    tp.load(prog, time_scale=scale)
    build = time.perf_counter() - t0
    result = ctx.solve_convex(tp.problem, build_seconds=build)
    _unscale(result, scale)
    if not result.has_solution:
        no_solution(ctx, prog, result, what)
        return result, None, scale
    return result, tp.bandwidth_gbps(), scale


def _unscale(result: SolverResult, scale: float) -> None:
    """Objective and bound of a scaled time program back to seconds."""
    if result.objective is not None:
        result.objective *= scale
    if result.bound is not None:
        result.bound *= scale
    result.extra["objective_scale_seconds"] = scale


def run_libra_perf(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """``libra_perf``: minimum training time, convex program (default backend cvxpy-CLARABEL)."""
    prog = prepare(inst)
    reject_menus(prog, "libra_perf")
    check_bounded(ctx, prog)
    emit_warnings(prog)
    duals: list[Any] = []
    result, B, _ = solve_min_time(ctx, prog, "libra_perf", duals)
    if B is None:
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    B = lowest_unused(ctx, prog, B)
    info: dict[str, Any] = {"terms": int(prog.terms.shape[0]), "warnings": list(prog.warnings)}
    if result.bound is not None and result.objective is not None:
        # the conic dual objective holds within the solver's tolerances only: information
        info["conic_dual_bound_seconds"] = prog.compute_seconds + result.bound
        info["duality_gap_seconds"] = result.objective - result.bound
        raw = result.extra.get("solver_primal_minus_dual")
        if raw is not None:
            info["solver_primal_minus_dual_scaled"] = raw  # in units of objective_scale_seconds
    bounds, claimed = safe_outcome_bound(prog, B, "libra_perf", info, duals)
    return Outcome(
        plan=prog.to_plan(B, "time"),
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=claimed,
        proven_optimal=bool(info["relative_gap"] <= OPTIMAL_GAP),
        info=info,
    )


#: relative gap (evaluated time vs safe bound) under which a convex solve claims optimality
OPTIMAL_GAP = 1e-7


def safe_outcome_bound(prog: Program, B: np.ndarray, name: str, info: dict[str, Any], duals: list[Any] | None = None) -> tuple[list[Bound], float]:
    """The exact-arithmetic Lagrangian bound at allocation ``B`` (GB/s) or the solver's
    multipliers ``duals`` as a safe `Bound`, the allocation's training time (seconds), and
    the relative gap between them in ``info``."""
    claimed = prog.compute_seconds + prog.comm_time(B)
    value, how = safe_time_bound(prog, B, duals)
    info["safe_bound"] = how
    info["relative_gap"] = (claimed - value) / claimed if claimed > 0 and math.isfinite(value) else math.inf
    if not math.isfinite(value):
        return [], claimed
    return [Bound(value, f"{name} Lagrangian dual bound (exact: rounding error bounded)", grade="safe")], claimed


# -- perf-per-cost ------------------------------------------------------------------------------

@dataclass
class _Point:
    """T*(c) at one budget c (normalized cost units): a line below T*, the allocation found."""

    c: float
    ok: bool
    #: T*(c') >= intercept - slope * c' for every budget c' (seconds, compute included): the
    #: Lagrangian at the KKT multipliers of this point, exact (`safe.budget_line`); slope >= 0
    intercept: float = -math.inf
    slope: float = 0.0
    #: T*(c') >= floor for every budget (the unconstrained least time), seconds
    floor: float = -math.inf
    bandwidth: np.ndarray | None = None
    time: float = math.inf  # training time of `bandwidth` (s)
    cost: float = math.inf  # its normalized cost
    product: float = math.inf  # time x normalized cost

    @property
    def t_lower(self) -> float:
        """Lower bound on T*(c) at this point's own budget (seconds)."""
        return self.intercept - self.slope * self.c


@dataclass(order=True)
class _Interval:
    lower: float
    seq: int
    a: float = field(compare=False)
    b: float = field(compare=False)
    left: _Point | None = field(compare=False, default=None)
    right: _Point | None = field(compare=False, default=None)
    argmin: float = field(compare=False, default=math.nan)


#: relative margin on c * line(c) evaluated in floating point (a few roundings, outward)
_EVAL_MARGIN = 1e-13


def interval_lower_bound(a: float, b: float, left: _Point | None, right: _Point | None) -> tuple[float, float]:
    """Lower bound of min_{c in [a, b]} c * T*(c), and where it is attained.

    Each evaluated point p gives a line T*(c) >= I_p - nu_p c valid for every budget (the
    Lagrangian is affine in the budget); T* is nonincreasing, so the right point's value also
    bounds T* from below on [a, b] as a constant. c * (max of lines) is concave on each piece
    where one line is the max, so its minimum over [a, b] sits at a, b or a crossing of two
    lines. Values are lowered by ``_EVAL_MARGIN`` for the floating-point evaluation.
    """
    lines: list[tuple[float, float]] = []  # (value at c = 0, slope)
    for p in (left, right):
        if p is not None and p.ok and math.isfinite(p.intercept):
            lines.append((p.intercept, -p.slope))
    if right is not None and right.ok and math.isfinite(right.intercept):
        lines.append((right.t_lower, 0.0))
    floors = [p.floor for p in (left, right) if p is not None and p.ok and math.isfinite(p.floor)]
    if floors:
        lines.append((max(floors), 0.0))
    if not lines:
        return 0.0, 0.5 * (a + b)
    candidates = [a, b]
    for (i1, s1), (i2, s2) in itertools.combinations(lines, 2):
        if s1 != s2:
            x = (i2 - i1) / (s1 - s2)
            if a < x < b:
                candidates.append(x)
    best, where = math.inf, a
    for c in candidates:
        val = max(c * i + s * c * c for i, s in lines)
        size = max(abs(c * i) + abs(s) * c * c for i, s in lines)
        val -= _EVAL_MARGIN * size
        if val < best:
            best, where = val, c
    return max(best, 0.0), where


def solver_duals(tp: TimeProblem, prog: Program) -> list[tuple[np.ndarray, np.ndarray]]:
    """Multipliers (lambda [K, D], mu [rows + budget]) in the program's units from the conic
    solver's duals of the budget program, with both sign conventions for == rows (either is
    only a candidate: `safe.line_from_multipliers` keeps the better valid line)."""
    cons = tp.problem.constraints
    K, D = prog.terms.shape
    _, _, _, eq, le, ge = _row_groups(prog)
    n_rows = len(prog.rows)
    try:
        lam = np.zeros((K, D))
        idx = 1 + (1 if tp.finite_ub.size else 0)
        if tp.used.size:
            t_dual = np.asarray(cons[idx + 1].dual_value, dtype=float).reshape(tp.slots, tp.used.size)
            lam[:, tp.used] = np.maximum(t_dual[:K], 0.0)
            idx += 2
        mu = np.zeros(n_rows + 1)
        per_unit = tp.time_scale / tp.bandwidth_scale  # objective units per (GB/s of a row)
        signs = {"eq": 1.0, "le": 1.0, "ge": -1.0}
        eq_rows = None
        for key, rows in (("eq", eq), ("le", le), ("ge", ge)):
            if rows.size:
                y = np.asarray(cons[idx].dual_value, dtype=float).reshape(-1)
                mu[rows] = signs[key] * y * per_unit
                if key == "eq":
                    eq_rows = rows
                idx += 1
        assert tp.budget_constraint is not None
        mu[n_rows] = float(np.asarray(tp.budget_constraint.dual_value, dtype=float).reshape(-1)[0]) * tp.time_scale
    except (TypeError, ValueError, IndexError):
        return []
    out = [(lam, mu)]
    if eq_rows is not None:
        flipped = mu.copy()
        flipped[eq_rows] = -flipped[eq_rows]
        out.append((lam, flipped))
    return out


def run_libra_perf_per_cost(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """``libra_perf_per_cost``: global minimum of training time x network cost, plus the Pareto curve."""
    tol = float(ctx.param("tolerance", 1e-6))
    n_grid = int(ctx.param("curve_points", 8))
    max_points = int(ctx.param("max_points", 400))
    prog = prepare(inst)
    reject_menus(prog, "libra_perf_per_cost")
    check_bounded(ctx, prog)
    emit_warnings(prog)
    C = prog.compute_seconds

    # the cost range: cheapest feasible network, and the cost of a fastest allocation
    if direct(ctx):
        cheap = DirectSolver(prog, time_scale=max(float(prog.cost_per_gbps.max(initial=0.0)) * bandwidth_scale(prog), 1e-300),
                             objective=prog.cost_per_gbps).solve(time_limit=ctx.remaining_time())
        ctx.solver_results.append(cheap.result)
        res_min, b_min = cheap.result, cheap.bandwidth
    else:
        res_min, b_min = optimize_linear(ctx, prog, prog.cost_per_gbps, "min", name="min-cost")
    if b_min is None:
        no_solution(ctx, prog, res_min, "libra_perf_per_cost")
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    c_min_usd = prog.cost(b_min)
    fast_duals: list[Any] = []
    res_fast, b_fast, _ = solve_min_time(ctx, prog, "libra_perf_per_cost", fast_duals)
    if b_fast is None:
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    b_fast = lowest_unused(ctx, prog, b_fast)
    c_max_usd = prog.cost(b_fast)
    scale = max(c_max_usd, 1e-300)

    cost_norm = prog.cost_per_gbps / scale

    def point_from(c: float, B: np.ndarray, duals: list[tuple[np.ndarray, np.ndarray]] | None = None) -> _Point:
        """The point at budget c; its line is the best (at c) of the KKT-fitted multipliers and
        the solver's own duals (``duals``), each evaluated exactly (any multipliers are valid)."""
        t = C + prog.comm_time(B)
        cost = prog.cost(B) / scale
        lines = [line_from_multipliers(prog, lam, mu, cost_norm, c) for lam, mu in duals or []]
        if not any(ln is not None and ln[0] - ln[1] * c >= t * (1 - 1e-8) for ln in lines):
            lines.append(budget_line(prog, B, cost_norm, c))  # the solver's are not tight: fit KKT's
        good = [ln for ln in lines if ln is not None]
        intercept, slope = max(good, key=lambda ln: ln[0] - ln[1] * c) if good else (-math.inf, 0.0)
        return _Point(c=c, ok=True, intercept=intercept, slope=slope, bandwidth=B, time=t, cost=cost, product=t * cost)

    fast_lower, _ = safe_time_bound(prog, b_fast, fast_duals)  # T*(c) >= the unconstrained minimum, any c
    top = point_from(1.0, b_fast)
    top.floor = fast_lower
    points: list[_Point] = [top]
    lo_c = c_min_usd / scale
    #: the least cost comes from an LP (within its tolerances): the budget search starts at a
    #: bound on it valid in exact arithmetic, so that no feasible budget lies left of it
    lo_safe = min(lo_c, max(safe_min_linear(prog, prog.cost_per_gbps, b_min) / scale, 0.0))
    info: dict[str, Any] = {"warnings": list(prog.warnings), "least_cost_safe_usd": lo_safe * scale}

    if lo_c >= 1.0 - 1e-12:
        best = top
        # every plan costs >= lo_safe and takes >= the unconstrained minimum
        bound_value = min(best.product, math.nextafter(lo_safe * fast_lower * (1 - _EVAL_MARGIN), 0.0))
        certified = True
        n_eval = 0
    else:
        t0 = time.perf_counter()
        tscale = time_scale(prog)
        if direct(ctx):
            budget_solver = DirectSolver(prog, time_scale=tscale, cost=cost_norm)
        else:
            tp = build_time_problem(prog, with_budget=True)
            tp.load(prog, time_scale=tscale, cost_scale=scale)
        build = time.perf_counter() - t0
        counter = itertools.count()

        def evaluate_at(c: float) -> _Point:
            nonlocal build
            if direct(ctx):
                solved = budget_solver.solve(budget=c, time_limit=ctx.remaining_time())
                ctx.solver_results.append(solved.result)
                if solved.bandwidth is None:
                    return _Point(c=c, ok=False)
                return point_from(c, solved.bandwidth, solved.duals)
            tp.budget.value = c
            res = ctx.solve_convex(tp.problem, build_seconds=build)
            _unscale(res, tscale)
            build = 0.0
            B = tp.bandwidth_gbps()
            if not res.has_solution or res.termination is not Termination.OPTIMAL or B is None:
                return _Point(c=c, ok=False)
            return point_from(c, B, solver_duals(tp, prog))

        heap: list[_Interval] = []

        def push(a: float, b: float, left: _Point | None, right: _Point | None) -> None:
            lower, where = interval_lower_bound(a, b, left, right)
            heapq.heappush(heap, _Interval(lower, next(counter), a, b, left, right, where))

        grid = [lo_c + (1.0 - lo_c) * i / n_grid for i in range(1, n_grid)]
        prev_c, prev_point = lo_safe, None
        for c in grid:
            p = evaluate_at(c)
            points.append(p)
            push(prev_c, c, prev_point, p if p.ok else top)
            prev_c, prev_point = c, (p if p.ok else prev_point)
        push(prev_c, 1.0, prev_point, top)
        n_eval = len(grid)
        certified = False
        floor = math.inf  # bounds of intervals too narrow to split further
        popped = None
        while heap:
            best = min((p for p in points if p.ok), key=lambda p: p.product)
            popped = heapq.heappop(heap)
            if popped.lower >= best.product * (1 - tol):
                certified = True
                heapq.heappush(heap, popped)
                break
            remaining = ctx.remaining_time()
            if n_eval >= max_points or (remaining is not None and remaining <= 0):
                heapq.heappush(heap, popped)
                break
            a, b = popped.a, popped.b
            width = b - a
            if width <= 1e-12 * max(b, 1e-300):
                floor = min(floor, popped.lower)
                continue
            m = popped.argmin
            if not (a + 0.02 * width < m < b - 0.02 * width):
                m = 0.5 * (a + b)
            p = evaluate_at(m)
            n_eval += 1
            points.append(p)
            right_for_left = p if p.ok else popped.right
            left_for_right = p if p.ok else popped.left
            push(a, m, popped.left, right_for_left)
            push(m, b, left_for_right, popped.right)
        best = min((p for p in points if p.ok), key=lambda p: p.product)
        open_lower = min([iv.lower for iv in heap] + [floor])
        bound_value = min(open_lower, best.product)
        if not heap and math.isinf(floor):
            certified = True
        info["budget_program"] = {"compiled_once": True, "interface": "clarabel direct" if direct(ctx) else "cvxpy DPP", "evaluations": n_eval}
    info["evaluations"] = n_eval

    assert best.bandwidth is not None
    ok_points = sorted((p for p in points if p.ok), key=lambda p: p.c)
    curve = [
        {
            "cost_budget_usd": p.c * scale,
            "cost_usd": p.cost * scale,
            "time_seconds": p.time,
            "time_lower_bound_seconds": p.t_lower,
            "time_lower_bound_slope": p.slope,
            "time_x_cost": p.product * scale,
            "bandwidth": {n: float(v) * GB for n, v in zip(prog.dims, p.bandwidth, strict=True)},  # type: ignore[arg-type]
        }
        for p in ok_points
    ]
    gap = (best.product - bound_value) / best.product if best.product > 0 else 0.0
    info.update(
        {
            "pareto": curve,
            "fastest": {"time_seconds": top.time, "cost_usd": top.cost * scale,
                        "bandwidth": {n: float(v) * GB for n, v in zip(prog.dims, b_fast, strict=True)}},
            "cheapest_cost_usd": c_min_usd,
            "chosen": {"time_seconds": best.time, "cost_usd": best.cost * scale, "time_x_cost": best.product * scale},
            "certified": certified and gap <= tol,
            "relative_gap": gap,
            "tolerance": tol,
            "libra_perf_per_cost_units": "LIBRA reports time_ns * cost_usd / 1e10 = time_x_cost / 10",
        }
    )
    return Outcome(
        plan=prog.to_plan(best.bandwidth, "time_x_cost"),
        bounds=[Bound(bound_value * scale, "libra_perf_per_cost interval branch-and-bound over the cost budget (exact Lagrangian lines)", grade="safe")],
        solver_results=list(ctx.solver_results),
        claimed_objective=best.product * scale,
        proven_optimal=certified and gap <= tol,
        info=info,
    )
