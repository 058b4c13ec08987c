"""Reusable scheduling blocks: index arrays in, named constraint blocks out.

Every function adds whole vectorized blocks to a `Model` and returns what it created.
Times are in seconds; ``start`` is a variable block of start times indexed by operation.

* `precedence_with_lag`: ``start[dst] >= start[src] + gap`` (gap = duration + delay).
* `disjunctive_pairs`: one order binary per pair of operations that share a resource and
  have no path between them, with big-M rows (Zero Bubble's ILP, Qi et al. ICLR 2024;
  any valid horizon is a valid big-M).
* `order_implications`: ``order[a] <= order[b]`` rows (transitivity along chains).
* `indicator_sum`: sums of ``coef * [first before second]`` or ``coef * [second before
  first]`` over pairs, as an expression per row; used by
* `cumulative_prefix`: a cumulative quantity (memory) counted in start order must stay
  within a capacity at given operations: ``const + sum coef * [j before i] <= cap``.
* `makespan_epigraph`: ``C >= start[i] + duration[i]``.
* `modulo_no_overlap` / `modulo_prefix`: the modulo-schedule (repetend) versions with a
  period variable: one binary per (pair, winding number q); ``start[b] + q T`` falls
  between the end of ``a`` and the start of the next instance of ``a`` (Hanen & Munier's
  cyclic disjunctions, linear because each q is a constant).
"""

from __future__ import annotations

import numpy as np

from distplan.formulations.model import ConBlockInfo, LinExpr, Model, Variable, linear_sum


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


def modulo_no_overlap(
    model: Model,
    sigma: Variable,
    period: Variable,
    first: np.ndarray,
    second: np.ndarray,
    dur_first: np.ndarray,
    dur_second: np.ndarray,
    q_pair: np.ndarray,
    q_value: np.ndarray,
    big_m: np.ndarray,
    name: str,
) -> Variable:
    """Two periodic operations (start ``sigma + r T``) never overlap on a shared resource.

    For each candidate (pair k = q_pair[j], winding number q = q_value[j]) a binary z[j]:
    ``z[j] = 1`` means ``sigma[second] + q T`` lies in ``[sigma[first] + d1, sigma[first] + T - d2]``.
    Rows: one choice per pair (``{name}-choose``), and the two big-M rows
    (``{name}-after-first`` / ``{name}-before-next``). ``big_m[j]`` bounds both rows.
    """
    npairs = np.asarray(first).size
    nz = np.asarray(q_pair).size
    z = model.add_vars(f"{name}-wind", nz, vtype="binary")
    if nz == 0:
        return z
    qp = np.asarray(q_pair, dtype=np.int64)
    q = np.asarray(q_value, dtype=float)
    zi = z.index.reshape(-1)
    model.add_constraints(f"{name}-choose", z.group_sum(qp, npairs) == 1.0)
    s = sigma.index.reshape(-1)
    a = s[np.asarray(first, dtype=np.int64)[qp]]
    b = s[np.asarray(second, dtype=np.int64)[qp]]
    t = np.full(nz, period.index.reshape(-1)[0])
    m = np.asarray(big_m, dtype=float)
    rows = np.arange(nz)
    nv = model.num_vars
    r3 = np.concatenate([rows, rows, rows, rows])
    # sigma_b - sigma_a + q T - M z >= d1 - M
    e1 = linear_sum(np.concatenate([b, a, t, zi]), np.concatenate([np.ones(nz), -np.ones(nz), q, -m]), r3, nz, nv)
    model.add_constraints(f"{name}-after-first", e1 >= np.asarray(dur_first, dtype=float)[qp] - m)
    # sigma_b - sigma_a + (q - 1) T + M z <= M - d2
    e2 = linear_sum(np.concatenate([b, a, t, zi]), np.concatenate([np.ones(nz), -np.ones(nz), q - 1.0, m]), r3, nz, nv)
    model.add_constraints(f"{name}-before-next", e2 <= m - np.asarray(dur_second, dtype=float)[qp])
    return z


def modulo_prefix(
    model: Model,
    z: Variable,
    const: np.ndarray,
    capacity: np.ndarray,
    rows: np.ndarray,
    cols: np.ndarray,
    coef: np.ndarray,
    name: str,
) -> ConBlockInfo | None:
    """Steady-state cumulative quantity at the checked operations of a modulo schedule:
    ``const[r] + sum_k coef[k] z[cols[k]] <= capacity[r]`` where the caller sets
    ``coef = delta_other * (number of instances of the other operation started before
    the checked one, relative to the same period)`` for each winding binary."""
    nrows = np.asarray(const).size
    if nrows == 0:
        return None
    expr = linear_sum(z.index.reshape(-1)[np.asarray(cols, dtype=np.int64)], np.asarray(coef, dtype=float), np.asarray(rows), nrows, model.num_vars)
    return model.add_constraints(name, expr + np.asarray(const, dtype=float) <= np.asarray(capacity, dtype=float))
