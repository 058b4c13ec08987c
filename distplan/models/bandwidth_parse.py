"""LIBRA bandwidth provisioning: reading the ``distplan/1`` document of kind ``bandwidth``.

`parse_fields` validates a document (every error an `InputError` naming its path) and
returns the fields of a `distplan.models.bandwidth_instance.BandwidthInstance`. Units:
bytes/s, USD per byte/s, seconds, bytes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from distplan.errors import InputError
from distplan.models.bandwidth_records import (
    BLOCKS,
    COLLECTIVE_TYPES,
    PHASES,
    SENSES,
    TRAINING_LOOPS,
    Collective,
    Dimension,
    Layer,
    LinearConstraint,
)
from distplan.models.common import (
    FORMAT,
    MAX_BYTES,
    MAX_PRICE,
    MAX_RATE,
    MAX_SECONDS,
    MIN_RATE,
    name_list,
    need,
    number,
    plain_numbers,
)


def _opt_number(data: Mapping[str, Any], key: str, path: str, default: float, **kw: Any) -> float:
    if key not in data or data[key] is None:
        return default
    return number(data[key], f"{path}.{key}", **kw)


def _parse_dimension(item: Any, path: str) -> Dimension:
    size = int(number(need(item, "size", path), f"{path}.size", positive=True, integer=True))
    if size < 2:
        raise InputError(f"{path}.size", f"a dimension needs at least 2 NPUs, got {size}", "drop the dimension or give size >= 2")
    block = need(item, "block", path)
    if block not in BLOCKS:
        raise InputError(f"{path}.block", f"unknown building block {block!r}", f"use one of: {', '.join(BLOCKS)}")
    price_link = number(need(item, "price_link", path), f"{path}.price_link", at_most=MAX_PRICE, unit="USD per byte/s")
    price_switch = _opt_number(item, "price_switch", path, 0.0, at_most=MAX_PRICE, unit="USD per byte/s")
    price_nic = _opt_number(item, "price_nic", path, 0.0, at_most=MAX_PRICE, unit="USD per byte/s")
    if block != "switch" and (price_switch or price_nic):
        raise InputError(
            f"{path}.price_switch" if price_switch else f"{path}.price_nic",
            "switch and NIC prices apply to switch dimensions only (LIBRA cost model)",
            "remove them or make the block a switch",
        )
    # bandwidths (bytes/s) within [MIN_RATE, MAX_RATE]: at 1e-300 B/s the programs' times
    # overflowed (a numerical error, a false "infeasible"); at 1e300 the step menus did
    lo = _opt_number(item, "min_bandwidth", path, 0.0, at_most=MAX_RATE, unit="bytes/s")
    hi = _opt_number(item, "max_bandwidth", path, math.inf, at_least=MIN_RATE, at_most=MAX_RATE, unit="bytes/s")
    if hi < lo:
        raise InputError(f"{path}.max_bandwidth", f"{hi:g} bytes/s is below min_bandwidth {lo:g} bytes/s", "raise max_bandwidth or lower min_bandwidth")
    options = None
    if item.get("bandwidth_options") is not None:
        raw = item["bandwidth_options"]
        if not isinstance(raw, list) or not raw:
            raise InputError(f"{path}.bandwidth_options", "expected a non-empty list of bandwidths (bytes/s)")
        vals = [number(v, f"{path}.bandwidth_options[{k}]", at_least=MIN_RATE, at_most=MAX_RATE, unit="bytes/s") for k, v in enumerate(raw)]
        if any(b <= a for a, b in zip(vals, vals[1:], strict=False)):
            raise InputError(f"{path}.bandwidth_options", "options must be strictly increasing", "sort them and drop duplicates")
        inside = [v for v in vals if lo * (1 - 1e-12) <= v <= hi * (1 + 1e-12)]
        if not inside:
            raise InputError(f"{path}.bandwidth_options", f"no option lies within [{lo:g}, {hi:g}] bytes/s", "add an option inside the bounds")
        options = tuple(vals)
    cost_class = item.get("cost_class")
    if cost_class is not None and not isinstance(cost_class, str):
        raise InputError(f"{path}.cost_class", f"expected a string, got {cost_class!r}")
    return Dimension(
        name=item["name"], size=size, block=block, price_link=price_link, price_switch=price_switch, price_nic=price_nic,
        min_bandwidth=lo, max_bandwidth=hi, bandwidth_options=options, cost_class=cost_class,
    )


def _parse_collective(item: Any, path: str, dims: tuple[Dimension, ...]) -> Collective:
    phase = need(item, "phase", path)
    if phase not in PHASES:
        raise InputError(f"{path}.phase", f"unknown phase {phase!r}", f"use one of: {', '.join(PHASES)}")
    ctype = need(item, "type", path)
    if ctype not in COLLECTIVE_TYPES:
        raise InputError(f"{path}.type", f"unknown collective {ctype!r}", f"use one of: {', '.join(COLLECTIVE_TYPES)}")
    size = number(need(item, "bytes", path), f"{path}.bytes", at_most=MAX_BYTES, unit="bytes")
    npus = need(item, "npus", path)
    if not isinstance(npus, list) or len(npus) != len(dims):
        raise InputError(
            f"{path}.npus",
            f"expected one NPU count per network dimension ({len(dims)}), got {npus!r}",
            "give n_d for every dimension, 1 where the dimension does not take part",
        )
    counts: list[int] = []
    for k, (n, dim) in enumerate(zip(npus, dims, strict=True)):
        v = int(number(n, f"{path}.npus[{k}]", positive=True, integer=True))
        if v > dim.size or dim.size % v:
            raise InputError(
                f"{path}.npus[{k}]",
                f"{v} NPUs along dimension {dim.name!r} of size {dim.size}: the group must divide the dimension",
                f"use a divisor of {dim.size} (1 = dimension not involved)",
            )
        counts.append(v)
    return Collective(phase=phase, type=ctype, bytes=size, npus=tuple(counts))


def _parse_layer(item: Any, path: str, dims: tuple[Dimension, ...]) -> Layer:
    comp = need(item, "compute", path)
    if not isinstance(comp, Mapping):
        raise InputError(f"{path}.compute", "expected an object {fwd, ig, wg} of seconds")
    unknown = set(comp) - set(PHASES)
    if unknown:
        raise InputError(f"{path}.compute.{sorted(unknown)[0]}", "unknown phase", f"use: {', '.join(PHASES)}")
    compute = tuple(number(comp.get(p, 0.0), f"{path}.compute.{p}", at_most=MAX_SECONDS, unit="s") for p in PHASES)
    colls = item.get("collectives", [])
    if not isinstance(colls, list):
        raise InputError(f"{path}.collectives", "expected a list of collectives")
    collectives = tuple(_parse_collective(c, f"{path}.collectives[{k}]", dims) for k, c in enumerate(colls))
    return Layer(name=item["name"], compute=(compute[0], compute[1], compute[2]), collectives=collectives)


def _plain_layers(items: list[Any], dims: tuple[Dimension, ...]) -> tuple[Layer, ...] | None:
    """The layers of a workload whose fields are all plain, read column by column without
    a path per number: every layer an object whose ``compute`` is an object of known
    phases and ``collectives`` a list of objects; their times plain ints or floats (not
    bools) in [0, `MAX_SECONDS`] and bytes in [0, `MAX_BYTES`], checked at once
    (`plain_numbers`); known phases and types; NPU counts plain ints, each distinct list
    checked once against the dimensions (they divide them). The same layers as
    `_parse_layer` gives (its floats and ints; equal collectives are one object, as they
    are frozen values), or None when anything is not plain: the caller then reads layer
    by layer, which names the first bad field (a 360,000-layer workload with 220,000
    collectives, the collector paused: 3.6 s that way, 2.0 s this way)."""
    comps = [item.get("compute") for item in items]
    colls = [item.get("collectives", []) for item in items]
    if not ({type(c) for c in comps} <= {dict} and {type(c) for c in colls} <= {list}):
        return None
    known_phases = frozenset(PHASES)
    if not all(c.keys() <= known_phases for c in comps):
        return None
    times = plain_numbers([t for c in comps for t in (c.get("fwd", 0.0), c.get("ig", 0.0), c.get("wg", 0.0))], MAX_SECONDS)
    every = [c for row in colls for c in row]
    if times is None or not {type(c) for c in every} <= {dict}:
        return None
    npus = [c.get("npus") for c in every]
    if not ({type(n) for n in npus} <= {list} and {type(k) for n in npus for k in n} <= {int}):
        return None
    phases = [c.get("phase") for c in every]
    kinds = [c.get("type") for c in every]
    sizes = plain_numbers([c.get("bytes") for c in every], MAX_BYTES)
    try:
        if sizes is None or not (set(phases) <= known_phases and set(kinds) <= set(COLLECTIVE_TYPES)):
            return None
    except TypeError:  # (a phase or type that is a list or an object)
        return None
    dim_sizes = tuple(d.size for d in dims)
    groups = [tuple(n) for n in npus]  # (plain ints only: equal tuples are equal counts)
    if not all(len(g) == len(dim_sizes) and all(0 < k <= d and not d % k for k, d in zip(g, dim_sizes, strict=True)) for g in set(groups)):
        return None
    made: dict[tuple[str, str, float, tuple[int, ...]], Collective] = {}
    collectives = [made.setdefault(key, Collective(*key)) if key not in made else made[key] for key in zip(phases, kinds, sizes.tolist(), groups, strict=True)]
    t = times.tolist()
    rows: list[tuple[Collective, ...]] = []
    start = 0
    for row in colls:
        rows.append(tuple(collectives[start : start + len(row)]))
        start += len(row)
    return tuple(Layer(item["name"], (t[3 * k], t[3 * k + 1], t[3 * k + 2]), cs) for k, (item, cs) in enumerate(zip(items, rows, strict=True)))


def _parse_constraints(data: Any, dims: tuple[Dimension, ...]) -> tuple[tuple[str, float] | None, float | None, tuple[LinearConstraint, ...]]:
    if data is None:
        return None, None, ()
    if not isinstance(data, Mapping):
        raise InputError("constraints", "expected an object with total_bandwidth / cost_budget / linear")
    unknown = set(data) - {"total_bandwidth", "cost_budget", "linear"}
    if unknown:
        raise InputError(f"constraints.{sorted(unknown)[0]}", "unknown constraint", "use total_bandwidth, cost_budget or linear")
    total = None
    if data.get("total_bandwidth") is not None:
        tb = data["total_bandwidth"]
        sense = need(tb, "sense", "constraints.total_bandwidth")
        if sense not in SENSES:
            raise InputError("constraints.total_bandwidth.sense", f"unknown sense {sense!r}", "use <=, >= or ==")
        total = (sense, number(need(tb, "value", "constraints.total_bandwidth"), "constraints.total_bandwidth.value", at_least=MIN_RATE, at_most=MAX_RATE, unit="bytes/s"))
    budget = None
    if data.get("cost_budget") is not None:
        budget = number(data["cost_budget"], "constraints.cost_budget", positive=True)
    names = {d.name for d in dims}
    rows: list[LinearConstraint] = []
    items = data.get("linear", [])
    name_list(items, "constraints.linear", "linear constraints")
    for k, item in enumerate(items):
        path = f"constraints.linear[{k}]"
        coeffs = need(item, "coeffs", path)
        if not isinstance(coeffs, Mapping) or not coeffs:
            raise InputError(f"{path}.coeffs", "expected a non-empty object {dimension name: coefficient}")
        pairs = []
        for dname, c in coeffs.items():
            if dname not in names:
                raise InputError(f"{path}.coeffs.{dname}", f"unknown dimension {dname!r}", f"use one of: {', '.join(d.name for d in dims)}")
            pairs.append((dname, number(c, f"{path}.coeffs.{dname}", nonneg=False)))
        if all(c == 0 for _, c in pairs):
            raise InputError(f"{path}.coeffs", "all coefficients are zero", "give at least one nonzero coefficient")
        sense = need(item, "sense", path)
        if sense not in SENSES:
            raise InputError(f"{path}.sense", f"unknown sense {sense!r}", "use <=, >= or ==")
        rhs = number(need(item, "rhs", path), f"{path}.rhs", nonneg=False)
        rows.append(LinearConstraint(name=item["name"], coeffs=tuple(pairs), sense=sense, rhs=rhs))
    return total, budget, tuple(rows)


def _npu_count(value: Any, path: str, product: int, mismatch: str, fix: str) -> int | None:
    """An optional NPU count (``path``), which must equal the product of the dimension sizes."""
    if value is None:
        return None
    count = int(number(value, path, positive=True, integer=True))
    if count != product:
        raise InputError(path, f"{count} {mismatch}", fix)
    return count


def parse_fields(data: Mapping[str, Any]) -> dict[str, Any]:
    """The validated fields of a bandwidth document."""
    if data.get("format") != FORMAT:
        raise InputError("format", f"expected {FORMAT!r}, got {data.get('format')!r}", f'add "format": "{FORMAT}"')
    if data.get("kind") != "bandwidth":
        raise InputError("kind", f"expected 'bandwidth', got {data.get('kind')!r}")
    name = need(data, "name", "")
    if not isinstance(name, str) or not name:
        raise InputError("name", "expected a non-empty string")
    net = need(data, "network", "")
    items = need(net, "dimensions", "network")
    name_list(items, "network.dimensions", "dimensions")
    if not items:
        raise InputError("network.dimensions", "no dimensions", "give at least one dimension")
    dims = tuple(_parse_dimension(item, f"network.dimensions[{k}]") for k, item in enumerate(items))
    product = math.prod(d.size for d in dims)
    total_npus = _npu_count(net.get("total_npus"), "network.total_npus", product,
                            f"NPUs declared but the dimension sizes multiply to {' x '.join(str(d.size) for d in dims)} = {product}",
                            "make the sizes multiply to the NPU count")
    work = need(data, "workload", "")
    loop = work.get("training_loop", "no_overlap")
    if loop not in TRAINING_LOOPS:
        raise InputError("workload.training_loop", f"unsupported training loop {loop!r}", f"use one of: {', '.join(TRAINING_LOOPS)}")
    workload_npus = _npu_count(work.get("npus"), "workload.npus", product, f"NPUs in the workload, but the network has {product}",
                               "use a network whose dimension sizes multiply to the workload's NPU count")
    layer_items = need(work, "layers", "workload")
    name_list(layer_items, "workload.layers", "layers")
    plain = _plain_layers(layer_items, dims)
    layers = plain if plain is not None else tuple(_parse_layer(item, f"workload.layers[{k}]", dims) for k, item in enumerate(layer_items))
    total, budget, linear = _parse_constraints(data.get("constraints"), dims)
    meta = data.get("metadata", {})
    if not isinstance(meta, Mapping):
        raise InputError("metadata", "expected an object")
    wname = work.get("name", "")
    return {
        "name": name, "dimensions": dims, "layers": layers, "training_loop": loop, "total_bandwidth": total, "cost_budget": budget,
        "linear": linear, "description": str(data.get("description", "")), "workload_name": str(wname), "total_npus": total_npus,
        "workload_npus": workload_npus, "metadata": dict(meta),
    }
