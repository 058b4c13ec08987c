"""Tensor sharding of a training graph over a device mesh: instance, plan, evaluator.

Units: seconds, bytes, bytes/second. The instance is the ``distplan/1`` document of kind
``sharding``::

    {"format": "distplan/1", "kind": "sharding", "name": "gpt-1layer",
     "mesh": {"shape": [8], "bandwidth": [2.4e11], "latency": [2e-6], "device": "A100-80GB"},
     "training": {"batch_dim": "b", "optimizer_bytes_per_param": 16, "backward_factor": 2},
     "graph": {"dims": {"b": 8, "s": 1024, "h": 1024, "f": 4096},
               "never_split": ["s"], "tensor_parallel_dims": ["f"], "dtype": "fp16",
               "ops": [{"name": "x", "type": "input", "out": ["b", "s", "h"]},
                       {"name": "fc1", "type": "linear", "inputs": ["x"], "out": ["b", "s", "f"],
                        "params": [{"name": "w", "dims": ["h", "f"]}]}, ...]}}

Tensors have named dims whose sizes are in ``graph.dims``; ops are listed in topological
order (inputs name earlier ops). ``mesh.memory`` (bytes per device) defaults to the
device's memory. The plan names one strategy per op ("R" or "S(dim)" per mesh axis, e.g.
"S(b)S(f)"). Elementwise ops whose first input has their dims, and views, *follow* that
input: their strategy is the one that keeps the input's layout (Alpa merges them into
their producer), so the plan space is the one every formulation searches. The cost model
is `distplan.models.sharding_costs`.

The evaluator recomputes, from the instance and the plan only, the iteration time (sum of
every op's compute and collectives plus the resharding of every edge) and the memory per
device (parameters with optimizer state plus all activations, live together at the end of
the forward pass), and checks that every op has one valid strategy and memory fits.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.catalogue import DeviceSpec, device
from distplan.models.common import FORMAT, MAX_SECONDS, MIN_RATE, Check, JsonDocument, KindSpec, need, number, register_kind
from distplan.models.sharding_costs import (
    DIM_NAME,
    DTYPE_BYTES,
    CostContext,
    OpSemantics,
    Strategy,
    follow_strategy,
    op_cost,
    parse_strategy,
    reshard_seconds,
    strategy_name,
    strategy_problem,
    tensor_spec,
)
from distplan.models.sharding_semantics import InputTensor, make_semantics

GB = 1e9
#: where the memory row is taken: with all activations kept for the backward pass, the
#: per-device peak of a training step is at the end of the forward pass
TIGHTEST_POINT = "the end of the forward pass (parameters, optimizer state and all activations live)"
#: relative tolerance of the memory check: a plan is within budget when its memory per
#: device is at most ``budget x (1 + MEMORY_TOLERANCE)`` (the rounding of sums of ~10^3
#: byte counts, far above it; no real shortfall is this small)
MEMORY_TOLERANCE = 1e-9


def accepted_bytes(budget: float) -> float:
    """The most memory per device (bytes) this evaluator accepts under ``budget``:
    ``budget x (1 + MEMORY_TOLERANCE)``, as `bytes_over` tests it."""
    return budget + budget * MEMORY_TOLERANCE


def bytes_over(memory: float, budget: float) -> float:
    """Bytes by which ``memory`` (per device) exceeds ``budget`` when this evaluator rejects
    it (more than `accepted_bytes`); 0 when it fits."""
    return memory - budget if memory > accepted_bytes(budget) else 0.0


def bytes_text(nbytes: float) -> str:
    """Bytes for a message (a need, a budget, a shortfall): GB with 3 decimals from 1 MB,
    bytes below (a few hundred bytes printed as "0.000 GB" say nothing)."""
    return f"{nbytes / GB:.3f} GB" if nbytes >= 1e6 else f"{nbytes:,.0f} bytes"


@dataclass(frozen=True)
class Param:
    name: str
    dims: tuple[str, ...]


@dataclass(frozen=True)
class Op:
    """One tensor operator. ``out``: output dim names; ``inputs``: producer op names."""

    name: str
    type: str
    out: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    params: tuple[Param, ...] = ()
    dtype: str | None = None
    attrs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Mesh:
    """A 1-D or 2-D device mesh; bandwidth (bytes/s) and latency (s per ring step) per axis."""

    shape: tuple[int, ...]
    bandwidth: tuple[float, ...]
    latency: tuple[float, ...]
    device: str
    memory: float | None = None
    all_to_all: bool = True

    @property
    def num_devices(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True)
class Training:
    batch_dim: str
    optimizer_bytes_per_param: float = 16.0
    backward_factor: float = 2.0


def _str_list(value: Any, path: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InputError(path, f"expected a list of names, got {value!r}")
    return tuple(value)


#: the ranges of the numbers of an instance: within them every cost and memory the model
#: computes is a finite float (a dim of 1e308 overflowed the FLOPs, a bandwidth of 1e-300
#: made finite reshardings infinite, i.e. forbidden). Sizes of graph.dims are exact in a
#: float (2**53); the elements an op spans are bounded in
#: `distplan.models.sharding_semantics.MAX_ELEMENTS`.
MAX_DIM = 2**53
#: devices along one mesh axis
MAX_AXIS = 2**20
#: devices a mesh has at most in all (1,048,576: ten times the largest clusters built); the
#: axes' product was unbounded, and a 10^5 x 10^5 x 10^5 mesh of 10^15 devices was made,
#: read and solved (review rev31 audit C)
MAX_MESH_DEVICES = 2**20
#: bytes/second of a mesh axis are at least `MIN_RATE` (with it the all-gather of the
#: largest tensor taken, 8e30 bytes, is ~1e31 s: every sum of such times stays a finite
#: float; at 1e-300 it overflowed); latencies are at most `MAX_SECONDS`
#: optimizer bytes per parameter and the backward pass's factor on forward time, at most
MAX_FACTOR = 1e6


def _number_list(value: Any, path: str, n: int, *, positive: bool = True, at_least: float = -math.inf, at_most: float = math.inf, unit: str = "") -> tuple[float, ...]:
    if not isinstance(value, list) or len(value) != n:
        raise InputError(path, f"expected a list of {n} numbers (one per mesh axis), got {value!r}")
    return tuple(number(v, f"{path}[{k}]", positive=positive, at_least=at_least, at_most=at_most, unit=unit) for k, v in enumerate(value))


@dataclass
class ShardingInstance(JsonDocument):
    """A training graph, a device mesh and training constants (kind ``sharding``)."""

    name: str
    mesh: Mesh
    training: Training
    dims: dict[str, int]
    ops: list[Op]
    dtype: str = "fp16"
    never_split: tuple[str, ...] = ()
    tensor_parallel_dims: tuple[str, ...] = ()
    description: str = ""
    kind: str = field(default="sharding", init=False)

    def __post_init__(self) -> None:
        self.index: dict[str, int] = {}
        for k, op in enumerate(self.ops):
            if op.name in self.index:
                raise InputError(f"graph.ops[{k}].name", f"duplicate op name {op.name!r} (also graph.ops[{self.index[op.name]}])", "give every op a unique name")
            self.index[op.name] = k
        self._semantics: list[OpSemantics] = []
        self._signatures: list[str] = []
        self._signature_ids: list[int] = []
        self._inputs: list[tuple[int, ...]] = []
        # every input of every op, in op order then input order: producer, consumer, slot
        self._edge_src: list[int] = []
        self._edge_dst: list[int] = []
        self._edge_slot: list[int] = []
        cache: dict[str, int] = {}  # signature -> its index in distinct
        distinct: list[OpSemantics] = []
        never = frozenset(self.never_split)
        for k, op in enumerate(self.ops):
            path = f"graph.ops[{k}]"
            ins: list[InputTensor] = []
            for j, src in enumerate(op.inputs):
                p = self.index.get(src)
                if p is None or p >= k:
                    fix = "list ops in topological order" if p is not None else "name an op listed in graph.ops"
                    raise InputError(f"{path}.inputs[{j}]", f"{'op ' + repr(src) + ' comes later' if p is not None else 'unknown op ' + repr(src)}", fix)
                prod = self._semantics[p].output
                producer_dims = self.ops[p].out
                ins.append(InputTensor(producer_dims, prod.dtype, prod.grad))
            dtype = op.dtype or self.dtype
            if dtype not in DTYPE_BYTES:
                raise InputError(f"{path}.dtype", f"unknown dtype {dtype!r}", f"use one of: {', '.join(DTYPE_BYTES)}")
            signature = repr((op.type, tuple((t.dims, t.dtype, t.grad) for t in ins), op.out, tuple(p.dims for p in op.params), sorted(op.attrs.items()), dtype))
            sid = cache.get(signature)
            if sid is None:
                distinct.append(make_semantics(op.type, ins, op.out, [p.dims for p in op.params], op.attrs, dtype, self.dims, never, path))
                sid = cache[signature] = len(distinct) - 1
            self._semantics.append(distinct[sid])
            self._signatures.append(signature)
            self._signature_ids.append(sid)
            self._inputs.append(tuple(self.index[src] for src in op.inputs))
            for j, src in enumerate(op.inputs):
                self._edge_src.append(self.index[src])
                self._edge_dst.append(k)
                self._edge_slot.append(j)
        #: every input's kind (numbered in order of first appearance) and the kinds: (producer
        #: signature id, consumer signature id, slot), on which its resharding depends besides
        #: the two strategies (derived from the graph alone, as the signatures are)
        kinds: dict[tuple[int, int, int], int] = {}
        sig = self._signature_ids
        edge_kind = [kinds.setdefault(kind, len(kinds)) for kind in zip(map(sig.__getitem__, self._edge_src), map(sig.__getitem__, self._edge_dst), self._edge_slot)]
        self._edge_kinds: tuple[list[int], list[tuple[int, int, int]]] = (edge_kind, list(kinds))
        #: the ops that follow their input 0, and that input's op
        self._followers = [k for k, ins in enumerate(self._inputs) if ins and self._semantics[k].follows]
        self._followed = [self._inputs[k][0] for k in self._followers]
        if self.training.batch_dim not in self.dims:
            raise InputError("training.batch_dim", f"{self.training.batch_dim!r} is not a dim of graph.dims", "name the batch dimension")
        for k, d in enumerate(self.tensor_parallel_dims):
            if d not in self.dims:
                raise InputError(f"graph.tensor_parallel_dims[{k}]", f"unknown dim {d!r}", "name dims of graph.dims")

    # -- derived data ---------------------------------------------------------------------
    def semantics(self, k: int) -> OpSemantics:
        """Cost-model view of op ``k`` (shared by ops with equal signatures)."""
        return self._semantics[k]

    @property
    def producers(self) -> list[tuple[int, ...]]:
        """For every op, the indices of the ops producing its inputs, in input order."""
        return self._inputs

    def signature(self, k: int) -> str:
        """A string equal for ops whose costs are identical (type, shapes, dtypes, attrs)."""
        return self._signatures[k]

    @property
    def signature_ids(self) -> list[int]:
        """For every op, its signature numbered in order of first appearance (equal ids =
        equal signatures = shared semantics)."""
        return self._signature_ids

    @property
    def device_spec(self) -> DeviceSpec:
        return device(self.mesh.device)

    @property
    def memory_budget(self) -> float:
        """Bytes per device."""
        return float(self.mesh.memory) if self.mesh.memory is not None else float(self.device_spec.memory_bytes)

    @cached_property
    def cost_context(self) -> CostContext:
        return CostContext(
            axis_sizes=self.mesh.shape,
            bandwidth=self.mesh.bandwidth,
            latency=self.mesh.latency,
            device=self.device_spec,
            all_to_all=self.mesh.all_to_all,
            backward_factor=self.training.backward_factor,
            optimizer_bytes_per_param=self.training.optimizer_bytes_per_param,
            batch_dim=self.training.batch_dim,
        )

    def with_memory(self, memory: float | None, name: str | None = None) -> ShardingInstance:
        """A copy with another per-device memory budget (bytes; None: the device's)."""
        mesh = Mesh(self.mesh.shape, self.mesh.bandwidth, self.mesh.latency, self.mesh.device, memory, self.mesh.all_to_all)
        return ShardingInstance(
            name=name or self.name,
            mesh=mesh,
            training=self.training,
            dims=dict(self.dims),
            ops=list(self.ops),
            dtype=self.dtype,
            never_split=self.never_split,
            tensor_parallel_dims=self.tensor_parallel_dims,
            description=self.description,
        )

    # -- I/O ------------------------------------------------------------------------------
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> ShardingInstance:
        """Read and validate a ``distplan/1`` sharding document."""
        name = need(data, "name", "")
        if not isinstance(name, str) or not name:
            raise InputError("name", f"expected a non-empty string, got {name!r}")
        m = need(data, "mesh", "")
        shape_raw = need(m, "shape", "mesh")
        if not isinstance(shape_raw, list) or not 1 <= len(shape_raw) <= 3:
            raise InputError("mesh.shape", f"expected 1 to 3 axis sizes, got {shape_raw!r}", "e.g. [8] or [2, 4]")
        shape = tuple(int(number(v, f"mesh.shape[{k}]", positive=True, integer=True, at_most=MAX_AXIS, unit="devices")) for k, v in enumerate(shape_raw))
        if math.prod(shape) > MAX_MESH_DEVICES:
            raise InputError("mesh.shape", f"{' x '.join(map(str, shape))} = {math.prod(shape)} devices, beyond the {MAX_MESH_DEVICES} a mesh may have", "give a smaller mesh")
        bandwidth = _number_list(need(m, "bandwidth", "mesh"), "mesh.bandwidth", len(shape), at_least=MIN_RATE, unit="bytes/s")
        latency = _number_list(need(m, "latency", "mesh"), "mesh.latency", len(shape), positive=False, at_most=MAX_SECONDS, unit="s")
        dev = need(m, "device", "mesh")
        if not isinstance(dev, str):
            raise InputError("mesh.device", f"expected a device name, got {dev!r}")
        try:
            device(dev)
        except InputError as exc:
            raise InputError("mesh.device", exc.problem, exc.fix) from None
        memory = m.get("memory")
        if memory is not None:
            memory = number(memory, "mesh.memory", positive=True)
        a2a = m.get("all_to_all", True)
        if not isinstance(a2a, bool):
            raise InputError("mesh.all_to_all", f"expected true or false, got {a2a!r}")
        mesh = Mesh(shape, bandwidth, latency, dev, memory, a2a)

        t = need(data, "training", "")
        batch_dim = need(t, "batch_dim", "training")
        if not isinstance(batch_dim, str):
            raise InputError("training.batch_dim", f"expected a dim name, got {batch_dim!r}")
        training = Training(
            batch_dim=batch_dim,
            optimizer_bytes_per_param=number(t.get("optimizer_bytes_per_param", 16.0), "training.optimizer_bytes_per_param", at_most=MAX_FACTOR, unit="bytes"),
            backward_factor=number(t.get("backward_factor", 2.0), "training.backward_factor", at_most=MAX_FACTOR, unit="times"),
        )

        g = need(data, "graph", "")
        dims_raw = need(g, "dims", "graph")
        if not isinstance(dims_raw, Mapping) or not dims_raw:
            raise InputError("graph.dims", "expected an object {dim name: size}", 'e.g. {"b": 8, "h": 1024}')
        dims: dict[str, int] = {}
        for d, v in dims_raw.items():
            if not DIM_NAME.fullmatch(d):
                raise InputError(f"graph.dims.{d}", "dim names are identifiers (letters, digits, _)")
            dims[d] = int(number(v, f"graph.dims.{d}", positive=True, integer=True, at_most=MAX_DIM, unit="elements"))
        dtype = g.get("dtype", "fp16")
        if not isinstance(dtype, str) or dtype not in DTYPE_BYTES:
            raise InputError("graph.dtype", f"unknown dtype {dtype!r}", f"use one of: {', '.join(DTYPE_BYTES)}")
        never = _str_list(g.get("never_split", []), "graph.never_split")
        tp = _str_list(g.get("tensor_parallel_dims", []), "graph.tensor_parallel_dims")
        for k, d in enumerate(never):
            if d not in dims:
                raise InputError(f"graph.never_split[{k}]", f"unknown dim {d!r}")
        ops_raw = need(g, "ops", "graph")
        if not isinstance(ops_raw, list) or not ops_raw:
            raise InputError("graph.ops", "expected a non-empty list of ops")
        ops: list[Op] = []
        for k, o in enumerate(ops_raw):
            path = f"graph.ops[{k}]"
            nm = need(o, "name", path)
            if not isinstance(nm, str) or not nm:
                raise InputError(f"{path}.name", f"expected a non-empty string, got {nm!r}")
            typ = need(o, "type", path)
            if not isinstance(typ, str):
                raise InputError(f"{path}.type", f"expected a string, got {typ!r}")
            out = _str_list(need(o, "out", path), f"{path}.out")
            inputs = _str_list(o.get("inputs", []), f"{path}.inputs")
            params_raw = o.get("params", [])
            if not isinstance(params_raw, list):
                raise InputError(f"{path}.params", "expected a list of {name, dims}")
            params = []
            for j, p in enumerate(params_raw):
                pn = need(p, "name", f"{path}.params[{j}]")
                if not isinstance(pn, str):
                    raise InputError(f"{path}.params[{j}].name", f"expected a string, got {pn!r}")
                params.append(Param(pn, _str_list(need(p, "dims", f"{path}.params[{j}]"), f"{path}.params[{j}].dims")))
            op_dtype = o.get("dtype")
            if op_dtype is not None and not isinstance(op_dtype, str):
                raise InputError(f"{path}.dtype", f"expected a dtype name, got {op_dtype!r}")
            attrs = o.get("attrs", {})
            if not isinstance(attrs, Mapping):
                raise InputError(f"{path}.attrs", f"expected an object, got {attrs!r}")
            ops.append(Op(nm, typ, out, inputs, tuple(params), op_dtype, dict(attrs)))
        desc = data.get("description", "")
        return ShardingInstance(
            name=name,
            mesh=mesh,
            training=training,
            dims=dims,
            ops=ops,
            dtype=dtype,
            never_split=never,
            tensor_parallel_dims=tp,
            description=desc if isinstance(desc, str) else "",
        )

    def to_dict(self) -> dict[str, Any]:
        mesh: dict[str, Any] = {
            "shape": list(self.mesh.shape),
            "bandwidth": list(self.mesh.bandwidth),
            "latency": list(self.mesh.latency),
            "device": self.mesh.device,
        }
        if self.mesh.memory is not None:
            mesh["memory"] = self.mesh.memory
        if not self.mesh.all_to_all:
            mesh["all_to_all"] = False
        ops: list[dict[str, Any]] = []
        for op in self.ops:
            d: dict[str, Any] = {"name": op.name, "type": op.type}
            if op.inputs:
                d["inputs"] = list(op.inputs)
            d["out"] = list(op.out)
            if op.params:
                d["params"] = [{"name": p.name, "dims": list(p.dims)} for p in op.params]
            if op.dtype is not None:
                d["dtype"] = op.dtype
            if op.attrs:
                d["attrs"] = dict(op.attrs)
            ops.append(d)
        doc: dict[str, Any] = {"format": FORMAT, "kind": "sharding", "name": self.name}
        if self.description:
            doc["description"] = self.description
        doc["mesh"] = mesh
        doc["training"] = {
            "batch_dim": self.training.batch_dim,
            "optimizer_bytes_per_param": self.training.optimizer_bytes_per_param,
            "backward_factor": self.training.backward_factor,
        }
        graph: dict[str, Any] = {"dims": dict(self.dims), "dtype": self.dtype}
        if self.never_split:
            graph["never_split"] = list(self.never_split)
        if self.tensor_parallel_dims:
            graph["tensor_parallel_dims"] = list(self.tensor_parallel_dims)
        graph["ops"] = ops
        doc["graph"] = graph
        return doc

    def summary(self) -> dict[str, Any]:
        types: dict[str, int] = {}
        for op in self.ops:
            types[op.type] = types.get(op.type, 0) + 1
        n_params = sum(t.numel for k in range(len(self.ops)) for t in self.semantics(k).params)
        flops = sum(self.semantics(k).flops for k in range(len(self.ops)))
        return {
            "name": self.name,
            "kind": self.kind,
            "ops": len(self.ops),
            "op types": ", ".join(f"{t}:{n}" for t, n in sorted(types.items())),
            "parameters": n_params,
            "forward FLOPs": f"{flops:.4g}",
            "mesh": "x".join(str(s) for s in self.mesh.shape) + f" {self.mesh.device}",
            "bandwidth (GB/s per axis)": ", ".join(f"{b / GB:.4g}" for b in self.mesh.bandwidth),
            "memory per device (GB)": round(self.memory_budget / GB, 3),
            "batch": self.dims[self.training.batch_dim],
            "dims": ", ".join(f"{d}={s}" for d, s in self.dims.items()),
        }


@dataclass
class ShardingPlan:
    """One strategy name per op ("R" / "S(dim)" per mesh axis)."""

    strategies: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        return {"strategies": dict(self.strategies)}


def plan_from_dict(inst: ShardingInstance, data: Mapping[str, Any]) -> ShardingPlan:
    strategies = need(data, "strategies", "")
    if not isinstance(strategies, Mapping):
        raise InputError("strategies", "expected an object {op name: strategy}")
    out: dict[str, str] = {}
    ndim = len(inst.mesh.shape)
    for k, v in strategies.items():
        if str(k) not in inst.index:
            raise InputError(f"strategies.{k}", f"unknown op {k!r}", "use op names of the instance")
        if not isinstance(v, str):
            raise InputError(f"strategies.{k}", f"expected a strategy name such as 'S(b)', got {v!r}")
        try:
            parse_strategy(v, ndim)
        except ValueError as exc:
            raise InputError(f"strategies.{k}", str(exc), f"write one R or S(dim) per mesh axis ({ndim})") from None
        out[str(k)] = v
    return ShardingPlan(out)


class _Memo(dict):  # type: ignore[type-arg]
    """A dict that computes a missing value as ``make(key)`` and keeps it (a hit stays a
    plain dict lookup, so ``map(memo.__getitem__, keys)`` runs in C)."""

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def __missing__(self, key: Any) -> Any:
        value = self[key] = self.make(key)
        return value


class _StrategyRules:
    """The validity rules of a plan's strategies, each decided once per key within one
    `evaluate` call (memos), read by its one-pass check and by `_violations`' messages.

    * ``parsed[name]``: the strategy a name stands for, or the ValueError saying why it
      stands for none (None, the name of a missing strategy, is malformed);
    * ``fault[(signature id, name)]``: None when an op of that signature may take the
      strategy ``name``, else the words that follow the op's name in its violation
      (no strategy, a malformed name, a split the op does not allow);
    * ``off_layout[(signature id, name, producer's signature id, producer's name)]``, for
      a follower whose ``fault`` is None: None when ``name`` keeps its input 0's layout,
      else the name of the strategy that does. The producer's layout is read from its
      strategy, or replicated when it has none or a malformed one.
    """

    def __init__(self, inst: ShardingInstance) -> None:
        self.ctx = inst.cost_context
        self.ndim = len(inst.mesh.shape)
        #: signature id -> its (shared) semantics
        self.sem_of: dict[int, OpSemantics] = dict(zip(inst.signature_ids, inst._semantics))
        self.parsed = _Memo(self._parse)
        self.fault = _Memo(self._fault)
        self.off_layout = _Memo(self._off_layout)

    def _parse(self, name: Any) -> Strategy | ValueError:
        try:
            return parse_strategy(name, self.ndim)
        except ValueError as exc:
            return exc

    def _fault(self, key: tuple[int, Any]) -> str | None:
        g, name = key
        if name is None:
            return " has no strategy"
        # (a name that is not a string is never valid, and equal values of other types, 1 and
        # True, would share one memo entry and so one message: it is parsed apart)
        strategy = self.parsed[name] if isinstance(name, str) else self._parse(name)
        if isinstance(strategy, ValueError):
            return f": strategy {strategy}"
        problem = strategy_problem(self.sem_of[g], strategy, self.ctx)
        return None if problem is None else f": strategy {name!r} {problem}"

    def _off_layout(self, key: tuple[int, Any, int, Any]) -> str | None:
        g, name, gp, name_p = key
        produced = self.parsed[name_p]
        if isinstance(produced, ValueError):
            produced = tuple([None] * self.ndim)
        want = follow_strategy(self.sem_of[g], tensor_spec(self.sem_of[gp].output, produced), self.ctx)
        return None if want == self.parsed[name] else strategy_name(want)


def evaluate(inst: ShardingInstance, plan: ShardingPlan) -> Check:
    """Check a plan and recompute its iteration time (seconds) and memory per device.

    Checks one valid strategy per op (followers keep their input's layout). Sums, for every
    op, compute and collectives under its strategy, and for every edge the resharding from
    the producer's output layout to the consumer's required layout. Memory: parameters with
    optimizer state plus all saved activations, per device.

    Ops with equal signatures share their semantics (`ShardingInstance.signature_ids`), so
    within one call every rule (`_StrategyRules`) is decided once per key and every cost is
    computed once per (signature, strategy name), every resharding once per (producer
    signature and strategy, consumer signature, input slot, consumer strategy); the sums
    still run over every op and edge in op order. A plan that breaks a rule is gone through
    op by op (`_violations`) for its messages, from the same rules.
    """
    rules = _StrategyRules(inst)
    ctx, sem_of = rules.ctx, rules.sem_of
    sig = inst.signature_ids
    names = list(inst.index)  # op names in op order
    chosen = list(map(plan.strategies.get, names))
    at = chosen.__getitem__
    keys = list(zip(sig, chosen))
    distinct = set(keys)
    fault, off_layout = rules.fault.__getitem__, rules.off_layout.__getitem__
    valid = plan.strategies.keys() == inst.index.keys() and all(fault(key) is None for key in distinct)
    if valid:
        follower_keys = set(zip(map(sig.__getitem__, inst._followers), map(at, inst._followers), map(sig.__getitem__, inst._followed), map(at, inst._followed)))
        valid = all(off_layout(key) is None for key in follower_keys)
    if not valid:
        return Check(False, float("inf"), _violations(inst, plan, rules))
    strategy_of = rules.parsed
    costs = {key: op_cost(sem_of[key[0]], strategy_of[key[1]], ctx) for key in distinct}
    # rows: a zero row, then every op's (compute, collectives, parameter bytes, activation
    # bytes) in op order, read from the distinct costs
    row_of = dict(zip(costs, range(1, len(costs) + 1)))
    table = np.array([(0.0, 0.0, 0.0, 0.0), *costs.values()], dtype=float)
    rows = table[np.fromiter(chain((0,), map(row_of.__getitem__, keys)), np.intp, len(keys) + 1)]
    # every input's resharding, once per (producer and consumer signatures and slot, the
    # producer's and the consumer's strategy names); per op (after a zero entry) the sum
    # over its inputs in input order from 0.0 (bincount adds in edge order)
    dst = inst._edge_dst
    edge_kind, kinds = inst._edge_kinds
    edge_keys = zip(edge_kind, map(at, inst._edge_src), map(at, dst))

    def reshard(key: tuple[int, str, str]) -> float:
        kind, name_p, name = key
        gp, g, j = kinds[kind]
        out = sem_of[gp].output
        return reshard_seconds(out, tensor_spec(out, strategy_of[name_p]), tensor_spec(sem_of[g].inputs[j], strategy_of[name]), ctx)

    edges = _Memo(reshard)  # (computed on first use)
    edge_t = np.bincount(np.asarray(dst, dtype=np.intp) + 1, np.fromiter(map(edges.__getitem__, edge_keys), float, len(dst)), len(keys) + 1)
    # running sums in op order from 0.0 (cumsum adds row after row: bit for bit the += of a
    # loop over the ops)
    compute, comm, param_bytes, act_bytes = np.cumsum(rows, axis=0)[-1].tolist()
    resharding = float(np.cumsum(edge_t)[-1])
    per_op = zip(((rows[1:, 0] + rows[1:, 1]) + edge_t[1:]).tolist(), names)  # (compute + comm) + edge, as before
    objective = compute + comm + resharding
    memory = param_bytes + act_bytes
    budget = inst.memory_budget
    violations: list[str] = []
    if objective == float("inf"):
        violations.append("a resharding needs an all-to-all, which this mesh does not allow (mesh.all_to_all false)")
    if bytes_over(memory, budget):
        violations.append(
            f"memory: every device needs {bytes_text(memory)} at {TIGHTEST_POINT}, "
            f"the budget is {bytes_text(budget)} ({bytes_text(memory - budget)} missing)"
        )
    details = {
        "compute_seconds": compute,
        "collective_seconds": comm,
        "resharding_seconds": resharding,
        "memory_bytes": memory,
        "param_state_bytes": param_bytes,
        "activation_bytes": act_bytes,
        "memory_budget_bytes": budget,
        "devices": inst.mesh.num_devices,
        "slowest_ops": [{"op": n, "seconds": t} for t, n in heapq.nlargest(5, per_op)],
    }
    return Check(not violations, objective, violations, details)


def _violations(inst: ShardingInstance, plan: ShardingPlan, rules: _StrategyRules) -> list[str]:
    """Why a plan is rejected, op by op in op order (no strategy, a malformed name, a
    strategy the op does not allow, a follower off its input's layout: `_StrategyRules`),
    then the ops the plan names that the instance does not have."""
    sig = inst.signature_ids
    get = plan.strategies.get
    follows = set(inst._followers)
    ops = inst.ops
    violations: list[str] = []
    for k, op in enumerate(ops):
        name = get(op.name)
        fault = rules.fault[sig[k], name] if name is None or isinstance(name, str) else rules._fault((sig[k], name))
        if fault is not None:
            violations.append(f"op {op.name!r}{fault}")
        elif k in follows:
            p = inst.producers[k][0]
            want = rules.off_layout[sig[k], name, sig[p], get(ops[p].name)]
            if want is not None:
                violations.append(f"op {op.name!r} ({op.type}) follows its input {op.inputs[0]!r}: its strategy is {want!r}, not {name!r}")
    for extra in sorted(set(plan.strategies) - set(inst.index)):
        violations.append(f"the plan names an unknown op {extra!r}")
    return violations


def describe(inst: ShardingInstance, plan: ShardingPlan, check: Check) -> list[str]:
    d = check.details
    lines = [
        f"time         compute {d['compute_seconds'] * 1e3:.3f} ms + collectives {d['collective_seconds'] * 1e3:.3f} ms"
        f" + resharding {d['resharding_seconds'] * 1e3:.3f} ms",
        f"memory       {d['memory_bytes'] / GB:.3f} GB per device (parameters+optimizer {d['param_state_bytes'] / GB:.3f} GB,"
        f" activations {d['activation_bytes'] / GB:.3f} GB) of {d['memory_budget_bytes'] / GB:.3f} GB",
    ]
    counts: dict[tuple[str, str], int] = {}
    for op in inst.ops:
        key = (op.type, plan.strategies.get(op.name, "?"))
        counts[key] = counts.get(key, 0) + 1
    lines.append("strategies   " + ", ".join(f"{t} {s} x{n}" for (t, s), n in sorted(counts.items())))
    return lines


SPEC = register_kind(
    KindSpec(
        kind="sharding",
        from_dict=ShardingInstance.from_dict,
        plan_from_dict=plan_from_dict,  # type: ignore[arg-type]
        evaluate=evaluate,
        objective_name="iteration",
        objective_unit="s",
        describe=describe,  # type: ignore[arg-type]
        plan_fields=("strategies",),
    )
)

__all__ = [
    "GB",
    "Mesh",
    "Op",
    "Param",
    "ShardingInstance",
    "ShardingPlan",
    "Training",
    "evaluate",
    "plan_from_dict",
    "strategy_name",
]
