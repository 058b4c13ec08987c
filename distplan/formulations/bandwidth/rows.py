"""The bandwidth vector B (GB/s) and the instance's rows over it, as named model blocks.

Each instance constraint is its own block named by its JSON path
(``constraints.linear[2]``), so solver rows map back to the user's constraints.
"""

from __future__ import annotations

from collections.abc import Sequence

from distplan.formulations.bandwidth.data import Program, Row
from distplan.modeling.model import Model, Variable


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

