"""Compression selection (TAG): reading the ``distplan/1`` document of kind ``compression``.

`parse_fields` validates a document (every error an `InputError` naming its path) and
returns the keyword arguments of `distplan.models.compression_instance.CompressionInstance`; the
instance builds its derived arrays from them. Units: seconds, bytes, bytes/second.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from distplan.errors import InputError
from distplan.models.catalogue import device as catalogue_device
from distplan.models.common import MAX_BYTES, MAX_SECONDS, MIN_RATE, name_list, need, number
from distplan.models.compression_records import (
    BUILTIN_METHODS,
    CODEC_METHODS,
    DTYPE_BYTES,
    ROLES,
    Codec,
    Device,
    Edge,
    Gradient,
    Op,
)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str) or not value:
        raise InputError(path, f"expected a non-empty string, got {value!r}")
    return value


#: the largest compressed/original ratio a codec may declare (an expanding codec is
#: allowed; beyond this its compressed sizes overflow)
MAX_RATIO = 1e6


def _rate(value: Any, path: str) -> float:
    """A bandwidth or a codec's rate: a finite number of bytes/second, at least `MIN_RATE`."""
    return number(value, path, at_least=MIN_RATE, unit="bytes/s")


def _name(value: Any, path: str, known: Any, what: str, fix: str) -> str:
    """A name that must be one of ``known`` (a string first: a list there is not a name)."""
    if not isinstance(value, str) or value not in known:
        raise InputError(path, f"unknown {what} {value!r}", fix)
    return value


def _rate_table(value: Any, path: str, types: set[str], what: str) -> dict[str, float]:
    if not isinstance(value, Mapping):
        raise InputError(path, f"expected an object {{device type: {what}}}")
    out = {str(k): _rate(v, f"{path}.{k}") for k, v in value.items()}
    missing = sorted(types - set(out))
    if missing:
        raise InputError(f"{path}.{missing[0]}", f"missing for device type {missing[0]!r}", f"give the {what} for every device type of the cluster")
    return out


def parse_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The validated fields of a compression document."""
    name = _str(need(data, "name", ""), "name")
    description = data.get("description", "")
    if not isinstance(description, str):
        raise InputError("description", "expected a string")
    batch_size = int(number(need(data, "batch_size", ""), "batch_size", positive=True, integer=True))

    cluster = need(data, "cluster", "")
    devs = need(cluster, "devices", "cluster")
    dev_names = name_list(devs, "cluster.devices", "devices")
    if not dev_names:
        raise InputError("cluster.devices", "the device list is empty", "list at least one device")
    devices: list[Device] = []
    for k, d in enumerate(devs):
        path = f"cluster.devices[{k}]"
        dtype = _str(need(d, "type", path), f"{path}.type")
        try:
            spec = catalogue_device(dtype)
        except InputError as exc:
            raise InputError(f"{path}.type", exc.problem, exc.fix) from None
        mem = number(d["memory_bytes"], f"{path}.memory_bytes", positive=True, at_most=MAX_BYTES, unit="bytes") if "memory_bytes" in d else float(spec.memory_bytes)
        reserved = number(d.get("reserved_bytes", 0.0), f"{path}.reserved_bytes", at_most=MAX_BYTES, unit="bytes")
        if reserved > mem:  # (review rev31 audit C: reported as a plan that needs the bytes)
            raise InputError(f"{path}.reserved_bytes", f"{reserved:g} bytes reserved, but the device holds {mem:g}", "reserve at most the device's memory_bytes")
        node = _str(d.get("node", dev_names[k]), f"{path}.node")
        devices.append(Device(dev_names[k], dtype, node, mem, reserved))
    types = {d.type for d in devices}
    intra = _rate(need(cluster, "intra_node_bandwidth", "cluster"), "cluster.intra_node_bandwidth")
    inter = _rate(need(cluster, "inter_node_bandwidth", "cluster"), "cluster.inter_node_bandwidth")
    raw_links = cluster.get("links", []) or []
    if not isinstance(raw_links, list):
        raise InputError("cluster.links", f"expected a list of {{a, b, bandwidth}}, got {raw_links!r}")
    links: list[tuple[str, str, float]] = []
    for k, link in enumerate(raw_links):
        path = f"cluster.links[{k}]"
        a, b = _str(need(link, "a", path), f"{path}.a"), _str(need(link, "b", path), f"{path}.b")
        for key, nm in (("a", a), ("b", b)):
            if nm not in dev_names:
                raise InputError(f"{path}.{key}", f"unknown device {nm!r}", "name a device of cluster.devices")
        if a == b:
            raise InputError(path, "a link joins two different devices")
        links.append((a, b, _rate(need(link, "bandwidth", path), f"{path}.bandwidth")))

    graph = need(data, "graph", "")
    raw_ops = need(graph, "ops", "graph")
    op_names = name_list(raw_ops, "graph.ops", "ops")
    if not op_names:  # (review rev31 audit C: bounds and every formulation failed with an IndexError)
        raise InputError("graph.ops", "the op list is empty", "list at least one op")
    op_pos = {nm: i for i, nm in enumerate(op_names)}
    dev_set = set(dev_names)
    ops: list[Op] = []
    for i, o in enumerate(raw_ops):
        path = f"graph.ops[{i}]"
        odevs = o.get("devices", dev_names)
        if not isinstance(odevs, list) or not odevs:
            raise InputError(f"{path}.devices", "expected a non-empty list of device names")
        for k, dn in enumerate(odevs):
            _name(dn, f"{path}.devices[{k}]", dev_set, "device", "name a device of cluster.devices")
        if len(set(odevs)) != len(odevs):
            raise InputError(f"{path}.devices", "a device is listed twice")
        op_types = {devices[dev_names.index(dn)].type for dn in odevs}
        raw_cs = need(o, "compute_seconds", path)
        if not isinstance(raw_cs, Mapping):
            raise InputError(f"{path}.compute_seconds", "expected an object {device type: seconds}")
        cs = {str(k): number(v, f"{path}.compute_seconds.{k}", at_most=MAX_SECONDS, unit="s") for k, v in raw_cs.items()}
        missing = sorted(op_types - set(cs))
        if missing:
            raise InputError(f"{path}.compute_seconds.{missing[0]}", f"missing for device type {missing[0]!r} of a replica", "give the seconds for every device type the op runs on")
        role = _name(o.get("role", "backward"), f"{path}.role", ROLES, "role", f"use one of: {', '.join(ROLES)}")
        eligible = o.get("eligible", False)
        if not isinstance(eligible, bool):
            raise InputError(f"{path}.eligible", f"expected true or false, got {eligible!r}")
        if eligible and role == "update":
            raise InputError(f"{path}.eligible", "an update op cannot be duplicated", "set eligible to false")
        if eligible and len(odevs) < 2:
            raise InputError(f"{path}.eligible", "an op with one replica cannot be duplicated (TAG: replication < 2)", "set eligible to false")
        mem = number(o.get("memory_bytes", 0.0), f"{path}.memory_bytes", at_most=MAX_BYTES, unit="bytes")
        ops.append(Op(op_names[i], cs, tuple(odevs), mem, eligible, role))

    edges: list[Edge] = []
    raw_edges = need(graph, "edges", "graph")
    if not isinstance(raw_edges, list):
        raise InputError("graph.edges", "expected a list of {src, dst, bytes}")
    pairs: set[tuple[str, str]] = set()
    for k, e in enumerate(raw_edges):
        path = f"graph.edges[{k}]"
        src, dst = (_name(need(e, key, path), f"{path}.{key}", op_pos, "op", "name an op listed in graph.ops") for key in ("src", "dst"))
        if op_pos[src] >= op_pos[dst]:
            raise InputError(path, f"{src!r} -> {dst!r} goes backwards in graph.ops", "list ops in execution (topological) order")
        if ops[op_pos[dst]].eligible and set(ops[op_pos[src]].devices) != set(ops[op_pos[dst]].devices):
            raise InputError(path, f"eligible op {dst!r} takes input from {src!r} on other devices", "eligible ops and their inputs share one replica group")
        pairs.add((src, dst))
        edges.append(Edge(src, dst, number(need(e, "bytes", path), f"{path}.bytes", at_most=MAX_BYTES, unit="bytes")))

    raw_grads = need(graph, "gradients", "graph")
    grad_names = name_list(raw_grads, "graph.gradients", "gradients")
    gradients: list[Gradient] = []
    update_used: dict[str, int] = {}
    producer_used: dict[str, int] = {}
    for k, g in enumerate(raw_grads):
        path = f"graph.gradients[{k}]"
        op = _str(need(g, "op", path), f"{path}.op")
        upd = _str(need(g, "update", path), f"{path}.update")
        for key, nm in (("op", op), ("update", upd)):
            if nm not in op_pos:
                raise InputError(f"{path}.{key}", f"unknown op {nm!r}", "name an op listed in graph.ops")
        if ops[op_pos[upd]].role != "update":
            raise InputError(f"{path}.update", f"op {upd!r} does not have role 'update'", "give the update op \"role\": \"update\"")
        if ops[op_pos[op]].role == "update":
            raise InputError(f"{path}.op", f"the producer {op!r} is an update op", "name the op that computes the gradient")
        if upd in update_used:
            raise InputError(f"{path}.update", f"update op {upd!r} also applies graph.gradients[{update_used[upd]}]", "give every gradient its own update op")
        if op in producer_used:
            raise InputError(f"{path}.op", f"op {op!r} also produces graph.gradients[{producer_used[op]}]", "one op produces one gradient")
        update_used[upd] = k
        producer_used[op] = k
        if set(ops[op_pos[upd]].devices) != set(ops[op_pos[op]].devices):
            raise InputError(f"{path}.update", f"update op {upd!r} runs on other devices than producer {op!r}", "use the producer's replica devices")
        if (op, upd) not in pairs:
            raise InputError(f"{path}", f"no edge {op!r} -> {upd!r}", "add the gradient edge to graph.edges")
        dtype = _name(g.get("dtype", "float32"), f"{path}.dtype", DTYPE_BYTES, "dtype", f"use one of: {', '.join(DTYPE_BYTES)}")
        density = number(g.get("density", 1.0), f"{path}.density", positive=True)
        if density > 1.0:
            raise InputError(f"{path}.density", f"{density} > 1", "give the fraction of nonzero rows, in (0, 1]")
        shape = g.get("shape")
        if shape is not None:
            if not isinstance(shape, list) or len(shape) != 2:
                raise InputError(f"{path}.shape", "expected [rows, cols]")
            shape = (int(number(shape[0], f"{path}.shape[0]", positive=True, integer=True, at_most=MAX_BYTES, unit="rows")), int(number(shape[1], f"{path}.shape[1]", positive=True, integer=True, at_most=MAX_BYTES, unit="columns")))
        frows = g.get("factor_rows")
        if frows is not None:
            frows = int(number(frows, f"{path}.factor_rows", positive=True, integer=True, at_most=MAX_BYTES, unit="rows"))
        gradients.append(Gradient(grad_names[k], op, upd, number(need(g, "bytes", path), f"{path}.bytes", positive=True, at_most=MAX_BYTES, unit="bytes"), dtype, density, shape, frows))

    # eligible ops form in-trees ending at a gradient producer
    consumers: list[list[str]] = [[] for _ in ops]
    for e in edges:
        consumers[op_pos[e.src]].append(e.dst)
    grad_of_update = {g.update: g for g in gradients}
    for i, o in enumerate(ops):
        if not o.eligible:
            continue
        path = f"graph.ops[{i}]"
        if len(consumers[i]) != 1:
            raise InputError(path, f"eligible op {o.name!r} has {len(consumers[i])} consumers", "an eligible op feeds exactly one op (an eligible op or its gradient's update)")
        c = consumers[i][0]
        if not ops[op_pos[c]].eligible:
            g = grad_of_update.get(c)
            if g is None or g.op != o.name:
                raise InputError(path, f"eligible op {o.name!r} feeds {c!r}, which is neither eligible nor the update of a gradient it produces", "mark the consumer eligible or the op ineligible")

    codecs: list[Codec] = []
    raw_codecs = data.get("codecs", [])
    codec_names = name_list(raw_codecs, "codecs", "codecs")
    for k, c in enumerate(raw_codecs):
        path = f"codecs[{k}]"
        nm = codec_names[k]
        if nm in BUILTIN_METHODS:
            raise InputError(f"{path}.name", f"{nm!r} is a built-in method name", "rename the codec")
        lossless = c.get("lossless")
        if lossless is not True:
            raise InputError(f"{path}.lossless", f"codec {nm!r} is not declared lossless ({lossless!r}); only exact synchronization is allowed", "remove the codec or use a lossless one")
        method = _name(c.get("method"), f"{path}.method", CODEC_METHODS, "method", f"use one of: {', '.join(CODEC_METHODS)}")
        raw_ratio = c.get("ratio", {})
        if not isinstance(raw_ratio, Mapping):
            raise InputError(f"{path}.ratio", "expected an object {profile: compressed/original}")
        ratio = {str(p): number(v, f"{path}.ratio.{p}", positive=True, at_most=MAX_RATIO) for p, v in raw_ratio.items()}
        level = c.get("level")
        if level is not None:
            level = int(number(level, f"{path}.level", nonneg=False, integer=True))
        measured = c.get("measured")
        if measured is not None and not isinstance(measured, Mapping):
            raise InputError(f"{path}.measured", "expected an object")
        codecs.append(
            Codec(
                nm,
                method,
                str(c.get("library", "")),
                level,
                ratio,
                _rate_table(need(c, "encode_bytes_per_second", path), f"{path}.encode_bytes_per_second", types, "bytes/second"),
                _rate_table(need(c, "decode_bytes_per_second", path), f"{path}.decode_bytes_per_second", types, "bytes/second"),
                dict(measured) if measured is not None else None,
            )
        )
    return {
        "name": name, "description": description, "batch_size": batch_size, "devices": devices, "ops": ops, "edges": edges,
        "gradients": gradients, "codecs": codecs, "intra_node_bandwidth": intra, "inter_node_bandwidth": inter, "links": links,
    }
