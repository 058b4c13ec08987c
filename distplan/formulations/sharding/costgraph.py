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

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Any

import numpy as np

from distplan.formulations.folding import FoldMap, LabelledGraph, first_appearance, first_appearance_ids
from distplan.models.sharding import ShardingInstance, ShardingPlan
from distplan.models.sharding_costs import (
    Spec,
    Strategy,
    TensorSem,
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
    """Structure of the cost graph: members, labels and edges, no numbers yet (arrays).

    Node i holds the ops ``member_ops[member_start[i]:member_start[i + 1]]`` (in op order)
    and the links ``internal[internal_start[i]:internal_start[i + 1]]`` between them; edge
    e runs from node ``edge_u[e]`` to ``edge_v[e]`` and carries the links
    ``edge_link[edge_link_start[e]:edge_link_start[e + 1]]``; links are sorted."""

    instance: ShardingInstance
    member_ops: np.ndarray
    member_start: np.ndarray
    internal: np.ndarray  # (links, 3): Link rows
    internal_start: np.ndarray
    edge_u: np.ndarray
    edge_v: np.ndarray
    edge_link: np.ndarray  # (links, 3): Link rows
    edge_link_start: np.ndarray
    #: labels interned as small integers (equal ids = equal labels, within this skeleton)
    node_label_id: np.ndarray
    edge_label_id: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.member_start.size - 1

    @property
    def num_edges(self) -> int:
        return self.edge_u.size

    def members(self, i: int) -> tuple[int, ...]:
        return tuple(self.member_ops[self.member_start[i] : self.member_start[i + 1]].tolist())

    def node_internal(self, i: int) -> tuple[Link, ...]:
        return tuple(map(tuple, self.internal[self.internal_start[i] : self.internal_start[i + 1]].tolist()))

    def edge_links(self, e: int) -> tuple[Link, ...]:
        return tuple(map(tuple, self.edge_link[self.edge_link_start[e] : self.edge_link_start[e + 1]].tolist()))

    @cached_property
    def node_ops(self) -> list[tuple[int, ...]]:
        """Member ops of every node."""
        ops, start = self.member_ops.tolist(), self.member_start.tolist()
        return [tuple(ops[start[i] : start[i + 1]]) for i in range(self.num_nodes)]

    def labelled_graph(self) -> LabelledGraph:
        """The skeleton as the labelled graph that folding searches."""
        return LabelledGraph(self.node_label_id, np.stack([self.edge_u, self.edge_v], axis=1), self.edge_label_id)


def _starts(owner: np.ndarray, count: int) -> np.ndarray:
    """CSR starts of items grouped by a sorted owner array (count + 1 entries)."""
    start = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=count), out=start[1:])
    return start


def _sequence_ids(owner: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """Ids of the integer sequences ``codes[owner == i]`` (``owner`` sorted, items in
    sequence order) for i < count: equal for equal sequences, numbered in order of first
    appearance (`_sequence_keys`, renumbered). When every sequence is one item (an edge of
    one link), the ids are those of the items."""
    if codes.size == count and (owner[1:] != owner[:-1]).all():  # (sorted, so owner is 0 .. count - 1)
        return first_appearance(codes)[0]
    return first_appearance(_sequence_keys(owner, codes, count))[0]


def _sequence_keys(owner: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """One integer per sequence ``codes[owner == i]`` (``owner`` sorted, items in sequence
    order) for i < count, equal exactly for equal sequences (not numbered densely). Exact:
    the sequences are the rows of a (count x longest) matrix of the items shifted to 1, 2,
    ... (0 pads a shorter row, so rows of different lengths differ), each row read as one
    integer in base ``span`` (the items renumbered densely when the integers would reach
    2**62; `_sequence_ids_by_position` when even then)."""
    start = _starts(owner, count)
    longest = int((start[1:] - start[:-1]).max(initial=0))
    low = int(codes.min(initial=0))
    span = int(codes.max(initial=0)) - low + 2
    if span**longest >= 2**62:
        codes = np.unique(codes, return_inverse=True)[1].reshape(-1)
        low, span = 0, int(codes.max(initial=0)) + 2
        if span**longest >= 2**62:
            return _sequence_ids_by_position(owner, codes, count)
    rows = np.zeros(count * longest, dtype=np.int64)
    rows[np.arange(owner.size) + (owner * longest - start[owner])] = (codes - low) + 1
    return rows.reshape(count, longest) @ (span ** np.arange(longest - 1, -1, -1, dtype=np.int64))


def _sequence_ids_by_position(owner: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    """`_sequence_ids` of long sequences: the items are folded into one integer per
    sequence, position by position (renumbered densely before it would overflow), with
    the length."""
    start = _starts(owner, count)
    length = np.diff(start)
    codes = codes - int(codes.min(initial=0))
    span = int(codes.max(initial=0)) + 1
    ident = np.zeros(count, dtype=np.int64)
    bound = 1  # ident < bound
    longest = int(length.max(initial=0))
    for j in range(longest):
        if bound * span >= 2**62:
            ident = np.unique(ident, return_inverse=True)[1].reshape(-1)
            bound = count
        live = np.flatnonzero(length > j)
        ident[live] = ident[live] * span + codes[start[live] + j]
        bound *= span
    if bound * (longest + 1) >= 2**62:
        ident = np.unique(ident, return_inverse=True)[1].reshape(-1)
    return first_appearance_ids(ident * (longest + 1) + length)


def build_skeleton(inst: ShardingInstance) -> Skeleton:
    """Merge followers into their producers' nodes and collect the edges between nodes."""
    producers = inst.producers
    n_ops = len(producers)
    count = np.fromiter(map(len, producers), dtype=np.int64, count=n_ops)
    src = np.fromiter(chain.from_iterable(producers), dtype=np.int64, count=int(count.sum()))
    ops = np.arange(n_ops)
    dst = ops.repeat(count)
    first_input = count.cumsum() - count
    slot = np.arange(src.size) - first_input[dst]
    signature_ids = inst.signature_ids
    signature = np.array(signature_ids, dtype=np.int64)
    # whether each signature follows, from one op of it (ops of one signature share semantics)
    some_op = dict(zip(signature_ids, range(n_ops)))
    follows_signature = np.zeros(int(signature.max(initial=-1)) + 1, dtype=bool)
    follows_signature[list(some_op)] = [inst.semantics(k).follows for k in some_op.values()]
    # an op that follows joins its first input's node: point to the root of that chain
    head = ops.copy()
    follows = follows_signature[signature] & (count > 0)
    head[follows] = src[first_input[follows]]
    while True:
        step = head[head]
        if not (step != head).any():
            break
        head = step
    node_of = ((head == ops).cumsum() - 1)[head]
    n_nodes = int(node_of.max(initial=-1)) + 1
    member_ops = node_of.argsort(kind="stable")
    member_start = _starts(node_of, n_nodes)
    pos_of = np.empty(n_ops, dtype=np.int64)
    pos_of[member_ops] = ops - member_start[node_of[member_ops]]
    # links (source member, destination member, slot) of every input, inside nodes or on edges
    u, v = node_of[src], node_of[dst]
    links = np.empty((src.size, 3), dtype=np.int64)
    links[:, 0] = pos_of[src]
    links[:, 1] = pos_of[dst]
    links[:, 2] = slot
    members, slots = int((member_start[1:] - member_start[:-1]).max(initial=1)), int(slot.max(initial=0)) + 1
    code = (links[:, 0] * members + links[:, 1]) * slots + links[:, 2]  # orders links like tuples
    inner = (u == v).nonzero()[0]
    inner = inner[np.lexsort((code[inner], v[inner]))]
    cross = (u != v).nonzero()[0]
    # edges numbered in order of first appearance of their (u, v) among the inputs
    edge_of, first_input = first_appearance(u[cross] * max(n_nodes, 1) + v[cross])
    n_edges = first_input.size
    first = cross[first_input]  # the input that makes each edge
    by_edge = (edge_of * (int(code.max(initial=0)) + 1) + code[cross]).argsort()  # (keys distinct: any sort)
    edge_items, edge_owner = cross[by_edge], edge_of[by_edge]
    # labels: the member signatures then the inner links (as negative codes); the edge links
    owner = np.concatenate([node_of[member_ops], v[inner]])
    items = np.concatenate([signature[member_ops], -1 - code[inner]])
    order = owner.argsort(kind="stable")
    return Skeleton(
        instance=inst,
        member_ops=member_ops,
        member_start=member_start,
        internal=links[inner],
        internal_start=_starts(v[inner], n_nodes),
        edge_u=u[first],
        edge_v=v[first],
        edge_link=links[edge_items],
        edge_link_start=_starts(edge_owner, n_edges),
        node_label_id=_sequence_ids(owner[order], items[order], n_nodes),
        edge_label_id=_sequence_ids(edge_owner, code[edge_items], n_edges),
    )


def _frozen(values: list[float]) -> np.ndarray:
    """A float array that cannot be written: `CostTables` hands out the same arrays for every
    node (and edge) of a label, and the factor tables of tap's dynamic program keep them
    uncopied, so a write into one would change every later use."""
    out = np.array(values, dtype=float)
    out.setflags(write=False)
    return out


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
        self._labels: list[int] = []  # node label id per skeleton node (a list: fast to index)
        self._nodes: dict[int, NodeCosts] = {}
        self._edges: dict[tuple[int, int, int], np.ndarray] = {}
        #: resharding seconds per (id of the tensor, source layout, destination layout): the
        #: tensors are the instance's semantics, alive as long as the instance
        self._pairs: dict[tuple[int, Spec, Spec], float] = {}
        #: per (op signature id, strategy): the op's seconds and bytes (`op_cost`)
        self._ops: dict[tuple[int, Strategy], tuple[float, float]] = {}
        #: per (op signature id, producer's output layout): the follower's strategy
        self._follow: dict[tuple[int, Spec], Strategy] = {}
        #: per (id of the tensor, strategy): its layout (`tensor_spec`)
        self._specs: dict[tuple[int, Strategy], Spec] = {}

    def _spec(self, tensor: TensorSem, strategy: Strategy) -> Spec:
        """`tensor_spec`, once per (tensor, strategy)."""
        key = (id(tensor), strategy)
        got = self._specs.get(key)
        if got is None:
            got = self._specs[key] = tensor_spec(tensor, strategy)
        return got

    def _bind(self, sk: Skeleton) -> None:
        """Label ids are per skeleton: the tables serve the first skeleton they are given."""
        if self._skeleton is None:
            if sk.instance is not self.inst:
                raise ValueError("CostTables: the skeleton belongs to another instance")
            self._skeleton = sk
            self._labels = sk.node_label_id.tolist()
            self._edge_labels: list[int] = sk.edge_label_id.tolist()
            self._edge_u: list[int] = sk.edge_u.tolist()
            self._edge_v: list[int] = sk.edge_v.tolist()
            self._member_ops: list[int] = sk.member_ops.tolist()
            self._member_start: list[int] = sk.member_start.tolist()
            self._internal: list[list[int]] = sk.internal.tolist()
            self._internal_start: list[int] = sk.internal_start.tolist()
        elif sk is not self._skeleton:
            raise ValueError("CostTables: label ids of a different skeleton; make new tables")

    def node(self, sk: Skeleton, i: int) -> NodeCosts:
        if sk is not self._skeleton:
            self._bind(sk)
        label = self._labels[i]
        got = self._nodes.get(label)
        if got is None:
            start = self._member_start
            inner = self._internal_start
            got = self._nodes[label] = self._node_costs(self._member_ops[start[i] : start[i + 1]], self._internal[inner[i] : inner[i + 1]])
        return got

    def _node_costs(self, ops: Sequence[int], internal: Sequence[Sequence[int]]) -> NodeCosts:
        """The numbers of a node of member ops ``ops`` (op order) and internal links."""
        if len(ops) == 1:  # (a node of one op has no internal link)
            return self._single_node_costs(ops[0])
        return self._member_costs(ops, internal)

    def _member_costs(self, ops: Sequence[int], internal: Sequence[Sequence[int]]) -> NodeCosts:
        """The node's numbers: per strategy of its first member (`enumerate_strategies`),
        every follower's strategy from its producer's output layout (`follow_strategy`),
        the members' `op_cost` and the resharding of its internal links, summed member by
        member then link by link as Python floats (the same floats as on arrays)."""
        inst, ctx = self.inst, self.ctx
        sems = [inst.semantics(k) for k in ops]
        all_sig = inst.signature_ids
        sig = [all_sig[k] for k in ops]
        pos = {k: j for j, k in enumerate(ops)}
        producers = inst.producers
        # (follower position, its producer's position, its signature id and semantics)
        followers = [(j, pos[producers[k][0]], sig[j], sems[j]) for j, k in enumerate(ops) if j]
        outputs = [sem.output for sem in sems]
        links = [(a, b, sems[b].inputs[slot]) for a, b, slot in internal]
        root = enumerate_strategies(sems[0], ctx)
        strategies: list[tuple[Strategy, ...]] = []
        cost: list[float] = []  # sums in the same order as on arrays: same floats
        memory: list[float] = []
        out_specs: list[list[Spec]] = [[] for _ in ops]
        op_costs, follow, specs, reshard = self._ops, self._follow, self._specs, self._reshard
        members = list(zip(sig, sems, outputs, out_specs))
        for st in root:
            chosen: list[Strategy] = [st]
            out_spec: list[Spec] = []  # this strategy's output layout per member
            key = (id(outputs[0]), st)
            spec = specs.get(key)
            if spec is None:
                spec = specs[key] = tensor_spec(outputs[0], st)
            out_spec.append(spec)
            for j, a, g, sem in followers:
                got = follow.get((g, out_spec[a]))
                if got is None:
                    got = follow[(g, out_spec[a])] = follow_strategy(sem, out_spec[a], ctx)
                chosen.append(got)
                key = (id(outputs[j]), got)
                spec = specs.get(key)
                if spec is None:
                    spec = specs[key] = tensor_spec(outputs[j], got)
                out_spec.append(spec)
            c_s = m_s = 0.0
            for (g, sem, _, member_specs), ch, spec in zip(members, chosen, out_spec):
                c = op_costs.get((g, ch))
                if c is None:
                    full = op_cost(sem, ch, ctx)
                    c = op_costs[(g, ch)] = (full.seconds, full.memory)
                c_s += c[0]
                m_s += c[1]
                member_specs.append(spec)
            for a, b, tensor in links:
                key = (id(tensor), chosen[b])
                dst = specs.get(key)
                if dst is None:
                    dst = specs[key] = tensor_spec(tensor, chosen[b])
                c_s += reshard(outputs[a], out_spec[a], dst)
            cost.append(c_s)
            memory.append(m_s)
            strategies.append(tuple(chosen))
        return NodeCosts(strategies, _frozen(cost), _frozen(memory), out_specs)

    def _single_node_costs(self, op: int) -> NodeCosts:
        """`_member_costs` of a node of one op (most nodes), without its bookkeeping of
        followers and links: the same strategies, layouts and floats (each sum is 0.0 plus
        the op's numbers)."""
        ctx = self.ctx
        sem = self.inst.semantics(op)
        g = self.inst.signature_ids[op]
        output = sem.output
        root = enumerate_strategies(sem, ctx)
        op_costs, specs = self._ops, self._specs
        cost: list[float] = []
        memory: list[float] = []
        out_spec: list[Spec] = []
        for st in root:
            c = op_costs.get((g, st))
            if c is None:
                full = op_cost(sem, st, ctx)
                c = op_costs[(g, st)] = (full.seconds, full.memory)
            c_s = m_s = 0.0
            c_s += c[0]
            m_s += c[1]
            cost.append(c_s)
            memory.append(m_s)
            key = (id(output), st)
            spec = specs.get(key)
            if spec is None:
                spec = specs[key] = tensor_spec(output, st)
            out_spec.append(spec)
        return NodeCosts([(st,) for st in root], _frozen(cost), _frozen(memory), [out_spec])

    def _reshard(self, tensor: TensorSem, src: Spec, dst: Spec) -> float:
        """`reshard_seconds`, once per (tensor, layouts)."""
        key = (id(tensor), src, dst)
        val = self._pairs.get(key)
        if val is None:
            val = self._pairs[key] = reshard_seconds(tensor, src, dst, self.ctx)
        return val

    def edge(self, sk: Skeleton, e: int) -> np.ndarray:
        if sk is not self._skeleton:
            self._bind(sk)
        u, v = self._edge_u[e], self._edge_v[e]
        key = (self._labels[u], self._labels[v], self._edge_labels[e])
        got = self._edges.get(key)
        if got is None:
            got = self._edges[key] = self._edge_costs(sk, u, v, sk.edge_links(e))
            got.setflags(write=False)
        return got

    def _edge_costs(self, sk: Skeleton, u: int, v: int, links: Sequence[Link]) -> np.ndarray:
        """The edge's matrix: per link, the resharding of every (source strategy, destination
        strategy) pair, summed link by link as Python floats (the first link's values as
        they are, as 0.0 + x is x) and made an array once."""
        inst, reshard = self.inst, self._reshard
        nu, nv = self.node(sk, u), self.node(sk, v)
        ops, start = self._member_ops, self._member_start
        rows: list[list[float]] | None = None
        for a, b, slot in links:
            tensor = inst.semantics(ops[start[u] + a]).output
            dst_tensor = inst.semantics(ops[start[v] + b]).inputs[slot]
            dst_specs = [self._spec(dst_tensor, st[b]) for st in nv.strategies]
            part = [[reshard(tensor, src, dst) for dst in dst_specs] for src in nu.out_specs[a]]
            rows = part if rows is None else [[x + y for x, y in zip(r, q)] for r, q in zip(rows, part)]
        if rows is None:
            return np.zeros((len(nu.strategies), len(nv.strategies)))
        return np.array(rows, dtype=float)


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

    def memory_of(self, choice: Sequence[int] | np.ndarray) -> float:
        """Bytes per device of a choice per node (the nodes' memories summed in node order;
        folded nodes hold their copies' memory)."""
        return float(sum(float(m[k]) for m, k in zip(self.node_memory, np.asarray(choice).tolist())))

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
        edge_u=sk.edge_u.copy(),
        edge_v=sk.edge_v.copy(),
        edge_cost=[tables.edge(sk, e) for e in range(sk.num_edges)],
        multiplicity=np.ones(sk.num_nodes, dtype=np.int64),
        memory_budget=inst.memory_budget,
    )


def build_folded_cost_graph(sk: Skeleton, fold: FoldMap, tables: CostTables | None = None, *, boundary_edges: bool = True) -> tuple[CostGraph, list[int]]:
    """The cost graph over representatives: copies share the representative's strategy.

    Node costs and memory are multiplied by the copy count; edges inside a copy are
    counted once per copy (matrix x count); every other edge is kept between the
    representatives of its ends (matrices summed in edge order; an edge whose ends share
    a representative adds its diagonal to the node cost). With ``boundary_edges=False``
    only edges inside copies and edges between unfolded nodes are kept (the relaxation
    used for the lower bound of `tap`). Returns the graph and the skeleton node of each
    folded node.
    """
    inst = sk.instance
    tables = tables or CostTables(inst)
    rep_of = fold.representative_index
    reps = np.flatnonzero(rep_of == np.arange(sk.num_nodes))
    index = np.full(sk.num_nodes, -1, dtype=np.int64)
    index[reps] = np.arange(reps.size)
    count = fold.multiplicity_index
    mult = count[reps]
    nodes = [tables.node(sk, r) for r in reps.tolist()]
    node_cost = [n.cost * m for n, m in zip(nodes, mult)]
    node_memory = [n.memory * m for n, m in zip(nodes, mult)]
    u, v = sk.edge_u, sk.edge_v
    family, copy = fold.family_index, fold.copy_index
    inner = (family[u] >= 0) & (family[u] == family[v]) & (copy[u] == copy[v])
    keep = ~inner | (copy[u] == 0)  # edges inside other copies count through the representative copy
    if not boundary_edges:
        keep &= inner | ((count[u] == 1) & (count[v] == 1))
    edges = np.flatnonzero(keep)
    a, b = index[rep_of[u[edges]]], index[rep_of[v[edges]]]
    scale = np.where(inner[edges], count[u[edges]], 1)
    # one matrix per (end labels, edge label); variants: (matrix, scale, transposed)
    label = sk.node_label_id
    kind = (label[u[edges]] * (int(label.max(initial=0)) + 1) + label[v[edges]]) * (int(sk.edge_label_id.max(initial=0)) + 1) + sk.edge_label_id[edges]
    _, kind_first, kind_of = np.unique(kind, return_index=True, return_inverse=True)
    matrices = [tables.edge(sk, e) for e in edges[kind_first].tolist()]
    flip = a > b
    variant = (kind_of.reshape(-1) * 2 + flip) * (int(scale.max(initial=1)) + 1) + scale
    _, variant_first, variant_of = np.unique(variant, return_index=True, return_inverse=True)
    variant_of = variant_of.reshape(-1)
    variants = []
    for i in variant_first.tolist():
        M = matrices[int(kind_of[i])] * scale[i]
        variants.append(M.T if flip[i] else M)
    # sums in edge order, as a running sum (bit for bit the sequential one)
    loop = a == b
    for node in np.unique(a[loop]).tolist():
        terms = variant_of[loop & (a == node)]
        diags = np.stack([node_cost[node]] + [np.diag(variants[t]) for t in terms.tolist()])
        node_cost[node] = np.add.accumulate(diags, axis=0)[-1]
    pair = np.minimum(a, b) * max(reps.size, 1) + np.maximum(a, b)
    pairs, pair_of = np.unique(pair[~loop], return_inverse=True)
    # (no edge between representatives, e.g. a graph of one op: no group, where np.split
    # would give one empty group, whose sum failed: review rev13)
    terms_of = np.split(variant_of[~loop][np.argsort(pair_of, kind="stable")], np.cumsum(np.bincount(pair_of.reshape(-1), minlength=pairs.size))[:-1]) if pairs.size else []
    edge_cost = []
    for terms in terms_of:
        if terms.size == 1:
            edge_cost.append(variants[int(terms[0])])
            continue
        distinct, local = np.unique(terms, return_inverse=True)
        stack = np.stack([variants[t] for t in distinct.tolist()])
        edge_cost.append(np.add.accumulate(stack[local.reshape(-1)], axis=0)[-1])
    graph = CostGraph(
        name=inst.name,
        instance=inst,
        node_ops=[sk.members(r) for r in reps.tolist()],
        node_strategies=[n.strategies for n in nodes],
        node_cost=node_cost,
        node_memory=node_memory,
        edge_u=pairs // max(reps.size, 1),
        edge_v=pairs % max(reps.size, 1),
        edge_cost=edge_cost,
        multiplicity=mult,
        memory_budget=inst.memory_budget,
    )
    return graph, reps.tolist()


def unfold_plan(sk: Skeleton, fold: FoldMap, folded_plan: ShardingPlan) -> ShardingPlan:
    """Strategies of representative ops -> strategies of every op (copies by position)."""
    names = list(sk.instance.index)  # op names in op order
    node = np.repeat(np.arange(sk.num_nodes), np.diff(sk.member_start))
    rep = fold.representative_index[node]
    rep_op = sk.member_ops[sk.member_start[rep] + np.arange(node.size) - sk.member_start[node]]
    strategy = np.empty(len(names), dtype=object)
    own = sk.member_ops[rep == node]  # the ops of representatives
    strategy[own] = [folded_plan.strategies[names[k]] for k in own.tolist()]
    return ShardingPlan(dict(zip([names[k] for k in sk.member_ops.tolist()], strategy[rep_op].tolist())))
