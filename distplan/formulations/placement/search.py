"""placement_search: the Baechi heuristics' plans improved by local search (`improve`).

The heuristics (m-ETF, m-TOPO, m-SCT on the graph and on its coarsened graph, single
device; Jeon et al., SoCC 2020) give the starting plans, and one more comes, within
``cluster_share`` of the time, from whole layers: when the graph has layer chains (a layer
unrolled over time, `chains.layer_chains`), the search over groups of whole layers
(`chains.group_search`, default share 0.7), else critical-path clusters of the best plan
moved greedily (`improve.cluster_greedy`, default share 0.3); by default under the channel
model only. The search runs from
the best one until it stops improving, then from the next ones with other seeds while time
is left; the best schedule found, re-timed longest tail first when that ends earlier
(`tailsched`), is the plan (the api re-evaluates it with the independent evaluator). The forced co-location bound (`forced`) gets a share of the time first, up to
the best heuristic's makespan. The run ends ``time_limit`` when its time (the run's
limit, else ``default_time_limit``) stopped the search, ``iteration_limit`` when
``max_evals`` did (`EVALS_CUT`), and ``finished`` when it reached a local optimum or a
proven bound. Times in seconds.
"""

from __future__ import annotations

import time

import numpy as np

from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.deadline import past
from distplan.formulations.placement.bounds import placement_bounds
from distplan.formulations.placement.chains import group_search, layer_chains, layer_groups
from distplan.formulations.placement.forced import forced_bound
from distplan.formulations.placement.heuristics import packed_schedule, single_device_schedule, topo_assignment
from distplan.formulations.placement.improve import cluster_greedy, improve, search_info
from distplan.formulations.placement.listsched import Schedule, evaluated_schedule, list_schedule
from distplan.formulations.placement.milp import heuristic_schedules
from distplan.formulations.placement.repair import repaired_schedule
from distplan.formulations.placement.tailsched import polished
from distplan.formulations.registry import Outcome, RunContext, RunTermination
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan, make_plan
from distplan.solvers.result import Termination


def search_deadline(ctx: RunContext, default: float) -> float:
    """The ``time.perf_counter()`` value at which the search stops: the run's deadline,
    else ``default`` seconds from now."""
    rem = ctx.remaining_time()
    return time.perf_counter() + (default if rem is None else rem)


def improved_schedule(
    inst: PlacementInstance, starts: list[tuple[Schedule, str]], deadline: float, seed: int = 0, max_evals: int | None = None, target: float = 0.0
) -> tuple[Schedule | None, str, dict[str, object]]:
    """Local search from each start (best first) until ``deadline``, ``max_evals``
    schedules in all, or a makespan <= ``target`` (a proven bound, seconds): (best
    schedule, its origin, search statistics)."""
    # the best start stands even when no time is left to search from it
    best: Schedule | None = starts[0][0] if starts else None
    origin = starts[0][1] if starts else ""
    info: dict[str, object] = {}
    evals = 0
    for k, (sched, name) in enumerate(starts):
        if time.perf_counter() >= deadline or (max_evals is not None and evals >= max_evals) or (best is not None and best.makespan <= target):
            break
        if best is None or sched.makespan < best.makespan:
            best, origin = sched, name
        budget = None if max_evals is None else max_evals - evals
        found, log = improve(inst, sched.device, deadline=deadline, max_evals=budget, seed=seed + k, target=target)
        evals += log.evaluations
        if k == 0:
            info = search_info(log)
        if found is not None and (best is None or found.makespan < best.makespan):
            best, origin = found, f"{name} + local search"
    info["search_starts_used"] = min(len(starts), k + 1) if starts else 0
    info["search_evaluations_total"] = evals
    return best, origin, info


def evals_total(info: dict[str, object]) -> int:
    """Schedules the local search evaluated, from all its starts (`improved_schedule`)."""
    total = info.get("search_evaluations_total", 0)
    return total if isinstance(total, int) else 0


def packed_start(inst: PlacementInstance, deadline: float, seed: int = 0) -> list[tuple[Schedule, str]]:
    """The start of last resort, when no Baechi heuristic's plan fits: ops packed onto the
    devices by memory alone (`heuristics.packed_assignment`, best fit decreasing), timed by
    the list scheduler and the evaluator. Tight instances that every heuristic fails, as
    they place ops in time order, have one (two devices of 847 bytes for ops of 622, 573,
    225, 100, 100 and 74 bytes: placement_search ended NoSolutionError "returned no plan"
    there). When the packing does not fit either, the memory repair searches device
    assignments and orders until ``deadline`` (`repair`: under the liveness model the
    order decides what fits). When it finds nothing, NoSolutionError says why each source
    failed (exit 4: none of this proves that no plan exists; `PlacementInstance` raises
    InfeasibleError where memory proves it)."""
    try:
        sched = evaluated_schedule(inst, _plan_of(inst, packed_schedule(inst)))
        packing = "its plan does not fit (the evaluator rejects it)"
    except NoSolutionError as exc:
        sched, packing = None, str(exc)
    if sched is not None:
        return [(sched, "memory packing (no Baechi heuristic's plan fits)")]
    t0 = time.perf_counter()
    repaired = repaired_schedule(inst, deadline, seed=seed)
    if repaired is not None:
        return [(repaired, "memory repair (no Baechi heuristic's plan or packing fits)")]
    if time.perf_counter() >= deadline:  # the reasons below run the heuristics again
        raise NoSolutionError(
            f"{inst.name}: placement_search found no plan to start from before its time limit: no Baechi heuristic's plan, "
            "packing by memory or memory repair fits (memory does not prove that none exists)"
        )
    reasons = []
    for name, make in (
        ("m-ETF", lambda: list_schedule(inst)),
        ("m-TOPO", lambda: list_schedule(inst, assignment=topo_assignment(inst))),
        ("single device", lambda: single_device_schedule(inst)),
    ):
        try:
            got = make()
            why = "its plan does not fit (the evaluator rejects it)" if evaluated_schedule(inst, _plan_of(inst, got)) is None else "(fits when run alone)"
        except (InfeasibleError, NoSolutionError) as exc:  # single device: proven for its one plan
            why = str(exc)
        reasons.append(_labelled(name, _without_name(inst, why)))
    reasons.append("m-SCT (on the graph and its coarsened graph): no plan that fits")
    reasons.append(_labelled("packing by memory", _without_name(inst, packing)))
    reasons.append(f"memory repair: no device assignment and order that fits found in {time.perf_counter() - t0:.2f} s")
    raise NoSolutionError(
        f"{inst.name}: placement_search found no plan to start from, though memory does not prove that none exists; "
        + "; ".join(reasons)
        + (" (try placement_milp, which decides feasibility)" if inst.memory_model == "simple" else "")
    )


def _plan_of(inst: PlacementInstance, sched: Schedule) -> PlacementPlan:
    return make_plan(inst, sched.device, sched.start)


def _labelled(name: str, why: str) -> str:
    return why if why.startswith(name) else f"{name}: {why}"


def _without_name(inst: PlacementInstance, message: str) -> str:
    prefix = f"{inst.name}: "
    return message[len(prefix):] if message.startswith(prefix) else message


#: the run's own end when ``max_evals`` stopped its local search (`distplan verify` accepts
#: iteration_limit for placement_search when ``info["search_cut"]`` says so)
EVALS_CUT = RunTermination(Termination.ITERATION_LIMIT.value, "search_cut", frozenset({"max_evals"}), "its local search stopped at max_evals", needs_call=False)


def run_search(inst: PlacementInstance, ctx: RunContext) -> Outcome:
    """Heuristic plans -> local search within the time limit (``default_time_limit``
    seconds without one) -> the best plan, timed by the evaluator's own re-simulation
    under the channel model."""
    t0 = time.perf_counter()
    deadline = search_deadline(ctx, float(ctx.param("default_time_limit", 30.0)))
    starts = heuristic_schedules(inst, ctx) or packed_start(inst, deadline, ctx.seed)
    bounds = []
    share = float(ctx.param("forced_share", 0.1))
    if share > 0 and not past(deadline):  # the forced co-location bound first, with a share of the time
        # (within the run's deadline: the start plans can take it all on 27,083 ops)
        b = forced_bound(inst, starts[0][0].makespan, deadline=min(deadline, time.perf_counter() + share * max(0.0, deadline - t0)))
        if b is not None:
            bounds.append(b)
    max_evals = ctx.param("max_evals", None)
    # one more start: whole layer chains moved between devices (`chains`), or on graphs
    # without them critical-path clusters moved greedily. By default under the channel
    # model only: there every cut tensor serializes on two channels and plans built from
    # whole chains start far better (gnmt-v2-4gpu-channels: layer groups 85.9 ms, path
    # clusters 106 ms, m-ETF 116 ms; the op-level search after the layer search gained
    # 0.1 ms in 40 s, hence most of the time for the layer search); under independent links m-SCT's plans already cut
    # cheaply and searching from them did better in our runs (gnmt-v2-4gpu, 60 s: 79.5 ms
    # vs 79.7 ms from path clusters)
    layers = layer_chains(inst) if inst.n_devices > 1 else []
    layer_info: dict[str, object] = {}
    wanted = ctx.param("cluster_share", None)
    share = ((0.7 if layers else 0.3) if inst.communication == "channels" else 0.0) if wanted is None else float(wanted)
    if share > 0 and inst.n_devices > 1:
        until = time.perf_counter() + share * max(0.0, deadline - time.perf_counter())
        if layers:
            found, layer_log = group_search(inst, layer_groups(inst, layers), starts[0][0].device, deadline=until, max_evals=None if max_evals is None else int(max_evals), seed=ctx.seed)
            how = "layer chains"
            layer_info = {"layer_chains": len(layers), "layer_search_evaluations": layer_log.evaluations, "layer_search_makespan": layer_log.makespan, "layer_search_stopped": layer_log.stopped}
        else:
            found, how = cluster_greedy(inst, starts[0][0].device, deadline=until), "path clusters"
        if found is not None:  # timed by the evaluator: under the liveness model the list
            # scheduler's schedule of an assignment can hold more than the evaluator counts
            # (r720: a peak of 17 bytes on a device of 12 became the run's plan, exit 1)
            found = evaluated_schedule(inst, _plan_of(inst, found))
        if found is not None and found.makespan < starts[0][0].makespan:
            starts = sorted([*starts, (found, f"{starts[0][1]} + {how}")], key=lambda f: f[0].makespan)
    # stop once the plan is within the run's gap tolerance of a proven bound
    gap = ctx.options.mip_gap if ctx.options.mip_gap is not None else 0.0
    # (the solver-free bounds take 0.5-1 s on 12,000 ops, and `distplan.solve` adds them to
    # the result anyway: only a search that has time left stops early at them)
    free = placement_bounds(inst, deadline) if time.perf_counter() < deadline else []
    target = max([b.value for b in bounds + free], default=0.0) * (1 + gap)
    # 2% of the time is kept for re-timing the best assignment longest-tail-first
    stop = deadline - 0.02 * max(0.0, deadline - time.perf_counter())
    best, origin, info = improved_schedule(inst, starts, stop, ctx.seed, None if max_evals is None else int(max_evals), target)
    assert best is not None
    again = best if past(deadline) else polished(inst, best)  # (0.4 s on 12,000 ops)
    if again is not best:
        best, origin = again, f"{origin}, re-timed longest tail first"
    plan = make_plan(inst, best.device, best.start)
    check = evaluate(inst, plan)
    s0, name0 = starts[0]
    if not check.feasible or check.objective > s0.makespan:  # the evaluator times it worse: keep the start
        plan, claimed, origin = make_plan(inst, s0.device, s0.start), s0.makespan, name0
    else:
        claimed = float(check.objective)
    info.update(layer_info)
    info["plan_from"] = origin
    info["heuristic_makespan"] = float(starts[0][0].makespan)
    # a search cut by its time (the run's limit, else ``default_time_limit``) or by
    # ``max_evals`` did not run to completion (a local optimum or the bound reached did)
    termination = None
    if past(stop):
        termination, info["search_cut"] = Termination.TIME_LIMIT, "time_limit"
    elif max_evals is not None and evals_total(info) >= int(max_evals):
        termination, info["search_cut"] = Termination.ITERATION_LIMIT, "max_evals"
    return Outcome(plan=plan, bounds=bounds, solver_results=list(ctx.solver_results), claimed_objective=claimed, info={k: (v.item() if isinstance(v, np.generic) else v) for k, v in info.items()}, termination=termination)
