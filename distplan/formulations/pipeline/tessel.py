"""The ``tessel`` formulation: Tessel's repetend (`repetend.search_repetend`; Lin et al.,
HPCA 2024) unrolled to N micro-batches and completed.

Among repetends of the least period, the one to unroll is chosen by how well its warm-up
and cool-down complete (`_pick_repetend`: variants from the residue search, scored by a
guided list schedule on 2 K + 2 micro-batches). The completion keeps the best, by the
evaluator, of: the naive unroll; list schedules of the whole run guided by the unrolled
repetend's start times (`compaction`: warm-up and cool-down compacted around the steady
state, with the W passes in repetend order or deferred to fill idle time, within the
capacity and within the repetend's steady-state peak); the warm-up and cool-down
re-scheduled over their own operations (`opmodel.OpProblem`) against the fixed steady
state by the sequence local search (`seqsearch`; the warm-up from the unrolled order and
from the forward passes first), then, when ``phase_time_limit`` > 0, as
makespan MILPs warm-started from it (skipped when a candidate already meets the
solver-free bound), or, when N is so small that the schedule has fewer full repetends
than warm-up periods, the whole schedule likewise (local search; the whole-schedule MILP
of bounded size, about 2 K micro-batches, only with ``phase_time_limit`` > 0; before it,
the exact state search of `statesearch` within ``whole_search_states`` states and
``whole_search_time_limit`` seconds, `_whole_state_search`, or, when the completion
kept warm-up and cool-down apart at N below two flat lengths (or N = 2, or at most
``WHOLE_SEARCH_OPS`` operations), that search from the best candidate at the end; what it proves is the run's bound, `_search_bound`: a finished
search makes the plan proven optimal); at such N (below two flat lengths) also the repetend candidates of the least period completed as whole schedules
at N, the best kept (`_pick_repetend`: the repetend chosen with its warm-up and
cool-down, which are the whole run); and the
classic schedules that apply (``baselines``: tessel never returns worse than them); and
the best of these with the memory-free blocks at both ends of the chain gathered before
and after everything else (`memory_free_ends`); and forward-backward improvement passes of
these (`justify`: backward by finish time, forward by the backward starts; Valls et al.,
EJOR 2005; all of them for small schedules, the best only above ``justify_all_ops``
operations), which re-order the cool-down by remaining path length (v2 on 4 devices,
N = 8, no memory limit: the repetend-guided cool-down ran earlier micro-batches' backward
passes ahead of the last micro-batch's forward passes, 41; justified, 38 = pipeline_milp's
proven optimum). The plan is retimed to exact earliest starts (or, for the device-span
objective, the span LP)."""

from __future__ import annotations

import math
import random
import time
from dataclasses import replace
from typing import Any

import numpy as np

from distplan.errors import NoSolutionError
from distplan.formulations.deadline import DeadlineReached, baseline_deadline, check, past
from distplan.formulations.pipeline import statesearch
from distplan.formulations.pipeline.baselines import baseline_incumbent
from distplan.formulations.pipeline.bounds import pipeline_bounds
from distplan.formulations.pipeline.common import (
    CHEAP_OPS,
    OpArcs,
    asap,
    check_capacity,
    check_size,
    gather_ends,
    integral_data,
    orders_from_starts,
    retime,
    schedule_objective,
)
from distplan.formulations.pipeline.compaction import guided
from distplan.formulations.pipeline.justify import justify, reversed_instance
from distplan.formulations.pipeline.modulo import cyclic_blocks, steady_memory
from distplan.formulations.pipeline.opmodel import OpProblem, full_problem, serial_horizon
from distplan.formulations.pipeline.opsolve import solve_op_problem
from distplan.formulations.pipeline.repetend import (
    DEFAULTS,
    Repetend,
    binding_budget,
    offsets_range,
    period_on_data,
    search_repetend,
    sub_ctx,
)
from distplan.formulations.pipeline.residue import residue_search
from distplan.formulations.pipeline.seqsearch import improve, improve_from
from distplan.formulations.registry import Bound, Outcome, RunContext, RunTermination
from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate, make_plan
from distplan.solvers.result import LIMIT_TERMINATIONS, Termination


def _phase_problem(inst: PipelineInstance, start: np.ndarray, free: np.ndarray, kind: str) -> tuple[OpProblem, np.ndarray, float]:
    """The MILP of the free operations (warm-up or cool-down) against the fixed rest: the
    whole schedule's operations (`opmodel.full_problem`) restricted to them, with the
    fixed ones' start times (seconds) as deadlines (warm-up) or release times and memory
    held (cool-down). Returns it, the free operations and the time its zero stands for."""
    whole = full_problem(inst, 0.0)
    ops = np.flatnonzero(free.reshape(-1))
    local = -np.ones(whole.n, dtype=np.int64)
    local[ops] = np.arange(ops.size)
    flat = start.reshape(-1)
    src, dst, gap = whole.arcs.src, whole.arcs.dst, whole.arcs.gap
    inside = (local[src] >= 0) & (local[dst] >= 0)
    part = replace(
        whole,
        dur=whole.dur[ops],
        mask=whole.mask[ops],
        mem=whole.mem[ops],
        arcs=OpArcs(local[src[inside]], local[dst[inside]], gap[inside]),
        tail=None,
        integral=False,
        block_of=ops // inst.micro_batches,
    )
    fixed_ops = np.flatnonzero(~free.reshape(-1))
    on_device = [(fixed_ops[whole.mask[fixed_ops, d]], ops[whole.mask[ops, d]]) for d in range(inst.n_devices)]
    if kind == "warmup":
        # free -> fixed: s_free + gap <= base + shift; device: free ends before the first fixed op
        cross = (local[src] >= 0) & (local[dst] < 0)
        d_ops = [local[src[cross]]]
        d_gap = [gap[cross]]
        d_base = [flat[dst[cross]]]
        for fd, vd in on_device:
            if fd.size and vd.size:
                d_ops.append(local[vd])
                d_gap.append(whole.dur[vd])
                d_base.append(np.full(vd.size, flat[fd].min()))
        base = np.concatenate(d_base)
        prob = replace(
            part,
            name=f"{inst.name}-warmup",
            horizon=float(base.max()),
            objective="shift",
            deadline_ops=np.concatenate(d_ops),
            deadline_gap=np.concatenate(d_gap),
            deadline_base=base,
        )
        return prob, ops, 0.0
    # cool-down: release times from the fixed part; memory held after it
    release = np.zeros(ops.size)
    cross = (local[src] < 0) & (local[dst] >= 0)
    np.maximum.at(release, local[dst[cross]], flat[src[cross]] + gap[cross])
    init = np.zeros(inst.n_devices)
    for d, (fd, vd) in enumerate(on_device):
        init[d] = whole.mem[fd].sum()
        if fd.size and vd.size:
            release[local[vd]] = np.maximum(release[local[vd]], (flat[fd] + whole.dur[fd]).max())
    t_shift = float(release.min()) if release.size else 0.0
    prob = replace(
        part,
        name=f"{inst.name}-cooldown",
        horizon=float((flat[ops] + whole.dur[ops]).max()) - t_shift,
        objective="makespan",
        release=release - t_shift,
        init_mem=init,
    )
    return prob, ops, t_shift


def complete_phases(
    inst: PipelineInstance, rep: Repetend, ctx: RunContext, limit: float, model: str = "auto", seed: tuple[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Unroll, then re-solve warm-up and cool-down as MILPs against the steady state
    (for small N the whole schedule, warm-started from ``seed`` when it is better)."""
    nb, n = inst.n_blocks, inst.micro_batches
    big = nb * n > CHEAP_OPS
    if big:
        check(ctx.deadline, "the warm-up and cool-down completion")
    start = rep.unroll(inst)
    info: dict[str, Any] = {}
    phases = rep.phases(inst)
    if phases.full_periods < phases.first_full:
        # fewer full repetends than warm-up periods: warm-up and cool-down are (nearly) the
        # whole schedule, so complete it with the whole-schedule MILP (its size is bounded
        # by 2 x offsets micro-batches), warm-started from the better of the unrolled
        # repetend and the classic schedules
        return _complete_whole(inst, start, ctx, max(limit, 1.0) if limit > 0 else 0.0, model, info, seed)
    warm = phases.warmup
    if warm.any():
        prob, ops, _ = _phase_problem(inst, start, warm, "warmup")
        # a second start: the forward passes first (in unrolled order), then the rest
        forward_first = start.reshape(-1)[ops] + (inst.role_code[ops // n] != 0) * (float(start.max()) + 1.0)
        s = _solve_phase(prob, ctx, start.reshape(-1)[ops], limit, model, info, "warmup", forward_first)
        shift = float(np.max(s[prob.deadline_ops] + prob.deadline_gap - prob.deadline_base)) if prob.deadline_ops.size else 0.0
        shift = min(shift, 0.0)
        flat = start.reshape(-1).copy()
        flat[~warm.reshape(-1)] += shift
        flat[ops] = s
        start = flat.reshape(nb, n)
        info["warmup_shift"] = shift
    if big:
        check(ctx.deadline, "the warm-up and cool-down completion")
    cool = phases.cooldown
    if cool.any():
        prob, ops, t0 = _phase_problem(inst, start, cool, "cooldown")
        s = _solve_phase(prob, ctx, start.reshape(-1)[ops] - t0, limit, model, info, "cooldown")
        flat = start.reshape(-1).copy()
        flat[ops] = s + t0
        start = flat.reshape(nb, n)
    return start, info


def _solve_phase(
    prob: OpProblem, ctx: RunContext, start: np.ndarray, limit: float, model: str, info: dict[str, Any], label: str, other: np.ndarray | None = None
) -> np.ndarray:
    """The sequence local search (`seqsearch.improve`) from the unrolled times (and from
    the order of ``other``, when it fits the memory: the better result is kept), then,
    when ``limit`` > 0, the phase MILP warm-started from its result (at most ``limit`` s);
    returns the phase's start times (seconds, as ``prob``'s operations).

    For the warm-up, ``other`` puts the forward passes first: critical-pair reversals
    cannot move a block that spans every device (a full-shard block) past its tight
    predecessors on all of them at once, and from the unrolled order the search stays
    in a 1F1B-like warm-up (nnshape at memory 4, N = 16: 154 from the unrolled order,
    153 = Tessel's from forward-first)."""
    starts = [start] if other is None else [start, other]
    ls_deadline = _ls_deadline(ctx)
    s_ls, value, which = improve_from(prob, starts, deadline=ls_deadline)
    if past(ls_deadline):  # its share of the run's time ran out (it may have stopped early)
        record_cut(info, f"{label}_local_search", "time_limit")
    info[f"{label}_local_search"] = value
    if which:
        info[f"{label}_start"] = "forward passes first"
    if limit <= 0:
        return s_ls
    budget = binding_budget(ctx, {}, "phase_time_limit", limit)
    try:
        s, res, _ = solve_op_problem(prob, sub_ctx(ctx, limit), s_ls, model)
    except DeadlineReached:  # its build outlasted the phase's time: the local search stands
        info[f"{label}_termination"] = Termination.TIME_LIMIT.value
        record_cut(info, f"{label}_milp", budget)
        return s_ls
    info[f"{label}_termination"] = res.termination.value
    if res.termination in LIMIT_TERMINATIONS:
        record_cut(info, f"{label}_milp", budget)
    return s if s is not None else s_ls


#: the budgets that can cut one of tessel's searches (`record_cut`), by the names recorded:
#: the run's ``time_limit`` and tessel's own time and state budgets
BUDGETS = frozenset(
    {
        "time_limit",
        "search_time_limit",
        "proof_time_limit",
        "candidate_probe_limit",
        "probe_time_limit",
        "flat_time_limit",
        "residue_nodes",
        "flat_residue_nodes",
        "whole_search_time_limit",
        "whole_search_states",
        "phase_time_limit",
    }
)


def record_cut(info: dict[str, Any], search: str, budget: str) -> None:
    """Record in ``info["cut_by"]`` (search -> budget) that ``budget`` (a parameter's name,
    or the run's ``time_limit``) stopped ``search`` before it finished; a search's first
    cut is kept."""
    if budget not in BUDGETS:
        raise ValueError(f"tessel: {budget!r} is not a budget of its searches ({', '.join(sorted(BUDGETS))})")
    info.setdefault("cut_by", {}).setdefault(search, budget)


#: tessel's budgets that count work (placements, states) rather than time: a run cut by
#: these alone ends "node_limit" (`cut_termination`)
COUNT_BUDGETS = frozenset({"residue_nodes", "flat_residue_nodes", "whole_search_states"})
#: the run's own "node_limit", which `distplan verify` accepts whatever its last solver
#: call ended (or with none: a residue search makes no call) when ``info["cut_by"]`` names
#: only `COUNT_BUDGETS`
NODE_BUDGETS_CUT = RunTermination(
    Termination.NODE_LIMIT.value,
    "cut_by",
    COUNT_BUDGETS,
    "searches cut by its placement or state budgets alone (residue_nodes, flat_residue_nodes, whole_search_states) end the run node_limit",
    mapping=True,
    absent=frozenset({"stopped"}),  # (its own deadline passed: time_limit, `_limited_fallback`)
    needs_call=False,  # (a residue search makes none)
)


def cut_termination(cuts: dict[str, str], timed_out: bool) -> Termination | None:
    """The run's termination for the searches its budgets cut (``cuts``: search -> budget,
    `record_cut`) and whether its own deadline passed: TIME_LIMIT when the deadline passed
    or a time budget cut a search; NODE_LIMIT when only its placement and state budgets
    (`COUNT_BUDGETS`) did, so that a user raises those, not the time limit
    (`NODE_BUDGETS_CUT`); else None (no search was cut: the run ends as any heuristic's,
    "finished"). ``info["cut_by"]`` names the budgets."""
    if timed_out or any(budget not in COUNT_BUDGETS for budget in cuts.values()):
        return Termination.TIME_LIMIT
    return Termination.NODE_LIMIT if cuts else None


def _ls_deadline(ctx: RunContext) -> float | None:
    remaining = ctx.remaining_time()
    return None if remaining is None else time.perf_counter() + max(0.0, remaining) / 3


def _complete_whole(
    inst: PipelineInstance, start: np.ndarray, ctx: RunContext, limit: float, model: str, info: dict[str, Any], seed: tuple[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:

    unrolled = asap(inst, orders_from_starts(inst, start), deadline=ctx.deadline)
    best, source = unrolled, "unrolled repetend"
    found = baseline_incumbent(inst, ctx.deadline)
    if found is not None and evaluate(inst, found[1]).objective < schedule_objective(inst, unrolled) - 1e-9:
        best, source = found[1].start, found[0]
    if seed is not None and schedule_objective(inst, seed[1]) < schedule_objective(inst, best) - 1e-9:
        best, source = seed[1], seed[0]
    prob = full_problem(inst, serial_horizon(inst))
    ls_deadline = _ls_deadline(ctx)
    s_ls, _ = improve(prob, best.reshape(-1), deadline=ls_deadline)
    if past(ls_deadline):  # its share of the run's time ran out (it may have stopped early)
        record_cut(info, "completion_local_search", "time_limit")
    if schedule_objective(inst, s_ls.reshape(best.shape)) < schedule_objective(inst, best) - 1e-9:
        best, source = s_ls.reshape(best.shape), f"{source} + sequence local search"
    value = schedule_objective(inst, best)
    phases = "whole-schedule local search"
    exact = _whole_state_search(inst, value, ctx, info)
    if exact is not None:
        best, value, phases = exact, schedule_objective(inst, exact), "whole-schedule state search"
    if limit <= 0:
        info.update(phases=phases, completion_warm_start=source)
        return best, info
    prob = full_problem(inst, serial_horizon(inst))
    if inst.objective == "makespan":
        prob.horizon = value * (1 + 1e-9) + 1e-9
    else:
        prob.span_ub = value * (1 + 1e-9) + 1e-9
    budget = binding_budget(ctx, {}, "phase_time_limit", limit)
    try:
        s, res, _ = solve_op_problem(prob, sub_ctx(ctx, limit), best.reshape(-1), model if model != "disjunctive" else "auto")
    except DeadlineReached:  # its build outlasted the MILP's time
        info.update(phases=phases, completion_warm_start=source, completion_termination=Termination.TIME_LIMIT.value)
        record_cut(info, "completion_milp", budget)
        return best, info
    info.update(phases="whole-schedule MILP", completion_warm_start=source, completion_termination=res.termination.value)
    if res.termination in LIMIT_TERMINATIONS:
        record_cut(info, "completion_milp", budget)
    if s is not None and schedule_objective(inst, s.reshape(best.shape)) <= value + 1e-9:
        return s.reshape(best.shape), info
    return best, info


#: operations (blocks x N) up to which the best candidate goes to the whole-schedule state
#: search at the end even when N has a steady state (`_whole_state_search`: at most
#: ``whole_search_states`` states and ``whole_search_time_limit`` seconds; NN shape, 4
#: stages, N = 8, memory 3, 80 operations: 83 -> 75, proven, in ~0.3 s)
WHOLE_SEARCH_OPS = 128


def _whole_state_search(inst: PipelineInstance, value: float, ctx: RunContext, info: dict[str, Any]) -> np.ndarray | None:
    """A schedule better than ``value`` (seconds) by the exact state search
    (`statesearch.prove_makespan`: best first over states at integer times, barriers stacked),
    within ``whole_search_states`` states and ``whole_search_time_limit`` seconds (at most
    a third of a limited run's time left); None when it finds none. For small N only (no
    steady state: `_complete_whole`, and `_complete` when that did not run it, or at most
    ``WHOLE_SEARCH_OPS`` operations), where the
    states are few: NN shape, 4 stages, memory 3, N = 3: 409 states prove 36 (the
    repetend's completions: 38; pipeline_milp took 10 s); NN shape, 8 stages, N = 2, B/W
    split, 1F1B's memory: 364 states find and prove 37 (the completions: 39). Makespan
    objective, integral durations, no delays (`statesearch.applicable`).

    ``info["whole_search"]`` records whether it finished (``complete``: then it found the
    optimum, or none below ``value`` exists), its states, and under ``bound`` the lower
    bound (seconds) it proves on the instance's optimum (finished: the optimum, or
    ``value`` itself; stopped: its open layer's bound, a proof too) when the durations are
    exact integers (`statesearch.bound_is_exact`); `run_tessel` reports it. A search its
    budget stopped says which under ``cut_by`` (``whole_search_states``,
    ``whole_search_time_limit``, or the run's ``time_limit`` when a third of its time left
    was the shorter), and in ``info["cut_by"]`` (`record_cut`)."""
    params = {**DEFAULTS, **ctx.params}
    states = int(params["whole_search_states"])
    if states <= 0 or not statesearch.applicable(inst):
        return None
    budget = float(params["whole_search_time_limit"])
    clock = "whole_search_time_limit"
    remaining = ctx.remaining_time()
    if remaining is not None and max(0.0, remaining) / 3 < budget:
        budget, clock = max(0.0, remaining) / 3, "time_limit"
    plan, out = statesearch.prove_makespan(inst, value, time.perf_counter() + budget, max_states=states)
    record: dict[str, Any] = {"complete": out.complete, "states": out.states}
    stopped = out.info.get("cut_by")
    if not out.complete and stopped is not None:
        record["cut_by"] = "whole_search_states" if stopped == "max_states" else clock
        record_cut(info, "whole_search", record["cut_by"])
    if statesearch.bound_is_exact(inst):
        record["bound"] = out.bound
    info["whole_search"] = record
    if plan is None or schedule_objective(inst, plan.start) >= value - 1e-9:
        return None
    return np.asarray(plan.start, dtype=float)


def _span(rep: Repetend) -> int:
    """Periods one micro-batch's flat schedule spans in the repetend (its offsets + 1)."""
    return int(rep.block_offsets().max()) + 1


def _search_bound(info: dict[str, Any]) -> list[Bound]:
    """The lower bound the whole-schedule state search proved (`_whole_state_search`), if
    any: exact (integer times, every memory prefix the evaluator accepts; grade "safe")."""
    record = info.get("whole_search")
    if not isinstance(record, dict) or record.get("bound") is None:
        return []
    value = float(record["bound"])
    if record.get("complete"):
        return [Bound(value, f"tessel: exact whole-schedule state search (no schedule below {value:g})", "safe")]
    return [Bound(value, "tessel: whole-schedule state search, open layer (stopped)", "safe")]


def run_tessel(inst: PipelineInstance, ctx: RunContext) -> Outcome:
    """Search the repetend (independent of N), unroll it, complete warm-up and cool-down.

    The completion keeps the best (by the evaluator) of: the naive unroll; list schedules
    of the whole run guided by the unrolled repetend's start times (`compaction`: warm-up
    and cool-down compacted around the steady state, deferred W passes filling the idle
    time), within the capacity and within the repetend's own steady-state peak; the
    warm-up/cool-down MILPs (or, for small N, the whole-schedule MILP warm-started from
    the best so far); the classic schedules that apply (``baselines``: a guarantee
    that tessel never returns worse than them); the best with the memory-free ends
    gathered; and forward-backward improvement passes (`justify`) of each of them (of the
    best only above ``justify_all_ops`` operations), unless the best already meets the
    solver-free bound. ``info["completion"]`` names the winner.

    A time-limited run computes the classic schedules first (`_limited_fallback`: at
    most a quarter of its time, or `BASELINE_GRACE` when less is left, on large runs the
    first of them up to the run's deadline; milliseconds on ordinary instances), so that it never
    returns worse than them. The repetend search stops at the deadline; a search
    stopped by it returns that classic schedule (termination
    TIME_LIMIT), or, without one, `DeadlineReached` (no plan, never InfeasibleError: the
    limit proves nothing). Past the deadline the phases after the search stop (the list
    schedules, the completion and the justification passes check it): the best candidate
    so far is returned with termination TIME_LIMIT (with none, `DeadlineReached`).

    A search that one of tessel's own budgets cut before it finished ends the run
    TIME_LIMIT too, or NODE_LIMIT when only its placement and state budgets cut searches
    (`cut_termination`), and ``info["cut_by"]`` maps each cut search to
    its budget (`record_cut`): ``repetend_search`` (its period left unproven:
    ``search_time_limit``, ``proof_time_limit``, ``candidate_probe_limit``),
    ``repetend_offsets`` and ``repetend_flat_length`` (the repetend's fewest offsets and
    least flat length not established: ``probe_time_limit``, ``flat_time_limit``,
    ``residue_nodes``, ``flat_residue_nodes``; `repetend.Repetend.cuts`), ``repetend_candidates`` (the other
    repetends of the period, drawn and completed within a share of the run's time),
    ``whole_search`` (``whole_search_states``, ``whole_search_time_limit``),
    ``warmup_milp`` / ``cooldown_milp`` / ``completion_milp`` (``phase_time_limit``) and
    the local searches (``*_local_search``), each possibly by the run's ``time_limit``
    instead (when its share of the time left was the shorter). The bound of a cut state
    search stays: its open layer's bound is proven (`statesearch`). A run with no search
    cut is reported as before ("finished")."""
    check_size(inst)
    check_capacity(inst)
    params = {**DEFAULTS, **ctx.params}
    fallback = _limited_fallback(inst, ctx, params)
    try:
        rep = _budgeted_search(inst, ctx, params)
        rep, picked = _pick_repetend(inst, rep, ctx, params)
        naive = rep.unroll(inst)
    except (DeadlineReached, NoSolutionError) as exc:
        if fallback is None:
            raise
        return _fallback_outcome(inst, ctx, fallback, exc)
    pool = _Candidates(inst)
    if fallback is not None:
        pool.add(f"baseline {fallback[0]}", fallback[1].start)
    try:  # (past the deadline too: milliseconds unless N is huge, where asap stops)
        pool.add("naive unroll", asap(inst, orders_from_starts(inst, naive), deadline=ctx.deadline))
    except DeadlineReached:
        if not pool.any_feasible():
            raise
    info: dict[str, Any] = {"repetend_candidates": picked.pop("candidates", 1)}
    for search, budget in rep.cuts.items():  # (the period unproven, the offsets or flat length not least)
        record_cut(info, search, budget)
    if "cut_by" in picked:
        record_cut(info, "repetend_candidates", picked.pop("cut_by"))
    try:
        name, exact = _complete(inst, ctx, params, rep, picked, naive, pool, info, fallback is not None)
    except DeadlineReached:
        if not pool.any_feasible():
            raise
        name, exact = pool.best()
        info["stopped"] = "time limit"
    timed_out = "stopped" in info
    if timed_out:  # past the run's deadline: the completion was cut short
        record_cut(info, "completion", "time_limit")
    if inst.objective == "device_span":
        exact = retime(inst, orders_from_starts(inst, exact), ctx)
    exact = exact - exact.min()
    plan_info = {
        "schedule": "tessel",
        **_period_info(inst, rep.period),
        "period_bound": rep.period_bound,
        "period_proven_optimal": rep.proven,
        "offsets": _span(rep),
        "unfold": rep.unfold,
        "repetend_search_seconds": rep.search_seconds,
        **info,
        "completion": name,
        "completion_candidates": pool.scores,
    }
    plan = make_plan(inst, exact, plan_info)
    return Outcome(
        plan=plan,
        bounds=_search_bound(info),
        solver_results=list(ctx.solver_results),
        info=plan_info,
        termination=cut_termination(info.get("cut_by", {}), timed_out),
    )


def _period_info(inst: PipelineInstance, period: float) -> dict[str, Any]:
    """The plan's ``period`` (seconds): the repetend's on the instance's data
    (`repetend.period_on_data`), with ``period_of_rounded_data`` beside it when the
    repetend was searched on rounded data and repeats later on the instance's own."""
    real = period_on_data(inst, period)
    if real == float(period):
        return {"period": period}
    return {"period": real, "period_of_rounded_data": period}


def _limited_fallback(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> tuple[str, PipelinePlan] | None:
    """A time-limited run's classic schedule, computed first (milliseconds on ordinary
    instances; at most a quarter of the time left, or `BASELINE_GRACE` when that is less,
    as when the limit passed while the command loaded; above `CHEAP_OPS` operations the
    first schedule that applies may run on to the run's deadline): the plan a run stopped by its
    limit returns when the repetend search has none, and a completion candidate, so that a
    limited tessel never returns worse than a baseline it could have computed in time.
    None without a limit (the completion lists the baselines then), with ``baselines``
    false, or when none applies or fits in that time."""
    remaining = ctx.remaining_time()
    if remaining is None or not params.get("baselines", True):
        return None
    # above `CHEAP_OPS` operations any plan takes at least an earliest-start pass over
    # all of them, as a classic schedule does, so the first schedule that applies runs on
    # to the run's deadline: with the quarter only, gpipe (0.5 s on 528k operations) did
    # not finish at a 1 s limit and the run returned no plan, the repetend search and its
    # unrolling needing longer still; on smaller runs the search keeps its share
    big = inst.n_blocks * inst.micro_batches > CHEAP_OPS
    return baseline_incumbent(inst, baseline_deadline(time.perf_counter() + remaining / 4), baseline_deadline(ctx.deadline) if big else None)


def _fallback_outcome(inst: PipelineInstance, ctx: RunContext, fallback: tuple[str, PipelinePlan], exc: Exception) -> Outcome:
    """The classic schedule ``fallback`` as the plan of a run whose repetend search ran out
    of time (``exc``: why): termination TIME_LIMIT."""
    name, plan = fallback
    plan_info = {"schedule": "tessel", "completion": f"baseline {name}", "stopped": "time limit", "repetend_search": str(exc), "cut_by": {"repetend_search": "time_limit"}}
    plan = make_plan(inst, plan.start - plan.start.min(), plan_info)
    return Outcome(plan=plan, solver_results=list(ctx.solver_results), info=plan_info, termination=Termination.TIME_LIMIT)


def _complete(
    inst: PipelineInstance,
    ctx: RunContext,
    params: dict[str, Any],
    rep: Repetend,
    picked: dict[str, Any],
    naive: np.ndarray,
    pool: _Candidates,
    info: dict[str, Any],
    baselines_listed: bool = False,
) -> tuple[str, np.ndarray]:
    """`run_tessel`'s completion candidates added to ``pool`` (which holds the naive
    unroll); returns the best (name, (B, N) start times in seconds). `DeadlineReached` past
    the run's deadline, with the candidates so far in ``pool``; a run that ends past it
    (a justification pass or the optional baseline cut short) sets ``info["stopped"]``."""
    deadline = ctx.deadline
    limit = float(params["phase_time_limit"])
    steady = _steady_peak(inst, rep)
    priorities = [(naive, "repetend-guided list schedule")]
    if (inst.role_code == 2).any():  # W passes only when idle
        priorities.append((naive + (inst.role_code == 2)[:, None] * (float(naive.max()) + 1.0), "repetend-guided list schedule, W deferred"))
    for prio, label in priorities:
        for s in guided(inst, prio, [inst.capacity, steady], deadline):
            pool.add(label, s)
    if "whole" in picked:  # N leaves no steady state: the best repetend candidate completed whole
        pool.add("repetend candidates completed at N", picked["whole"])
    if params.get("baselines", True) and not baselines_listed:
        baseline = baseline_incumbent(inst, deadline)
        if baseline is not None:
            pool.add(f"baseline {baseline[0]}", baseline[1].start)
    if not pool.any_feasible():  # `check_capacity` found no proof that none fits
        raise NoSolutionError(f"{inst.name}: tessel found no schedule within the memory capacity (every candidate exceeds it)")
    name, seed = pool.best()
    bound = max(b.value for b in pipeline_bounds(inst)) * (1 + 1e-9)
    if pool.scores[name] > bound:  # else nothing to gain
        if "start" in picked and limit <= 0:  # the chosen repetend's completion is in hand
            start, phase_info = picked["start"], picked["info"]
        else:
            start, phase_info = complete_phases(inst, rep, ctx, limit, str(params.get("phase_model", "auto")), seed=(name, seed))
        for search, budget in phase_info.pop("cut_by", {}).items():  # (beside the searches cut before)
            record_cut(info, search, budget)
        info.update(phase_info)
        label = info.get("phases", "warm-up/cool-down " + ("MILPs" if limit > 0 else "local search"))
        pool.add(str(label), retime(inst, orders_from_starts(inst, start), ctx))
    name, exact = pool.best()
    head, tail = memory_free_ends(inst)
    if pool.scores[name] > bound and (head or tail):
        pool.add("memory-free head and tail gathered", gather_ends(inst, exact, head, tail))
        name, exact = pool.best()
    if pool.scores[name] > bound:
        # every distinct feasible candidate, the best first, up to justify_all_ops
        # operations (a classic schedule's justification can beat the best's: NN shape,
        # p = 4, N = 8, B/W split, 80 -> 75); above, the best only (N = 64: ~0.03 s CPU
        # per candidate on nnshape)
        rev = reversed_instance(inst)
        feasible = {label for label, value in pool.scores.items() if math.isfinite(value)}
        every = inst.n_blocks * inst.micro_batches <= int(params.get("justify_all_ops", DEFAULTS["justify_all_ops"]))
        done: set[str] = set()
        for label, s0 in [(name, exact)] + (list(pool.listed) if every else []):
            if label in done or label not in feasible:
                continue
            if past(deadline):
                break
            done.add(label)
            for s in justify(inst, s0, [inst.capacity, steady], rev=rev, deadline=deadline):
                pool.add(f"{label} + forward-backward improvement", s)
        name, exact = pool.best()
    small = inst.micro_batches < 2 * _span(rep) or inst.micro_batches <= 2 or inst.n_blocks * inst.micro_batches <= WHOLE_SEARCH_OPS
    if pool.scores[name] > bound and "whole_search" not in info and small and not past(deadline):
        # N leaves no steady state but the completion kept the phases apart (the repetend's
        # warm-up and cool-down meet: `complete_phases` ran no whole-schedule search), or
        # N = 2 (a repetend as long as a micro-batch's schedule), or few operations: the
        # exact state search from the best candidate (NN shape, 8 stages, N = 2, B/W
        # split, 1F1B's memory: 39 -> 37, proven; V, M, NN shapes, 4 stages, N = 2, memory
        # one below 1F1B's: the unroll proven optimal in ~16 states; NN shape, 4 stages,
        # N = 8, memory 3: 83 -> 75, proven in ~2,700 states)
        searched = _whole_state_search(inst, pool.scores[name], ctx, info)
        if searched is not None:
            pool.add("whole-schedule state search", searched)
            name, exact = pool.best()
    if past(deadline):  # a phase was cut short or skipped
        info["stopped"] = "time limit"
    return name, exact


class _Candidates:
    """Completion candidates, each evaluated once, when added: ``listed`` holds them as
    (name, (B, N) start times in seconds) in order, ``scores`` the evaluator's objective
    (seconds; inf when infeasible) by name (a name listed twice keeps its least)."""

    def __init__(self, inst: PipelineInstance) -> None:
        self.inst = inst
        self.listed: list[tuple[str, np.ndarray]] = []
        self.scores: dict[str, float] = {}
        self._best: tuple[float, str, np.ndarray] | None = None

    def add(self, name: str, start: np.ndarray) -> None:
        chk = evaluate(self.inst, make_plan(self.inst, start - start.min()))
        value = chk.objective if chk.feasible else math.inf
        self.listed.append((name, start))
        self.scores[name] = min(value, self.scores.get(name, math.inf))
        if chk.feasible and (self._best is None or value < self._best[0] - 1e-9):
            self._best = (value, name, start)

    def any_feasible(self) -> bool:
        return self._best is not None

    def best(self) -> tuple[str, np.ndarray]:
        """The feasible candidate of least objective (the first listed wins ties)."""
        if self._best is None:
            raise ValueError("no feasible candidate schedule")
        return self._best[1], self._best[2]


def memory_free_ends(inst: PipelineInstance) -> tuple[list[int], list[int]]:
    """The blocks of the longest topological prefix and suffix that hold no memory (e.g.
    Tessel's full-shard blocks at the ends of mshape and nnshape). Gathered before and after
    everything else (`common.gather_ends`: neither move changes a memory prefix or breaks a
    dependency), they run GPipe-like on every device at once where a repetend spreads them
    over the run, and the memory-holding middle pipelines as tightly as the capacity allows
    (mshape at memory 4: 121 -> 108 at N = 16 and 65 -> 60 at N = 8, both equal to the
    solver-free bound)."""
    order = [int(b) for b in inst.topo_order]
    head: list[int] = []
    for b in order:
        if inst.memory[b] != 0:
            break
        head.append(b)
    tail: list[int] = []
    for b in reversed(order):
        if inst.memory[b] != 0 or b in head:
            break
        tail.append(b)
    return head, tail


def _pick_repetend(inst: PipelineInstance, rep: Repetend, ctx: RunContext, params: dict[str, Any]) -> tuple[Repetend, dict[str, Any]]:
    """Among repetends of the same (least) period, one whose warm-up and cool-down complete
    well. Repetends of one period differ in their micro-batch offsets and residues, and so
    in how densely the pipeline fills and drains (Tessel enumerates the offset assignments,
    `MicroPicker`). Up to ``repetend_candidates`` - 1 others are drawn by the residue
    search with rotated delay orders (deterministic seeds; memory pruned greedily) at the
    largest offsets memory allows; each is unrolled on ``2 K + 2`` micro-batches (K its own
    offsets: its warm-up and cool-down do not depend on N) and scored by the makespan of
    the repetend-guided list schedule (`compaction.guided`) beyond those micro-batches'
    periods (seconds); the best is completed on the instance by
    the sequence local search (`complete_phases` without MILPs). A candidate whose
    offsets K leave N < 2 K no steady state (warm-up and cool-down are the whole run) is
    scored instead by its completion at N (`_whole_completion`: guided list schedules and
    their forward-backward improvement; milliseconds at such N): at small N the repetend
    is chosen by the whole schedule it completes to, not by a steady state that never
    runs (K shape, 4 stages, memory 8, N = 4: 37 from the search's repetend, 35 = the
    proven optimum from a candidate; M shape, 8 stages, F 2 B 1 W 3, N = 4: 50 -> 47 =
    the optimum). Only for integral data, an integer period and one micro-batch per
    repetend. Returns the chosen repetend and, under "start"/"info", its completion
    (N of at least two flat lengths), under "whole" the best completion at N (B, N), and
    ``"cut_by": "time_limit"`` when its share of a limited run's time (`_ls_deadline`)
    ran out before every candidate was drawn and completed."""
    count = int(params.get("repetend_candidates", DEFAULTS["repetend_candidates"]))
    n = inst.micro_batches
    if count <= 1 or rep.unfold != 1 or not integral_data(inst) or not float(rep.period).is_integer():
        return rep, {}
    cy = cyclic_blocks(inst, 1)
    k = int(params["offsets"]) if params.get("offsets") is not None else offsets_range(inst, 1)[1]
    period = int(rep.period)
    rng = random.Random(len(cy.dur) * 7919 + period)
    sigmas = [rep.sigma]
    seen = {tuple(np.round(rep.sigma - rep.sigma.min(), 6).tolist())}
    nodes = int(params.get("residue_nodes", DEFAULTS["residue_nodes"])) // 5
    deadline = _ls_deadline(ctx)
    for _ in range(3 * count):
        if len(sigmas) >= count or nodes <= 0 or (deadline is not None and time.perf_counter() > deadline):
            break
        rot = [rng.randrange(period) for _ in range(cy.n)]
        found = residue_search(cy, inst, k, period, rotate=rot, greedy=True, node_limit=min(nodes, 800), deadline=deadline)
        nodes -= found.nodes
        if found.sigma is not None:
            key = tuple(np.round(found.sigma - found.sigma.min(), 6).tolist())
            if key not in seen:
                seen.add(key)
                sigmas.append(found.sigma - found.sigma.min())
    scored = []
    whole: tuple[float, int, Repetend, np.ndarray] | None = None  # the best completion at N
    out_of_time = False
    rev = reversed_instance(inst)
    for i, sigma in enumerate(sigmas):
        sigma = sigma - sigma.min()
        offsets = max(1, math.ceil(float((sigma + cy.dur).max()) / period - 1e-9))
        cand = Repetend(sigma, rep.period, rep.period_bound, rep.proven, offsets, 1, rep.search_seconds, rep.cuts)
        if n < 2 * offsets:  # no steady state at this N: the candidate completed as a whole
            done = None
            out_of_time = out_of_time or past(deadline)  # (small schedules' list passes do not check it)
            if not out_of_time:
                try:
                    done = _whole_completion(inst, cand, rev, deadline)
                except DeadlineReached:  # the candidates completed so far compete
                    out_of_time = True
            if done is not None:
                if whole is None or done[0] < whole[0] - 1e-9:
                    whole = (done[0], i, cand, done[1])
                scored.append((done[0] - n * rep.period, i, cand))
            continue
        small = inst.with_(micro_batches=min(n, 2 * offsets + 2))  # its warm-up, a steady state, its cool-down
        naive = cand.unroll(small)
        values = [schedule_objective(small, s) for s in guided(small, naive, [small.capacity])] or [schedule_objective(small, asap(small, orders_from_starts(small, naive)))]
        scored.append((min(values) - small.micro_batches * rep.period, i, cand))  # beyond N periods
    whole_found: dict[str, Any] = {} if whole is None else {"whole": whole[3]}
    if out_of_time or past(deadline):  # the candidates' share of the run's time ran out
        whole_found["cut_by"] = "time_limit"
    if not scored:
        return rep, {"candidates": len(sigmas), **whole_found}
    scored.sort(key=lambda x: (x[0], x[1]))
    best: tuple[float, Repetend, np.ndarray, dict[str, Any]] | None = None
    for _, _, cand in scored[:1]:
        if n < 2 * cand.offsets:  # no steady state: `run_tessel` completes the whole schedule
            if whole is not None:
                cand = whole[2]  # the repetend of the best completion at N
            return cand, {"candidates": len(sigmas), **whole_found}
        try:
            start, info = complete_phases(inst, cand, ctx, 0.0)
            value = schedule_objective(inst, asap(inst, orders_from_starts(inst, start), deadline=ctx.deadline))
        except DeadlineReached:  # out of the run's time (large N): `run_tessel` takes it from here
            return cand, {"candidates": len(sigmas), "cut_by": "time_limit"}
        if best is None or value < best[0] - 1e-9:
            best = (value, cand, start, info)
    assert best is not None
    return best[1], {"start": best[2], "info": best[3], "candidates": len(sigmas), **whole_found}


def _whole_completion(inst: PipelineInstance, cand: Repetend, rev: PipelineInstance, deadline: float | None) -> tuple[float, np.ndarray] | None:
    """The best (by the evaluator) schedule of the whole instance completed from the
    repetend ``cand`` when N leaves it no steady state: the repetend-guided list schedules
    (W passes in repetend order and deferred; within the capacity and within the
    repetend's steady-state peak) and their forward-backward improvement (`justify`).
    Returns (objective in seconds, (B, N) start times in seconds), or None when no list
    schedule fits; `DeadlineReached` past ``deadline``."""
    naive = cand.unroll(inst)
    limits = [inst.capacity, _steady_peak(inst, cand)]
    prios = [naive]
    if (inst.role_code == 2).any():
        prios.append(naive + (inst.role_code == 2)[:, None] * (float(naive.max()) + 1.0))
    made: list[np.ndarray] = []
    for prio in prios:
        for s in guided(inst, prio, limits, deadline):
            made.append(s)
            made.extend(justify(inst, s, limits, rev=rev, deadline=deadline))
    best: tuple[float, np.ndarray] | None = None
    for s in made:
        chk = evaluate(inst, make_plan(inst, s - s.min()))
        if chk.feasible and (best is None or chk.objective < best[0] - 1e-9):
            best = (float(chk.objective), s)
    return best


def _budgeted_search(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> Repetend:
    """`search_repetend` within ``search_time_limit`` seconds (heuristics, probes and the
    rate MILP share it; the period is then proven only if the proof fit). Without any
    repetend in that time, the search runs again without the budget."""
    budget = params.get("search_time_limit")
    if budget is None:
        return search_repetend(inst, ctx, params)
    sub = sub_ctx(ctx, float(budget), share=1.0)
    remaining = ctx.remaining_time()
    binding = "time_limit" if remaining is not None and remaining < float(budget) else "search_time_limit"  # (`repetend.context_budget`)
    try:
        return search_repetend(inst, sub, {**params, "_deadline": time.perf_counter() + float(budget), "_deadline_budget": binding})
    except (DeadlineReached, NoSolutionError):  # none within the budget: again without it
        if past(ctx.deadline):
            raise
    finally:
        if sub.solver_results is not ctx.solver_results:
            ctx.solver_results.extend(sub.solver_results)
    return search_repetend(inst, ctx, params)


def _steady_peak(inst: PipelineInstance, rep: Repetend) -> np.ndarray:
    """(D,) the repetend's steady-state peak memory per device (bytes)."""
    cy = cyclic_blocks(inst, rep.unfold)
    mem = steady_memory(cy, rep.sigma, rep.period)
    out = np.full(inst.n_devices, np.inf)
    for d in range(inst.n_devices):
        on = cy.mask[:, d] & (cy.mem > 0)
        if on.any():
            out[d] = float(mem[on, d].max())
    return out


