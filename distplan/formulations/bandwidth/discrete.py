"""``libra_discrete``: each dimension picks its bandwidth from a menu of link speeds (MILP).

With one binary z_dj per option b_dj (sum_j z_dj = 1), both B_d = sum_j b_dj z_dj and its
reciprocal 1/B_d = sum_j z_dj / b_dj are linear, so LIBRA's minimum-time problem becomes
an exact MILP (no approximation of 1/B):

    minimize  sum_k w_k t_k
    s.t.      t_k >= u_kd * sum_j z_dj / b_dj,   B_d = sum_j b_dj z_dj,   sum_j z_dj = 1
              instance rows on B

(The MILP counts time in `objective_unit_seconds`, so that its costs are at most 1: in
seconds they were 3e-8 to 7e-7 on LIBRA's DLRM, below HiGHS's dual feasibility tolerance,
and HiGHS ended "optimal" 0.3 % above a plan SCIP found, with a bound above it too,
review rev31 audit C.)

Menus come from the instance (``bandwidth_options``, then the MILP optimum is the
instance optimum and its dual bound is reported: its rows and bounds are then widened to
what the evaluator accepts, `safe.accepted_rows`, and a plan the evaluator rejects is solved
again with the exact rows, the widened program's bound kept) or, for dimensions without one, from
the ``step`` parameter (multiples of ``step`` GB/s within the bounds; default 12.5 GB/s,
one 100 Gb/s lane): a restriction of the continuous problem, so no instance bound.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.bandwidth.blocks import max_bandwidths
from distplan.formulations.bandwidth.convex import check_bounded, emit_warnings
from distplan.formulations.bandwidth.data import Program, bandwidth_scale, prepare
from distplan.formulations.bandwidth.diagnose import no_solution, raise_if_starved
from distplan.formulations.bandwidth.outer import run_libra_perf_lp
from distplan.formulations.bandwidth.rows import BandwidthIndex, bandwidth_block, rows_block, scale_rows, solver_rows
from distplan.formulations.bandwidth.safe import accepted_bounds, accepted_rows
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.registry import Bound, Outcome, RecordedModelField, RunContext
from distplan.modeling.model import Model, linear_sum
from distplan.models.bandwidth_eval import evaluate
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_plan import BandwidthPlan
from distplan.models.bandwidth_records import GB
from distplan.solvers.result import Termination


def menus(ctx: RunContext, prog: Program, step: float, max_options: int) -> list[np.ndarray]:
    """Allowed bandwidths (GB/s) per dimension."""
    need_top = [k for k in range(prog.num_dims) if prog.options[k] is None and not np.isfinite(prog.ub[k])]
    top = max_bandwidths(ctx, prog, need_top) if need_top else {}
    missed = [k for k in need_top if k not in top]
    if missed:
        # the "largest B_d" LP stopped without a solution (out of time): the menu's top is
        # unknown, not infinite (review rev16: at --time-limit 1 a bounded dimension was
        # reported as having no upper bandwidth, exit 2)
        ended = ctx.solver_results[-1].termination.value if ctx.solver_results else "no solution"
        raise DeadlineReached(f"the largest bandwidth of dimension {prog.dims[missed[0]]} was not found ({ended})")
    out: list[np.ndarray] = []
    for k in range(prog.num_dims):
        given = prog.options[k]
        if given is not None:
            # every option of a plan the evaluator accepts: within the bounds widened by
            # its tolerance (`accepted_bounds`)
            low, high = accepted_bounds(prog)
            vals = given[(given >= low[k] * (1 - 1e-12)) & (given <= high[k] * (1 + 1e-12))]
        else:
            hi = prog.ub[k] if np.isfinite(prog.ub[k]) else top.get(k, np.inf)
            if not np.isfinite(hi):
                raise InputError(
                    "constraints", f"dimension {prog.dims[k]} has no upper bandwidth", "add max_bandwidth or a total_bandwidth constraint"
                )
            first = max(int(np.ceil(prog.lb[k] / step - 1e-9)), 1)
            last = int(np.floor(hi / step + 1e-9))
            # counted before the menu is made; an idle dimension's lb joins it unless on the grid
            on_grid = first <= last and step * first == prog.lb[k]
            count = max(0, last - first + 1) + (0 if prog.used[k] or on_grid else 1)
            if count > max_options:
                raise InputError(
                    "params.step",
                    f"{count} options of {step:g} GB/s for dimension {prog.dims[k]} (more than max_options {max_options})",
                    "use a larger step or raise max_options",
                )
            vals = step * np.arange(first, last + 1, dtype=float)
            if not prog.used[k]:
                vals = np.unique(np.concatenate([[prog.lb[k]], vals]))
        if prog.used[k]:
            vals = vals[vals > 0]
        if vals.size == 0:
            if given is not None:  # the instance's own options: no plan exists
                raise InfeasibleError(
                    f"{prog.instance.name}: libra_discrete: no bandwidth option of dimension {prog.dims[k]} lies within its bounds "
                    f"[{prog.lb[k]:g}, {prog.ub[k]:g}] GB/s",
                    details={"dimension": prog.dims[k]},
                )
            # multiples of the step: a grid of this formulation's, which proves nothing about
            # other bandwidths (review rev13c D3: exit 3 where libra_perf finds a plan)
            raise NoSolutionError(
                f"{prog.instance.name}: libra_discrete: no multiple of the step {step:g} GB/s lies within the bounds of dimension "
                f"{prog.dims[k]}, [{prog.lb[k]:g}, {hi:g}] GB/s (use a finer step, or bandwidth_options)",
                details={"dimension": prog.dims[k]},
            )
        out.append(vals)
    return out


@dataclass(frozen=True)
class MenuIndex(BandwidthIndex):
    """Link-speed menus: option j of dimension ``owner[j]`` has ``speeds[j]`` GB/s; ``t_unit``
    (s/GB) is the unit of the term times, 1 / (1000 sigma), so they are ~1e3 and the solver's
    absolute feasibility tolerance (~1e-6) is ~1e-9 of the time. The bandwidth variable is
    x = B / ``sigma`` (bounds and rows in that unit), so a menu of 2e-6 GB/s options is O(1)
    to the solver, not below its tolerance. ``objective_unit``: the seconds of one unit of
    the objective (`objective_unit_seconds`)."""

    sizes: np.ndarray
    owner: np.ndarray
    speeds: np.ndarray
    t_unit: float
    sigma: float
    objective_unit: float


def objective_unit_seconds(prog: Program) -> float:
    """The seconds of one unit of the menu MILP's objective: ``t_unit`` (1 / (1000 sigma)
    s/GB, sigma = `bandwidth_scale`) times the largest weight (GB), so that every cost
    (a weight over the largest) is at most 1. Derived from the instance alone, so `distplan
    verify` derives it again (`dual_bound_seconds`)."""
    largest = float(prog.weights.max()) if prog.weights.size else 0.0
    return (largest if largest > 0 else 1.0) / (1e3 * bandwidth_scale(prog))


def prepare_menus(prog: Program, params: Mapping[str, Any]) -> MenuIndex:
    """``menus``: per dimension the allowed bandwidths (GB/s); ``accepted``: bounds and
    rows widened to what the evaluator accepts (`accepted_bounds`, `accepted_rows`)."""
    menu = params["menus"]
    sizes = np.array([m.size for m in menu])
    owner = np.repeat(np.arange(prog.num_dims), sizes)
    sigma = bandwidth_scale(prog)
    if params.get("accepted", False):
        low, high = accepted_bounds(prog)
        rows = scale_rows(accepted_rows(prog), sigma)
    else:
        low, high, rows = prog.lb, prog.ub, solver_rows(prog, sigma)
    return MenuIndex(low / sigma, high / sigma, rows, sizes, owner, np.concatenate(menu), 1.0 / (1e3 * sigma), sigma, objective_unit_seconds(prog))


def menu_choice(model: Model, prog: Program, index: MenuIndex) -> None:
    """z_j binary, one option per dimension, and B_d the chosen option's speed."""
    D = prog.num_dims
    z = model.add_vars("choice", index.speeds.size, vtype="binary")
    model.add_constraints("one-option", z.group_sum(index.owner, D) == 1.0)
    model.add_constraints("bandwidth-is-option", (z * (index.speeds / index.sigma)).group_sum(index.owner, D) - model["bandwidth"] == 0.0)


def menu_time(model: Model, prog: Program, index: MenuIndex) -> None:
    """t_k >= u_kd / b_j z_j summed over d's options, for every (k, d) with u_kd > 0 (t in
    units of ``t_unit``); min sum_k w_k t_k in units of ``objective_unit`` seconds, which
    the model's record notes (``objective_unit_seconds``, `OBJECTIVE_UNIT`)."""
    z = model["choice"]
    model.notes[OBJECTIVE_UNIT.name] = float(index.objective_unit)
    if not prog.used.any():
        model.minimize(0.0 * z.sum())
        return
    t = model.add_vars("term_time", prog.terms.shape[0], lb=0.0)
    kk, dd = np.nonzero(prog.terms)
    row_parts, col_parts, coef_parts = [np.arange(kk.size)], [t.index[kk]], [np.ones(kk.size)]
    for r, (k, d) in enumerate(zip(kk, dd, strict=True)):
        opts = np.flatnonzero(index.owner == d)
        row_parts.append(np.full(opts.size, r))
        col_parts.append(z.index[opts])
        coef_parts.append(-prog.terms[k, d] / index.speeds[opts] / index.t_unit)
    expr = linear_sum(np.concatenate(col_parts), np.concatenate(coef_parts), np.concatenate(row_parts), kk.size, model.num_vars)
    model.add_constraints("term_time", expr >= 0.0)
    model.minimize((t * (prog.weights * (index.t_unit / index.objective_unit))).sum())


#: LIBRA's minimum training time over link-speed menus, exact as a MILP
DISCRETE = ModelSpec("libra_discrete", prepare_menus, (bandwidth_block, menu_choice, rows_block, menu_time))


#: the seconds of one unit of the menu MILP's objective, in its calls' model records from
#: record version 6 on (before, the MILP counted seconds)
OBJECTIVE_UNIT = RecordedModelField(
    "objective_unit_seconds", r"^libra_discrete$", tuple(t.value for t in Termination),
    "every call of the menu MILP records the seconds of its objective's unit (`menu_time`; `dual_bound_seconds` reads it)", since=6,
)


def dual_bound_seconds(call_bound: float, inst: BandwidthInstance, model: Mapping[str, Any]) -> float:
    """The iteration seconds of ``inst`` that a dual bound of the menu MILP proves: the
    MILP counts communication time in units of ``objective_unit_seconds`` (its model
    record's; a record without it, written before record version 6, counted seconds), so
    its bound times the unit, plus the compute seconds, which no choice of bandwidth
    changes (`data.prepare`). The recorded unit must be the one the instance gives
    (`objective_unit_seconds`, derived again here: a ValueError otherwise).
    libra_discrete's stated conversion of its solver calls' bounds
    (`registry.BOUND_SOURCES`); ``model``: the call's model record (`registry.Conversion`'s
    contract)."""
    prog = prepare(inst)
    unit = model.get(OBJECTIVE_UNIT.name)
    if unit is None:
        return prog.compute_seconds + call_bound
    if unit != objective_unit_seconds(prog):
        raise ValueError(f"{OBJECTIVE_UNIT.name} {unit!r} but the menu MILP of this instance counts {objective_unit_seconds(prog)!r} s a unit")
    return prog.compute_seconds + call_bound * unit


def run_libra_discrete(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    step = float(ctx.param("step", 12.5))
    max_options = int(ctx.param("max_options", 400))
    if step <= 0:
        raise InputError("params.step", f"{step:g} must be > 0 GB/s", "give a link speed step such as 12.5")
    prog = prepare(inst)
    raise_if_starved(prog, "libra_discrete")
    check_bounded(ctx, prog)
    emit_warnings(prog)
    exact = all(o is not None for o in prog.options)
    t0 = time.perf_counter()
    menu = menus(ctx, prog, step, max_options)
    # the instance's own menus: the program of every plan the evaluator accepts (its bound
    # and an infeasibility hold for all of them); a step's menus restrict the problem and
    # prove nothing, so their rows stay exact
    model, index = DISCRETE.build(prog, {"menus": menu, "accepted": exact}, name="libra_discrete")
    sizes = index.sizes
    build = time.perf_counter() - t0
    result = ctx.solve_model(model, build_seconds=build)
    if not result.has_solution:
        no_solution(ctx, prog, result, "libra_discrete")
        if result.termination.value in ("infeasible", "infeasible_or_unbounded"):
            text = (
                f"{inst.name}: libra_discrete: the constraints can be met continuously but by no combination of menu options "
                f"({result.termination.value}); use a finer step or more bandwidth_options"
            )
            if exact:  # the instance's own menus: proven
                raise InfeasibleError(text, details={"options_per_dimension": sizes.tolist()})
            raise NoSolutionError(text, details={"options_per_dimension": sizes.tolist()})
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    Bv = picked(result, index)
    proof = result
    if exact and not evaluate(inst, menu_plan(prog, Bv)).feasible:
        # the widened rows' plan is beyond what the evaluator accepts (they allow its
        # tolerance at the most a row's terms can reach): solved again with the exact
        # rows, whose plan decides; the bound stays the widened program's
        exact_model, exact_index = DISCRETE.build(prog, {"menus": menu}, name="libra_discrete")
        again = ctx.solve_model(exact_model)
        if again.has_solution:
            result, Bv = again, picked(again, exact_index)
    if not evaluate(inst, menu_plan(prog, Bv)).feasible:
        raise_if_starved(prog, "libra_discrete")
        return Outcome(plan=None, solver_results=list(ctx.solver_results), termination=Termination.NUMERICAL,
                       info={"no_plan": f"libra_discrete: the options the solver picked ({result.termination.value}) miss the constraints "
                                        "by more than the evaluator's tolerance (no proof that no combination meets them)"})
    bounds: list[Bound] = []
    info: dict[str, Any] = {
        "options_per_dimension": sizes.tolist(),
        "menu_from_instance": exact,
        "step_gbps": None if exact else step,
        "warnings": list(prog.warnings),
    }
    if proof.bound is not None:
        info["menu_problem_bound_seconds"] = dual_bound_seconds(proof.bound, inst, proof.extra.get("model", {}))
        if exact:
            # the menus are the instance's: the MILP's dual bound (with the backend's margin
            # for its tolerances) over the rows the evaluator accepts bounds the instance
            bounds.append(Bound(info["menu_problem_bound_seconds"], f"libra_discrete MILP dual bound ({proof.backend})", grade="solver", solver_record=proof))
    if not exact:
        # menus from ``step`` restrict the continuous problem: its least time bounds every
        # plan, menu or not; proven exactly at the tangent-cut LPs' allocation
        cont = run_libra_perf_lp(inst, ctx.child({"tolerance": 1e-7, "max_rounds": 500}))
        ctx.solver_results.extend(cont.solver_results)
        info["continuous_relaxation"] = {k: cont.info[k] for k in ("relative_gap", "upper_bound_seconds") if k in cont.info}
        bounds.extend(Bound(b.value, "libra_discrete continuous relaxation: " + b.source, grade=b.grade, certificate=b.certificate) for b in cont.bounds)
    claimed = prog.compute_seconds + result.objective * index.objective_unit if (exact and result.objective is not None) else None
    return Outcome(
        plan=menu_plan(prog, Bv),
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=claimed,
        proven_optimal=exact and result is proof and result.termination.value == "optimal",
        info=info,
    )


def picked(result: Any, index: MenuIndex) -> np.ndarray:
    """The options (GB/s) the solver picked, one per dimension: the plan is always the
    options themselves (the continuous B only mirrors them, to the solver's tolerance);
    the evaluator then holds them to the rows."""
    choice = np.asarray(result.values_by_block["choice"], dtype=float)
    owner, speeds = index.owner, index.speeds
    return np.array([speeds[np.flatnonzero(owner == d)][np.argmax(choice[owner == d])] for d in range(index.sizes.size)])


def menu_plan(prog: Program, Bv: np.ndarray) -> BandwidthPlan:
    """The plan of options ``Bv`` (GB/s): `Program.to_plan`, except that an instance
    option within the evaluator's tolerance outside the dimension's bounds stays itself
    (clipped, it would be no option at all)."""
    plan = prog.to_plan(Bv, "time")
    if all(o is not None for o in prog.options):
        plan = BandwidthPlan(bandwidth={n: float(v) * GB for n, v in zip(prog.dims, Bv, strict=True)}, objective="time")
    return plan
