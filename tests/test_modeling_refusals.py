"""The modeling layer refuses what a solver would read otherwise than it is written (review
rev30, the extension API): NaN or infinite coefficients and sides, magnitudes of 1e20 and
more (solvers read them as infinite and drop the row), variables of another model, bounds
`add_vars` refuses given through `set_bounds`, values for a block the model lacks. Before,
each case solved to a wrong "optimal", or hung HiGHS past its limit (a NaN cost). Exported
files map every name back one to one (two block names that sanitize to one name merged
two columns)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distplan.modeling.export import write_model
from distplan.modeling.model import HUGE, InfeasibleByConstruction, Model, ModelError, Variable
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions
from tests.conftest import backend_params, takes_lp

ROWS: dict[str, tuple[Callable[[Variable], Any], type[ModelError], str]] = {
    "y >= inf": (lambda y: y[0] >= np.inf, InfeasibleByConstruction, "infeasible by construction"),
    "y <= -inf": (lambda y: y[0] <= -np.inf, InfeasibleByConstruction, "infeasible by construction"),
    "y <= nan": (lambda y: y[0] <= np.nan, ModelError, "NaN side"),
    "inf * y <= 5": (lambda y: np.inf * y[0] <= 5, ModelError, "coefficient inf"),
    "nan * y <= 5": (lambda y: np.nan * y[0] <= 5, ModelError, "coefficient nan"),
    "y >= 1e20": (lambda y: y[0] >= 1e20, ModelError, "dropping the row"),
    "-y <= -1e21": (lambda y: -y[0] <= -1e21, ModelError, "dropping the row"),
    "1e20 * y <= 1e20": (lambda y: y[0] * 1e20 <= 1e20, ModelError, "coefficient 1e+20"),
    "1e15 * y <= 3e15": (lambda y: y[0] * 1e15 <= 3e15, ModelError, "coefficient 1e+15"),  # (HiGHS ignored it)
}


@pytest.mark.parametrize("case", list(ROWS))
def test_a_row_a_solver_would_misread_is_refused(case: str) -> None:
    row, error, said = ROWS[case]
    m = Model("m")
    y = m.add_vars("y", 1, 0, 4)
    with pytest.raises(error, match="constraint block 'c' row 0") as info, np.errstate(invalid="ignore"):  # (inf x 0 constants)
        m.add_constraints("c", row(y))
    assert said in str(info.value)


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_rows_at_the_edge_of_what_solvers_read_keep_their_meaning(backend: str) -> None:
    """Kept: a side of +-inf in the row's open direction, a side past 1e20 there (a budget
    that never binds, as sharding's unlimited memory row: written as open, which cvxpy's
    solvers failed on as 1e300) and a side below 1e20; every backend solves them to the
    optimum as written (HiGHS, a coefficient just below 1e15 too: first-order and conic
    solvers are not accurate on such a row)."""
    m = Model("edge")
    y = m.add_vars("y", 2, 0, 4)
    m.add_constraints("open", y[0] <= np.inf)
    m.add_constraints("budget", y.sum() <= 1e300)
    m.add_constraints("far", y[0] >= (-1e19 if backend == "highs" else -1e6))  # (Clarabel ends in error on 1e19)
    m.add_constraints("big", y[1] * (1e14 if backend == "highs" else 10.0) <= (3e14 if backend == "highs" else 30.0))
    m.maximize(y.sum())
    res = get_backend(backend).solve(m.to_arrays(), SolveOptions(time_limit=20))
    assert res.objective == pytest.approx(7.0, rel=1e-4)


@pytest.mark.parametrize("objective", ["nan", "inf", "huge", "constant"])
def test_an_objective_a_solver_would_misread_is_refused(objective: str) -> None:
    m = Model("m")
    y = m.add_vars("y", 2, 0, 4)
    with np.errstate(invalid="ignore"):  # (inf x 0 constants)
        expr = {"nan": np.nan * y.sum(), "inf": np.inf * y[0] + y[1], "huge": HUGE * y[0], "constant": y.sum() + np.inf}[objective]
    with pytest.raises(ModelError, match="the objective"):
        m.minimize(expr)


def test_variables_of_another_model_are_refused() -> None:
    a, b = Model("A"), Model("B")
    xa = a.add_vars("xa", 5, 0, 1)
    y = b.add_vars("y", 1, 0, 10)
    with pytest.raises(ModelError, match="mixes variables of model 'B' and model 'A'"):
        _ = y[0] + xa[4]
    with pytest.raises(ModelError, match="holds variables of model 'A'"):
        b.add_constraints("c", xa[4] <= 3)
    with pytest.raises(ModelError, match="holds variables of model 'A'"):
        b.maximize(xa.sum())
    with pytest.raises(ModelError, match="holds variables of model 'A'"):
        b.define("e", xa.sum())
    with pytest.raises(ModelError, match="belongs to model 'A'"):
        b.set_bounds(xa, ub=0.5)


def test_an_expression_of_columns_beyond_the_model_is_refused() -> None:
    """An expression from column numbers (`linear_sum`) carries no model: its columns are
    held to the model's count."""
    from distplan.modeling.model import linear_sum

    m = Model("m")
    m.add_vars("y", 2)
    with pytest.raises(ModelError, match="refers to column 4, but the model has 2 variables"):
        m.add_constraints("c", linear_sum(np.array([4]), np.array([1.0]), np.array([0]), 1, 5) <= 1)


@pytest.mark.parametrize(
    ("how", "said"),
    [
        (lambda m, x: m.set_bounds(x, lb=5, ub=1), "lb > ub"),
        (lambda m, x: m.set_bounds(x, lb=np.nan), "NaN"),
        (lambda m, x: m.set_bounds(x, lb=np.inf, ub=np.inf), "no value"),
        (lambda m, x: m.set_bounds(m["z"], ub=3), "within \\[0, 1\\]"),
        (lambda m, x: m.add_vars("w", 1, np.inf, np.inf), "no value"),
        (lambda m, x: m.add_vars("", 1), "non-empty name"),
        (lambda m, x: m.vector({"nosuch": 1.0}), "no variable block 'nosuch'"),
    ],
)
def test_bounds_names_and_values_add_vars_refuses_are_refused_everywhere(how: Callable[[Model, Variable], Any], said: str) -> None:
    m = Model("m")
    x = m.add_vars("x", 2, 0, 10)
    m.add_vars("z", 2, vtype="binary")
    with pytest.raises(ModelError, match=said):
        how(m, x)


def test_set_bounds_still_tightens_a_slice() -> None:
    m = Model("m")
    x = m.add_vars("x", 3, 0, 10)
    m.set_bounds(x[1], lb=2, ub=3)
    lo, hi = m.col_bounds()
    assert lo.tolist() == [0, 2, 0] and hi.tolist() == [10, 3, 10]


@pytest.mark.parametrize("suffix", [".lp", ".mps"])
@pytest.mark.parametrize(
    ("blocks", "optimum"),
    [
        ((("x", 2, 1.0), ("x_1", (), 5.0)), 7.0),  # x[1] and x_1 are one LP name
        ((("a-b", (), 1.0), ("a_b", (), 5.0)), 6.0),  # a-b and a_b are one safe name
        ((("2x", (), 1.0), ("y", (), 2.0)), 3.0),  # a digit first is no LP name
    ],
)
def test_exported_names_map_back_one_to_one(tmp_path: Path, suffix: str, blocks: tuple[tuple[str, Any, float], ...], optimum: float) -> None:
    highspy = pytest.importorskip("highspy")
    m = Model("names")
    total = None
    for name, shape, ub in blocks:
        v = m.add_vars(name, shape, 0, ub)
        total = v.sum() if total is None else total + v.sum()
    m.add_constraints("c_lo", total <= 100)
    m.add_constraints("c", (0.0 + total) >= -1)  # (an LP writes it as c_lo: the rows are renamed)
    m.maximize(total)
    path = tmp_path / f"m{suffix}"
    write_model(m.to_arrays(), str(path))
    h = highspy.Highs()
    h.silent()
    h.readModel(str(path))
    h.run()
    assert h.getLp().num_col_ == m.num_vars
    assert h.getInfo().objective_function_value == pytest.approx(optimum)
