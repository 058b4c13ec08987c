"""Reusable scheduling blocks: index arrays in, named constraint blocks out.

Every function adds whole vectorized blocks to a `Model` and returns what it created.
Times are in seconds; ``start`` is a variable block of start times indexed by operation.

* `precedence_with_lag`: ``start[dst] >= start[src] + gap`` (gap = duration + delay).
* `disjunctive_pairs`: one order binary per pair of operations that share a resource and
  have no path between them, with big-M rows (Zero Bubble's ILP, Qi et al. ICLR 2024;
  any valid horizon is a valid big-M).
* `disjunctive_pairs_when`: the same disjunction, binding only when an indicator is 1
  (two operations that may or may not share a device: placement, Venugopalan & Sinnen,
  IEEE TPDS 26(1), 2015), with durations that are expressions (they depend on the device).
* `ordered_rows`: the rows of one disjunction for a given order (an expression, so one
  order binary may serve several resources, as a channel and two streams in
  `compression.select`), with start times and durations as expressions.
* `order_implications`: ``order[a] <= order[b]`` rows (transitivity along chains).
* `indicator_sum`: sums of ``coef * [first before second]`` or ``coef * [second before
  first]`` over pairs, as an expression per row; used by
* `cumulative_prefix`: a cumulative quantity (memory) counted in start order must stay
  within a capacity at given operations: ``const + sum coef * [j before i] <= cap``.
* `makespan_epigraph`: ``C >= start[i] + duration[i]``.
* `cyclic_precedence` / `cyclic_no_overlap` / `winding_triangles` / `modulo_prefix`:
  the modulo-schedule (repetend) versions with a period variable T, written in period
  units (theta = start / T, rate = 1 / T) so that they stay linear: one integer winding
  number q per pair, ``start[b] + q T`` falls between the end of ``a`` and the start of
  the next instance of ``a`` (Hanen & Munier's cyclic disjunctions).
* `StepVars` and ``step_*``: the time-indexed (step variable) versions for integral
  times.
"""

from __future__ import annotations

import numpy as np

from distplan.modeling.model import ConBlockInfo, LinExpr, Model, Variable, linear_sum


def precedence_with_lag(model: Model, start: Variable, src: np.ndarray, dst: np.ndarray, gap: np.ndarray, name: str) -> ConBlockInfo | None:
    """``start[dst] - start[src] >= gap`` for every arc (one row per arc)."""
    src = np.asarray(src, dtype=np.int64)
    if src.size == 0:
        return None
    n = start.size
    rows = np.arange(src.size)
    cols = np.concatenate([start.index.reshape(-1)[np.asarray(dst, dtype=np.int64)], start.index.reshape(-1)[src]])
    coef = np.concatenate([np.ones(src.size), -np.ones(src.size)])
    expr = linear_sum(cols, coef, np.concatenate([rows, rows]), src.size, max(model.num_vars, n))
    return model.add_constraints(name, expr >= np.asarray(gap, dtype=float))


def disjunctive_pairs(
    model: Model,
    start: Variable,
    first: np.ndarray,
    second: np.ndarray,
    dur_first: np.ndarray,
    dur_second: np.ndarray,
    big_m: float | np.ndarray,
    name: str,
) -> Variable:
    """Order binaries ``order[k] = 1`` iff ``first[k]`` runs before ``second[k]``.

    Rows: ``s2 - s1 - M order >= d1 - M`` and ``s1 - s2 + M order >= d2`` (named
    ``{name}-before`` / ``{name}-after``). ``big_m`` must bound ``|s1 - s2|`` plus the
    durations over every solution of interest (a valid horizon does).
    """
    k = np.asarray(first).size
    order = model.add_vars(f"{name}-order", k, vtype="binary")
    if k == 0:
        return order
    sidx = start.index.reshape(-1)
    a = sidx[np.asarray(first, dtype=np.int64)]
    b = sidx[np.asarray(second, dtype=np.int64)]
    o = order.index.reshape(-1)
    m = np.broadcast_to(np.asarray(big_m, dtype=float), (k,))
    rows = np.arange(k)
    nv = model.num_vars
    before = linear_sum(np.concatenate([b, a, o]), np.concatenate([np.ones(k), -np.ones(k), -m]), np.concatenate([rows, rows, rows]), k, nv)
    model.add_constraints(f"{name}-before", before >= np.asarray(dur_first, dtype=float) - m)
    after = linear_sum(np.concatenate([a, b, o]), np.concatenate([np.ones(k), -np.ones(k), m]), np.concatenate([rows, rows, rows]), k, nv)
    model.add_constraints(f"{name}-after", after >= np.asarray(dur_second, dtype=float))
    return order


def ordered_rows(
    model: Model,
    start_first: LinExpr,
    start_second: LinExpr,
    dur_first: LinExpr,
    dur_second: LinExpr,
    first_before: LinExpr,
    big_m_first: np.ndarray,
    big_m_second: np.ndarray,
    name: str,
) -> None:
    """One disjunction per row for a given order ``first_before`` (1: first runs before
    second): ``s2 >= s1 + d1 - M1 (1 - first_before)`` and ``s1 >= s2 + d2 - M2
    first_before`` (``{name}-before`` / ``{name}-after``, as in `disjunctive_pairs`, which
    is this with one M and the binaries its own). ``big_m_first`` bounds ``s1 + d1 - s2``
    and ``big_m_second`` ``s2 + d2 - s1`` over the solutions of interest."""
    m1 = np.asarray(big_m_first, dtype=float)
    m2 = np.asarray(big_m_second, dtype=float)
    model.add_constraints(f"{name}-before", start_second - start_first - dur_first - first_before * m1 >= -m1)
    model.add_constraints(f"{name}-after", start_first - start_second - dur_second + first_before * m2 >= 0.0)


def disjunctive_pairs_when(
    model: Model,
    start: Variable,
    first: np.ndarray,
    second: np.ndarray,
    dur_first: LinExpr,
    dur_second: LinExpr,
    big_m_first: np.ndarray,
    big_m_second: np.ndarray,
    active: Variable,
    name: str,
) -> Variable:
    """Order binaries ``{name}-order[k] = 0`` iff ``first[k]`` runs before ``second[k]``, the
    disjunction binding only when ``active[k] = 1``.

    Rows (``{name}-first-before`` / ``{name}-second-before``):
    ``s1 + d1 - s2 - M12 order + M12 active <= M12`` and
    ``s2 + d2 - s1 + M21 order + M21 active <= 2 M21``. ``big_m_first`` must bound
    ``s1 + d1 - s2`` and ``big_m_second`` ``s2 + d2 - s1`` over every solution of interest
    (per pair, from the start windows); durations are expressions of one row per pair.
    """
    k = np.asarray(first).size
    order = model.add_vars(f"{name}-order", k, vtype="binary")
    if k == 0:
        return order
    first = np.asarray(first, dtype=np.int64)
    second = np.asarray(second, dtype=np.int64)
    m12 = np.asarray(big_m_first, dtype=float)
    m21 = np.asarray(big_m_second, dtype=float)
    model.add_constraints(f"{name}-first-before", start[first] + dur_first - start[second] - m12 * order + m12 * active <= m12)
    model.add_constraints(f"{name}-second-before", start[second] + dur_second - start[first] + m21 * order + m21 * active <= 2 * m21)
    return order


def order_implications(model: Model, order: Variable, low: np.ndarray, high: np.ndarray, name: str) -> ConBlockInfo | None:
    """``order[low[k]] <= order[high[k]]`` (if the first holds, so does the second)."""
    low = np.asarray(low, dtype=np.int64)
    if low.size == 0:
        return None
    o = order.index.reshape(-1)
    rows = np.arange(low.size)
    expr = linear_sum(
        np.concatenate([o[low], o[np.asarray(high, dtype=np.int64)]]),
        np.concatenate([np.ones(low.size), -np.ones(low.size)]),
        np.concatenate([rows, rows]),
        low.size,
        model.num_vars,
    )
    return model.add_constraints(name, expr <= 0.0)


def indicator_sum(order: Variable, nrows: int, rows: np.ndarray, pairs: np.ndarray, coef: np.ndarray, first_before: np.ndarray) -> LinExpr:
    """Per row r: sum over terms k with rows[k] == r of ``coef[k] * I_k`` where ``I_k`` is
    ``order[pairs[k]]`` ("first before second") when ``first_before[k]`` else
    ``1 - order[pairs[k]]`` ("second before first")."""
    rows = np.asarray(rows, dtype=np.int64)
    coef = np.asarray(coef, dtype=float)
    fb = np.asarray(first_before, dtype=bool)
    cols = order.index.reshape(-1)[np.asarray(pairs, dtype=np.int64)]
    sign = np.where(fb, 1.0, -1.0)
    expr = linear_sum(cols, coef * sign, rows, nrows, order.model.num_vars)
    const = np.bincount(rows[~fb], weights=coef[~fb], minlength=nrows) if rows.size else np.zeros(nrows)
    return expr + const


def cumulative_prefix(
    model: Model,
    order: Variable,
    const: np.ndarray,
    capacity: np.ndarray,
    rows: np.ndarray,
    pairs: np.ndarray,
    coef: np.ndarray,
    first_before: np.ndarray,
    name: str,
) -> ConBlockInfo | None:
    """A quantity counted in start order stays within capacity at the checked operations:
    ``const[r] + sum_k coef[k] I_k <= capacity[r]`` with ``I_k`` as in `indicator_sum`
    (``I_k`` = "the other operation of pair k starts before the checked one"). ``const``
    holds the contributions of operations whose order is fixed (and the checked one)."""
    nrows = np.asarray(const).size
    if nrows == 0:
        return None
    expr = indicator_sum(order, nrows, rows, pairs, coef, first_before) + np.asarray(const, dtype=float)
    return model.add_constraints(name, expr <= np.asarray(capacity, dtype=float))


def makespan_epigraph(model: Model, start: Variable, ops: np.ndarray, duration: np.ndarray, name: str, integer: bool = False, ub: float | None = None) -> Variable:
    """``C >= start[ops] + duration`` (C integer when all data are integral)."""
    c = model.add_vars(name, (), lb=0.0, ub=np.inf if ub is None else ub, vtype="integer" if integer else "continuous")
    ops = np.asarray(ops, dtype=np.int64)
    model.add_constraints(f"{name}-epigraph", start[ops] - c <= -np.asarray(duration, dtype=float))
    return c


def cyclic_precedence(model: Model, theta: Variable, rate: Variable, src: np.ndarray, dst: np.ndarray, gap: np.ndarray, name: str) -> ConBlockInfo | None:
    """Periodic precedence in period units: ``theta[dst] - theta[src] >= gap * rate``
    (theta = start / T, rate = 1 / T; linear although T is a variable)."""
    src = np.asarray(src, dtype=np.int64)
    if src.size == 0:
        return None
    k = src.size
    rows = np.arange(k)
    th = theta.index.reshape(-1)
    r = np.full(k, rate.index.reshape(-1)[0])
    expr = linear_sum(
        np.concatenate([th[np.asarray(dst, dtype=np.int64)], th[src], r]),
        np.concatenate([np.ones(k), -np.ones(k), -np.asarray(gap, dtype=float)]),
        np.concatenate([rows, rows, rows]),
        k,
        model.num_vars,
    )
    return model.add_constraints(name, expr >= 0.0)


def cyclic_no_overlap(
    model: Model,
    theta: Variable,
    rate: Variable,
    first: np.ndarray,
    second: np.ndarray,
    dur_first: np.ndarray,
    dur_second: np.ndarray,
    q_lo: np.ndarray,
    q_hi: np.ndarray,
    name: str,
) -> Variable:
    """Two periodic operations (start ``sigma + r T``) never overlap on a shared resource:
    an integer winding number q per pair with ``sigma_b + q T`` in
    ``[sigma_a + d_a, sigma_a + T - d_b]``. Divided by T (theta = sigma / T, rate = 1/T):
    ``theta_b - theta_a + q >= d_a rate`` and ``theta_b - theta_a + q + d_b rate <= 1``,
    linear with no big-M (Hanen & Munier's cyclic disjunctions)."""
    k = np.asarray(first).size
    q = model.add_vars(f"{name}-wind", k, lb=np.asarray(q_lo, dtype=float), ub=np.asarray(q_hi, dtype=float), vtype="integer")
    if k == 0:
        return q
    th = theta.index.reshape(-1)
    a = th[np.asarray(first, dtype=np.int64)]
    b = th[np.asarray(second, dtype=np.int64)]
    r = np.full(k, rate.index.reshape(-1)[0])
    qi = q.index.reshape(-1)
    rows = np.arange(k)
    r4 = np.concatenate([rows, rows, rows, rows])
    nv = model.num_vars
    e1 = linear_sum(np.concatenate([b, a, qi, r]), np.concatenate([np.ones(k), -np.ones(k), np.ones(k), -np.asarray(dur_first, dtype=float)]), r4, k, nv)
    model.add_constraints(f"{name}-after-first", e1 >= 0.0)
    e2 = linear_sum(np.concatenate([b, a, qi, r]), np.concatenate([np.ones(k), -np.ones(k), np.ones(k), np.asarray(dur_second, dtype=float)]), r4, k, nv)
    model.add_constraints(f"{name}-before-next", e2 <= 1.0)
    return q


def winding_triangles(model: Model, q: Variable, ab: np.ndarray, bc: np.ndarray, ac: np.ndarray, name: str) -> ConBlockInfo | None:
    """Winding numbers of three operations on one resource agree:
    ``q_ac = q_ab + q_bc`` or ``q_ab + q_bc - 1``."""
    ab = np.asarray(ab, dtype=np.int64)
    if ab.size == 0:
        return None
    k = ab.size
    qi = q.index.reshape(-1)
    rows = np.arange(k)
    expr = linear_sum(
        np.concatenate([qi[ab], qi[np.asarray(bc, dtype=np.int64)], qi[np.asarray(ac, dtype=np.int64)]]),
        np.concatenate([np.ones(k), np.ones(k), -np.ones(k)]),
        np.concatenate([rows, rows, rows]),
        k,
        model.num_vars,
    )
    model.add_constraints(f"{name}-lo", expr >= 0.0)
    return model.add_constraints(f"{name}-hi", expr <= 1.0)


def modulo_prefix(
    model: Model,
    q: Variable,
    const: np.ndarray,
    capacity: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    coef: np.ndarray,
    name: str,
) -> ConBlockInfo | None:
    """Steady-state cumulative quantity (memory) at the checked operations of a modulo
    schedule: ``const[r] + sum_k coef[k] q[cols[k]] <= capacity[r]``. At the start of
    a, operation b has ``q_ab`` instances less in flight than a has started (``q_ab``
    the pair's winding number), so with per-cycle deltas summing to zero the level is
    ``mu_a + sum_b mu_b q_ab``."""
    nrows = np.asarray(const).size
    if nrows == 0:
        return None
    expr = linear_sum(q.index.reshape(-1)[np.asarray(cols, dtype=np.int64)], np.asarray(coef, dtype=float), np.asarray(rows), nrows, model.num_vars)
    return model.add_constraints(name, expr + np.asarray(const, dtype=float) <= np.asarray(capacity, dtype=float))


# -- time-indexed "step" formulation (integral times) ------------------------------------------
#
# y[i, t] = 1 when operation i has started at or before integer time t (Sousa & Wolsey's
# cumulative variables; Pritsker et al. 1969 in pulse form). y is 0 before the earliest
# start E_i and 1 from the latest start L_i on, so only t in [E_i, L_i - 1] are variables.
# The LP relaxation is much stronger than big-M disjunctions (it contains the preemptive
# one-machine bounds), at the price of one variable per operation and time unit.


class StepVars:
    """Step variables of operations with integer start windows [earliest, latest]."""

    def __init__(self, model: Model, earliest: np.ndarray, latest: np.ndarray, name: str, *, existing: bool = False):
        """Add the binary block ``name`` (one variable per integer step of each window), or
        with ``existing`` take the block of that name an earlier block added."""
        self.earliest = np.asarray(earliest, dtype=np.int64)
        self.latest = np.asarray(latest, dtype=np.int64)
        width = np.maximum(self.latest - self.earliest, 0)
        self.offset = np.concatenate([[0], np.cumsum(width)])
        self.var = model[name] if existing else model.add_vars(name, int(self.offset[-1]), vtype="binary")
        self.name = name

    @property
    def n(self) -> int:
        return int(self.earliest.size)

    def terms(self, ops: np.ndarray, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(column or -1, constant) of y[ops, t] (vectorized)."""
        ops = np.asarray(ops, dtype=np.int64)
        t = np.asarray(t, dtype=np.int64)
        e, lt = self.earliest[ops], self.latest[ops]
        is_var = (t >= e) & (t < lt)
        if self.var.size == 0:
            return np.full(ops.size, -1, dtype=np.int64), np.where(t >= lt, 1.0, 0.0)
        pos = np.minimum(self.offset[ops] + np.clip(t - e, 0, None), self.var.size - 1)
        col = np.where(is_var, self.var.index.reshape(-1)[pos], -1)
        const = np.where(t >= lt, 1.0, 0.0)
        return col, const


def _rows_expr(model: Model, nrows: int, rows: np.ndarray, cols: np.ndarray, coef: np.ndarray, const: np.ndarray) -> LinExpr:
    """sum of coef * column per row (columns -1 contribute coef * const instead)."""
    rows = np.asarray(rows, dtype=np.int64)
    cols = np.asarray(cols, dtype=np.int64)
    coef = np.asarray(coef, dtype=float)
    v = cols >= 0
    expr = linear_sum(cols[v], coef[v], rows[v], nrows, model.num_vars)
    c = np.bincount(rows[~v], weights=coef[~v] * np.asarray(const, dtype=float)[~v], minlength=nrows) if rows.size else np.zeros(nrows)
    return expr + c


def step_monotone(model: Model, sv: StepVars, name: str) -> ConBlockInfo | None:
    """``y[i, t] <= y[i, t + 1]`` inside each window."""
    pairs = np.maximum(sv.latest - sv.earliest - 1, 0)
    ops = np.repeat(np.arange(sv.n), pairs)
    if ops.size == 0:
        return None
    first = np.repeat(np.concatenate([[0], np.cumsum(pairs)])[:-1], pairs)
    k = np.arange(ops.size) - first
    idx = sv.var.index.reshape(-1)
    base = idx[sv.offset[ops] + k]
    nxt = idx[sv.offset[ops] + k + 1]
    rows = np.arange(ops.size)
    expr = linear_sum(np.concatenate([base, nxt]), np.concatenate([np.ones(ops.size), -np.ones(ops.size)]), np.concatenate([rows, rows]), ops.size, model.num_vars)
    return model.add_constraints(name, expr <= 0.0)


def step_precedence(model: Model, sv: StepVars, src: np.ndarray, dst: np.ndarray, gap: np.ndarray, name: str) -> ConBlockInfo | None:
    """``start[dst] >= start[src] + gap`` as ``y[dst, t] <= y[src, t - gap]`` for every t."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    gap = np.round(np.asarray(gap, dtype=float)).astype(np.int64)
    width = np.maximum(sv.latest[dst] - sv.earliest[dst], 0)
    arc = np.repeat(np.arange(src.size), width)
    if arc.size == 0:
        return None
    starts = np.repeat(np.cumsum(np.concatenate([[0], width]))[:-1], width)
    t = sv.earliest[dst[arc]] + (np.arange(arc.size) - starts)
    cj, kj = sv.terms(dst[arc], t)
    ci, ki = sv.terms(src[arc], t - gap[arc])
    keep = ~((ci < 0) & (ki >= 1.0))  # y[src, t - gap] == 1: row is trivial
    arc, cj, kj, ci, ki = arc[keep], cj[keep], kj[keep], ci[keep], ki[keep]
    nrows = arc.size
    rows = np.arange(nrows)
    expr = _rows_expr(model, nrows, np.concatenate([rows, rows]), np.concatenate([cj, ci]), np.concatenate([np.ones(nrows), -np.ones(nrows)]), np.concatenate([kj, ki]))
    return model.add_constraints(name, expr <= 0.0)


def step_resource(
    model: Model, sv: StepVars, groups: list[np.ndarray], dur: np.ndarray, capacity: np.ndarray, horizon: int, name: str
) -> ConBlockInfo | None:
    """Operations of a group never run more than ``capacity`` at a time: at each integer
    time tau, ``sum_i y[i, tau] - y[i, tau - d_i] <= capacity``."""
    rows_l, cols_l, coef_l, const_l, caps = [], [], [], [], []
    nrow = 0
    dur = np.round(np.asarray(dur, dtype=float)).astype(np.int64)
    for g, ops in enumerate(groups):
        ops = np.asarray(ops, dtype=np.int64)
        if ops.size == 0:
            continue
        lo = int(sv.earliest[ops].min())
        hi = int(min(horizon, (sv.latest[ops] + dur[ops]).max()))
        taus = np.arange(lo, hi)
        oo = np.repeat(ops, taus.size)
        tt = np.tile(taus, ops.size)
        c1, k1 = sv.terms(oo, tt)
        c2, k2 = sv.terms(oo, tt - dur[oo])
        r = nrow + np.tile(np.arange(taus.size), ops.size)
        rows_l += [r, r]
        cols_l += [c1, c2]
        coef_l += [np.ones(oo.size), -np.ones(oo.size)]
        const_l += [k1, k2]
        caps.append(np.full(taus.size, float(capacity[g])))
        nrow += taus.size
    if nrow == 0:
        return None
    expr = _rows_expr(model, nrow, np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(coef_l), np.concatenate(const_l))
    return model.add_constraints(name, expr <= np.concatenate(caps))


def step_cumulative(
    model: Model, sv: StepVars, groups: list[np.ndarray], delta: np.ndarray, init: np.ndarray, capacity: np.ndarray, horizon: int, name: str
) -> ConBlockInfo | None:
    """A quantity changed by ``delta`` at each start (memory) stays within capacity at
    every integer time: ``init + sum_i delta_i y[i, tau] <= capacity``."""
    rows_l, cols_l, coef_l, const_l, caps = [], [], [], [], []
    nrow = 0
    for g, ops in enumerate(groups):
        ops = np.asarray(ops, dtype=np.int64)
        ops = ops[np.asarray(delta, dtype=float)[ops] != 0]
        if ops.size == 0 or not np.isfinite(capacity[g]):
            continue
        lo = int(sv.earliest[ops].min())
        hi = int(min(horizon, sv.latest[ops].max() + 1))
        taus = np.arange(lo, hi)
        oo = np.repeat(ops, taus.size)
        tt = np.tile(taus, ops.size)
        c, k = sv.terms(oo, tt)
        rows_l.append(nrow + np.tile(np.arange(taus.size), ops.size))
        cols_l.append(c)
        coef_l.append(np.asarray(delta, dtype=float)[oo])
        const_l.append(k)
        caps.append(np.full(taus.size, float(capacity[g] - init[g])))
        nrow += taus.size
    if nrow == 0:
        return None
    expr = _rows_expr(model, nrow, np.concatenate(rows_l), np.concatenate(cols_l), np.concatenate(coef_l), np.concatenate(const_l))
    return model.add_constraints(name, expr <= np.concatenate(caps))


def step_start_link(model: Model, sv: StepVars, start: Variable, name: str) -> ConBlockInfo:
    """``start[i] = latest_i - sum_t y[i, t]``."""
    width = np.maximum(sv.latest - sv.earliest, 0)
    ops = np.repeat(np.arange(sv.n), width)
    cols = np.concatenate([start.index.reshape(-1), sv.var.index.reshape(-1)])
    rows = np.concatenate([np.arange(sv.n), ops])
    expr = linear_sum(cols, np.ones(cols.size), rows, sv.n, model.num_vars)
    return model.add_constraints(name, expr == sv.latest.astype(float))
