"""The assignment relaxation of placement: a lower bound that sees communication and memory.

Keeps what the critical path and work / devices forget, and drops only the order of the
ops on a device:

* device assignment x[i, d] binary (colocation groups together, memory per device);
* heads T_i (start lower bounds) on every path, charging a cut edge its smallest delay
  over device pairs: T_j >= T_i + p_i(x) + c_e z_e, z_e >= x[i, d] - x[j, d];
* the makespan w >= T_i + p_i(x) + q_i (q_i: the op's tail at fastest times);
* per-device load, and energetic rows: the ops whose head (tail) at fastest times is at
  least theta all run after theta (before w - theta) on their device,
  w >= theta + sum_{i: r_i >= theta} p_{i,d} x[i, d] + min q (and the mirror);
* Baechi's channel model: every transfer (producer, receiving device, bytes: received
  tensors are cached) occupies the sender's and the receiver's channel for its delay, and a
  channel carries one transfer at a time, so w >= the channel load of every device.
* what precedence alone implies on every device (`descendants`): an op's descendants
  placed on d run after its head T_i + p_i(x), one at a time, and its ancestors on d before
  T_i (at most ``order_nonzeros`` nonzeros of these rows); the descendants that must wait
  a path's length after T_i + p_i(x), the ancestors done a path's length before T_i
  (``wait_nonzeros``), and the ops between two ops k -> i, which run on every device
  inside [T_k + p_k(x), T_i] (``window_nonzeros``); the last two up to `WAIT_MAX_OPS` ops.

Dropping the order makes this a relaxation of the placement problem under both
communication models and both memory models (under the liveness model only what is
held to the end is charged: persistent memory and unconsumed outputs): its optimum, and so the MILP's *dual* bound at
any gap, is a lower bound on the optimal makespan. Links are relaxed to the fastest pair,
so devices of one type and memory are interchangeable and the symmetry is broken by
first use (Margot, "Symmetry in integer linear programming", 50 Years of Integer
Programming, 2010). The energetic rows are Baptiste, Le Pape & Nuijten's energetic
reasoning (Constraint-Based Scheduling, 2001) over the relaxed heads and tails; the
assignment-with-communication core is the assignment part of the Venugopalan & Sinnen
MILP (ILP formulations for optimal task scheduling with communication delays on parallel
systems, IEEE TPDS 26(1), 2015) without its ordering variables.

Inside the model time is in microseconds (rows stay well scaled for the solver's
absolute tolerances); bounds are returned in seconds, less a margin for the solver's
feasibility tolerance (see `SAFETY`).
"""

from __future__ import annotations

import copy
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, check, past
from distplan.formulations.placement.descendants import (
    MAX_NONZEROS,
    WAIT_NONZEROS,
    WINDOW_NONZEROS,
    precedence_load_rows,
    waiting_load_rows,
    window_load_rows,
)
from distplan.formulations.placement.time_unit import time_factor
from distplan.formulations.registry import Bound, RunContext
from distplan.modeling.model import Model, linear_sum
from distplan.models.placement_instance import PlacementInstance
from distplan.solvers.result import SolverResult

#: seconds -> model time unit (microseconds)
SCALE = 1e6
#: the waiting and window rows (`descendants`) only up to this many ops (they take n x n
#: matrices and an n^3 product)
WAIT_MAX_OPS = 1000
#: margin (model units per row on a path) subtracted from a solver's dual bound: the
#: solver's primal feasibility tolerance (1e-7 in HiGHS) times a factor of 10
SAFETY = 1e-6
SOURCE = "assignment relaxation (order dropped; cut edges, loads, memory, channels)"


def dual_bound_margin(inst: PlacementInstance, bound: float) -> float:
    """What a solver's dual ``bound`` (model units) of the relaxation or the placement MILP
    loses to be safe within its tolerances: `SAFETY` per row on a path (at most the ops
    plus three) and 1e-9 relative."""
    return SAFETY * (inst.n_ops + 3) + 1e-9 * abs(bound)


def model_seconds(call_bound: float, inst: PlacementInstance) -> float:
    """The seconds of ``inst`` that a solver's dual bound (microseconds, `SCALE`) of the
    relaxation or the placement MILP built on ``inst`` proves: less `dual_bound_margin`,
    at least 0."""
    return max(0.0, call_bound - dual_bound_margin(inst, call_bound)) / SCALE


def dual_bound_seconds(call_bound: float, inst: PlacementInstance, model: Mapping[str, Any]) -> float:
    """The seconds of ``inst`` that a dual bound of the relaxation or the placement MILP,
    solved on ``inst`` in its time unit, proves: placement's stated conversion of those
    solver calls' bounds (`registry.BOUND_SOURCES`, which `distplan verify` applies to the
    call's record). The programs run on ``inst`` with its times multiplied by
    `time_unit.time_factor` (`time_unit.in_time_unit`): `model_seconds` of that copy (the
    same ops, so the same margin), mapped back by the factor, as `in_time_unit` does.
    ``model``: the call's model record (`registry.Conversion`'s contract), unused: the
    time unit is the instance's."""
    return model_seconds(call_bound, inst) / time_factor(inst)


def heads_tails(inst: PlacementInstance, p: np.ndarray | None = None, delay: np.ndarray | None = None, level: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Head r_i (longest path before i) and tail q_i (longest path after i), seconds,
    with op times ``p`` (default fastest device) and ``delay`` per edge (default none:
    no communication): r_j >= (r_i + p_i) + delay_e, q_i >= (delay_e + p_j) + q_j. The one
    longest-path routine of placement (heads and tails at fastest times, with the cut
    edges' delays in the forced bound, with an assignment's delays in tail-first timing).
    ``level``: `longest_path_levels` of ``inst`` when the caller keeps them (they depend on
    the graph only)."""
    p = inst.time.min(axis=1) if p is None else p
    n = inst.n_ops
    head = np.zeros(n)
    tail = np.zeros(n)
    if inst.n_edges == 0:
        return head, tail
    src, dst = inst.src, inst.dst
    c = np.zeros(inst.n_edges) if delay is None else np.asarray(delay, dtype=float)
    level = longest_path_levels(inst) if level is None else level
    elev = level[src]
    by = np.argsort(elev, kind="stable")
    cuts = np.searchsorted(elev[by], np.arange(level.max() + 2))
    for L in range(level.max() + 1):
        e = by[cuts[L] : cuts[L + 1]]
        if e.size:
            np.maximum.at(head, dst[e], head[src[e]] + p[src[e]] + c[e])
    dlev = level[dst]
    by = np.argsort(-dlev, kind="stable")
    neg = -dlev[by]
    cuts = np.searchsorted(neg, -np.arange(level.max(), -1, -1))
    for k in range(level.max() + 1):
        lo = cuts[k]
        hi = cuts[k + 1] if k + 1 < cuts.size else by.size
        e = by[lo:hi]
        if e.size:
            np.maximum.at(tail, src[e], c[e] + p[dst[e]] + tail[dst[e]])
    return head, tail


def longest_path_levels(inst: PlacementInstance) -> np.ndarray:
    """Level per op: the most edges on a path into it (0 for sources); the edges out of
    one level are relaxed together by `heads_tails`."""
    n = inst.n_ops
    order = inst.topo_order()
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    level = np.zeros(n, dtype=np.int64)
    eo = np.argsort(pos[inst.src], kind="stable")
    src, dst = inst.src[eo], inst.dst[eo]
    starts = np.searchsorted(pos[src], np.arange(n + 1))
    for k in range(n):
        lo, hi = starts[k], starts[k + 1]
        if lo < hi:
            v = order[k]
            np.maximum.at(level, dst[lo:hi], level[v] + 1)
    return level


def device_classes(inst: PlacementInstance) -> list[np.ndarray]:
    """Devices with equal op times and memory (interchangeable once links are uniform)."""
    keys: dict[bytes, list[int]] = {}
    for d in range(inst.n_devices):
        key = inst.time[:, d].tobytes() + np.float64(inst.device_memory[d]).tobytes()
        keys.setdefault(key, []).append(d)
    return [np.asarray(v, dtype=np.int64) for v in keys.values()]


def interchangeable(inst: PlacementInstance) -> PlacementInstance:
    """A relaxation with interchangeable devices: every op at its fastest time on every
    device, every link as fast as the fastest (largest bandwidth, smallest latency between
    two devices), every device with the largest memory, and only min(devices, ops) of them
    (a plan uses at most one device per op; those it uses, renamed, are the first ones).
    Every plan, renamed so, keeps its start times with delays, channel loads and memory no
    larger: a solution of the MILP's rows, whose symmetry rows now apply."""
    m = min(inst.n_devices, max(inst.n_ops, 1))
    off = ~np.eye(m, dtype=bool)
    full_off = ~np.eye(inst.n_devices, dtype=bool)
    fast = copy.copy(inst)
    fast.time = np.repeat(inst.time.min(axis=1, initial=np.inf)[:, None], m, axis=1)
    fast.device_names = inst.device_names[:m]
    fast.device_types = inst.device_types[:m]
    fast.device_memory = np.full(m, float(inst.device_memory.max()))
    bw = inst.bandwidth[full_off].max() if inst.n_devices > 1 else 1.0
    lat = inst.latency[full_off].min() if inst.n_devices > 1 else 0.0
    fast.bandwidth = np.where(off, bw, inst.bandwidth[:m, :m])
    fast.latency = np.where(off, lat, inst.latency[:m, :m])
    fast.document = None
    return fast


def transfer_classes(inst: PlacementInstance) -> tuple[np.ndarray, int]:
    """Transfer id per edge: edges from one producer with equal bytes share a transfer
    (a tensor received once on a device is cached there, as in the channel model)."""
    if inst.n_edges == 0:
        return np.zeros(0, dtype=np.int64), 0
    keys = np.stack([inst.src.astype(float), inst.edge_bytes], axis=1)
    _, cls = np.unique(keys, axis=0, return_inverse=True)
    cls = cls.reshape(-1)
    return cls.astype(np.int64), int(cls.max()) + 1


def _energetic_thresholds(values: np.ndarray, count: int) -> np.ndarray:
    pos = np.unique(values[values > 0])
    if pos.size <= count:
        return pos
    return np.unique(np.quantile(pos, np.linspace(0.0, 1.0, count + 2)[1:-1], method="lower"))


@dataclass(frozen=True)
class AssignIndex:
    """What the blocks of the placement programs share (block contract). Times in model
    units (microseconds, `SCALE`): durations ``P`` (ops x devices), fastest ``pmin``, heads
    ``r`` and tails ``q`` at fastest times without communication; ``integral`` (False: the
    LP relaxation); the number of energetic ``thresholds``; whether Baechi's channel rows
    apply; the classes of interchangeable devices whose symmetry is broken by first use; the
    nonzeros of the ancestor and descendant rows at most (`descendants`, 0: none), and of
    the waiting and the window rows. ``deadline`` (a ``time.perf_counter()`` value, None:
    none): the costlier blocks give up past it with `DeadlineReached` (review rev16 D3)."""

    P: np.ndarray
    pmin: np.ndarray
    r: np.ndarray
    q: np.ndarray
    integral: bool
    thresholds: int
    channels: bool
    symmetry_classes: tuple[np.ndarray, ...]
    order_nonzeros: int
    wait_nonzeros: int
    window_nonzeros: int
    deadline: float | None = field(default=None, kw_only=True)


def assign_index_fields(inst: PlacementInstance, params: Mapping[str, Any]) -> dict[str, Any]:
    """The `AssignIndex` fields of ``inst`` (``integral``, ``thresholds`` from params)."""
    P = inst.time * SCALE
    pmin = P.min(axis=1)
    r, q = heads_tails(inst, pmin)
    return {
        "P": P,
        "pmin": pmin,
        "r": r,
        "q": q,
        "integral": bool(params.get("integral", True)),
        "thresholds": int(params.get("thresholds", 12)),
        "channels": inst.communication == "channels" and inst.n_devices > 1 and inst.n_edges > 0,
        "symmetry_classes": (),
        "order_nonzeros": int(params.get("order_nonzeros", MAX_NONZEROS)),
        "wait_nonzeros": int(params.get("wait_nonzeros", WAIT_NONZEROS)) if inst.n_ops <= WAIT_MAX_OPS else 0,
        "window_nonzeros": int(params.get("window_nonzeros", WINDOW_NONZEROS)) if inst.n_ops <= WAIT_MAX_OPS else 0,
    }


def prepare_relaxation(inst: PlacementInstance, params: Mapping[str, Any]) -> AssignIndex:
    """``integral``, ``thresholds``, ``symmetry`` (break the symmetry of device classes),
    ``deadline`` (the build gives up past it: `DeadlineReached`)."""
    deadline = params.get("deadline")
    check(deadline, "the assignment relaxation's build")
    fields = assign_index_fields(inst, params)
    fields["deadline"] = deadline
    if params.get("symmetry", True) and inst.n_devices > 1:
        fields["symmetry_classes"] = tuple(device_classes(inst))
    return AssignIndex(**fields)


def assignment(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """x[i, d] (``assign``: binary, or in [0, 1] for the LP), one device per op, colocation
    groups together; names the duration p_i(x) (microseconds) ``duration``."""
    n, m = inst.n_ops, inst.n_devices
    x = model.add_vars("assign", (n, m), vtype="binary" if index.integral else "continuous", lb=0.0, ub=1.0)
    model.add_constraints("assign-one-device", x.sum(axis=1) == 1)
    groups = inst.colocation_groups()
    order = np.argsort(groups, kind="stable")
    same = np.flatnonzero(groups[order][1:] == groups[order][:-1])
    if same.size:
        model.add_constraints("assign-colocate", x[order[same]] - x[order[same + 1]] == 0)
    model.define("duration", linear_sum(x.index.reshape(-1), index.P.reshape(-1), np.repeat(np.arange(n), m), n, model.num_vars))


def heads(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Heads T_i >= r_i, the makespan w (at least the critical path and the mean load),
    and w >= T_i + p_i(x) + q_i."""
    m = inst.n_devices
    T = model.add_vars("head", inst.n_ops, lb=index.r)
    w = model.add_vars("makespan", (), lb=float(max((index.r + index.pmin + index.q).max(initial=0.0), (index.pmin.sum() / max(m, 1)))))
    model.add_constraints("makespan-tail", T + model.expression("duration") - w <= -index.q)


def charged_memory(inst: PlacementInstance) -> np.ndarray:
    """Bytes per op that `memory_capacity` charges to the op's device: what the device
    still holds at the end (`PlacementInstance.held_to_end`): the op's whole need under
    the simple model; under the liveness model its persistent memory and the output no op
    consumes (a relaxation: what is freed is not charged)."""
    return inst.held_to_end()


def memory_capacity(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Sum of the ops' `charged_memory` per device <= what the evaluator accepts of its
    capacity (bytes, `PlacementInstance.accepted_memory`): the rows keep every plan the
    evaluator accepts, so the relaxation's and the MILP's bounds hold for them all."""
    mem = charged_memory(inst)
    if np.any(mem > 0):
        model.add_constraints("memory", (mem[:, None] * model["assign"]).sum(axis=0) <= inst.accepted_memory())


def load_rows(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Per-device load and energetic rows (`energetic_rows`)."""
    energetic_rows(model, inst, model["assign"], model["makespan"], index.r, index.q, index.thresholds, index.deadline)


def precedence_loads(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Ancestor and descendant load rows on the heads (`descendants`)."""
    precedence_load_rows(model, inst, model["head"], model["makespan"], index.P, index.r, index.q, index.order_nonzeros, index.deadline)


def waiting_loads(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """The waiting rows and the window rows on the heads (`descendants`)."""
    waiting_load_rows(model, inst, model["head"], model["makespan"], index.P, index.r, index.q, index.wait_nonzeros)
    window_load_rows(model, inst, model["head"], index.P, index.r, index.window_nonzeros)


def cut_paths(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Heads along every edge, a cut edge charged its smallest delay over device pairs:
    T_j >= T_i + p_i(x) + c_e z_e, z_e >= x[i, d] - x[j, d] (``cut``)."""
    if not inst.n_edges:
        return
    x, T, dur = model["assign"], model["head"], model.expression("duration")
    src, dst = inst.src, inst.dst
    if inst.n_devices > 1:
        cmin = inst.min_delay() * SCALE
        z = model.add_vars("cut", inst.n_edges, lb=0.0, ub=1.0)
        model.add_constraints("cut-link", z[:, None] - x[src] + x[dst] >= 0)
        model.add_constraints("precedence", T[src] + dur[src] - T[dst] + cmin * z <= 0)
    else:
        model.add_constraints("precedence", T[src] + dur[src] - T[dst] <= 0)


def channel_loads(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Under Baechi's channel model, the channel load of every device is at most w."""
    if index.channels:
        channel_rows(model, inst, model["assign"], model["makespan"], index.r, index.q, index.thresholds)


def symmetry(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    """Interchangeable devices used in order of first use (`first_use_symmetry`)."""
    if index.symmetry_classes:
        first_use_symmetry(model, inst, model["assign"], list(index.symmetry_classes))


def minimize_makespan(model: Model, inst: PlacementInstance, index: AssignIndex) -> None:
    model.minimize(model["makespan"])


#: the assignment relaxation (module docstring), time in microseconds
RELAXATION = ModelSpec(
    "assignment-relaxation", prepare_relaxation, (assignment, heads, memory_capacity, load_rows, cut_paths, precedence_loads, waiting_loads, channel_loads, symmetry, minimize_makespan)
)
#: the names of the relaxation's models in their calls' records (`solve_bound`: after the
#: instance's), as `registry.Formulation.solves` declares them
RELAXATION_MODEL = f".+-{re.escape(RELAXATION.name)}"


def energetic_rows(model: Model, inst: PlacementInstance, x: Any, w: Any, r: np.ndarray, q: np.ndarray, thresholds: int, deadline: float | None = None) -> None:
    """Per-device load w >= sum_i p_{i,d} x[i, d], and for thresholds theta of the heads r
    (tails q), microseconds: the ops with r_i >= theta start after theta and one of them
    is followed by at least min q over them, so
    w >= theta + min_{r_i >= theta} q_i + sum_{r_i >= theta} p_{i,d} x[i, d] (and mirrored);
    and for windows, w >= a + b + sum_{r_i >= a, q_i >= b} p_{i,d} x[i, d]. Past
    ``deadline`` (2 s on 27,000 ops x 16 devices) it gives up: `DeadlineReached`."""
    phase = "the energetic rows of the assignment relaxation"
    check(deadline, phase)
    n, m = inst.n_ops, inst.n_devices
    P = inst.time * SCALE
    cols, coefs, rows, rhs = [], [], [], []
    nrow = 0
    sets: list[tuple[np.ndarray, float]] = [(np.arange(n), 0.0)]
    for vals, other in ((r, q), (q, r)):
        for theta in _energetic_thresholds(vals, thresholds).tolist():
            sel = np.flatnonzero(vals >= theta)
            sets.append((sel, theta + float(other[sel].min())))
    # windows: the ops with r_i >= a and q_i >= b all run inside [a, w - b]
    seen: set[bytes] = set()
    for a in _energetic_thresholds(r, max(thresholds // 2, 1)).tolist():
        for b in _energetic_thresholds(q, max(thresholds // 2, 1)).tolist():
            check(deadline, phase)
            sel = np.flatnonzero((r >= a) & (q >= b))
            key = sel.tobytes()
            if sel.size > 1 and key not in seen:
                seen.add(key)
                sets.append((sel, a + b))
    for sel, low in sets:
        check(deadline, phase)
        for d in range(m):
            cols.append(x.index[sel, d])
            coefs.append(P[sel, d])
            rows.append(np.full(sel.size, nrow))
            rhs.append(low)
            nrow += 1
    check(deadline, phase)
    load = linear_sum(np.concatenate(cols), np.concatenate(coefs), np.concatenate(rows), nrow, model.num_vars)
    model.add_constraints("load-energetic", load - w <= -np.asarray(rhs))


def channel_rows(model: Model, inst: PlacementInstance, x: Any, w: Any, r: np.ndarray | None = None, q: np.ndarray | None = None, thresholds: int = 12) -> None:
    """Channel load per device (Baechi's channel model): a channel carries one transfer at
    a time, a transfer starts after its producer ends and its consumers run after it.

    y[k, d] (transfer k delivered to device d) >= x[consumer, d] - x[producer, d];
    s[k, d] (transfer k sent from d, counted per receiving device) >=
    sum_{b != d} y[k, b] - (m - 1) (1 - x[producer, d]). With a_k = r + p of the producer
    and b_k = the least p + q of its consumers (fastest times, microseconds), for every
    set K_theta = {k: a_k >= theta} (and mirrored on b_k):
    w >= theta + min_{K_theta} b_k + sum_{k in K_theta} (delay_k y[k, d] + delay_k s[k, d]),
    with the smallest delay over all device pairs.
    """
    m = inst.n_devices
    P = inst.time * SCALE
    pmin = P.min(axis=1)
    if r is None or q is None:
        r, q = heads_tails(inst, pmin)
    cls, K = transfer_classes(inst)
    prod = np.zeros(K, dtype=np.int64)
    prod[cls] = inst.src
    nbytes = np.zeros(K)
    nbytes[cls] = inst.edge_bytes
    ahead = r[prod] + pmin[prod]
    behind = np.full(K, np.inf)
    np.minimum.at(behind, cls, pmin[inst.dst] + q[inst.dst])
    y = model.add_vars("delivered", (K, m), lb=0.0, ub=1.0)
    s = model.add_vars("sent", (K, m), lb=0.0, ub=float(m - 1))
    model.add_constraints("delivered-link", y[cls] - x[inst.dst] + x[inst.src] >= 0)
    ally = y.sum(axis=1)  # (K,)
    model.add_constraints("sent-link", s - ally[:, None] + y - (m - 1) * x[prod] >= -(m - 1))
    # the smallest delay over all device pairs: keeps interchangeable devices symmetric
    off = ~np.eye(m, dtype=bool)
    delay = (inst.latency[off].min() + nbytes * (1.0 / inst.bandwidth[off]).min()) * SCALE
    recv = send = np.repeat(delay[:, None], m, axis=1)
    sets: list[tuple[np.ndarray, float]] = [(np.arange(K), float(ahead.min() + behind.min()))]
    for vals, other in ((ahead, behind), (behind, ahead)):
        for theta in _energetic_thresholds(vals, thresholds).tolist():
            sel = np.flatnonzero(vals >= theta)
            sets.append((sel, theta + float(other[sel].min())))
    cols, coefs, rows, rhs = [], [], [], []
    nrow = 0
    for sel, low in sets:
        for d in range(m):
            cols += [y.index[sel, d], s.index[sel, d]]
            coefs += [recv[sel, d], send[sel, d]]
            rows += [np.full(sel.size, nrow), np.full(sel.size, nrow)]
            rhs.append(low)
            nrow += 1
    load = linear_sum(np.concatenate(cols), np.concatenate(coefs), np.concatenate(rows), nrow, model.num_vars)
    model.add_constraints("channel-load", load - w <= -np.asarray(rhs))


def channel_values(inst: PlacementInstance, device: np.ndarray, model: Model) -> dict[str, np.ndarray]:
    """Values of the channel variables for a plan's devices (empty without channel rows)."""
    if "delivered" not in model.var_blocks:
        return {}
    m = inst.n_devices
    cls, K = transfer_classes(inst)
    prod = np.zeros(K, dtype=np.int64)
    prod[cls] = inst.src
    y = np.zeros((K, m))
    np.maximum.at(y, (cls, device[inst.dst]), 1.0)
    y[np.arange(K), device[prod]] = 0.0
    s = np.zeros((K, m))
    s[np.arange(K), device[prod]] = y.sum(axis=1)
    return {"delivered": y, "sent": s}


def first_use_symmetry(model: Model, inst: PlacementInstance, x: Any, classes: list[np.ndarray]) -> None:
    """Within a class of interchangeable devices c_0, c_1, ..., device c_t is used only
    after c_{t-1} was used by an op earlier in topological order o: x[o_j, c_t] <=
    f[j - 1, t - 1], with f[j, t] <= f[j - 1, t] + x[o_j, c_t] ("c_t used among the first
    j ops", capped at 1). Any plan is one of these after relabelling (`relabel_first_use`)."""
    order = inst.topo_order()
    n = order.size
    for k, cl in enumerate(classes):
        if cl.size < 2 or n == 0:
            continue
        first = cl[:-1]
        f = model.add_vars(f"first-use-{k}", (n, first.size), lb=0.0, ub=1.0)
        xo = x[order][:, first]
        model.add_constraints(f"first-use-{k}-start", f[0] - xo[0] <= 0)
        model.add_constraints(f"symmetry-{k}-first", x[order[0], cl[1:]] <= 0)
        if n > 1:
            model.add_constraints(f"first-use-{k}-grow", f[1:] - f[:-1] - xo[1:] <= 0)
            model.add_constraints(f"symmetry-{k}", x[order[1:]][:, cl[1:]] - f[:-1] <= 0)


def relabel_first_use(inst: PlacementInstance, device: np.ndarray, classes: list[np.ndarray]) -> np.ndarray:
    """The same plan with the devices of each class renamed in order of first use."""
    order = inst.topo_order()
    dev = np.asarray(device, dtype=np.int64).copy()
    new = dev.copy()
    for cl in classes:
        if cl.size < 2:
            continue
        seq = dev[order]
        inclass = np.isin(seq, cl)
        _, first = np.unique(seq[inclass], return_index=True)
        used = seq[inclass][np.sort(first)]
        rest = [int(d) for d in cl if d not in set(used.tolist())]
        mapping = dict(zip([*used.tolist(), *rest], cl.tolist()))
        mask = np.isin(dev, cl)
        new[mask] = np.array([mapping[int(d)] for d in dev[mask]], dtype=np.int64)
    return new


def first_use_values(inst: PlacementInstance, device: np.ndarray, classes: list[np.ndarray]) -> dict[str, np.ndarray]:
    """Values of the `first_use_symmetry` variables for a plan relabelled by
    `relabel_first_use` with the same classes."""
    out: dict[str, np.ndarray] = {}
    seq = np.asarray(device)[inst.topo_order()]
    for k, cl in enumerate(classes):
        if cl.size < 2 or seq.size == 0:
            continue
        used = (seq[:, None] == cl[None, :-1]).astype(float)
        out[f"first-use-{k}"] = np.minimum(np.cumsum(used, axis=0), 1.0)
    return out


def solve_bound(inst: PlacementInstance, ctx: RunContext, time_limit: float | None = None, **kw: Any) -> tuple[Bound | None, SolverResult]:
    """Solve the relaxation (within ``time_limit`` seconds) and return its proven bound in
    seconds: the solver's dual bound less the safety margin, never its incumbent. A build
    that reaches the call's deadline (the run's, or ``time_limit`` from now) raises
    `DeadlineReached`."""
    t0 = time.perf_counter()
    sub = ctx.child(time_limit=time_limit, share_records=True)
    # the build stops at the call's deadline (`DeadlineReached`): a build of 2 s on 27,000
    # ops had run after a limit of 0.05 s had passed (review rev16 D3)
    model, index = RELAXATION.build(inst, {**kw, "deadline": sub.deadline}, name=f"{inst.name}-{RELAXATION.name}")
    build_s = time.perf_counter() - t0
    if not kw.get("integral", True) and sub.options.lp_method == "auto":
        sub.options = sub.options.with_(lp_method="barrier")  # degenerate for simplex (GNMT: 14 s vs > 60 s)
    result = sub.solve_model(model, build_seconds=build_s)
    if result.bound is None or not np.isfinite(result.bound):
        return None, result
    kind = "MILP" if kw.get("integral", True) else "LP"
    rows = " + ancestor/descendant loads (Carlier 1982)" if {"descendant-load", "ancestor-load"} & set(model.con_blocks) else ""
    if {"waiting-descendant-load", "waiting-ancestor-load", "window-load"} & set(model.con_blocks):
        rows += " + waiting and window loads"
    source = f"{SOURCE}{rows}, {kind} dual bound ({result.backend}, {result.termination.value})"
    return Bound(model_seconds(result.bound, inst), source, solver_record=result), result


def relaxation_bounds(
    inst: PlacementInstance, ctx: RunContext, time_limit: float | None = None, lp_first_above: int = 1500, assignments: list[np.ndarray] | None = None, cut: list[str] | None = None
) -> list[Bound]:
    """The best proven bound of the assignment relaxation within ``time_limit`` seconds
    (none when the solver proves none). Above ``lp_first_above`` ops the LP relaxation is
    solved first, so a bound exists even when the MILP's root does not finish. The run's
    ``order_nonzeros``, ``wait_nonzeros`` and ``window_nonzeros`` parameters cap the
    ancestor and descendant, the waiting and the window rows (`descendants`) of the MILP;
    the LP goes without them (with fractional assignments a device's share of
    the descendants is about 1/m of them, and they doubled the LP's nonzeros on
    gnmt-v2-4gpu-channels). ``cut`` collects why time left a relaxation unsolved (the
    run's limit passed before it, its build cut, or too little time to start it): the
    caller's run did not complete."""
    if inst.n_devices == 1:
        return []
    if past(ctx.deadline):
        if cut is not None:
            cut.append("the assignment relaxation: the limit passed before it")
        return []
    t0 = time.perf_counter()
    nz = int(ctx.param("order_nonzeros", MAX_NONZEROS))
    wait = {key: int(ctx.param(key, default)) for key, default in (("wait_nonzeros", WAIT_NONZEROS), ("window_nonzeros", WINDOW_NONZEROS))}
    found: list[Bound] = []
    if inst.n_ops > lp_first_above:
        try:
            b, _ = solve_bound(inst, ctx, None if time_limit is None else 0.5 * time_limit, integral=False, order_nonzeros=0, wait_nonzeros=0, window_nonzeros=0)
        except DeadlineReached as exc:  # its build ran out of time: no bound from it
            b = None
            if cut is not None:
                cut.append(f"the LP relaxation: {exc}")
        if b is not None:
            found.append(b)
    rest = None if time_limit is None else time_limit - (time.perf_counter() - t0)
    if (rest is None or rest > 0.5) and not past(ctx.deadline):
        try:
            b, result = solve_bound(inst, ctx, rest, order_nonzeros=nz, **wait)
        except DeadlineReached as exc:
            b, result = None, None
            if cut is not None:
                cut.append(f"the assignment relaxation: {exc}")
        if b is not None:
            found.append(b)
        if assignments is not None and result is not None and result.has_solution and "assign" in result.values_by_block:
            assignments.append(np.argmax(result.values_by_block["assign"], axis=1).astype(np.int64))
    elif cut is not None:
        cut.append(f"the assignment relaxation: {max(rest or 0.0, 0.0):.3g} s left, too little to start it")
    return [max(found, key=lambda b: b.value)] if found else []

