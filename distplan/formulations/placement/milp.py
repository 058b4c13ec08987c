"""The placement MILP: device and start time of every op, minimizing the makespan.

Variables (time in microseconds inside the model, `SCALE`): x[i, d] binary (op i on
device d), s_i start, w makespan; z_e in [0, 1] "ends on different devices" per edge
(uniform links) or pairwise delay rows (heterogeneous links); for pairs of ops with no path
between them whose time windows can overlap, an ordering binary o_ij and a same-device
indicator q_ij with disjunctive big-M rows (the disjunctive model of Venugopalan & Sinnen,
IEEE TPDS 26(1), 2015, with per-pair big-M from the windows). Strengthened with the rows of
the assignment relaxation (`relaxation`): heads and tails at fastest times bound every
start (s_i >= r_i, w >= s_i + p_i(x) + q_i), energetic load rows per device, symmetry
broken by first use when the devices are interchangeable, under Baechi's channel model
the channel load of every device, and (``milp_order_nonzeros`` > 0) the ancestor and
descendant load rows on the start times (`descendants`), and (``milp_wait_nonzeros``,
``milp_window_nonzeros`` > 0) its waiting and window rows.

Horizon H: the best evaluated makespan of the Baechi heuristics (m-ETF, m-TOPO, m-SCT,
single device), so some optimum satisfies w <= H; the MILP is warm-started from that plan
and, when its own plan evaluates worse, that plan is returned.

The model is exact (its optimum is the instance optimum) under the simple memory model and
independent links, when every conflicting pair has its disjunction. Otherwise it is a
relaxation and only its dual bound is used: under Baechi's channel model (a transfer is
never faster than its delay, and a channel carries one transfer at a time), under the
liveness memory model (only what is held to the end, persistent memory and unconsumed
outputs, is charged), and
when pairs beyond ``max_pairs`` are left out (the order of those ops is free). Plans are
always re-scheduled from the solver's device and per-device order and re-evaluated.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, baseline_deadline, check, past
from distplan.formulations.placement import relaxation
from distplan.formulations.placement.descendants import precedence_load_rows, waiting_load_rows, window_load_rows
from distplan.formulations.placement.forced import forced_bound
from distplan.formulations.placement.heuristics import packed_schedule, single_device_schedule, topo_assignment
from distplan.formulations.placement.improve import SearchProblem, improve, relabelled
from distplan.formulations.placement.joined import device_automorphisms, orbit_representatives
from distplan.formulations.placement.listsched import Schedule, evaluated_schedule, list_schedule
from distplan.formulations.placement.relaxation import (
    AssignIndex,
    assign_index_fields,
    assignment,
    channel_loads,
    interchangeable,
    load_rows,
    memory_capacity,
    symmetry,
)
from distplan.formulations.placement.repair import repaired_schedule
from distplan.formulations.placement.segments import fingerprint, glued_assignment, module_bound
from distplan.formulations.placement.tailsched import polished
from distplan.formulations.placement.time_unit import in_time_unit
from distplan.formulations.placement.waist import waist_bound
from distplan.formulations.placement.windowchain import chained_start
from distplan.formulations.registry import Bound, Outcome, RunContext, get_formulation
from distplan.modeling.model import Model
from distplan.modeling.scheduling import disjunctive_pairs_when
from distplan.models.graphs import transitive_closure
from distplan.models.placement_evaluate import evaluate, schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance, byte_text
from distplan.models.placement_plan import PlacementPlan, make_plan
from distplan.solvers.result import INFEASIBLE_TERMINATIONS, SolverResult, Termination

SCALE = relaxation.SCALE
#: nonzeros of the waiting and of the window rows (`descendants`) in the MILP at most
#: (default; ``milp_wait_nonzeros``, ``milp_window_nonzeros``)
MILP_WAIT_NONZEROS = 0
#: pairs with a disjunction at most (the others' order is left free: a relaxation)
MAX_PAIRS = 60_000
#: the most rows of the per-pair precedence block (edges x ordered device pairs, when link
#: speeds differ) a model builds: 5.8 million (llama3-70b coarsened, 64 GPUs) took 25 s to
#: build, 9x a 3 s limit (review rev24b D2); the bundled instances need at most 117,612
PAIRWISE_MAX_ROWS = 250_000
#: seconds the memory repair may take when the run has no time limit (it stops earlier at
#: a plan that fits, or when its restarts stop lowering the excess)
REPAIR_SECONDS = 10.0


def reachability(inst: PlacementInstance, deadline: float | None = None) -> np.ndarray:
    """reach[i, j] = True when a path i -> j exists (boolean, n x n); `DeadlineReached`
    when ``deadline`` (a ``time.perf_counter()`` value) passes while it is built."""
    stop = None if deadline is None else functools.partial(check, deadline, "placement_milp's reachability")
    return transitive_closure(inst.n_ops, inst.src, inst.dst, inst.topo_order(), checkpoint=stop)


def identical_devices(inst: PlacementInstance) -> bool:
    nd = inst.n_devices
    off = ~np.eye(nd, dtype=bool)
    return bool(
        np.all(inst.time == inst.time[:, :1])
        and np.ptp(inst.device_memory) == 0
        and (nd == 1 or (np.ptp(inst.bandwidth[off]) == 0 and np.ptp(inst.latency[off]) == 0))
    )


def best_heuristic(inst: PlacementInstance, ctx: RunContext | None = None, deadline: float | None = None) -> tuple[Schedule | None, str]:
    """The best evaluated plan of m-ETF, m-TOPO, single device and (given a context for its
    LP) m-SCT on the instance and on its coarsened graph: (schedule, name) or (None, "").
    Without a context, ``deadline`` (a ``time.perf_counter()`` value) stops the heuristics
    once one plan is in hand, as the context's deadline does."""
    found = heuristic_schedules(inst, ctx, deadline)
    return found[0] if found else (None, "")


def heuristic_schedules(inst: PlacementInstance, ctx: RunContext | None = None, deadline: float | None = None) -> list[tuple[Schedule, str]]:
    """The evaluated plans of the Baechi heuristics (see `best_heuristic`), best first; when
    m-ETF, m-TOPO and single device place nothing, a packing by memory
    (`heuristics.packed_schedule`). Once a plan is in hand the deadline stops the others,
    but not within `BASELINE_GRACE` of the start: a limit that passed while the command
    loaded still gets every heuristic of a small graph (milliseconds each), so that
    placement_milp and placement_search do not return m-ETF's plan where m-TOPO's, the
    baseline ``baechi_topo``, is better."""
    found: list[tuple[Schedule, str]] = []
    stop = baseline_deadline(ctx.deadline if ctx is not None else deadline)
    # the cheapest first, so that a grace after a passed limit covers as many as it can
    # (on 13,188 ops m-TOPO takes 0.04 s, m-ETF 0.09-0.10 s: after m-ETF first, the grace
    # was spent and m-TOPO's better plan never started, review rev23b)
    # once a plan is in hand the list scheduler itself stops at ``stop`` (m-ETF, 0.09 s on
    # 13,188 ops, ran to its end)
    makers: list[tuple[str, Callable[[], Schedule | None]]] = [
        ("m-TOPO", lambda: list_schedule(inst, assignment=topo_assignment(inst), deadline=stop if found else None)),
        ("single device", lambda: single_device_schedule(inst)),
        ("m-ETF", lambda: list_schedule(inst, deadline=stop if found else None)),
    ]
    # the source of last resort, when the others place nothing (`packed_assignment`)
    makers.append(("memory packing", lambda: packed_schedule(inst) if not found else None))
    for name, make in makers:
        if found and past(stop):  # a plan in hand: the limit stops the others (0.04-0.09 s each on 13,188 ops)
            break
        try:
            s = make()
        except (InfeasibleError, NoSolutionError):  # single device: proven for its one plan; the others stop
            continue
        except DeadlineReached:  # (only with a plan in hand)
            break
        if s is None:
            continue
        sched = evaluated_schedule(inst, make_plan(inst, s.device, s.start))
        if sched is not None:
            found.append((sched, name))
    if ctx is not None and not (found and past(ctx.deadline)):
        for name, plan in _sct_plans(inst, ctx):
            sched = evaluated_schedule(inst, plan)
            if sched is not None:
                found.append((sched, name))
    # ties go to the heuristics in Baechi's order of preference, as before the reordering
    return sorted(found, key=lambda f: (f[0].makespan, HEURISTIC_PREFERENCE.get(f[1], len(HEURISTIC_PREFERENCE))))


#: the order in which equal makespans are preferred (m-SCT's plans after these)
HEURISTIC_PREFERENCE = {"m-ETF": 0, "m-TOPO": 1, "single device": 2, "memory packing": 3}


def _sct_plans(inst: PlacementInstance, ctx: RunContext) -> list[tuple[str, PlacementPlan]]:
    """m-SCT's plans on the instance and on its coarsened graph (its LP runs in a context of
    its own, so that the MILP stays the run's last solver call)."""
    from distplan.formulations.placement.coarsen import coarsen

    sct = get_formulation("placement", "baechi_sct")
    out: list[tuple[str, PlacementPlan]] = []
    for folded in (False, True):
        if past(ctx.deadline):  # (the heuristics' plans are in hand: m-SCT's are extra)
            break
        sub = ctx.child({**sct.params})  # never past the run's deadline
        try:
            if folded:
                folding = coarsen(inst, {}, deadline=ctx.deadline)
                res = sct.run(folding.instance, sub)
                plan = folding.unfold(res.plan) if res.plan is not None else None
            else:
                res = sct.run(inst, sub)
                plan = res.plan
        except (InfeasibleError, NoSolutionError):
            continue
        except DeadlineReached:
            break
        if plan is not None:
            out.append(("m-SCT (coarsened)" if folded else "m-SCT", plan))
    return out


# -- the block contract: index and blocks ------------------------------------------------------


@dataclass(frozen=True)
class MilpIndex(AssignIndex):
    """The MILP's index: the placement programs' shared index plus the horizon H
    (microseconds) and the incumbent that gives it, whether the model is exact, and the
    pairs (i, j) with no path between them that get a disjunction, with per-pair big-M
    from the windows (``pairs_left_out``: beyond ``max_pairs``)."""

    horizon: float
    incumbent: Schedule | None
    exact: bool
    pair_i: np.ndarray
    pair_j: np.ndarray
    big_m_ij: np.ndarray
    big_m_ji: np.ndarray
    pairs_left_out: int


def prepare_milp(inst: PlacementInstance, params: Mapping[str, Any]) -> MilpIndex:
    """A valid horizon (microseconds): the best heuristic makespan (given in ``incumbent``
    or computed here without m-SCT), else serial time + all delays; heads and tails; the
    pairs of ops with no path between them whose windows can overlap, longest ops first,
    at most ``max_pairs`` (leaving one out makes the model a relaxation)."""
    fields = assign_index_fields(inst, params)
    # the ancestor and descendant rows on the start times: off by default (at 120 s they
    # left HiGHS without a dual bound on inception-v3-dgx1-4); the assignment relaxation
    # run before the MILP has them (``order_nonzeros``)
    fields["order_nonzeros"] = int(params.get("milp_order_nonzeros", 0))
    for key in ("wait_nonzeros", "window_nonzeros"):
        fields[key] = min(fields[key], int(params.get(f"milp_{key}", MILP_WAIT_NONZEROS)))
    if inst.n_devices > 1 and inst.n_ops > 0 and identical_devices(inst):
        fields["symmetry_classes"] = (np.arange(inst.n_devices),)
    sched = params.get("incumbent")
    if sched is None:
        sched, _ = best_heuristic(inst)
    if sched is not None:
        H = sched.makespan * SCALE * (1 + 1e-9) + 1e-6
    else:
        H = float(inst.time.max(axis=1).sum() + inst.max_delay().sum()) * SCALE
    exact = inst.memory_model == "simple" and inst.communication == "independent"
    r, q = fields["r"], fields["q"]
    deadline = params.get("deadline")
    reach = reachability(inst, deadline)
    pmax = inst.time.max(axis=1) * SCALE
    cap = int(params.get("max_pairs", MAX_PAIRS))
    i, j, kept = disjunctive_pairs(reach, H, r, q, pmax, cap, deadline)
    left_out = kept - i.size
    exact = exact and left_out == 0
    Mij = H - q[i] - r[j]
    Mji = H - q[j] - r[i]
    return MilpIndex(**fields, horizon=H, incumbent=sched, exact=exact, pair_i=i, pair_j=j, big_m_ij=Mij, big_m_ji=Mji, pairs_left_out=left_out)


#: cells of the (rows x ops) blocks `disjunctive_pairs` works on at a time
PAIR_BLOCK_CELLS = 1 << 22


def disjunctive_pairs(reach: np.ndarray, H: float, r: np.ndarray, q: np.ndarray, pmax: np.ndarray, cap: int, deadline: float | None = None) -> tuple[np.ndarray, np.ndarray, int]:
    """The pairs i < j of ops with no path between them whose windows can overlap
    (H - q_i - r_j > 0 and H - q_j - r_i > 0, microseconds) and of which one takes time:
    all of them in (i, j) order when there are at most ``cap``, else the ``cap`` with the
    longest shorter op (``min(pmax_i, pmax_j)``), ties in (i, j) order; and how many there
    are. Rows go in blocks of about `PAIR_BLOCK_CELLS` cells, each checking ``deadline``;
    past the ``cap`` best, a block keeps only pairs longer than the shortest one held (a
    later pair of equal length loses the tie), so memory stays at ``cap`` pairs."""
    n = reach.shape[0]
    step = max(1, PAIR_BLOCK_CELLS // max(n, 1))
    cols = np.arange(n)
    room = H - q  # H - q_i - r_j as (H - q_i) - r_j, in the order the big-Ms are computed
    held_i = held_j = np.zeros(0, dtype=np.int64)
    held_v = np.zeros(0)
    ranked = False  # the held pairs are the cap best, longest first
    kept = 0
    for lo in range(0, n, step):
        check(deadline, "placement_milp's disjunctive pairs")
        rows = cols[lo : lo + step]
        ok = ~(reach[rows] | reach[:, rows].T) & (cols[None, :] > rows[:, None])
        ok &= (room[rows][:, None] - r[None, :] > 0) & (room[None, :] - r[rows][:, None] > 0)
        ok &= (pmax[rows][:, None] > 0) | (pmax[None, :] > 0)
        kept += int(np.count_nonzero(ok))
        if ranked:  # only pairs longer than the shortest held can enter
            ok &= np.minimum(pmax[rows][:, None], pmax[None, :]) > (held_v[-1] if cap else np.inf)
        a, b = np.nonzero(ok)
        a = rows[a]
        held_i, held_j = np.concatenate([held_i, a]), np.concatenate([held_j, b])
        held_v = np.concatenate([held_v, np.minimum(pmax[a], pmax[b])])
        if held_v.size > cap:
            top = np.lexsort((held_j, held_i, -held_v))[:cap]
            held_i, held_j, held_v = held_i[top], held_j[top], held_v[top]
            ranked = True
    return held_i, held_j, kept


def start_times(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """s_i in [r_i, H - q_i - p_min,i] (microseconds), w in [lower bounds, H]."""
    H, r, q, pmin = index.horizon, index.r, index.q, index.pmin
    ub = np.maximum(H - q - pmin, r)
    model.add_vars("start", inst.n_ops, lb=r, ub=ub)
    low = float((r + pmin + q).max(initial=0.0))
    model.add_vars("makespan", (), lb=min(low, H), ub=H)


def precedence_with_communication(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """s_j >= s_i + duration_i + delay when i and j sit on different devices.

    Delays are capped at the horizon H: every start is at most H, so a delay of H already
    forbids what a longer one forbids, except a plan in which the edge's ends take no time
    and have no tail, whose makespan the row then puts at H or above, never below the
    incumbent's (the model stays exact for the optimum below H, and a relaxation). A delay
    far above H (a slow link: 1e9 microseconds beside millisecond ops) had put
    coefficients in the rows that led HiGHS to call the model infeasible below a worse
    incumbent, which the run then reported as optimal (review rev12 D1).

    When link speeds differ, each ordered device pair's delay gets its row
    (`_pairwise_precedence`) up to `PAIRWISE_MAX_ROWS` rows; beyond, only the smallest
    delay on a cut edge is modelled, a relaxation: its dual bound holds, and its plans are
    timed by the evaluator, so the run is optimal only where that bound closes the gap."""
    if inst.n_edges == 0:
        return
    x, s, dur = model["assign"], model["start"], model.expression("duration")
    m = inst.n_devices
    src, dst = inst.src, inst.dst
    off = ~np.eye(m, dtype=bool)
    if m == 1:
        model.add_constraints("precedence", s[src] + dur[src] - s[dst] <= 0)
        return
    uniform = np.ptp(inst.bandwidth[off]) == 0 and np.ptp(inst.latency[off]) == 0
    # links of different speeds: each pair's delay, up to PAIRWISE_MAX_ROWS rows (past it,
    # the smallest delay on a cut edge only, below: a relaxation, whose dual bound still
    # holds and whose plans the evaluator times)
    if not uniform and inst.n_edges * int(off.sum()) <= PAIRWISE_MAX_ROWS:
        _pairwise_precedence(model, inst, index, off)
    # the delay on a cut edge (the smallest; with uniform links, the one delay), with
    # z_e >= x[i, d] - x[j, d]: with different links weaker for a plan, stronger in the LP
    # relaxation (the pairwise rows vanish for fractional x)
    cmin = np.minimum(inst.min_delay() * SCALE, index.horizon)
    z = model.add_vars("different-device", inst.n_edges, lb=0.0, ub=1.0)
    model.add_constraints("different-device-link", z[:, None] - x[src] + x[dst] >= 0)
    model.add_constraints("precedence", s[src] + dur[src] + cmin * z - s[dst] <= 0)


def _pairwise_precedence(model: Model, inst: PlacementInstance, index: MilpIndex, off: np.ndarray) -> None:
    """s_j >= s_i + duration_i + delay(a, b) when i sits on a and j on b, for every ordered
    pair of devices (edges x m(m - 1) rows; `PAIRWISE_MAX_ROWS`)."""
    x, s, dur = model["assign"], model["start"], model.expression("duration")
    src, dst = inst.src, inst.dst
    pairs = np.argwhere(off)
    a, b = pairs[:, 0], pairs[:, 1]
    delay = np.minimum((inst.latency[a, b][None, :] + inst.edge_bytes[:, None] / inst.bandwidth[a, b][None, :]) * SCALE, index.horizon)  # (E, P)
    E, P = delay.shape
    ee = np.repeat(np.arange(E), P)
    pp = np.tile(np.arange(P), E)
    dl = delay.reshape(-1)
    model.add_constraints(
        "precedence-pairwise",
        s[src[ee]] + dur[src[ee]] - s[dst[ee]] + dl * (x[src[ee], a[pp]] + x[dst[ee], b[pp]]) <= dl,
    )


def no_overlap(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """Ops with no path between them do not overlap when they share a device: a same-device
    indicator q_ij >= x[i, d] + x[j, d] - 1 and a disjunction binding when it is 1
    (`disjunctive_pairs_when`, big-M per pair from the windows)."""
    i, j = index.pair_i, index.pair_j
    if i.size == 0:
        return
    x, dur = model["assign"], model.expression("duration")
    same = model.add_vars("same-device", i.size, lb=0.0, ub=1.0)
    model.add_constraints("same-device-link", same[:, None] - x[i] - x[j] >= -1)
    disjunctive_pairs_when(model, model["start"], i, j, dur[i], dur[j], index.big_m_ij, index.big_m_ji, same, "no-overlap")


def precedence_loads(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """Ancestor and descendant load rows on the start times (`descendants`)."""
    precedence_load_rows(model, inst, model["start"], model["makespan"], index.P, index.r, index.q, index.order_nonzeros)


def waiting_loads(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """The waiting and window rows on the start times (`descendants`)."""
    waiting_load_rows(model, inst, model["start"], model["makespan"], index.P, index.r, index.q, index.wait_nonzeros)
    window_load_rows(model, inst, model["start"], index.P, index.r, index.window_nonzeros)


def makespan(model: Model, inst: PlacementInstance, index: MilpIndex) -> None:
    """w >= s_i + p_i(x) + q_i (the tail after op i takes at least q_i)."""
    s, w = model["start"], model["makespan"]
    model.add_constraints("makespan", s + model.expression("duration") - w <= -index.q)
    model.minimize(w)




def compact(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Earliest start times (seconds) keeping each device's order of ``start`` (independent
    links): removes the slack a solver leaves within its tolerances, and orders ops whose
    pair had no disjunction."""
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(inst.n_ops)
    # ops starting together go shortest first (then topologically): a zero-time op and a
    # long one on one device at the same start keep the zero-time op first, as the
    # solver's times say (ordered by position alone, the long op went first and delayed
    # the zero-time op's consumers: review rev12 D2)
    order = np.lexsort((pos, start + inst.time[np.arange(inst.n_ops), device], start))
    preds: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for e, b in enumerate(inst.dst.tolist()):
        preds[b].append(e)
    new = np.zeros(inst.n_ops)
    end = np.zeros(inst.n_ops)
    free = np.zeros(inst.n_devices)
    done = np.zeros(inst.n_ops, dtype=bool)
    # a topological order consistent with the per-device order of `start`
    queue = list(order.tolist())
    indeg = np.bincount(inst.dst, minlength=inst.n_ops)
    succ: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].append(b)
    k = 0
    pending = np.zeros(inst.n_ops, dtype=bool)
    while k < len(queue):
        v = queue[k]
        k += 1
        if indeg[v] > 0:  # an input comes later in `start` order (solver slack): defer
            pending[v] = True
            continue
        d = int(device[v])
        t = free[d]
        for e in preds[v]:
            u = int(inst.src[e])
            du = int(device[u])
            t = max(t, end[u] if du == d else end[u] + inst.latency[du, d] + inst.edge_bytes[e] / inst.bandwidth[du, d])
        new[v] = t
        end[v] = t + inst.time[v, d]
        free[d] = end[v]
        done[v] = True
        for w in succ[v]:
            indeg[w] -= 1
            if indeg[w] == 0 and pending[w]:
                pending[w] = False
                queue.append(w)
    return new


def decode(inst: PlacementInstance, result: SolverResult, index: MilpIndex) -> tuple[PlacementPlan, float]:
    """Device from x; start times re-scheduled from the solver's per-device order (seconds)."""
    x = result.values_by_block["assign"]
    device = np.argmax(x, axis=1)
    start = compact(inst, device, result.values_by_block["start"] / SCALE)
    plan = make_plan(inst, device, start)
    check = evaluate(inst, plan)
    if not check.feasible:  # e.g. liveness memory: the evaluator's own schedule of the devices
        start = schedule_fixed_placement(inst, device)
        plan = make_plan(inst, device, start)
        check = evaluate(inst, plan)
    return plan, check.objective if check.feasible else float("inf")


#: the placement MILP (module docstring), time in microseconds
PLACEMENT_MILP = ModelSpec(
    "placement_milp",
    prepare_milp,
    (assignment, symmetry, start_times, precedence_with_communication, no_overlap, memory_capacity, load_rows, precedence_loads, waiting_loads, channel_loads, makespan),
    decode,
)


def warm_start(inst: PlacementInstance, model: Model, index: MilpIndex, ctx: RunContext | None = None) -> np.ndarray | None:
    """The incumbent's evaluated schedule as a full solution vector (devices relabelled by
    first use when the symmetry rows are on)."""
    sched = index.incumbent
    if sched is None:
        return None
    n, m = inst.n_ops, inst.n_devices
    device = np.asarray(sched.device, dtype=np.int64)
    if index.symmetry_classes:
        device = relaxation.relabel_first_use(inst, device, list(index.symmetry_classes))
    start = np.asarray(sched.start, dtype=float) * SCALE
    x = np.zeros((n, m))
    x[np.arange(n), device] = 1.0
    values: dict[str, Any] = {"assign": x, "start": start, "makespan": min(sched.makespan * SCALE * (1 + 1e-9) + 1e-6, index.horizon)}
    if "different-device" in model.var_blocks:
        values["different-device"] = (device[inst.src] != device[inst.dst]).astype(float)
    if index.pair_i.size:
        i, j = index.pair_i, index.pair_j
        values["same-device"] = (device[i] == device[j]).astype(float)
        end = start + inst.time[np.arange(n), device] * SCALE
        values["no-overlap-order"] = (end[j] <= start[i] + 1e-9 * index.horizon).astype(float)
    values.update(relaxation.channel_values(inst, device, model))
    if index.symmetry_classes:
        values.update(relaxation.first_use_values(inst, device, list(index.symmetry_classes)))
    return model.vector(values)


def exact_for(inst: PlacementInstance) -> bool:
    return inst.memory_model == "simple" and inst.communication == "independent"


#: the fewest ops above which `run_in_seconds` bounds the optimum by module windows
#: (``module_ops``), as the assignment relaxation runs above ``relaxation_ops``' 30
MODULE_OPS = 30


def run_in_seconds(inst: PlacementInstance, ctx: RunContext, name: str = "placement_milp") -> Outcome:
    """Best heuristic plan -> forced co-location bound (``forced_share`` of the time) ->
    series composition over waist ops (``waist_share``) -> series composition over cut
    waists with each module's optimum (``module_share``, above ``module_ops`` ops, `segments`: each small module's
    window solved by this MILP, `window_bound`; a forward window and its gradient window,
    tied by co-location, solved as one by `joined_bound` (``joined_windows``, up to
    ``joined_extra`` times the phase's length past it); over the same windows the last-stint
    bound, `lasthop`; their incumbents glued into a plan,
    `glued_start`, and combined over the whole waist chain by a DP, `windowchain.chained_start`
    within ``chain_share`` of the time left; the best replaces the heuristic one) -> local search on the plan (``search_share``, stopping at that bound) -> assignment
    relaxation (``relaxation_share``) -> local search from its assignment
    (``relaxation_search_share``) -> horizon and warm start -> MILP -> the better of the
    two plans; the MILP's dual bound (less the safety margin) is a bound in every case."""
    t0 = time.perf_counter()
    sched, source = best_heuristic(inst, ctx)
    bounds: list[Bound] = []
    rem = ctx.remaining_time()
    if sched is None and inst.memory_model == "liveness" and inst.n_devices > 1:
        # the model charges only the bytes held to the end (a relaxation), so its placement
        # may not fit; the memory repair searches assignments and orders that do (`repair`)
        share = float(ctx.param("search_share", 0.2))
        sched = repaired_schedule(inst, time.perf_counter() + share * (REPAIR_SECONDS if rem is None else rem), seed=ctx.seed)
        source = "memory repair (no Baechi heuristic's plan or packing fits)"
    forced_share = float(ctx.param("forced_share", 0.1))
    if sched is not None and forced_share > 0:
        b = forced_bound(inst, sched.makespan, deadline=None if rem is None else time.perf_counter() + forced_share * rem)
        if b is not None:
            bounds.append(b)
    waist_share = float(ctx.param("waist_share", 0.05))
    if waist_share > 0 and inst.n_devices > 1 and not past(ctx.deadline):  # past it, only improving phases are skipped
        rem = ctx.remaining_time()
        b = waist_bound(inst, deadline=None if rem is None else time.perf_counter() + waist_share * rem)
        if b is not None:
            bounds.append(b)
    module_share = float(ctx.param("module_share", 0.3))
    module_s = 0.0
    # on a few ops the whole MILP proves the optimum faster than the windows' MILPs prove
    # their bound (placement-small-4, 12 ops: 1.1 s without them, 4.3 s with)
    if module_share > 0 and inst.n_devices > 1 and inst.n_ops > int(ctx.param("module_ops", MODULE_OPS)) and not past(ctx.deadline):
        rem = ctx.remaining_time()
        t_mod = time.perf_counter()
        windows: dict[bytes, list[np.ndarray]] = {}
        waists: list[int] = []
        stint: list[Bound] = []
        b = module_bound(
            inst,
            lambda sub, until, lower, stage: window_bound(sub, ctx, until, lower, stage, found=windows),
            deadline=None if rem is None else time.perf_counter() + module_share * rem,
            waists=waists,
            also=stint,
            solve_joined=(lambda sub, part, keys, until, lower: joined_bound(sub, part, ctx, until, lower, keys, found=windows)) if ctx.param("joined_windows", True) else None,
            joined_extra=float(ctx.param("joined_extra", 1.0)),
        )
        if b is not None:
            bounds.append(b)
        bounds += stint
        if sched is not None and windows:
            glued = glued_start(inst, waists, windows, sched.device)
            rem = ctx.remaining_time()
            chain_share = float(ctx.param("chain_share", 0.15))
            fallbacks = [sched.device] + ([] if glued is None else [glued.device])
            chained = None if chain_share <= 0 else chained_start(inst, waists, windows, fallbacks, deadline=None if rem is None else time.perf_counter() + chain_share * rem)
            if glued is not None and glued.makespan < sched.makespan:
                sched, source = glued, "module windows' assignments glued"
            if chained is not None and chained.makespan < sched.makespan:
                sched, source = chained, "module windows' assignments chained over the waists"
        module_s = time.perf_counter() - t_mod
    rem = ctx.remaining_time()
    gap = ctx.options.mip_gap if ctx.options.mip_gap is not None else 0.0
    target = max([b.value for b in bounds], default=0.0) * (1 + gap)
    search_share = float(ctx.param("search_share", 0.2))
    if sched is not None and search_share > 0 and rem and inst.n_devices > 1:
        # a better incumbent: a smaller horizon (big-M) and a better warm start
        found, log = improve(inst, sched.device, deadline=time.perf_counter() + search_share * rem, seed=ctx.seed, target=target)
        if found is not None and found.makespan < sched.makespan:
            checked = evaluated_schedule(inst, make_plan(inst, found.device, found.start))
            if checked is not None and checked.makespan < sched.makespan:
                sched, source = checked, f"{source} + local search"
    if sched is not None and not past(ctx.deadline):  # (0.4 s on 12,000 ops)
        again = polished(inst, sched)
        if again is not sched:
            sched, source = again, f"{source}, re-timed longest tail first"
    heuristics_s = time.perf_counter() - t0
    info: dict[str, Any] = {"incumbent": source, "heuristics_seconds": heuristics_s, "module_seconds": module_s}
    share = float(ctx.param("relaxation_share", 0.25))
    rem = ctx.remaining_time()
    lo, hi = ctx.param("relaxation_ops", (30, 1500))
    if share > 0 and rem and lo < inst.n_ops <= hi and inst.n_devices > 1:
        # the assignment relaxation alone first: its branch and bound raises the bound
        # faster than the disjunctive model's, and w >= its bound helps the MILP prune
        seeds: list[np.ndarray] = []
        bounds += relaxation.relaxation_bounds(inst, ctx, share * rem, assignments=seeds)
        sched, source = _search_from(inst, ctx, seeds, sched, source, max([b.value for b in bounds], default=0.0) * (1 + gap))
    t1 = time.perf_counter()
    try:
        check(ctx.deadline, f"{name} before its model")
        model, index = PLACEMENT_MILP.build(inst, {**ctx.params, "incumbent": sched, "deadline": ctx.deadline}, name=name)
    except DeadlineReached as exc:  # the best plan so far, its bounds, ended by the limit
        info.update(incumbent=source, plan_from=source, stopped=str(exc))
        so_far = None if sched is None else make_plan(inst, sched.device, sched.start)
        return Outcome(plan=so_far, bounds=bounds, solver_results=list(ctx.solver_results), claimed_objective=None if sched is None else sched.makespan, info=info, termination=Termination.TIME_LIMIT)
    if bounds:
        model.set_bounds(model["makespan"], lb=min(max(b.value for b in bounds) * SCALE, index.horizon))
    build = heuristics_s + time.perf_counter() - t1
    start = warm_start(inst, model, index, ctx)
    result = ctx.solve_model(model, warm_start=start, build_seconds=build)
    # the incumbent lies in the model (w <= H is its makespan), so a solver that calls the
    # model infeasible contradicts itself (numerics): its verdict and bound are not used
    contradicted = sched is not None and result.termination in INFEASIBLE_TERMINATIONS
    if contradicted:
        info["solver_contradiction"] = f"{result.backend} called the model infeasible ({result.raw_status}) though the incumbent ({source}) satisfies it; its bound is not used"
    elif result.bound is not None and np.isfinite(result.bound):
        what = "exact" if index.exact else "relaxed: " + _relaxed_because(inst, index)
        bounds.append(Bound(relaxation.model_seconds(result.bound, inst), f"{name} dual bound ({result.backend}, {what})", solver_record=result))
    plan: PlacementPlan | None = None
    claimed: float | None = None
    info.update(incumbent=source, exact_model=bool(index.exact))
    if index.pairs_left_out:
        info["pairs_left_out"] = index.pairs_left_out
    if sched is None and result.termination in INFEASIBLE_TERMINATIONS:
        raise InfeasibleError(memory_infeasible_text(inst, name), details={"proven_by": f"{name} ({result.backend})"})
    if result.has_solution:
        plan, claimed = decode(inst, result, index)
    if plan is not None and claimed is not None and not np.isfinite(claimed):
        if sched is None:  # nothing else to return: say why, not "returned no plan (Optimal)"
            refused = evaluate(inst, plan).violations
            info["no_plan"] = (
                f"{name} found no plan the evaluator accepts: its model charges only the memory held to the end "
                f"(a relaxation of the liveness model), and its placement, scheduled in the solver's order and by the "
                f"evaluator's own scheduler, is refused ({'; '.join(refused[:2])}); neither the Baechi heuristics nor a packing by memory placed a plan"
            )
        plan, claimed = None, None  # the evaluator rejects it (liveness memory): no plan from the MILP
    if sched is not None and (plan is None or claimed is None or sched.makespan < claimed):
        plan, claimed = make_plan(inst, sched.device, sched.start), sched.makespan
        info["plan_from"] = source
    else:
        info["plan_from"] = name
    proven = (
        bool(index.exact)
        and result.termination.value == "optimal"
        and claimed is not None
        and result.objective is not None
        and claimed <= result.objective / SCALE * (1 + 1e-6) + 1e-9
    )
    return Outcome(
        plan=plan,
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=claimed,
        proven_optimal=proven,
        info=info,
        termination=Termination.NUMERICAL if contradicted else None,
    )


#: the placement MILP's run, on a copy of the instance in a time unit its rows can take
#: (`time_unit`: ops of kiloseconds)
run = in_time_unit(run_in_seconds)


def memory_infeasible_text(inst: PlacementInstance, name: str) -> str:
    """Why no placement exists, once the MILP proved it: without memory every placement
    is feasible, so the devices' memory cannot hold the ops (under the liveness model
    what the MILP charges: the bytes held to the end, `relaxation.charged_memory`). Says the bytes in
    all against the devices' (short by how much when they are more), else the largest
    colocation group against the largest device, and where m-ETF stopped (bytes)."""
    persistent = relaxation.charged_memory(inst)
    total, capacity = float(persistent.sum()), float(np.sum(inst.device_memory))
    what = "bytes held to the end" if inst.memory_model == "liveness" else "bytes"
    text = f"{inst.name}: no placement fits the devices' memory ({name} proves its model infeasible): the ops need {byte_text(total)} {what} in all, the devices hold {byte_text(capacity)}"
    if total > capacity:
        text += f" (short by {byte_text(total - capacity)} bytes)"
    else:
        groups = np.bincount(inst.colocation_groups(), weights=persistent)
        g = int(np.argmax(groups))
        d = int(np.argmax(inst.device_memory))
        text += f", but not split over them: the largest group of ops placed together needs {byte_text(groups[g])}, the largest device '{inst.device_names[d]}' holds {byte_text(float(inst.device_memory[d]))}"
    try:
        list_schedule(inst)
    except NoSolutionError as exc:
        text += f"; m-ETF stopped where {exc.details.get('stopped', str(exc).split(': ', 1)[-1])}"
    return text


def child_dual_bound(ctx: RunContext, target: PlacementInstance, model: Model, deadline: float, gap: float, warm: np.ndarray | None) -> tuple[SolverResult, float | None]:
    """Solve ``model`` (a placement MILP of ``target``, time in microseconds) in a context of
    its own until ``deadline`` (a ``time.perf_counter()`` value) to a relative ``gap``, so its
    records stay out of the run's: its result and its proven lower bound in seconds (the dual
    bound less `relaxation.dual_bound_margin`, at least 0), None without a finite dual bound."""
    child = ctx.child(time_limit=max(deadline - time.perf_counter(), 0.01))
    child.options = child.options.with_(mip_gap=gap)
    result = child.solve_model(model, warm_start=warm)
    if result.bound is None or not np.isfinite(result.bound):
        return result, None
    return result, relaxation.model_seconds(result.bound, target)


def window_bound(
    sub: PlacementInstance, ctx: RunContext, deadline: float, lower: float = 0.0, stage: int = 0, gap: float = 0.01, exact_devices: int = 4, found: dict[bytes, list[np.ndarray]] | None = None
) -> float | None:
    """A proven lower bound (seconds) on the optimum of ``sub`` (a window instance of
    `segments`): the placement MILP's dual bound less the safety margin
    (`relaxation.dual_bound_margin`), solved until ``deadline`` (a ``time.perf_counter()``
    value) to a relative ``gap`` in a context of its own, so its records stay out of the
    run's. At ``stage`` 0: on the instance, or, when its devices differ, on
    `interchangeable` (with the symmetry rows, several times faster on Inception
    modules); at stage 1: on the instance as it is when its devices differ and are at
    most ``exact_devices`` (None otherwise). The best heuristic plan of the program's
    instance, improved by a short local search (a tenth of the time, at most 0.3 s and
    0.02 s an op), is the horizon and warm start, and ``lower`` (seconds, a proven bound of
    ``sub``) bounds the makespan from below: valid for the relaxation too, since some
    solution has w <= min(horizon, optimum of ``sub``). None without a heuristic plan (no
    valid horizon), without time, when ``lower`` is within the gap of that plan, or
    without a bound. With ``found``, the assignments met (the heuristic plan's and the
    MILP's incumbent, in ``sub``'s device numbers: those of `interchangeable` are its first
    devices) are filed under `segments.fingerprint` of ``sub`` for `segments.glued_assignment`."""
    differ = sub.n_devices > 1 and not identical_devices(sub)
    if stage > 0 and (not differ or sub.n_devices > exact_devices):
        return None
    target = interchangeable(sub) if differ and stage == 0 else sub
    sched, _ = best_heuristic(target)
    filed = None if found is None else found.setdefault(fingerprint(sub), [])
    limit = deadline - time.perf_counter()
    if sched is not None and filed is not None:
        filed.append(np.asarray(sched.device))
    if sched is None or limit <= 0.05 or lower >= sched.makespan / (1 + gap):
        return None
    if target.n_devices > 1 and sched.makespan > lower:
        better, _ = improve(target, sched.device, deadline=time.perf_counter() + min(0.3, 0.1 * limit, 0.02 * target.n_ops), target=lower)
        if better is not None and better.makespan < sched.makespan:
            checked = evaluated_schedule(target, make_plan(target, better.device, better.start))
            if checked is not None and checked.makespan < sched.makespan:
                sched = checked
                if filed is not None:
                    filed.append(np.asarray(sched.device))
    model, index = PLACEMENT_MILP.build(target, {"incumbent": sched}, name=f"{sub.name}-window")
    model.set_bounds(model["makespan"], lb=min(lower * SCALE, index.horizon))
    result, bound = child_dual_bound(ctx, target, model, deadline, gap, warm_start(target, model, index))
    if filed is not None and result.has_solution:
        filed.append(np.argmax(result.values_by_block["assign"], axis=1))
    return bound


@dataclass(frozen=True)
class JoinedIndex(MilpIndex):
    """The MILP's index on a joined instance (`joined`): the part of each op (0 or 1), each
    part's proven lower span (microseconds), and one op (``fixed_op``, -1: none) whose
    device is one of ``fixed_to`` (representatives of the orbits of the device
    automorphisms, `joined.device_automorphisms`)."""

    part: np.ndarray
    span_lb: np.ndarray
    fixed_op: int
    fixed_to: np.ndarray


def prepare_joined(inst: PlacementInstance, params: Mapping[str, Any]) -> JoinedIndex:
    """`prepare_milp` with ``incumbent`` a schedule of both parts whose ``makespan`` is the
    sum of its two spans and which satisfies every row of `JOINED_MILP` (its memory rows
    over both parts included; then the horizon bounds each span of some optimum: spans are
    nonnegative), the disjunctions only between ops of one part (the parts have time axes
    of their own), ``part``, ``span_lb`` (seconds, per part), ``fixed_op`` and ``fixed_to``."""
    base = prepare_milp(inst, {"incumbent": params["incumbent"]})
    part = np.asarray(params["part"], dtype=np.int64)
    same = part[base.pair_i] == part[base.pair_j]
    values = {f.name: getattr(base, f.name) for f in fields(MilpIndex)}
    values.update(pair_i=base.pair_i[same], pair_j=base.pair_j[same], big_m_ij=base.big_m_ij[same], big_m_ji=base.big_m_ji[same])
    lb = np.minimum(np.asarray(params.get("span_lb", (0.0, 0.0)), dtype=float) * SCALE, base.horizon)
    return JoinedIndex(**values, part=part, span_lb=lb, fixed_op=int(params.get("fixed_op", -1)), fixed_to=np.asarray(params.get("fixed_to", ()), dtype=np.int64))


def joined_spans(model: Model, inst: PlacementInstance, index: JoinedIndex) -> None:
    """One span per part, at least its proven lower bound: span_k >= s_i + p_i(x) + q_i for
    the ops of part k, and span_k >= the load of part k on each device; minimize their sum."""
    s, x, dur = model["start"], model["assign"], model.expression("duration")
    span = model.add_vars("span", 2, lb=index.span_lb, ub=np.full(2, index.horizon))
    for k in range(2):
        ops = np.flatnonzero(index.part == k)
        if ops.size == 0:
            continue
        model.add_constraints(f"span-{k}", s[ops] + dur[ops] - span[k] <= -index.q[ops])
        model.add_constraints(f"span-load-{k}", (x[ops] * index.P[ops]).sum(axis=0) - span[k] <= 0)
    model.minimize(span.sum())


def fixed_device(model: Model, inst: PlacementInstance, index: JoinedIndex) -> None:
    """The device of ``fixed_op`` among ``fixed_to`` (device automorphisms broken)."""
    if index.fixed_op < 0 or index.fixed_to.size == 0:
        return
    other = np.setdiff1d(np.arange(inst.n_devices), index.fixed_to)
    if other.size:
        model.set_bounds(model["assign"][index.fixed_op, other], ub=0.0)


#: the placement MILP on a joined instance (`joined`): the sum of two windows' spans
JOINED_MILP = ModelSpec(
    "placement_milp_joined",
    prepare_joined,
    (assignment, symmetry, start_times, precedence_with_communication, no_overlap, memory_capacity, joined_spans, fixed_device),
)


def joined_bound(
    sub: PlacementInstance,
    part: np.ndarray,
    ctx: RunContext,
    deadline: float,
    lower: tuple[float, float] = (0.0, 0.0),
    keys: tuple[bytes, bytes] | None = None,
    found: dict[bytes, list[np.ndarray]] | None = None,
    gap: float = 1e-4,
    exact_devices: int = 6,
) -> tuple[float, bool] | None:
    """A proven lower bound (seconds) on the value of the joined instance ``sub`` (parts
    ``part``, `joined`): the dual bound of `JOINED_MILP` less the safety margin
    (`relaxation.dual_bound_margin`), solved until ``deadline`` (a ``time.perf_counter()``
    value) to a relative ``gap`` in a context of its own. ``lower``: proven lower bounds of
    the two windows' spans (seconds). On `interchangeable` of ``sub`` (with the symmetry
    rows) when its devices differ and are more than ``exact_devices``; otherwise as it is,
    one op's device fixed to the representatives of the device automorphisms' orbits.
    Horizon and warm start: the best of the joined instance's heuristic plans and, with
    ``found`` and ``keys`` (the two windows' `segments.fingerprint`), the windows' filed
    assignments put together (each renamed by every automorphism, either window deciding
    the shared co-location groups; distinct ones, timed within a quarter of the time
    left), each part timed by its list schedule, a candidate kept
    only when both parts together fit the memory rows (`relaxation.charged_memory`), so the
    horizon comes from a solution of the MILP; the incumbent's
    two parts are filed back under ``keys``. With it, whether it closed: the solve ended
    optimal (within ``gap``), or the lower bounds are within the gap of the best plan
    (then the bound is their sum). None without a plan or time."""
    differ = sub.n_devices > 1 and not identical_devices(sub)
    target = interchangeable(sub) if differ and sub.n_devices > exact_devices else sub
    groups = target.colocation_groups()
    _, lead, inverse = np.unique(groups, return_index=True, return_inverse=True)
    probs = [SearchProblem(target.induced(part == k)) for k in range(2)]
    autos = device_automorphisms(target) if differ and target is sub else [np.arange(target.n_devices)]

    charged = relaxation.charged_memory(target)

    def timed(dev: np.ndarray) -> tuple[float, np.ndarray] | None:
        """Both parts' list schedules on ``dev`` (co-location groups together) and the sum
        of their spans; None when a part has no schedule or when the two parts together
        break a memory row of `JOINED_MILP` (each part's schedule checks only its own ops,
        and a horizon from a plan outside the MILP's feasible set could cut off its optimum)."""
        dev = np.asarray(dev, dtype=np.int64)[lead][inverse]
        if np.any(np.bincount(dev, weights=charged, minlength=target.n_devices) > target.device_memory):  # (the bare capacity: inside the rows, which allow `accepted_memory`)
            return None
        start = np.zeros(target.n_ops)
        total = 0.0
        for k, prob in enumerate(probs):
            s = prob.schedule(dev[part == k])
            if s is None:
                return None
            start[part == k] = s.start
            total += s.makespan
        return total, start

    cands: list[np.ndarray] = []
    heur, _ = best_heuristic(target)
    if heur is not None:
        cands.append(np.asarray(heur.device))
    if found is not None and keys is not None and target.n_devices == sub.n_devices:
        lists = [found.get(key, [])[-3:] for key in keys]
        for da in lists[0]:
            for db in lists[1]:
                for sigma in autos:
                    both = np.empty(target.n_ops, dtype=np.int64)
                    both[part == 0], both[part == 1] = da, sigma[np.asarray(db, dtype=np.int64)]
                    for decides in (0, 1):  # that part's devices for the shared groups
                        by_group = np.zeros(groups.max() + 1, dtype=np.int64)
                        by_group[groups[part != decides]] = both[part != decides]
                        by_group[groups[part == decides]] = both[part == decides]
                        cands.append(by_group[groups])
    best: tuple[float, np.ndarray, np.ndarray] | None = None
    timed_until = time.perf_counter() + 0.25 * max(0.0, deadline - time.perf_counter())  # the MILP keeps the rest
    seen: set[bytes] = set()
    for dev in cands:
        if best is not None and time.perf_counter() > timed_until:
            break
        group_key = np.asarray(dev, dtype=np.int64)[lead].tobytes()
        if group_key in seen:
            continue
        seen.add(group_key)
        got = timed(dev)
        if got is not None and (best is None or got[0] < best[0]):
            best = (got[0], np.asarray(dev, dtype=np.int64)[lead][inverse], got[1])
    limit = deadline - time.perf_counter()
    if best is not None and sum(lower) >= best[0] / (1 + gap):
        return sum(lower), True
    if best is None or limit <= 0.05:
        return None
    total, dev, start = best
    fixed_op, fixed_to = -1, np.zeros(0, dtype=np.int64)
    if len(autos) > 1:
        reps = orbit_representatives(autos, target.n_devices)
        sigma = min(autos, key=lambda s: int(s[dev[0]]))  # maps op 0's device to its orbit's least
        dev, fixed_op, fixed_to = sigma[dev], 0, reps
    incumbent = Schedule(device=dev, start=start, makespan=total)
    model, index = JOINED_MILP.build(target, {"incumbent": incumbent, "part": part, "span_lb": lower, "fixed_op": fixed_op, "fixed_to": fixed_to}, name=f"{sub.name}-joined")
    vector = warm_start(target, model, index)
    if vector is not None:
        block = model.var_blocks["span"]
        vector[block.start : block.stop] = [max(float((start + target.time[np.arange(target.n_ops), dev])[part == k].max(initial=0.0)) * SCALE, index.span_lb[k]) for k in range(2)]
    result, bound = child_dual_bound(ctx, target, model, deadline, gap, vector)
    if found is not None and keys is not None and target.n_devices == sub.n_devices:
        assigns = [dev] + ([np.argmax(result.values_by_block["assign"], axis=1)] if result.has_solution else [])
        for assign in assigns:
            for k, key in enumerate(keys):
                found.setdefault(key, []).append(np.asarray(assign)[part == k])
    if bound is None:
        return None
    return bound, result.termination.value == "optimal"


def glued_start(inst: PlacementInstance, waists: list[int], windows: dict[bytes, list[np.ndarray]], fallback: np.ndarray) -> Schedule | None:
    """The evaluated plan of the module windows' assignments glued over ``waists``
    (`segments.glued_assignment`, ``fallback`` where no window has one), devices renamed
    for the links (`improve.relabelled`); None when it does not fit. Each window's MILP
    incumbent is optimal or near-optimal for its module alone, a start the local search
    does not reach from the heuristics (inception-v3-dgx1-4, 30 s of windows under load 12:
    glued 15.93 ms, 15.37 ms after 20 s of local search, vs 16.91 ms from m-SCT's 18.46 ms)."""
    found = relabelled(inst, glued_assignment(inst, waists, windows, fallback))
    if found is None:
        return None
    return evaluated_schedule(inst, make_plan(inst, found.device, found.start))


def _search_from(inst: PlacementInstance, ctx: RunContext, seeds: list[np.ndarray], sched: Schedule | None, source: str, target: float) -> tuple[Schedule | None, str]:
    """Local search from the assignment relaxation's assignments (devices renamed for the
    links, `improve.relabelled`) within ``relaxation_search_share`` of the remaining time
    each: (the better of that and ``sched``, its origin). The relaxation's optimum spreads
    branches the way the critical paths allow, a start the chain moves alone rarely reach
    (inception-v3-dgx1-4: 15.96 ms from it in 90 s vs 16.3 ms by placement_search in 120 s)."""
    share = float(ctx.param("relaxation_search_share", 0.2))
    for dev in seeds:
        rem = ctx.remaining_time()
        if share <= 0 or rem is None or rem <= 0:
            break
        begin = relabelled(inst, dev)
        if begin is None:
            continue
        found, _ = improve(inst, begin.device, deadline=time.perf_counter() + share * rem, seed=ctx.seed, target=target)
        best = found if found is not None and found.makespan < begin.makespan else begin
        checked = evaluated_schedule(inst, make_plan(inst, best.device, best.start))
        if checked is not None and (sched is None or checked.makespan < sched.makespan):
            sched, source = checked, "assignment relaxation + local search"
    return sched, source


def _relaxed_because(inst: PlacementInstance, index: MilpIndex) -> str:
    why = []
    if inst.communication != "independent":
        why.append("channels charged as independent links plus channel loads")
    if inst.memory_model != "simple":
        why.append("memory held to the end only")
    if index.pairs_left_out:
        why.append(f"{index.pairs_left_out} pairs unordered")
    return ", ".join(why)
