"""Safe LP bounds (Neumaier-Shcherbina): valid in exact arithmetic for any multipliers, and
tight at the solver's dual point (issue 15)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.modeling.model import Model, ModelArrays
from distplan.solvers.base import SolveOptions, get_backend
from distplan.solvers.safe_bound import lp_safe_bound


def _lp(seed: int, n: int, m: int, sense: str) -> tuple[ModelArrays, np.ndarray]:
    """A random LP with ranged rows built around a known feasible point x0."""
    rng = np.random.default_rng(seed)
    x0 = rng.uniform(-3, 3, n)
    dense = rng.normal(size=(m, n)) * (rng.random((m, n)) < 0.6)
    ax0 = dense @ x0
    row_lo = np.where(rng.random(m) < 0.3, -np.inf, ax0 - rng.uniform(0, 2, m))
    row_hi = np.where(rng.random(m) < 0.3, np.inf, ax0 + rng.uniform(0, 2, m))
    col_lo = x0 - rng.uniform(0, 5, n)
    col_hi = x0 + rng.uniform(0, 5, n)
    arrays = ModelArrays(
        name="random-lp",
        c=rng.normal(size=n) * 10 ** rng.uniform(-3, 3),
        offset=float(rng.normal()),
        A=sp.csr_matrix(dense),
        row_lo=row_lo,
        row_hi=row_hi,
        col_lo=col_lo,
        col_hi=col_hi,
        integrality=np.zeros(n, dtype=np.int8),
        sense=sense,
        var_blocks=[("x", n, False)],
        con_blocks=[("r", m)],
    )
    return arrays, x0


def _exact_objective(arrays: ModelArrays, x: np.ndarray) -> Fraction:
    return sum((Fraction(float(c)) * Fraction(float(v)) for c, v in zip(arrays.c, x)), Fraction(float(arrays.offset)))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8), m=st.integers(1, 6), sense=st.sampled_from(["min", "max"]), scale=st.floats(0, 1e3))
def test_any_multipliers_give_a_valid_bound(seed: int, n: int, m: int, sense: str, scale: float) -> None:
    """Whatever the multipliers, the bound never passes the objective of a feasible point,
    compared in exact rational arithmetic."""
    arrays, x0 = _lp(seed, n, m, sense)
    y = np.random.default_rng(seed + 1).normal(size=m) * scale
    bound = lp_safe_bound(arrays, y)  # multipliers of min sign * c @ x
    if bound is None:
        return
    value = _exact_objective(arrays, x0)
    assert (Fraction(bound) <= value) if sense == "min" else (Fraction(bound) >= value)


@pytest.mark.parametrize("sense", ["min", "max"])
@pytest.mark.parametrize("seed", range(8))
def test_highs_lp_bound_is_safe_and_tight(seed: int, sense: str) -> None:
    arrays, x0 = _lp(seed, 12, 8, sense)
    res = get_backend("highs").solve(arrays, SolveOptions())
    assert res.objective is not None and res.bound is not None
    assert res.bound_grade == "safe"
    exact = _exact_objective(arrays, x0)
    assert (Fraction(res.bound) <= exact) if sense == "min" else (Fraction(res.bound) >= exact)
    assert abs(res.objective - res.bound) <= 1e-6 * max(1.0, abs(res.objective))


def test_a_free_variable_with_a_nonzero_reduced_cost_gives_no_bound() -> None:
    m = Model("free")
    x = m.add_vars("x", 1, lb=-np.inf, ub=np.inf)
    m.add_constraints("r", x.expr() >= 1.0)
    m.minimize(x.sum())
    arrays = m.to_arrays()
    assert lp_safe_bound(arrays, np.array([1.0])) == pytest.approx(1.0)
    assert lp_safe_bound(arrays, np.array([0.5])) is None  # reduced cost 0.5 on a free column
