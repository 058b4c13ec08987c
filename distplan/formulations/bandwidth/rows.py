"""The bandwidth vector B and the instance's rows over it, as named model blocks.

Every bandwidth program (the small LPs, LIBRA's tangent-cut LP, the menu MILP, the
feasibility tests) is declared by the block contract (`distplan.formulations.contract`) on
a `Program`; its index derives from `BandwidthIndex`: the dimension bounds and the rows in
the program's bandwidth unit (GB/s, or GB/s / sigma when scaled). Each instance constraint
is its own block named by its JSON path (``constraints.linear[2]``), so solver rows map
back to the user's constraints.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from distplan.formulations.bandwidth.data import Program, Row
from distplan.modeling.model import Model, Variable, linear_sum


@dataclass(frozen=True)
class BandwidthIndex:
    """What the blocks of every bandwidth program share: bounds of B (``lb``, ``ub``, in the
    program's bandwidth unit) and the rows over B, each added as a block named ``row.path``."""

    lb: np.ndarray
    ub: np.ndarray
    rows: tuple[Row, ...]


def bandwidth_block(model: Model, prog: Program, index: BandwidthIndex) -> None:
    """B_d within the index's bounds: the variable block ``bandwidth``."""
    model.add_vars("bandwidth", prog.num_dims, lb=index.lb, ub=index.ub)


def rows_block(model: Model, prog: Program, index: BandwidthIndex) -> None:
    """The index's rows over ``bandwidth``, one named block each."""
    constraint_rows(model, prog, model["bandwidth"], index.rows)


def row_block(model: Model, B: Variable, row: Row, name: str | None = None) -> None:
    """One row ``coeffs @ B sense rhs`` as a named block (built from its nonzeros directly:
    the expression algebra cost ~0.7 ms a row, more than HiGHS's solve of the small LPs)."""
    nz = np.flatnonzero(row.coeffs)
    cols = B.index.reshape(-1)[nz]
    expr = linear_sum(cols, row.coeffs[nz], np.zeros(nz.size, dtype=np.int64), 1, B.model.num_vars)
    spec = expr <= row.rhs if row.sense == "<=" else (expr >= row.rhs if row.sense == ">=" else expr == row.rhs)
    model.add_constraints(name or row.path, spec)


def constraint_rows(model: Model, prog: Program, B: Variable, rows: Sequence[Row] | None = None) -> None:
    """The instance's rows (total bandwidth, cost budget, user rows), one block each."""
    for row in prog.rows if rows is None else rows:
        row_block(model, B, row)


def solver_rows(prog: Program, sigma: float) -> tuple[Row, ...]:
    """The instance's rows over x = B / ``sigma`` as a solver should see them: a row whose
    right-hand side is small next to its coefficients (a cost budget that allows one
    dimension 1e-8 of the others' bandwidth) is divided by that right-hand side, so the
    solver's absolute feasibility tolerance (~1e-7) is relative to it, as the evaluator's
    tolerance (``TOLERANCE`` of the row's magnitude) is; rows with a right-hand side 0 or
    >= 1 keep max |coeff| = 1."""
    return scale_rows(prog.rows, sigma)


def scale_rows(rows: Sequence[Row], sigma: float) -> tuple[Row, ...]:
    """`solver_rows` of any rows over B (GB/s): over x = B / ``sigma``, divided by a small
    right-hand side; each row's ``scale`` is then the factor back to the original row."""
    out: list[Row] = []
    for r in rows:
        rhs = r.rhs / sigma
        f = 1.0
        if 0 < abs(rhs) < 1:
            f = min(1.0 / abs(rhs), 1e12)
        out.append(replace(r, coeffs=r.coeffs * f, rhs=rhs * f, scale=r.scale * sigma / f))
    return tuple(out)
