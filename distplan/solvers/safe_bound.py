"""Safe dual bounds of linear programs (valid in exact arithmetic).

Neumaier & Shcherbina, "Safe bounds in linear and mixed-integer linear programming",
Math. Programming 99 (2004): for ``min c@x`` over ``row_lo <= A x <= row_hi`` and
``col_lo <= x <= col_hi``, *any* row multipliers ``y`` give

    c@x = (c - A^T y)@x + y@(A x) >= sum_j min(z_j l_j, z_j u_j) + sum_i min(y_i rl_i, y_i rh_i),

with ``z = c - A^T y``: weak duality needs no optimality and no dual feasibility, only the
finite bounds where a reduced cost points (an infinite bound there gives no bound). The
solver's dual point makes it tight; the floating-point error of computing ``z`` and the sums
is bounded a priori (Higham, *Accuracy and Stability of Numerical Algorithms*, 2002, eq.
3.4: ``|fl(sum) - sum| <= gamma_n sum |terms|``, ``gamma_n = n u / (1 - n u)``) and
subtracted, so the bound holds for the arrays exactly as given.
"""

from __future__ import annotations

import math

import numpy as np

from distplan.modeling.model import ModelArrays

_U = 2.0**-53  # unit roundoff of binary64


def _gamma(n: int) -> float:
    nu = (n + 2) * _U
    return nu / (1.0 - nu)


def _box_min(coef: np.ndarray, err: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple[float, float] | None:
    """min over x in [lo, hi] of a x for every a in [coef - err, coef + err], summed: the
    sum and a bound on its own rounding error; None when a side that the interval can point
    to is infinite."""
    up = coef + err  # upper end of each coefficient interval
    down = coef - err
    # a x over the box and the coefficient interval is smallest at a vertex: candidates
    # (down, lo), (down, hi), (up, lo), (up, hi); infinite bounds matter only if their
    # coefficient can have the sign that makes the term -inf
    need_lo = up > 0  # some coefficient in the interval is positive: x = lo is a candidate minimizer
    need_hi = down < 0
    if np.any(need_lo & ~np.isfinite(lo)) or np.any(need_hi & ~np.isfinite(hi)):
        return None
    with np.errstate(invalid="ignore"):
        cands = np.full((4, coef.size), np.inf)
        lo_f = np.where(np.isfinite(lo), lo, 0.0)
        hi_f = np.where(np.isfinite(hi), hi, 0.0)
        cands[0] = np.where(need_lo, down * lo_f, np.inf)
        cands[1] = np.where(need_lo, up * lo_f, np.inf)
        cands[2] = np.where(need_hi, down * hi_f, np.inf)
        cands[3] = np.where(need_hi, up * hi_f, np.inf)
        zero_ok = ~need_lo & ~need_hi  # coefficient interval is {0}
        term = np.where(zero_ok, 0.0, cands.min(axis=0))
        # a coefficient interval containing 0 with only one side finite: the other side's
        # candidate is inf, but a = 0 gives 0; keep the finite minimum with 0 as candidate
        straddles = need_lo & need_hi
        term = np.where(straddles, np.minimum(term, 0.0), term)
    if not np.all(np.isfinite(term)):
        return None
    total = math.fsum(term.tolist())  # correctly rounded sum: error <= u |total|
    return total, _U * abs(total) + _gamma(2) * float(np.abs(term).sum())


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``p + e == a * b`` exactly, elementwise (Dekker's product with Veltkamp's split;
    no overflow or underflow at the magnitudes of a model's coefficients and duals)."""
    split = 134217729.0  # 2**27 + 1
    p = a * b
    ta = split * a
    a_hi = ta - (ta - a)
    a_lo = a - a_hi
    tb = split * b
    b_hi = tb - (tb - b)
    b_lo = b - b_hi
    e = ((a_hi * b_hi - p) + a_hi * b_lo + a_lo * b_hi) + a_lo * b_lo
    return p, e


def _exact_where_rounding_decides(arrays: ModelArrays, c: np.ndarray, y: np.ndarray, z: np.ndarray, z_err: np.ndarray) -> None:
    """Columns with an infinite bound whose reduced cost is zero within its rounding error
    (basic variables): the interval would reach the infinite side and give no bound, so
    their reduced cost is recomputed exactly rounded (each product split exactly into two
    floats, the column summed by ``math.fsum``, which rounds the exact sum once: its sign is
    exact and its error at most half an ulp) and its error set to that half ulp. Where the
    exact value still points to the infinite side, the column keeps its interval: no bound."""
    lo_inf = ~np.isfinite(arrays.col_lo)
    hi_inf = ~np.isfinite(arrays.col_hi)
    undecided = np.flatnonzero((np.abs(z) <= z_err) & (lo_inf | hi_inf))
    if undecided.size == 0:
        return
    A = arrays.A.tocsc()[:, undecided]
    p, e = _two_product(A.data, y[A.indices])
    for k, j in enumerate(undecided.tolist()):
        start, end = A.indptr[k], A.indptr[k + 1]
        exact = math.fsum([float(c[j]), *(-p[start:end]).tolist(), *(-e[start:end]).tolist()])
        if (exact > 0 and lo_inf[j]) or (exact < 0 and hi_inf[j]):
            continue  # truly pointing to the infinite side: stays undecided, no bound
        z[j] = exact
        z_err[j] = _U * abs(exact)


def lp_safe_bound(arrays: ModelArrays, row_dual: np.ndarray) -> float | None:
    """A lower bound (upper bound for ``sense == "max"``) on the LP optimum of ``arrays``
    (integrality ignored), valid in exact arithmetic, from any row multipliers ``row_dual``
    of the minimization ``min sign * c @ x`` that backends hand solvers (``sign = -1`` for a
    maximization); None when an infinite bound makes the Lagrangian unbounded."""
    sign = -1.0 if arrays.sense == "max" else 1.0
    c = sign * np.asarray(arrays.c, dtype=float)
    y = np.asarray(row_dual, dtype=float)
    if y.shape != (arrays.num_rows,) or not np.all(np.isfinite(y)):
        return None
    A = arrays.A.tocsc() if arrays.num_rows else None
    if A is not None and A.nnz:
        aty = A.T @ y
        abs_aty = abs(A).T @ np.abs(y)
        per_col = np.diff(A.indptr)
        gam = np.array([_gamma(int(k) + 1) for k in per_col]) if per_col.size else np.zeros(0)
        z_err = gam * (np.abs(c) + abs_aty)
    else:
        aty = np.zeros_like(c)
        z_err = np.zeros_like(c)
    z = c - aty
    z_err = z_err + _U * np.abs(z)
    _exact_where_rounding_decides(arrays, c, y, z, z_err)
    cols = _box_min(z, z_err, arrays.col_lo, arrays.col_hi)
    rows = _box_min(y, np.zeros_like(y), arrays.row_lo, arrays.row_hi) if arrays.num_rows else (0.0, 0.0)
    if cols is None or rows is None:
        return None
    value = cols[0] + rows[0]
    error = cols[1] + rows[1] + _U * abs(value) * 2
    safe_min = math.nextafter(value - error, -math.inf)
    offset = float(arrays.offset)
    bound = sign * safe_min + offset
    slack = _U * (abs(bound) + abs(offset)) * 2
    return math.nextafter(bound - sign * slack, -sign * math.inf)
