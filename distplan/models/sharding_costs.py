"""The sharding cost model: operator semantics, strategies, collectives, resharding.

The semantics of an op built from its type and shapes (`make_semantics`) live in
`distplan.models.sharding_semantics`.

This is domain data used by the evaluator (`distplan.models.sharding`) and by every
sharding formulation. Units: seconds, bytes, bytes/second, FLOPs.

**Operators as loop nests.** Every operator is described by named loop dimensions
("labels"), as in an einsum: a linear ``x[b,s,h] @ w[h,f] -> y[b,s,f]`` has labels
``b, s, h, f``; ``h`` is contracted. The tensors of an op (activation inputs, parameters,
output, extra saved buffers) each carry one label per position.

**Strategies.** A strategy assigns to every mesh axis one label to split along that axis,
or None (replicated along the axis). This yields, for a matmul on a 1-D mesh, the
batch/row split (data parallel), the output-column split, the contracting split (output
needs an all-reduce) and replication; on a 2-D mesh the products of those (Alpa's SS, SR,
RS, RR and batch-split table). A label may be split over several axes only when it is
the batch dimension (or the op merely follows its input), which keeps the space small as
Alpa's dot handler does. Every split label must divide evenly.

**Costs of one op under a strategy** (forward + backward of a training step):
* compute: ``(1 + backward_factor) * roofline(FLOPs / shards, bytes / shards)`` with the
  device roofline of `distplan.models.catalogue` (7 us launch floor included);
* forward all-reduce of a partial output along every axis split on a label that is not
  in the output (contracting split);
* backward all-reduce of an input gradient along every axis split on a label the input
  does not have (e.g. Megatron's "f" operator for a column-parallel linear);
* gradient synchronization: all-reduce of a parameter gradient along every axis split on
  a label the parameter does not have (data parallelism over a replicated weight);
* memory per device: parameters x ``optimizer_bytes_per_param`` (16 B for mixed-precision
  Adam: fp16 weight + fp16 gradient + fp32 master, momentum, variance) divided by their
  sharding, plus the saved activations (the output, and attention probabilities unless
  flash attention) divided by their sharding.

**Collectives** use the alpha-beta ring model per mesh axis (p devices, latency alpha per
step, bandwidth B bytes/s, n bytes): all-reduce ``2(p-1) alpha + 2(p-1)/p n/B``,
all-gather and reduce-scatter ``(p-1) alpha + (p-1)/p n/B``, all-to-all
``(p-1) alpha + (p-1)/p^2 n/B`` (n = bytes spanned by the group).

**Resharding** between a producer's output layout and a consumer's required layout, per
axis: same -> free; replicated -> split is a local slice (free); split -> replicated is an
all-gather; split on one dim -> split on another is an all-to-all (infinite when the mesh
forbids all-to-all). The gradient travels back the opposite way (for tensors that carry
gradients), so the cost is charged in both directions.

References: Zheng et al., "Alpa", OSDI 2022 (strategy table, resharding rules); Narayanan
et al., SC'21 (transformer FLOPs); Rajbhandari et al., ZeRO, SC'20 (16 B/param);
nccl-tests PERFORMANCE.md (ring alpha-beta factors).
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

from distplan.models.catalogue import DeviceSpec

#: bytes per element of the dtypes an instance may name
DTYPE_BYTES: dict[str, int] = {
    "fp8": 1,
    "fp16": 2,
    "bf16": 2,
    "fp32": 4,
    "fp64": 8,
    "int8": 1,
    "int32": 4,
    "int64": 8,
    "bool": 1,
}
FLOAT_DTYPES = frozenset({"fp8", "fp16", "bf16", "fp32", "fp64"})

OP_TYPES = (
    "input",
    "linear",
    "matmul",
    "bmm",
    "embedding",
    "attention",
    "elementwise",
    "layernorm",
    "rmsnorm",
    "softmax",
    "loss",
    "view",
    "reshape",
)

#: a strategy: per mesh axis the label split along it, or None (replicated)
Strategy = tuple["str | None", ...]
#: a tensor layout: per mesh axis the tensor position split along it, or -1 (replicated)
Spec = tuple[int, ...]

DIM_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_STRATEGY_PART = re.compile(r"R|S\(([A-Za-z_][A-Za-z0-9_]*)\)")


@dataclass(frozen=True)
class TensorSem:
    """A tensor of an op: one loop label per position, its shape, dtype, gradient flag."""

    labels: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: str
    grad: bool

    @cached_property
    def nbytes(self) -> float:
        """Bytes of the whole (unsharded) tensor."""
        return float(math.prod(self.shape)) * DTYPE_BYTES[self.dtype]

    @cached_property
    def numel(self) -> int:
        """Elements of the whole tensor."""
        return math.prod(self.shape)


@dataclass(frozen=True)
class OpSemantics:
    """What the cost model knows about one op (derived from its type and shapes)."""

    type: str
    label_size: tuple[tuple[str, int], ...]
    split_labels: tuple[str, ...]
    inputs: tuple[TensorSem, ...]
    output: TensorSem
    params: tuple[TensorSem, ...]
    #: forward FLOPs of the whole (unsharded) op
    flops: float
    #: extra activations kept for the backward pass (e.g. attention probabilities)
    saved: tuple[TensorSem, ...] = ()
    #: views and graph inputs cost nothing
    zero_cost: bool = False
    #: takes the layout of its input 0 (elementwise with the output's dims, views)
    follows: bool = False
    #: the output is kept for the backward pass (views alias their input: False)
    saves_output: bool = True

    def size(self, label: str) -> int:
        for name, size in self.label_size:
            if name == label:
                return size
        raise KeyError(label)


@dataclass(frozen=True)
class CostContext:
    """Mesh, device and training constants the costs depend on."""

    axis_sizes: tuple[int, ...]
    bandwidth: tuple[float, ...]  # bytes/second per axis
    latency: tuple[float, ...]  # seconds per ring step per axis
    device: DeviceSpec
    all_to_all: bool = True
    backward_factor: float = 2.0
    optimizer_bytes_per_param: float = 16.0
    batch_dim: str = "b"


class OpCost(NamedTuple):
    """Costs of one op under one strategy: seconds per iteration and bytes per device (a
    named tuple: immutable, and built several times faster than a frozen dataclass, which
    matters as every formulation and the evaluator build many)."""

    compute: float
    communication: float
    param_bytes: float
    activation_bytes: float

    @property
    def seconds(self) -> float:
        return self.compute + self.communication

    @property
    def memory(self) -> float:
        return self.param_bytes + self.activation_bytes


# -- strategies --------------------------------------------------------------------------

def strategy_name(strategy: Strategy) -> str:
    """"R" / "S(b)" per mesh axis, concatenated: "S(b)S(f)" on a 2-D mesh."""
    return "".join("R" if label is None else f"S({label})" for label in strategy)


def parse_strategy(name: str, ndim: int) -> Strategy:
    """The inverse of `strategy_name`; ValueError if malformed or of the wrong length."""
    if not isinstance(name, str):
        raise ValueError(f"expected a string, got {name!r}")
    parts: list[str | None] = []
    pos = 0
    while pos < len(name):
        m = _STRATEGY_PART.match(name, pos)
        if m is None:
            raise ValueError(f"cannot read {name!r} at {name[pos:]!r} (write R or S(dim) per mesh axis)")
        parts.append(m.group(1))
        pos = m.end()
    if len(parts) != ndim:
        raise ValueError(f"{name!r} names {len(parts)} mesh axes, the mesh has {ndim}")
    return tuple(parts)


def strategy_problem(sem: OpSemantics, strategy: Strategy, ctx: CostContext) -> str | None:
    """Why a strategy is not valid for an op (None when it is)."""
    if len(strategy) != len(ctx.axis_sizes):
        return f"has {len(strategy)} axes, the mesh has {len(ctx.axis_sizes)}"
    ways: dict[str, int] = {}
    count: dict[str, int] = {}
    for axis, label in enumerate(strategy):
        if label is None:
            continue
        if label not in sem.split_labels:
            allowed = ", ".join(sem.split_labels) or "none"
            return f"a {sem.type} op cannot be split along {label!r} (splittable: {allowed})"
        ways[label] = ways.get(label, 1) * ctx.axis_sizes[axis]
        count[label] = count.get(label, 0) + 1
    for label, n in ways.items():
        size = sem.size(label)
        if size % n:
            return f"dimension {label!r} of size {size} does not split {n} ways"
        if count[label] > 1 and label != ctx.batch_dim and not sem.follows:
            return f"dimension {label!r} split over {count[label]} mesh axes (only the batch dimension may be)"
    return None


def enumerate_strategies(sem: OpSemantics, ctx: CostContext) -> list[Strategy]:
    """Every valid strategy of an op, fully replicated first, in a fixed order."""
    sizes = ctx.axis_sizes
    if len(sizes) == 1:  # one axis: a label is valid when it divides (what strategy_problem checks)
        p = sizes[0]
        return [(None,), *[(label,) for label in sem.split_labels if sem.size(label) % p == 0]]
    choices: list[str | None] = [None, *sem.split_labels]
    out: list[Strategy] = []
    for combo in itertools.product(choices, repeat=len(ctx.axis_sizes)):
        if strategy_problem(sem, combo, ctx) is None:
            out.append(combo)
    return out


def tensor_spec(tensor: TensorSem, strategy: Strategy) -> Spec:
    """Layout of a tensor under an op strategy: the split position per axis or -1."""
    labels = tensor.labels
    if len(strategy) == 1:
        label = strategy[0]
        return (labels.index(label) if (label is not None and label in labels) else -1,)
    return tuple([labels.index(label) if (label is not None and label in labels) else -1 for label in strategy])


def _shards(labels: Sequence[str], strategy: Strategy, sizes: Sequence[int]) -> int:
    n = 1
    for axis, label in enumerate(strategy):
        if label is not None and label in labels:
            n *= sizes[axis]
    return n


def follow_strategy(sem: OpSemantics, producer_spec: Spec, ctx: CostContext) -> Strategy:
    """The strategy of a follower op that takes its input 0 in the producer's layout.

    Positions the follower cannot split (e.g. a non-leading dim of a reshaped group) and
    splits that would not divide become replicated (the input is then gathered).
    """
    labels: list[str | None] = []
    for pos in producer_spec:
        label = sem.inputs[0].labels[pos] if pos >= 0 else None
        labels.append(label if label in sem.split_labels else None)
    strategy: Strategy = tuple(labels)
    # drop axes (last first) until the strategy is valid
    axis = len(strategy) - 1
    while strategy_problem(sem, strategy, ctx) is not None and axis >= 0:
        strategy = strategy[:axis] + (None,) + strategy[axis + 1 :]
        axis -= 1
    return strategy


# -- collectives -------------------------------------------------------------------------

def all_reduce_seconds(nbytes: float, axis: int, ctx: CostContext) -> float:
    """Ring all-reduce of ``nbytes`` per device over one mesh axis."""
    p = ctx.axis_sizes[axis]
    if p <= 1 or nbytes <= 0:
        return 0.0
    return 2 * (p - 1) * ctx.latency[axis] + 2 * (p - 1) / p * nbytes / ctx.bandwidth[axis]


def all_gather_seconds(nbytes: float, axis: int, ctx: CostContext) -> float:
    """Ring all-gather (or reduce-scatter) of a buffer of ``nbytes`` in total over one axis."""
    p = ctx.axis_sizes[axis]
    if p <= 1 or nbytes <= 0:
        return 0.0
    return (p - 1) * ctx.latency[axis] + (p - 1) / p * nbytes / ctx.bandwidth[axis]


def all_to_all_seconds(nbytes: float, axis: int, ctx: CostContext) -> float:
    """All-to-all redistributing ``nbytes`` (spanned by the group) over one axis."""
    p = ctx.axis_sizes[axis]
    if p <= 1 or nbytes <= 0:
        return 0.0
    return (p - 1) * ctx.latency[axis] + (p - 1) / (p * p) * nbytes / ctx.bandwidth[axis]


def _reshard_one_way(nbytes: float, src: Spec, dst: Spec, ctx: CostContext) -> float:
    """Seconds to turn layout ``src`` into ``dst``: slices first, then all-to-alls, then gathers."""
    n = len(src)
    if n == 1:  # one axis: a slice (free), an all-to-all or an all-gather of the whole tensor
        s, d = src[0], dst[0]
        if s == d or s == -1:
            return 0.0
        if d == -1:
            return all_gather_seconds(nbytes, 0, ctx)
        return all_to_all_seconds(nbytes, 0, ctx) if ctx.all_to_all else math.inf
    cur = list(src)
    sizes = ctx.axis_sizes
    total = 0.0
    for axis in range(n):  # replicated -> split: local slices
        if cur[axis] == -1 and dst[axis] != -1:
            cur[axis] = dst[axis]
    for gather in (False, True):  # all-to-alls first, then gathers
        for axis in range(n):
            if cur[axis] == dst[axis] or gather != (dst[axis] == -1):
                continue
            others = 1
            for b in range(n):
                if b != axis and cur[b] != -1:
                    others *= sizes[b]
            span = nbytes / others
            if gather:
                total += all_gather_seconds(span, axis, ctx)
            else:
                if not ctx.all_to_all:
                    return math.inf
                total += all_to_all_seconds(span, axis, ctx)
            cur[axis] = dst[axis]
    return total


def reshard_seconds(tensor: TensorSem, src: Spec, dst: Spec, ctx: CostContext) -> float:
    """Resharding a producer's output from ``src`` to a consumer's ``dst`` layout, forward
    plus (for tensors with gradients) the gradient's way back."""
    if src == dst:
        return 0.0
    t = _reshard_one_way(tensor.nbytes, src, dst, ctx)
    if tensor.grad:
        t += _reshard_one_way(tensor.nbytes, dst, src, ctx)
    return t


# -- op costs ----------------------------------------------------------------------------

def _op_cost_one_axis(sem: OpSemantics, axis: int, label: str, ctx: CostContext) -> OpCost:
    """`op_cost` of a strategy that splits one mesh axis (every split of a 1-D mesh): a
    tensor has 1 or p shards. The same terms summed in the same order as the general path
    (traffic: inputs, parameters, output; collectives: output, inputs, parameters), each
    tensor visited once."""
    p = ctx.axis_sizes[axis]
    out = sem.output
    comm = 0.0
    if label in out.labels:
        out_part = out.nbytes / p
    else:  # contracting split: partial output
        out_part = out.nbytes / 1
        comm += all_reduce_seconds(out_part, axis, ctx)
    traffic_parts: list[float] = []  # inputs, then parameters, then the output
    for t in sem.inputs:
        if label in t.labels:
            traffic_parts.append(t.nbytes / p)
        else:
            part = t.nbytes / 1
            traffic_parts.append(part)
            if t.grad:  # input gradient partial
                comm += all_reduce_seconds(part, axis, ctx)
    param_elems: list[float] = []
    for t in sem.params:
        if label in t.labels:
            traffic_parts.append(t.nbytes / p)
            param_elems.append(t.numel / p)
        else:  # gradient synchronization of a weight replicated over the axis
            part = t.nbytes / 1
            traffic_parts.append(part)
            param_elems.append(t.numel / 1)
            comm += all_reduce_seconds(part, axis, ctx)
    traffic_parts.append(out_part)
    saved = sem.saved
    saved_n = [p if label in t.labels else 1 for t in saved] if saved else []
    saved_part = [t.nbytes / n for t, n in zip(saved, saved_n)] if saved else []
    if sem.zero_cost:
        compute = 0.0
    else:
        traffic = sum(traffic_parts)
        if saved:  # (adding the empty sum, 0, changes no positive float)
            traffic += sum([2 * t.nbytes / n for t, n in zip(saved, saved_n)])
        fwd = ctx.device.roofline_seconds(sem.flops / p, traffic, out.dtype)
        compute = (1.0 + ctx.backward_factor) * fwd
    param_bytes = sum(param_elems) * ctx.optimizer_bytes_per_param
    act = sum(saved_part)
    if sem.saves_output:
        act += out_part
    return OpCost(compute, comm, param_bytes, act)


def op_cost(sem: OpSemantics, strategy: Strategy, ctx: CostContext) -> OpCost:
    """Time (compute + collectives of forward and backward) and per-device memory of an op.

    Seconds per iteration and bytes per device; each tensor's shard count (the product of
    the sizes of the mesh axes split on one of its labels) is computed once. A replicated
    strategy (no split) takes a shorter path with the same sums in the same order. The
    sums are Python ``sum`` over lists in a fixed order (inputs, parameters, output; then
    saved buffers), so every caller gets the same floats."""
    sizes = ctx.axis_sizes
    split: list[tuple[int, str]] = []
    split_all = 1
    for axis, label in enumerate(strategy):
        if label is not None:
            split.append((axis, label))
            split_all *= sizes[axis]
    if len(split) == 1:
        return _op_cost_one_axis(sem, *split[0], ctx)
    return _op_cost_general(sem, strategy, ctx, split, split_all)


def _op_cost_general(sem: OpSemantics, strategy: Strategy, ctx: CostContext, split: list[tuple[int, str]], split_all: int) -> OpCost:
    """`op_cost` of any strategy: ``split`` lists its (mesh axis, label) splits and
    ``split_all`` the product of their axis sizes. `_op_cost_one_axis` gives the same
    floats for one split (tests/test_costgraph_fast_paths.py holds them equal)."""
    sizes = ctx.axis_sizes
    out = sem.output
    inputs, params, saved = sem.inputs, sem.params, sem.saved
    # (explicit loops, not comprehensions: an op has a few tensors, and a comprehension's
    # call costs more than its loop here; the lists and sums are the same)
    in_part: list[float] = []
    param_part: list[float] = []
    param_elems: list[float] = []
    saved_n: list[int] = []
    saved_part: list[float] = []
    if not split:  # every shard count is 1 and there is no collective
        out_part = out.nbytes  # (x / 1 is x exactly)
        for t in inputs:
            in_part.append(t.nbytes)
        for t in params:
            param_part.append(t.nbytes)
            param_elems.append(t.numel / 1)
        for t in saved:
            saved_n.append(1)
            saved_part.append(t.nbytes)
    else:
        out_part = out.nbytes / _shards(out.labels, strategy, sizes)
        for t in inputs:
            in_part.append(t.nbytes / _shards(t.labels, strategy, sizes))
        for t in params:
            n = _shards(t.labels, strategy, sizes)
            param_part.append(t.nbytes / n)
            param_elems.append(t.numel / n)
        for t in saved:
            n = _shards(t.labels, strategy, sizes)
            saved_n.append(n)
            saved_part.append(t.nbytes / n)
    if sem.zero_cost:
        compute = 0.0
    else:
        traffic = sum([*in_part, *param_part, out_part])
        if saved:  # (adding the empty sum, 0, changes no positive float)
            traffic += sum([2 * t.nbytes / n for t, n in zip(saved, saved_n)])
        fwd = ctx.device.roofline_seconds(sem.flops / split_all, traffic, out.dtype)
        compute = (1.0 + ctx.backward_factor) * fwd
    comm = 0.0
    for axis, label in split:
        if label not in out.labels:  # contracting split: partial output
            comm += all_reduce_seconds(out_part, axis, ctx)
        for t, part in zip(inputs, in_part):  # input gradient partial
            if t.grad and label not in t.labels:
                comm += all_reduce_seconds(part, axis, ctx)
        for t, part in zip(params, param_part):  # gradient synchronization of a weight replicated over the axis
            if label not in t.labels:
                comm += all_reduce_seconds(part, axis, ctx)
    param_bytes = sum(param_elems) * ctx.optimizer_bytes_per_param
    act = sum(saved_part)
    if sem.saves_output:
        act += out_part
    return OpCost(compute, comm, param_bytes, act)
