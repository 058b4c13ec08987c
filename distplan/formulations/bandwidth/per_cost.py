"""``libra_perf_per_cost``: the certified global minimum of training time x network cost.

Perf-per-cost (time x cost) is not convex; `run_libra_perf_per_cost` minimizes
``c * T*(c)`` over the cost budget c, where T*(c) = min time s.t. cost(B) <= c is convex
and nonincreasing (the time program of `distplan.formulations.bandwidth.convex`), by an
interval branch-and-bound whose bounds come from the convexity of T* (tangents from the
budget's dual multiplier) and its monotonicity, so the answer is the certified global
optimum (LIBRA, Won et al., ISPASS 2024, arXiv 2109.11762, solves it as a nonconvex QCP
with Gurobi). The budget is a cvxpy Parameter: the problem is compiled once (DPP) for the
whole sweep. The plan returned is the search's best, or a baseline's when the evaluator
finds its time x cost lower (`_best_with_baselines`): it never loses to one. Units: seconds,
GB/s, USD.
"""

from __future__ import annotations

import collections
import heapq
import itertools
import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import NoSolutionError
from distplan.formulations.bandwidth.blocks import lowest_unused, optimize_linear
from distplan.formulations.bandwidth.conic import DirectSolver
from distplan.formulations.bandwidth.convex import (
    continuous_program,
    direct,
    solve_min_time,
    unscale,
)
from distplan.formulations.bandwidth.data import Program, bandwidth_scale
from distplan.formulations.bandwidth.diagnose import no_solution
from distplan.formulations.bandwidth.finish import Baseline, baselines
from distplan.formulations.bandwidth.safe import budget_line, line_from_multipliers, safe_min_linear, safe_time_bound
from distplan.formulations.bandwidth.stopping import Stop, run_termination
from distplan.formulations.bandwidth.time_program import BUDGET_PROGRAM, TimeProblem, build_time_problem, time_scale
from distplan.formulations.registry import Bound, Outcome, RunContext
from distplan.models.bandwidth_eval import evaluate
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_records import GB
from distplan.solvers.result import SolverResult, Termination


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
    #: the evaluator accepts ``bandwidth`` (a low-accuracy solver's, SCS's or SCIP's, can miss
    #: a row by more than its tolerance): the line counts either way, the plan only then
    accepted: bool = True

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
    _, _, _, eq, le, ge = prog.row_groups()
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


def _best_with_baselines(inst: BandwidthInstance, prog: Program, best: _Point | None, scale: float,
                         base: list[Baseline], info: dict[str, Any]) -> tuple[np.ndarray, float, float, float] | None:
    """The plan of least time x cost among the search's ``best`` point (None: the search
    found none) and the baselines' plans ``base`` (`finish.baselines`:
    ``proportional_to_traffic``, ``equal_bw``, computed before the search so that a run its
    time limit cuts short has them too), each product recomputed by the evaluator
    (`distplan.models.bandwidth_eval`); ``best`` wins ties. None when there is no plan.

    The search's point comes from a conic solver whose allocation holds to its tolerance,
    so where the optimum is a baseline's allocation (libra-resnet50-3d-total500: the fastest
    allocation is proportional_to_traffic's, and the least product is at its cost) the
    baseline's exact allocation was better by 1e-7 (Clarabel), 4e-9 (SCIP), 4e-11 (SCS). Each candidate's
    evaluated product goes to ``info["candidates"]``, the winner to ``info["plan_from"]``.
    Returns (allocation GB/s, training time s, cost in units of ``scale`` USD, time x cost
    in s x ``scale`` USD). The search's bound holds for every plan, whichever is returned.
    """
    seen: dict[str, float] = {}
    chosen: tuple[str, np.ndarray, float, float, float] | None = None
    least = math.inf  # s x USD, the evaluator's
    if best is not None and best.bandwidth is not None:
        own = evaluate(inst, prog.to_plan(best.bandwidth, "time_x_cost"))
        seen["libra_perf_per_cost"] = own.objective
        chosen = ("libra_perf_per_cost", best.bandwidth, best.time, best.cost, best.product)
        least = own.objective
    for name, B, _ in base:
        c = evaluate(inst, prog.to_plan(B, "time_x_cost"))
        if not (c.feasible and math.isfinite(c.objective)):
            continue
        seen[f"baseline {name}"] = c.objective
        if c.objective < least:
            least = c.objective
            chosen = (f"baseline {name}", B, float(c.details["time_seconds"]), float(c.details["cost_usd"]) / scale, c.objective / scale)
    info["candidates"] = seen
    if chosen is None:
        return None
    info["plan_from"] = chosen[0]
    return chosen[1], chosen[2], chosen[3], chosen[4]


def _without_search(ctx: RunContext, inst: BandwidthInstance, prog: Program, base: list[Baseline]) -> Outcome:
    """The outcome when the search has no point (its first solves stopped at a limit): the
    baselines' best plan on time x cost, with no bound of the search's; no plan without
    them. The run ends "time_limit" when its own limit passed, else as its last call did."""
    info: dict[str, Any] = {"warnings": list(prog.warnings), "evaluations": 0, "certified": False}
    chosen = _best_with_baselines(inst, prog, None, 1.0, base, info)
    if chosen is None:
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    plan_bw, _, _, product = chosen
    return Outcome(
        plan=prog.to_plan(plan_bw, "time_x_cost"),
        solver_results=list(ctx.solver_results),
        claimed_objective=product,
        info=info,
        termination=Termination.TIME_LIMIT if ctx.remaining_time() == 0.0 else None,
    )


def run_libra_perf_per_cost(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """``libra_perf_per_cost``: global minimum of training time x network cost, plus the Pareto curve."""
    tol = float(ctx.param("tolerance", 1e-6))
    n_grid = int(ctx.param("curve_points", 8))
    max_points = int(ctx.param("max_points", 400))
    stall_points = int(ctx.param("stall_points", 50))
    prog = continuous_program(inst, ctx, "libra_perf_per_cost")
    C = prog.compute_seconds
    base = baselines(ctx, inst, prog)  # first: a run its limit cuts short still has them

    # the cost range: cheapest feasible network, and the cost of a fastest allocation
    if direct(ctx):
        cheap = DirectSolver(prog, name="min-cost", time_scale=max(float(prog.cost_per_gbps.max(initial=0.0)) * bandwidth_scale(prog), 1e-300),
                             objective=prog.cost_per_gbps, verbose=ctx.options.verbose).solve_in_run(ctx)
        res_min, b_min = cheap.result, cheap.bandwidth
    else:
        res_min, b_min = optimize_linear(ctx, prog, prog.cost_per_gbps, "min", name="min-cost")
    if b_min is None:
        no_solution(ctx, prog, res_min, "libra_perf_per_cost")
        return _without_search(ctx, inst, prog, base)
    c_min_usd = prog.cost(b_min)
    fast_duals: list[Any] = []
    res_fast, b_fast, _ = solve_min_time(ctx, prog, "libra_perf_per_cost", fast_duals)
    if b_fast is None:
        return _without_search(ctx, inst, prog, base)
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
        accepted = evaluate(inst, prog.to_plan(B, "time_x_cost")).feasible
        return _Point(c=c, ok=True, intercept=intercept, slope=slope, bandwidth=B, time=t, cost=cost, product=t * cost, accepted=accepted)

    def best_of(points: list[_Point]) -> _Point:
        """The point of least time x cost whose plan the evaluator accepts."""
        plans = [p for p in points if p.ok and p.accepted]
        if not plans:
            raise NoSolutionError(f"{inst.name}: libra_perf_per_cost: no allocation the solver returned meets the constraints within the evaluator's tolerance ({ctx.backend.name})")
        return min(plans, key=lambda p: p.product)

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
        best = best_of([top])
        # every plan costs >= lo_safe and takes >= the unconstrained minimum
        bound_value = min(best.product, math.nextafter(lo_safe * fast_lower * (1 - _EVAL_MARGIN), 0.0))
        certified = True
        timed_out = stalled = False
        n_eval = 0
    else:
        t0 = time.perf_counter()
        tscale = time_scale(prog)
        if direct(ctx):
            budget_solver = DirectSolver(prog, name=BUDGET_PROGRAM, time_scale=tscale, cost=cost_norm, verbose=ctx.options.verbose)
        else:
            tp = build_time_problem(prog, with_budget=True)
            tp.load(prog, time_scale=tscale, cost_scale=scale)
        build = time.perf_counter() - t0
        counter = itertools.count()

        def evaluate_at(c: float) -> _Point:
            nonlocal build
            if direct(ctx):
                solved = budget_solver.solve_in_run(ctx, budget=c)
                if solved.bandwidth is None:
                    return _Point(c=c, ok=False)
                return point_from(c, solved.bandwidth, solved.duals)
            tp.budget.value = c
            res = ctx.solve_convex(tp.problem, BUDGET_PROGRAM, build_seconds=build)
            unscale(res, tscale)
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
        timed_out = False  # the search stopped at the run's time limit
        floor = math.inf  # bounds of intervals too narrow to split further
        popped = None
        # the search's gap (best plan less lower bound) before each evaluation: one that
        # closed by less than tolerance / 10 of the best over the last ``stall_points``
        # stops it (the 4-D "multi" LIBRA instances sat at a gap of 1.47e-6 from about 20
        # evaluations to 4,000; the bound comes from lines fitted within the solver's
        # accuracy). The plan counts too: a search whose plan still improves goes on
        gaps: collections.deque[float] = collections.deque(maxlen=stall_points + 1 if stall_points > 0 else 1)
        stalled = False
        while heap:
            best = best_of(points)
            popped = heapq.heappop(heap)
            if popped.lower >= best.product * (1 - tol):
                certified = True
                heapq.heappush(heap, popped)
                break
            gaps.append(best.product - min(popped.lower, floor))
            if stall_points > 0 and len(gaps) == gaps.maxlen and gaps[0] - gaps[-1] <= 0.1 * tol * best.product:
                stalled = True
                heapq.heappush(heap, popped)
                break
            remaining = ctx.remaining_time()
            if n_eval >= max_points or (remaining is not None and remaining <= 0):
                timed_out = remaining is not None and remaining <= 0
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
        best = best_of(points)
        open_lower = min([iv.lower for iv in heap] + [floor])
        bound_value = min(open_lower, best.product)
        if not heap and math.isinf(floor):
            certified = True
        info["budget_program"] = {"compiled_once": True, "interface": "clarabel direct" if direct(ctx) else "cvxpy DPP", "evaluations": n_eval}
    info["evaluations"] = n_eval

    chosen = _best_with_baselines(inst, prog, best, scale, base, info)
    assert chosen is not None  # best_of returned an accepted point
    plan_bw, plan_time, plan_cost, plan_product = chosen
    ok_points = sorted((p for p in points if p.ok and p.accepted), key=lambda p: p.c)
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
    gap = (plan_product - bound_value) / plan_product if plan_product > 0 else 0.0
    info.update(
        {
            "pareto": curve,
            "fastest": {"time_seconds": top.time, "cost_usd": top.cost * scale,
                        "bandwidth": {n: float(v) * GB for n, v in zip(prog.dims, b_fast, strict=True)}},
            "cheapest_cost_usd": c_min_usd,
            "chosen": {"time_seconds": plan_time, "cost_usd": plan_cost * scale, "time_x_cost": plan_product * scale},
            "certified": certified and gap <= tol,
            "relative_gap": gap,
            "tolerance": tol,
            "libra_perf_per_cost_units": "LIBRA reports time_ns * cost_usd / 1e10 = time_x_cost / 10",
        }
    )
    return Outcome(
        plan=prog.to_plan(plan_bw, "time_x_cost"),
        bounds=[Bound(bound_value * scale, "libra_perf_per_cost interval branch-and-bound over the cost budget (exact Lagrangian lines)", grade="safe")],
        solver_results=list(ctx.solver_results),
        claimed_objective=plan_product * scale,
        proven_optimal=certified and gap <= tol,
        info=info,
        termination=_termination(certified and gap <= tol, timed_out, n_eval >= max_points, info, ctx.solver_results, stalled),
    )


def _termination(proven: bool, timed_out: bool, out_of_points: bool, info: dict[str, Any], calls: list[SolverResult], stalled: bool = False) -> Termination | None:
    """`stopping.run_termination` of the search: ``info["stopped"]`` records why an
    unproven search stopped (the run's time limit, ``max_points``, a bound that stopped
    rising, or intervals too narrow to split). The last call's "optimal" said only that
    its budget point was solved, and sat beside status "feasible". None (the api's
    default) without a solver call."""
    stop = Stop.CLOSED if proven else Stop.DEADLINE if timed_out else Stop.POINTS if out_of_points else Stop.STALLED if stalled else Stop.NARROW
    if stop is not Stop.CLOSED:
        info["stopped"] = stop.value
    return run_termination(stop, calls[-1]) if calls else None
