"""The exact placement MILP: device and start time of every op, minimizing the makespan.

Variables: x[i, d] binary (op i on device d), s_i start (seconds), w makespan; z_e in
[0, 1] "ends on different devices" per edge (homogeneous links) or pairwise delay rows
(heterogeneous links); for every pair of ops with no path between them an ordering binary
o_ij and a same-device indicator q_ij, with disjunctive big-M rows. Big-M is a valid
horizon H: the makespan of the best heuristic plan, so some optimum satisfies w <= H.
Memory: sum_i memory_i x[i, d] <= capacity_d. Warm-started from the best heuristic plan.

The solver's dual bound is a bound of the instance under the simple memory model (and
under Baechi's channel model, whose delays are never shorter). Under the liveness memory
model the MILP charges every op's peak need for the whole run (a restriction): its plans
are valid, its bound is not reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distplan.errors import InfeasibleError
from distplan.formulations.model import Model
from distplan.formulations.placement.heuristics import single_device_schedule, topo_assignment
from distplan.formulations.placement.listsched import Schedule, list_schedule
from distplan.formulations.registry import RunContext
from distplan.models.placement import PlacementInstance, PlacementPlan, make_plan
from distplan.solvers.result import SolverResult


def reachability(inst: PlacementInstance) -> np.ndarray:
    """reach[i, j] = True when a path i -> j exists (boolean, n x n)."""
    n = inst.n_ops
    reach = np.zeros((n, n), dtype=bool)
    order = inst.topo_order()
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].append(b)
    for v in order[::-1].tolist():
        for w in succ[v]:
            reach[v, w] = True
            reach[v] |= reach[w]
    return reach


def best_heuristic(inst: PlacementInstance) -> Schedule | None:
    """The best of m-ETF, m-TOPO and single device (None if all fail on memory)."""
    found: list[Schedule] = []
    for make in (lambda: list_schedule(inst), lambda: list_schedule(inst, assignment=topo_assignment(inst)), lambda: single_device_schedule(inst)):
        try:
            found.append(make())
        except InfeasibleError:
            continue
    return min(found, key=lambda s: s.makespan) if found else None


def identical_devices(inst: PlacementInstance) -> bool:
    nd = inst.n_devices
    off = ~np.eye(nd, dtype=bool)
    return bool(
        np.all(inst.time == inst.time[:, :1])
        and np.ptp(inst.device_memory) == 0
        and (nd == 1 or (np.ptp(inst.bandwidth[off]) == 0 and np.ptp(inst.latency[off]) == 0))
    )


def horizon(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    """A valid horizon (seconds): the best heuristic makespan, else serial time + all delays."""
    sched = best_heuristic(inst)
    data["incumbent"] = sched
    if sched is not None:
        data["horizon"] = sched.makespan * (1 + 1e-9) + 1e-12
    else:
        data["horizon"] = float(inst.time.max(axis=1).sum() + inst.max_delay().sum())


def assignment(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    """x[i, d] binary, one device per op, colocation groups together."""
    n, m = inst.n_ops, inst.n_devices
    x = model.add_vars("assign", (n, m), vtype="binary")
    model.add_constraints("assign-one-device", x.sum(axis=1) == 1)
    groups = inst.colocation_groups()
    order = np.argsort(groups, kind="stable")
    same = np.flatnonzero(groups[order][1:] == groups[order][:-1])
    if same.size:
        a, b = order[same], order[same + 1]
        model.add_constraints("assign-colocate", x[a] - x[b] == 0)
    if identical_devices(inst) and n:
        first = int(inst.topo_order()[0])
        model.set_bounds(x[first, 0], lb=1.0)  # devices are interchangeable: break the symmetry
    data["x"] = x
    data["dur"] = (inst.time * x).sum(axis=1)


def start_times(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    H = data["horizon"]
    data["s"] = model.add_vars("start", inst.n_ops, lb=0.0, ub=H)
    data["w"] = model.add_vars("makespan", (), lb=0.0, ub=H)


def precedence_with_communication(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    """s_j >= s_i + duration_i + delay when i and j sit on different devices."""
    if inst.n_edges == 0:
        return
    x, s, dur = data["x"], data["s"], data["dur"]
    m = inst.n_devices
    src, dst = inst.src, inst.dst
    off = ~np.eye(m, dtype=bool)
    if m == 1:
        model.add_constraints("precedence", s[src] + dur[src] - s[dst] <= 0)
        return
    if np.ptp(inst.bandwidth[off]) == 0 and np.ptp(inst.latency[off]) == 0:
        c = inst.max_delay()
        z = model.add_vars("different-device", inst.n_edges, lb=0.0, ub=1.0)
        data["z"] = z
        devs = np.arange(m)
        model.add_constraints("different-device-link", z[:, None] - x[src[:, None], devs[None, :]] + x[dst[:, None], devs[None, :]] >= 0)
        model.add_constraints("precedence", s[src] + dur[src] + c * z - s[dst] <= 0)
        return
    pairs = np.argwhere(off)
    a, b = pairs[:, 0], pairs[:, 1]
    delay = inst.latency[a, b][None, :] + inst.edge_bytes[:, None] / inst.bandwidth[a, b][None, :]  # (E, P)
    E, P = delay.shape
    ee = np.repeat(np.arange(E), P)
    pp = np.tile(np.arange(P), E)
    dl = delay.reshape(-1)
    model.add_constraints(
        "precedence-pairwise",
        s[src[ee]] + dur[src[ee]] - s[dst[ee]] + dl * (x[src[ee], a[pp]] + x[dst[ee], b[pp]]) <= dl,
    )
    model.add_constraints("precedence", s[src] + dur[src] - s[dst] <= 0)


def no_overlap(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    """Disjunctive rows for ops with no path between them, active when on one device."""
    reach = reachability(inst)
    related = reach | reach.T
    i, j = np.nonzero(np.triu(~related, k=1))
    if i.size == 0:
        return
    x, s, dur, H = data["x"], data["s"], data["dur"], data["horizon"]
    m = inst.n_devices
    q = model.add_vars("same-device", i.size, lb=0.0, ub=1.0)
    o = model.add_vars("order", i.size, vtype="binary")
    data["pairs"] = (i, j)
    devs = np.arange(m)
    model.add_constraints("same-device-link", q[:, None] - x[i[:, None], devs[None, :]] - x[j[:, None], devs[None, :]] >= -1)
    model.add_constraints("no-overlap-i-first", s[i] + dur[i] - s[j] + H * o + H * q <= 2 * H)
    model.add_constraints("no-overlap-j-first", s[j] + dur[j] - s[i] - H * o + H * q <= H)


def memory_capacity(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    """sum of the ops' memory per device <= its capacity (bytes)."""
    need = inst.memory_need()
    x = data["x"]
    model.add_constraints("memory", (need[:, None] * x).sum(axis=0) <= inst.device_memory)


def makespan(model: Model, inst: PlacementInstance, data: dict[str, Any]) -> None:
    s, w, dur = data["s"], data["w"], data["dur"]
    model.add_constraints("makespan", s + dur - w <= 0)
    model.minimize(w)


MILP_BLOCKS = (horizon, assignment, start_times, precedence_with_communication, no_overlap, memory_capacity, makespan)


def compact(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Earliest start times (seconds) keeping each device's order of ``start``: removes the
    slack a solver leaves within its tolerances (never lengthens the schedule)."""
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(inst.n_ops)
    order = np.lexsort((pos, start))
    preds: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for e, b in enumerate(inst.dst.tolist()):
        preds[b].append(e)
    new = np.zeros(inst.n_ops)
    end = np.zeros(inst.n_ops)
    free = np.zeros(inst.n_devices)
    for v in order.tolist():
        d = int(device[v])
        t = free[d]
        for e in preds[v]:
            u = int(inst.src[e])
            du = int(device[u])
            t = max(t, end[u] if du == d else end[u] + inst.latency[du, d] + inst.edge_bytes[e] / inst.bandwidth[du, d])
        new[v] = t
        end[v] = t + inst.time[v, d]
        free[d] = end[v]
    return new


def decode(inst: PlacementInstance, result: SolverResult, data: dict[str, Any]) -> tuple[PlacementPlan, float]:
    x = result.values_by_block["assign"]
    device = np.argmax(x, axis=1)
    start = compact(inst, device, result.values_by_block["start"])
    return make_plan(inst, device, start), float((start + inst.time[np.arange(inst.n_ops), device]).max())


def warm_start(inst: PlacementInstance, model: Model, data: dict[str, Any], ctx: RunContext) -> np.ndarray | None:
    sched: Schedule | None = data.get("incumbent")
    if sched is None:
        return None
    n, m = inst.n_ops, inst.n_devices
    if identical_devices(inst) and n:
        # relabel devices so that the first op sits on device 0, as the symmetry cut demands
        first = int(inst.topo_order()[0])
        perm = np.arange(m)
        d0 = int(sched.device[first])
        perm[[0, d0]] = perm[[d0, 0]]
        device = perm[sched.device]
    else:
        device = sched.device
    x = np.zeros((n, m))
    x[np.arange(n), device] = 1.0
    values: dict[str, Any] = {"assign": x, "start": sched.start, "makespan": sched.makespan * (1 + 1e-9) + 1e-12}
    if "z" in data:
        values["different-device"] = (device[inst.src] != device[inst.dst]).astype(float)
    if "pairs" in data:
        i, j = data["pairs"]
        values["same-device"] = (device[i] == device[j]).astype(float)
        values["order"] = (sched.start[i] <= sched.start[j]).astype(float)
    return model.vector(values)


def exact_for(inst: PlacementInstance) -> bool:
    return inst.memory_model == "simple"
