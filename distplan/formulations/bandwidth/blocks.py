"""Linear blocks over the bandwidth vector B (GB/s) and the small LPs built from them.

Every block adds whole named blocks to a `Model`; each instance constraint is its own
block named by its JSON path (``constraints.linear[2]``), so solver rows map back to the
user's constraints. The LPs here (linear objective over the feasible bandwidths) serve
the baselines, the cost range of the Pareto sweep, the "unused dimension gets its lower
bound" step and the boundedness check; they run on whatever backend the run uses.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from distplan.formulations.bandwidth.data import Program, Row
from distplan.formulations.model import Model, Variable
from distplan.formulations.registry import RunContext
from distplan.solvers.result import SolverResult, Termination


def bandwidth_vars(model: Model, prog: Program, *, with_bounds: bool = True) -> Variable:
    """B_d in GB/s, with the dimension bounds (or only B >= 0 when ``with_bounds`` is False)."""
    if with_bounds:
        return model.add_vars("bandwidth", prog.num_dims, lb=prog.lb, ub=prog.ub)
    return model.add_vars("bandwidth", prog.num_dims, lb=0.0)


def row_block(model: Model, B: Variable, row: Row, name: str | None = None) -> None:
    """One instance row ``coeffs @ B sense rhs`` as a named block."""
    expr = (B * row.coeffs).sum()
    spec = expr <= row.rhs if row.sense == "<=" else (expr >= row.rhs if row.sense == ">=" else expr == row.rhs)
    model.add_constraints(name or row.path, spec)


def constraint_rows(model: Model, prog: Program, B: Variable, rows: Sequence[Row] | None = None) -> None:
    """The instance's rows (total bandwidth, cost budget, user rows), one block each."""
    for row in prog.rows if rows is None else rows:
        row_block(model, B, row)


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
    Returns the solver record and B (or None without a solution).
    """
    model = Model(name)
    lb = prog.lb.copy()
    ub = prog.ub.copy()
    if at_least is not None:
        mask = np.isfinite(at_least)
        lb[mask] = np.maximum(lb[mask], np.minimum(at_least[mask], ub[mask]))
    if fixed:
        for k, v in fixed.items():
            lb[k] = ub[k] = v
    B = model.add_vars("bandwidth", prog.num_dims, lb=lb, ub=ub)
    constraint_rows(model, prog, B)
    expr = (B * np.asarray(objective, dtype=float)).sum()
    if sense == "min":
        model.minimize(expr)
    else:
        model.maximize(expr)
    result = ctx.solve_model(model)
    values = result.values_by_block.get("bandwidth") if result.has_solution else None
    return result, None if values is None else np.asarray(values, dtype=float)


def max_bandwidths(ctx: RunContext, prog: Program, dims: Sequence[int]) -> dict[int, float]:
    """Largest feasible B_d (GB/s) for each listed dimension; inf when unbounded."""
    out: dict[int, float] = {}
    for k in dims:
        e = np.zeros(prog.num_dims)
        e[k] = 1.0
        result, b = optimize_linear(ctx, prog, e, "max", name=f"max-bandwidth-{prog.dims[k]}")
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
