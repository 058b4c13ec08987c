"""Per-dimension bandwidth provisioning of a multi-dimensional training network (LIBRA).

The domain of Won et al., "LIBRA: Enabling Workload-aware Multi-dimensional Network
Topology Optimization for Distributed Training of Large AI Models" (ISPASS 2024,
arXiv 2109.11762; code github.com/astra-sim/libra): a network of D dimensions (ring,
fully-connected or switch building blocks of n_d NPUs each), a training workload (per
layer: forward / input-gradient / weight-gradient compute times and collectives), and
constraints on the per-NPU bandwidth B_d of every dimension. A plan gives B_d.

Units at this interface: seconds, bytes and bytes/s; prices in USD per byte/s of
bandwidth; cost in USD. LIBRA itself works in ns and GB/s (1 GB/s = 1e9 bytes/s = 1
byte/ns), so its price of 4 $ per GB/s is 4e-9 USD per byte/s here; `GB` converts.

The evaluator (`evaluate`) recomputes the training time and the network cost of a plan
from the workload, walking LIBRA's chunked collective model layer by layer; it shares no
code with the formulations (which aggregate the same traffic in closed form).

Traffic model (LIBRA ``src/model/model.py``), for a collective of S bytes whose group
spans n_d NPUs along dimension d (n_d = 1: the dimension is not involved):

* all-reduce: m_d = 2 (n_d - 1)/n_d * S_d, then S_{d+1} = S_d / n_d (dimensions in order);
* reduce-scatter: m_d = (n_d - 1)/n_d * S_d, then S_{d+1} = S_d / n_d;
* all-gather: dimensions in reverse order, m_d = (n_d - 1) * S_d, then S_{d-1} = S_d * n_d;
* all-to-all: m_d = (n_d - 1)/n_d * S (no resizing).

Collective time = max_d m_d / B_d (chunks pipeline across dimensions); training time
(``no_overlap`` loop) = sum of all compute times + sum of all collective times.

Cost (LIBRA ``src/cost_model/cost_model.py``): per dimension, (number of building
blocks) x (links per block) x (bandwidth per link) x (price of link [+ NIC + switch for
switch blocks]); ring: N/n blocks of 2n links of B/2, fully-connected: N/n blocks of
n(n-1) links of B/(n-1), switch: prod(n_k, k>d) blocks of prod(n_k, k<=d) links of B.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from distplan.errors import InputError
from distplan.models.common import FORMAT, Check, JsonDocument, KindSpec, name_list, need, number, register_kind

#: bytes/s in one GB/s (LIBRA's bandwidth unit; 1 GB/s = 1 byte/ns)
GB = 1e9
PHASES = ("fwd", "ig", "wg")
COLLECTIVE_TYPES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
BLOCKS = ("ring", "fully_connected", "switch")
SENSES = ("<=", ">=", "==")
TRAINING_LOOPS = ("no_overlap",)
OBJECTIVES = ("time", "time_x_cost")
#: relative tolerance of the evaluator's constraint checks
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Dimension:
    """One network dimension. Bandwidths in bytes/s per NPU; prices in USD per byte/s."""

    name: str
    size: int
    block: str
    price_link: float
    price_switch: float = 0.0
    price_nic: float = 0.0
    min_bandwidth: float = 0.0
    max_bandwidth: float = math.inf
    #: allowed bandwidths (bytes/s) when the dimension must use one of a menu of link speeds
    bandwidth_options: tuple[float, ...] | None = None
    cost_class: str | None = None


@dataclass(frozen=True)
class Collective:
    """A collective of ``bytes`` bytes in one phase; ``npus[d]`` NPUs take part along dimension d."""

    phase: str
    type: str
    bytes: float
    npus: tuple[int, ...]


@dataclass(frozen=True)
class Layer:
    """Compute times in seconds per phase (fwd, ig, wg) and the layer's collectives."""

    name: str
    compute: tuple[float, float, float]
    collectives: tuple[Collective, ...] = ()


@dataclass(frozen=True)
class LinearConstraint:
    """``sum_d coeffs[d] * B_d  sense  rhs`` with B in bytes/s (rhs in bytes/s)."""

    name: str
    coeffs: tuple[tuple[str, float], ...]
    sense: str
    rhs: float


@dataclass
class BandwidthInstance(JsonDocument):
    """A LIBRA bandwidth-provisioning instance (kind ``bandwidth``)."""

    name: str
    dimensions: tuple[Dimension, ...]
    layers: tuple[Layer, ...]
    training_loop: str = "no_overlap"
    #: (sense, bytes/s): sum of all B_d
    total_bandwidth: tuple[str, float] | None = None
    #: USD: network cost must not exceed it
    cost_budget: float | None = None
    linear: tuple[LinearConstraint, ...] = ()
    description: str = ""
    workload_name: str = ""
    total_npus: int | None = None
    workload_npus: int | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    kind: str = "bandwidth"

    @property
    def num_dims(self) -> int:
        return len(self.dimensions)

    @property
    def npus(self) -> int:
        """Number of NPUs: the product of the dimension sizes."""
        return math.prod(d.size for d in self.dimensions)

    def dim_index(self) -> dict[str, int]:
        return {d.name: k for k, d in enumerate(self.dimensions)}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> BandwidthInstance:
        return _parse(data)

    def to_dict(self) -> dict[str, Any]:
        return _serialize(self)

    def summary(self) -> dict[str, Any]:
        dims = ", ".join(f"{d.name}:{d.block}x{d.size}" for d in self.dimensions)
        n_coll = sum(len(layer.collectives) for layer in self.layers)
        cons = []
        if self.total_bandwidth is not None:
            cons.append(f"sum B {self.total_bandwidth[0]} {self.total_bandwidth[1] / GB:g} GB/s")
        if self.cost_budget is not None:
            cons.append(f"cost <= {self.cost_budget:g} USD")
        cons.extend(c.name for c in self.linear)
        return {
            "name": self.name,
            "kind": self.kind,
            "workload": self.workload_name,
            "npus": self.npus,
            "dimensions": dims,
            "layers": len(self.layers),
            "collectives": n_coll,
            "compute_seconds": sum(sum(layer.compute) for layer in self.layers),
            "training_loop": self.training_loop,
            "constraints": "; ".join(cons) or "(bounds only)",
        }


# -- parsing ----------------------------------------------------------------------------------

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
    price_link = number(need(item, "price_link", path), f"{path}.price_link")
    price_switch = _opt_number(item, "price_switch", path, 0.0)
    price_nic = _opt_number(item, "price_nic", path, 0.0)
    if block != "switch" and (price_switch or price_nic):
        raise InputError(
            f"{path}.price_switch" if price_switch else f"{path}.price_nic",
            "switch and NIC prices apply to switch dimensions only (LIBRA cost model)",
            "remove them or make the block a switch",
        )
    lo = _opt_number(item, "min_bandwidth", path, 0.0)
    hi = _opt_number(item, "max_bandwidth", path, math.inf, positive=True)
    if hi < lo:
        raise InputError(f"{path}.max_bandwidth", f"{hi:g} bytes/s is below min_bandwidth {lo:g} bytes/s", "raise max_bandwidth or lower min_bandwidth")
    options = None
    if item.get("bandwidth_options") is not None:
        raw = item["bandwidth_options"]
        if not isinstance(raw, list) or not raw:
            raise InputError(f"{path}.bandwidth_options", "expected a non-empty list of bandwidths (bytes/s)")
        vals = [number(v, f"{path}.bandwidth_options[{k}]", positive=True) for k, v in enumerate(raw)]
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
    size = number(need(item, "bytes", path), f"{path}.bytes")
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
    compute = tuple(number(comp.get(p, 0.0), f"{path}.compute.{p}") for p in PHASES)
    colls = item.get("collectives", [])
    if not isinstance(colls, list):
        raise InputError(f"{path}.collectives", "expected a list of collectives")
    collectives = tuple(_parse_collective(c, f"{path}.collectives[{k}]", dims) for k, c in enumerate(colls))
    return Layer(name=item["name"], compute=(compute[0], compute[1], compute[2]), collectives=collectives)


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
        total = (sense, number(need(tb, "value", "constraints.total_bandwidth"), "constraints.total_bandwidth.value", positive=True))
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


def _parse(data: Mapping[str, Any]) -> BandwidthInstance:
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
    total_npus = None
    if net.get("total_npus") is not None:
        total_npus = int(number(net["total_npus"], "network.total_npus", positive=True, integer=True))
        if total_npus != product:
            raise InputError(
                "network.total_npus",
                f"{total_npus} NPUs declared but the dimension sizes multiply to {' x '.join(str(d.size) for d in dims)} = {product}",
                "make the sizes multiply to the NPU count",
            )
    work = need(data, "workload", "")
    loop = work.get("training_loop", "no_overlap")
    if loop not in TRAINING_LOOPS:
        raise InputError("workload.training_loop", f"unsupported training loop {loop!r}", f"use one of: {', '.join(TRAINING_LOOPS)}")
    workload_npus = None
    if work.get("npus") is not None:
        workload_npus = int(number(work["npus"], "workload.npus", positive=True, integer=True))
        if workload_npus != product:
            raise InputError(
                "workload.npus",
                f"the workload is written for {workload_npus} NPUs but the network has {product}",
                "use a network whose dimension sizes multiply to the workload's NPU count",
            )
    layer_items = need(work, "layers", "workload")
    name_list(layer_items, "workload.layers", "layers")
    layers = tuple(_parse_layer(item, f"workload.layers[{k}]", dims) for k, item in enumerate(layer_items))
    total, budget, linear = _parse_constraints(data.get("constraints"), dims)
    meta = data.get("metadata", {})
    if not isinstance(meta, Mapping):
        raise InputError("metadata", "expected an object")
    wname = work.get("name", "")
    return BandwidthInstance(
        name=name, dimensions=dims, layers=layers, training_loop=loop, total_bandwidth=total, cost_budget=budget,
        linear=linear, description=str(data.get("description", "")), workload_name=str(wname), total_npus=total_npus,
        workload_npus=workload_npus, metadata=dict(meta),
    )


def _serialize(inst: BandwidthInstance) -> dict[str, Any]:
    dims = []
    for d in inst.dimensions:
        item: dict[str, Any] = {"name": d.name, "size": d.size, "block": d.block}
        if d.cost_class is not None:
            item["cost_class"] = d.cost_class
        item["price_link"] = d.price_link
        if d.block == "switch":
            item["price_switch"] = d.price_switch
            item["price_nic"] = d.price_nic
        item["min_bandwidth"] = d.min_bandwidth
        item["max_bandwidth"] = None if math.isinf(d.max_bandwidth) else d.max_bandwidth
        if d.bandwidth_options is not None:
            item["bandwidth_options"] = list(d.bandwidth_options)
        dims.append(item)
    net: dict[str, Any] = {"dimensions": dims}
    if inst.total_npus is not None:
        net["total_npus"] = inst.total_npus
    work: dict[str, Any] = {"name": inst.workload_name, "training_loop": inst.training_loop}
    if inst.workload_npus is not None:
        work["npus"] = inst.workload_npus
    work["layers"] = [
        {
            "name": layer.name,
            "compute": dict(zip(PHASES, layer.compute, strict=True)),
            "collectives": [{"phase": c.phase, "type": c.type, "bytes": c.bytes, "npus": list(c.npus)} for c in layer.collectives],
        }
        for layer in inst.layers
    ]
    cons: dict[str, Any] = {}
    if inst.total_bandwidth is not None:
        cons["total_bandwidth"] = {"sense": inst.total_bandwidth[0], "value": inst.total_bandwidth[1]}
    if inst.cost_budget is not None:
        cons["cost_budget"] = inst.cost_budget
    cons["linear"] = [{"name": c.name, "coeffs": dict(c.coeffs), "sense": c.sense, "rhs": c.rhs} for c in inst.linear]
    out: dict[str, Any] = {"format": FORMAT, "kind": "bandwidth", "name": inst.name}
    if inst.description:
        out["description"] = inst.description
    out["network"] = net
    out["workload"] = work
    out["constraints"] = cons
    if inst.metadata:
        out["metadata"] = inst.metadata
    return out


# -- plans ------------------------------------------------------------------------------------

@dataclass
class BandwidthPlan:
    """Per-NPU bandwidth of every dimension (bytes/s), and the objective it was chosen for:
    ``time`` (training time, s) or ``time_x_cost`` (training time x network cost, s*USD)."""

    bandwidth: dict[str, float]
    objective: str = "time"

    def to_dict(self) -> dict[str, Any]:
        return {"bandwidth": dict(self.bandwidth), "objective": self.objective}


def plan_from_dict(inst: BandwidthInstance, data: Mapping[str, Any]) -> BandwidthPlan:
    bw = need(data, "bandwidth", "")
    if not isinstance(bw, Mapping):
        raise InputError("bandwidth", "expected an object {dimension name: bytes/s}")
    names = [d.name for d in inst.dimensions]
    missing = [n for n in names if n not in bw]
    if missing:
        raise InputError(f"bandwidth.{missing[0]}", "missing", "give a bandwidth (bytes/s) for every dimension")
    extra = [k for k in bw if k not in names]
    if extra:
        raise InputError(f"bandwidth.{extra[0]}", "unknown dimension", f"use: {', '.join(names)}")
    values = {n: number(bw[n], f"bandwidth.{n}") for n in names}
    objective = data.get("objective", "time")
    if objective not in OBJECTIVES:
        raise InputError("objective", f"unknown objective {objective!r}", f"use one of: {', '.join(OBJECTIVES)}")
    return BandwidthPlan(bandwidth=values, objective=objective)


# -- the independent evaluator -----------------------------------------------------------------

def collective_traffic(ctype: str, size: float, npus: tuple[int, ...]) -> list[float]:
    """Bytes each dimension carries for one collective, walking LIBRA's chunk model."""
    traffic = [0.0] * len(npus)
    chunk = float(size)
    if ctype == "all_gather":
        for d in reversed(range(len(npus))):
            n = npus[d]
            if n > 1:
                traffic[d] = chunk * (n - 1)
                chunk *= n
        return traffic
    for d, n in enumerate(npus):
        if n <= 1:
            continue
        if ctype == "all_reduce":
            traffic[d] = 2.0 * chunk / n * (n - 1)
            chunk /= n
        elif ctype == "reduce_scatter":
            traffic[d] = chunk / n * (n - 1)
            chunk /= n
        elif ctype == "all_to_all":
            traffic[d] = chunk / n * (n - 1)
        else:
            raise ValueError(f"unknown collective {ctype!r}")
    return traffic


def network_cost(inst: BandwidthInstance, bandwidth: Mapping[str, float]) -> tuple[float, dict[str, float]]:
    """Network cost in USD (and per dimension) of per-NPU bandwidths in bytes/s (LIBRA cost model)."""
    sizes = [d.size for d in inst.dimensions]
    total_npus = math.prod(sizes)
    per_dim: dict[str, float] = {}
    for k, dim in enumerate(inst.dimensions):
        b = bandwidth[dim.name]
        n = dim.size
        if dim.block == "ring":
            blocks, links, link_bw = total_npus // n, 2 * n, b / 2
        elif dim.block == "fully_connected":
            blocks, links, link_bw = total_npus // n, n * (n - 1), b / (n - 1)
        else:
            blocks, links, link_bw = math.prod(sizes[k + 1 :]), math.prod(sizes[: k + 1]), b
        price = dim.price_link + (dim.price_nic + dim.price_switch if dim.block == "switch" else 0.0)
        per_dim[dim.name] = blocks * links * link_bw * price
    return sum(per_dim.values()), per_dim


def _violated(value: float, sense: str, rhs: float, scale: float) -> float:
    """How far ``value sense rhs`` is violated beyond the tolerance (0 if satisfied)."""
    tol = TOLERANCE * max(1.0, abs(rhs), scale)
    if sense == "<=":
        excess = value - rhs
    elif sense == ">=":
        excess = rhs - value
    else:
        excess = abs(value - rhs)
    return excess if excess > tol else 0.0


def evaluate(inst: BandwidthInstance, plan: BandwidthPlan) -> Check:
    """Recompute feasibility, training time (s) and network cost (USD) of a plan.

    The objective is the training time for ``plan.objective == "time"`` and the product
    time x cost (s*USD) for ``"time_x_cost"``.
    """
    violations: list[str] = []
    warnings: list[str] = []
    bw: dict[str, float] = {}
    for dim in inst.dimensions:
        b = plan.bandwidth.get(dim.name)
        if b is None or not math.isfinite(b):
            violations.append(f"dimension {dim.name}: bandwidth {b!r} is not a finite number")
            b = 0.0
        if b < 0:
            violations.append(f"dimension {dim.name}: negative bandwidth {b:g} bytes/s")
        bw[dim.name] = b
        lo_tol = TOLERANCE * max(1.0, dim.min_bandwidth)
        if b < dim.min_bandwidth - lo_tol:
            violations.append(f"dimension {dim.name}: {b / GB:.6g} GB/s is below min_bandwidth {dim.min_bandwidth / GB:.6g} GB/s")
        if math.isfinite(dim.max_bandwidth) and b > dim.max_bandwidth + TOLERANCE * max(1.0, dim.max_bandwidth):
            violations.append(f"dimension {dim.name}: {b / GB:.6g} GB/s exceeds max_bandwidth {dim.max_bandwidth / GB:.6g} GB/s")
        if dim.bandwidth_options is not None and not any(abs(b - o) <= 1e-9 * max(1.0, o) for o in dim.bandwidth_options):
            violations.append(f"dimension {dim.name}: {b / GB:.6g} GB/s is not one of its bandwidth_options")
    total = sum(bw.values())
    if inst.total_bandwidth is not None:
        sense, value = inst.total_bandwidth
        miss = _violated(total, sense, value, total)
        if miss:
            violations.append(f"total_bandwidth: sum of bandwidths {total / GB:.6g} GB/s is not {sense} {value / GB:.6g} GB/s (off by {miss / GB:.3g} GB/s)")
    cost, cost_per_dim = network_cost(inst, bw)
    if inst.cost_budget is not None:
        miss = _violated(cost, "<=", inst.cost_budget, cost)
        if miss:
            violations.append(f"cost_budget: network cost {cost:.6g} USD exceeds the budget {inst.cost_budget:.6g} USD by {miss:.3g} USD")
    for con in inst.linear:
        terms = [c * bw[n] for n, c in con.coeffs]
        lhs = sum(terms)
        miss = _violated(lhs, con.sense, con.rhs, sum(abs(t) for t in terms))
        if miss:
            violations.append(f"linear constraint {con.name!r}: {lhs / GB:.6g} GB/s is not {con.sense} {con.rhs / GB:.6g} GB/s (off by {miss / GB:.3g} GB/s)")

    names = [d.name for d in inst.dimensions]
    traffic_total = dict.fromkeys(names, 0.0)
    bottleneck = dict.fromkeys(names, 0)
    compute = 0.0
    comm = 0.0
    starved: set[str] = set()
    for layer in inst.layers:
        compute += sum(layer.compute)
        for coll in layer.collectives:
            traffic = collective_traffic(coll.type, coll.bytes, coll.npus)
            slowest = 0.0
            slow_dim = None
            for name, m in zip(names, traffic, strict=True):
                if m <= 0:
                    continue
                traffic_total[name] += m
                b = bw[name]
                if b <= 0:
                    starved.add(name)
                    t = math.inf
                else:
                    t = m / b
                if slow_dim is None or t > slowest:
                    slowest, slow_dim = t, name
            if slow_dim is not None:
                bottleneck[slow_dim] += 1
                comm += slowest
    for name in sorted(starved):
        violations.append(f"dimension {name}: carries traffic but has no bandwidth (infinite collective time)")
    for name in names:
        if traffic_total[name] == 0:
            warnings.append(f"dimension {name}: no collective uses it")
    time_s = compute + comm
    objective = time_s * cost if plan.objective == "time_x_cost" else time_s
    details = {
        "objective": plan.objective,
        "time_seconds": time_s,
        "compute_seconds": compute,
        "communication_seconds": comm,
        "cost_usd": cost,
        "time_x_cost": time_s * cost,
        "total_bandwidth": total,
        "dimensions": {
            n: {
                "bandwidth": bw[n],
                "traffic_bytes": traffic_total[n],
                "bottleneck_of": bottleneck[n],
                "cost_usd": cost_per_dim[n],
            }
            for n in names
        },
        "warnings": warnings,
    }
    return Check(feasible=not violations, objective=objective if math.isfinite(objective) else math.inf,
                 violations=violations, details=details)


def describe(inst: BandwidthInstance, plan: BandwidthPlan, check: Check) -> list[str]:
    """Lines for the CLI: bandwidth, traffic and cost per dimension; time and cost."""
    d = check.details
    lines = [
        f"objective    {'training time (s)' if plan.objective == 'time' else 'training time x network cost (s*USD)'}",
        f"time         {d['time_seconds'] * 1e3:.6g} ms (compute {d['compute_seconds'] * 1e3:.6g} ms, "
        f"communication {d['communication_seconds'] * 1e3:.6g} ms)",
        f"cost         {d['cost_usd']:.6g} USD",
    ]
    for dim in inst.dimensions:
        row = d["dimensions"][dim.name]
        lines.append(
            f"  {dim.name:<10} {dim.block:<15} x{dim.size:<4} {row['bandwidth'] / GB:10.4f} GB/s  "
            f"traffic {row['traffic_bytes'] / 1e9:10.4f} GB  bottleneck of {row['bottleneck_of']:3d} collectives  "
            f"cost {row['cost_usd']:.4g} USD"
        )
    lines.extend(f"warning: {w}" for w in d["warnings"])
    return lines


SPEC = register_kind(
    KindSpec(
        kind="bandwidth",
        from_dict=BandwidthInstance.from_dict,
        plan_from_dict=plan_from_dict,
        evaluate=evaluate,
        # training time (s) for plans with objective "time", time x cost (s*USD) for
        # "time_x_cost"; the described lines name which one
        objective_name="objective",
        objective_unit="",
        describe=describe,
    )
)
