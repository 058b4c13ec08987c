"""Exact solve of a chain-folded sharding problem without a MILP: Pareto dynamic programming.

The folded program of `distplan.formulations.sharding.chainfold` (Alpa's ILP, Zheng et al.,
OSDI 2022, over the explicit nodes, plus a walk of K - 1 copies over boundary states) has a
single memory row. With one chain it is a *resource-constrained shortest path*: the
explicit nodes before and after the walk reduce, by bi-criteria variable elimination
(`chain_fronts._eliminate`), to Pareto fronts in (seconds, bytes) per start state and per
end state; the walk is then a label-setting dynamic program over its 2(K - 1) (or K - 1)
steps, keeping per state only the labels not dominated in (seconds, bytes) (Joksch, "The
shortest route problem with constraints", J. Math. Anal. Appl. 14, 1966; Irnich and
Desaulniers, "Shortest path problems with resource constraints", 2005). A label is dropped
when even the least memory still to come (a backward pass over the steps) exceeds the
budget. Every plan of the folded program is a combination of one row of each front and
one path, and dominance never drops the only cheapest feasible completion, so the best
combination within the budget is the optimum: exhaustive, with no solver tolerance.

Memory is compared with the most any plan the evaluator accepts holds when pruning and for
the bound (`alpa_ilp.memory_limits`' proof limit, ``budget x (1 + MEMORY_TOLERANCE)`` and
rounding room: the bound is the least cost within it, a relaxation), and with the least
the evaluator surely accepts for the plan (its plan limit, rounding room inside; a budget
1 byte below the least-memory plan, which the evaluator accepts, had found no plan within
``<= budget``, and the MILP called it infeasible: review rev16 D2). The size of the search does not depend on K through the
program, only through the steps of the walk; each table and label set is capped at
``max_rows`` rows, beyond which (or when the explicit nodes before and after the walk are
joined other than through it, or there are several chains) the caller solves the MILP.
Units: seconds per iteration, bytes per device.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.sharding.alpa_ilp import memory_limits
from distplan.formulations.sharding.chain_fronts import (
    FEW_KEYS,
    MAX_ARC_ROWS,
    SMALL_PARETO,
    CopyCore,
    TooLarge,
    _eliminate,
    _join,
    _pareto,
    _Table,
    encode_states,
    finite_mask,
    pareto_rows,
    pareto_rows_few,
    segment_fronts,
)
from distplan.formulations.sharding.chain_minsum import cheapest_copy_arcs, dense_sum, pair_factor, scalar_sides
from distplan.formulations.sharding.chain_program import ChainSolution, explicit_graph, folded_variables, plan_memory
from distplan.formulations.sharding.chainfold import Chain, first_copy_feed
from distplan.formulations.sharding.costgraph import CostGraph, CostTables, Skeleton
from distplan.models.graphs import component_roots

#: default cap on the rows of any table or label set of the dynamic program
MAX_ROWS = 1_000_000
#: row limit of the explicit fronts before they are pruned by a Lagrangian bound
FIRST_ROWS = 50_000
#: the first cost cap of the label passes, relative to the Lagrangian bound (x 4 per pass)
FIRST_GAP = 1e-3
#: walks of up to this many states take their scalar passes by repeated min-plus squaring
#: of dense (states x states) matrices: a product costs states^3 against states^2 per step
#: of the plain pass, so squaring wins up to ~16 states (timed on random dense matrices:
#: 1-4x faster at 4-8 states, even at 16, 2-6x slower at 32, 10-100x slower at 64)
SQUARING_STATES = 16
#: walks of up to this many states compute their values to go on dense stage matrices
DENSE_STATES = 64
#: walks of up to this many states get their incumbents from `_Walk.sweep` (Python lists:
#: ~W^2 additions of ~0.1 us per step, against ~5 numpy calls of ~1.5 us per step)
SWEEP_STATES = 8
#: a spliced incumbent (`_Walk.spliced`) within this gap (relative) of the Lagrangian
#: bound caps the first label pass, which is then the last (on the 24-layer GPTs of
#: bench_sharding the splices come within 0.02-1.1% of the bound)
INCUMBENT_GAP = 0.02
#: label steps of up to this many candidates (labels x arcs kept from their states) run
#: in Python lists: ~0.3-1 us per candidate (two further bounds each, once labels pass
#: `FURTHER_LABELS`) against ~40-80 numpy calls of ~1 us per step (on the binding
#: 24-layer GPTs of bench_sharding, after `_kept_arcs`, 0-300 per step; the final label
#: pass, thread CPU, min of 25, at 40 / 80 / 200: 2.07 / 2.09 / 2.19 ms on 410.05,
#: 1.36 / 1.34 / 1.57 on 810.3, 0.99 / 0.89 / 0.89 on 800.05, equal elsewhere)
SMALL_STEP = 80
#: multipliers, relative to the dual's lam, of the label pass's further Lagrangian bounds:
#: a label whose memory is far from its share of the budget is bounded more tightly at
#: another lam than at the dual's (on the binding 24-layer GPTs of bench_sharding, 0.5 and
#: 1.25 drop 17-80% of the labels the dual's lam keeps; more multipliers, up to six
#: between 0.25 and 2.5, drop at most 1-21% of the labels 0.5 and 1.25 keep)
LABEL_MULTIPLIERS = (0.5, 1.25)
#: the further bounds apply from the first label step with more than this many labels:
#: their tables cost about a scalar pass, which passes of a few labels per step do not
#: win back (on the 24-layer GPTs of bench_sharding the binding passes reach 50-300
#: labels per step, the others at most 16-28; from the first step on, 2-16 labels per
#: step cost +1.5% instructions per solve)
FURTHER_LABELS = 24
#: `solve_by_dp` skips the memory-free problem when the budget is below this fraction of the
#: memory of the plan of cheapest nodes (`_memory_binds`): its plan would not fit. A guess
#: only (a wrong one costs time, never exactness): on the 24-layer GPTs of bench_sharding the
#: memory-free plan holds 1.06-1.6 times that memory, and the binding budgets are 0.18-0.62 of it
BINDS_BELOW = 0.75
#: `_label_dp` drops, before building the candidates, the arcs whose least Lagrangian
#: bound exceeds the cut (False: every arc of the stage, the earlier form, for tests)
FILTER_ARCS = True
#: `_label_dp`'s numpy steps with at most `FEW_KEYS` states keep their Pareto labels by
#: `pareto_rows_few`, without `pareto_rows`' NaN and key-range checks (4 reductions a step:
#: a candidate kept has no NaN, and its state is below W); False: `pareto_rows`, for tests
LABEL_FEW_KEYS = True


@dataclass
class DPResult:
    """The best plan of the folded problem within the budget (exact)."""

    #: strategy index per node of the explicit graph (virtual nodes included)
    explicit: np.ndarray
    #: arc index of every step of the walk (stage by stage, copy by copy)
    path: np.ndarray
    cost: float  # seconds
    memory: float  # bytes per device
    #: least cost over every plan within `alpa_ilp.memory_limits`' proof limit: a proven lower bound (seconds)
    bound: float
    labels: int  # labels kept over all steps (a size measure)


def _factors(graph: CostGraph, memory: bool, lam: float = 0.0, covered: tuple[list[int], list[int]] | None = None) -> tuple[list[_Table], np.ndarray]:
    """One table per edge (resharding cost) of the explicit graph, with the cost and
    memory of each node added to the first edge that touches it (fewer joins), and one
    per node without edges; infinite-cost rows removed; ``memory=False`` zeroes the
    memory. A table's floor (its least memory) is at least the sum of its nodes' least.
    Rows are summed in Python lists (tables of a few dozen rows: per-call costs dominate
    numpy there), edge cost + first node's + second node's, as numpy would. ``covered``
    (nodes, edges): parts whose costs other tables hold (`SideCore`), left out."""
    dom = graph.strategy_counts()
    n = dom.size
    out: list[_Table] = []
    small = np.int16 if int(dom.max(initial=0)) < 2**15 else np.int64  # narrow rows: joins copy them
    node_cost = [np.asarray(c, float).tolist() for c in graph.node_cost]
    node_mem = [np.asarray(m, float).tolist() for m in graph.node_memory]

    def add(live: list[int], rows: Sequence[tuple[int, ...]], cost: list[float], mem: list[float]) -> None:
        ok = [k for k, c in enumerate(cost) if math.isfinite(c)]  # (infinite: INFINITE_SECONDS, forbidden)
        asg = np.full((len(ok), n), -1, dtype=small)
        if ok:
            asg[:, live] = [rows[k] for k in ok]
        c = [cost[k] for k in ok]
        m = [mem[k] for k in ok] if memory else [0.0] * len(ok)
        floor = min(m) if m else 0.0
        wfloor = min(x + lam * y for x, y in zip(c, m)) if m else 0.0
        out.append(_Table(live, asg, np.array(c, dtype=float), np.array(m, dtype=float), floor, wfloor))

    absorbed = [False] * n
    skip: set[int] = set()
    if covered is not None:
        for i in covered[0]:
            absorbed[i] = True
        skip = set(covered[1])
    for e, (u, v) in enumerate(zip(graph.edge_u.tolist(), graph.edge_v.tolist())):
        if e in skip:
            continue
        matrix = np.asarray(graph.edge_cost[e], float).tolist()
        cu = node_cost[u] if not absorbed[u] else None
        mu = node_mem[u] if not absorbed[u] else None
        absorbed[u] = True
        cv = node_cost[v] if not absorbed[v] else None
        mv = node_mem[v] if not absorbed[v] else None
        absorbed[v] = True
        rows, cost, mem = [], [], []
        for i, line in enumerate(matrix):
            for j, x in enumerate(line):
                rows.append((i, j))
                if cu is not None:
                    x = x + cu[i]
                if cv is not None:
                    x = x + cv[j]
                cost.append(x)
                mem.append((mu[i] if mu is not None else 0.0) + (mv[j] if mv is not None else 0.0))
        add([u, v], rows, cost, mem)
    for i in range(n):
        if not absorbed[i]:
            add([i], [(k,) for k in range(int(dom[i]))], node_cost[i], node_mem[i])
    return out, dom


#: `_side_fronts` enumerates every part of the explicit graph whose joint strategies number
#: at most this many (`_small_parts`: one table of every joint strategy per part, instead of
#: a table per edge eliminated node by node; a GPT's embedding and its head, 8 and 96 rows)
SMALL_PART = 1024


def _small_parts(graph: CostGraph) -> tuple[list[_Table], np.ndarray] | None:
    """The explicit graph as one factor table per part (connected component) holding every
    joint strategy of its nodes of finite cost (seconds: node costs, then each edge's
    resharding, in edge order; bytes: node memory), or None when a part has more than
    `SMALL_PART` joint strategies. A table's floor is the sum of its nodes' least memory
    over their strategies of finite cost (bytes), at most any row's, as the pruning of
    `_eliminate` requires."""
    dom = graph.strategy_counts()
    n = dom.size
    eu, ev = graph.edge_u.tolist(), graph.edge_v.tolist()
    comp = component_roots(n, graph.edge_u, graph.edge_v).tolist()
    members: dict[int, list[int]] = {}
    for i, c in enumerate(comp):
        members.setdefault(c, []).append(i)
    sizes = dom.tolist()
    if any(math.prod(sizes[i] for i in nodes) > SMALL_PART for nodes in members.values()):
        return None
    edges: dict[int, list[int]] = {}
    for e, (u, v) in enumerate(zip(eu, ev)):
        if u == v:
            return None  # (a loop: no matrix over two axes)
        edges.setdefault(comp[u], []).append(e)
    small = np.int16 if max(sizes, default=0) < 2**15 else np.int64
    out = []
    for c, nodes in members.items():
        scope, shape = tuple(nodes), tuple(sizes[i] for i in nodes)
        node_cost = [np.asarray(graph.node_cost[i], float) for i in nodes]
        node_mem = [np.asarray(graph.node_memory[i], float) for i in nodes]
        edge_f = [pair_factor(eu[e], ev[e], np.asarray(graph.edge_cost[e], float)) for e in edges.get(c, [])]
        cost = dense_sum([((i,), x) for i, x in zip(nodes, node_cost)] + edge_f, scope, shape)
        mem = dense_sum([((i,), x) for i, x in zip(nodes, node_mem)], scope, shape)
        allowed = [finite_mask(x) for x in node_cost]
        floor = sum(float(m[ok].min()) if ok.any() else 0.0 for ok, m in zip(allowed, node_mem))
        flat = cost.ravel()
        ok = finite_mask(flat).nonzero()[0]
        asg = np.full((ok.size, n), -1, dtype=small)
        asg[:, nodes] = np.stack(np.unravel_index(ok, shape), axis=1)
        out.append(_Table(nodes, asg, flat[ok], mem.ravel()[ok], floor, 0.0))
    return out, dom


@dataclass
class SideCore:
    """The chain's first copy in the explicit graph with its interior eliminated: the
    chain's `CopyCore` on the explicit nodes of that copy (``nodes``, per position), whose
    inner edges are ``edges``. Each table's floor is its least memory (bytes), at least the
    sum of its nodes' least, as the pruning of `_eliminate` requires."""

    nodes: list[int]
    edges: list[int]
    tables: list[_Table]


def _side_core(core: CopyCore, chain: Chain, graph: CostGraph, origin: np.ndarray) -> SideCore | None:
    """The `SideCore` of the chain's first copy, or None when the explicit graph does not
    hold that copy as the core was made (its nodes' cost and memory arrays and its inner
    edges' matrices, by position, must be the very ones the core was made from)."""
    where = {int(x): i for i, x in enumerate(origin.tolist()) if x >= 0}
    var = [where.get(int(x), -1) for x in chain.nodes[0].tolist()]
    if min(var, default=-1) < 0 or any(t.cost.size == 0 for t in core.tables):
        return None
    for j, i in enumerate(var):
        if graph.node_cost[i] is not core.node_cost[j] or graph.node_memory[i] is not core.node_memory[j]:
            return None
    pos = {i: j for j, i in enumerate(var)}
    inner: dict[tuple[int, int], list[np.ndarray]] = {}
    for a, b, M in core.internal:
        inner.setdefault((a, b), []).append(M)
    edges = []
    for e, (u, v) in enumerate(zip(graph.edge_u.tolist(), graph.edge_v.tolist())):
        if u in pos and v in pos:
            got = inner.get((pos[u], pos[v]))
            if not got or not any(graph.edge_cost[e] is M for M in got):
                return None
            got.remove(next(M for M in got if graph.edge_cost[e] is M))
            edges.append(e)
    if any(inner.values()):
        return None
    n, cols = len(graph.node_cost), np.array(var, dtype=np.int64)
    tables = []
    for t in core.tables:
        asg = np.full((t.cost.size, n), -1, dtype=t.asg.dtype)
        asg[:, cols] = t.asg[:, : cols.size]
        tables.append(_Table([var[j] for j in t.live], asg, t.cost, t.mem, float(t.mem.min()), 0.0))
    return SideCore(var, edges, tables)


def _side_fronts(graph: CostGraph, start_vars: list[int], end_vars: list[int], slack: float, max_rows: float, memory: bool = True, lag: tuple[float, float, float, float] | None = None, core: SideCore | None = None) -> tuple[_Table, _Table] | None:
    """Pareto fronts of the explicit nodes per start state and per end state (rows keyed by
    ``start_vars`` / ``end_vars``); None when a part of the explicit graph touches both.

    ``lag = (lam, upper + lam x budget, rest of the start side, rest of the end side)``
    prunes by Lagrangian relaxation (seconds): a plan of cost C within the budget has C >=
    its cost + lam x memory - lam x budget, and that is at least a row's excess (its cost +
    lam x memory above its factors' least) plus the least of every factor of its side plus
    the least Lagrangian cost of the rest (walk and other side); rows whose bound exceeds
    ``upper`` (a plan's cost) are dropped.

    ``core``: the chain's first copy with its interior eliminated (`SideCore`), in place
    of the factors of its nodes and inner edges (with ``memory`` only)."""
    lam = lag[0] if lag is not None else 0.0
    if core is None and lag is None and memory:
        small = _small_parts(graph)
        if small is not None:
            factors, dom = small
            return _fronts_of(factors, dom, graph, start_vars, end_vars, slack, max_rows, lam, None)
    if core is not None and memory:
        factors, dom = _factors(graph, memory, lam, (core.nodes, core.edges))
        factors += [_Table(t.live, t.asg, t.cost, t.mem, t.floor, float(np.min(t.cost + lam * t.mem))) for t in core.tables]
    else:
        factors, dom = _factors(graph, memory, lam)
    return _fronts_of(factors, dom, graph, start_vars, end_vars, slack, max_rows, lam, lag)


def _fronts_of(factors: list[_Table], dom: np.ndarray, graph: CostGraph, start_vars: list[int], end_vars: list[int], slack: float, max_rows: float, lam: float, lag: tuple[float, float, float, float] | None) -> tuple[_Table, _Table] | None:
    """`_side_fronts` from the explicit graph's factor tables (each over nodes of one part
    of the graph): per part the Pareto rows per assignment of its start or end nodes, the
    parts of each side joined."""
    n = dom.size
    eu, ev = graph.edge_u, graph.edge_v
    comp = component_roots(n, eu, ev)
    is_start = np.zeros(n, dtype=bool)
    is_start[start_vars] = True
    is_end = np.zeros(n, dtype=bool)
    is_end[end_vars] = True
    if set(comp[is_start].tolist()) & set(comp[is_end].tolist()):
        return None
    pools: dict[int, list[_Table]] = {}
    for t in factors:
        pools.setdefault(int(comp[t.live[0]]), []).append(t)
    start_side: list[_Table] = []
    end_side: list[_Table] = []
    at_end = {c: bool(is_end[comp == c].any()) for c in pools}
    wslack = [np.inf, np.inf]
    if lag is not None:
        for side in (0, 1):
            least = sum(t.wfloor for c, pool in pools.items() if at_end[c] == bool(side) for t in pool)
            wslack[side] = lag[1] * (1 + 1e-9) - least - lag[2 + side]
    for c, pool in sorted(pools.items()):
        members = np.flatnonzero(comp == c)
        kept = [int(x) for x in members if is_start[x] or is_end[x]]
        table = _eliminate(pool, kept, dom, slack=slack, max_rows=max_rows, lam=lam, wslack=wslack[at_end[c]])
        (end_side if at_end[c] else start_side).append(table)

    def combine(tables: list[_Table], keys: list[int], wslack: float) -> _Table:
        if not tables:
            return _Table([], np.full((1, n), -1, dtype=np.int64), np.zeros(1), np.zeros(1), 0.0)
        if len(tables) == 1 and tables[0].live == keys:
            return tables[0]  # `_eliminate` kept its Pareto rows per assignment of the keys
        tables = sorted(tables, key=lambda t: t.cost.size)
        joined = tables[0]
        for t in tables[1:]:
            joined = _join(joined, t, dom, max_rows)
            ok = (joined.mem - joined.floor <= slack) & (joined.cost + lam * joined.mem - joined.wfloor <= wslack)
            joined = _Table(joined.live, joined.asg[ok], joined.cost[ok], joined.mem[ok], joined.floor, joined.wfloor)
        return _pareto(joined, keys, dom)

    return combine(start_side, start_vars, wslack[0]), combine(end_side, end_vars, wslack[1])


def _keyed(t: _Table, vars_: list[int], sizes: np.ndarray) -> np.ndarray:
    return encode_states(t.asg[:, vars_], sizes) if vars_ else np.zeros(t.cost.size, dtype=np.int64)


def _expand(cnt: np.ndarray, first: np.ndarray, src: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pairs (item of ``src``, row) for every row in each item's range of rows ``first[i]``
    .. ``first[i] + cnt[i] - 1`` (rows sorted by state: the range of the item's state)."""
    item = np.repeat(src, cnt)
    # the k-th pair of item i is row first[i] + k: one repeat of the shift
    return item, np.arange(item.size) + np.repeat(first - (np.cumsum(cnt) - cnt), cnt)


def _best_per_key(key: np.ndarray, weight: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Least weight per key (inf where none) and its row (-1 where none)."""
    value = np.full(size, np.inf)
    row = np.full(size, -1, dtype=np.int64)
    if key.size:
        order = np.lexsort((weight, key))
        first = np.ones(order.size, dtype=bool)
        first[1:] = key[order][1:] != key[order][:-1]
        value[key[order[first]]] = weight[order[first]]
        row[key[order[first]]] = order[first]
    return value, row


@dataclass
class _Walk:
    """The walk's steps and the fronts at its ends, for the scalar and label passes."""

    chain: Chain
    stage_arcs: list[np.ndarray]
    steps: int
    arc_mem: np.ndarray
    front_start: _Table
    front_end: _Table
    key_start: np.ndarray
    key_end: np.ndarray
    #: (lam, least weight per state after the last step from any start) of the last `scalar` pass
    forward: tuple[float, np.ndarray] | None = None
    #: `weighed`'s tables per lam
    tables: dict[float, Any] = dataclasses.field(default_factory=dict)

    @property
    def W(self) -> int:
        return self.chain.num_walk_states

    def stage_matrices(self, weight: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per stage, the least arc weight per (from, to) state pair and its arc (-1: none)."""
        a, W = self.chain.arcs, self.W
        out = []
        for idx in self.stage_arcs:
            value, row = _best_per_key(a["prev"][idx] * W + a["cur"][idx], weight[idx], W * W)
            out.append((value.reshape(W, W), np.where(row >= 0, idx[np.maximum(row, 0)], -1).reshape(W, W)))
        return out

    def weighed(self, lam: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
        """Under cost + lam x memory: the least weight per state of the start front and
        of the end front with their rows, and the stage matrices (kept per lam: `sweep`
        takes the multipliers `scalar` took)."""
        got = self.tables.get(lam)
        if got is None:
            got = self.tables[lam] = self._grouped(lam) or self._weighed_each(lam)
        return got

    def _weighed_each(self, lam: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
        """`weighed` front by front and stage by stage (`_best_per_key`): the general form."""
        a, W, fs, fe = self.chain.arcs, self.W, self.front_start, self.front_end
        return (
            _best_per_key(self.key_start, fs.cost + lam * fs.mem, W),
            _best_per_key(self.key_end, fe.cost + lam * fe.mem, W),
            self.stage_matrices(a["cost"] + lam * self.arc_mem),
        )

    @functools.cached_property
    def _groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The items of `weighed` (start front rows, end front rows, each stage's arcs) as
        one array of seconds and one of bytes, sorted stably by their slot (start state,
        W + end state, 2W + stage x W^2 + from x W + to): the sorted order, each group's
        first position and size, its slot, each sorted item's row or arc, and positions
        0 .. items - 1 (`_grouped`)."""
        a, W, fs, fe = self.chain.arcs, self.W, self.front_start, self.front_end
        parts = [self.key_start, W + self.key_end] + [2 * W + s * W * W + a["prev"][idx] * W + a["cur"][idx] for s, idx in enumerate(self.stage_arcs)]
        slot = np.concatenate(parts).astype(np.int64)
        item = np.concatenate([np.arange(fs.cost.size), np.arange(fe.cost.size)] + list(self.stage_arcs)).astype(np.int64)
        cost = np.concatenate([fs.cost, fe.cost] + [a["cost"][idx] for idx in self.stage_arcs])
        mem = np.concatenate([fs.mem, fe.mem] + [self.arc_mem[idx] for idx in self.stage_arcs])
        order = np.argsort(slot, kind="stable")
        s = slot[order]
        first = np.flatnonzero(np.r_[True, s[1:] != s[:-1]]) if s.size else np.zeros(0, dtype=np.int64)
        size = np.diff(np.r_[first, s.size])
        return cost[order], mem[order], first, size, s[first], item[order], np.arange(s.size), np.full(2 * W + len(self.stage_arcs) * W * W, np.inf)

    def _grouped(self, lam: float) -> tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray], list[tuple[np.ndarray, np.ndarray]]] | None:
        """`weighed` in one pass over every item (~12 numpy calls against ~40 for the
        fronts and stages one by one): per slot the least weight (cost + lam x memory,
        seconds, summed item by item as there) and, among the items of that weight, the
        first in row or arc order, as the stable lexsort of `_best_per_key` picks it.
        None when a weight is NaN (where that sort and a minimum differ) or there are no
        items: `_weighed_each` then."""
        cost, mem, first, size, slot, item, pos, empty = self._groups
        if not first.size:
            return None
        w = cost + lam * mem
        least = np.minimum.reduceat(w, first)
        if math.isnan(np.minimum.reduce(least)):
            return None
        pick = np.minimum.reduceat(np.where(w == np.repeat(least, size), pos, pos.size), first)
        value = empty.copy()
        value[slot] = least
        row = np.full(value.size, -1, dtype=np.int64)
        row[slot] = item[pick]
        W, n = self.W, len(self.stage_arcs)
        mats = [(value[2 * W + s * W * W : 2 * W + (s + 1) * W * W].reshape(W, W), row[2 * W + s * W * W : 2 * W + (s + 1) * W * W].reshape(W, W)) for s in range(n)]
        return (value[:W], row[:W]), (value[W : 2 * W], row[W : 2 * W]), mats

    def scalar(self, lam: float) -> tuple[float, float, float, tuple[np.ndarray, np.ndarray, float]] | None:
        """The plan of least cost + lam x memory (dynamic program over the steps on dense
        state matrices, by repeated min-plus squaring up to `SQUARING_STATES` states): its
        weight, cost, memory and (explicit strategies, arcs, memory)."""
        a, W = self.chain.arcs, self.W
        fs, fe = self.front_start, self.front_end
        (start_w, start_row), (end_w, end_row), mats = self.weighed(lam)
        cols = np.arange(W)
        squaring = W <= SQUARING_STATES and self.steps % len(mats) == 0 and self.steps > 0
        if squaring:
            walk = _MinPlusWalk(mats, self.steps // len(mats))
            M = start_w[:, None] + walk.value
            first = M.argmin(axis=0)
            val = M[first, cols]
        else:
            val = start_w
            back = []
            for t in range(self.steps):
                M = val[:, None] + mats[t % len(mats)][0]
                arg = M.argmin(axis=0)
                val = M[arg, cols]
                back.append(arg)
        self.forward = (lam, val)
        total = val + end_w
        end = int(np.argmin(total))
        if not np.isfinite(total[end]):
            return None
        if squaring:
            state = int(first[end])
            path = np.array(walk.path(state, end), dtype=np.int64)
        else:
            path = np.zeros(self.steps, dtype=np.int64)
            state = end
            for t in range(self.steps - 1, -1, -1):
                prev = int(back[t][state])
                path[t] = mats[t % len(mats)][1][prev, state]
                state = prev
        r0, r1 = int(start_row[state]), int(end_row[end])
        cost = float(fs.cost[r0] + a["cost"][path].sum() + fe.cost[r1])
        mem = float(fs.mem[r0] + self.arc_mem[path].sum() + fe.mem[r1])
        return float(total[end]), cost, mem, (np.maximum(fs.asg[r0], fe.asg[r1]), path, mem)

    def from_start(self, lam: float) -> np.ndarray:
        """(steps + 1, W): least cost + lam x memory (seconds) from the start front to each
        state after each step (inf where none), on the dense stage matrices up to
        `DENSE_STATES` states, else arc by arc."""
        a, W, fs = self.chain.arcs, self.W, self.front_start
        out = np.full((self.steps + 1, W), np.inf)
        if W <= DENSE_STATES:
            (out[0], _), _, mats = self.weighed(lam)
            for t in range(self.steps):
                out[t + 1] = (out[t][:, None] + mats[t % len(mats)][0]).min(axis=0)
            return out
        out[0] = _best_per_key(self.key_start, fs.cost + lam * fs.mem, W)[0]
        weight = a["cost"] + lam * self.arc_mem
        for t in range(self.steps):
            idx = self.stage_arcs[t % len(self.stage_arcs)]
            np.minimum.at(out[t + 1], a["cur"][idx], out[t][a["prev"][idx]] + weight[idx])
        return out

    def to_go(self, weight: np.ndarray, end_weight: np.ndarray) -> np.ndarray:
        """(steps + 1, W): least weight from each state at each step to the end (on the
        dense stage matrices up to `DENSE_STATES` states: the least over a (from, to)
        pair's arcs of weight + value to go is the pair's least weight + value to go,
        exactly, as rounding is monotone)."""
        if self.W <= DENSE_STATES:
            return self._dense_to_go(weight[None, :], end_weight[None, :])[0]
        a = self.chain.arcs
        out = np.full((self.steps + 1, self.W), np.inf)
        np.minimum.at(out[self.steps], self.key_end, end_weight)
        for t in range(self.steps - 1, -1, -1):
            idx = self.stage_arcs[t % len(self.stage_arcs)]
            np.minimum.at(out[t], a["prev"][idx], weight[idx] + out[t + 1][a["cur"][idx]])
        return out

    def to_go_many(self, lams: Sequence[float]) -> np.ndarray:
        """(len(lams), steps + 1, W): `to_go` of cost + lam x memory for each lam (seconds),
        the same values bit for bit; up to `DENSE_STATES` states in one pass for all lams."""
        a, fe = self.chain.arcs, self.front_end
        lam = np.asarray(lams, dtype=float)[:, None]
        if self.W > DENSE_STATES:
            return np.array([self.to_go(a["cost"] + x * self.arc_mem, fe.cost + x * fe.mem) for x in lams])
        return self._dense_to_go(a["cost"] + lam * self.arc_mem, fe.cost + lam * fe.mem)

    def _dense_to_go(self, weight: np.ndarray, end_weight: np.ndarray) -> np.ndarray:
        """`to_go` on dense stage matrices for several weightings at once: ``weight`` (L,
        arcs) and ``end_weight`` (L, end front rows) give (L, steps + 1, W); a pair's least
        weight per weighting by one reduction over its arcs, grouped by pair."""
        a, W, L = self.chain.arcs, self.W, weight.shape[0]
        out = np.full((L, self.steps + 1, W), np.inf)
        for k in range(L):
            np.minimum.at(out[k, self.steps], self.key_end, end_weight[k])
        mats = []
        for idx in self.stage_arcs:
            key = a["prev"][idx] * W + a["cur"][idx]
            order = np.argsort(key, kind="stable")
            k = key[order]
            m = np.full((L, W * W), np.inf)
            if k.size:
                first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
                m[:, k[first]] = np.minimum.reduceat(weight[:, idx[order]], first, axis=1)
            mats.append(m.reshape(L, W, W))
        for t in range(self.steps - 1, -1, -1):
            out[:, t] = (mats[t % len(mats)] + out[:, t + 1][:, None, :]).min(axis=2)
        return out

    def sweep(self, lam: float, forward: bool) -> _Sweep:
        """The least cost + lam x memory from the start front to each state after each
        step (``forward``), or from each state at each step to the end front, with that
        path's cost (seconds), memory (bytes) and arcs; on the dense stage matrices in
        Python lists (for walks of up to `SWEEP_STATES` states: a handful of numpy calls
        per step would cost more). Backward values equal `to_go`'s bit for bit (the same
        sums, in the same order); ties go to the least state."""
        a, T = self.chain.arcs, self.steps
        front = self.front_start if forward else self.front_end
        start, end, stage = self.weighed(lam)
        w0, r0 = start if forward else end
        mats = [(v.tolist(), arc.tolist()) for v, arc in stage]
        if forward:  # columns: into each state
            mats = [([list(c) for c in zip(*V)], [list(c) for c in zip(*A)]) for V, A in mats]
        # (no arc: -1, which picks the inf appended)
        acost, amem = a["cost"].tolist() + [np.inf], self.arc_mem.tolist() + [np.inf]
        rows: list[int] = r0.tolist()
        val: list[float] = w0.tolist()
        cost = [float(front.cost[r]) if r >= 0 else np.inf for r in rows]
        mem = [float(front.mem[r]) if r >= 0 else np.inf for r in rows]
        vals, costs, mems = [val], [cost], [mem]
        arcs: list[list[int]] = []
        for t in range(T) if forward else range(T - 1, -1, -1):
            V, A = mats[t % len(mats)]
            # forward: into y from the least x; backward: out of x to the least y, as
            # `to_go` sums (arc weight + value to go); inf everywhere picks the first
            # (one row of the matrices at a time: a state's value, arc, cost and memory)
            nval: list[float] = []
            arc: list[int] = []
            ncost: list[float] = []
            nmem: list[float] = []
            for row, Ar in zip(V, A):
                r = [v + w for v, w in zip(val, row)] if forward else [w + v for w, v in zip(row, val)]
                least = min(r)
                z = r.index(least)
                e = Ar[z]
                nval.append(least)
                arc.append(e)
                ncost.append(cost[z] + acost[e])
                nmem.append(mem[z] + amem[e])
            val, cost, mem = nval, ncost, nmem
            vals.append(val)
            costs.append(cost)
            mems.append(mem)
            arcs.append(arc)
        if not forward:
            vals.reverse()
            costs.reverse()
            mems.reverse()
            arcs.reverse()
        return _Sweep(forward, np.array(vals), np.array(costs), np.array(mems), arcs, rows)

    def complete(self, r0: int, prefix: list[int], state: int, backward: _Sweep) -> tuple[float, float, tuple[np.ndarray, np.ndarray, float]]:
        """The plan of start row ``r0``, the arcs ``prefix`` (its first steps, ending at
        ``state``) and from there ``backward``'s path to the end front: its cost
        (seconds), memory (bytes) and (explicit strategies, arcs, memory), summed as
        `scalar` sums them."""
        a, fs, fe = self.chain.arcs, self.front_start, self.front_end
        path = np.zeros(self.steps, dtype=np.int64)
        path[: len(prefix)] = prefix
        for u in range(len(prefix), self.steps):
            path[u] = backward.arc[u][state]
            state = int(a["cur"][path[u]])
        r1 = backward.row[state]
        cost = float(fs.cost[r0] + a["cost"][path].sum() + fe.cost[r1])
        mem = float(fs.mem[r0] + self.arc_mem[path].sum() + fe.mem[r1])
        return cost, mem, (np.maximum(fs.asg[r0], fe.asg[r1]), path, mem)

    def spliced(self, lams: tuple[float, ...], backward: _Sweep, budget: float) -> tuple[float, tuple[np.ndarray, np.ndarray, float]] | None:
        """The cheapest plan within ``budget`` that follows the walk of least cost + lam x
        memory for one of ``lams`` up to some step and state, and ``backward``'s after it
        (a primal heuristic on the Lagrangian search: ``backward`` is its sweep at the
        dual's multiplier, ``lams`` the multiplier of its last plan on the other side of
        the budget; the optimum often mixes copies of the two). None when none fits."""
        best: tuple[float, int, int, _Sweep] | None = None
        for lam in sorted(set(lams)):
            f = self.sweep(lam, True)
            cost, mem = f.cost + backward.cost, f.mem + backward.mem
            cost[~(mem <= budget)] = np.inf
            k = int(np.argmin(cost))
            if np.isfinite(cost.flat[k]) and (best is None or cost.flat[k] < best[0]):
                best = (float(cost.flat[k]), *divmod(k, self.W), f)
        if best is None:
            return None
        _, t, state, f = best
        prev = self.chain.arcs["prev"]
        prefix, s = [0] * t, state
        for u in range(t - 1, -1, -1):
            prefix[u] = f.arc[u][s]
            s = int(prev[prefix[u]])
        c, m, plan = self.complete(f.row[s], prefix, state, backward)
        return (c, plan) if m <= budget else None


@dataclass
class _Sweep:
    """`_Walk.sweep`: per step t (0 .. steps) and state, the least cost + lam x memory of
    the walk's first t steps from the start front (``forward``) or of its steps t .. end
    to the end front (seconds), that path's cost (seconds) and memory (bytes); per step
    the arc of that path (forward: into the state after step t; backward: out of the
    state at step t; -1 where none) and per state the front row at the walk's end."""

    forward: bool
    value: np.ndarray
    cost: np.ndarray
    mem: np.ndarray
    arc: list[list[int]]
    row: list[int]


class _MinPlusWalk:
    """The min-plus product of ``periods`` repetitions of the stage matrices (value and arc
    per (from, to) state pair, as `_Walk.stage_matrices` gives them) by repeated squaring,
    with the intermediate state of every product, so the best path between two states is
    recovered arc by arc. Ties go to the least intermediate state. Values in seconds (the
    weights the stage matrices hold). Min-plus matrix powers by repeated squaring, as for
    all-pairs shortest paths (Cormen, Leiserson, Rivest and Stein, "Introduction to
    Algorithms", 3rd ed., section 25.1): log2(periods) products instead of one step per
    period."""

    def __init__(self, mats: list[tuple[np.ndarray, np.ndarray]], periods: int):
        self.mats = mats
        #: per node: (value, left node, right node, argmin state per (from, to)); leaves:
        #: (value, -1, stage, None)
        self.nodes: list[tuple[np.ndarray, int, int, list[list[int]] | None]] = []
        self.arcs = [arc.tolist() for _, arc in mats]
        period = self._leaf(0)
        for s in range(1, len(mats)):
            period = self._product(period, self._leaf(s))
        result, power, n = -1, period, periods
        while n:
            if n & 1:
                result = power if result < 0 else self._product(result, power)
            n >>= 1
            if n:
                power = self._product(power, power)
        self.root = result
        self.value = self.nodes[result][0]

    def _leaf(self, stage: int) -> int:
        self.nodes.append((self.mats[stage][0], -1, stage, None))
        return len(self.nodes) - 1

    def _product(self, left: int, right: int) -> int:
        T = self.nodes[left][0][:, :, None] + self.nodes[right][0][None, :, :]
        self.nodes.append((T.min(axis=1), left, right, T.argmin(axis=1).tolist()))
        return len(self.nodes) - 1

    def path(self, i: int, j: int) -> list[int]:
        """The arcs of the best path from state i to state j, step by step."""
        out: list[int] = []
        todo = [(self.root, i, j)]
        while todo:
            node, x, y = todo.pop()
            _, left, right, mid = self.nodes[node]
            if mid is None:
                out.append(self.arcs[right][x][y])
                continue
            m = mid[x][y]
            todo.append((right, m, y))
            todo.append((left, x, m))
        return out


def _lagrange(solve: Callable[[float], Any], budget: float, deadline: float | None, least: tuple[float, float] | None = None) -> tuple[float, float, tuple[float, Any] | None, float]:
    """The Lagrangian dual of the memory row, max over lam >= 0 of min (cost + lam x
    (memory - budget)), by walking the hull between a plan over budget and one within it
    (lam = the slope between them, until no plan lies below that line). Returns lam, the
    dual value (a lower bound, seconds), the best plan within budget seen (cost, plan)
    and the multiplier of the last hull plan on the other side of the budget from lam's
    own plan (the partner of `_Walk.spliced`).
    ``solve(lam)``: the plan of least cost + lam x memory as `_Walk.scalar` gives it.
    ``least``: the cost (seconds) and memory (bytes) of a cheapest plan of a relaxation
    (a problem holding every plan of ``solve``: the memory-free one of `solve_by_dp`);
    when over budget, the walk starts from it instead of ``solve(0.0)``, a pass saved. It
    is ``solve(0.0)``'s plan when the fronts dropped no row, else a point below its hull:
    every bound stays valid (the relaxation's least cost, or ``solve``'s least weight at
    some lam less lam x budget), though the walk may end at another lam."""
    # plans count as within budget up to the plan limit, the dual value is at the proof
    # limit (a bound on every plan the evaluator accepts): `alpa_ilp.memory_limits`
    budget, proof = memory_limits(budget)
    got = (least[0], least[0], least[1], None) if least is not None and least[1] > budget else solve(0.0)
    if got is None:
        return 0.0, np.inf, None, 0.0
    _, c1, m1, p1 = got
    if m1 <= budget:
        return 0.0, c1, (c1, p1), 0.0
    # a plan of least memory (cost as a tie-breaker at a tiny weight)
    scale = max(c1, 1e-300) / max(m1, 1.0)
    lam1, lam2 = 0.0, 1e9 * scale
    got = solve(lam2)
    if got is None or got[2] > budget:
        return 0.0, -np.inf, None, lam2
    _, c2, m2, p2 = got
    best = (c2, p2)
    lam, lower, over = 0.0, c1, True
    for _ in range(60):
        if deadline is not None and time.perf_counter() > deadline:
            raise DeadlineReached("tap: the Lagrangian search ran out of time")
        if m1 <= m2:
            break
        lam = max((c2 - c1) / (m1 - m2), 0.0)
        weight, c, m, plan = solve(lam)
        lower = max(lower, weight - lam * proof)
        over = m > budget
        if not over and c < best[0]:
            best = (c, plan)
        line = c1 + lam * m1
        if weight >= line - 1e-12 * abs(line):
            break  # nothing below the line through the two plans: lam is the dual optimum
        if m > budget:
            c1, m1, lam1 = c, m, lam
        else:
            c2, m2, lam2 = c, m, lam
    return lam, lower, best, lam2 if over else lam1


def _scalar_lagrange(walk_of: Callable[[tuple[_Table, _Table]], _Walk], graph: CostGraph, start_vars: list[int], end_vars: list[int], budget: float, deadline: float | None, max_rows: float) -> tuple[float, float, tuple[float, Any], tuple[float, float, float, float]] | None:
    """`_lagrange` on the explicit nodes' cheapest assignments under cost + lam x memory
    (`chain_minsum.scalar_sides`, one per lam) instead of their Pareto fronts; with, at the
    dual's lam, the arguments of the Lagrangian pruning of `_side_fronts`: lam, the best
    plan's cost + lam x budget, and the least cost + lam x memory of the walk with the end
    side (from any start state) and of the start side with the walk (to any end state)."""
    walks: dict[float, _Walk] = {}

    def solve(lam: float) -> Any:
        sides = scalar_sides(graph, start_vars, end_vars, max_rows, lam, measure=True)
        if sides is None:
            raise TooLarge("the explicit nodes' scalar problem")
        walks[lam] = walk_of(sides)
        return walks[lam].scalar(lam)

    lam, lower, best, _ = _lagrange(solve, budget, deadline)
    if best is None:
        return None
    if lam not in walks:
        solve(lam)
    w = walks[lam]
    a = w.chain.arcs
    arc_w = a["cost"] + lam * w.arc_mem
    rest_start = float(w.to_go(arc_w, w.front_end.cost + lam * w.front_end.mem)[0].min())
    if w.forward is None or w.forward[0] != lam:
        w.scalar(lam)
    assert w.forward is not None
    rest_end = float(w.forward[1].min())  # the scalar pass's forward values at lam
    return lam, lower, best, (lam, best[0] + lam * memory_limits(budget)[1], rest_start, rest_end)


def solve_walk_dp(chain: Chain, graph: CostGraph, start_vars: list[int], end_vars: list[int], *, memory: bool = True, deadline: float | None = None, max_rows: float = MAX_ROWS, least: tuple[float, float] | None = None, core: SideCore | None = None, walk_from: int = 1) -> DPResult | None:
    """The exact optimum of the folded problem with one chain (module docstring), or None
    when the dynamic program does not apply (explicit parts joined other than through the
    walk, a table beyond ``max_rows``) or nothing fits the budget. ``memory=False``: the
    problem without the memory row (scalar fronts, one pass; the plan's memory is not
    reported). ``least``: the cost and memory of a cheapest plan of the problem without
    memory (seconds, bytes), which starts the Lagrangian search (`_lagrange`). ``core``:
    the chain's first copy with its interior eliminated (`_side_fronts`). ``walk_from``: the
    first copy on the walk (`chain_program.explicit_graph`; the walk has one step per copy
    from it, per stage). Raises `DeadlineReached`."""
    a = chain.arcs
    S, W, K1 = chain.num_states, chain.num_walk_states, chain.copies - walk_from
    stages = 1 + int(W > S)
    stage_arcs = [np.flatnonzero(a["first"]), np.flatnonzero(~a["first"])][:stages]
    budget = float(graph.memory_budget)
    plan_limit, proof = memory_limits(budget)
    slack = np.inf  # the memory-free problem has no budget to leave room in
    if memory:
        least_walk = sum(K1 * float(a["memory"][idx].min()) for idx in stage_arcs if idx.size)
        finite = [finite_mask(np.asarray(c, float)) for c in graph.node_cost]
        least_explicit = float(sum(float(np.asarray(m, float)[f].min()) for m, f in zip(graph.node_memory, finite) if f.any()))
        slack = proof - least_explicit - least_walk
    if slack < 0 or max_rows < W * W:
        return None

    def walk_of(sides: tuple[_Table, _Table]) -> _Walk:
        fs, fe = sides
        return _Walk(chain, stage_arcs, stages * K1, a["memory"], fs, fe, _keyed(fs, start_vars, chain.out_sizes), _keyed(fe, end_vars, chain.out_sizes))

    try:
        if not memory:
            sides = scalar_sides(graph, start_vars, end_vars, max_rows)
            if sides is None:
                return None
            got = walk_of(sides).scalar(0.0)
            if got is None:
                return None
            _, cost, _, (explicit, path, _) = got
            return DPResult(explicit, path, cost, np.nan, cost, 0)
        lagrangian = None
        try:
            sides = _side_fronts(graph, start_vars, end_vars, slack, min(max_rows, FIRST_ROWS), core=core)
        except TooLarge:  # prune the fronts by a Lagrangian bound (from scalar problems) first
            lagrangian = _scalar_lagrange(walk_of, graph, start_vars, end_vars, budget, deadline, max_rows)
            if lagrangian is None:
                return None
            sides = None
    except TooLarge:
        return None
    if lagrangian is None:
        if sides is None:
            return None
        walk0 = walk_of(sides)
        lam, lower, best, partner = _lagrange(walk0.scalar, budget, deadline, least)
    else:
        lam, lower, best = lagrangian[:3]
    if best is None:
        return None
    if best[0] <= lower:  # a plan within the budget meets the Lagrangian bound: optimal
        explicit, path, mem = best[1]
        return DPResult(explicit, path, best[0], mem, lower, 0)

    def walk_at(cap: float) -> _Walk | None:
        """The walk with its end fronts (pruned for plans of cost <= cap when Lagrangian)."""
        if lagrangian is None:
            return walk0
        _, _, _, (lam_, _, rest_start, rest_end) = lagrangian
        got = _side_fronts(graph, start_vars, end_vars, slack, max_rows, True, (lam_, cap + lam_ * proof, rest_start, rest_end), core)
        return None if got is None else walk_of(got)

    # a first incumbent from splices of the last two Lagrangian plans (whole fronts): the
    # path at the partner multiplier (a plan on the budget's other side), then the dual's
    sweep0 = walk0.sweep(lam, False) if lagrangian is None and walk0.W <= SWEEP_STATES else None
    if sweep0 is not None:
        spliced = walk0.spliced((partner,), sweep0, plan_limit)
        if spliced is not None and spliced[0] < best[0]:
            best = spliced
            if best[0] <= lower:
                explicit, path, mem = best[1]
                return DPResult(explicit, path, best[0], mem, lower, 0)

    # exact passes with a growing cost cap: a pass keeps every plan of cost <= cap (a
    # label or front row is dropped only when all its completions cost more), so its best
    # plan is the optimum once that plan costs <= cap; the last cap is the incumbent's
    # cost, and so is any cap once a spliced or completed incumbent is within
    # INCUMBENT_GAP of the bound
    cap, step, labels = lower * (1 + FIRST_GAP), FIRST_GAP, 0
    if sweep0 is not None and best[0] <= lower * (1 + INCUMBENT_GAP):
        cap = best[0]
    last: _Walk | None = None
    while True:
        final = cap >= best[0]
        cap = min(cap, best[0])
        try:
            walk = walk_at(cap)
            if walk is None:
                return None
            if walk is not last:  # the fronts changed (Lagrangian pruning): new bounds to go
                last, fe = walk, walk.front_end
                mem_to_go, further = _to_go_tables(walk, lam)
                completion = sweep0 if lagrangian is None else walk.sweep(lam, False) if walk.W <= SWEEP_STATES else None
                lag_to_go = completion.value if completion is not None else walk.to_go(a["cost"] + lam * a["memory"], fe.cost + lam * fe.mem)
            res, dropped = _label_dp(walk, budget, lam, cap * (1 + 1e-9), mem_to_go, lag_to_go, deadline, max_rows, completion, best, further)
        except TooLarge:
            return None
        # a pass whose cap dropped no label (and, Lagrangian, no front row) was exhaustive
        exhaustive = final or (dropped == np.inf and lagrangian is None)
        if res is None and exhaustive:
            return None
        if res is not None:
            # every completion of a dropped label costs at least its Lagrangian bound, so
            # a plan of cost <= the least dropped bound (less the cap's rounding slack) is
            # optimal too (the fronts must be whole: not Lagrangian-pruned)
            if exhaustive or res.cost <= cap or (lagrangian is None and res.cost * (1 + 1e-9) <= dropped):
                res.labels += labels
                return res
            best = (res.cost, (res.explicit, res.path, res.memory))
            labels += res.labels
        step *= 4
        cap = lower * (1 + step)
        if sweep0 is not None and best[0] <= lower * (1 + INCUMBENT_GAP):
            cap = best[0]  # (the pass's completions made the incumbent: usually the optimum)


def _kept_arcs(walk: _Walk, lam: float, lag_less: np.ndarray, cut: float) -> tuple[list[list[list[int]]], float]:
    """Per step and state, the arcs leaving it that a label of the pass may take (in the
    order of the arcs, stably by state: the order of the padded rows), and the least
    Lagrangian bound of an arc left out (seconds; inf if none). An arc x -> y at step t
    is left out when (least cost + lam x memory from the start front to x after t
    steps) + its own + (least to go from y, less lam x budget: ``lag_less``) exceeds
    ``cut``: every label at x weighs at least the first term, so every candidate made
    with the arc has a Lagrangian bound above the cut, and `_label_dp` would drop it
    (reduced-cost fixing of arcs, as in Irnich and Desaulniers, "Shortest path problems
    with resource constraints", 2005, section 4). The test allows the sums' rounding a
    relative 1e-9 of their terms, so an arc is left out only when every candidate's
    bound, however summed, is above the cut; the bounds left out are reported for the
    states that have labels (a finite forward value), below every candidate's."""
    a, T, stages = walk.chain.arcs, walk.steps, len(walk.stage_arcs)
    # (steps that keep the same arcs share one list per state: the middle of a walk
    # usually does, and the label pass neither changes them nor remakes its padded arcs)
    kept: list[list[list[int]]] = [[[] for _ in range(walk.W)]] * T
    least = np.inf
    fwd = walk.from_start(lam) if FILTER_ARCS else None
    weight = a["cost"] + lam * walk.arc_mem
    for s, idx in enumerate(walk.stage_arcs):
        srt = idx[np.argsort(a["prev"][idx], kind="stable")]
        ts = np.arange(s, T, stages)
        if not ts.size or not srt.size:
            continue
        prev = a["prev"][srt]
        if fwd is None:
            keep = np.ones((ts.size, srt.size), dtype=bool)
        else:
            f, w, g = fwd[ts][:, prev], weight[srt], lag_less[ts + 1][:, a["cur"][srt]]
            bound = f + w + g
            keep = np.isfinite(bound)
            if math.isfinite(cut):  # (an infinite cut keeps every finite bound; inf - inf would warn)
                keep &= bound - cut <= 1e-9 * (np.abs(f) + np.abs(w) + np.abs(g))
            out = ~keep & np.isfinite(f)
            if out.any():
                least = min(least, float(bound[out].min()))
        made: dict[bytes, list[list[int]]] = {}
        for t, row in zip(ts.tolist(), keep):
            code = row.tobytes()
            got = made.get(code)
            if got is None:
                got = made[code] = [[] for _ in range(walk.W)]
                ai = row.nonzero()[0]
                for e, x in zip(srt[ai].tolist(), prev[ai].tolist()):
                    got[x].append(e)
            kept[t] = got
    return kept, least


def _to_go_tables(walk: _Walk, lam: float) -> tuple[np.ndarray, Callable[[], list[tuple[float, np.ndarray]]]]:
    """The least memory to go (bytes, `_Walk.to_go` of the arcs' memory) and
    `_further_bounds`; up to `DENSE_STATES` states with lam > 0 in one pass of dense stage
    matrices for the memory and every further multiplier (`_Walk.to_go_many`: the same
    values bit for bit, as each weighting's sums are its own)."""
    a, fe = walk.chain.arcs, walk.front_end
    multipliers = [lam * x for x in LABEL_MULTIPLIERS] if lam else []
    if walk.W > DENSE_STATES or not multipliers:
        return walk.to_go(a["memory"], fe.mem), _further_bounds(walk, lam)
    x = np.asarray(multipliers, dtype=float)[:, None]
    many = walk._dense_to_go(np.vstack([a["memory"][None, :], a["cost"] + x * walk.arc_mem]), np.vstack([fe.mem[None, :], fe.cost + x * fe.mem]))
    tables = list(zip(multipliers, many[1:]))
    return many[0], lambda: tables


def _further_bounds(walk: _Walk, lam: float) -> Callable[[], list[tuple[float, np.ndarray]]]:
    """`_label_dp`'s further multipliers (`LABEL_MULTIPLIERS` x lam; none when lam is 0),
    each with its least cost + multiplier x memory to go (seconds), computed when first
    asked for and kept for the walk's later passes."""
    multipliers = [lam * x for x in LABEL_MULTIPLIERS] if lam else []

    @functools.cache
    def tables() -> list[tuple[float, np.ndarray]]:
        return list(zip(multipliers, walk.to_go_many(multipliers))) if multipliers else []

    return tables


def _label_dp(walk: _Walk, budget: float, lam: float, upper: float, mem_to_go: np.ndarray, lag_to_go: np.ndarray, deadline: float | None, max_rows: float, completion: _Sweep | None = None, incumbent: tuple[float, Any] | None = None, further: Callable[[], Sequence[tuple[float, np.ndarray]]] | None = None) -> tuple[DPResult | None, float]:
    """The walk's labels (cost, memory) per state, step by step, keeping the Pareto ones;
    a label is dropped when the least memory to come cannot fit, or when its Lagrangian
    bound cost + lam x (memory - budget) + least (cost + lam x memory) to come exceeds
    ``upper`` or the incumbent's cost (then every completion costs more than that).
    ``further``: more multipliers, each with its least cost + multiplier x memory to go
    (seconds, as ``lag_to_go``), asked for at the first step with more than
    `FURTHER_LABELS` labels; from there a label's bound is the largest of its bounds at
    lam and at each of them (every one is a lower bound on the cost of its completions
    within budget).

    ``incumbent``: a plan within budget (cost, (explicit, arcs, memory)); with
    ``completion`` (`_Walk.sweep` backward at lam), every step completes its labels along
    that sweep's paths to the end, and a completed plan within budget that is cheaper
    becomes the incumbent, so later steps prune against it (a primal bound found on the
    way, as in the incumbent updates of branch and bound; dropping a label needs only
    some plan that costs less than all its completions, so the pass stays exhaustive
    below ``upper``).

    Returns the best plan within budget: the best label completed by the end front, or
    the incumbent when that is cheaper (None if neither), with, as its bound, the least
    cost within the slack of a completed label or the plan's cost; and the least
    Lagrangian bound of a dropped label (seconds; inf when none: the pass was exhaustive)."""
    a, W = walk.chain.arcs, walk.W
    fs, fe = walk.front_start, walk.front_end
    # (plans within ``budget`` count up to the plan limit; pruning and the bound hold up to
    # the proof limit: `alpa_ilp.memory_limits`)
    budget, limit = memory_limits(budget)
    best = incumbent
    cut = min(upper, best[0] * (1 + 1e-9)) if best is not None else upper

    dropped = np.inf
    parents: list[Any] = []  # per step: each label's parent label (array or list)
    arcs_of: list[Any] = []  # per step: each label's arc
    # the memory a label may still hold, and the Lagrangian bound to go less lam x budget
    room = limit - mem_to_go
    lag_less = lag_to_go - lam * limit
    further_less: list[tuple[float, np.ndarray]] = []
    # the same per step and state in one array (room, bound to go, each further bound's):
    # `alive` takes a label's three or more in one gather
    per_state = np.stack([room, lag_less], axis=2)
    few = W <= FEW_KEYS and LABEL_FEW_KEYS  # `alive` sorts its labels by `pareto_rows_few`

    def prefix(t: int, k: int) -> tuple[int, list[int]]:
        """Start row and arcs of label k after step t."""
        path: list[int] = [0] * t
        for u in range(t - 1, -1, -1):
            path[u] = int(arcs_of[u][k])
            k = int(parents[u][k])
        return int(start_row[k]), path

    def alive(t: int, st: np.ndarray, c: np.ndarray, m: np.ndarray) -> np.ndarray:
        nonlocal dropped
        # (a row, then its states: faster than one mixed index; nonzero without
        # flatnonzero's wrapper: the label loop is dominated by per-call costs)
        at = per_state[t][st]
        fits = m <= at[:, 0]
        lagrangian = (c + lam * m if lam else c) + at[:, 1]
        for i, (x, _) in enumerate(further_less, 2):
            lagrangian = np.maximum(lagrangian, (c + x * m) + at[:, i])
        under = lagrangian <= cut
        ok = (fits & under).nonzero()[0]
        if ok.size < int(np.count_nonzero(fits)):
            dropped = min(dropped, float(lagrangian[fits & ~under].min()))
        if few and ok.size > SMALL_PARETO:
            # (states 0 .. W - 1 and no NaN: `fits` and `under` are false on one)
            return ok[pareto_rows_few(st[ok], c[ok], m[ok])]
        return ok[pareto_rows(st[ok], c[ok], m[ok])]

    def complete(t: int) -> None:
        """The cheapest completion within budget of the labels after step t along
        ``completion``'s paths: the incumbent when cheaper. Every other step (8 numpy
        calls, against ~40 for the step itself; an incumbent found a step later prunes
        almost as much), and not after the last (the end's own plans)."""
        nonlocal best, cut
        if completion is None or not state.size or t % 2 or t == walk.steps:
            return
        total = cost + completion.cost[t][state]
        total[~(mem + completion.mem[t][state] <= budget)] = np.inf
        j = int(np.argmin(total))
        # (the sum is rebuilt in `scalar`'s order, which may differ in the last bits: a
        # plan cheaper by less than 1e-12 would not prune more, and is not rebuilt)
        if total[j] < (best[0] * (1 - 1e-12) if best is not None else np.inf):
            r0, arcs = prefix(t, j)
            c, m, plan = walk.complete(r0, arcs, int(state[j]), completion)
            if m <= budget and (best is None or c < best[0]):
                best = (c, plan)
                cut = min(cut, c * (1 + 1e-9))

    key_start = walk.key_start
    keep = alive(0, key_start, fs.cost, fs.mem)
    state, cost, mem = key_start[keep], fs.cost[keep], fs.mem[keep]
    start_row = keep
    labels = int(state.size)
    # per step and state: the arcs a label may still take (`_kept_arcs`: the others give
    # every candidate a Lagrangian bound above the cut, so `alive` would drop them all)
    kept, arc_dropped = _kept_arcs(walk, lam, lag_less, cut)
    dropped = min(dropped, arc_dropped)
    cur_l, cost_l, mem_l = a["cur"].tolist(), a["cost"].tolist(), walk.arc_mem.tolist()
    # the padded arcs of the last numpy step, with the arcs they were made from (the
    # steps of a walk often keep the same arcs: they are made again only when they differ)
    padded_of: list[list[int]] | None = None
    for t in range(walk.steps):
        if deadline is not None and time.perf_counter() > deadline:
            raise DeadlineReached("tap: the walk's dynamic program ran out of time")
        if further is not None and not further_less and state.size > FURTHER_LABELS:
            further_less = [(x, g - x * limit) for x, g in further()]
            per_state = np.stack([room, lag_less] + [g for _, g in further_less], axis=2)
        outs = kept[t]
        degree = [len(o) for o in outs]
        D = max(max(degree), 1)
        # the candidates, counted in Python only for a few labels (at most D each)
        st_l = state.tolist() if state.size <= SMALL_STEP else []
        if st_l and (state.size * D <= SMALL_STEP or sum(map(degree.__getitem__, st_l)) <= SMALL_STEP):
            # in Python lists: the same sums, tests and order as the numpy step below
            # (candidates label by label, each with its state's arcs in order)
            room_t, lag_t = room[t + 1].tolist(), lag_less[t + 1].tolist()
            further_t = [(x, g[t + 1].tolist()) for x, g in further_less]
            # the candidates kept as (state, memory, cost, candidate, parent label, arc):
            # sorted, the order of `_pareto_rows_small`'s (state, memory, cost, row)
            cand: list[tuple[int, float, float, int, int, int]] = []
            least = np.inf
            for i, (x, c, m) in enumerate(zip(st_l, cost.tolist(), mem.tolist())):
                for e in outs[x]:
                    y = cur_l[e]
                    nc, nm = c + cost_l[e], m + mem_l[e]
                    if nm <= room_t[y]:
                        lg = (nc + lam * nm if lam else nc) + lag_t[y]
                        for x2, g_t in further_t:
                            lg2 = (nc + x2 * nm) + g_t[y]
                            if lg2 > lg:
                                lg = lg2
                        if lg <= cut:
                            cand.append((y, nm, nc, len(cand), i, e))
                        elif lg < least:
                            least = lg
            dropped = min(dropped, least)
            # (the numpy step's `pareto_rows`, as `_pareto_rows_small` scans it: a row is
            # kept when first in its state or strictly cheaper than every row before it)
            cand.sort()
            chosen: list[tuple[int, float, float, int, int, int]] = []
            last, best_c = -1, 0.0
            for cand_row in cand:
                if cand_row[0] != last:
                    last, best_c = cand_row[0], cand_row[2]
                    chosen.append(cand_row)
                elif cand_row[2] < best_c:
                    best_c = cand_row[2]
                    chosen.append(cand_row)
            parents.append([r[4] for r in chosen])
            arcs_of.append([r[5] for r in chosen])
            state = np.array([r[0] for r in chosen], dtype=np.int64)
            cost, mem = np.array([r[2] for r in chosen], dtype=float), np.array([r[1] for r in chosen], dtype=float)
            labels += len(chosen)
            complete(t + 1)
            continue
        # every label with every arc leaving its state, one row per state padded to the
        # largest out-degree with no-arcs (-1) of infinite cost and memory, which no
        # filter keeps: candidate k is label k // D with its state's arc k % D
        padded = state.size * D  # the arrays made below; padding can make them up to W times the candidates
        if padded > max_rows and (padded > 4 * max_rows or int(np.array(degree)[state].sum()) > max_rows):
            raise TooLarge(f"more than {max_rows:g} labels")
        if outs != padded_of:
            padded_of = outs
            slot = np.array([o + [-1] * (D - len(o)) for o in outs], dtype=np.int64)
            none = slot < 0
            acur, acost, amem = np.where(none, 0, a["cur"][slot]), np.where(none, np.inf, a["cost"][slot]), np.where(none, np.inf, walk.arc_mem[slot])
        nstate = acur[state].ravel()
        ncost = (cost[:, None] + acost[state]).ravel()
        nmem = (mem[:, None] + amem[state]).ravel()
        sel = alive(t + 1, nstate, ncost, nmem)
        parents.append(sel // D)
        arcs_of.append(slot[state].ravel()[sel])
        state, cost, mem = nstate[sel], ncost[sel], nmem[sel]
        labels += int(sel.size)
        complete(t + 1)
    # the end: every label with every row of the end front of its state
    order = np.argsort(walk.key_end, kind="stable")
    count_end = np.bincount(walk.key_end, minlength=W)
    first_end = np.cumsum(count_end) - count_end
    lab, row = _expand(count_end[state], first_end[state], np.arange(state.size))
    row = order[row]
    total_cost = cost[lab] + fe.cost[row]
    total_mem = mem[lab] + fe.mem[row]
    within = total_mem <= limit
    # every pruned plan costs more than the cut; the bound is the least cost within the slack
    least = float(total_cost[within].min()) if within.any() else np.inf
    fits = np.flatnonzero(total_mem <= budget)
    if fits.size:
        pick = int(fits[np.argmin(total_cost[fits])])
        if best is None or total_cost[pick] <= best[0]:
            r0, arcs = prefix(walk.steps, int(lab[pick]))
            explicit = np.maximum(fs.asg[r0], fe.asg[row[pick]])
            cost_, mem_ = float(total_cost[pick]), float(total_mem[pick])
            return DPResult(explicit, np.array(arcs, dtype=np.int64), cost_, mem_, min(least, cost_), labels), dropped
    if best is None:
        return None, dropped
    explicit, path, mem_ = best[1]
    return DPResult(explicit, path, best[0], mem_, min(least, best[0]), labels), dropped


def _choice(sk_nodes: int, chain: Chain, origin: np.ndarray, virtual: np.ndarray, res: DPResult, start: np.ndarray, walk_from: int = 1) -> np.ndarray:
    """Strategy index per skeleton node of a dynamic-program plan whose walk starts at the
    joint strategy of the skeleton nodes ``start`` (one per out position) and runs over the
    copies from ``walk_from`` on."""
    choice = np.full(sk_nodes, -1, dtype=np.int64)
    keep = origin >= 0
    choice[origin[keep]] = res.explicit[keep]
    stages = 1 + int(chain.num_walk_states > chain.num_states)
    steps = chain.arcs["strategy"][res.path].reshape(chain.copies - walk_from, stages, chain.positions)
    choice[chain.nodes[walk_from:]] = steps.max(axis=1)
    if res.path.size and int(chain.arcs["prev"][res.path[0]]) != int(encode_states(choice[start][None, :], chain.out_sizes)[0]):
        raise AssertionError("chain folding: the walk's first step leaves another state than its start")
    if not np.array_equal(res.explicit[virtual], choice[chain.nodes[-1, chain.out_pos]]):
        raise AssertionError("chain folding: the end state disagrees with the last copy")
    if (choice < 0).any():
        raise AssertionError("chain folding: the dynamic program left a node without a strategy")
    return choice


def _memory_binds(sk: Skeleton, tables: CostTables, chain: Chain, graph: CostGraph, walk_copies: int) -> bool:
    """A guess (no proof) that the memory-free plan will not fit: the budget is below
    `BINDS_BELOW` of the memory (bytes per device) of the plan that gives every node its
    cheapest strategy, explicit nodes and the ``walk_copies`` walk copies alike."""
    held = sum(float(np.asarray(m, float)[int(np.argmin(c))]) for c, m in zip(graph.node_cost, graph.node_memory) if len(c))
    copy = [tables.node(sk, int(i)) for i in chain.nodes[1].tolist()]
    held += walk_copies * sum(float(nc.memory[int(np.argmin(nc.cost))]) for nc in copy if nc.cost.size)
    return float(sk.instance.memory_budget) < BINDS_BELOW * held


def solve_by_dp(sk: Skeleton, chains: list[Chain], tables: CostTables, ctx: Any, *, max_rows: float = MAX_ROWS) -> ChainSolution | None:
    """The folded problem of one chain solved exactly by dynamic programming (module
    docstring): first without memory (`chain_minsum`: the cheapest copy per state pair
    and the cheapest explicit nodes per end state; its plan is optimal when it fits, its
    cost a lower bound either way), then with the budget on the Pareto arcs (computed
    here when needed), whose Lagrangian search starts from the memory-free plan. When
    memory surely binds (`_memory_binds`, a guess) the memory-free problem is skipped: the
    Lagrangian search then starts from the Pareto arcs' cheapest plan, which is optimal
    when it fits (and the memory-free problem is solved after all when the Pareto program
    does not apply). None when it does not apply (the caller solves the MILP, with the
    chain's Pareto arcs set); raises `DeadlineReached`."""
    if len(chains) != 1:
        return None
    remaining = ctx.remaining_time()
    deadline = None if remaining is None else time.perf_counter() + remaining
    chain = chains[0]
    # the walk starts after the chain's first copy, or at it when other nodes feed it as a
    # copy feeds the next (`first_copy_feed`: fewer explicit nodes, one more step)
    feed = first_copy_feed(sk, chain, tables)
    walk_from = 1 if feed is None else 0
    start = chain.nodes[0, chain.out_pos] if feed is None else feed
    graph, origin, virtual = explicit_graph(sk, chains, tables, walk_from)
    start_vars = [int(np.flatnonzero(origin == x)[0]) for x in start.tolist()]
    end_vars = [int(x) for x in virtual[0].tolist()]

    def memory_free() -> tuple[ChainSolution | None, tuple[float, float, float] | None]:
        """The memory-free plan when it fits, else (cost, memory, bound) of it (seconds,
        bytes, seconds), or None when the memory-free program does not apply."""
        cheap = cheapest_copy_arcs(chain, sk, tables, max_rows)
        if cheap is None:
            return None, None
        walk = dataclasses.replace(chain, arcs=cheap, num_walk_states=chain.num_states)
        free = solve_walk_dp(walk, graph, start_vars, end_vars, memory=False, deadline=deadline, max_rows=max_rows, walk_from=walk_from)
        if free is None:
            return None, None
        choice = _choice(sk.num_nodes, walk, origin, virtual[0], free, start, walk_from)
        free_mem = plan_memory(sk, tables, choice)
        if free_mem <= memory_limits(sk.instance.memory_budget)[0]:
            return ChainSolution(choice, free.cost, free.bound, True, 0, 0, None, None, folded_variables(graph, [walk])), None
        return None, (free.cost, free_mem, free.bound)

    binds = _memory_binds(sk, tables, chain, graph, chain.copies - walk_from)
    free: tuple[float, float, float] | None = None
    if not binds:
        fits, free = memory_free()
        if fits is not None:
            return fits
    cores: list[CopyCore] = []
    if not chain.arcs:
        try:
            chain.arcs = segment_fronts(chain, sk, tables, cores, max_rows=max_rows, deadline=deadline)
        except TooLarge:  # (the caller unfolds the chain; the memory-free plan may still do)
            chain.arcs_too_large = max_rows >= MAX_ARC_ROWS  # (the caller's limit: no second try)
            return memory_free()[0] if binds else None
    if free is None and not binds:
        return None
    core = _side_core(cores[0], chain, graph, origin) if cores and feed is None else None
    res = solve_walk_dp(chain, graph, start_vars, end_vars, deadline=deadline, max_rows=max_rows, least=None if free is None else free[:2], core=core, walk_from=walk_from)
    if res is None:
        return memory_free()[0] if binds else None
    # (the plan's memory is not summed again here: `distplan.solve` has the evaluator check
    # every plan, and one over the budget is a PlanCheckError, never an answer)
    choice = _choice(sk.num_nodes, chain, origin, virtual[0], res, start, walk_from)
    return ChainSolution(choice, res.cost, res.bound if free is None else max(res.bound, free[2]), True, 0, 0, None, None, folded_variables(graph, chains))
