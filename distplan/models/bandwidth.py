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

The kind's pieces, one module each:

* `distplan.models.bandwidth_records`: dimensions, collectives, layers, linear constraints,
  constants (`GB`);
* `distplan.models.bandwidth_parse`: reading the ``distplan/1`` document;
* `distplan.models.bandwidth_instance`: the instance and its JSON form;
* `distplan.models.bandwidth_plan`: the plan and reading it;
* `distplan.models.bandwidth_eval`: the independent evaluator (`evaluate`), LIBRA's traffic
  (`collective_traffic`) and cost (`network_cost`) models.
"""

from __future__ import annotations

from distplan.models.bandwidth_eval import evaluate
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_plan import BandwidthPlan, plan_from_dict
from distplan.models.bandwidth_records import GB
from distplan.models.common import Check, KindSpec, register_kind


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
        # "time_x_cost": each check names its own (models/bandwidth_eval.py)
        objective_name="training time",
        objective_unit="s",
        describe=describe,
        plan_fields=("bandwidth", "objective"),
    )
)
