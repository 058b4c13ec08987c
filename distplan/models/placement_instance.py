"""Operator placement with memory limits: the instance (parsing, validation, serialization).

Units: seconds, bytes, bytes/second. The instance is the ``distplan/1`` document of kind
``placement`` (see README); internally ops and devices are numbered in document order and
all per-op / per-edge data are numpy arrays.

Communication delay of an edge whose ends run on different devices is
``latency[a, b] + bytes / bandwidth[a, b]``; zero on the same device ("independent" model).
Baechi's channel model (``"communication": "channels"``) serializes every transfer on one
channel per device shared by sends and receives (a transfer occupies the sender's and the
receiver's channel from its start to its arrival), and caches a tensor received once (a
tensor is identified by its producer and its size in bytes).

Memory models: ``"simple"`` (default): the sum of ``memory`` of the ops on a device must
fit its capacity. ``"liveness"`` (Baechi, Jeon et al. SoCC 2020): ``memory`` is persistent,
``temporary`` is held while the op runs, ``output`` from the op's start until its last
consumer finished (sink outputs stay); the peak per device must fit.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.models.common import FORMAT, MAX_BYTES, MAX_SECONDS, JsonDocument, copy_json, name_list, need, number, plain_numbers
from distplan.models.graphs import find_cycle, topological_order

MEMORY_MODELS = ("simple", "liveness")
COMMUNICATION_MODELS = ("independent", "channels")
TOL = 1e-9
#: relative tolerance of the evaluator's memory check (`placement_evaluate.evaluate`): a
#: device's peak is accepted up to its capacity x (1 + MEMORY_TOLERANCE); see `accepted_memory`
MEMORY_TOLERANCE = 1e-12
#: elements of the edge-size x device-pair table `PlacementInstance._pair_delay` forms at once
PAIR_DELAY_BLOCK = 1 << 22


@dataclass
class PlacementInstance(JsonDocument):
    """A DAG of ops and a cluster of devices. Arrays are indexed by op / edge / device id."""

    name: str
    op_names: list[str]
    time: np.ndarray  # (n_ops, n_devices) seconds
    memory: np.ndarray  # (n_ops,) bytes held on the device the op runs on (persistent)
    temporary: np.ndarray  # (n_ops,) bytes while the op runs
    output: np.ndarray  # (n_ops,) bytes of outputs, held until the last consumer ran
    colocate: list[str | None]
    src: np.ndarray  # (n_edges,) op ids
    dst: np.ndarray
    edge_bytes: np.ndarray  # (n_edges,) bytes
    device_names: list[str]
    device_memory: np.ndarray  # (n_devices,) bytes
    device_types: list[str]
    bandwidth: np.ndarray  # (n_devices, n_devices) bytes/second
    latency: np.ndarray  # (n_devices, n_devices) seconds
    memory_model: str = "simple"
    communication: str = "independent"
    meta: dict[str, Any] = field(default_factory=dict)
    document: dict[str, Any] | None = None
    kind: str = "placement"

    # -- sizes ----------------------------------------------------------------------------
    @property
    def n_ops(self) -> int:
        return len(self.op_names)

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    @property
    def n_edges(self) -> int:
        return int(self.src.size)

    @property
    def op_index(self) -> dict[str, int]:
        return {n: k for k, n in enumerate(self.op_names)}

    # -- derived quantities ---------------------------------------------------------------
    def accepted_memory(self) -> np.ndarray:
        """Per device, the largest memory peak (bytes) the evaluator accepts: its capacity x
        (1 + `MEMORY_TOLERANCE`), the very values `placement_evaluate.evaluate` compares
        with. Whatever proves something about every accepted plan (a bound, a forced
        decision, a cut, an infeasibility) compares memory with these, not with the bare
        capacity: ops holding capacity + 1 byte on a 2 TB device are accepted (review
        rev16 D1, a "safe" bound of 12 s over a 2 s plan). Plan builders may use them too."""
        return self.device_memory * (1 + MEMORY_TOLERANCE)

    def delay(self, edges: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Transfer delay (seconds) of edges from device a to device b; zero where a == b."""
        d = self.latency[a, b] + self.edge_bytes[edges] / self.bandwidth[a, b]
        return np.where(a == b, 0.0, d)

    def max_delay(self) -> np.ndarray:
        """Per edge, the largest delay over all device pairs (seconds)."""
        return self._pair_delay(np.max)

    def min_delay(self) -> np.ndarray:
        """Per edge, the smallest nonzero-pair delay (seconds)."""
        return self._pair_delay(np.min)

    def _pair_delay(self, reduce: Any) -> np.ndarray:
        """Per edge, ``reduce`` (np.min or np.max) over the pairs of distinct devices of
        latency + bytes x (1 / bandwidth), seconds. Computed over the distinct edge sizes
        and the distinct (latency, bandwidth) pairs only, by the same float operations per
        element, so the values are the same as over every edge and pair: a table of edges
        x m(m - 1) pairs took 1.2 GB and 1.2-4.7 s, past the time limit, on 37,572 edges and
        64 devices (review rev24b D1), where a multi-node cluster has a few distinct links
        and a model a few hundred distinct tensor sizes. Blocks of `PAIR_DELAY_BLOCK`
        elements bound the memory when both are many."""
        if self.n_devices == 1:
            return np.zeros(self.n_edges)
        off = ~np.eye(self.n_devices, dtype=bool)
        links = np.unique(np.stack([self.latency[off], (1.0 / self.bandwidth)[off]], axis=1), axis=0)
        lat, inv_bw = links[:, 0], links[:, 1]
        sizes, back = np.unique(self.edge_bytes, return_inverse=True)
        table = np.empty(sizes.size)
        step = max(1, PAIR_DELAY_BLOCK // max(1, lat.size))
        for lo in range(0, sizes.size, step):
            block = sizes[lo : lo + step]
            table[lo : lo + step] = reduce(lat[None, :] + block[:, None] * inv_bw[None, :], axis=1)
        return table[back.reshape(-1)]

    def memory_need(self) -> np.ndarray:
        """Bytes an op needs on its device under the instance's memory model (alone)."""
        if self.memory_model == "liveness":
            return self.memory + self.temporary + self.output
        return self.memory.copy()

    def held_to_end(self) -> np.ndarray:
        """Bytes per op its device still holds when every op has run, whatever the schedule
        (`placement_evaluate.memory_peaks`): the op's memory under the simple model; under
        the liveness model its persistent memory, and its output when no op consumes it
        (never freed). A device's peak is at least the sum over its ops."""
        if self.memory_model != "liveness":
            return self.memory.copy()
        sinks = np.ones(self.n_ops, dtype=bool)
        sinks[self.src] = False
        return self.memory + np.where(sinks, self.output, 0.0)

    def topo_order(self) -> np.ndarray:
        return topological_order(self.n_ops, self.src, self.dst)

    def colocation_groups(self) -> np.ndarray:
        """Group id per op: ops sharing a ``colocate`` name share an id; others are alone."""
        if self.colocate.count(None) == self.n_ops:
            return np.arange(self.n_ops, dtype=np.int64)
        ids: dict[str, int] = {}
        out = np.empty(self.n_ops, dtype=np.int64)
        nxt = 0
        for k, g in enumerate(self.colocate):
            if g is None:
                out[k] = nxt
                nxt += 1
            else:
                if g not in ids:
                    ids[g] = nxt
                    nxt += 1
                out[k] = ids[g]
        return out

    def with_models(self, memory_model: str | None = None, communication: str | None = None) -> PlacementInstance:
        """A copy with other memory/communication models."""
        inst = copy.copy(self)
        if memory_model is not None:
            if memory_model not in MEMORY_MODELS:
                raise InputError("model.memory", f"unknown memory model {memory_model!r}", f"use one of {MEMORY_MODELS}")
            inst.memory_model = memory_model
        if communication is not None:
            if communication not in COMMUNICATION_MODELS:
                raise InputError("model.communication", f"unknown model {communication!r}", f"use one of {COMMUNICATION_MODELS}")
            inst.communication = communication
        inst.document = None
        return inst

    def induced(self, keep: np.ndarray) -> PlacementInstance:
        """The sub-instance on the ops where ``keep`` (boolean per op) holds, with the edges
        between them; devices, links, memory and models unchanged."""
        ops = np.flatnonzero(keep)
        pos = np.full(self.n_ops, -1, dtype=np.int64)
        pos[ops] = np.arange(ops.size)
        inside = (pos[self.src] >= 0) & (pos[self.dst] >= 0)
        sub = copy.copy(self)
        sub.name = f"{self.name}-segment"
        sub.op_names = [self.op_names[v] for v in ops.tolist()]
        sub.time = self.time[ops]
        sub.memory = self.memory[ops]
        sub.temporary = self.temporary[ops]
        sub.output = self.output[ops]
        sub.colocate = [self.colocate[v] for v in ops.tolist()]
        sub.src = pos[self.src[inside]]
        sub.dst = pos[self.dst[inside]]
        sub.edge_bytes = self.edge_bytes[inside]
        sub.document = None
        return sub

    def with_device_memory(self, memory: float | np.ndarray) -> PlacementInstance:
        """A copy with another memory capacity per device (bytes)."""
        inst = copy.copy(self)
        inst.device_memory = np.broadcast_to(np.asarray(memory, dtype=float), (self.n_devices,)).copy()
        inst.document = None
        return inst

    # -- I/O ------------------------------------------------------------------------------
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> PlacementInstance:
        return _parse(data)

    def to_dict(self) -> dict[str, Any]:
        if self.document is not None:
            return copy_json(self.document)
        return _serialize(self)

    def summary(self) -> dict[str, Any]:
        tmin = self.time.min(axis=1)
        return {
            "name": self.name,
            "kind": self.kind,
            "ops": self.n_ops,
            "edges": self.n_edges,
            "devices": self.n_devices,
            "device memory (bytes)": ", ".join(f"{n}={int(m)}" for n, m in zip(self.device_names, self.device_memory)),
            "total op time, fastest device (s)": float(tmin.sum()),
            "total memory (bytes)": float(self.memory_need().sum()),
            "total edge bytes": float(self.edge_bytes.sum()),
            "memory model": self.memory_model,
            "communication model": self.communication,
        }


def _parse(data: Mapping[str, Any]) -> PlacementInstance:
    name = need(data, "name", "")  # (required, as the schema says: `validate` and `solve` agree)
    if not isinstance(name, str):
        raise InputError("name", f"expected a string, got {name!r}")
    cluster = need(data, "cluster", "")
    devs = need(cluster, "devices", "cluster")
    if not isinstance(devs, list):
        raise InputError("cluster.devices", f"expected a list of devices, got {_kind_of(devs)}", 'give e.g. [{"name": "gpu0", "memory": 16e9}]')
    if not devs:
        raise InputError("cluster.devices", "the device list is empty", "list at least one device")
    dev_names = name_list(devs, "cluster.devices", "devices")
    dev_mem = np.array([number(need(d, "memory", f"cluster.devices[{k}]"), f"cluster.devices[{k}].memory", positive=True, at_most=MAX_BYTES, unit="bytes") for k, d in enumerate(devs)])
    dev_types = [_text(d.get("type", "default"), f"cluster.devices[{k}].type", "a device type name") for k, d in enumerate(devs)]
    nd = len(dev_names)
    bw0 = number(cluster.get("bandwidth", math.inf) if nd > 1 else cluster.get("bandwidth", 1.0), "cluster.bandwidth", positive=True) if ("bandwidth" in cluster or nd == 1) else None
    if bw0 is None:
        raise InputError("cluster.bandwidth", "missing", "give the default bandwidth between devices in bytes/second")
    lat0 = number(cluster.get("latency", 0.0), "cluster.latency", at_most=MAX_SECONDS, unit="s")
    bandwidth = np.full((nd, nd), bw0)
    latency = np.full((nd, nd), lat0)
    dix = {n: k for k, n in enumerate(dev_names)}
    links = cluster.get("links", [])
    if links is not None and not isinstance(links, list):
        raise InputError("cluster.links", f"expected a list of links, got {_kind_of(links)}", 'give e.g. [{"src": "gpu0", "dst": "gpu1", "bandwidth": 1e10}]')
    for k, link in enumerate(links or []):
        path = f"cluster.links[{k}]"
        a, b = need(link, "src", path), need(link, "dst", path)
        for key, v in (("src", a), ("dst", b)):
            if not isinstance(v, str):
                raise InputError(f"{path}.{key}", f"expected a device name (string), got {v!r}", f"use one of: {', '.join(dev_names)}")
            if v not in dix:
                raise InputError(f"{path}.{key}", f"unknown device {v!r}", f"use one of: {', '.join(dev_names)}")
        if a == b:
            raise InputError(path, f"a link from device {a!r} to itself (ops on one device exchange data without a link)", "remove the link or name two devices")
        bw = number(link.get("bandwidth", bw0), f"{path}.bandwidth", positive=True)
        lat = number(link.get("latency", lat0), f"{path}.latency", at_most=MAX_SECONDS, unit="s")
        directed = link.get("directed", False)
        if not isinstance(directed, bool):
            raise InputError(f"{path}.directed", f"expected true or false, got {directed!r}")
        pairs = [(dix[a], dix[b])] if directed else [(dix[a], dix[b]), (dix[b], dix[a])]
        for i, j in pairs:
            bandwidth[i, j] = bw
            latency[i, j] = lat

    graph = need(data, "graph", "")
    ops = need(graph, "ops", "graph")
    if not isinstance(ops, list):
        raise InputError("graph.ops", f"expected a list of ops, got {_kind_of(ops)}", 'give e.g. [{"name": "matmul", "time": 0.001, "memory": 1e6}]')
    if not ops:
        raise InputError("graph.ops", "the op list is empty", "list at least one op")
    op_names = name_list(ops, "graph.ops", "ops")
    n = len(op_names)
    fast = _plain_ops(ops, nd)
    if fast is not None:
        time, memory, temporary, output, colocate = fast
    else:
        time, memory, temporary, output, colocate = _checked_ops(ops, nd, dev_names, dev_types)

    edges = graph.get("edges", [])
    if not isinstance(edges, list):
        raise InputError("graph.edges", f"expected a list of edges, got {_kind_of(edges)}", 'give e.g. [{"src": "a", "dst": "b", "bytes": 4096}], or [] for none')
    oix = {nm: k for k, nm in enumerate(op_names)}
    plain = _plain_edges(edges, oix)
    src, dst, nbytes = plain if plain is not None else _checked_edges(edges, oix, op_names)
    cyc = find_cycle(n, src, dst)
    if cyc is not None:
        shown = " -> ".join(op_names[v] for v in cyc + [cyc[0]])
        raise InputError("graph.edges", f"the graph has a cycle: {shown}", "remove an edge of this cycle")

    model = data.get("model", {})
    if model is None:
        model = {}
    if not isinstance(model, Mapping):
        raise InputError("model", f"expected an object, got {model!r}", 'give e.g. {"memory": "liveness", "communication": "channels"}, or leave it out')
    meta = data.get("meta", {})
    if meta is None:
        meta = {}
    if not isinstance(meta, Mapping):
        raise InputError("meta", f"expected an object, got {_kind_of(meta)}", 'give e.g. {"source": "..."}, or leave it out')
    mem_model = model.get("memory", "simple")
    comm = model.get("communication", "independent")
    if mem_model not in MEMORY_MODELS:
        raise InputError("model.memory", f"unknown memory model {mem_model!r}", f"use one of {MEMORY_MODELS}")
    if comm not in COMMUNICATION_MODELS:
        raise InputError("model.communication", f"unknown communication model {comm!r}", f"use one of {COMMUNICATION_MODELS}")

    inst = PlacementInstance(
        name=name,
        op_names=op_names,
        time=time,
        memory=memory,
        temporary=temporary,
        output=output,
        colocate=colocate,
        src=src,
        dst=dst,
        edge_bytes=nbytes,
        device_names=dev_names,
        device_memory=dev_mem,
        device_types=dev_types,
        bandwidth=bandwidth,
        latency=latency,
        memory_model=mem_model,
        communication=comm,
        meta=dict(meta),
        document=copy_json(dict(data)),
    )
    _check_fits(inst)
    return inst


OpArrays = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, list[str | None]]


def _plain_ops(ops: list[Mapping[str, Any]], nd: int) -> OpArrays | None:
    """(time per op and device, memory, temporary, output, colocate) read at once when
    every op is plain: one number for its time, plain numbers in range for the rest and a
    non-empty text or null for its group. None otherwise: `_checked_ops` reads them one by
    one and names the first bad field (both read the same values: tests hold them equal).
    On a 200,000-op instance this is ~0.3 s where one by one took ~1.6 s (review rev29 D4:
    loading took most of a 5 s limit)."""
    times = [op.get("time") for op in ops]
    columns = [plain_numbers(times, MAX_SECONDS)]
    for key in ("memory", "temporary", "output"):
        columns.append(plain_numbers([op.get(key, 0) for op in ops], MAX_BYTES))
    if any(c is None for c in columns):
        return None
    colocate = [op.get("colocate") for op in ops]
    if not {type(g) for g in colocate} <= {str, type(None)} or "" in colocate:
        return None
    t, memory, temporary, output = columns
    assert t is not None and memory is not None and temporary is not None and output is not None
    return np.repeat(t[:, None], nd, axis=1), memory, temporary, output, colocate


def _checked_ops(ops: list[Mapping[str, Any]], nd: int, dev_names: list[str], dev_types: list[str]) -> OpArrays:
    """The ops' arrays read one by one, each field checked by `number` (the first bad one an
    `InputError` naming its path); a time may be a table per device type."""
    n = len(ops)
    time = np.zeros((n, nd))
    memory = np.zeros(n)
    temporary = np.zeros(n)
    output = np.zeros(n)
    colocate: list[str | None] = []
    for k, op in enumerate(ops):
        path = f"graph.ops[{k}]"
        t = need(op, "time", path)
        if isinstance(t, Mapping):
            for ty, v in t.items():  # types the cluster lacks too: a profile must hold numbers
                number(v, f"{path}.time.{ty}", at_most=MAX_SECONDS, unit="s")
            for d in range(nd):
                if dev_types[d] not in t:
                    raise InputError(f"{path}.time", f"no time for device type {dev_types[d]!r} (device {dev_names[d]!r})", "add an entry for every device type in the cluster")
                time[k, d] = number(t[dev_types[d]], f"{path}.time.{dev_types[d]}", at_most=MAX_SECONDS, unit="s")
        else:
            time[k, :] = number(t, f"{path}.time", at_most=MAX_SECONDS, unit="s")
        memory[k] = number(op.get("memory", 0), f"{path}.memory", at_most=MAX_BYTES, unit="bytes")
        temporary[k] = number(op.get("temporary", 0), f"{path}.temporary", at_most=MAX_BYTES, unit="bytes")
        output[k] = number(op.get("output", 0), f"{path}.output", at_most=MAX_BYTES, unit="bytes")
        g = op.get("colocate")
        if g is not None and not isinstance(g, str):
            raise InputError(f"{path}.colocate", f"expected a group name (string), got {g!r}")
        if g == "":
            raise InputError(f"{path}.colocate", "an empty group name", "name the group, or give null for an op without one")
        colocate.append(g)
    return time, memory, temporary, output, colocate


def _plain_edges(edges: list[Any], oix: Mapping[str, int]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(src, dst, bytes) read at once when every edge is an object naming two different
    known ops with plain bytes in range; None otherwise (`_checked_edges` names the first
    bad field)."""
    if not {type(e) for e in edges} <= {dict}:
        return None
    ends = []
    for key in ("src", "dst"):
        names = [e.get(key) for e in edges]
        if not {type(v) for v in names} <= {str}:
            return None
        index = [oix.get(v, -1) for v in names]
        ends.append(np.array(index, dtype=np.int64))
    src, dst = ends
    nbytes = plain_numbers([e.get("bytes", 0) for e in edges], MAX_BYTES)
    if nbytes is None or (src < 0).any() or (dst < 0).any() or (src == dst).any():
        return None
    return src, dst, nbytes


def _checked_edges(edges: list[Any], oix: Mapping[str, int], op_names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The edges' arrays read one by one (the first bad field an `InputError` naming its path)."""
    src = np.zeros(len(edges), dtype=np.int64)
    dst = np.zeros(len(edges), dtype=np.int64)
    nbytes = np.zeros(len(edges))
    for k, e in enumerate(edges):
        path = f"graph.edges[{k}]"
        for key, arr in (("src", src), ("dst", dst)):
            v = need(e, key, path)
            if not isinstance(v, str):
                raise InputError(f"{path}.{key}", f"expected an op name (string), got {v!r}", "name an op listed in graph.ops")
            if v not in oix:
                raise InputError(f"{path}.{key}", f"unknown op {v!r}", "name an op listed in graph.ops")
            arr[k] = oix[v]
        if src[k] == dst[k]:
            raise InputError(path, f"self-loop on op {op_names[src[k]]!r}", "remove the edge")
        nbytes[k] = number(e.get("bytes", 0), f"{path}.bytes", at_most=MAX_BYTES, unit="bytes")
    return src, dst, nbytes


def _kind_of(value: Any) -> str:
    """What a JSON value is, in words (for the errors of fields of another type)."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return f"text {value!r}"
    return repr(value)


def _text(value: Any, path: str, what: str) -> str:
    if not isinstance(value, str):
        raise InputError(path, f"expected {what} (string), got {value!r}")
    return value


def byte_text(nbytes: float) -> str:
    """A byte count for a message: whole bytes as integers, fractions (instances may give
    them) to 6 significant digits, so that a shortfall of half a byte is not "0 bytes"."""
    return f"{nbytes:.0f}" if float(nbytes).is_integer() or abs(nbytes) >= 1e6 else f"{nbytes:.6g}"


def _check_fits(inst: PlacementInstance) -> None:
    """InfeasibleError (exit 3) where memory alone proves that no plan exists: an op (with
    everything it holds while it runs) or a colocation group larger than the largest device.
    (The devices' total, `check_total_memory`, is checked by the formulations that make
    plans, not here: instances short of total memory are well-formed documents, and the
    tests of the heuristics' own shortfall messages build them.)"""
    need_ = inst.memory_need()
    biggest = int(np.argmax(inst.device_memory))
    cap = inst.device_memory[biggest]
    accepted = float(inst.accepted_memory()[biggest])  # the evaluator accepts up to this
    over = np.flatnonzero(need_ > accepted)
    if over.size:
        k = int(over[0])
        raise InfeasibleError(
            f"graph.ops[{k}].memory: op {inst.op_names[k]!r} needs {byte_text(need_[k])} bytes but the largest device "
            f"{inst.device_names[biggest]!r} has {byte_text(cap)} (short by {byte_text(need_[k] - cap)} bytes): no plan exists "
            "(give the cluster a larger device or split the op)",
            {"op": inst.op_names[k], "device": inst.device_names[biggest], "short_bytes": int(need_[k] - cap)},
        )
    groups = inst.colocation_groups()
    gmem = np.bincount(groups, weights=inst.memory)
    bad = np.flatnonzero(gmem > accepted + TOL)
    if bad.size:
        g = int(bad[0])
        members = np.flatnonzero(groups == g)
        raise InfeasibleError(
            f"graph.ops[{int(members[0])}].colocate: colocation group {inst.colocate[int(members[0])]!r} holds {byte_text(gmem[g])} "
            f"bytes but the largest device {inst.device_names[biggest]!r} has {byte_text(cap)} (short by {byte_text(gmem[g] - cap)} bytes): "
            "no plan exists (split the group or use larger devices)",
            {"group": inst.colocate[int(members[0])], "device": inst.device_names[biggest], "short_bytes": int(gmem[g] - cap)},
        )


def check_total_memory(inst: PlacementInstance) -> None:
    """InfeasibleError (exit 3) when the bytes every plan holds at its end exceed all
    devices' memory together.

    Simple model: a device holds the ``memory`` of all its ops, so the devices hold the sum
    of all ops' memory between them. Liveness model (`placement_evaluate.memory_peaks`):
    memory is freed as ops finish, so the sum of every op's need proves nothing; but
    persistent ``memory`` is never freed, nor the ``output`` of an op without consumers,
    so at the end the devices hold those between them, and a device's peak is at least
    what it holds at the end. Either sum above the total capacity (by more than the
    evaluator's tolerance and rounding) is a proof that no plan exists."""
    what = "the ops' memory"
    if inst.memory_model == "liveness":
        what = "the ops' persistent memory and the outputs of ops without consumers (held to the end under the liveness model)"
    total = math.fsum(inst.held_to_end().tolist())
    cap = math.fsum(inst.device_memory.tolist())
    # (the devices accept math.fsum(inst.accepted_memory()) together; 1e-9 is looser)
    if total > cap * (1 + 1e-9) + TOL:
        short = total - cap
        raise InfeasibleError(
            f"graph.ops: {what} total {byte_text(total)} bytes but the {inst.n_devices} devices hold {byte_text(cap)} together "
            f"(short by {int(math.ceil(short))} bytes): no plan exists (add devices or memory, or reduce the ops' memory)",
            {"total_bytes": total, "capacity_bytes": cap, "short_bytes": int(math.ceil(short))},
        )


def _serialize(inst: PlacementInstance) -> dict[str, Any]:
    types = inst.device_types
    ops = []
    for k, nm in enumerate(inst.op_names):
        row = inst.time[k]
        if np.all(row == row[0]):
            t: Any = float(row[0])
        else:
            t = {}
            for d, ty in enumerate(types):
                t[ty] = float(row[d])
        op: dict[str, Any] = {"name": nm, "time": t, "memory": float(inst.memory[k])}
        if inst.temporary[k]:
            op["temporary"] = float(inst.temporary[k])
        if inst.output[k]:
            op["output"] = float(inst.output[k])
        if inst.colocate[k] is not None:
            op["colocate"] = inst.colocate[k]
        ops.append(op)
    edges = [
        {"src": inst.op_names[a], "dst": inst.op_names[b], "bytes": float(x)}
        for a, b, x in zip(inst.src.tolist(), inst.dst.tolist(), inst.edge_bytes.tolist())
    ]
    nd = inst.n_devices
    off = ~np.eye(nd, dtype=bool)
    bw0 = float(np.median(inst.bandwidth[off])) if nd > 1 else float(inst.bandwidth[0, 0])
    lat0 = float(np.median(inst.latency[off])) if nd > 1 else float(inst.latency[0, 0])
    links = []
    for a in range(nd):
        for b in range(nd):
            if a != b and (inst.bandwidth[a, b] != bw0 or inst.latency[a, b] != lat0):
                links.append({"src": inst.device_names[a], "dst": inst.device_names[b], "bandwidth": float(inst.bandwidth[a, b]), "latency": float(inst.latency[a, b]), "directed": True})
    doc: dict[str, Any] = {
        "format": FORMAT,
        "kind": "placement",
        "name": inst.name,
        "graph": {"ops": ops, "edges": edges},
        "cluster": {
            "devices": [{"name": n, "memory": float(m), "type": t} for n, m, t in zip(inst.device_names, inst.device_memory, types)],
            "bandwidth": bw0,
            "latency": lat0,
            "links": links,
        },
    }
    if inst.memory_model != "simple" or inst.communication != "independent":
        doc["model"] = {"memory": inst.memory_model, "communication": inst.communication}
    if inst.meta:
        doc["meta"] = inst.meta
    return doc
