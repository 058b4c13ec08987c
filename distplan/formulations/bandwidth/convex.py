"""LIBRA's time objective as a convex (second-order cone) program: ``libra_perf``.

LIBRA (Won et al., ISPASS 2024, arXiv 2109.11762) writes ``B_d * beta_d = 1`` and solves
a nonconvex QCP with Gurobi. Minimizing time is convex: with s_d >= 1/B_d (``inv_pos``,
a rotated second-order cone) and one epigraph variable per aggregated traffic term,

    minimize  sum_k w_k t_k
    s.t.      t_k >= u_kd s_d        for every (k, d) with u_kd > 0
              s_d >= 1 / B_d         for every dimension with traffic
              instance rows on B,  lb <= B <= ub

The training time is C + the optimum (C = compute seconds); the program itself is built in
`distplan.formulations.bandwidth.time_program`. Perf-per-cost (time x cost), which is not
convex, is `distplan.formulations.bandwidth.per_cost`.
"""

from __future__ import annotations

import math
import time
import warnings
from typing import Any

import numpy as np

from distplan.errors import InputError, NoSolutionError
from distplan.formulations.bandwidth import conic
from distplan.formulations.bandwidth.blocks import lowest_unused, max_bandwidths
from distplan.formulations.bandwidth.conic import DirectSolver
from distplan.formulations.bandwidth.data import Program, prepare, syntactically_bounded, unbounded_error
from distplan.formulations.bandwidth.diagnose import no_solution, raise_if_infeasible, raise_if_starved
from distplan.formulations.bandwidth.finish import Baseline, baselines, best_plan
from distplan.formulations.bandwidth.safe import safe_time_bound
from distplan.formulations.bandwidth.time_program import TIME_PROGRAM, build_time_problem, time_scale
from distplan.formulations.registry import Bound, Outcome, RunContext
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.solvers.result import SolverResult, Termination


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


def emit_warnings(prog: Program) -> None:
    for text in prog.warnings:
        warnings.warn(f"{prog.instance.name}: {text}", UserWarning, stacklevel=3)


#: hand the programs to Clarabel directly (`conic`) when the backend is cvxpy-CLARABEL;
#: False: through cvxpy's parametrized programs (the path before; benchmarks compare both)
DIRECT = True


def direct(ctx: RunContext) -> bool:
    """Whether this run solves its conic programs by `conic.DirectSolver`: on
    cvxpy-CLARABEL without raw solver options, which cvxpy hands to Clarabel and the
    direct path would leave unused (review rev23c: ``max_iter=1`` was ignored, and the
    call's record named a backend verify cannot vet the options of)."""
    return DIRECT and ctx.backend.name == conic.STANDS_IN_FOR and not ctx.options.raw


def solve_min_time(ctx: RunContext, prog: Program, what: str, duals: list[Any] | None = None,
                   diagnose: bool = True) -> tuple[SolverResult, np.ndarray | None, float]:
    """Solve the convex time program once; returns the record (objective and bound in
    communication seconds), B (GB/s) and the objective scale; the solver's multipliers are
    appended to ``duals`` when it gives them. Without a solution, ``diagnose`` names the
    conflicting constraints (`no_solution`) at once; the caller does it otherwise."""
    if direct(ctx):
        scale = time_scale(prog)
        solved = DirectSolver(prog, name=TIME_PROGRAM, time_scale=scale, verbose=ctx.options.verbose).solve_in_run(ctx)
        if solved.bandwidth is None and diagnose:
            no_solution(ctx, prog, solved.result, what)
        if duals is not None:
            duals.extend(solved.duals)
        return solved.result, solved.bandwidth, scale
    t0 = time.perf_counter()
    tp = build_time_problem(prog)
    scale = time_scale(prog)
    tp.load(prog, time_scale=scale)
    build = time.perf_counter() - t0
    result = ctx.solve_convex(tp.problem, TIME_PROGRAM, build_seconds=build)
    unscale(result, scale)
    if not result.has_solution:
        if diagnose:
            no_solution(ctx, prog, result, what)
        return result, None, scale
    return result, tp.bandwidth_gbps(), scale


def unscale(result: SolverResult, scale: float) -> None:
    """Objective and bound of a scaled time program back to seconds."""
    if result.objective is not None:
        result.objective *= scale
    if result.bound is not None:
        result.bound *= scale
    result.extra["objective_scale_seconds"] = scale


def continuous_program(inst: BandwidthInstance, ctx: RunContext, formulation: str) -> Program:
    """The instance's program for a formulation over continuous bandwidths: menus refused,
    an unbounded program refused before solving, warnings emitted."""
    prog = prepare(inst)
    reject_menus(prog, formulation)
    raise_if_starved(prog, formulation)
    check_bounded(ctx, prog)
    emit_warnings(prog)
    return prog


def run_libra_perf(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """``libra_perf``: minimum training time, convex program (default backend cvxpy-CLARABEL)."""
    prog = continuous_program(inst, ctx, "libra_perf")
    base = baselines(ctx, inst, prog)  # first: a run its limit cuts short still has them
    duals: list[Any] = []
    result, solved, _ = solve_min_time(ctx, prog, "libra_perf", duals, diagnose=False)
    info: dict[str, Any] = {"terms": int(prog.terms.shape[0]), "warnings": list(prog.warnings)}
    B = finish(ctx, inst, prog, "libra_perf", result, solved, info, base)
    if result.bound is not None and result.objective is not None and result.status.value == "optimal":
        # the conic dual objective holds within the solver's tolerances only: information
        info["conic_dual_bound_seconds"] = prog.compute_seconds + result.bound
        info["duality_gap_seconds"] = result.objective - result.bound
        raw = result.extra.get("solver_primal_minus_dual")
        if raw is not None:
            info["solver_primal_minus_dual_scaled"] = raw  # in units of objective_scale_seconds
    bounds, claimed = safe_outcome_bound(prog, B, "libra_perf", info, duals, fit_at=[] if solved is None else [solved])
    return Outcome(
        plan=prog.to_plan(B, "time"),
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=claimed,
        proven_optimal=bool(info["relative_gap"] <= OPTIMAL_GAP),
        info=info,
        termination=result.termination,
    )


def finish(ctx: RunContext, inst: BandwidthInstance, prog: Program, name: str, result: SolverResult,
           solved: np.ndarray | None, info: dict[str, Any], base: list[Baseline]) -> np.ndarray:
    """The plan an exact continuous formulation returns: the best plan the evaluator accepts
    among the solver's allocation ``solved`` (GB/s; with the unused dimensions lowered, and
    as it came), repaired if need be, and the baselines' ``base`` (`finish.baselines`, which
    the formulation computed before its solves), by `finish.best_plan`. Without any: the
    conflicting constraints are named (`InfeasibleError`), or `NoSolutionError` says that no
    plan was found, and that the time limit passed first when it did."""
    candidates: list[tuple[str, np.ndarray | None]] = []
    if solved is not None and np.all(np.isfinite(solved)):
        lowered = lowest_unused(ctx, prog, solved)
        candidates.append((name, lowered))
        if not np.array_equal(lowered, solved):
            candidates.append((f"{name} (unused dimensions not lowered)", solved))
    B = best_plan(inst, prog, candidates, info, base)
    if B is None:
        if result.termination is Termination.TIME_LIMIT and ctx.remaining_time() == 0.0:
            raise NoSolutionError(
                f"{inst.name}: {name}: found no solution before the limit: the run's time limit passed before its solver "
                f"found an allocation (it ended {result.termination.value}, {result.raw_status}), and no baseline gave a plan"
            )
        no_solution(ctx, prog, result, name)
        raise_if_infeasible(ctx, prog, name)
        raise NoSolutionError(
            f"{inst.name}: {name}: no plan the evaluator accepts: the solver ended {result.termination.value} ({result.raw_status}), "
            "and neither its allocation (repaired or not) nor a baseline's meets the constraints within the evaluator's tolerance"
        )
    return B


#: relative gap (evaluated time vs safe bound) under which a convex solve claims optimality
OPTIMAL_GAP = 1e-7


def safe_outcome_bound(prog: Program, B: np.ndarray, name: str, info: dict[str, Any], duals: list[Any] | None = None,
                       fit_at: list[np.ndarray] | None = None) -> tuple[list[Bound], float]:
    """The exact-arithmetic Lagrangian bound at allocation ``B`` (GB/s), at the allocations
    ``fit_at`` (the solver's, when the plan returned is another) or at the solver's
    multipliers ``duals`` as a safe `Bound`, the allocation's training time (seconds), and
    the relative gap between them in ``info``."""
    claimed = prog.compute_seconds + prog.comm_time(B)
    value, how = safe_time_bound(prog, B, duals)
    for other in fit_at or []:
        v, h = safe_time_bound(prog, other, duals)
        if v > value:
            value, how = v, h
    certificate = how.pop("certificate", None)  # (in the bound's record, not the info)
    info["safe_bound"] = how
    info["relative_gap"] = (claimed - value) / claimed if claimed > 0 and math.isfinite(value) else math.inf
    if not math.isfinite(value):
        return [], claimed
    assert isinstance(certificate, dict)
    return [Bound(value, f"{name} Lagrangian dual bound (exact: rounding error bounded)", grade="safe", certificate=certificate)], claimed
