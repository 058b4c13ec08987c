"""The exact whole-schedule MILP (Zero Bubble style; Qi et al., ICLR 2024, Sec. 3).

Operations are (block, micro-batch) pairs with start times ``s`` (seconds). Rows:

* dependencies with their delays, and the symmetry chains ``s[b, m+1] >= s[b, m] + d_b``
  (micro-batches are identical: sorting each block's start times keeps every constraint,
  so some optimum runs each block's micro-batches in order);
* memory-implied precedences (`memory_implied_arcs`): when the memory known to be held
  at an allocating operation exceeds the capacity, some freeing operations must come
  first; they become arcs, and pairs they order need no binary;
* one order binary per pair of operations sharing a device with no path between them
  (through dependencies and symmetry chains), with big-M rows from a valid horizon
  (the best known makespan), or, for the device-span objective, the best known span
  (operations of one device lie within one span);
* order transitivity along chains (``[i before j] <= [pred(i) before j]``);
* memory as prefix sums at every operation that allocates: the deltas of the operations
  known to precede it plus those of unrelated ones ordered before it, within capacity;
* the objective (makespan, or Zero Bubble's longest per-device span) as an epigraph, and
  energy cuts: after an operation ends, its device still has to run all the work ordered
  after it (and before it starts, all the work ordered before it).

With integral durations and delays the objective variable is declared integer (some
optimal schedule has integral times), so the solver's bound is rounded up.

The model is built by the shared engine (`opmodel.py`), which schedules any subset of
operations (`OpProblem`): Tessel's warm-up and cool-down completions use it with release
times, initial memory and deadlines. For integral data the same schedule space is also
written in time-indexed form (`timeindexed.py`), whose LP bound is much stronger; `run_pipeline_milp` (``model=auto``)
runs a short disjunctive solve and then the time-indexed one. The warm start is the best
of the classic schedules, the stacked-barrier schedule (`barriers.py`) and
(``warm_start=tessel``, default; ``baselines``: without it) Tessel's unrolled repetend.

When the time-indexed model is too large (the disjunctive one is picked), two proofs come
first: a warm start that meets a solver-free bound (`bounds.py`, e.g. the barrier
contraction bound) is optimal as it stands, and for integral data without delays the
exact state search (`statesearch.py`, up to 70% of the remaining time) finds a better
schedule or proves there is none; the big-M model only runs when both fail.
"""

from __future__ import annotations

import functools
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, baseline_deadline, check, past
from distplan.formulations.pipeline import statesearch
from distplan.formulations.pipeline.barriers import stacked_plan, stacking
from distplan.formulations.pipeline.baselines import baseline_incumbent, best_baseline
from distplan.formulations.pipeline.common import (
    check_capacity,
    check_size,
    device_capacities,
    integral_data,
    memory_fits,
    orders_from_starts,
    retime,
    schedule_objective,
)
from distplan.formulations.pipeline.opmodel import (
    CLOSURE_MAX_OPS,
    OP_MODEL,
    ClosureTooLarge,
    OpIndex,
    OpProblem,
    full_problem,
    prepare_ops,
    serial_horizon,
)
from distplan.formulations.pipeline.opsolve import choose_model, solve_op_problem
from distplan.formulations.pipeline.tessel import DEFAULTS, run_tessel
from distplan.formulations.pipeline.timeindexed import build_ti_model, ti_size
from distplan.formulations.registry import Bound, Outcome, RecordedModelField, RunContext, Unchecked, solver_free_bounds
from distplan.modeling.model import InfeasibleByConstruction, Model
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate, make_plan
from distplan.solvers.result import SolverResult, Termination, model_record


@dataclass(frozen=True)
class WarmStart:
    """A named schedule and its objective (seconds) by the evaluator, computed once."""

    name: str
    plan: PipelinePlan
    value: float

    @classmethod
    def of(cls, inst: PipelineInstance, name: str, plan: PipelinePlan) -> WarmStart:
        return cls(name, plan, evaluate(inst, plan).objective)


def whole_problem(inst: PipelineInstance, energy_cuts: bool = True, deadline: float | None = None) -> tuple[OpProblem, WarmStart | None]:
    """Every (block, micro-batch) operation of the run, with the valid horizon (makespan) or
    span bound from the best baseline, and that baseline (the warm start; none when the
    run's ``deadline`` passes first, and `BASELINE_GRACE` from now too; then, without one,
    `DeadlineReached`)."""
    check_capacity(inst)
    best = baseline_incumbent(inst, baseline_deadline(deadline))
    found = None if best is None else WarmStart.of(inst, *best)
    if found is None:
        check(deadline, "the whole-schedule problem")
    prob = full_problem(inst, serial_horizon(inst), energy_cuts)
    # the memory rows (and the precedences they imply) at the most any schedule the
    # evaluator accepts holds, so that the programs' bounds hold for every one of them
    # (at the exact capacity, the rows cut off schedules the evaluator accepts: review
    # rev16 D3); a solution that uses the room beyond what it surely accepts is not taken
    prob.capacity = device_capacities(inst, proof=True)
    if found is not None:
        restrict_value(inst, prob, found.value * (1 + 1e-9) + 1e-9)
    return prob, found


def restrict_value(inst: PipelineInstance, prob: OpProblem, cap: float) -> None:
    """Restrict ``prob`` to schedules of value <= ``cap`` (time units): the horizon for a
    makespan objective, else the span bound (its models' windows end there)."""
    if inst.objective == "makespan":
        prob.horizon = min(prob.horizon, cap)
    else:
        prob.span_ub = min(prob.span_ub or math.inf, cap)


@dataclass(frozen=True)
class ScheduleIndex:
    """The whole-schedule model's index (block contract): its operations and the op
    model's index over them."""

    problem: OpProblem
    ops: OpIndex


def prepare_schedule(inst: PipelineInstance, params: Mapping[str, Any]) -> ScheduleIndex:
    prob, _ = whole_problem(inst, bool(params.get("energy_cuts", True)))
    return ScheduleIndex(prob, prepare_ops(prob, params))


def _on_operations(fn: Any) -> Any:
    """An op-model block as a block of the whole schedule."""

    def block(model: Model, inst: PipelineInstance, index: ScheduleIndex) -> None:
        fn(model, index.problem, index.ops)

    block.__name__ = fn.__name__
    block.__doc__ = fn.__doc__
    return block


#: the disjunctive (Zero Bubble style) model of the whole run, as exported by `distplan export`
PIPELINE_MILP = ModelSpec("pipeline_milp", prepare_schedule, tuple(_on_operations(f) for f in OP_MODEL.blocks))


def dual_bound_value(call_bound: float, inst: PipelineInstance, model: Mapping[str, Any] | None = None) -> float:
    """What a solver's dual bound of the op model proves of ``inst``'s objective (its own
    time units): rounded up to a whole number (less 1e-6 of the solver's tolerance) when
    ``inst``'s durations and delays are exact integers (`common.integral_data`: then some
    optimum has integral times; the time-indexed model runs only on such data), else the
    bound itself. pipeline_milp's stated conversion of its solver calls' bounds
    (`registry.BOUND_SOURCES`, `registry.Conversion`), applied by the formulation and by
    `distplan verify` alike; the call's model record (``model``) is not read: integrality
    is the instance's, never the record's (taking the larger of the bound and its ceiling
    let a bound on fractional data be raised to the next integer, review rev17 F20)."""
    return float(math.ceil(call_bound - 1e-6)) if integral_data(inst, exact=True) else call_bound


#: the proof that no schedule beats an incumbent of value U + 1 (integral data): the
#: time-indexed model restricted to values <= U infeasible, by a solver call or by
#: construction (`below_incumbent_premise` reads U back; `exact_value` writes it)
NO_SCHEDULE = re.compile(r"^pipeline_milp: no schedule of value <= (\S+) \(")
#: the source's detail when a solver call found the restricted model infeasible
INFEASIBLE_CALL = "time-indexed model infeasible, "
#: the most memory (bytes) `distplan verify` spends rebuilding a time-indexed model below
#: an incumbent (`rebuild_below`), estimated before the build (`rebuild_bytes`): x-shape
#: p = 3, N = 1 in units of 7e4 (U = 1,049,999: 2.5M steps) takes 2.4 GB and 5 s, v-shape
#: p = 8, N = 1000 (23.5M steps) 14 GB
REBUILD_MAX_BYTES = 3 * 2**30
#: the most time (seconds) the rebuild's memory-implied precedences may take
REBUILD_SECONDS = 60.0
#: bytes per step variable and per (operation on a device, time step) of the rebuilt model
#: (`rebuild_bytes`). Measured by ``python benchmarks/bench_rebuild_bytes.py`` (peak RSS of
#: the build in a fresh process, 27 cases of v, x and nn shapes, 2-8 stages, 1-300
#: micro-batches, 0.3-1,500 MB): the one-at-a-time rows (`scheduling.step_resource`)
#: materialize every operation of a device at every time step, so the rows' term grows with
#: operation-device pairs, not devices (the former 600 bytes per step and 300 per device and
#: time step gave 0.27-0.50 of the peak on nn shapes). These give 1.07-1.97 of the peak on
#: every case of more than 50 MB (smaller ones are far below the cap either way).
_STEP_BYTES, _ROW_BYTES = 300, 200


def exact_value(value: float) -> str:
    """``value`` (time units) as the source text writes U: a whole number as an integer,
    else ``repr`` (which ``float`` reads back exactly; ``{:g}`` wrote 1,049,999 as
    1.05e+06, review rev18)."""
    value = float(value)
    return str(int(value)) if value.is_integer() else repr(value)


def proved_below(cap: float) -> int:
    """What an infeasible time-indexed model restricted to values <= ``cap`` (time units)
    proves: no schedule of value <= floor(cap) (the model floors its horizon or span bound,
    `timeindexed.windows`, with the same 1e-9), so none below floor(cap) + 1, the most the
    proof gives (integral data)."""
    return math.floor(cap + 1e-9)


def _real(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


#: the model record's ``value_at_most`` (`RecordedModelField`): `run_pipeline_milp` writes
#: it on every call of a model restricted below the incumbent, and `below_incumbent_premise`
#: reads it from the infeasible time-indexed calls the bound rests on (without it, an older
#: record, the premise rebuilds the model to compare sizes, or leaves the bound unchecked)
VALUE_AT_MOST = RecordedModelField("value_at_most", r"-time-indexed$", ("infeasible",), "every call of a time-indexed model restricted below the incumbent records the values its model admitted (`below_incumbent_premise` reads it)")


def below_incumbent_premise(inst: PipelineInstance, entry: Mapping[str, Any], calls: Sequence[Any]) -> str | None:
    """The premise of the bound "pipeline_milp: no schedule of value <= U (...)"
    (`registry.Premise`), None when it holds, else why not: ``inst``'s durations and delays
    are exact integers (the time-indexed model's data: then no schedule of value <= U
    means none below floor(U) + 1), the bound is at most floor(U) + 1 (time units: the
    model floors U, `proved_below`), and the time-indexed model restricted to values <= U
    is infeasible: where the source says a solver found it so, a call of the run
    (``calls``, the result's ``solver_results``) solved a model named "...-time-indexed"
    and ended "infeasible", restricted to values of at least floor(U) (`call_proves`);
    where the source says it was infeasible by construction (no call), rebuilding it from
    ``inst`` finds it so (`empty_below`; a model too large to rebuild here is not taken)."""
    source = str(entry.get("source"))
    found = NO_SCHEDULE.search(source)
    try:
        cap = float(found.group(1)) if found is not None else math.nan
    except ValueError:
        cap = math.nan
    if not math.isfinite(cap):
        return "its source names no value U"
    value = entry.get("value")
    if not integral_data(inst, exact=True):
        return "the instance's durations and delays are not all integers: the time-indexed model, whose infeasibility the proof is, runs on integral data only"
    most = proved_below(cap) + 1
    if isinstance(value, bool) or not isinstance(value, int | float) or not value <= most:
        return f"the bound {value!r} is above floor(U) + 1 = {most} (U = {exact_value(cap)}: the time-indexed model restricted to values <= U admits whole values <= floor(U) only)"
    if INFEASIBLE_CALL not in source:
        return empty_below(inst, cap)
    models = [model_record(c) for c in calls if isinstance(c, dict) and c.get("termination") == "infeasible"]
    solved = [m for m in models if str(m.get("name")).endswith("-time-indexed")]
    if not solved:
        return "no solver call of the run solved the time-indexed model and found it infeasible"
    # the calls that say which values they admitted first; the model at U is rebuilt at
    # most once, and only for calls that do not say (read18: one rebuild per call before)
    solved.sort(key=lambda m: VALUE_AT_MOST.name not in m)
    rebuilt = functools.cache(lambda: rebuild_below(inst, cap))
    first: str | None = None
    unchecked: Unchecked | None = None
    for m in solved:
        try:
            why = call_proves(inst, m, cap, rebuilt)
        except Unchecked as exc:
            unchecked = unchecked or exc
            continue
        if why is None:
            return None
        first = first or why
    if unchecked is not None:
        raise unchecked
    return first


def call_proves(inst: PipelineInstance, model: Mapping[str, Any], cap: float, rebuilt: Callable[[], tuple[Model | None, str | None]] | None = None) -> str | None:
    """None when the infeasible time-indexed model of a call (its record ``model``,
    ``extra.model``) was restricted to values of at least floor(``cap``) (time units), else
    why not. Its ``value_at_most`` (every call below an incumbent records it) says so; one
    that is not a finite real number is a problem. A record without it (written before
    records kept it) must keep the model's ``variables`` (every model record has, since
    records were first kept), equal to those of the model rebuilt at ``cap``
    (``rebuilt``: `rebuild_below` at ``cap``, computed once by the caller): a model
    restricted lower has fewer start times, a larger count is not the model at U. Where the
    rebuild cannot be made here, `registry.Unchecked` (verify notes what was not checked)."""
    if VALUE_AT_MOST.name in model:
        at_most = model[VALUE_AT_MOST.name]
        if not _real(at_most):
            return f"its infeasible time-indexed call records value_at_most {at_most!r}, not a finite real number: nothing says which values its model admitted"
        if proved_below(float(at_most)) < proved_below(cap):
            return f"the infeasible time-indexed model its call solved admitted values <= {exact_value(float(at_most))} only, not U = {exact_value(cap)}"
        return None
    variables = model.get("variables")
    if isinstance(variables, bool) or not isinstance(variables, int | float) or not _real(variables):
        return f"its infeasible time-indexed call records neither value_at_most nor its model's variables ({variables!r}), which every model record keeps: nothing says which values its model admitted"
    built, why = (rebuilt or (lambda: rebuild_below(inst, cap)))()
    if why is None and built is None:
        return None  # the model at U is empty by construction: the proof holds without the call
    if why is None and built is not None:
        count = int(built.num_vars)
        if variables != count:
            return f"its infeasible time-indexed call records no value_at_most, and its model ({variables!r} variables) is not the time-indexed model restricted to values <= U = {exact_value(cap)} ({count} variables)"
        return None
    raise Unchecked(f"its infeasible time-indexed call records no value_at_most (an older record) and its model ({variables!r} variables) cannot be compared with the one restricted at U = {exact_value(cap)} ({why}): which values it admitted")


def restricted_problem(inst: PipelineInstance, cap: float) -> OpProblem:
    """The problem `run_pipeline_milp` builds its time-indexed model of below an
    incumbent: every operation, memory rows at the proof capacities, the horizon
    (makespan) or span bound at ``cap`` (time units)."""
    prob = full_problem(inst, serial_horizon(inst), True)
    prob.capacity = device_capacities(inst, proof=True)
    restrict_value(inst, prob, cap)
    prob.integral = True
    return prob


def rebuild_bytes(prob: OpProblem) -> float:
    """Estimated memory (bytes) of the time-indexed model of ``prob``, before building it:
    its step variables (`timeindexed.ti_size`, the operations' start windows: at most
    operations x (floor(horizon) + 1)) and its rows' terms per operation on a device and
    time step up to the horizon or span bound (`_STEP_BYTES` says what was measured)."""
    bound = prob.horizon if prob.objective == "makespan" or prob.span_ub is None else min(prob.horizon, prob.span_ub)
    steps = float(ti_size(prob))
    return _STEP_BYTES * steps + _ROW_BYTES * float(prob.mask.sum()) * (math.floor(bound + 1e-9) + 1.0)


def rebuild_below(inst: PipelineInstance, cap: float) -> tuple[Model | None, str | None]:
    """The time-indexed model of ``inst`` restricted to values <= ``cap`` (time units), as
    `run_pipeline_milp` builds it below an incumbent (`restricted_problem`): ``(model,
    None)``; ``(None, None)`` when it is infeasible by construction; ``(None, why)`` when
    it cannot be rebuilt here: more operations than the transitive closure takes
    (`opmodel.CLOSURE_MAX_OPS`), an estimated size above `REBUILD_MAX_BYTES`
    (`rebuild_bytes`, checked before building), or a build that passes `REBUILD_SECONDS`
    or runs out of memory."""
    n_ops = inst.n_blocks * inst.micro_batches
    if n_ops > CLOSURE_MAX_OPS:
        return None, f"cannot be re-checked here ({n_ops} operations, more than the {CLOSURE_MAX_OPS} the time-indexed model is built for)"
    prob = restricted_problem(inst, cap)
    size = rebuild_bytes(prob)
    if size > REBUILD_MAX_BYTES:
        return None, f"cannot be re-checked here (the time-indexed model restricted to values <= {exact_value(cap)} would take ~{size / 2**30:.1f} GiB to rebuild, more than the {REBUILD_MAX_BYTES / 2**30:g} GiB verify spends)"
    try:
        model, _ = build_ti_model(prob, time.perf_counter() + REBUILD_SECONDS)
    except (InfeasibleByConstruction, InfeasibleError):
        return None, None
    except (DeadlineReached, MemoryError) as exc:  # (ClosureTooLarge is a DeadlineReached)
        return None, f"cannot be re-checked here (rebuilding the time-indexed model restricted to values <= {exact_value(cap)}: {type(exc).__name__}: {exc})"
    return model, None


def empty_below(inst: PipelineInstance, cap: float) -> str | None:
    """None when the time-indexed model of ``inst`` restricted to values <= ``cap`` (time
    units) is infeasible by construction, as `run_pipeline_milp` builds it below an
    incumbent (`rebuild_below`: every operation, memory rows at the proof capacities, the
    horizon or span bound at ``cap``; with energy cuts, which only add rows: a model empty
    without them is empty with them); else why not (a model too large to rebuild here
    "cannot be re-checked here")."""
    built, why = rebuild_below(inst, cap)
    if why is not None:
        return f"the time-indexed model restricted to values <= {exact_value(cap)}, which the source says is infeasible by construction, {why}"
    if built is None:
        return None
    return f"the time-indexed model restricted to values <= {exact_value(cap)}, rebuilt from the instance, is not infeasible by construction, and no solver call of the run found it infeasible"


def run_pipeline_milp(inst: PipelineInstance, ctx: RunContext) -> Outcome:
    """Solve the whole-schedule MILP warm-started from the best known schedule; decode
    the device orders and retime them exactly (earliest starts, or an LP for the span).

    ``model``: ``disjunctive`` (Zero Bubble style), ``time_indexed`` (integral data), or
    ``auto``: for integral data of moderate size, a short disjunctive solve first (fast
    when memory is loose) and then, unless that proved optimality, the time-indexed model
    warm-started from its incumbent; otherwise disjunctive. ``below_incumbent`` (default
    True): the time-indexed model searches only schedules better than the incumbent, so
    an infeasible model proves the incumbent optimal; False solves it whole, warm-started
    from the incumbent, and the proof is its dual bound.

    The run's deadline: the warm starts past it are skipped (baselines, stacked barriers,
    tessel), a model whose build passes it is not solved; the incumbent so far is returned
    with termination TIME_LIMIT (with none, no plan)."""
    check_size(inst)
    if ctx.options.mip_gap is None:
        ctx.options = ctx.options.with_(mip_gap=1e-6)
    params = dict(ctx.params)
    t0 = time.perf_counter()
    deadline = ctx.deadline
    prob, found = whole_problem(inst, bool(params.get("energy_cuts", True)), deadline)
    found = _with_stacked(inst, found, prob, deadline)
    free = max(solver_free_bounds(inst), key=lambda b: b.value, default=None)  # safe, rounded down

    def meets_free_bound(value: float) -> bool:
        return free is not None and value <= free.value * (1 + 1e-6)

    if str(params.get("warm_start", "tessel")) == "tessel" and not (found is not None and meets_free_bound(found.value)) and not past(deadline):
        found = _with_tessel(inst, ctx, found, prob)
    incumbent = found.plan.start.reshape(-1) if found is not None else None
    incumbent_plan = None if found is None else found.plan  # (until a solver call beats it)
    best_value = schedule_objective(inst, incumbent) if incumbent is not None else math.inf
    prep = time.perf_counter() - t0
    requested = str(params.get("model", "auto"))
    kind = choose_model(prob, requested)
    stages: list[tuple[str, float | None]] = [(kind, None)]
    if requested == "auto" and kind == "time_indexed":
        remaining = ctx.remaining_time()
        stages = [("disjunctive", 2.0 if remaining is None else min(2.0, 0.15 * remaining)), ("time_indexed", None)]
    bounds: list[Bound] = []
    info: dict[str, Any] = {"model": {}}
    res: SolverResult | None = None
    below_infeasible = False  # the last stage proved that nothing beats the incumbent
    timed_out = False  # a model's build passed the run's deadline
    # a warm start that meets a solver-free bound needs no disjunctive program (the small
    # time-indexed model proves such an incumbent itself in seconds, by an infeasible
    # model below it; the disjunctive one spent a 60 s limit on mshape N = 16 at bound 100)
    if kind == "disjunctive" and free is not None and meets_free_bound(best_value):
        bounds.append(Bound(free.value, f"pipeline_milp: {free.source}", "safe"))
        stages, below_infeasible = [], True
        info["model"]["proved by"] = "solver-free bound"
    elif kind == "disjunctive" and math.isfinite(best_value) and statesearch.applicable(inst):
        # the exact state search (`statesearch.py`) before the big-M model, on up to 70% of
        # the remaining time: NN shape, memory 4, N = 16 proves 153 in ~1.5 s of CPU and
        # memory 5 proves 145 in ~5.5 s, where the big-M model's bound stays at the
        # solver-free one (mshape N = 16: 100 after 60 s)
        remaining = ctx.remaining_time()
        search_deadline = None if remaining is None else time.perf_counter() + 0.7 * remaining
        plan, out = statesearch.prove_makespan(inst, best_value, search_deadline)
        info["state_search"] = {"complete": out.complete, "states": out.states, **out.info}
        if plan is not None and out.value is not None and out.value < best_value:
            incumbent, best_value, found = plan.start.reshape(-1), out.value, WarmStart("state search", plan, out.value)
            incumbent_plan = plan
        # (its bounds hold for exact integral durations only: `statesearch.bound_is_exact`;
        # durations within 1e-12 of integers are searched rounded, for a plan)
        proves = statesearch.bound_is_exact(inst)
        if out.complete and proves:
            bounds.append(Bound(out.bound, f"pipeline_milp: exact state search (no schedule below {out.bound:g})", "safe"))
            stages, below_infeasible = [], True
        elif math.isfinite(out.bound) and proves:
            bounds.append(Bound(out.bound, "pipeline_milp: state search, open layer (stopped)", "safe"))
    stage = kind
    for stage, limit in stages:
        sub = ctx
        if limit is not None:
            sub = ctx.child(time_limit=limit, share_records=True)
        # Time-indexed stage with an incumbent U: search only schedules of value <= U - 1
        # (a destructive bound: the tighter windows shrink the model and strengthen its
        # LP). Infeasible proves U optimal; otherwise the solve improves on U.
        # (The time-indexed model needs integral data, where some optimum has an integral
        # value: "better than U" is "at most ceil(U) - 1".)
        below = stage == "time_indexed" and math.isfinite(best_value) and bool(params.get("below_incumbent", True))
        cap = math.ceil(best_value - 1e-9) - 1.0 if below else math.inf
        target = cap if below else best_value * (1 + 1e-9) + 1e-9
        if math.isfinite(best_value):
            restrict_value(inst, prob, target)
        try:
            start, res, mdata = solve_op_problem(prob, sub, None if below else incumbent, stage)
        except ClosureTooLarge as exc:  # too many operations for any model: the incumbent stands
            info["model"][stage] = {"operations": prob.n, "termination": f"not built ({exc})"}
            if past(deadline):
                timed_out = True
            break
        except DeadlineReached:
            # the build outlasted the stage's time (a short first stage: the next one
            # runs) or the run's (the incumbent stands)
            info["model"][stage] = {"operations": prob.n, "termination": "time_limit (model build)"}
            if past(deadline):
                timed_out = True
                break
            continue
        except (InfeasibleByConstruction, InfeasibleError) as exc:
            if not below:
                raise
            # the start windows below the incumbent already exclude every schedule
            bounds.append(Bound(cap + 1.0, f"pipeline_milp: no schedule of value <= {exact_value(cap)} ({exc})"))
            info["model"][stage] = {"operations": prob.n, "termination": "infeasible by construction"}
            below_infeasible = True
            break
        res.build_seconds += prep
        prep = 0.0
        if below and isinstance(res.extra.get("model"), dict):
            res.extra["model"][VALUE_AT_MOST.name] = cap  # (what an infeasible call proves: `below_incumbent_premise`)
        if below and res.termination is Termination.INFEASIBLE:
            below_infeasible = True
            bounds.append(Bound(cap + 1.0, f"pipeline_milp: no schedule of value <= {exact_value(cap)} ({INFEASIBLE_CALL}{res.backend})"))
        elif res.bound is not None and math.isfinite(res.bound):
            value = dual_bound_value(res.bound, inst, res.extra.get("model", {}))
            if below:
                value = min(value, cap + 1.0)  # the bound holds up to cap; above it lies U
            bounds.append(Bound(value, f"pipeline_milp dual bound ({stage}, {res.backend})", solver_record=res))
        info["model"][stage] = {"operations": prob.n, "implied_precedences": int(mdata.get("implied_arcs", 0)), "termination": res.termination.value, **_size(res)}
        if start is not None and schedule_objective(inst, start) < best_value and memory_fits(inst, orders_from_starts(inst, start.reshape(inst.n_blocks, inst.micro_batches))):
            incumbent, best_value, incumbent_plan = start, schedule_objective(inst, start), None
        top = max((b.value for b in bounds), default=-math.inf)
        if top >= best_value * (1 - 1e-6) - 1e-9:
            break
    info["model"]["kind"] = stage
    if found is not None:
        info["warm_start"] = found.name
    bounds.sort(key=lambda b: -b.value)
    if incumbent is None:
        return Outcome(plan=None, bounds=bounds, solver_results=list(ctx.solver_results), info=info, termination=Termination.TIME_LIMIT if timed_out else None)
    orders = orders_from_starts(inst, incumbent.reshape(inst.n_blocks, inst.micro_batches))
    try:
        # a solver's times are retimed exactly whatever the hour (its model was small
        # enough to solve); a warm start's are already a checked plan, kept as they are
        # once the run's limit passes (524,288 operations: 0.46 s, review rev25)
        exact = retime(inst, orders, ctx, deadline=None if incumbent_plan is None else ctx.deadline)
    except DeadlineReached:
        assert incumbent_plan is not None
        exact, timed_out = incumbent_plan.start, True
    ended = Termination.TIME_LIMIT if timed_out else None
    if res is not None:  # the last MILP's record is the run's last (its termination is the run's)
        ctx.solver_results.remove(res)
        ctx.solver_results.append(res)
    exact = exact - exact.min()
    plan = make_plan(inst, exact, {"schedule": "pipeline_milp", "model": stage, **({"warm_start": found.name} if found else {})})
    chk = evaluate(inst, plan)
    proven = bool(bounds) and chk.feasible and chk.objective <= bounds[0].value * (1 + 1e-6) + 1e-9
    return Outcome(
        plan=plan,
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=chk.objective if proven else None,
        proven_optimal=proven,
        info=info,
        termination=Termination.OPTIMAL if proven and below_infeasible else ended,
    )


def _with_tessel(inst: PipelineInstance, ctx: RunContext, found: WarmStart | None, prob: OpProblem) -> WarmStart | None:
    """The better warm start of the best baseline and the tessel heuristic (time-limited
    to a quarter of the remaining time); tightens the horizon / span bound."""
    remaining = ctx.remaining_time()
    # (without the classic schedules: the caller holds them, and a limited tessel would
    # compute them again first)
    sub = ctx.child({**DEFAULTS, "baselines": False}, None if remaining is None else max(0.5, remaining / 4), share_records=True)
    try:
        out = run_tessel(inst, sub)
    except (InfeasibleError, InputError, NoSolutionError, DeadlineReached):
        return found
    return _better_start(inst, found, WarmStart.of(inst, "tessel", out.plan), prob)


def _with_stacked(inst: PipelineInstance, found: WarmStart | None, prob: OpProblem, deadline: float | None = None) -> WarmStart | None:
    """The better warm start of ``found`` and the stacked-barrier schedule (`barriers.py`:
    head barriers first, the best baseline of the rest, tail barriers last); tightens the
    horizon / span bound. Skipped when the run's ``deadline`` passes first."""
    if past(deadline):
        return found
    try:
        plan = stacked_baseline(inst, deadline)
    except DeadlineReached:
        return found
    if plan is None:
        return found
    return _better_start(inst, found, WarmStart.of(inst, "stacked barriers", plan), prob)


def stacked_baseline(inst: PipelineInstance, deadline: float | None = None) -> PipelinePlan | None:
    """Head barriers first, the best baseline of the rest, tail barriers last
    (`barriers.stacked_plan`); None without head or tail barriers, without a baseline of
    the rest, or when infeasible. `DeadlineReached` past ``deadline``."""
    stack = stacking(inst)
    middle = None if stack is None or stack.rest is None else best_baseline(stack.rest, deadline)
    return None if stack is None or middle is None else stacked_plan(inst, stack, middle[1])


def _better_start(inst: PipelineInstance, found: WarmStart | None, candidate: WarmStart, prob: OpProblem) -> WarmStart | None:
    """``candidate`` when it is strictly better than ``found``, which then also tightens
    the model's horizon (makespan objective) or span bound; otherwise ``found``."""
    if found is not None and found.value <= candidate.value:
        return found
    bound = candidate.value * (1 + 1e-9) + 1e-9
    if inst.objective == "makespan":
        prob.horizon = min(prob.horizon, bound)
    else:
        prob.span_ub = bound if prob.span_ub is None else min(prob.span_ub, bound)
    return candidate


def _size(res: SolverResult) -> dict[str, Any]:
    stats = res.extra.get("model", {})
    return {k: stats[k] for k in ("variables", "binaries", "integers", "rows", "nonzeros") if k in stats}
