"""The last step of every continuous bandwidth formulation: the plan the evaluator accepts.

A solver's allocation (GB/s) meets the rows only to the solver's absolute tolerances, and a
program whose numbers are far from O(1) (bandwidths of 1 MB/s, a cost budget that allows one
dimension 1e-8 of the others) can miss a row by more than the evaluator
(`distplan.models.bandwidth_eval`, ``TOLERANCE`` of the row's magnitude) accepts. So each
allocation goes through the evaluator, and one it rejects is repaired
(`accepted_or_repaired`): scaled down onto the nonnegative ``<=`` rows it exceeds (a total
bandwidth or a cost budget), or moved toward a plan the evaluator accepts (a baseline) by the
least convex combination that meets every row it misses; the training time is convex in B, so
that costs at most the same fraction of the time difference.

An exact formulation then returns the best accepted plan of its own and the two baselines'
(`equal_bw`, `proportional_to_traffic`: the max-min fair allocations, solved with HiGHS when it
is installed, before the formulation's own solves: a run its time limit cuts short has them
too), so it never loses to them (a conic solver's 1e-8 can); ``info["plan_from"]`` says which
plan it is. The formulation's bound is proven for the instance, whichever plan is
returned. Units: GB/s, seconds.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.bandwidth.data import Program
from distplan.formulations.bandwidth.fill import baseline_weights, fair_allocation
from distplan.formulations.deadline import BASELINE_GRACE, DeadlineReached
from distplan.formulations.registry import RunContext
from distplan.models.bandwidth_eval import evaluate
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.common import Check

#: convex-combination weights tried beyond the least one that meets the rows (rounding)
_PUSH = (1.0 + 1e-9, 2.0, 10.0)


def check(inst: BandwidthInstance, prog: Program, B: np.ndarray) -> Check | None:
    """The evaluator's check of allocation ``B`` (GB/s) when it accepts it with a finite time."""
    c = evaluate(inst, prog.to_plan(B, "time"))
    return c if c.feasible and math.isfinite(c.objective) else None


def _sides(prog: Program, B: np.ndarray) -> np.ndarray:
    """Per row side (the ``<=`` sides, then the ``>=`` sides), how far B exceeds it (row
    units; > 0: violated, exactly as computed in floating point)."""
    A, lo, hi = prog.rows_matrix()
    if not A.size:
        return np.zeros(0)
    act = A @ B
    with np.errstate(invalid="ignore"):
        return np.concatenate([np.where(np.isfinite(hi), act - hi, -np.inf), np.where(np.isfinite(lo), lo - act, -np.inf)])


def repairs(prog: Program, B: np.ndarray, anchors: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
    """Allocations near ``B`` (GB/s, within its bounds) that meet the rows ``B`` misses:
    scaled down onto the nonnegative ``<=`` rows it exceeds, and moved toward each anchor (an
    allocation the evaluator accepts) by the least convex combination that meets them."""
    out: list[tuple[str, np.ndarray]] = []
    A, lo, hi = prog.rows_matrix()
    if A.size:
        act = A @ B
        nonneg = np.all(A >= 0, axis=1) & np.isfinite(hi) & (hi > 0)
        over = nonneg & (act > hi)
        if over.any():
            alpha = float(np.min(hi[over] / act[over])) * (1 - 1e-12)
            out.append((f"scaled by {alpha:.12g} onto the <= rows it exceeded", np.clip(alpha * B, prog.lb, prog.ub)))
    q = _sides(prog, B)
    for name, P in anchors:
        p = _sides(prog, P)
        need = q > 0
        if not need.any():
            continue
        if np.any(need & ~(p < 0)):
            continue  # the anchor is not strictly inside a row B misses
        theta = float(np.max(q[need] / (q[need] - p[need])))
        for push in _PUSH:
            t = min(theta * push, 1.0)
            out.append((f"moved {t:.3g} of the way to {name}", np.clip((1 - t) * B + t * P, prog.lb, prog.ub)))
    return out


def accepted_or_repaired(inst: BandwidthInstance, prog: Program, B: np.ndarray,
                         anchors: list[tuple[str, np.ndarray]]) -> tuple[str, np.ndarray, Check] | None:
    """(how it was repaired, "" when it was not; the allocation; the evaluator's check) for
    allocation ``B`` (GB/s) or the first of its `repairs` the evaluator accepts; None when
    neither is accepted."""
    B = np.asarray(B, dtype=float)
    if not np.all(np.isfinite(B)):
        return None
    B = np.clip(B, prog.lb, prog.ub)
    c = check(inst, prog, B)
    if c is not None:
        return "", B, c
    for how, cand in repairs(prog, B, anchors):
        c = check(inst, prog, cand)
        if c is not None:
            return how, cand, c
    return None


def _baseline_context(ctx: RunContext) -> RunContext:
    """A context on HiGHS (the baselines' default backend; the run's own when HiGHS is not
    installed) within the run's deadline, or `BASELINE_GRACE` seconds from now when that
    leaves less, with its own solver records."""
    from distplan.solvers.base import get_backend

    highs = get_backend("highs")
    return ctx.child({}, backend=highs if highs.available() else ctx.backend, at_least=BASELINE_GRACE)


#: a baseline's accepted plan: its name, allocation (GB/s) and the evaluator's check
Baseline = tuple[str, np.ndarray, Check]


def baselines(ctx: RunContext, inst: BandwidthInstance, prog: Program) -> list[Baseline]:
    """The accepted plans of ``equal_bw`` and ``proportional_to_traffic`` (each repaired if
    need be); a baseline that fails or runs out of time is left out. Their solver records
    are appended to the run's.

    The exact formulations compute them before their own solves, within the run's limit or
    a grace of `BASELINE_GRACE` s: they cost little (two closed forms on a total-bandwidth
    instance, 0.1 ms; <= 19 HiGHS LPs, 25-50 ms, on the bundled multi-row ones), give the
    rounds of ``libra_perf_lp`` an incumbent, and a run its time limit cuts short still has
    them (computed after its solves, they were skipped once the limit had passed, and the
    plan returned could lose to one: libra_perf_per_cost at a 0.05 s limit on
    libra-resnet50-3d-total500, 11719.47683 against proportional_to_traffic's 11719.47563)."""
    sub = _baseline_context(ctx)
    try:
        return _baselines(sub, inst, prog)
    finally:
        ctx.solver_results.extend(sub.solver_results)


def _baselines(sub: RunContext, inst: BandwidthInstance, prog: Program) -> list[Baseline]:
    out: list[Baseline] = []
    for name, proportional in (("proportional_to_traffic", True), ("equal_bw", False)):
        try:
            B = fair_allocation(sub, prog, baseline_weights(prog, proportional))
        except (InfeasibleError, NoSolutionError, InputError, DeadlineReached):
            continue
        if B is None:
            continue
        fixed = accepted_or_repaired(inst, prog, B, [])
        if fixed is not None:
            out.append((name, fixed[1], fixed[2]))
    return out


def best_plan(inst: BandwidthInstance, prog: Program, candidates: list[tuple[str, np.ndarray | None]],
              info: dict[str, Any], base: list[Baseline]) -> np.ndarray | None:
    """The best accepted allocation (GB/s) among the formulation's ``candidates`` (label,
    allocation or None; repaired if need be) and the baselines' ``base`` (`baselines`); its
    origin in ``info["plan_from"]`` and every candidate's evaluated time in
    ``info["candidates"]`` (None: rejected). Earlier candidates win ties. None when none is
    accepted."""
    anchors = [(name, B) for name, B, _ in base]
    found: list[tuple[float, int, str, np.ndarray]] = []
    seen: dict[str, float | None] = {}
    for label, B in candidates:
        if B is None:
            continue
        fixed = accepted_or_repaired(inst, prog, B, anchors)
        if fixed is None:
            seen[label] = None
            continue
        how, b, c = fixed
        name = f"{label} ({how})" if how else label
        seen[name] = c.objective
        found.append((c.objective, len(found), name, b))
    for name, b, c in base:
        seen[f"baseline {name}"] = c.objective
        found.append((c.objective, len(found), f"baseline {name}", b))
    info["candidates"] = seen
    if not found:
        return None
    best = min(found, key=lambda f: (f[0], f[1]))
    info["plan_from"] = best[2]
    return best[3]
