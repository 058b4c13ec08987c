"""The vectorized modeling core: expressions, blocks, assembly, export."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from distplan.modeling.export import write_model
from distplan.modeling.model import LinExpr, Model, ModelError, concat, linear_sum
from distplan.solvers.base import get_backend


def test_expression_arithmetic_and_broadcasting() -> None:
    m = Model()
    x = m.add_vars("x", (2, 3))
    e = 2 * x + np.arange(3) - 1
    assert e.shape == (2, 3)
    assert np.allclose(e.const, np.tile(np.arange(3) - 1, 2))
    assert np.allclose(e.A.toarray(), 2 * np.eye(6))
    s0 = x.sum(axis=0)
    assert s0.shape == (3,)
    assert np.allclose(s0.A.toarray(), np.hstack([np.eye(3), np.eye(3)]))
    s1 = x.sum(axis=1)
    assert np.allclose(s1.A.toarray(), np.kron(np.eye(2), np.ones(3)))
    tot = x.sum()
    assert tot.shape == () and tot.A.sum() == 6
    g = x.expr().reshape(6).group_sum(np.array([0, 1, 0, 1, 0, 1]), 2)
    assert np.allclose(g.A.toarray(), [[1, 0, 1, 0, 1, 0], [0, 1, 0, 1, 0, 1]])
    idx = x[np.array([1, 0]), np.array([2, 2])]
    assert idx.shape == (2,)
    assert list(idx.index) == [5, 2]
    with pytest.raises(ModelError):
        _ = x * x


def test_ndarray_on_the_left_defers_to_expressions() -> None:
    m = Model()
    x = m.add_vars("x", 3)
    e = np.array([1.0, 2.0, 3.0]) * x
    assert isinstance(e, LinExpr)
    assert np.allclose(e.A.diagonal(), [1, 2, 3])
    c = np.zeros(3) <= x  # becomes x >= 0
    assert np.all(c.lo == 0)


def test_variables_added_after_an_expression_extend_it() -> None:
    m = Model()
    x = m.add_vars("x", 2)
    e = x.sum()
    y = m.add_vars("y", 2)
    f = e + y.sum()
    assert f.A.shape[1] == 4
    m.add_constraints("c", f <= 3)
    arrays = m.to_arrays()
    assert arrays.A.shape == (1, 4)


def test_duplicate_names_and_bad_bounds_are_errors() -> None:
    m = Model()
    m.add_vars("x", 2)
    with pytest.raises(ModelError, match="already exists"):
        m.add_vars("x", 2)
    with pytest.raises(ModelError, match="lb > ub"):
        m.add_vars("y", 2, lb=3, ub=1)


def test_assembled_arrays_and_stats() -> None:
    m = Model("lp")
    x = m.add_vars("x", 3, lb=0, ub=[1, 2, np.inf])
    b = m.add_vars("b", 2, vtype="binary")
    m.add_constraints("cap", x.sum() + b.sum() <= 4)
    m.add_constraints("link", x[:2] - b >= 0)
    m.minimize(-x.sum() + 0.5 * b.sum() + 7)
    a = m.to_arrays()
    assert a.num_vars == 5 and a.num_rows == 3
    assert a.offset == 7
    assert list(a.integrality) == [0, 0, 0, 1, 1]
    assert np.allclose(a.c, [-1, -1, -1, 0.5, 0.5])
    st = m.stats()
    assert st["binaries"] == 2 and st["rows"] == 3 and st["nonzeros"] == 9
    assert st["constraint_blocks"]["link"]["rows"] == 2
    res = get_backend("highs").solve(a)
    assert res.objective == pytest.approx(-4 + 7)


def test_triplets_and_concat() -> None:
    m = Model()
    x = m.add_vars("x", 4)
    e = linear_sum(cols=np.array([0, 1, 3]), coeffs=np.array([1.0, 2.0, 3.0]), rows=np.array([0, 0, 1]), nrows=2, ncols=m.num_vars)
    assert np.allclose(e.A.toarray(), [[1, 2, 0, 0], [0, 0, 0, 3]])
    c = concat([x[:2], e])
    assert c.shape == (4,)
    assert sp.issparse(c.A)


def test_infeasible_by_construction_is_reported_with_the_block() -> None:
    m = Model()
    x = m.add_vars("x", 2)
    with pytest.raises(ModelError, match="block 'bad' row 0"):
        m.add_constraints("bad", 0 * x.sum() >= 1)


def test_export_mps_and_lp_solve_to_the_same_optimum(tmp_path) -> None:  # type: ignore[no-untyped-def]
    highspy = pytest.importorskip("highspy")
    m = Model("knap")
    v, w = np.array([10, 13, 7, 8.0]), np.array([5, 6, 4, 3.0])
    x = m.add_vars("x", 4, vtype="binary")
    y = m.add_vars("y", 1, lb=-2, ub=5)
    m.add_constraints("cap", (w * x).sum() + y.sum() <= 10)
    m.add_constraints("range", y.sum() + x[0].expr().sum() >= -1)
    m.maximize((v * x).sum() - y.sum() + 1)
    direct = get_backend("highs").solve(m.to_arrays()).objective
    for suffix in ("mps", "lp"):
        path = tmp_path / f"m.{suffix}"
        write_model(m.to_arrays(), str(path))
        h = highspy.Highs()
        h.setOptionValue("output_flag", False)
        h.readModel(str(path))
        h.run()
        val = h.getInfo().objective_function_value
        assert val == pytest.approx(direct), suffix
