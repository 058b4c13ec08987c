"""The whole-schedule MILP in time-indexed form, for integral durations and delays.

Same schedule space as the disjunctive model (`opmodel.py`: dependencies, symmetry chains,
memory-implied precedences, one operation at a time per device, memory within capacity
at every start), written with step variables ``y[i, t]`` = "operation i has started by
integer time t" (`blocks.scheduling.StepVars`). Its LP relaxation contains the preemptive
one-machine bounds and the memory profile over time, so it proves optima the big-M model
only reaches after long branching (e.g. Zero Bubble's p=4, m=12, comm=1 case).

Start windows: earliest = longest path from the release times; latest = horizon minus
duration and tail (makespan), or, for the longest device span with an incumbent span R,
from an anchor: the one operation without predecessors starts first, so wlog at 0; every
device's operations lie within [first_d, first_d + R]; latest starts propagate backwards
along the arcs, and a device's first start is at most its operations' latest starts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.contract import ModelSpec
from distplan.formulations.pipeline.common import OpArcs
from distplan.formulations.pipeline.opmodel import OpProblem, _heads, implied_arcs
from distplan.modeling.model import Model
from distplan.modeling.scheduling import (
    StepVars,
    makespan_epigraph,
    step_cumulative,
    step_monotone,
    step_precedence,
    step_resource,
    step_start_link,
)
from distplan.models.graphs import topological_order


def _backward(prob: OpProblem, latest: np.ndarray, arcs: OpArcs) -> np.ndarray:
    """Latest starts pulled back along the arcs: ``L[src] <= L[dst] - gap``: one pass over
    the arcs in reverse topological order of their sources (the fixpoint of the vectorised
    relaxation below took as many passes as the longest chain: 3 s for N = 4096 micro-batches
    of 24 blocks); the relaxation on a graph with a cycle."""
    n = prob.n
    order = topological_order(n, arcs.src, arcs.dst)
    if len(order) == n:
        pos = np.empty(n, dtype=np.int64)
        pos[order] = np.arange(n)
        eo = np.argsort(-pos[arcs.src], kind="stable")
        ub_list = latest.astype(float).tolist()
        for a, b, g in zip(arcs.src[eo].tolist(), arcs.dst[eo].tolist(), arcs.gap[eo].astype(float).tolist()):
            v = ub_list[b] - g
            if v < ub_list[a]:
                ub_list[a] = v
        return np.asarray(ub_list, dtype=float)
    ub = latest.astype(float).copy()
    for _ in range(prob.n + 1):
        cand = np.full(prob.n, np.inf)
        np.minimum.at(cand, arcs.src, ub[arcs.dst] - arcs.gap)
        new = np.minimum(ub, cand)
        if np.array_equal(new, ub):
            break
        ub = new
    return ub


def windows(prob: OpProblem, arcs: OpArcs | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Integer start windows [earliest, latest] of every operation, along ``arcs`` (default:
    the problem's)."""
    arcs = prob.arcs if arcs is None else arcs
    n = prob.n
    earliest = np.ceil(_heads(prob, arcs) - 1e-9).astype(np.int64)
    tail = np.zeros(n) if prob.tail is None else prob.tail
    latest = prob.horizon - prob.dur - tail
    if prob.objective == "shift":
        # the unshifted fixed part is feasible: shift <= 0
        dl = np.full(n, np.inf)
        np.minimum.at(dl, prob.deadline_ops, prob.deadline_base - prob.deadline_gap)
        latest = np.minimum(latest, dl)
    if prob.objective == "device_span" and prob.span_ub is not None:
        has_pred = np.zeros(n, dtype=bool)
        has_pred[arcs.dst] = True
        roots = np.flatnonzero(~has_pred)
        if roots.size == 1:
            r = float(np.floor(prob.span_ub + 1e-9))
            ub = np.full(n, np.inf)
            ub[roots[0]] = 0.0
            nd = prob.mask.shape[1]
            first = np.full(nd, np.inf)
            first[prob.mask[roots[0]]] = 0.0
            for _ in range(4 * nd + 4):
                old = ub.copy()
                for d in range(nd):
                    on = prob.mask[:, d]
                    ub[on] = np.minimum(ub[on], first[d] + r - prob.dur[on])
                ub = _backward(prob, np.where(np.isfinite(ub), ub, 1e300), arcs)
                ub[ub >= 1e299] = np.inf
                for d in range(nd):
                    on = prob.mask[:, d]
                    if on.any():
                        first[d] = min(first[d], float(ub[on].min()))
                if np.array_equal(old, ub):
                    break
            latest = np.minimum(latest, ub)
            earliest[roots[0]] = 0
            latest[roots[0]] = 0.0
    latest = np.floor(_backward(prob, latest, arcs) + 1e-9).astype(np.int64)
    return earliest, np.maximum(latest, earliest)


@dataclass(frozen=True)
class StepIndex:
    """What the blocks of the time-indexed model share (block contract): the arcs with the
    memory-implied precedences, and integer start windows."""

    arcs: OpArcs
    implied_arcs: int
    earliest: np.ndarray
    latest: np.ndarray


def prepare_steps(prob: OpProblem, params: Mapping[str, Any]) -> StepIndex:
    imp = implied_arcs(prob, params.get("_deadline"))  # the run's deadline (`opmodel.prepare_ops`)
    e, lt = windows(prob, imp.arcs)
    return StepIndex(imp.arcs, imp.implied, e, lt)


def ti_variables(model: Model, prob: OpProblem, index: StepIndex) -> None:
    """Step variables ``started`` and start times ``start`` (integers within the windows)."""
    StepVars(model, index.earliest, index.latest, "started")
    model.add_vars("start", prob.n, lb=index.earliest.astype(float), ub=index.latest.astype(float))


def _steps(model: Model, index: StepIndex) -> StepVars:
    return StepVars(model, index.earliest, index.latest, "started", existing=True)


def ti_constraints(model: Model, prob: OpProblem, index: StepIndex) -> None:
    """Link, monotone steps, precedence, one operation at a time, memory per device."""
    sv = _steps(model, index)
    step_start_link(model, sv, model["start"], "start-link")
    step_monotone(model, sv, "started-monotone")
    step_precedence(model, sv, index.arcs.src, index.arcs.dst, index.arcs.gap, "precedence")
    nd = prob.mask.shape[1]
    groups = [np.flatnonzero(prob.mask[:, d]) for d in range(nd)]
    horizon = int((index.latest + np.round(prob.dur).astype(np.int64)).max()) + 1
    step_resource(model, sv, groups, prob.dur, np.ones(nd), horizon, "one-at-a-time")
    init = np.zeros(nd) if prob.init_mem is None else prob.init_mem
    step_cumulative(model, sv, groups, prob.mem, init, prob.capacity, horizon, "memory")


def ti_objective(model: Model, prob: OpProblem, index: StepIndex) -> None:
    """Makespan, shift or device-span epigraph (blocks of those names)."""
    s = model["start"]
    n, nd = prob.n, prob.mask.shape[1]
    tail = np.zeros(n) if prob.tail is None else prob.tail
    has_succ = np.zeros(n, dtype=bool)
    has_succ[prob.arcs.src] = True
    if prob.objective == "makespan":
        ends = np.flatnonzero(~has_succ)
        c = makespan_epigraph(model, s, ends, prob.dur[ends] + tail[ends], "makespan", integer=True, ub=math.floor(prob.horizon + 1e-9))
        model.minimize(c)
        return
    if prob.objective == "shift":
        shift = model.add_vars("shift", (), lb=-np.inf, ub=0.0)
        ops = prob.deadline_ops
        model.add_constraints("deadline", s[ops] - shift <= prob.deadline_base - prob.deadline_gap)
        model.minimize(shift)
        return
    if prob.objective != "device_span":
        raise ValueError(f"the time-indexed model has no objective {prob.objective!r}")
    used = np.array([d for d in range(nd) if prob.mask[:, d].any()])
    first = model.add_vars("device-first", nd, lb=-np.inf)
    last = model.add_vars("device-last", nd, lb=-np.inf)
    ub = np.inf if prob.span_ub is None else math.floor(prob.span_ub + 1e-9)
    span = model.add_vars("span", (), lb=0.0, ub=ub, vtype="integer")
    dd = np.concatenate([np.full(int(prob.mask[:, d].sum()), d) for d in used])
    oo = np.concatenate([np.flatnonzero(prob.mask[:, d]) for d in used])
    model.add_constraints("device-first-le", first[dd] - s[oo] <= 0.0)
    model.add_constraints("device-last-ge", last[dd] - s[oo] >= prob.dur[oo])
    model.add_constraints("span-epigraph", last[used] - first[used] - span <= 0.0)
    model.minimize(span)


#: the time-indexed form of the op model (integral data)
TIME_INDEXED = ModelSpec("time-indexed", prepare_steps, (ti_variables, ti_constraints, ti_objective))


def build_ti_model(prob: OpProblem, run_deadline: float | None = None) -> tuple[Model, StepIndex]:
    """The time-indexed model of ``prob``; `DeadlineReached` when its memory-implied
    precedences pass ``run_deadline`` (the run's, a ``time.perf_counter()`` value)."""
    return TIME_INDEXED.build(prob, None if run_deadline is None else {"_deadline": run_deadline}, name=f"{prob.name}-time-indexed")


def ti_size(prob: OpProblem) -> int:
    """Number of step variables of the time-indexed model over the problem's own arcs (the
    memory-implied precedences added at build narrow it further)."""
    e, lt = windows(prob)
    return int(np.maximum(lt - e, 0).sum())


def ti_warm_vector(model: Model, prob: OpProblem, index: StepIndex, start: np.ndarray) -> np.ndarray | None:
    """Step variables and objective of feasible integer start times (None if outside the windows)."""
    start = np.round(np.asarray(start, dtype=float)).astype(np.int64)
    e, lt = index.earliest, index.latest
    if np.any(start < e) or np.any(start > lt):
        return None
    sv = _steps(model, index)
    width = np.maximum(lt - e, 0)
    ops = np.repeat(np.arange(prob.n), width)
    t = e[ops] + (np.arange(ops.size) - np.repeat(sv.offset[:-1], width))
    vals: dict[str, Any] = {"started": (t >= start[ops]).astype(float), "start": start.astype(float)}
    end = start + prob.dur
    if prob.objective == "makespan":
        tail = np.zeros(prob.n) if prob.tail is None else prob.tail
        vals["makespan"] = float(np.ceil((end + tail).max() - 1e-9))
    elif prob.objective == "shift":
        ops = prob.deadline_ops
        vals["shift"] = min(0.0, float(np.max(start[ops] + prob.deadline_gap - prob.deadline_base))) if ops.size else 0.0
    else:
        nd = prob.mask.shape[1]
        first = np.array([start[prob.mask[:, d]].min() if prob.mask[:, d].any() else 0 for d in range(nd)], dtype=float)
        last = np.array([end[prob.mask[:, d]].max() if prob.mask[:, d].any() else 0 for d in range(nd)], dtype=float)
        vals.update({"device-first": first, "device-last": last, "span": float((last - first).max())})
    return model.vector(vals)
