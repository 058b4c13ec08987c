"""Name the constraints that make a bandwidth instance infeasible, and by how much.

Deletion filter (Chinneck & Dravnieks 1991) over the linear part of the instance: the
elements are the dimension bounds, the instance rows (total bandwidth, cost budget, user
rows) and, for every dimension that carries traffic, the requirement B_d > 0 (a used
dimension without bandwidth makes the training time infinite; checked as B_d >= 1e-6
bytes/s, the evaluator's resolution of a bandwidth: its tolerance on a bound is ``TOLERANCE``
of max(1 byte/s, the bound)). Before any LP, `starved` finds exactly (by signs, no
tolerance) a used dimension that a row or bound holds at 0, such as ``d0 <= 0``.
Starting from all elements, drop one at a time and keep it dropped when the rest is still
infeasible: what remains is an irreducible infeasible subset. An elastic LP on that
subset then gives, for each of its constraints, the smallest relaxation of that
constraint alone that restores feasibility ("by how much"). Each test is one small LP on the run's backend.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, NoSolutionError
from distplan.formulations.bandwidth.data import Program, Row, bandwidth_scale
from distplan.formulations.bandwidth.rows import BandwidthIndex, bandwidth_block, rows_block, scale_rows
from distplan.formulations.contract import ModelSpec
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model
from distplan.models.bandwidth_records import GB, TOLERANCE
from distplan.solvers.result import INFEASIBLE_TERMINATIONS, SolverResult, Termination


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
    eps = TOLERANCE / GB  # 1e-6 bytes/s in GB/s; was 1e-6 GB/s, above what a tiny budget allows
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


@dataclass(frozen=True)
class SubsetIndex(BandwidthIndex):
    """A subset of the elements as rows named ``e0, e1, ...`` over B >= 0 (GB/s), and the
    one that may be relaxed (``-1``: none)."""

    relaxed: int


def prepare_subset(prog: Program, params: Mapping[str, Any]) -> SubsetIndex:
    """``subset`` (a list of `Element`), ``relaxed`` (the position of the element allowed to move)."""
    # over x = B / sigma with small right-hand sides scaled up (`scale_rows`), as the
    # formulations' programs: unscaled, a cost budget of 1e-5 USD is below the LP's tolerance
    rows = scale_rows([replace(el.row, path=f"e{k}") for k, el in enumerate(params["subset"])], bandwidth_scale(prog))
    D = prog.num_dims
    return SubsetIndex(np.zeros(D), np.full(D, np.inf), rows, int(params.get("relaxed", -1)))


def no_objective(model: Model, prog: Program, index: SubsetIndex) -> None:
    """A feasibility problem: min 0."""
    model.minimize(0.0 * model["bandwidth"].sum())


def relaxed_rows(model: Model, prog: Program, index: SubsetIndex) -> None:
    """The subset's rows, the relaxed one with slacks both ways; min their sum (the row's unit)."""
    B = model["bandwidth"]
    slack = model.add_vars("relax", 2, lb=0.0)
    for k, r in enumerate(index.rows):
        expr = (B * r.coeffs).sum()
        if k == index.relaxed:
            expr = expr - slack[0] + slack[1]
        spec = expr <= r.rhs if r.sense == "<=" else (expr >= r.rhs if r.sense == ">=" else expr == r.rhs)
        model.add_constraints(r.path, spec)
    model.minimize(slack.sum())


#: is this subset of constraints feasible?
FEASIBILITY = ModelSpec("bandwidth-feasibility", prepare_subset, (bandwidth_block, rows_block, no_objective))
#: the least relaxation of one element that makes the subset feasible
RELAX_ONE = ModelSpec("bandwidth-relax-one", prepare_subset, (bandwidth_block, relaxed_rows))


def _infeasible(ctx: RunContext, prog: Program, subset: list[Element]) -> bool | None:
    model, _ = FEASIBILITY.build(prog, {"subset": subset})
    result = ctx.solve_model(model)
    if result.termination in INFEASIBLE_TERMINATIONS:
        return True
    if result.has_solution:
        return False
    return None


def _relaxation(ctx: RunContext, prog: Program, subset: list[Element], free: int) -> float | None:
    """Smallest amount (original units) by which element ``free`` alone must be relaxed."""
    model, _ = RELAX_ONE.build(prog, {"subset": subset, "relaxed": free})
    result = ctx.solve_model(model)
    if not result.has_solution or result.objective is None:
        return None
    return float(result.objective) * scale_rows([subset[free].row], bandwidth_scale(prog))[0].scale


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


def starved(prog: Program) -> list[tuple[int, str, str]]:
    """Used dimensions that the instance holds at bandwidth 0, proven by signs alone (B >= 0):
    (dimension, label, path) of the bound or row that does it: ``max_bandwidth <= 0``, a
    ``<=``/``==`` row of nonnegative coefficients with right-hand side <= 0 (``d0 <= 0``,
    a total of 0), or a ``>=``/``==`` row of nonpositive coefficients with right-hand side >= 0."""
    out: list[tuple[int, str, str]] = []
    for k in np.flatnonzero(prog.used):
        d = int(k)
        if prog.ub[d] <= 0:
            out.append((d, f"{prog.dims[d]} max_bandwidth {prog.ub[d]:g} GB/s", f"network.dimensions[{d}].max_bandwidth"))
            continue
        for r in prog.rows:
            a = r.coeffs
            if a[d] > 0 and r.sense in ("<=", "==") and np.all(a >= 0) and r.rhs <= 0:
                out.append((d, r.name, r.path))
                break
            if a[d] < 0 and r.sense in (">=", "==") and np.all(a <= 0) and r.rhs >= 0:
                out.append((d, r.name, r.path))
                break
    return out


def raise_if_starved(prog: Program, what: str) -> None:
    """Raise `InfeasibleError` (proven exactly) when a used dimension is held at bandwidth 0."""
    found = starved(prog)
    if not found:
        return
    parts = [f"{prog.dims[d]} carries traffic, so needs bandwidth > 0 [network.dimensions[{d}] (traffic)]; {label} [{path}]"
             for d, label, path in found]
    raise InfeasibleError(
        f"{prog.instance.name}: {what}: no bandwidth allocation satisfies these constraints together: " + "; and ".join(parts)
        + " (they allow no bandwidth > 0, by the signs of the coefficients alone)",
        details={"constraints": [c for d, label, path in found for c in
                                 ({"label": f"{prog.dims[d]} carries traffic, so needs bandwidth > 0", "path": f"network.dimensions[{d}] (traffic)"},
                                  {"label": label, "path": path})]},
    )


def raise_if_infeasible(ctx: RunContext, prog: Program, what: str) -> None:
    """Raise `InfeasibleError` naming the conflicting constraints, if the linear system has one."""
    raise_if_starved(prog, what)
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


def no_solution(ctx: RunContext, prog: Program, result: SolverResult, what: str) -> None:
    """After a failed solve: name the conflicting constraints, or report the solver failure."""
    # a used dimension forced to B = 0 makes cone solvers fail numerically rather than
    # report infeasibility, so solver errors are diagnosed too
    if result.termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED, Termination.NUMERICAL,
                              Termination.UNKNOWN, Termination.ERROR):
        raise_if_infeasible(ctx, prog, what)
    if result.termination is Termination.ERROR:
        raise NoSolutionError(f"{prog.instance.name}: {what}: backend {result.backend} failed: {result.message}")
