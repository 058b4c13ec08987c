"""Pareto fronts of one chain copy in (seconds, bytes) per boundary-state pair, by exact
bi-criteria variable elimination: the arcs of the walk (see `distplan.formulations.sharding.chainfold`)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.deadline import check
from distplan.formulations.sharding.chainfold import Chain
from distplan.formulations.sharding.costgraph import CostTables, Skeleton

# -- Pareto fronts of one copy by bi-criteria variable elimination ----------------------------


@dataclass(eq=False)
class _Table:
    """Rows of partial assignments: live variables, assignment (-1: unset), seconds, bytes.
    Compared by identity: two tables with the same live variables are still two factors
    (``t not in one`` compared their arrays, a ValueError, once the chains of consecutive
    blocks reached `segment_fronts`' separator branch)."""

    live: list[int]
    asg: np.ndarray
    cost: np.ndarray
    mem: np.ndarray
    #: least memory (bytes) of the factors joined into the table: rows whose memory exceeds
    #: it by more than the problem's slack cannot be completed within the budget
    floor: float = 0.0
    #: least cost + lam x memory (seconds) of the factors joined into the table, for the
    #: Lagrangian pruning of `_eliminate` (same lam)
    wfloor: float = 0.0


class TooLarge(RuntimeError):
    """A table of the elimination would exceed its row limit."""


def encode_states(cols: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    key = np.zeros(cols.shape[0], dtype=np.int64)
    for j in range(cols.shape[1]):
        key = key * int(sizes[j]) + cols[:, j]
    return key


#: up to this product of the two tables' rows `_join` pairs them by a dense table of
#: agreement (`_pairs_small`): the sort and searches of `_pairs` cost more while the pairs
#: are few (timed on the joins of the 24-layer GPTs: 4 x 8 rows 46 -> 18 us, 28 x 29 rows
#: 60 -> 48 us, then with a dictionary of keys in Python; 8 x 128 rows (512 pairs) 136 ->
#: 156 us)
SMALL_JOIN = 900


def _pairs_small(a: _Table, b: _Table, common: list[int]) -> tuple[np.ndarray, np.ndarray]:
    """`_join`'s row pairs from the (rows of ``a``) x (rows of ``b``) table of agreement on
    the common variables, read row by row: the same pairs in the same order as `_pairs`
    (rows of ``a`` in order, for each the matching rows of ``b`` in order, as its stable
    sort has them). A few numpy calls whatever the rows, against a Python dictionary of
    keys before (which cost a few Python operations a row: on the 24-layer GPTs of
    bench_sharding, tap's whole solve takes ~2.5% fewer instructions this way)."""
    if not common:
        return np.divmod(np.arange(a.cost.size * b.cost.size), b.cost.size)
    x = common[0]
    agree = a.asg[:, x, None] == b.asg[:, x]
    for x in common[1:]:
        agree &= a.asg[:, x, None] == b.asg[:, x]
    ra, rb = agree.nonzero()
    return ra, rb


def _check_rows(n: int, max_rows: float) -> None:
    """`TooLarge` when a join would have ``n`` > ``max_rows`` rows."""
    if n > max_rows:
        raise TooLarge(f"a join of {n} rows (limit {max_rows:g})")


def _pairs(a: _Table, b: _Table, common: list[int], dom: np.ndarray, max_rows: float) -> tuple[np.ndarray, np.ndarray]:
    """`_join`'s row pairs by a stable sort of ``b``'s keys (mixed-radix codes of the
    common variables) and a search of ``a``'s; counted (`_check_rows`) before they are
    built."""
    if common:
        ka = encode_states(a.asg[:, common], dom[common])
        kb = encode_states(b.asg[:, common], dom[common])
    else:
        ka = np.zeros(a.cost.size, dtype=np.int64)
        kb = np.zeros(b.cost.size, dtype=np.int64)
    ob = np.argsort(kb, kind="stable")
    kbs = kb[ob]
    lo = np.searchsorted(kbs, ka, "left")
    cnt = np.searchsorted(kbs, ka, "right") - lo
    _check_rows(int(cnt.sum()), max_rows)
    ra = np.repeat(np.arange(ka.size), cnt)
    start = np.cumsum(cnt) - cnt
    return ra, ob[lo[ra] + np.arange(ra.size) - start[ra]]


def _join(a: _Table, b: _Table, dom: np.ndarray, max_rows: float = np.inf, deadline: float | None = None) -> _Table:
    """The rows of ``a`` and ``b`` that agree on their common variables, paired: rows of
    ``a`` in order, each with its matching rows of ``b`` in order (assignments merged,
    seconds and bytes added); more than ``max_rows`` pairs raise `TooLarge`, a join begun
    past ``deadline`` (a ``time.perf_counter()`` value) `DeadlineReached`. Pairs found by
    a dense table of agreement up to `SMALL_JOIN` pairs of rows, by a sort above."""
    check(deadline, "tap's Pareto tables")
    common = [x for x in a.live if x in b.live]
    if a.cost.size * b.cost.size <= SMALL_JOIN:
        ra, rb = _pairs_small(a, b, common)
        _check_rows(ra.size, max_rows)
    else:
        ra, rb = _pairs(a, b, common, dom, max_rows)
    live = a.live + [x for x in b.live if x not in a.live]
    return _Table(live, np.maximum(a.asg[ra], b.asg[rb]), a.cost[ra] + b.cost[rb], a.mem[ra] + b.mem[rb], a.floor + b.floor, a.wfloor + b.wfloor)


#: up to this many rows `pareto_rows` sorts in Python: its ~17 numpy calls cost more than
#: sorting tuples below ~100 rows (timed: 20 rows 28 -> 8 us, 60 rows 33 -> 19 us; 150
#: rows 38 vs 60 us)
SMALL_PARETO = 64


def _pareto_rows_small(key: np.ndarray | list[Any], cost: np.ndarray | list[float], mem: np.ndarray | list[float]) -> np.ndarray:
    """`pareto_rows` by a Python sort of (key, memory, cost, row) tuples: the same order
    and ties (the row index last, as the stable lexsort has it), a row kept when strictly
    cheaper than every row before it in its key. Keys: an array, or a list of comparable
    keys (tuples) in the order of the codes."""
    out: list[int] = []
    last: Any = None
    best = 0.0
    keys = key.tolist() if isinstance(key, np.ndarray) else key
    costs = cost.tolist() if isinstance(cost, np.ndarray) else cost
    mems = mem.tolist() if isinstance(mem, np.ndarray) else mem
    for k, _, c, i in sorted(zip(keys, mems, costs, range(len(costs)))):
        if k != last:
            last, best = k, c
            out.append(i)
        elif c < best:
            best = c
            out.append(i)
    return np.array(out, dtype=np.int64)


#: up to this many distinct keys `pareto_rows` takes each key's running least cost by
#: itself, after a sort by (key, memory) only: a two-key lexsort and a few calls per key
#: against a three-key lexsort and a sort of the costs (timed on 1,600 rows of 4 keys:
#: ~60 + 4 x ~5 us against ~130 + 36 us)
FEW_KEYS = 8


def pareto_rows(key: np.ndarray, cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """Indices of the rows not dominated in (seconds, bytes) among the rows of their key
    (one per equal pair), sorted by key then memory. Exact: rows sorted by (key, memory,
    cost) are kept when cheaper than every row before them in their key, compared by cost
    ranks (ties ranked in that order, so an equal later row is dropped).

    With at most `FEW_KEYS` keys, the same rows from a stable sort by (key, memory) alone:
    a row is kept when strictly cheaper than every row before it in its key (its group's
    running minimum); of kept rows of equal key and memory (each cheaper than the one
    before) only the last, the cheapest, is a Pareto row, and it is the first row of least
    cost among them, the one the three-key sort keeps.

    A NaN cost or memory raises ValueError: it has no place in the (seconds, bytes) order,
    and the three paths (Python sort, running minima, three-key sort) would each place it
    differently (a running minimum stays NaN after one, dropping every later row)."""
    n = cost.size
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    # (a minimum is NaN when a term is: ~0.9 us each, against ~1.3 for an isnan scan, and
    # no warning on infinities as a dot product's inf x 0 would give)
    if math.isnan(np.minimum.reduce(cost)) or math.isnan(np.minimum.reduce(mem)):
        raise ValueError("pareto_rows: a NaN cost or memory (seconds, bytes) has no Pareto order")
    if n <= SMALL_PARETO:
        return _pareto_rows_small(key, cost, mem)
    low = int(key.min())
    if int(key.max()) - low < FEW_KEYS:
        return pareto_rows_few(key if low == 0 else key - low, cost, mem)
    order = np.lexsort((cost, mem, key))
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(cost[order], kind="stable")] = np.arange(n)
    k = key[order]
    group = np.zeros(n, dtype=np.int64)
    np.cumsum(k[1:] != k[:-1], out=group[1:])
    score = group * (n + 1) + (n - rank)  # larger = cheaper, groups in increasing blocks
    keep = np.ones(n, dtype=bool)
    keep[1:] = score[1:] > np.maximum.accumulate(score)[:-1]
    return order[keep]


def pareto_rows_few(key: np.ndarray, cost: np.ndarray, mem: np.ndarray) -> np.ndarray:
    """`pareto_rows`' path for few keys (see there), for keys 0 .. `FEW_KEYS` - 1 and no NaN
    cost or memory (seconds, bytes), which callers that know them call directly (the label
    steps of `chain_dp._label_dp`: their states), without `pareto_rows`' checks."""
    order = np.lexsort((mem, key))
    c = cost[order]
    keep = np.empty(key.size, dtype=bool)
    hi = 0
    for size in np.bincount(key).tolist():  # (the groups' sizes, key by key)
        if size:
            lo, hi = hi, hi + size
            part = c[lo:hi]
            keep[lo] = True
            np.less(part[1:], np.minimum.accumulate(part[:-1]), out=keep[lo + 1 : hi])
    rows = order[keep]
    if rows.size > 1:
        kk, mm = key[rows], mem[rows]
        last = np.ones(rows.size, dtype=bool)
        last[:-1] = (kk[1:] != kk[:-1]) | (mm[1:] != mm[:-1])
        rows = rows[last]
    return rows


def _pareto(t: _Table, group: list[int], dom: np.ndarray) -> _Table:
    """Keep, per assignment of ``group``, the rows not dominated in (bytes, seconds)."""
    if t.cost.size == 0:
        return _Table(group, t.asg, t.cost, t.mem, t.floor, t.wfloor)
    if t.cost.size <= SMALL_PARETO:
        # the values of ``group`` as tuples: they sort as their mixed-radix codes do
        # (first variable slowest, every value below its domain size), so the rows are
        # `pareto_rows`' own
        keys: list[Any] = list(map(tuple, t.asg[:, group].tolist())) if group else [0] * t.cost.size
        rows = _pareto_rows_small(keys, t.cost, t.mem)
    else:
        key = encode_states(t.asg[:, group], dom[group]) if group else np.zeros(t.cost.size, dtype=np.int64)
        rows = pareto_rows(key, t.cost, t.mem)
    return _Table(group, t.asg[rows], t.cost[rows], t.mem[rows], t.floor, t.wfloor)


def finite_mask(cost: np.ndarray) -> np.ndarray:
    """The choices a cost array allows: every finite cost (an infinite one,
    `INFINITE_SECONDS`, is a forbidden resharding; NaN counts as forbidden too)."""
    return np.isfinite(cost)


def _eliminate(pool: list[_Table], kept: list[int], dom: np.ndarray, *, slack: float = np.inf, max_rows: float = np.inf, lam: float = 0.0, wslack: float = np.inf, deadline: float | None = None) -> _Table:
    """Eliminate every variable of the pool not in ``kept`` (`_reduce`), then join what is
    left and keep the Pareto rows per assignment of ``kept``.

    Rows whose memory exceeds their table's ``floor`` by more than ``slack`` bytes are
    dropped (no completion fits the budget), and so are rows whose cost + ``lam`` x memory
    exceeds the table's ``wfloor`` by more than ``wslack`` seconds (the caller's
    Lagrangian argument: every completion then costs more than its incumbent); a join
    beyond ``max_rows`` rows raises `TooLarge`."""
    prune = _pruner(slack, lam, wslack)
    if len(pool) == 1:  # (one table: its Pareto rows per assignment of ``kept`` at once)
        return _pareto(prune(pool[0]), kept, dom)
    rest = sorted(_reduce(pool, kept, dom, prune, max_rows, deadline), key=lambda t: t.cost.size)
    joined = rest[0]
    for t in rest[1:]:
        joined = prune(_join(joined, t, dom, max_rows, deadline))
    return _pareto(joined, kept, dom)


def _pruner(slack: float, lam: float, wslack: float) -> Callable[[_Table], _Table]:
    """The row filter of `_eliminate` (see there): memory beyond the floor by more than
    ``slack`` bytes, cost + ``lam`` x memory beyond the weighted floor by more than ``wslack``
    seconds."""

    def prune(t: _Table) -> _Table:
        if np.isfinite(wslack):
            ok = (t.mem - t.floor <= slack) & (t.cost + lam * t.mem - t.wfloor <= wslack)
        elif np.isfinite(slack) and t.mem.size and float(t.mem.max()) - t.floor > slack:
            ok = t.mem - t.floor <= slack  # (an infinite wslack drops no row)
        else:
            return t  # every row within the slack (the largest memory is)
        return t if ok.all() else _Table(t.live, t.asg[ok], t.cost[ok], t.mem[ok], t.floor, t.wfloor)

    return prune


def _reduce(pool: list[_Table], kept: list[int], dom: np.ndarray, prune: Callable[[_Table], _Table] | None = None, max_rows: float = np.inf, deadline: float | None = None) -> list[_Table]:
    """Eliminate every variable of the pool not in ``kept`` (smallest resulting table
    first: the product of the domains of its scope; ties by variable), keeping per
    assignment of the remaining variables the Pareto rows (each join filtered by
    ``prune``): the tables left, over variables of ``kept`` only (not joined)."""
    if prune is None:
        prune = _pruner(np.inf, 0.0, np.inf)
    size = dom.tolist()
    tables: dict[int, _Table] = dict(enumerate(pool))
    by_var: dict[int, set[int]] = {}
    for tid, t in tables.items():
        for y in t.live:
            by_var.setdefault(y, set()).add(tid)
    free = sorted(set(by_var) - set(kept))

    sizes: dict[int, int] = {}  # scope sizes, kept until a table of the scope changes

    def scope_size(x: int) -> int:
        got = sizes.get(x)
        if got is None:
            scope: set[int] = set()
            for tid in by_var[x]:
                scope.update(tables[tid].live)
            got = sizes[x] = math.prod(size[y] for y in scope)
        return got

    next_id = len(pool)
    while free:
        x = min(free, key=scope_size)
        free.remove(x)
        mine_ids = sorted(by_var.pop(x))  # creation order
        mine = [tables.pop(tid) for tid in mine_ids]
        for tid, t in zip(mine_ids, mine):
            for y in t.live:
                sizes.pop(y, None)  # its tables change: the new one replaces these
                if y != x:
                    by_var[y].discard(tid)
        mine.sort(key=lambda t: t.cost.size)
        joined = mine[0]
        for t in mine[1:]:
            joined = prune(_join(joined, t, dom, max_rows, deadline))
        new = _pareto(joined, [y for y in joined.live if y != x], dom)
        tables[next_id] = new
        for y in new.live:
            by_var[y].add(next_id)
        next_id += 1
    return list(tables.values())


def _separator(n: int, P: int, pairs: list[tuple[int, int]], out: set[int], dom: np.ndarray, states: int) -> tuple[int, set[int]] | None:
    """A position j whose removal cuts P (and the positions it reaches) from the out
    positions, with the fewest arcs (states x dom[j] on both sides): (j, P's side) or None."""
    best: tuple[float, int, set[int]] | None = None
    near: dict[int, list[int]] = {}  # each position's neighbours, in the order of the pairs
    for a, b in pairs:
        near.setdefault(a, []).append(b)
        if b != a:
            near.setdefault(b, []).append(a)
    for j in range(n):
        if j in out:
            continue
        seen = {P}
        todo = [P]
        while todo:
            for y in near.get(todo.pop(), ()):
                if y != j and y not in seen:
                    seen.add(y)
                    todo.append(y)
        if seen & out:
            continue
        score = 2.0 * states * float(dom[j])
        if score < states * states and (best is None or score < best[0]):
            best = (score, j, seen - {P})
    return None if best is None else (best[1], best[2])


@dataclass
class CopyCore:
    """One copy's factors with its *interior* positions (neither an out position nor the
    target of a link from the previous copy) eliminated: Pareto tables over the copy's
    positions (columns 0 .. n - 1 of their assignments; column n, the previous copy's state,
    unset). The same for every copy of the chain, the first one included (equal node and
    edge labels per position: `CostTables` gives them the same arrays), so the explicit
    graph's Pareto fronts take them for the chain's first copy instead of eliminating its
    interior again (`chain_dp._side_fronts`)."""

    tables: list[_Table]
    #: strategy index of the edges inside a copy: (position of the tail, position of the
    #: head, the cost matrix the tables were made from), in the chain's order
    internal: list[tuple[int, int, np.ndarray]]
    #: per position, the cost and memory arrays the tables were made from (seconds, bytes)
    node_cost: list[np.ndarray]
    node_memory: list[np.ndarray]


def _copy_factors(chain: Chain, sk: Skeleton, tables: CostTables) -> tuple[np.ndarray, list[_Table], list[_Table], list[_Table], list[tuple[int, int]], CopyCore, list[tuple[int, np.ndarray]]]:
    """A copy's domains (positions, then P: the previous copy's state) and factor tables:
    its nodes', its internal edges' (with their position pairs) and the links' from the
    previous copy (over P and their target), with the parts a `CopyCore` records, and each
    link as (its target position, its resharding seconds per (previous state, target
    strategy)), the numbers of its factor."""
    n = chain.positions
    P = n
    rep = chain.nodes[1]
    nodes = [tables.node(sk, int(i)) for i in rep.tolist()]
    S = chain.num_states
    dom = np.array([len(nc.strategies) for nc in nodes] + [S], dtype=np.int64)
    pos_of = {int(node): j for j, node in enumerate(rep.tolist())}
    pos_prev = {int(node): j for j, node in enumerate(chain.nodes[0].tolist())}
    out_index = {int(p): k for k, p in enumerate(chain.out_pos.tolist())}
    V = n + 1
    node_f: list[_Table] = []
    for j, nc in enumerate(nodes):
        node_f.append(_factor(V, [j], [np.arange(dom[j])], np.asarray(nc.cost, float), np.asarray(nc.memory, float)))
    internal_f: list[_Table] = []
    pairs: list[tuple[int, int]] = []
    internal: list[tuple[int, int, np.ndarray]] = []
    for e in chain.internal_edges.tolist():
        a, b = pos_of[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        M = tables.edge(sk, e)
        flat = np.arange(M.size)
        internal_f.append(_factor(V, [a, b], [flat // dom[b], flat % dom[b]], M.ravel().astype(float), np.zeros(M.size)))
        pairs.append((a, b))
        internal.append((a, b, M))
    digits = chain.digits(np.arange(S))
    link_f: list[_Table] = []
    by_state: list[tuple[int, np.ndarray]] = []
    for e in chain.link_edges.tolist():
        a, b = pos_prev[int(sk.edge_u[e])], pos_of[int(sk.edge_v[e])]
        M = np.asarray(tables.edge(sk, e), float)[digits[:, out_index[a]]]
        flat = np.arange(S * dom[b])
        link_f.append(_factor(V, [P, b], [flat // dom[b], flat % dom[b]], M.ravel(), np.zeros(flat.size)))
        by_state.append((b, M))
        pairs.append((P, b))
    core = CopyCore([], internal, [nc.cost for nc in nodes], [nc.memory for nc in nodes])
    return dom, node_f, internal_f, link_f, pairs, core, by_state


#: `_front_by_state` keeps the Pareto rows of the joined core per interface assignment first
#: only when the (states x rows) array would be larger than this: below it the one Pareto
#: pass at the end costs less than two (24-layer GPTs of bench_sharding, 4 states and 180-276
#: rows: 136 against 153 us a copy)
JOINED_PARETO = 4096


def _front_by_state(core: list[_Table], links: list[tuple[int, np.ndarray]], P: int, out: list[int], dom: np.ndarray, out_sizes: np.ndarray, max_rows: float, deadline: float | None = None) -> _Table:
    """A copy's Pareto rows per (previous state P, strategies of the out positions) from
    its `CopyCore` tables: those joined into one (its Pareto rows per assignment of the
    interface first when large: `JOINED_PARETO`), then every row with every previous
    state at once, its cost (seconds) plus each link's resharding from that state
    (``links``: target position, seconds per (state, target strategy); a row that a link
    forbids, at infinite cost, is left out), its memory (bytes) its own: the rows
    `_eliminate` keeps over the same factors, found by one (states x rows) array instead
    of a join per link and variable. `TooLarge` beyond ``max_rows`` rows."""
    ordered = sorted(core, key=lambda t: t.cost.size)
    joined = ordered[0]
    for t in ordered[1:]:
        joined = _join(joined, t, dom, max_rows, deadline)
    states = int(math.prod(out_sizes.tolist()))
    if states * joined.cost.size > JOINED_PARETO:
        joined = _pareto(joined, sorted(joined.live), dom)
    rows = joined.cost.size
    _check_rows(states * rows, max_rows)
    cost = np.broadcast_to(joined.cost, (states, rows))
    for b, by_prev in links:
        cost = cost + by_prev[:, joined.asg[:, b]]
    own = encode_states(joined.asg[:, out], out_sizes) if out else np.zeros(rows, dtype=np.int64)
    if states <= FEW_KEYS:
        prev, row = _pareto_per_state(cost, own, joined.mem)
        picked = cost[prev, row]
    else:
        key = (np.arange(states)[:, None] * states + own[None, :]).ravel()
        flat = cost.ravel()
        mem = np.broadcast_to(joined.mem, (states, rows)).ravel()
        ok = np.isfinite(flat).nonzero()[0]
        pick = ok[pareto_rows(key[ok], flat[ok], mem[ok])]
        prev, row = np.divmod(pick, rows)
        picked = flat[pick]
    asg = joined.asg[row]
    asg[:, P] = prev
    return _Table([P, *out], asg, picked, joined.mem[row], joined.floor, joined.wfloor)


def _pareto_per_state(cost: np.ndarray, own: np.ndarray, mem: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`_front_by_state`'s Pareto rows for few previous states: per (state, own key) the
    rows of ``cost`` (states x rows, seconds; infinite or NaN: forbidden) and ``mem``
    (bytes, the same for every state) that `pareto_rows` keeps over the finite entries,
    keyed by state x states + own key: (state, row) pairs in its order, by
    `pareto_rows_few` state by state."""
    if mem.size and math.isnan(np.minimum.reduce(mem)):
        raise ValueError("_pareto_per_state: a NaN memory (bytes) has no Pareto order")
    prev: list[np.ndarray] = []
    rows: list[np.ndarray] = []
    for state, line in enumerate(cost):
        ok = np.isfinite(line).nonzero()[0]
        kept = ok[pareto_rows_few(own[ok], line[ok], mem[ok])] if ok.size else ok
        prev.append(np.full(kept.size, state, dtype=np.int64))
        rows.append(kept)
    return np.concatenate(prev), np.concatenate(rows)


def _factor(V: int, live: list[int], cols: list[np.ndarray], cost: np.ndarray, mem: np.ndarray) -> _Table:
    """A factor table over ``live`` (of V variables): the rows of finite cost (every row,
    without copies, when all are: the usual case)."""
    ok = finite_mask(cost)
    if ok.all():
        asg = np.full((cost.size, V), -1, dtype=np.int64)
        for x, c in zip(live, cols):
            asg[:, x] = c
        return _Table(list(live), asg, cost, mem)
    asg = np.full((int(ok.sum()), V), -1, dtype=np.int64)
    for x, c in zip(live, cols):
        asg[:, x] = c[ok]
    return _Table(list(live), asg, cost[ok], mem[ok])


#: most rows of a table while a copy's Pareto arcs are made (`segment_fronts`): beyond it
#: `TooLarge`, and the chain's copies stay unfolded (a 3-layer GPT of hidden 16 on a 2x2x2
#: mesh with sequence splits joined 18.5 million rows there, and ran out of memory at 10 GB)
MAX_ARC_ROWS = 1_000_000


def segment_fronts(chain: Chain, sk: Skeleton, tables: CostTables, core_out: list[CopyCore] | None = None, max_rows: float = MAX_ARC_ROWS, deadline: float | None = None) -> dict[str, np.ndarray]:
    """Walk arcs of a chain: the Pareto-optimal copies in (seconds per iteration, bytes per
    device) per (state of the previous copy, state of this copy), exactly.

    Variables: the n positions of a copy and P (the previous copy's boundary state). Factors:
    node costs and memory, edges inside the copy, and the edges from the previous copy
    (over P and their target). Positions are eliminated one by one, keeping per assignment
    of the remaining variables the Pareto rows; rows carry the assignment of every
    eliminated position, so each arc comes with its strategies. The interior positions (no
    out position, no link target) go first, on the copy's own factors: the `CopyCore`,
    appended to ``core_out`` when given (one walk stage only, see below).

    When one position j separates P from the out positions (the attention output
    projection of a transformer layer), a copy is two arcs in sequence: P -> j (the
    positions on P's side, and j) and j -> state (the rest). A copy's cost and memory are
    the sums of its halves', and a copy made of Pareto-optimal halves dominates any copy
    with the same P, j and state, so the two-stage walk is exact with far fewer arcs.
    Combined state ids: the boundary states first, then the values of j. Returned arrays:
    ``prev``, ``cur`` (state ids), ``first`` (arc leaves a boundary state), ``cost``
    (seconds), ``memory`` (bytes), ``strategy`` (per position, -1 where the arc's half
    does not decide it). `TooLarge` when a table would exceed ``max_rows`` rows;
    `DeadlineReached` past ``deadline`` (a ``time.perf_counter()`` value)."""
    n = chain.positions
    P = n
    S = chain.num_states
    dom, node_f, internal_f, link_f, pairs, core, by_state = _copy_factors(chain, sk, tables)
    V = n + 1
    states = np.arange(S)
    factors = node_f + [_factor(V, [P], [states], np.zeros(S), np.zeros(S))] + internal_f + link_f
    out = [int(p) for p in chain.out_pos.tolist()]
    sep = _separator(n, P, pairs, set(out), dom, S)

    def encode_out(t: _Table) -> np.ndarray:
        return encode_states(t.asg[:, chain.out_pos], chain.out_sizes) if out else np.zeros(t.cost.size, dtype=np.int64)

    if sep is None:
        interface = sorted(set(out) | {b for a, b in pairs if a == P})
        core.tables = _reduce(node_f + internal_f, interface, dom, max_rows=max_rows, deadline=deadline)
        if core_out is not None:
            core_out.append(core)
        try:
            front = _front_by_state(core.tables, by_state, P, out, dom, chain.out_sizes, max_rows, deadline)
        except TooLarge:  # (the core's tables joined whole: elimination may keep fewer rows)
            front = _eliminate(core.tables + [factors[n]] + link_f, [P] + out, dom, max_rows=max_rows, deadline=deadline)
        prev, cur, first = front.asg[:, P], encode_out(front), np.ones(front.cost.size, dtype=bool)
        cost, mem, strat = front.cost, front.mem, front.asg[:, :n]
        chain.num_walk_states = S
    else:
        j, side = sep
        one = [t for t in factors if set(t.live) <= side | {P, j}]
        two = [t for t in factors if t not in one]
        h1 = _eliminate(one, [P, j], dom, max_rows=max_rows, deadline=deadline)
        h2 = _eliminate(two + [_factor(V, [j], [np.arange(dom[j])], np.zeros(dom[j]), np.zeros(dom[j]))], [j] + out, dom, max_rows=max_rows, deadline=deadline)
        prev = np.concatenate([h1.asg[:, P], S + h2.asg[:, j]])
        cur = np.concatenate([S + h1.asg[:, j], encode_out(h2)])
        first = np.concatenate([np.ones(h1.cost.size, dtype=bool), np.zeros(h2.cost.size, dtype=bool)])
        cost, mem = np.concatenate([h1.cost, h2.cost]), np.concatenate([h1.mem, h2.mem])
        s2 = h2.asg[:, :n].copy()
        s2[:, j] = -1
        strat = np.concatenate([h1.asg[:, :n], s2])
        chain.num_walk_states = S + int(dom[j])
    order = np.lexsort((mem, prev, cur))
    return {"prev": prev[order], "cur": cur[order], "first": first[order], "cost": cost[order], "memory": mem[order], "strategy": strat[order]}
