"""LIBRA bandwidth provisioning: the independent evaluator.

`evaluate` recomputes the training time and the network cost of a plan from the workload,
walking LIBRA's chunked collective model layer by layer (Won et al., ISPASS 2024, arXiv
2109.11762; code github.com/astra-sim/libra); it shares no code with the formulations
(which aggregate the same traffic in closed form). Units: seconds, bytes, bytes/s, USD.

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

from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_plan import BandwidthPlan
from distplan.models.bandwidth_records import GB, TOLERANCE
from distplan.models.common import Check


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
    per_cost = plan.objective == "time_x_cost"
    return Check(feasible=not violations, objective=objective if math.isfinite(objective) else math.inf,
                 violations=violations, details=details,
                 objective_name="time x cost" if per_cost else "training time",
                 objective_unit="s*USD" if per_cost else "s")

