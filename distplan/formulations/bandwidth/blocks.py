"""Linear blocks over the bandwidth vector B (GB/s) and the small LPs built from them.

The instance's rows come from `distplan.formulations.bandwidth.rows` (one named block
each). The LPs here (linear objective over the feasible bandwidths) serve
the baselines, the cost range of the Pareto sweep, the "unused dimension gets its lower
bound" step and the boundedness check; they run on whatever backend the run uses.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from distplan.formulations.bandwidth.data import Program, bandwidth_scale
from distplan.formulations.bandwidth.diagnose import raise_if_infeasible
from distplan.formulations.bandwidth.rows import BandwidthIndex, bandwidth_block, rows_block, solver_rows
from distplan.formulations.contract import ModelSpec
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model, ModelArrays
from distplan.solvers.result import SolverResult, Termination


@dataclass(frozen=True)
class LinearIndex(BandwidthIndex):
    """A linear objective over B: ``objective`` (per GB/s) and its sense."""

    objective: np.ndarray
    sense: str


def prepare_linear(prog: Program, params: Mapping[str, Any]) -> LinearIndex:
    """Bounds of B from the instance, narrowed by ``fixed`` ({dimension: GB/s}) and
    ``at_least`` (GB/s per dimension, NaN for none); ``objective`` and ``sense``."""
    lb, ub = linear_bounds(prog, params.get("fixed"), params.get("at_least"))
    sigma = bandwidth_scale(prog)
    c = np.asarray(params["objective"], dtype=float)
    return LinearIndex(lb / sigma, ub / sigma, solver_rows(prog, sigma), c / (float(np.max(np.abs(c))) or 1.0), str(params.get("sense", "min")))


def linear_bounds(prog: Program, fixed: dict[int, float] | None, at_least: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """The instance's bounds of B (GB/s) with ``fixed`` dimensions pinned and ``at_least``
    raised (within the upper bound)."""
    lb = prog.lb.copy()
    ub = prog.ub.copy()
    if at_least is not None:
        mask = np.isfinite(at_least)
        lb[mask] = np.maximum(lb[mask], np.minimum(at_least[mask], ub[mask]))
    for k, v in (fixed or {}).items():
        lb[k] = ub[k] = v
    return lb, ub


def linear_objective(model: Model, prog: Program, index: LinearIndex) -> None:
    """min or max ``objective @ B``."""
    expr = (model["bandwidth"] * index.objective).sum()
    if index.sense == "min":
        model.minimize(expr)
    else:
        model.maximize(expr)


#: a linear objective over the feasible bandwidths
LINEAR_LP = ModelSpec("bandwidth-lp", prepare_linear, (bandwidth_block, rows_block, linear_objective))


def optimize_linear(
    ctx: RunContext,
    prog: Program,
    objective: np.ndarray,
    sense: str = "min",
    *,
    fixed: dict[int, float] | None = None,
    at_least: np.ndarray | None = None,
    name: str = "bandwidth-lp",
) -> tuple[SolverResult, np.ndarray | None]:
    """Optimize ``objective @ B`` over the feasible bandwidths (GB/s).

    ``fixed`` pins dimensions to values; ``at_least`` adds B >= at_least (NaN entries free).
    Returns the solver record and B (or None without a solution). On a backend that takes
    cvxpy problems the LP is a cached parametrized cvxpy problem (compiled once per shape);
    otherwise `LINEAR_LP` handed to ``ctx.solve_model``.
    """
    c = np.asarray(objective, dtype=float)
    if ctx.backend.capabilities.convex:
        lb, ub = linear_bounds(prog, fixed, at_least)
        return _optimize_linear_cvxpy(ctx, prog, c, sense, lb, ub, name)
    if direct_lp(ctx):
        index = prepare_linear(prog, {"objective": c, "sense": sense, "fixed": fixed, "at_least": at_least})
        result = solve_direct(ctx, index, index.objective, sense, name)
    else:
        model, _ = LINEAR_LP.build(prog, {"objective": c, "sense": sense, "fixed": fixed, "at_least": at_least}, name=name)
        result = ctx.solve_model(model)
    # the LP is in x = B / sigma with the objective over max |c| (`prepare_linear`)
    sigma = bandwidth_scale(prog)
    factor = sigma * (float(np.max(np.abs(c))) or 1.0)
    for attr in ("objective", "bound"):
        value = getattr(result, attr)
        if value is not None:
            setattr(result, attr, value * factor)
    values = result.values_by_block.get("bandwidth") if result.has_solution else None
    return result, None if values is None else np.asarray(values, dtype=float) * sigma


#: build the small LPs of this module and of the baselines as arrays (`solve_direct`),
#: without the modeling layer, when the run's backend takes MILP/LP arrays (their build cost
#: ~4 ms an LP, HiGHS's solve ~0.4 ms; libra_perf solves the baselines' ~20 LPs to compare
#: with them). False: through ``ctx.solve_model`` as every other program.
DIRECT_LP = True


def direct_lp(ctx: RunContext) -> bool:
    """Whether this run's small bandwidth LPs are built as arrays (`solve_direct`)."""
    return DIRECT_LP and ctx.backend.capabilities.lp and not ctx.backend.capabilities.convex


def solve_direct(ctx: RunContext, index: BandwidthIndex, objective: np.ndarray, sense: str, name: str,
                 fill: tuple[np.ndarray, np.ndarray] | None = None) -> SolverResult:
    """The LP ``min/max objective @ x`` over x within the index's bounds and rows (the index's
    units), built as `ModelArrays` and solved by the run's backend (`RunContext.solve_arrays`);
    with ``fill`` = (free dimensions, weights) one more column t >= 0 (block ``level``) and
    rows x_d - w_d t >= 0, and the objective is max t. Values in ``values_by_block``
    ("bandwidth", "level")."""
    t0 = time.perf_counter()
    D = index.lb.size
    n = D + (1 if fill is not None else 0)
    rows = [np.append(r.coeffs, 0.0) if fill is not None else r.coeffs for r in index.rows]
    lo = [r.rhs if r.sense in (">=", "==") else -np.inf for r in index.rows]
    hi = [r.rhs if r.sense in ("<=", "==") else np.inf for r in index.rows]
    cost = np.zeros(n)
    if fill is not None:
        free, weights = fill
        for d in free.tolist():
            row = np.zeros(n)
            row[d], row[D] = 1.0, -float(weights[d])
            rows.append(row)
            lo.append(0.0)
            hi.append(np.inf)
        cost[D] = 1.0
    else:
        cost[:D] = objective
    arrays = ModelArrays(
        name=name,
        c=cost,
        offset=0.0,
        A=sp.csr_matrix(np.vstack(rows)) if rows else sp.csr_matrix((0, n)),
        row_lo=np.asarray(lo, dtype=float),
        row_hi=np.asarray(hi, dtype=float),
        col_lo=np.append(index.lb, 0.0) if fill is not None else np.asarray(index.lb, dtype=float),
        col_hi=np.append(index.ub, np.inf) if fill is not None else np.asarray(index.ub, dtype=float),
        integrality=np.zeros(n, dtype=np.int8),
        sense="max" if (sense == "max" or fill is not None) else "min",
        var_blocks=[("bandwidth", D, False)] + ([("level", 1, True)] if fill is not None else []),
        con_blocks=[("rows", len(rows))],
    )

    def blocks(x: np.ndarray) -> dict[str, np.ndarray]:
        return {"bandwidth": x[:D], **({"level": x[D:]} if fill is not None else {})}

    stats = {"name": name, "variables": n, "binaries": 0, "integers": 0, "rows": len(rows), "nonzeros": int(arrays.A.nnz)}
    return ctx.solve_arrays(arrays, build_seconds=time.perf_counter() - t0, blocks=blocks, stats=stats)


@dataclass
class _LinearProblem:
    problem: Any
    x: Any
    params: dict[str, Any]
    finite_ub: np.ndarray
    eq: np.ndarray
    le: np.ndarray
    ge: np.ndarray


_LINEAR: OrderedDict[tuple[Any, ...], _LinearProblem] = OrderedDict()


def _linear_problem(prog: Program, lo: np.ndarray, hi: np.ndarray, ub: np.ndarray, sense: str) -> _LinearProblem:
    import cvxpy as cp

    D = prog.num_dims
    eq = np.flatnonzero(lo == hi)
    le = np.flatnonzero(np.isfinite(hi) & (lo != hi))
    ge = np.flatnonzero(np.isfinite(lo) & (lo != hi))
    finite_ub = np.flatnonzero(np.isfinite(ub))
    key = (D, tuple(eq), tuple(le), tuple(ge), tuple(finite_ub), sense)
    cached = _LINEAR.get(key)
    if cached is not None:
        _LINEAR.move_to_end(key)
        return cached
    x = cp.Variable(D, name="bandwidth")
    params: dict[str, Any] = {"lb": cp.Parameter(D, name="lb"), "c": cp.Parameter(D, name="objective")}
    cons: list[Any] = [params["lb"] <= x]
    if finite_ub.size:
        params["ub"] = cp.Parameter(finite_ub.size, name="ub")
        cons.append(x[finite_ub] <= params["ub"])
    for tag, idx in (("eq", eq), ("le", le), ("ge", ge)):
        if idx.size:
            params[f"A_{tag}"] = cp.Parameter((idx.size, D), name=f"A_{tag}")
            rhs = params[f"b_{tag}"] = cp.Parameter(idx.size, name=f"b_{tag}")
            lhs = params[f"A_{tag}"] @ x
            cons.append(lhs == rhs if tag == "eq" else (lhs <= rhs if tag == "le" else lhs >= rhs))
    obj = params["c"] @ x
    problem = cp.Problem(cp.Minimize(obj) if sense == "min" else cp.Maximize(obj), cons)
    lp = _LinearProblem(problem, x, params, finite_ub, eq, le, ge)
    _LINEAR[key] = lp
    if len(_LINEAR) > 64:
        _LINEAR.popitem(last=False)
    return lp


def _optimize_linear_cvxpy(
    ctx: RunContext, prog: Program, c: np.ndarray, sense: str, lb: np.ndarray, ub: np.ndarray, name: str
) -> tuple[SolverResult, np.ndarray | None]:
    """The LP named ``name`` as a parametrized cvxpy problem, scaled so that x and the objective are O(1)."""
    t0 = time.perf_counter()
    A, lo, hi = prog.rows_matrix()
    lp = _linear_problem(prog, lo, hi, ub, sense)
    sigma = bandwidth_scale(prog)
    cscale = float(np.max(np.abs(c))) or 1.0
    p = lp.params
    p["lb"].value = lb / sigma
    p["c"].value = c / cscale
    if lp.finite_ub.size:
        p["ub"].value = ub[lp.finite_ub] / sigma
    for tag, idx, rhs in (("eq", lp.eq, hi), ("le", lp.le, hi), ("ge", lp.ge, lo)):
        if idx.size:
            p[f"A_{tag}"].value = A[idx]
            p[f"b_{tag}"].value = rhs[idx] / sigma
    result = ctx.solve_convex(lp.problem, name, build_seconds=time.perf_counter() - t0)
    for attr in ("objective", "bound"):
        value = getattr(result, attr)
        if value is not None:
            setattr(result, attr, value * cscale * sigma)
    if not result.has_solution or lp.x.value is None:
        return result, None
    return result, np.asarray(lp.x.value, dtype=float) * sigma


def max_bandwidths(ctx: RunContext, prog: Program, dims: Sequence[int]) -> dict[int, float]:
    """Largest feasible B_d (GB/s) for each listed dimension; inf when unbounded."""
    out: dict[int, float] = {}
    for k in dims:
        e = np.zeros(prog.num_dims)
        e[k] = 1.0
        result, b = optimize_linear(ctx, prog, e, "max", name=f"max-bandwidth-{prog.dims[k]}")
        if result.termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED, Termination.NUMERICAL):
            raise_if_infeasible(ctx, prog, "bandwidth range")
        if result.termination in (Termination.UNBOUNDED, Termination.INFEASIBLE_OR_UNBOUNDED):
            out[k] = np.inf
        elif b is not None:
            out[k] = float(b[k])
    return out


def lowest_unused(ctx: RunContext, prog: Program, bandwidth: np.ndarray) -> np.ndarray:
    """Give dimensions without traffic the smallest bandwidth the constraints allow.

    Training time does not depend on those dimensions and never grows when a used
    dimension gets more bandwidth, so minimizing the unused bandwidths subject to
    B_used >= current B_used keeps the allocation optimal (exact, one LP).
    """
    unused = ~prog.used
    if not unused.any():
        return bandwidth
    floor = np.where(prog.used, bandwidth * (1 - 1e-9), np.nan)
    result, b = optimize_linear(ctx, prog, unused.astype(float), "min", at_least=floor, name="lowest-unused")
    if b is None or not result.has_solution:
        return bandwidth
    return b
