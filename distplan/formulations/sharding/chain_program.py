"""The folded program of chain folding (see `distplan.formulations.sharding.chainfold`): the
explicit cost graph, Alpa's ILP over it with per-chain arc counts and flow rows, and the
solve loop that adds lazy connectivity cuts until every walk is one walk. Units: seconds, bytes."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.contract import ModelSpec
from distplan.formulations.sharding.alpa_ilp import (
    MEMORY_SCALE,
    AlpaIndex,
    edge_product_block,
    excess_bytes,
    memory_limits,
    memory_row_limit,
    memory_row_scale,
    memory_shortfall_error,
    node_choice_block,
    objective_scale,
    prepare_alpa,
)
from distplan.formulations.sharding.chain_fronts import encode_states, finite_mask
from distplan.formulations.sharding.chain_walk import components_apart, euler_walk, incumbent
from distplan.formulations.sharding.chainfold import Chain
from distplan.formulations.sharding.costgraph import CostGraph, CostTables, Skeleton
from distplan.modeling.model import Model, linear_sum

# -- explicit cost graph -------------------------------------------------------------------


def explicit_graph(sk: Skeleton, chains: list[Chain], tables: CostTables, walk_from: int = 1) -> tuple[CostGraph, np.ndarray, list[np.ndarray]]:
    """Alpa's cost graph over the explicit nodes (everything outside the walk copies), plus
    one cost-free *virtual* node per out position of every chain's last copy, standing for
    that node on the edges leaving the chain. Returns the graph, the skeleton node of each
    explicit node (-1 for virtual ones) and, per chain, the virtual node of each out position.
    ``walk_from``: the first walk copy of every chain, 1 (the first copy explicit) or 0 (the
    first copy a walk step from the nodes that feed it: `chainfold.first_copy_feed`, which
    the caller has checked; the edges into it are then left out with it)."""
    inst = sk.instance
    n = sk.num_nodes
    walk = np.zeros(n, dtype=bool)
    for ch in chains:
        walk[ch.nodes[walk_from:].ravel()] = True
    explicit = np.flatnonzero(~walk)
    index = np.full(n, -1, dtype=np.int64)
    index[explicit] = np.arange(explicit.size)
    origin = list(explicit.tolist())
    virtual: list[np.ndarray] = []
    src_index = index.copy()
    for ch in chains:
        ids = np.arange(len(origin), len(origin) + ch.out_pos.size)
        virtual.append(ids)
        src_index[ch.nodes[-1, ch.out_pos]] = ids
        origin += [-1] * ch.out_pos.size
    skip = walk[sk.edge_u] | walk[sk.edge_v]
    for ch in chains:
        skip[ch.tail_edges] = False
    edges = np.flatnonzero(~skip)
    a = src_index[sk.edge_u[edges]]
    b = index[sk.edge_v[edges]]
    if np.any(a < 0) or np.any(b < 0):
        raise AssertionError("chain folding: an edge touches the inside of a chain")
    node_costs = [tables.node(sk, int(i)) for i in explicit.tolist()]
    node_ops = [sk.node_ops[int(i)] for i in explicit.tolist()]
    strategies = [nc.strategies for nc in node_costs]
    cost = [nc.cost for nc in node_costs]
    memory = [nc.memory for nc in node_costs]
    for ch in chains:
        for j in ch.out_pos.tolist():
            node = int(ch.nodes[-1, j])
            nc = tables.node(sk, node)
            node_ops.append(sk.node_ops[node])
            strategies.append(nc.strategies)
            cost.append(np.zeros(len(nc.strategies)))
            memory.append(np.zeros(len(nc.strategies)))
    graph = CostGraph(
        name=inst.name,
        instance=inst,
        node_ops=node_ops,
        node_strategies=strategies,
        node_cost=cost,
        node_memory=memory,
        edge_u=a,
        edge_v=b,
        edge_cost=[tables.edge(sk, e) for e in edges.tolist()],
        multiplicity=np.ones(len(node_ops), dtype=np.int64),
        memory_budget=inst.memory_budget,
    )
    return graph, np.array(origin, dtype=np.int64), virtual


# -- the folded program ----------------------------------------------------------------------


def _least_copy(ch: Chain) -> float:
    """Least memory of one copy (bytes per device): the least of each stage, summed."""
    a = ch.arcs
    return sum(float(a["memory"][stage].min()) for stage in (a["first"], ~a["first"]) if stage.any())


@dataclass(frozen=True)
class ChainIndex(AlpaIndex):
    """The folded program's index (block contract): Alpa's index over the explicit graph,
    plus the chains, the explicit node of each chain's first copy (``origin``) and of its
    last copy's end (``virtual``), the connectivity cuts so far, and the shifted memory
    right-hand side (bytes) and objective constant (seconds): every one-hot group (a node's
    s, a stage's arcs) moves its least value to the constant, which keeps the solver's
    bound margin (eps x |c|_1) small."""

    chains: tuple[Chain, ...]
    origin: np.ndarray
    virtual: tuple[np.ndarray, ...]
    cuts: tuple[tuple[int, np.ndarray], ...]
    memory_row: bool
    node_min: np.ndarray
    least_memory_bytes: float
    memory_rhs: float
    least_cost: np.ndarray
    shifted_constant: float


def _stage_shift(arcs: dict[str, np.ndarray], key: str) -> tuple[np.ndarray, float]:
    """Per arc the least ``key`` value of its stage (first copy / later copies), and the sum
    of those least values over the two stages."""
    shift = np.zeros(arcs[key].size)
    total = 0.0
    for stage in (arcs["first"], ~arcs["first"]):
        if stage.any():
            shift[stage] = float(arcs[key][stage].min())
            total += float(arcs[key][stage].min())
    return shift, total


def prepare_chain(graph: CostGraph, params: Mapping[str, Any]) -> ChainIndex:
    """``chains``, ``origin``, ``virtual``, ``cuts``, ``relax``, ``memory_row``. Raises an
    InfeasibleError with the shortfall when even the least-memory plan does not fit."""
    base = prepare_alpa(graph, params)
    chains = tuple(params["chains"])
    memory_row = bool(params.get("memory_row", True))
    node_min = np.array([float(np.min(m[finite_mask(c)])) if np.any(finite_mask(c)) else float(np.min(m)) for m, c in zip(graph.node_memory, graph.node_cost)])
    least = float(node_min.sum()) + sum((ch.copies - 1) * _least_copy(ch) for ch in chains)
    budget = graph.memory_budget
    # (the row, and this proof, at the most memory any plan the evaluator accepts holds,
    # unless a ``memory_limit`` is given: `alpa_ilp.memory_limits`)
    proof = memory_limits(budget)[1]
    if memory_row and least > proof:
        raise memory_shortfall_error(graph, least)
    copies = max((ch.copies for ch in chains), default=1)
    limit = memory_row_limit(budget, base.flat_memory, *(ch.arcs["memory"] for ch in chains), copies=copies) if base.memory_limit is None else base.memory_limit
    rhs = limit - float(node_min.sum())
    least_cost = np.full(graph.num_nodes, np.inf)
    if base.s_cost.size:
        np.minimum.at(least_cost, base.s_node, base.s_cost)
    least_cost[~np.isfinite(least_cost)] = 0.0
    constant = float(base.constant) + float(least_cost[base.free].sum())
    for ch in chains:
        rhs -= (ch.copies - 1) * _stage_shift(ch.arcs, "memory")[1]
        constant += (ch.copies - 1) * _stage_shift(ch.arcs, "cost")[1]
    # the objective's units cover the arcs' costs too (an arc's cost spans the layers of a copy)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(AlpaIndex)}
    fields["objective_scale"] = min(base.objective_scale, objective_scale(constant, *(ch.arcs["cost"] for ch in chains)))
    return ChainIndex(
        **fields,
        chains=chains,
        origin=np.asarray(params["origin"]),
        virtual=tuple(params["virtual"]),
        cuts=tuple(params.get("cuts", ())),
        memory_row=memory_row,
        node_min=node_min,
        least_memory_bytes=least,
        memory_rhs=rhs,
        least_cost=least_cost,
        shifted_constant=constant,
    )


def walk_block(model: Model, graph: CostGraph, index: ChainIndex) -> None:
    """Per chain c: arc counts ``x{c}`` (integers up to copies - 1), start and end states
    ``w{c}``, ``y{c}`` tied to the strategies of the first copy's and the end's explicit
    nodes, flow conservation, and copies - 1 first-stage arcs."""
    s_col = model["s"].index.reshape(-1)
    for c, ch in enumerate(index.chains):
        arcs = ch.arcs
        A, S, W, K1 = arcs["cost"].size, ch.num_states, ch.num_walk_states, ch.copies - 1
        x = model.add_vars(f"x{c}", A, lb=0, ub=K1, vtype="continuous" if index.relax else "integer")
        w = model.add_vars(f"w{c}", S, lb=0, ub=1)
        y = model.add_vars(f"y{c}", S, lb=0, ub=1)
        xc, wc, yc = x.index.reshape(-1), w.index.reshape(-1), y.index.reshape(-1)
        N = model.num_vars
        model.add_constraints(f"start-one{c}", linear_sum(wc, np.ones(S), np.zeros(S, dtype=np.int64), 1, N) == 1)
        digits = ch.digits(np.arange(S))
        for t, pos in enumerate(ch.out_pos.tolist()):
            for tag, states_var, node in (("start", wc, int(np.flatnonzero(index.origin == ch.nodes[0, pos])[0])), ("end", yc, int(index.virtual[c][t]))):
                if not index.free[node]:
                    continue
                size = int(ch.out_sizes[t])
                own = s_col[index.s_offset[node] + np.arange(size)]
                cols = np.concatenate([states_var, own])
                coeffs = np.concatenate([np.ones(S), -np.ones(size)])
                rows = np.concatenate([digits[:, t], np.arange(size)])
                model.add_constraints(f"{tag}-state{c}.{t}", linear_sum(cols, coeffs, rows, size, N) == 0)
        # w(o) + in(o) - out(o) - y(o) = 0
        cols = np.concatenate([wc, xc, xc, yc])
        coeffs = np.concatenate([np.ones(S), np.ones(A), -np.ones(A), -np.ones(S)])
        rows = np.concatenate([np.arange(S), arcs["cur"], arcs["prev"], np.arange(S)])
        model.add_constraints(f"flow{c}", linear_sum(cols, coeffs, rows, W, N) == 0)
        first = np.flatnonzero(arcs["first"])
        model.add_constraints(f"copies{c}", linear_sum(xc[first], np.ones(first.size), np.zeros(first.size, dtype=np.int64), 1, N) == K1)


def connect_block(model: Model, graph: CostGraph, index: ChainIndex) -> None:
    """The connectivity cuts found so far: a set of states a walk enters must be entered
    (or started in) whenever its inner arcs are used."""
    for k, (c, states) in enumerate(index.cuts):
        ch, arcs = index.chains[c], index.chains[c].arcs
        inside_prev, inside_cur = np.isin(arcs["prev"], states), np.isin(arcs["cur"], states)
        entering = np.flatnonzero(~inside_prev & inside_cur)
        inner = np.flatnonzero(inside_prev & inside_cur)
        xc, wc = model[f"x{c}"].index.reshape(-1), model[f"w{c}"].index.reshape(-1)
        stages = 1 + int(ch.num_walk_states > ch.num_states)
        starts = states[states < ch.num_states]
        cols = np.concatenate([wc[starts], xc[entering], xc[inner]])
        coeffs = np.concatenate([np.ones(starts.size), np.ones(entering.size), -np.ones(inner.size) / (stages * (ch.copies - 1))])
        model.add_constraints(f"connect{k}", linear_sum(cols, coeffs, np.zeros(cols.size, dtype=np.int64), 1, model.num_vars) >= 0)


def chain_memory_block(model: Model, graph: CostGraph, index: ChainIndex) -> None:
    """The memory row (in the index's ``memory_scale`` units: GiB unless re-solved) over the
    explicit nodes and every chain's arcs (least values on the right-hand side), unless
    the program is solved without it."""
    if not index.memory_row:
        return
    flat_free = index.free[index.flat_node]
    cols = [model["s"].index.reshape(-1)]
    coeff = [index.flat_memory[flat_free] - index.node_min[index.s_node]]
    for c, ch in enumerate(index.chains):
        cols.append(model[f"x{c}"].index.reshape(-1))
        coeff.append(ch.arcs["memory"] - _stage_shift(ch.arcs, "memory")[0])
    col = np.concatenate(cols)
    scale = index.memory_scale
    model.add_constraints("memory", linear_sum(col, np.concatenate(coeff) * scale, np.zeros(col.size, dtype=np.int64), 1, model.num_vars) <= index.memory_rhs * scale)


def chain_objective_block(model: Model, graph: CostGraph, index: ChainIndex) -> None:
    """Node, edge and arc costs less their groups' least values, plus the constant (us: the
    index's ``objective_scale`` units)."""
    cols = [model["s"].index.reshape(-1), model["e"].index.reshape(-1)]
    coeff = [index.s_cost - index.least_cost[index.s_node], index.e_cost]
    for c, ch in enumerate(index.chains):
        cols.append(model[f"x{c}"].index.reshape(-1))
        coeff.append(ch.arcs["cost"] - _stage_shift(ch.arcs, "cost")[0])
    col = np.concatenate(cols)
    scale = index.objective_scale
    expr = linear_sum(col, np.concatenate(coeff) * scale, np.zeros(col.size, dtype=np.int64), 1, model.num_vars)
    model.minimize(expr.sum() + index.shifted_constant * scale)


#: Alpa's ILP over the explicit nodes plus, per chain, the walk rows (module docstring);
#: objective in microseconds, memory row in GiB unless re-solved (as `alpa_ilp`)
CHAIN_PROGRAM = ModelSpec("tap", prepare_chain, (node_choice_block, edge_product_block, walk_block, connect_block, chain_memory_block, chain_objective_block))


def _counts(values: np.ndarray) -> np.ndarray | None:
    """Integer counts of arc values, or None when they are not integral."""
    r = np.round(values)
    return r.astype(np.int64) if np.all(np.abs(values - r) <= 1e-6) else None


def _integral_s(res: Any) -> bool:
    v = res.values_by_block.get("s")
    return v is None or bool(np.all(np.minimum(np.abs(v), np.abs(1 - v)) <= 1e-6))


@dataclass
class ChainSolution:
    """Strategy index per skeleton node, and how the program was solved."""

    choice: np.ndarray | None
    objective: float | None  # seconds (the program's value)
    bound: float | None  # seconds, proven (dual bound of a relaxation of Alpa's ILP)
    optimal: bool
    rounds: int
    cuts: int
    lp_integral: bool | None
    last: Any = None
    #: variables of the folded program (as the MILP would have them), when not solved by one
    variables: int | None = None
    #: the record of the solver call whose dual bound ``bound`` is (None: no call proved it)
    bound_record: Any = None


def folded_variables(graph: CostGraph, chains: list[Chain]) -> int:
    """Variables of the folded program over ``graph`` (`CHAIN_PROGRAM`): one-hot
    entries of the nodes with several strategies, edge products between two such nodes,
    and per chain its arc counts, start and end states."""
    sizes = graph.strategy_counts()
    free = sizes > 1
    both = free[graph.edge_u] & free[graph.edge_v]
    walk = sum(int(ch.arcs["cost"].size) + 2 * ch.num_states for ch in chains)
    return int(sizes[free].sum() + (sizes[graph.edge_u] * sizes[graph.edge_v])[both].sum()) + walk


def cheapest_arcs(chain: Chain) -> Chain:
    """The chain with only the cheapest arc per (from, to) pair (least memory among equals):
    enough for the problem without a memory row."""
    import dataclasses

    a = chain.arcs
    order = np.lexsort((a["memory"], a["cost"], a["prev"], a["cur"]))
    key = a["cur"][order] * (chain.num_walk_states + 1) + a["prev"][order]
    first = np.ones(order.size, dtype=bool)
    first[1:] = key[1:] != key[:-1]
    keep = np.sort(order[first])
    return dataclasses.replace(chain, arcs={k: v[keep] for k, v in a.items()})


def plan_memory(sk: Skeleton, tables: CostTables, choice: np.ndarray) -> float:
    """Bytes per device of a strategy index per skeleton node (the sum of node memories, in
    node order: a running sum, bit for bit the loop node by node)."""
    labels, first = np.unique(sk.node_label_id, return_index=True)
    vectors = [tables.node(sk, i).memory for i in first.tolist()]
    offset = np.zeros(int(labels.max(initial=-1)) + 2, dtype=np.int64)
    offset[labels + 1] = [v.size for v in vectors]
    np.cumsum(offset, out=offset)
    values = np.concatenate(vectors)[offset[sk.node_label_id] + np.asarray(choice, dtype=np.int64)]
    return float(np.add.accumulate(values)[-1]) if values.size else 0.0


def plan_excess(sk: Skeleton, tables: CostTables, choice: np.ndarray) -> float:
    """Bytes by which a plan's memory exceeds its budget when the evaluator may reject it
    (over ``budget x (1 + MEMORY_TOLERANCE)`` less rounding room: `memory_limits`' plan
    limit); 0 when it fits."""
    return excess_bytes(plan_memory(sk, tables, choice), sk.instance.memory_budget)


def solve_chains(sk: Skeleton, chains: list[Chain], tables: CostTables, ctx: Any, *, lp_first: bool, max_rounds: int = 50, build_seconds: float = 0.0) -> ChainSolution:
    """Solve the folded program, adding connectivity cuts until every walk is one walk.

    First without the memory row, on the cheapest arc per state pair: that program is exact
    for the problem without memory (a plan's copies can be swapped for the cheapest copies
    with the same ends), a relaxation of the problem with memory, so its plan is optimal
    when it fits the budget. Otherwise the full program (every Pareto arc, memory row)."""
    free = solve_program(sk, [cheapest_arcs(ch) for ch in chains], tables, ctx, lp_first=lp_first, max_rounds=max_rounds, build_seconds=build_seconds, memory_row=False)
    if free.choice is not None and plan_memory(sk, tables, free.choice) <= memory_limits(sk.instance.memory_budget)[0]:
        return free
    full = solve_program(sk, chains, tables, ctx, lp_first=lp_first, max_rounds=max_rounds, memory_row=True)
    bounds = [(b.bound, b.bound_record) for b in (free, full) if b.bound is not None]
    # a plan the solver's feasibility tolerance let over what the evaluator accepts is
    # solved again with the row in ten-thousandths of the budget (as `alpa_ilp.solve_graph`
    # does); both rows at `memory_limits`' proof limit, both bounds hold. Still over: a
    # last solve with the row at the budget itself, whose plan decides and whose bound
    # (of plans within the budget only) is not kept
    rounds = free.rounds + full.rounds
    fine = memory_row_scale(sk.instance.memory_budget)
    for scale, limit in ([(fine, None)] if fine != MEMORY_SCALE else []) + [(fine, sk.instance.memory_budget)]:
        if full.choice is None or not plan_excess(sk, tables, full.choice):
            break
        again = solve_program(sk, chains, tables, ctx, lp_first=False, max_rounds=max_rounds, memory_row=True, memory_scale=scale, memory_limit=limit)
        rounds += again.rounds
        if again.bound is not None and limit is None:
            bounds.append((again.bound, again.bound_record))
        if again.choice is None:  # (the plan before, whose excess the evaluator names)
            break
        if limit is not None:
            again.optimal = False  # (optimal within the budget only)
        full = again
    full.bound, full.bound_record = max(bounds, key=lambda b: b[0]) if bounds else (None, None)
    full.rounds = rounds
    return full


def solve_program(sk: Skeleton, chains: list[Chain], tables: CostTables, ctx: Any, *, lp_first: bool, max_rounds: int = 50, build_seconds: float = 0.0, memory_row: bool = True, memory_scale: float = MEMORY_SCALE, memory_limit: float | None = None) -> ChainSolution:
    """One folded program (with or without the memory row, in ``memory_scale`` row units
    per byte, at ``memory_limit`` bytes: None, `memory_limits`' proof limit), cuts added
    until connected."""
    import time

    from distplan.formulations.sharding.alpa_ilp import DEFAULT_MIP_GAP, decode_choice, dual_bound_seconds
    from distplan.solvers.result import Termination

    if ctx.options.mip_gap is None:
        ctx.options = ctx.options.with_(mip_gap=DEFAULT_MIP_GAP)
    t0 = time.perf_counter()
    graph, origin, virtual = explicit_graph(sk, chains, tables)
    build_seconds += time.perf_counter() - t0
    cuts: list[tuple[int, np.ndarray]] = []
    bound: float | None = None
    bound_record = None  # the call whose bound ``bound`` is
    rounds = 0
    lp_integral: bool | None = None
    lp_choice: np.ndarray | None = None
    last = None
    for relax in ([True] if lp_first else []) + [False]:
        while rounds < max_rounds:
            rounds += 1
            t0 = time.perf_counter()
            model, index = CHAIN_PROGRAM.build(
                graph,
                {"chains": chains, "origin": origin, "virtual": virtual, "relax": relax, "cuts": list(cuts), "memory_row": memory_row, "memory_scale": memory_scale, "memory_limit": memory_limit, "deadline": ctx.deadline},
                name="tap_lp" if relax else "tap",
            )
            if model.num_vars == 0:  # every op has a single strategy: nothing to decide
                choice = np.zeros(sk.num_nodes, dtype=np.int64)
                value = float(index.shifted_constant)
                return ChainSolution(choice, value, value, True, rounds, 0, None, None)
            warm = None
            if not relax and memory_row and lp_choice is not None and ctx.backend.capabilities.warm_start:
                warm = incumbent(sk, graph, chains, origin, virtual, model, index, lp_choice)
            res = ctx.solve_model(model, warm_start=warm, build_seconds=time.perf_counter() - t0 + build_seconds)
            build_seconds = 0.0
            last = res
            # the solver's bound, never the LP's objective: it is less the margin of the
            # solver's tolerances (or HiGHS's safe bound of its dual point); an objective
            # scale below microseconds (costs of 1e6 s or more) puts those tolerances far
            # above tap's BOUND_MARGIN (a walk LP's objective 1.2e-6 above the optimum was
            # taken as proven: review rev13c D1)
            proven = res.bound
            if proven is not None and res.termination is not Termination.INFEASIBLE:
                value = dual_bound_seconds(proven, sk.instance, res.extra.get("model", {}))
                if bound is None or value > bound:
                    bound, bound_record = value, res
            if not res.has_solution:
                if relax and res.termination is not Termination.INFEASIBLE:
                    break
                return ChainSolution(None, None, bound, False, rounds, len(cuts), lp_integral, res, bound_record=bound_record)
            counts = [_counts(res.values_by_block[f"x{c}"]) for c in range(len(chains))]
            integral = _integral_s(res) and all(k is not None for k in counts)
            if relax:
                lp_integral = integral
                lp_choice = decode_choice(res, index)
                if not integral or res.termination is not Termination.OPTIMAL:
                    break
            explicit_choice = decode_choice(res, index)
            choice = np.full(sk.num_nodes, -1, dtype=np.int64)
            keep = origin >= 0
            choice[origin[keep]] = explicit_choice[keep]
            new_cuts = 0
            for c, ch in enumerate(chains):
                arcs = ch.arcs
                start = int(encode_states(choice[ch.nodes[0, ch.out_pos]][None, :], ch.out_sizes)[0]) if ch.out_pos.size else 0
                k = counts[c]
                assert k is not None
                path = euler_walk(start, arcs["prev"], arcs["cur"], k)
                if path is None:
                    for states in components_apart(start, arcs["prev"], arcs["cur"], k):
                        cuts.append((c, states))
                        new_cuts += 1
                    continue
                stages = 1 + int(ch.num_walk_states > ch.num_states)
                steps = arcs["strategy"][np.array(path, dtype=np.int64)].reshape(ch.copies - 1, stages, ch.positions)
                choice[ch.nodes[1:]] = steps.max(axis=1)
                end = explicit_choice[virtual[c]]
                if not np.array_equal(end, choice[ch.nodes[-1, ch.out_pos]]):
                    raise AssertionError("chain folding: the end state disagrees with the last copy")
            if new_cuts:
                continue
            optimal = res.termination is Termination.OPTIMAL
            objective = res.objective / index.objective_scale if res.objective is not None else None
            return ChainSolution(choice, objective, bound, optimal, rounds, len(cuts), lp_integral, res, bound_record=bound_record)
    return ChainSolution(None, None, bound, False, rounds, len(cuts), lp_integral, last, bound_record=bound_record)
