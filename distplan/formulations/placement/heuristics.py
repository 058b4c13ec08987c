"""Placement heuristics: single device, m-TOPO and m-ETF (Baechi, Jeon et al., SoCC 2020).

Times in seconds, memory in bytes. m-TOPO's assignment is one pass over the topological
order (O(V + E) after the O((V + E) log V) order); both then time the plan with the
event-queue list scheduler of `listsched` (O((V + E) * devices * log V) without memory
pressure)."""

from __future__ import annotations

import numpy as np

from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.deadline import baseline_deadline
from distplan.formulations.placement.listsched import Schedule, list_schedule, topological_positions
from distplan.formulations.placement.listsched_data import StaticLists, static_lists
from distplan.formulations.registry import Outcome, RunContext
from distplan.models.common import gc_paused
from distplan.models.placement_evaluate import memory_peaks
from distplan.models.placement_instance import PlacementInstance, byte_text
from distplan.models.placement_plan import make_plan


def outcome_of(inst: PlacementInstance, sched: Schedule, **info: object) -> Outcome:
    return Outcome(plan=make_plan(inst, sched.device, sched.start), claimed_objective=sched.makespan, info=dict(info))


def single_device_schedule(inst: PlacementInstance) -> Schedule:
    """Every op on the one device that holds all memory and finishes first (seconds).

    A device holds all when the ops' whole need (an upper bound of the peak under either
    memory model) is within what the evaluator accepts (`PlacementInstance.accepted_memory`);
    when none does, each device's plan is put to the evaluator itself (the liveness model
    frees memory), so the InfeasibleError (exit 3, for this formulation's one plan) is
    proven: the evaluator rejects it on every device. (Against the bare capacity it had
    called two ops of 1e12 and 1e12 + 1 bytes on a 2e12-byte device infeasible, a plan the
    evaluator accepts: review rev16 D1.)"""
    need = inst.memory_need().sum()
    accepted = inst.accepted_memory()
    fits = accepted >= need
    if not fits.any():  # (the evaluator's own peaks and test)
        fits = np.array([memory_peaks(inst, *_on_device(inst, d))[d] <= accepted[d] for d in range(inst.n_devices)])
    if not fits.any():
        best = int(np.argmax(inst.device_memory))
        raise InfeasibleError(
            f"{inst.name}: no single device holds all {byte_text(need)} bytes; the largest, {inst.device_names[best]!r}, "
            f"is short by {byte_text(need - inst.device_memory[best])} bytes",
            {"device": inst.device_names[best], "shortfall_bytes": float(need - inst.device_memory[best])},
        )
    total = inst.time.sum(axis=0)
    d = int(np.flatnonzero(fits)[np.argmin(total[fits])])
    device, start = _on_device(inst, d)
    return Schedule(device=device, start=start, makespan=float(total[d]))


def _on_device(inst: PlacementInstance, d: int) -> tuple[np.ndarray, np.ndarray]:
    """Every op on device ``d`` in topological order, back to back: (device, start seconds)."""
    order = inst.topo_order()
    dur = inst.time[order, d]
    start = np.empty(inst.n_ops)
    start[order] = np.concatenate([[0.0], np.cumsum(dur)[:-1]]) if inst.n_ops else []
    return np.full(inst.n_ops, d, dtype=np.int64), start


def run_single_device(inst: PlacementInstance, ctx: RunContext) -> Outcome:
    return outcome_of(inst, single_device_schedule(inst))


def topo_assignment(
    inst: PlacementInstance, uniform: bool = True, topo: tuple[list[int], list[int]] | None = None, static: StaticLists | None = None
) -> np.ndarray:
    """m-TOPO: walk ops in topological order, filling device 0, then 1, ... .

    The uniform variant caps each device at floor(total memory / m) + the largest op's
    memory. Unlike Baechi's reference code, the real device memory limit is always
    checked as well (its uniform variant ignores it and "succeeds" with plans that do not
    fit); an op that fits no remaining device raises NoSolutionError (m-TOPO stops; other
    plans may fit). ``topo`` is a
    precomputed `topological_positions` result, ``static`` the instance's `static_lists`.
    """
    need = inst.memory_need()
    if static is None:
        groups_a = inst.colocation_groups()
        group_need = np.bincount(groups_a, weights=need).tolist()
        groups = groups_a.tolist()
    else:
        group_need, groups = static.gneed, static.groups
    cap_a = inst.device_memory.astype(float).copy()
    if uniform:
        cap_a = np.minimum(cap_a, np.floor(need.sum() / inst.n_devices) + need.max())
    cap = cap_a.tolist()
    nd = inst.n_devices
    device = [-1] * inst.n_ops
    group_dev = [-1] * len(group_need)  # device of each group placed so far
    used = [0.0] * nd
    d = 0
    order = (topological_positions(inst) if topo is None else topo)[0]
    for v in order:
        g = groups[v]
        gd = group_dev[g]
        if gd >= 0:
            device[v] = gd
            continue
        while d < nd and used[d] + group_need[g] > cap[d]:
            d += 1
        if d == nd:
            # the uniform cap may be too tight at the end: fall back to any device with room
            room = inst.device_memory - np.asarray(used)
            ok = np.flatnonzero(room >= group_need[g])
            if ok.size == 0:
                best = int(np.argmax(room))
                raise NoSolutionError(
                    f"{inst.name}: m-TOPO cannot place op {inst.op_names[v]!r} ({byte_text(group_need[g])} bytes with its group); "
                    f"device {inst.device_names[best]!r} has {byte_text(room[best])} free (short by {byte_text(group_need[g] - room[best])} bytes)",
                    {"op": inst.op_names[v], "device": inst.device_names[best], "shortfall_bytes": float(group_need[g] - room[best])},
                )
            dd = int(ok[0])
            used[dd] += group_need[g]
            device[v] = dd
            group_dev[g] = dd
            d = nd
            continue
        used[d] += group_need[g]
        device[v] = d
        group_dev[g] = d
    return np.asarray(device, dtype=np.int64)


def packed_assignment(inst: PlacementInstance) -> np.ndarray:
    """Devices chosen by memory alone: colocation groups, largest need first, each on the
    device with the least room left that still holds it, the fastest for it among equals
    (best fit decreasing). A device's load is
    the sum of its ops' whole need (`PlacementInstance.memory_need`), an upper bound of its
    peak under either memory model, so the assignment fits whenever this returns.

    For the plan source of last resort: the Baechi heuristics place ops in time order and
    can fail on instances whose memory is tight (two devices of 847 bytes for ops of 622,
    573, 225, 100, 100 and 74 bytes: m-ETF, m-TOPO and m-SCT run out of room), where a
    packing by size finds a plan. Raises NoSolutionError when it finds none (which proves
    nothing: packing is NP-hard)."""
    need = inst.memory_need()
    groups = inst.colocation_groups()
    gneed = np.bincount(groups, weights=need)
    gtime = np.zeros((gneed.size, inst.n_devices))
    np.add.at(gtime, groups, inst.time)
    room = inst.device_memory.astype(float).copy()
    gdev = np.full(gneed.size, -1, dtype=np.int64)
    for g in np.argsort(-gneed, kind="stable").tolist():
        ok = np.flatnonzero(room >= gneed[g])
        if ok.size == 0:
            members = np.flatnonzero(groups == g)
            best = int(np.argmax(room))
            raise NoSolutionError(
                f"{inst.name}: packing by memory cannot place op {inst.op_names[int(members[0])]!r} "
                f"({byte_text(gneed[g])} bytes with its group); device {inst.device_names[best]!r} has {byte_text(room[best])} free",
                {"op": inst.op_names[int(members[0])], "device": inst.device_names[best], "shortfall_bytes": float(gneed[g] - room[best])},
            )
        d = int(ok[np.lexsort((gtime[g, ok], room[ok]))[0]])  # the tightest fit, fastest among equals
        gdev[g] = d
        room[d] -= gneed[g]
    return gdev[groups]


def packed_schedule(inst: PlacementInstance) -> Schedule:
    """`packed_assignment`, timed by the list scheduler (seconds)."""
    return list_schedule(inst, assignment=packed_assignment(inst))


def run_topo(inst: PlacementInstance, ctx: RunContext) -> Outcome:
    """m-TOPO's assignment, timed by the list scheduler (the instance's lists built once).
    The list scheduler stops at the run's deadline, or `BASELINE_GRACE` from the start
    when that is later (`baseline_deadline`: a baseline's plan after a cold start)."""
    with gc_paused():  # the lists are freed before the collector resumes
        return outcome_of(inst, _topo_schedule(inst, bool(ctx.param("uniform", True)), baseline_deadline(ctx.deadline)))


def _topo_schedule(inst: PlacementInstance, uniform: bool, deadline: float | None = None) -> Schedule:
    st = static_lists(inst, with_members=False)
    topo = topological_positions(inst, st.ids)  # the same int objects as the lists'
    return list_schedule(inst, assignment=topo_assignment(inst, uniform=uniform, topo=topo, static=st), topo=topo, static=st, deadline=deadline)


def run_etf(inst: PlacementInstance, ctx: RunContext) -> Outcome:
    """m-ETF's plan; the list scheduler stops at the run's deadline, with the baselines'
    grace (`run_topo`)."""
    return outcome_of(inst, list_schedule(inst, deadline=baseline_deadline(ctx.deadline)))
