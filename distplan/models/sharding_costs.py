"""The sharding cost model: operator semantics, strategies, collectives, resharding.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distplan.errors import InputError
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
#: FLOPs per output element of the normalizations
_NORM_FLOPS = {"layernorm": 8.0, "rmsnorm": 6.0, "softmax": 5.0}

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

    @property
    def nbytes(self) -> float:
        return float(math.prod(self.shape)) * DTYPE_BYTES[self.dtype]

    @property
    def numel(self) -> int:
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


@dataclass(frozen=True)
class OpCost:
    """Costs of one op under one strategy: seconds per iteration and bytes per device."""

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
    choices: list[str | None] = [None, *sem.split_labels]
    out: list[Strategy] = []
    for combo in itertools.product(choices, repeat=len(ctx.axis_sizes)):
        if strategy_problem(sem, combo, ctx) is None:
            out.append(combo)
    return out


def tensor_spec(tensor: TensorSem, strategy: Strategy) -> Spec:
    """Layout of a tensor under an op strategy: the split position per axis or -1."""
    return tuple(tensor.labels.index(label) if (label is not None and label in tensor.labels) else -1 for label in strategy)


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
    cur = list(src)
    sizes = ctx.axis_sizes
    total = 0.0
    for axis in range(len(cur)):  # replicated -> split: local slices
        if cur[axis] == -1 and dst[axis] != -1:
            cur[axis] = dst[axis]
    for phase in ("all_to_all", "gather"):
        for axis in range(len(cur)):
            if cur[axis] == dst[axis]:
                continue
            if (phase == "gather") != (dst[axis] == -1):
                continue
            span = nbytes / math.prod(sizes[b] for b in range(len(cur)) if b != axis and cur[b] != -1)
            if phase == "gather":
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

def op_cost(sem: OpSemantics, strategy: Strategy, ctx: CostContext) -> OpCost:
    """Time (compute + collectives of forward and backward) and per-device memory of an op."""
    sizes = ctx.axis_sizes
    if sem.zero_cost:
        compute = 0.0
    else:
        split_all = math.prod(sizes[a] for a, label in enumerate(strategy) if label is not None)
        tensors = (*sem.inputs, *sem.params, sem.output)
        traffic = sum(t.nbytes / _shards(t.labels, strategy, sizes) for t in tensors)
        traffic += sum(2 * t.nbytes / _shards(t.labels, strategy, sizes) for t in sem.saved)
        fwd = ctx.device.roofline_seconds(sem.flops / split_all, traffic, sem.output.dtype)
        compute = (1.0 + ctx.backward_factor) * fwd
    comm = 0.0
    for axis, label in enumerate(strategy):
        if label is None:
            continue
        out = sem.output
        if label not in out.labels:  # contracting split: partial output
            comm += all_reduce_seconds(out.nbytes / _shards(out.labels, strategy, sizes), axis, ctx)
        for t in sem.inputs:  # input gradient partial
            if t.grad and label not in t.labels:
                comm += all_reduce_seconds(t.nbytes / _shards(t.labels, strategy, sizes), axis, ctx)
        for t in sem.params:  # gradient synchronization of a weight replicated over the axis
            if label not in t.labels:
                comm += all_reduce_seconds(t.nbytes / _shards(t.labels, strategy, sizes), axis, ctx)
    param_bytes = sum(t.numel / _shards(t.labels, strategy, sizes) for t in sem.params) * ctx.optimizer_bytes_per_param
    act = sum(t.nbytes / _shards(t.labels, strategy, sizes) for t in sem.saved)
    if sem.saves_output:
        act += sem.output.nbytes / _shards(sem.output.labels, strategy, sizes)
    return OpCost(compute=compute, communication=comm, param_bytes=param_bytes, activation_bytes=act)


# -- semantics from op type and shapes ---------------------------------------------------

@dataclass(frozen=True)
class InputTensor:
    """An activation input as the consumer sees it: the producer's dims, dtype, gradient flag."""

    dims: tuple[str, ...]
    dtype: str
    grad: bool


def _check_dims(dims: Sequence[str], table: Mapping[str, int], path: str) -> None:
    seen: set[str] = set()
    for k, d in enumerate(dims):
        if d not in table:
            raise InputError(f"{path}[{k}]", f"unknown dimension {d!r}", f"declare it in graph.dims (known: {', '.join(table)})")
        if d in seen:
            raise InputError(f"{path}[{k}]", f"dimension {d!r} appears twice", "give each dimension of a tensor its own name")
        seen.add(d)


def make_semantics(
    op_type: str,
    inputs: Sequence[InputTensor],
    out: Sequence[str],
    params: Sequence[Sequence[str]],
    attrs: Mapping[str, Any],
    dtype: str,
    dims: Mapping[str, int],
    never_split: frozenset[str],
    path: str,
) -> OpSemantics:
    """Derive an op's loop labels, tensors and FLOPs from its type and dims (validating).

    ``path`` is the JSON path of the op for error messages.
    """
    out = tuple(out)
    _check_dims(out, dims, f"{path}.out")
    for k, p in enumerate(params):
        _check_dims(p, dims, f"{path}.params[{k}].dims")
    for k, t in enumerate(inputs):
        _check_dims(t.dims, dims, f"{path}.inputs[{k}]")

    def need_inputs(n: int | tuple[int, ...]) -> None:
        ok = len(inputs) in n if isinstance(n, tuple) else len(inputs) == n
        if not ok:
            raise InputError(f"{path}.inputs", f"a {op_type} op takes {n} activation input(s), got {len(inputs)}")

    def need_params(lo: int, hi: int) -> None:
        if not lo <= len(params) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise InputError(f"{path}.params", f"a {op_type} op takes {want} parameter(s), got {len(params)}")

    def params_within_out(start: int) -> None:
        for k in range(start, len(params)):
            extra = [d for d in params[k] if d not in out]
            if extra:
                raise InputError(f"{path}.params[{k}].dims", f"dims {extra} are not output dims", "a bias/scale uses only output dims")

    def expect_out(expected: Sequence[str]) -> None:
        if tuple(expected) != out:
            raise InputError(f"{path}.out", f"a {op_type} op with these inputs produces dims {list(expected)}, not {list(out)}", f"write \"out\": {list(expected)}")

    size = dict(dims)
    out_grad = dtype in FLOAT_DTYPES and op_type != "input"

    def tensor(labels: Sequence[str], shape_dims: Sequence[str], dt: str, grad: bool) -> TensorSem:
        return TensorSem(tuple(labels), tuple(size[d] for d in shape_dims), dt, grad)

    def finish(
        labels: dict[str, int],
        in_t: Sequence[TensorSem],
        out_labels: Sequence[str],
        flops: float,
        *,
        splittable: Sequence[str] | None = None,
        saved: Sequence[TensorSem] = (),
        zero_cost: bool = False,
        follows: bool = False,
        saves_output: bool = True,
        param_labels: Sequence[Sequence[str]] | None = None,
    ) -> OpSemantics:
        cand = list(labels) if splittable is None else list(splittable)
        split = tuple(lab for lab in cand if lab not in never_split)
        plabels = params if param_labels is None else param_labels
        return OpSemantics(
            type=op_type,
            label_size=tuple(labels.items()),
            split_labels=split,
            inputs=tuple(in_t),
            output=TensorSem(tuple(out_labels), tuple(size[d] for d in out), dtype, out_grad),
            params=tuple(tensor(pl, p, dtype, True) for pl, p in zip(plabels, params)),
            flops=float(flops),
            saved=tuple(saved),
            zero_cost=zero_cost,
            follows=follows,
            saves_output=saves_output,
        )

    def union(*groups: Sequence[str]) -> dict[str, int]:
        labels: dict[str, int] = {}
        for g in groups:
            for d in g:
                labels.setdefault(d, size[d])
        return labels

    def plain_inputs() -> list[TensorSem]:
        return [tensor(t.dims, t.dims, t.dtype, t.grad) for t in inputs]

    if op_type == "input":
        need_inputs(0)
        need_params(0, 0)
        return finish(union(out), [], out, 0.0, zero_cost=True)

    if op_type in ("linear", "matmul"):
        need_inputs(1)
        need_params(1, 2)
        x, w = inputs[0].dims, tuple(params[0])
        if not any(d in w for d in x):
            raise InputError(f"{path}.params[0].dims", f"the weight {list(w)} shares no dimension with the input {list(x)}", "name the contracted dimension the same in both")
        expect_out([d for d in x if d not in w] + [d for d in w if d not in x])
        params_within_out(1)
        labels = union(x, w)
        return finish(labels, plain_inputs(), out, 2.0 * math.prod(labels.values()))

    if op_type == "bmm":
        need_inputs(2)
        need_params(0, 0)
        a, b = inputs[0].dims, inputs[1].dims
        missing = [d for d in out if d not in a and d not in b]
        if missing:
            raise InputError(f"{path}.out", f"dims {missing} come from neither input")
        labels = union(a, b)
        return finish(labels, plain_inputs(), out, 2.0 * math.prod(labels.values()))

    if op_type == "embedding":
        need_inputs(1)
        need_params(1, 2)
        ids, table = inputs[0].dims, tuple(params[0])
        if len(table) != 2:
            raise InputError(f"{path}.params[0].dims", f"an embedding table has 2 dims [vocab, hidden], got {list(table)}")
        vocab, hidden = table
        if vocab in ids or vocab in out:
            raise InputError(f"{path}.params[0].dims", f"the vocabulary dim {vocab!r} must appear only in the table")
        expect_out([*ids, hidden])
        params_within_out(1)
        labels = union(ids, table, out)
        return finish(labels, plain_inputs(), out, 0.0)

    if op_type == "attention":
        need_inputs((1, 3))
        q = inputs[0].dims
        if len(inputs) == 3 and not (inputs[1].dims == q and inputs[2].dims == q):
            raise InputError(f"{path}.inputs", "q, k and v must have the same dims")
        need_params(0, 0)
        qkv_dim = attrs.get("qkv_dim")
        if len(inputs) == 1:
            if qkv_dim not in q:
                raise InputError(f"{path}.attrs.qkv_dim", f"a fused attention input needs the dim holding q, k, v; got {qkv_dim!r}", f"name one of {list(q)}")
            o = tuple(d for d in q if d != qkv_dim)
        else:
            if qkv_dim is not None:
                raise InputError(f"{path}.attrs.qkv_dim", "only a single fused input has a qkv dim")
            o = q
        expect_out(o)
        seq = attrs.get("seq_dim", o[1] if len(o) > 1 else None)
        head = attrs.get("head_dim", o[-1])
        if seq not in o or head not in o or seq == head:
            raise InputError(f"{path}.attrs", f"seq_dim {seq!r} and head_dim {head!r} must be two different output dims", f"choose among {list(o)}")
        for flag in ("causal", "flash"):
            if not isinstance(attrs.get(flag, False), bool):
                raise InputError(f"{path}.attrs.{flag}", f"expected true or false, got {attrs[flag]!r}")
        flash = bool(attrs.get("flash", False))
        kv_seq = seq + "'"
        labels = union(q)
        labels[kv_seq] = size[seq]
        if len(inputs) == 3:
            kv = tuple(kv_seq if d == seq else d for d in q)
            in_t = [tensor(q, q, inputs[0].dtype, inputs[0].grad)] + [tensor(kv, q, t.dtype, t.grad) for t in inputs[1:]]
            splittable = [d for d in o if d != head]
        else:
            in_t = plain_inputs()
            splittable = [d for d in o if d not in (head, seq)]  # k, v share the query's tensor
        saved: list[TensorSem] = []
        if not flash:
            prob_labels = tuple(d for d in o if d != head) + (kv_seq,)
            shape = tuple(size[d] for d in o if d != head) + (size[seq],)
            saved.append(TensorSem(prob_labels, shape, dtype, True))
        # FLOPs follow the Megatron convention (full score matrix, also when causal)
        flops = 4.0 * math.prod(size[d] for d in o) * size[seq]
        return finish(labels, in_t, o, flops, splittable=splittable, saved=saved)

    if op_type == "elementwise":
        need_inputs((1, 2, 3, 4))
        for k, t in enumerate(inputs):
            extra = [d for d in t.dims if d not in out]
            if extra:
                raise InputError(f"{path}.inputs[{k}]", f"input dims {extra} are not output dims", "elementwise inputs broadcast to the output")
        params_within_out(0)
        fpe = float(attrs.get("flops_per_element", 1.0))
        labels = union(out)
        return finish(labels, plain_inputs(), out, fpe * math.prod(labels.values()), follows=inputs[0].dims == out)

    if op_type in _NORM_FLOPS:
        need_inputs(1)
        if inputs[0].dims != out:
            raise InputError(f"{path}.out", f"a {op_type} keeps its input's dims {list(inputs[0].dims)}")
        params_within_out(0)
        axis = attrs.get("axis", [out[-1]])
        if isinstance(axis, str):
            axis = [axis]
        if not isinstance(axis, list) or not axis or any(a not in out for a in axis):
            raise InputError(f"{path}.attrs.axis", f"normalized dims must be output dims, got {axis!r}", f"e.g. [{out[-1]!r}]")
        labels = union(out)
        return finish(labels, plain_inputs(), out, _NORM_FLOPS[op_type] * math.prod(labels.values()), splittable=[d for d in out if d not in axis])

    if op_type == "loss":
        need_inputs(1)
        need_params(0, 0)
        logits = inputs[0].dims
        cls = attrs.get("class_dim", logits[-1] if logits else None)
        if cls not in logits:
            raise InputError(f"{path}.attrs.class_dim", f"{cls!r} is not a dim of the logits {list(logits)}")
        expect_out([d for d in logits if d != cls])
        labels = union(logits)
        return finish(labels, plain_inputs(), out, 5.0 * math.prod(labels.values()))

    if op_type in ("view", "reshape"):
        need_inputs(1)
        need_params(0, 0)
        src = inputs[0].dims
        groups = _reshape_groups([size[d] for d in src], [size[d] for d in out])
        if groups is None:
            raise InputError(f"{path}.out", f"cannot reshape {list(src)} into {list(out)}: element counts or factors differ")
        in_labels = [f"~i{k}" for k in range(len(src))]
        out_labels = [f"~o{k}" for k in range(len(out))]
        view_labels: dict[str, int] = {}
        view_split: list[str] = []
        for (i0, i1), (o0, o1) in groups:
            for k in range(i0, i1):
                view_labels[in_labels[k]] = size[src[k]]
            for k in range(o0, o1):
                view_labels[out_labels[k]] = size[out[k]]
            if i1 > i0 and o1 > o0:
                lead = out[o0]  # named after the view's own output dim
                in_labels[i0] = out_labels[o0] = lead
                view_labels.pop(f"~i{i0}", None)
                view_labels.pop(f"~o{o0}", None)
                view_labels[lead] = math.gcd(size[src[i0]], size[out[o0]])
                if src[i0] not in never_split and out[o0] not in never_split:
                    view_split.append(lead)
        in_t = [TensorSem(tuple(in_labels), tuple(size[d] for d in src), inputs[0].dtype, inputs[0].grad)]
        return OpSemantics(
            type=op_type,
            label_size=tuple(view_labels.items()),
            split_labels=tuple(view_split),
            inputs=tuple(in_t),
            output=TensorSem(tuple(out_labels), tuple(size[d] for d in out), dtype, out_grad),
            params=(),
            flops=0.0,
            zero_cost=True,
            follows=True,
            saves_output=False,
        )

    raise InputError(f"{path}.type", f"unknown op type {op_type!r}", f"use one of: {', '.join(OP_TYPES)}")


def _reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """Contiguous groups of source and target dims with equal products, or None."""
    if math.prod(src) != math.prod(dst):
        return None
    groups: list[tuple[tuple[int, int], tuple[int, int]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        i0, j0 = i, j
        pi = pj = 1
        if i < len(src):
            pi *= src[i]
            i += 1
        if j < len(dst):
            pj *= dst[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(src):
                pi *= src[i]
                i += 1
            elif pj < pi and j < len(dst):
                pj *= dst[j]
                j += 1
            else:
                return None
        # trailing size-1 dims join the group
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            j += 1
        groups.append(((i0, i), (j0, j)))
    return groups
