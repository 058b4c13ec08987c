"""TAP: fold the repeated subgraphs of the sharding problem, solve once per family.

Shi et al., "TAP: Accelerating Large-Scale DNN Training Through Tensor Automatic
Parallelisation", arXiv 2302.00247 (TAPAS, ICPP 2025): the graph of a large network holds
few distinct subgraphs, so the search is folded onto them and its cost grows
sub-linearly with depth. Repeated regions are found by `distplan.formulations.folding` on
the cost-graph skeleton (confirmed by an exact isomorphism check); the exact path first
tries the longest run of consecutive copies in op order (`chainfold.consecutive_blocks`,
checked the same way; `find_walk_chains`). Costs are computed only for distinct labels, so
the unfolded cost graph is never built.

**Exact (default, ``exact=True``).** Copies of a layer may need different strategies when
memory binds, so they do not share variables: the copies of a chain of layers become
integer counts of *copy types* on a walk over boundary states, with memory summed over
the counts (`distplan.formulations.sharding.chainfold`). The program's size does not
depend on the number of layers, it is a relaxation of Alpa's ILP (Zheng et al., OSDI
2022) whose connected solutions are plans of equal cost (connectivity cuts are added until
the solution is one walk), so its optimum is the instance optimum and its dual bound is a
proven bound. Families that are not chains stay unfolded.

**Shared (``exact=False``, TAP as published).** The copies of a region share one set of
decision variables: node costs and memory are multiplied by the copy count, edges inside
copies likewise, boundary edges are kept between representatives (meta-pytorch/
autoparallel's variable sharing). This is a restriction of Alpa's ILP (an upper bound),
not exact when memory binds. A proven lower bound comes from the LP relaxation of the
folded problem *without* boundary edges: once the edges leaving the copies are dropped
(their costs are >= 0) the copies are interchangeable, the memory row is symmetric, and
averaging any LP solution over permutations of the copies gives a symmetric one of equal
cost, so the folded LP equals the unfolded LP of that relaxation (``certify=True``).

Both solve their program as an LP first (``lp_first``, default on): an integral (and, for
the walk, connected) LP optimum is the program's optimum, found without the MILP machinery.

**Without a solver (``dp=True``, default).** With one chain the walk program has a single
memory row, a resource-constrained shortest path: `chain_dp` solves it exactly by
dynamic programming (memory-free min-sum first, `chain_minsum`; under a binding budget,
Pareto fronts of the explicit nodes and a label-setting DP over the walk pruned by a
Lagrangian bound), with the optimum itself as the proven bound. Beyond ``dp_max_rows``
rows, or with several chains, the MILP above is solved instead.
"""

from __future__ import annotations

import time
from itertools import chain
from typing import Any

import numpy as np

from distplan.formulations.contract import Policy, time_limit_parameter
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.folding import FoldMap, find_repeated_subgraphs
from distplan.formulations.registry import Bound, Folding, Formulation, Outcome, RunContext
from distplan.formulations.sharding.alpa_ilp import (
    BOUND_RECORD,
    SINGLE_PLAN_SOURCE,
    FoldedSharding,
    build_sharding_model,
    dual_bound_seconds,
    solve_graph,
    unfolded,
)
from distplan.formulations.sharding.chain_dp import MAX_ROWS as DP_MAX_ROWS
from distplan.formulations.sharding.chain_dp import solve_by_dp
from distplan.formulations.sharding.chain_fronts import TooLarge, segment_fronts
from distplan.formulations.sharding.chain_program import solve_chains
from distplan.formulations.sharding.chainfold import MAX_STATES, Chain, consecutive_blocks, find_chains
from distplan.formulations.sharding.costgraph import (
    CostTables,
    Skeleton,
    build_folded_cost_graph,
    build_skeleton,
    unfold_plan,
)
from distplan.formulations.sharding.expert_plans import expert_if_better
from distplan.models.sharding import ShardingInstance, ShardingPlan
from distplan.models.sharding_costs import strategy_name
from distplan.solvers.result import INFEASIBLE_TERMINATIONS, LIMIT_TERMINATIONS, Termination

REFERENCE = "Shi et al., TAP, arXiv 2302.00247 (folded search over repeated subgraphs)"
DEFAULTS: dict[str, Any] = {"exact": True, "certify": True, "lp_first": True, "dp": True, "dp_max_rows": DP_MAX_ROWS, "min_copies": 2, "wl_iterations": 2, "max_states": MAX_STATES}
#: `find_walk_chains` keeps a chain of consecutive blocks when the nodes outside its walk
#: are at most this many copies' worth (a GPT's embedding, head and first layer: 12 nodes
#: against 7 a copy); more (another stack of layers, say) and the generic folding runs
EXPLICIT_BLOCKS = 4
#: a proven bound from a floating-point solver is lowered by this relative margin (the
#: evaluator's sums and the solver's differ in the last bits: 5e-15 relative measured)
BOUND_MARGIN = 1e-10


def fold_instance(inst: ShardingInstance, params: dict[str, Any]) -> tuple[Skeleton, FoldMap]:
    """The skeleton of an instance and its repeated regions (``min_copies``: copies a
    region needs to be folded, >= 2; ``wl_iterations``: rounds of colour refinement, >= 0;
    `distplan.solve` checks both, `TAP.least`)."""
    sk = build_skeleton(inst)
    fold = find_repeated_subgraphs(sk.labelled_graph(), min_copies=int(params.get("min_copies", DEFAULTS["min_copies"])), iterations=int(params.get("wl_iterations", DEFAULTS["wl_iterations"])))
    return sk, fold


def find_walk_chains(inst: ShardingInstance, params: dict[str, Any], *, blocks: bool = True) -> tuple[Skeleton, FoldMap, CostTables, list[Chain], dict[str, Any], tuple[float, float]]:
    """The skeleton, its fold, cost tables and chains (`find_chains`) of the exact path,
    with the seconds spent folding (skeleton included) and finding the chains.
    The fold is first the longest run of consecutive copies in op order
    (`consecutive_blocks`, linear), kept when it makes one chain whose walk leaves at
    most `EXPLICIT_BLOCKS` copies' worth of nodes explicit; else the generic folding
    (`fold_instance`; the only one with ``blocks=False``: the walk MILP without the
    dynamic program keeps the folding it was tested with). Either way the chains are
    checked exactly, so the walk stays exact; the fold's stats say which found it
    (``found_by``)."""
    t0 = time.perf_counter()
    sk = build_skeleton(inst)
    tables = CostTables(inst)
    max_states = int(params.get("max_states", MAX_STATES))
    fold = consecutive_blocks(sk, int(params.get("min_copies", DEFAULTS["min_copies"]))) if blocks else None
    t1 = time.perf_counter()
    if fold is not None:
        chains, info = find_chains(sk, fold, tables, max_states)
        if len(chains) == 1 and sk.num_nodes - (chains[0].copies - 1) * chains[0].positions <= EXPLICIT_BLOCKS * chains[0].positions:
            return sk, fold, tables, chains, info, (t1 - t0, time.perf_counter() - t1)
    t2 = time.perf_counter()
    fold = find_repeated_subgraphs(sk.labelled_graph(), min_copies=int(params.get("min_copies", DEFAULTS["min_copies"])), iterations=int(params.get("wl_iterations", DEFAULTS["wl_iterations"])))
    t3 = time.perf_counter()
    chains, info = find_chains(sk, fold, tables, max_states)
    return sk, fold, tables, chains, info, (t3 - t0 - (t2 - t1), time.perf_counter() - t3 + (t2 - t1))


def unfolded_size(sk: Skeleton, tables: CostTables) -> dict[str, int]:
    """Variables of Alpa's ILP on the unfolded graph (free-node s entries + edge products)."""
    label = sk.node_label_id
    _, first = np.unique(label, return_index=True)  # a node of every label (ids are dense)
    per_label = np.array([len(tables.node(sk, i).strategies) for i in first.tolist()], dtype=np.int64)
    counts = per_label[label]
    free = counts > 1
    s = int(counts[free].sum())
    u, v = sk.edge_u, sk.edge_v
    both = free[u] & free[v]
    e = int((counts[u] * counts[v])[both].sum())
    return {"s": s, "e": e, "variables": s + e}


def plan_of_choice(sk: Skeleton, tables: CostTables, choice: np.ndarray) -> ShardingPlan:
    """Strategy names of every op for a strategy index per skeleton node (ops in node order,
    then member order). Nodes of one label share their strategies, so the names are made
    once per (label, strategy index)."""
    if choice.size and int(choice.min()) < 0:
        raise ValueError(f"plan_of_choice: skeleton node {int(np.argmin(choice))} has no strategy (index {int(choice.min())})")
    names = list(sk.instance.index)
    width = int(choice.max()) + 1 if choice.size else 1
    codes = (sk.node_label_id * width + choice).tolist()  # one int per (label, strategy index)
    node_of = dict(zip(codes, range(len(codes))))  # code -> a node with it
    named = {code: [strategy_name(st) for st in tables.node(sk, i).strategies[code % width]] for code, i in node_of.items()}
    ops = map(names.__getitem__, sk.member_ops.tolist())  # every node's member ops, node by node
    return ShardingPlan(dict(zip(ops, chain.from_iterable(map(named.__getitem__, codes)))))


def run_tap(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    instance = unfolded(instance, "tap")
    if not ctx.param("exact", True):
        return run_tap_shared(instance, ctx)
    t0 = time.perf_counter()
    sk, fold, tables, chains, chain_info, (fold_s, chain_s) = find_walk_chains(instance, ctx.params, blocks=bool(ctx.param("dp", True)))
    t2 = time.perf_counter()
    sol = None
    method = "dp"
    unfolded_chains = 0
    try:
        if ctx.param("dp", True):
            sol = solve_by_dp(sk, chains, tables, ctx, max_rows=float(ctx.param("dp_max_rows", DP_MAX_ROWS)))
        if sol is None:
            method = "milp"
            for ch in list(chains):
                if not ch.arcs:
                    try:
                        if ch.arcs_too_large:  # (the dynamic program found them too large at this limit)
                            raise TooLarge("the chain's Pareto arcs")
                        ch.arcs = segment_fronts(ch, sk, tables, deadline=ctx.deadline)
                    except TooLarge:  # its Pareto arcs would not fit in memory: its copies stay unfolded
                        chains.remove(ch)
                        unfolded_chains += 1
            sol = solve_chains(sk, chains, tables, ctx, lp_first=bool(ctx.param("lp_first", True)), build_seconds=time.perf_counter() - t0)
    except DeadlineReached as exc:  # the limit cut the DP, the Pareto arcs or the program's build
        info_cut: dict[str, Any] = {"fold_seconds": fold_s, "chain_seconds": chain_s, "method": method, "stopped": str(exc)}
        fallback = expert_if_better(instance, None, info_cut, "tap")
        return Outcome(plan=fallback, bounds=[], info=info_cut, claimed_objective=info_cut.get("objective_seconds"), termination=Termination.TIME_LIMIT)
    info: dict[str, Any] = {
        "fold_seconds": fold_s,
        "chain_seconds": chain_s,
        "folding": dict(fold.stats),
        "chains": chain_info,
        "walk_arcs": [int(ch.arcs["cost"].size) if ch.arcs else None for ch in chains],
        "chains_left_unfolded": unfolded_chains,  # (Pareto arcs beyond chain_fronts.MAX_ARC_ROWS rows)
        "method": method,
        "dp_seconds": time.perf_counter() - t2 if method == "dp" else None,  # Pareto arcs included when needed
        "rounds": sol.rounds,
        "connectivity_cuts": sol.cuts,
    }
    if sol.lp_integral is not None:
        info["lp_relaxation"] = {"integral": sol.lp_integral}
    bounds: list[Bound] = []
    if sol.bound is not None:
        value = sol.bound - abs(sol.bound) * BOUND_MARGIN
        if method == "dp":
            bounds.append(Bound(value, f"tap: exhaustive Pareto dynamic program over the folded walk (no solver), less {BOUND_MARGIN:g} relative"))
        elif sol.last is None and sol.bound_record is None:  # no call: the program had no variable (`solve_chains`)
            bounds.append(Bound(value, SINGLE_PLAN_SOURCE.format(name="tap")))
        else:
            bounds.append(Bound(value, f"tap: dual bound of the folded walk program, a relaxation of Alpa's ILP ({ctx.backend.name}), less {BOUND_MARGIN:g} relative", solver_record=sol.bound_record))
        info["bound_seconds"] = value
    last = sol.last
    if sol.variables is not None:
        info["variables_folded"] = sol.variables
    elif last is not None:
        info["variables_folded"] = last.extra.get("model", {}).get("variables")
    t3 = time.perf_counter()
    plan = plan_of_choice(sk, tables, sol.choice) if sol.choice is not None else None
    info["unfold_seconds"] = time.perf_counter() - t3
    info["objective_seconds"] = sol.objective
    if not sol.optimal and (sol.last is None or sol.last.termination not in INFEASIBLE_TERMINATIONS):
        plan = expert_if_better(instance, plan, info, "tap")
    if plan is None:
        return Outcome(plan=None, bounds=bounds, solver_results=list(ctx.solver_results), info=info)
    info["variables_unfolded"] = unfolded_size(sk, tables)["variables"]
    return Outcome(
        plan=plan,
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=info["objective_seconds"],
        proven_optimal=sol.optimal,
        info=info,
        termination=Termination.OPTIMAL if method == "dp" else None,
    )


def run_tap_shared(instance: ShardingInstance, ctx: RunContext) -> Outcome:
    """TAP as published: copies share the representative's strategies (``exact=False``)."""
    t0 = time.perf_counter()
    sk, fold = fold_instance(instance, ctx.params)
    t1 = time.perf_counter()
    tables = CostTables(instance)
    graph, _ = build_folded_cost_graph(sk, fold, tables)
    t2 = time.perf_counter()
    res, choice, info = solve_graph(graph, ctx, lp_first=bool(ctx.param("lp_first", DEFAULTS["lp_first"])), build_seconds=t2 - t0, name="tap")
    info.pop(BOUND_RECORD, None)  # (tap reports the bound of its own LP below)
    info["fold_seconds"] = t1 - t0
    info["cost_seconds"] = t2 - t1
    info["folding"] = dict(fold.stats)
    bounds: list[Bound] = []
    t3 = time.perf_counter()
    plan = unfold_plan(sk, fold, ShardingPlan(graph.plan(choice))) if choice is not None else None
    info["unfold_seconds"] = time.perf_counter() - t3
    stopped = Termination.TIME_LIMIT if "stopped" in info else None  # (the model's build ran out of time)
    if stopped is not None or (res is not None and res.termination in LIMIT_TERMINATIONS):
        plan = expert_if_better(instance, plan, info, "tap")
    if plan is None:
        return Outcome(plan=None, bounds=bounds, solver_results=list(ctx.solver_results), info=info, termination=stopped)
    if ctx.param("certify", True) and res is not None:
        t4 = time.perf_counter()
        relaxed, _ = build_folded_cost_graph(sk, fold, tables, boundary_edges=False)
        lp, _ = build_sharding_model(relaxed, relax=True, name="tap_bound")
        lb = ctx.solve_model(lp, build_seconds=time.perf_counter() - t4)
        proven = lb.bound if lb.bound is not None else lb.objective
        if lb.termination is Termination.OPTIMAL and proven is not None:
            # the solver's optimum within its tolerances, lowered as the exact path's dual
            # bound is (without the margin it was found 25 ulp below the objective, review rev13)
            value = dual_bound_seconds(proven, instance, lb.extra.get("model", {}))
            value -= abs(value) * BOUND_MARGIN
            bounds.append(Bound(value, f"tap: LP of the folded problem without boundary edges ({ctx.backend.name}), less {BOUND_MARGIN:g} relative", solver_record=lb))
            info["bound_seconds"] = value
        info["certify_seconds"] = time.perf_counter() - t4
    sizes = unfolded_size(sk, tables)
    model_stats = res.extra.get("model", {}) if res is not None else {}
    info["variables_unfolded"] = sizes["variables"]
    info["variables_folded"] = model_stats.get("variables")
    return Outcome(
        plan=plan,
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=info.get("objective_seconds"),
        proven_optimal=False,
        info=info,
        termination=stopped,
    )


def fold_sharding(inst: ShardingInstance, params: dict[str, Any]) -> Folding:
    """Folder for ``solve(instance, "alpa_ilp", fold=True)``: a `FoldedSharding` over the
    representatives; not exact (copies are forced to agree), so no bound carries over."""
    sk, fold = fold_instance(inst, params)
    graph, _ = build_folded_cost_graph(sk, fold)
    stats = dict(fold.stats)

    def unfold(plan: ShardingPlan) -> ShardingPlan:
        return unfold_plan(sk, fold, plan)

    return Folding(instance=FoldedSharding(graph, inst, stats, unfold), unfold=unfold, exact=False, stats=stats)


TAP = Formulation(
    kind="sharding",
    name="tap",
    solves=("tap", "tap_lp", "tap_bound"),
    description="TAP folding made exact: repeated layers as integer counts of copies on a walk over boundary states (memory summed over counts)",
    program="milp",
    run=run_tap,
    exact=True,
    reference=REFERENCE,
    policy=Policy(default_time_limit=time_limit_parameter),
    params={**DEFAULTS, "default_time_limit": 60.0},
    above={"default_time_limit": 0.0},
    #: copies a repeated region needs; rounds of colour refinement; boundary states a chain
    #: may have; rows of a table of the dynamic program (min_copies 1 made the chain finder
    #: fail with an IndexError)
    least={"min_copies": 2, "wl_iterations": 0, "max_states": 1, "dp_max_rows": 1},
)
