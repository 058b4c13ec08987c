"""The cost graph of a sharding instance (Alpa's ``CostGraph``), and its folded form.

Nodes are ops with their *followers* merged in (elementwise ops that take their first
input's layout, views: Alpa's ``MergeNode``): a node's strategy index fixes the strategy of
every member, the resharding on edges inside the node becomes node cost. Each node has a
cost vector (seconds per iteration per strategy) and a memory vector (bytes per device);
each edge between two nodes has a resharding cost matrix (seconds), the sum over the
tensors it carries.

The graph is built in two steps: a *skeleton* (members, labels, edges; cheap, linear in
the number of ops) and the numeric costs, computed once per distinct node label and edge
label (ops with equal signatures have equal costs), so a 96-layer stack costs little more
than one layer. Labels make the skeleton a labelled graph for
`distplan.formulations.folding`: equal labels mean identical cost data.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np

from distplan.formulations.folding import FoldMap, LabelledGraph
from distplan.models.sharding import ShardingInstance, ShardingPlan
from distplan.models.sharding_costs import (
    Spec,
    Strategy,
    enumerate_strategies,
    follow_strategy,
    op_cost,
    reshard_seconds,
    strategy_name,
    tensor_spec,
)

#: (source member position, destination member position, input slot of the destination)
Link = tuple[int, int, int]


@dataclass
class Skeleton:
    """Structure of the cost graph: members, labels and edges, no numbers yet."""

    instance: ShardingInstance
    node_ops: list[tuple[int, ...]]
    node_label: list[Hashable]
    node_internal: list[tuple[Link, ...]]
    edges: list[tuple[int, int]]
    edge_links: list[tuple[Link, ...]]
    #: labels interned as small integers (equal ids = equal labels, within this skeleton)
    node_label_id: list[int]
    edge_label_id: list[int]

    @property
    def num_nodes(self) -> int:
        return len(self.node_ops)

    def labelled_graph(self) -> LabelledGraph:
        """The skeleton as the labelled graph that folding searches."""
        return LabelledGraph(self.node_label_id, self.edges, self.edge_label_id)


def build_skeleton(inst: ShardingInstance) -> Skeleton:
    """Merge followers into their producers' nodes and collect the edges between nodes."""
    node_of: list[int] = []
    pos_of: list[int] = []
    members: list[list[int]] = []
    inputs = inst.producers
    for k, ins in enumerate(inputs):
        if ins and inst.semantics(k).follows:
            node = node_of[ins[0]]
            node_of.append(node)
            pos_of.append(len(members[node]))
            members[node].append(k)
        else:
            node_of.append(len(members))
            pos_of.append(0)
            members.append([k])
    internal: list[list[Link]] = [[] for _ in members]
    edge_index: dict[tuple[int, int], int] = {}
    edges: list[tuple[int, int]] = []
    links: list[list[Link]] = []
    for k, ins in enumerate(inputs):
        v = node_of[k]
        pk = pos_of[k]
        for slot, p in enumerate(ins):
            u = node_of[p]
            if u == v:
                internal[v].append((pos_of[p], pk, slot))
                continue
            e = edge_index.get((u, v))
            if e is None:
                e = edge_index[(u, v)] = len(edges)
                edges.append((u, v))
                links.append([])
            links[e].append((pos_of[p], pk, slot))
    node_internal = [tuple(sorted(x)) for x in internal]
    signature = inst.signature
    labels: list[Hashable] = [(tuple([signature(k) for k in ops]), inner) for ops, inner in zip(members, node_internal)]
    edge_links = [tuple(sorted(x)) for x in links]
    node_ids: dict[Hashable, int] = {}
    edge_ids: dict[Hashable, int] = {}
    return Skeleton(
        instance=inst,
        node_ops=[tuple(m) for m in members],
        node_label=labels,
        node_internal=node_internal,
        edges=edges,
        edge_links=edge_links,
        node_label_id=[node_ids.setdefault(lab, len(node_ids)) for lab in labels],
        edge_label_id=[edge_ids.setdefault(lab, len(edge_ids)) for lab in edge_links],
    )


@dataclass
class NodeCosts:
    """Numbers of one node label: per strategy index, the member strategies and costs."""

    strategies: list[tuple[Strategy, ...]]
    cost: np.ndarray  # seconds per iteration
    memory: np.ndarray  # bytes per device
    out_specs: list[list[Spec]]  # [member][strategy] layout of the member's output


class CostTables:
    """Node and edge costs of one instance, computed once per label (of one skeleton)."""

    def __init__(self, inst: ShardingInstance):
        self.inst = inst
        self.ctx = inst.cost_context
        self._skeleton: Skeleton | None = None
        self._nodes: dict[int, NodeCosts] = {}
        self._edges: dict[tuple[int, int, int], np.ndarray] = {}
        self._pairs: dict[tuple[Any, ...], float] = {}

    def _bind(self, sk: Skeleton) -> None:
        """Label ids are per skeleton: the tables serve the first skeleton they are given."""
        if self._skeleton is None:
            if sk.instance is not self.inst:
                raise ValueError("CostTables: the skeleton belongs to another instance")
            self._skeleton = sk
        elif sk is not self._skeleton:
            raise ValueError("CostTables: label ids of a different skeleton; make new tables")

    def node(self, sk: Skeleton, i: int) -> NodeCosts:
        self._bind(sk)
        label = sk.node_label_id[i]
        got = self._nodes.get(label)
        if got is None:
            got = self._nodes[label] = self._node_costs(sk.node_ops[i], sk.node_internal[i])
        return got

    def _node_costs(self, ops: tuple[int, ...], internal: tuple[Link, ...]) -> NodeCosts:
        inst, ctx = self.inst, self.ctx
        sems = [inst.semantics(k) for k in ops]
        pos = {k: j for j, k in enumerate(ops)}
        root = enumerate_strategies(sems[0], ctx)
        strategies: list[tuple[Strategy, ...]] = []
        cost = np.zeros(len(root))
        memory = np.zeros(len(root))
        out_specs: list[list[Spec]] = [[] for _ in ops]
        for s, st in enumerate(root):
            chosen: list[Strategy] = [st]
            for j in range(1, len(ops)):
                producer = pos[inst.index[inst.ops[ops[j]].inputs[0]]]
                spec = tensor_spec(sems[producer].output, chosen[producer])
                chosen.append(follow_strategy(sems[j], spec, ctx))
            for j, sem in enumerate(sems):
                c = op_cost(sem, chosen[j], ctx)
                cost[s] += c.seconds
                memory[s] += c.memory
                out_specs[j].append(tensor_spec(sem.output, chosen[j]))
            for a, b, slot in internal:
                src = sems[a].output
                cost[s] += reshard_seconds(src, out_specs[a][s], tensor_spec(sems[b].inputs[slot], chosen[b]), ctx)
            strategies.append(tuple(chosen))
        return NodeCosts(strategies, cost, memory, out_specs)

    def edge(self, sk: Skeleton, e: int) -> np.ndarray:
        self._bind(sk)
        u, v = sk.edges[e]
        key = (sk.node_label_id[u], sk.node_label_id[v], sk.edge_label_id[e])
        got = self._edges.get(key)
        if got is None:
            got = self._edges[key] = self._edge_costs(sk, u, v, sk.edge_links[e])
        return got

    def _edge_costs(self, sk: Skeleton, u: int, v: int, links: Sequence[Link]) -> np.ndarray:
        inst, ctx = self.inst, self.ctx
        nu, nv = self.node(sk, u), self.node(sk, v)
        M = np.zeros((len(nu.strategies), len(nv.strategies)))
        for a, b, slot in links:
            src_sem = inst.semantics(sk.node_ops[u][a])
            dst_sem = inst.semantics(sk.node_ops[v][b])
            tensor = src_sem.output
            src_specs = nu.out_specs[a]
            dst_specs = [tensor_spec(dst_sem.inputs[slot], st[b]) for st in nv.strategies]
            usrc = sorted(set(src_specs))
            udst = sorted(set(dst_specs))
            table = np.zeros((len(usrc), len(udst)))
            for x, sspec in enumerate(usrc):
                for y, dspec in enumerate(udst):
                    key = (tensor, sspec, dspec)
                    val = self._pairs.get(key)
                    if val is None:
                        val = self._pairs[key] = reshard_seconds(tensor, sspec, dspec, ctx)
                    table[x, y] = val
            ix = np.array([usrc.index(s) for s in src_specs])
            iy = np.array([udst.index(s) for s in dst_specs])
            M += table[np.ix_(ix, iy)]
        return M


@dataclass
class CostGraph:
    """Numeric cost graph handed to the ILP: per node a cost and memory vector, per edge
    a resharding matrix. ``multiplicity`` > 1 marks folded nodes (costs already scaled)."""

    name: str
    instance: ShardingInstance
    node_ops: list[tuple[int, ...]]
    node_strategies: list[list[tuple[Strategy, ...]]]
    node_cost: list[np.ndarray]
    node_memory: list[np.ndarray]
    edge_u: np.ndarray
    edge_v: np.ndarray
    edge_cost: list[np.ndarray]
    multiplicity: np.ndarray
    memory_budget: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def num_nodes(self) -> int:
        return len(self.node_ops)

    def strategy_counts(self) -> np.ndarray:
        return np.array([len(c) for c in self.node_cost], dtype=np.int64)

    def plan(self, choice: Sequence[int] | np.ndarray) -> dict[str, str]:
        """Strategy names of the member ops of every node, for a choice per node."""
        ops = self.instance.ops
        out: dict[str, str] = {}
        for i, k in enumerate(choice):
            strategies = self.node_strategies[i][int(k)]
            for m, op_index in enumerate(self.node_ops[i]):
                out[ops[op_index].name] = strategy_name(strategies[m])
        return out


def build_cost_graph(inst: ShardingInstance, sk: Skeleton | None = None, tables: CostTables | None = None) -> CostGraph:
    """The full (unfolded) cost graph of an instance."""
    sk = sk or build_skeleton(inst)
    tables = tables or CostTables(inst)
    nodes = [tables.node(sk, i) for i in range(sk.num_nodes)]
    return CostGraph(
        name=inst.name,
        instance=inst,
        node_ops=list(sk.node_ops),
        node_strategies=[n.strategies for n in nodes],
        node_cost=[n.cost for n in nodes],
        node_memory=[n.memory for n in nodes],
        edge_u=np.array([u for u, _ in sk.edges], dtype=np.int64),
        edge_v=np.array([v for _, v in sk.edges], dtype=np.int64),
        edge_cost=[tables.edge(sk, e) for e in range(len(sk.edges))],
        multiplicity=np.ones(sk.num_nodes, dtype=np.int64),
        memory_budget=inst.memory_budget,
    )


def build_folded_cost_graph(sk: Skeleton, fold: FoldMap, tables: CostTables | None = None, *, boundary_edges: bool = True) -> tuple[CostGraph, list[int]]:
    """The cost graph over representatives: copies share the representative's strategy.

    Node costs and memory are multiplied by the copy count; edges inside a copy are
    counted once per copy (matrix x count); every other edge is kept between the
    representatives of its ends (matrices summed; an edge whose ends share a
    representative adds its diagonal to the node cost). With ``boundary_edges=False``
    only edges inside copies and edges between unfolded nodes are kept (the relaxation
    used for the lower bound of `tap`). Returns the graph and the skeleton node of each
    folded node.
    """
    inst = sk.instance
    tables = tables or CostTables(inst)
    rep_of = [cast(int, fold.representative[i]) for i in range(sk.num_nodes)]
    reps = [i for i in range(sk.num_nodes) if rep_of[i] == i]
    index = {r: j for j, r in enumerate(reps)}
    mult = np.array([fold.multiplicity[r] for r in reps], dtype=np.int64)
    nodes = [tables.node(sk, r) for r in reps]
    node_cost = [n.cost * m for n, m in zip(nodes, mult)]
    node_memory = [n.memory * m for n, m in zip(nodes, mult)]
    acc: dict[tuple[int, int], np.ndarray] = {}
    for e, (u, v) in enumerate(sk.edges):
        inner = fold.same_copy(u, v)
        if inner:
            if fold.copy_of[u][1] != 0:
                continue  # counted through the representative copy
            M = tables.edge(sk, e) * fold.multiplicity[u]
        else:
            unfolded = fold.multiplicity[rep_of[u]] == 1 and fold.multiplicity[rep_of[v]] == 1
            if not boundary_edges and not unfolded:
                continue
            M = tables.edge(sk, e)
        a, b = index[rep_of[u]], index[rep_of[v]]
        if a == b:
            node_cost[a] = node_cost[a] + np.diag(M)
            continue
        if a > b:
            a, b, M = b, a, M.T
        prev = acc.get((a, b))
        acc[(a, b)] = M if prev is None else prev + M
    pairs = sorted(acc)
    graph = CostGraph(
        name=inst.name,
        instance=inst,
        node_ops=[sk.node_ops[r] for r in reps],
        node_strategies=[n.strategies for n in nodes],
        node_cost=node_cost,
        node_memory=node_memory,
        edge_u=np.array([a for a, _ in pairs], dtype=np.int64),
        edge_v=np.array([b for _, b in pairs], dtype=np.int64),
        edge_cost=[acc[p] for p in pairs],
        multiplicity=mult,
        memory_budget=inst.memory_budget,
    )
    return graph, reps


def unfold_plan(sk: Skeleton, fold: FoldMap, folded_plan: ShardingPlan) -> ShardingPlan:
    """Strategies of representative ops -> strategies of every op (copies by position)."""
    ops = sk.instance.ops
    out: dict[str, str] = {}
    for i in range(sk.num_nodes):
        rep = cast(int, fold.representative[i])
        for m, k in enumerate(sk.node_ops[i]):
            out[ops[k].name] = folded_plan.strategies[ops[sk.node_ops[rep][m]].name]
    return ShardingPlan(out)
