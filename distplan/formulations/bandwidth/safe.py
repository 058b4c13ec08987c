"""Lower bounds on LIBRA's training time that hold in exact arithmetic (Lagrangian duality).

The time program (LIBRA, Won et al., ISPASS 2024; units GB, GB/s, seconds) is

    T* = C + min_B  sum_k w_k max_d u_kd / B_d   s.t.  rows a_i B (<=, ==, >=) b_i,  lb <= B <= ub.

For any multipliers lambda_kd >= 0 with sum_d lambda_kd = w_k (a convex combination is at most
the max) and mu_i of the right sign (>= 0 on <= rows, <= 0 on >= rows, free on == rows), weak
duality gives, for every feasible B,

    T(B) >= C + sum_d (a_d / B_d + c_d B_d) - mu @ b,   a_d = sum_k lambda_kd u_kd,  c = A^T mu,

and the right side is separable over the box, so its minimum is in closed form per dimension:
``2 sqrt(a_d c_d)`` at ``B_d = sqrt(a_d / c_d)`` clipped to [lb_d, ub_d], or at a bound. That
minimum is a lower bound on T* whatever the multipliers: no solver tolerance enters it. It is
evaluated in floating point with a proven bound on its rounding error (`_dual_value`), far
below the margin subtracted. The
multipliers come from the KKT conditions at a (near-)optimal allocation, fitted by bounded
least squares, so the bound is tight when the allocation is; a poor allocation gives a weaker
bound, never a wrong one.

The bound holds for every plan the evaluator accepts, not only the exactly feasible ones: the
evaluator (`distplan.models.bandwidth_eval`) accepts a row violated by up to ``TOLERANCE``
(1e-6) of its magnitude and a dimension up to that far outside its range, and a solver's plan
(1e-8 over a total of 500 GB/s, say) can take some of it. So the box is widened to what the
evaluator accepts (`accepted_box`), and each row's multiplier is charged for the most the row
may be exceeded (`accepted_excess`): ``-mu_i b_i`` becomes ``-mu_i b_i - |mu_i| e_i``.

The aggregated program (`data.prepare`) is derived from the instance in floating point, and
the evaluator (`distplan.models.bandwidth_eval`) computes T(B) in floating point too; both differ
from exact arithmetic by a few units in the last place. The bound is lowered by
``DATA_MARGIN`` (relative to the magnitudes summed) to cover that, then rounded down to a float.

With an extra budget row ``cost @ B <= beta`` (``libra_perf_per_cost``), the Lagrangian is
affine in beta: ``T*(beta) >= G - nu beta`` for every budget at once (nu >= 0 the budget's
multiplier). `budget_line` returns (G, nu) rounded outward (G down, nu up).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np
from scipy.optimize import lsq_linear

from distplan.formulations.bandwidth.data import Program, Row, prepare
from distplan.formulations.registry import Unchecked
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_records import GB, TOLERANCE

#: relative margin for the floating-point derivation of the program and the evaluator's rounding
DATA_MARGIN = 1e-12
#: relative slack under which a term's dimension, a row or a bound counts as active (wide:
#: a multiplier on an inactive one is fitted to ~0, a missed active one loosens the bound)
ACTIVE = 1e-4


def _rows(prog: Program, extra: tuple[np.ndarray, float] | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(A, b, sign): rows as a_i B ? b_i with sign +1 (<=), -1 (>=), 0 (==) (cached on ``prog``)."""
    cached = getattr(prog, "_safe_rows", None)
    if cached is None:
        A, lo, hi = prog.rows_matrix()
        sign = np.where(lo == hi, 0, np.where(np.isfinite(hi), 1, -1))
        cached = (A.reshape(-1, prog.num_dims), np.where(sign == -1, lo, hi).astype(float), sign.astype(int))
        prog._safe_rows = cached  # type: ignore[attr-defined]
    A, b, sign = cached
    if extra is not None:
        A = np.vstack([A, extra[0][None, :]]) if A.size else extra[0][None, :]
        b = np.append(b, extra[1])
        sign = np.append(sign, 1)
    return A.reshape(-1, prog.num_dims), b.astype(float), sign.astype(int)


def _active(prog: Program, A: np.ndarray, b: np.ndarray, sign: np.ndarray, B: np.ndarray) -> tuple[list[int], list[int], list[int]]:
    """At the allocation ``B`` (bytes/s per dimension): the rows that hold with equality (or
    are equalities), the dimensions at their lower bound, and those at their upper bound,
    each within the relative tolerance ``ACTIVE``."""
    D = prog.num_dims
    act = A @ B if A.size else np.zeros(0)
    scale_rows = np.maximum(np.abs(b), np.abs(A) @ np.abs(B)) if A.size else np.zeros(0)
    rows = [i for i in range(b.size) if sign[i] == 0 or abs(act[i] - b[i]) <= ACTIVE * max(scale_rows[i], 1e-300)]
    at_lb = [d for d in range(D) if B[d] <= prog.lb[d] + ACTIVE * max(float(np.abs(B).max(initial=0.0)), 1e-300)]
    at_ub = [d for d in range(D) if d not in at_lb and B[d] >= prog.ub[d] * (1 - ACTIVE)]
    return rows, at_lb, at_ub


def kkt_multipliers(prog: Program, B: np.ndarray, extra: tuple[np.ndarray, float] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Multipliers (lambda [K, D], mu [rows]) fitted to the KKT conditions at allocation ``B``
    (GB/s): sum_d lambda_kd = w_k, and for every dimension strictly inside its bounds
    sum_k lambda_kd u_kd / B_d^2 = sum_i mu_i a_id; lambda only on the dimensions where a
    term attains its max, mu only on active rows, with the signs of the rows. Least squares
    with bounds (scipy); any result gives a valid bound (`lagrangian_bound`)."""
    K, D = prog.terms.shape
    A, b, sign = _rows(prog, extra)
    B = np.asarray(B, dtype=float)
    if not np.all(np.isfinite(B)) or np.any(B[prog.used] <= 0):
        return np.zeros((K, D)), np.zeros(b.size)  # no KKT point to fit at (any multipliers are valid)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(prog.terms > 0, prog.terms / np.maximum(B, 1e-300)[None, :], 0.0)
    top = ratio.max(axis=1, initial=0.0) if K else np.zeros(0)
    lam_kd = [(k, d) for k in range(K) for d in range(D) if prog.terms[k, d] > 0 and ratio[k, d] >= top[k] * (1 - ACTIVE)]
    mu_rows, at_lb, at_ub = _active(prog, A, b, sign, B)
    slack = at_lb + at_ub
    n = len(lam_kd) + len(mu_rows) + len(slack)
    lam = np.zeros((K, D))
    mu = np.zeros(b.size)
    if n == 0:
        return lam, mu
    # rows: sum_d lambda_kd = w_k (K), then per dimension the derivative of the Lagrangian,
    # sum_i mu_i a_id - sum_k lambda_kd u_kd / B_d^2, = 0 inside the bounds, >= 0 at lb, <= 0 at ub
    M = np.zeros((K + D, n))
    rhs = np.zeros(K + D)
    Bsafe = np.maximum(B, 1e-300)
    for j, (k, d) in enumerate(lam_kd):
        M[k, j] = 1.0
        M[K + d, j] = -prog.terms[k, d] / Bsafe[d] ** 2
    rhs[:K] = prog.weights
    lo = np.zeros(n)
    hi = np.full(n, np.inf)
    for j, i in enumerate(mu_rows):
        col = len(lam_kd) + j
        M[K:, col] = A[i]
        if sign[i] == 0:
            lo[col] = -np.inf
        elif sign[i] == -1:
            lo[col], hi[col] = -np.inf, 0.0
    for j, d in enumerate(slack):
        col = len(lam_kd) + len(mu_rows) + j
        M[K + d, col] = -1.0  # derivative - s = 0: s >= 0 at lb, s <= 0 at ub
        if d in at_ub:
            lo[col], hi[col] = -np.inf, 0.0
    # rows of M in comparable units: divide each stationarity row by its largest entry
    norms = np.maximum(np.abs(M).max(axis=1), 1e-300)
    M, rhs = M / norms[:, None], rhs / norms
    if not (np.all(np.isfinite(M)) and np.all(np.isfinite(rhs))):
        return lam, mu  # a bandwidth so small that 1/B^2 overflows: no fit (zero multipliers stay valid)
    try:
        sol = lsq_linear(M, rhs, bounds=(lo, hi), method="bvls", tol=1e-14, lsmr_tol=None, max_iter=200)
    except (np.linalg.LinAlgError, ValueError):
        return lam, mu  # the fit failed numerically: zero multipliers give a (weak) valid bound
    x = sol.x
    for j, (k, d) in enumerate(lam_kd):
        lam[k, d] = max(float(x[j]), 0.0)
    for j, i in enumerate(mu_rows):
        mu[i] = float(np.clip(x[len(lam_kd) + j], lo[len(lam_kd) + j], hi[len(lam_kd) + j]))
    # repair: round-off multipliers (a free row's -5e-17 makes c_d < 0 on a dimension without
    # an upper bound, where the Lagrangian is unbounded below) are set to zero
    mu[np.abs(mu) <= 1e-9 * max(float(np.abs(mu).max(initial=0.0)), 1e-300)] = 0.0
    return lam, mu


def _dual_value(prog: Program, lam: np.ndarray, mu: np.ndarray, A: np.ndarray, b: np.ndarray, low: np.ndarray, hi: np.ndarray, excess: np.ndarray) -> tuple[float, float] | None:
    """(min over the box [low, hi] of sum_d a_d/B_d + c_d B_d - mu @ b - |mu| @ excess,
    magnitude) or None when the minimum is -inf (pass b with the budget's entry zeroed to get
    a line's intercept; ``excess``: how far an accepted plan may exceed each row).

    Floating point with a proven error bound: every quantity is a sum of at most
    K + rows + 8 rounded products, quotients and one square root per dimension, so its
    rounding error is at most (K + rows + 16) u times the magnitude returned (u = 2^-53;
    square roots and clipping decisions included: a clip decided wrongly by rounding moves
    the value by O(u) of it). Callers subtract ``DATA_MARGIN`` (1e-12 >> that) times the
    magnitude."""
    K, D = prog.terms.shape
    a = np.zeros(D)
    total = lam.sum(axis=1) if K else np.zeros(0)
    for k in range(K):
        if total[k] <= 0:
            d = int(np.argmax(prog.terms[k]))
            a[d] += prog.weights[k] * prog.terms[k, d]
        else:  # lambda normalized to sum w_k
            a += lam[k] * (prog.weights[k] / total[k]) * prog.terms[k]
    c = mu @ A if A.size else np.zeros(D)
    cmag = np.abs(mu) @ np.abs(A) if A.size else np.zeros(D)
    value = 0.0
    size = 0.0
    for d in range(D):
        lo, up, ad, cd = float(low[d]), float(hi[d]), float(a[d]), float(c[d])
        if ad == 0:
            if cd >= 0:
                h, where = cd * lo, lo
            elif not math.isfinite(up):
                return None
            else:
                h, where = cd * up, up
        elif cd <= 0:
            if not math.isfinite(up):
                if cd < 0:
                    return None
                h, where = 0.0, 0.0  # a/B -> 0 as B grows
            else:
                h, where = ad / up + cd * up, up
        else:
            q = ad / cd
            if lo > 0 and q <= lo * lo:
                h, where = ad / lo + cd * lo, lo
            elif math.isfinite(up) and q >= up * up:
                h, where = ad / up + cd * up, up
            else:
                h, where = 2.0 * math.sqrt(ad * cd), math.sqrt(q)
        value += h
        size += abs(h) + where * float(cmag[d]) + (ad / where if where > 0 else 0.0)
    mb = mu * b
    me = np.zeros_like(mu)
    np.multiply(np.abs(mu), excess, out=me, where=mu != 0)
    if not np.all(np.isfinite(me)):
        return None
    value -= float(mb.sum()) + float(me.sum())
    size += float(np.abs(mb).sum()) + float(me.sum())
    return value, size


def _floor(prog: Program) -> np.ndarray:
    """Per instance row, the evaluator's least tolerance (1 byte/s, or 1 USD) in row units."""
    return np.array([1.0 / (r.scale * (GB if r.unit == "GB/s" else 1.0)) for r in prog.rows])


def accepted_box(prog: Program) -> np.ndarray:
    """The least bandwidth (GB/s) per dimension of a plan the evaluator accepts:
    ``min_bandwidth`` less its tolerance (``TOLERANCE`` of it, at least 1 byte/s), not below
    0 (a negative bandwidth is refused outright)."""
    return np.maximum(prog.lb - TOLERANCE * np.maximum(prog.lb, 1.0 / GB), 0.0)


def accepted_excess(prog: Program) -> np.ndarray:
    """Per instance row, the most by which a plan the evaluator accepts exceeds it (row units):
    ``TOLERANCE`` times its magnitude, the largest of 1 byte/s (or USD), |rhs| and
    sum_j |a_ij| B_j, which is at most `_reach` for a ``<=``/``==`` row of nonnegative
    coefficients and at most sum_j |a_ij| ub_j over the accepted box (`implied_upper`) for
    the others; inf where that is unbounded."""
    A, lo, hi = prog.rows_matrix()
    if not A.size:
        return np.zeros(0)
    up = implied_upper(prog)
    floor = _floor(prog)
    rhs = np.where(np.isfinite(hi), hi, lo)
    spread = np.zeros_like(A)
    np.multiply(np.abs(A), up[None, :], out=spread, where=A != 0)
    spread = spread.sum(axis=1)
    capped = np.isfinite(hi) & np.all(A >= 0, axis=1)
    spread[capped] = np.minimum(spread[capped], _reach(hi[capped], floor[capped]))
    return TOLERANCE * np.maximum(np.maximum(floor, np.abs(rhs)), spread) * (1 + 1e-9)


def accepted_bounds(prog: Program) -> tuple[np.ndarray, np.ndarray]:
    """Per dimension the least and the most bandwidth (GB/s) of a plan the evaluator
    accepts: ``min_bandwidth`` and ``max_bandwidth`` widened by its tolerance
    (`accepted_box`; ``TOLERANCE`` of ``max_bandwidth``, at least 1 byte/s)."""
    ub = np.asarray(prog.ub, dtype=float)
    return accepted_box(prog), ub + TOLERANCE * np.maximum(ub, 1.0 / GB)


def accepted_rows(prog: Program) -> tuple[Row, ...]:
    """The instance's rows widened by the most a plan the evaluator accepts exceeds each
    (`accepted_excess`; an ``==`` row becomes a ``<=`` and a ``>=`` row), so that a
    program over them holds every such plan and its bound holds for all of them (with
    the exact rows, SCIP's optimum over menus was 0.31% above a plan the evaluator
    accepts, 500.0000003 GB/s against a total of 500, which HiGHS and CBC returned:
    review rev16 D5). Rows widened to infinity are left out."""
    out: list[Row] = []
    for r, e in zip(prog.rows, accepted_excess(prog), strict=True):
        two = r.sense == "=="
        if r.sense in ("<=", "==") and np.isfinite(r.rhs + e):
            out.append(replace(r, sense="<=", rhs=r.rhs + e, path=r.path + " (<=)" if two else r.path))
        if r.sense in (">=", "==") and np.isfinite(r.rhs - e):
            out.append(replace(r, sense=">=", rhs=r.rhs - e, path=r.path + " (>=)" if two else r.path))
    return tuple(out)


def _reach(hi: np.ndarray | float, floor: np.ndarray | float) -> np.ndarray:
    """The most a_i B reaches on an accepted plan for a ``<=``/``==`` row a_i B <= hi of
    nonnegative coefficients: the evaluator's tolerance grows with a_i B itself, so
    a_i B <= hi + TOLERANCE max(floor, |hi|, a_i B) gives (hi + TOLERANCE max(floor, |hi|)) /
    (1 - TOLERANCE), raised by 1e-12 relative for its rounding."""
    hi = np.asarray(hi, dtype=float)
    return (hi + TOLERANCE * np.maximum(floor, np.abs(hi))) / (1 - TOLERANCE) * (1 + 1e-12)


def implied_upper(prog: Program) -> np.ndarray:
    """Upper bounds per dimension that every plan the evaluator accepts meets (inf: none
    proven): ``ub`` plus its tolerance, then bound propagation over every row, each side of
    it written ``c @ B <= h``. The evaluator accepts ``c @ B <= h + TOLERANCE max(floor, |h|,
    sum_j |c_j| B_j)``, at most ``h + TOLERANCE (max(floor, |h|) + sum_j |c_j| B_j)``, so
    for ``c_k > 0``

        B_k <= (h + TOLERANCE max(floor, |h|) + sum_{j != k} (TOLERANCE |c_j| - c_j) B_j) / (c_k (1 - TOLERANCE))

    with each B_j at the end of its range that makes the sum largest (`accepted_box` below,
    these bounds above); rounds repeat while a bound falls (at most once per dimension and
    one more). Each bound is raised by 1e-9 of its size for rounding. For a row of
    nonnegative coefficients this is ``low_k + (reach - c @ low) / c_k`` (`_reach`). A box
    that every accepted B satisfies keeps the Lagrangian finite where a multiplier leaves
    ``c_d < 0``, and bounds the evaluator's tolerance on each row (`accepted_excess`)."""
    cached = getattr(prog, "_implied_upper", None)
    if cached is not None:
        return cached
    A, lo, hi = prog.rows_matrix()
    low = accepted_box(prog)
    ub = np.asarray(prog.ub, dtype=float)
    out = ub + TOLERANCE * np.maximum(ub, 1.0 / GB)
    floor = _floor(prog) if A.size else np.zeros(0)
    sides = [(A[i], float(hi[i]), float(floor[i])) for i in range(A.shape[0]) if math.isfinite(hi[i])]
    sides += [(-A[i], -float(lo[i]), float(floor[i])) for i in range(A.shape[0]) if math.isfinite(lo[i])]
    for _ in range(prog.num_dims + 1):
        fell = False
        for c, h, f in sides:
            coef = TOLERANCE * np.abs(c) - c
            end = np.where(coef < 0, low, out)
            terms = np.zeros_like(coef)
            np.multiply(coef, end, out=terms, where=coef != 0)
            finite = np.isfinite(terms)
            open_ = int((~finite).sum())
            known = float(terms[finite].sum())
            for k in np.flatnonzero(c > 0):
                if open_ > (0 if finite[k] else 1):
                    continue  # another dimension of the row is unbounded the wrong way
                rest = known - (float(terms[k]) if finite[k] else 0.0)
                cap = (h + TOLERANCE * max(f, abs(h)) + rest) / (float(c[k]) * (1 - TOLERANCE))
                cap += 1e-9 * abs(cap) + 1e-300
                if cap < out[k]:
                    out[k] = cap
                    fell = True
        if not fell:
            break
    prog._implied_upper = out  # type: ignore[attr-defined]
    return out


def lagrangian_bound(prog: Program, lam: np.ndarray, mu: np.ndarray) -> float:
    """A lower bound on the least training time (seconds, compute included), valid in exact
    arithmetic for any multipliers (their signs are enforced here); -inf when these
    multipliers give none. The dual function's communication part counts at least 0: no
    collective takes negative time, so the compute time alone is a bound too (poor
    multipliers, as a run cut at 0.02 s has, gave -0.13 s against 0.17 s of compute:
    review rev30 D9)."""
    A, b, sign = _rows(prog, None)
    mu = np.where(sign == 1, np.maximum(mu, 0.0), np.where(sign == -1, np.minimum(mu, 0.0), mu))
    out = _dual_value(prog, lam, mu, A, b, accepted_box(prog), implied_upper(prog), accepted_excess(prog))
    if out is None:
        return -math.inf
    value, size = out
    value = max(value, 0.0)
    C = float(prog.compute_seconds)
    return math.nextafter(C + value - DATA_MARGIN * (C + size), -math.inf)


def safe_time_bound(prog: Program, B: np.ndarray, candidates: list[tuple[np.ndarray, np.ndarray]] | None = None,
                    enough: float = 1e-8) -> tuple[float, dict[str, object]]:
    """The exact-arithmetic lower bound from multipliers: the ``candidates`` (lambda, mu) first
    (a solver's duals), then KKT multipliers fitted at allocation ``B`` (GB/s) unless a
    candidate is already within ``enough`` (relative) of B's time; the best bound, and how."""
    best, how = -math.inf, "none"
    at: tuple[np.ndarray, np.ndarray] | None = None
    n_rows = len(prog.rows)
    for lam, mu in candidates or []:
        mu_rows = np.asarray(mu, dtype=float)[:n_rows]
        value = lagrangian_bound(prog, lam, mu_rows)
        if value > best:
            best, how, at = value, "solver multipliers", (np.asarray(lam, dtype=float), mu_rows)
    time_b = prog.compute_seconds + prog.comm_time(B)
    if not (best >= time_b * (1 - enough)):
        lam, mu = kkt_multipliers(prog, B)
        value = lagrangian_bound(prog, lam, mu)
        if value > best:
            best, how, at = value, "KKT multipliers fitted at the allocation", (np.asarray(lam, dtype=float), np.asarray(mu, dtype=float))
    info: dict[str, object] = {"method": f"Lagrangian dual function at {how}, floating point with a rounding-error bound", "data_margin": DATA_MARGIN}
    if at is not None:
        info["certificate"] = multipliers_certificate(*at)
    return best, info


def multipliers_certificate(lam: np.ndarray, mu: np.ndarray) -> dict[str, list[Any]]:
    """The certificate of a Lagrangian bound (`lagrangian_bound`): its multipliers, one per
    time term and dimension (``lambda``, K lists of D) and one per instance row (``mu``),
    as JSON lists."""
    return {"lambda": np.asarray(lam, dtype=float).tolist(), "mu": np.asarray(mu, dtype=float).ravel().tolist()}


def recheck(inst: BandwidthInstance, entry: Mapping[str, Any]) -> str | None:
    """`BoundSource.recheck` of libra's Lagrangian bounds: None when the dual function at the
    bound's recorded multipliers (its ``certificate``), evaluated on the instance's own
    program (`data.prepare`), is at least the bound's value, else why not. Any multipliers
    give a bound valid in exact arithmetic (`lagrangian_bound` enforces their signs and
    bounds the rounding), so the value is proven again whatever produced them.
    `Unchecked` when the entry keeps no certificate (a result written before bounds kept
    them)."""
    cert = entry.get("certificate")
    if cert is None:
        raise Unchecked("the bound keeps no certificate (its Lagrangian multipliers)")
    if not isinstance(cert, Mapping) or not isinstance(cert.get("lambda"), list) or not isinstance(cert.get("mu"), list):
        return "its certificate is not {'lambda': [...], 'mu': [...]}"
    prog = prepare(inst)
    try:
        lam, mu = np.asarray(cert["lambda"], dtype=float), np.asarray(cert["mu"], dtype=float)
    except (TypeError, ValueError):
        return "its certificate's multipliers are not numbers"
    if lam.size == 0 and prog.terms.size == 0:
        lam = lam.reshape(prog.terms.shape)  # no time terms: JSON keeps [] of a (0, D) array
    if lam.shape != prog.terms.shape or mu.shape != (len(prog.rows),) or not (np.isfinite(lam).all() and np.isfinite(mu).all()):
        return f"its certificate's multipliers have shapes {lam.shape} and {mu.shape}, where the instance's program takes {prog.terms.shape} (time terms x dimensions) and ({len(prog.rows)},) (rows), all finite"
    value = float(entry["value"])
    dual = lagrangian_bound(prog, lam, mu)
    return None if value <= dual else f"the dual function at its multipliers gives {dual!r} s, less than {value!r}"


def budget_line(prog: Program, B: np.ndarray, cost: np.ndarray, budget: float) -> tuple[float, float] | None:
    """(G, nu): T*(beta) >= G - nu * beta for every budget beta (``cost @ B <= beta``, same
    units as ``cost``), from KKT multipliers fitted at ``B`` under budget ``budget``; G rounded
    down and nu up, so the line is below the exact one. None when the multipliers give no line."""
    lam, mu = kkt_multipliers(prog, B, (np.asarray(cost, dtype=float), float(budget)))
    return line_from_multipliers(prog, lam, mu, cost, budget)


def line_from_multipliers(prog: Program, lam: np.ndarray, mu: np.ndarray, cost: np.ndarray, budget: float) -> tuple[float, float] | None:
    """(G, nu) of `budget_line` for given multipliers (``mu``: the instance rows, then the
    budget row; signs enforced here), any of which give a valid line."""
    A, b, sign = _rows(prog, (np.asarray(cost, dtype=float), float(budget)))
    mu = np.where(sign == 1, np.maximum(mu, 0.0), np.where(sign == -1, np.minimum(mu, 0.0), mu))
    b0 = b.copy()
    b0[-1] = 0.0  # the intercept: the budget's -nu beta is the line's slope
    excess = np.append(accepted_excess(prog), 0.0)  # the budget row is the sweep's, exact
    out = _dual_value(prog, lam, mu, A, b0, accepted_box(prog), implied_upper(prog), excess)
    if out is None:
        return None
    value, size = out
    C = float(prog.compute_seconds)
    nu = float(mu[-1])
    G = C + value - DATA_MARGIN * (C + size + nu * abs(float(budget)))
    return math.nextafter(G, -math.inf), nu * (1 + DATA_MARGIN)


def safe_min_linear(prog: Program, coeffs: np.ndarray, B: np.ndarray) -> float:
    """A lower bound, valid in exact arithmetic, on min coeffs @ B over the instance's rows and
    box (e.g. the least network cost), from multipliers fitted at a (near-)minimizer ``B``:
    min over the box (implied bounds included) of (coeffs + A^T mu) @ B - mu @ b, lowered
    by ``DATA_MARGIN`` of its magnitude; -inf when the fitted multipliers leave it unbounded."""
    D = prog.num_dims
    A, b, sign = _rows(prog, None)
    B = np.asarray(B, dtype=float)
    rows, at_lb, at_ub = _active(prog, A, b, sign, B)
    slack = at_lb + at_ub
    n = len(rows) + len(slack)
    mu = np.zeros(b.size)
    if n:
        M = np.zeros((D, n))
        lo = np.zeros(n)
        hi = np.full(n, np.inf)
        for j, i in enumerate(rows):
            M[:, j] = A[i]
            if sign[i] == 0:
                lo[j] = -np.inf
            elif sign[i] == -1:
                lo[j], hi[j] = -np.inf, 0.0
        for j, d in enumerate(slack):
            M[d, len(rows) + j] = -1.0  # coeffs + A^T mu - s = 0: s >= 0 at lb, <= 0 at ub
            if d in at_ub:
                lo[len(rows) + j], hi[len(rows) + j] = -np.inf, 0.0
        try:
            x = lsq_linear(M, -np.asarray(coeffs, dtype=float), bounds=(lo, hi), method="bvls", tol=1e-14, max_iter=200).x
        except (np.linalg.LinAlgError, ValueError):
            x = np.zeros(n)  # zero multipliers: a weaker bound, still valid
        for j, i in enumerate(rows):
            mu[i] = float(np.clip(x[j], lo[j], hi[j]))
        mu[np.abs(mu) <= 1e-9 * max(float(np.abs(mu).max(initial=0.0)), 1e-300)] = 0.0
    up = implied_upper(prog)
    c = np.asarray(coeffs, dtype=float) + (mu @ A if A.size else 0.0)
    cmag = np.abs(np.asarray(coeffs, dtype=float)) + (np.abs(mu) @ np.abs(A) if A.size else 0.0)
    charged = np.abs(mu[mu != 0]) * accepted_excess(prog)[mu != 0] if A.size else np.zeros(0)
    if np.any((c < 0) & ~np.isfinite(up)) or not np.all(np.isfinite(charged)):
        return -math.inf
    where = np.where(c >= 0, accepted_box(prog), up)
    value = float((c * where).sum() - mu @ b - charged.sum())
    size = float((cmag * where).sum() + np.abs(mu * b).sum() + charged.sum())
    return math.nextafter(value - DATA_MARGIN * size, -math.inf)
