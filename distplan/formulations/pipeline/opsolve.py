"""Solve an `OpProblem` with the disjunctive model (`opmodel`) or its time-indexed form
(`timeindexed`, integral data), whichever ``model`` (or ``auto``) picks."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.formulations.pipeline.opmodel import CLOSURE_MAX_OPS, OpProblem, build_op_model, integral_problem, warm_vector
from distplan.formulations.pipeline.timeindexed import build_ti_model, ti_size, ti_warm_vector
from distplan.formulations.registry import RunContext
from distplan.solvers.result import SolverResult

#: Largest time-indexed model ``auto`` picks (step variables). Measured with HiGHS 1.15:
#: models of 5,500 steps (Zero Bubble's m = 12, comm = 1) and fewer prove their optima in
#: seconds; the 10,240-step model of mshape N = 16 spent 95-115 s on its root LP, and its
#: next LP re-solve ran 460 s past a 300 s time limit (HiGHS checks it between LP solves).
TIME_INDEXED_AUTO_LIMIT = 8_000


def choose_model(prob: OpProblem, model: str = "auto", limit: int = TIME_INDEXED_AUTO_LIMIT) -> str:
    """``time_indexed`` for integral data whose step variables stay under ``limit``,
    else ``disjunctive`` (an explicit choice is honoured when possible)."""

    if model == "disjunctive":
        return "disjunctive"
    if not integral_problem(prob):
        if model == "time_indexed":
            raise InputError("params.model", "the time-indexed model needs integral durations and delays", "use model=disjunctive")
        return "disjunctive"
    if model == "time_indexed":
        return "time_indexed"
    if prob.n > CLOSURE_MAX_OPS:  # neither model is built (`opmodel.closure`); sizing it took 21 s at 6M operations
        return "disjunctive"
    return "time_indexed" if ti_size(prob) <= limit else "disjunctive"


def solve_op_problem(
    prob: OpProblem, ctx: RunContext, start: np.ndarray | None, model: str = "auto"
) -> tuple[np.ndarray | None, SolverResult, dict[str, Any]]:
    """Build (disjunctive or time-indexed), warm start (when ``start`` is given) and
    solve; returns the MILP's start times (seconds), the solver record and what was built
    (``model_kind``, ``implied_arcs``: the number of memory-implied precedences).
    `DeadlineReached` when the model's build passes the deadline of ``ctx`` (a solve asked
    past it is not started: `RunContext.solve_model`)."""
    t0 = time.perf_counter()
    kind = choose_model(prob, model)
    if kind == "time_indexed":
        prob.integral = True
        mdl, ti_index = build_ti_model(prob, ctx.deadline)
        warm = ti_warm_vector(mdl, prob, ti_index, start) if start is not None else None
        implied = ti_index.implied_arcs
    else:
        mdl, op_index = build_op_model(prob, ctx.deadline)
        warm = warm_vector(mdl, prob, op_index, start) if start is not None else None
        implied = op_index.implied_arcs
    built = {"model_kind": kind, "implied_arcs": implied}
    res = ctx.solve_model(mdl, warm_start=warm, build_seconds=time.perf_counter() - t0)
    if res.values is None:
        return None, res, built
    return np.asarray(res.values_by_block["start"], dtype=float), res, built
