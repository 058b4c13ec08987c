"""LIBRA's time objective as a parametrized cvxpy second-order cone program.

The program of `distplan.formulations.bandwidth.convex` (LIBRA, Won et al., ISPASS 2024,
arXiv 2109.11762): minimize the weighted communication seconds ``sum_k w_k t_k`` with
``t_k >= u_kd s_d`` and ``s_d >= 1 / B_d`` over B (GB/s) within the instance rows and
bounds, optionally under a cost budget. `build_time_problem` compiles it once per shape
(a DPP problem whose every number is a Parameter) and keeps the most recent compiled
problems; `TimeProblem.load` sets an instance's numbers, scaled so the solver sees O(1)
values.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.bandwidth.data import Program, bandwidth_scale

#: the names of the conic programs in their solver calls' records (``extra.model.name``,
#: `registry.Formulation.solves`): the time program, and the time program at a cost budget
#: (``with_budget``), whether cvxpy or `conic.DirectSolver` hands them to the solver
TIME_PROGRAM = "libra-time-program"
BUDGET_PROGRAM = "libra-budget-program"


def _padded(k: int) -> int:
    """Number of term slots compiled for k terms (powers of two, so shapes are shared)."""
    return 1 << max(0, (k - 1).bit_length())


@dataclass
class TimeProblem:
    """A parametrized cvxpy problem: min scaled communication seconds over B (GB/s).

    Every number of the instance (traffic, weights, rows, bounds, budget) is a cvxpy
    Parameter, so instances of the same shape (dimensions, dimensions with traffic,
    number of ==/<=/>= rows, padded number of terms) share one compiled (DPP) program:
    `load` sets the values, and cvxpy skips canonicalization on every solve after the
    first. Unused term slots get zero traffic and weight.
    """

    problem: Any
    bandwidth: Any
    params: dict[str, Any]
    used: np.ndarray
    finite_ub: np.ndarray
    slots: int
    budget_constraint: Any | None = None
    #: seconds per objective unit, USD per normalized cost unit, GB/s per variable unit
    time_scale: float = 1.0
    cost_scale: float = 1.0
    bandwidth_scale: float = 1.0

    def load(self, prog: Program, *, time_scale: float, cost_scale: float | None = None) -> None:
        """Set the parameters to ``prog``'s numbers.

        The variable is x = B / bandwidth_scale(prog) and the objective is in units of
        ``time_scale`` seconds, so every quantity the solver sees is O(1) (interior-point
        tolerances are absolute: unscaled, a 1 ms objective would be known to 1e-5 only).
        """
        p = self.params
        sigma = bandwidth_scale(prog)
        A, lo, hi, eq, le, ge = prog.row_groups()
        p["lb"].value = prog.lb / sigma
        if self.finite_ub.size:
            p["ub"].value = prog.ub[self.finite_ub] / sigma
        if self.used.size:
            K = prog.terms.shape[0]
            traffic = np.zeros((self.slots, self.used.size))
            traffic[:K] = prog.terms[:, self.used]
            weights = np.zeros(self.slots)
            weights[:K] = prog.weights / (time_scale * sigma)
            p["traffic"].value = traffic
            p["weights"].value = weights
        for key, idx, rhs in (("eq", eq, hi), ("le", le, hi), ("ge", ge, lo)):
            if idx.size:
                p[f"A_{key}"].value = A[idx]
                p[f"b_{key}"].value = rhs[idx] / sigma
        if "cost" in p:
            assert cost_scale is not None
            p["cost"].value = prog.cost_per_gbps * sigma / cost_scale
            self.cost_scale = cost_scale
        self.time_scale = time_scale
        self.bandwidth_scale = sigma

    def bandwidth_gbps(self) -> np.ndarray | None:
        """The solution B in GB/s (None before a successful solve)."""
        x = self.bandwidth.value
        return None if x is None else np.asarray(x, dtype=float) * self.bandwidth_scale

    @property
    def budget(self) -> Any:
        return self.params.get("budget")


def _signature(prog: Program, with_budget: bool) -> tuple[Any, ...]:
    _, _, _, eq, le, ge = prog.row_groups()
    used = tuple(int(k) for k in np.flatnonzero(prog.used))
    finite_ub = tuple(int(k) for k in np.flatnonzero(np.isfinite(prog.ub)))
    return (prog.num_dims, used, _padded(prog.terms.shape[0]), eq.size, le.size, ge.size, finite_ub, with_budget)


_COMPILED: OrderedDict[tuple[Any, ...], TimeProblem] = OrderedDict()
_COMPILED_MAX = 64


def build_time_problem(prog: Program, *, with_budget: bool = False) -> TimeProblem:
    """The convex time program for problems shaped like ``prog`` (cached by shape; call `load`)."""
    key = _signature(prog, with_budget)
    cached = _COMPILED.get(key)
    if cached is not None:
        _COMPILED.move_to_end(key)
        return cached
    import cvxpy as cp

    D = prog.num_dims
    _, _, _, eq, le, ge = prog.row_groups()
    used = np.flatnonzero(prog.used)
    finite_ub = np.flatnonzero(np.isfinite(prog.ub))
    slots = _padded(prog.terms.shape[0])
    params: dict[str, Any] = {"lb": cp.Parameter(D, name="lb")}
    B = cp.Variable(D, name="bandwidth")
    constraints: list[Any] = [params["lb"] <= B]
    if finite_ub.size:
        params["ub"] = cp.Parameter(finite_ub.size, name="ub")
        constraints.append(B[finite_ub] <= params["ub"])
    objective: Any = cp.Constant(0.0)
    if used.size:
        s = cp.Variable(used.size, name="inv_bandwidth")
        constraints.append(cp.inv_pos(B[used]) <= s)
        t = cp.Variable(slots, name="term_time")
        params["traffic"] = cp.Parameter((slots, used.size), name="traffic", nonneg=True)
        params["weights"] = cp.Parameter(slots, name="weights", nonneg=True)
        rows, cols = np.divmod(np.arange(slots * used.size), used.size)
        constraints.append(t[rows] >= cp.multiply(cp.vec(params["traffic"], order="C"), s[cols]))
        objective = params["weights"] @ t
    for sense, idx in (("eq", eq), ("le", le), ("ge", ge)):
        if not idx.size:
            continue
        params[f"A_{sense}"] = cp.Parameter((idx.size, D), name=f"A_{sense}")
        rhs = params[f"b_{sense}"] = cp.Parameter(idx.size, name=f"b_{sense}")
        lhs = params[f"A_{sense}"] @ B
        constraints.append(lhs == rhs if sense == "eq" else (lhs <= rhs if sense == "le" else lhs >= rhs))
    budget_con = None
    if with_budget:
        params["cost"] = cp.Parameter(D, name="cost", nonneg=True)
        params["budget"] = cp.Parameter(name="cost_budget", nonneg=True)
        budget_con = params["cost"] @ B <= params["budget"]
        constraints.append(budget_con)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    tp = TimeProblem(problem, B, params, used, finite_ub, slots, budget_con)
    _COMPILED[key] = tp
    if len(_COMPILED) > _COMPILED_MAX:
        _COMPILED.popitem(last=False)
    return tp


def time_scale(prog: Program) -> float:
    """A typical communication time (s), so the conic objective is O(1) (solver tolerances are absolute)."""
    if not prog.terms.size:
        return 1.0
    return max(float(prog.weights @ prog.terms.max(axis=1)) / bandwidth_scale(prog), 1e-300)
