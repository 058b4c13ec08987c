"""Name the constraints that make a bandwidth instance infeasible, and by how much.

Deletion filter (Chinneck & Dravnieks 1991) over the linear part of the instance: the
elements are the dimension bounds, the instance rows (total bandwidth, cost budget, user
rows) and, for every dimension that carries traffic, the requirement B_d > 0 (a used
dimension without bandwidth makes the training time infinite; checked as B_d >= eps).
Starting from all elements, drop one at a time and keep it dropped when the rest is still
infeasible: what remains is an irreducible infeasible subset. An elastic LP on that
subset then gives, for each of its constraints, the smallest relaxation of that
constraint alone that restores feasibility ("by how much"). Each test is one small LP on the run's backend.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from distplan.errors import InfeasibleError
from distplan.formulations.bandwidth.data import Program, Row
from distplan.formulations.bandwidth.rows import row_block
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model
from distplan.solvers.result import Termination


@dataclass(frozen=True)
class Element:
    """One constraint of the linear system, as a row over B (GB/s)."""

    label: str
    path: str
    row: Row


def elements(prog: Program) -> list[Element]:
    """Every constraint that can take part in a conflict, as rows."""
    out: list[Element] = []
    D = prog.num_dims
    scale = max([1.0] + [abs(r.rhs) for r in prog.rows] + [float(v) for v in prog.ub if np.isfinite(v)] + list(prog.lb))
    eps = 1e-6 * scale
    for k, name in enumerate(prog.dims):
        e = np.zeros(D)
        e[k] = 1.0
        path = f"network.dimensions[{k}]"
        if prog.lb[k] > 0:
            out.append(Element(f"{name} min_bandwidth {prog.lb[k]:g} GB/s", f"{path}.min_bandwidth", Row(f"{name} min", e, ">=", float(prog.lb[k]), f"{path}.min_bandwidth")))
        if np.isfinite(prog.ub[k]):
            out.append(Element(f"{name} max_bandwidth {prog.ub[k]:g} GB/s", f"{path}.max_bandwidth", Row(f"{name} max", e, "<=", float(prog.ub[k]), f"{path}.max_bandwidth")))
        if prog.used[k]:
            out.append(Element(f"{name} carries traffic, so needs bandwidth > 0", f"{path} (traffic)", Row(f"{name} > 0", e, ">=", eps, f"{path}")))
    for row in prog.rows:
        label = row.name if row.path.startswith("constraints.linear") else row.name
        out.append(Element(label, row.path, row))
    return out


def _model(prog: Program, subset: list[Element]) -> Model:
    model = Model("bandwidth-feasibility")
    B = model.add_vars("bandwidth", prog.num_dims, lb=0.0)
    for k, el in enumerate(subset):
        row_block(model, B, el.row, name=f"e{k}")
    model.minimize(0.0 * B.sum())
    return model


def _infeasible(ctx: RunContext, prog: Program, subset: list[Element]) -> bool | None:
    result = ctx.solve_model(_model(prog, subset))
    if result.termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED):
        return True
    if result.has_solution:
        return False
    return None


def _relaxation(ctx: RunContext, prog: Program, subset: list[Element], free: int) -> float | None:
    """Smallest amount (original units) by which element ``free`` alone must be relaxed."""
    model = Model("bandwidth-relax-one")
    B = model.add_vars("bandwidth", prog.num_dims, lb=0.0)
    slack = model.add_vars("relax", 2, lb=0.0)
    for k, el in enumerate(subset):
        r = el.row
        expr = (B * r.coeffs).sum()
        if k == free:
            expr = expr - slack[0] + slack[1]
        spec = expr <= r.rhs if r.sense == "<=" else (expr >= r.rhs if r.sense == ">=" else expr == r.rhs)
        model.add_constraints(f"e{k}", spec)
    model.minimize(slack.sum())
    result = ctx.solve_model(model)
    if not result.has_solution or result.objective is None:
        return None
    return float(result.objective) * subset[free].row.scale


def find_conflict(ctx: RunContext, prog: Program) -> tuple[list[Element], list[tuple[Element, float]]] | None:
    """An irreducible infeasible subset, and for each of its elements the smallest relaxation
    of that element alone that restores feasibility (original units; absent when relaxing it
    alone cannot help), or None when the linear system is feasible."""
    current = elements(prog)
    if _infeasible(ctx, prog, current) is not True:
        return None
    k = 0
    while k < len(current):
        trial = current[:k] + current[k + 1 :]
        if _infeasible(ctx, prog, trial) is True:
            current = trial
        else:
            k += 1
    relax: list[tuple[Element, float]] = []
    for k, el in enumerate(current):
        amount = _relaxation(ctx, prog, current, k)
        if amount is not None and amount > 0:
            relax.append((el, amount))
    return current, relax


def raise_if_infeasible(ctx: RunContext, prog: Program, what: str) -> None:
    """Raise `InfeasibleError` naming the conflicting constraints, if the linear system has one."""
    found = find_conflict(ctx, prog)
    if found is None:
        return
    subset, relax = found
    names = "; ".join(f"{el.label} [{el.path}]" for el in subset)
    how = "; or ".join(f"{el.label} by {amount:.6g} {el.row.unit}" for el, amount in relax)
    msg = f"{prog.instance.name}: {what}: no bandwidth allocation satisfies these constraints together: {names}"
    if how:
        msg += f". Any one of these relaxations fixes it: {how}"
    raise InfeasibleError(
        msg,
        details={
            "constraints": [{"label": el.label, "path": el.path} for el in subset],
            "relaxation": [{"label": el.label, "path": el.path, "amount": amount, "unit": el.row.unit} for el, amount in relax],
        },
    )
