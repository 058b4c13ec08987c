"""Compression selection (TAG): the kind ``compression`` and what a checked plan reads as.

Synchronizing a gradient in data-parallel training by ring all-reduce, by sufficient-factor
broadcasting (Xie et al. 2016; TAG, Zhang et al. arXiv 2302.06126: the producer and
possibly more of its ancestors are duplicated on every replica) or by a lossless codec.
Units: seconds, bytes, bytes/second. The kind's pieces, one module each:

* `distplan.models.compression_records`: devices, ops, edges, gradients, codecs, constants;
* `distplan.models.compression_parse`: reading the ``distplan/1`` document;
* `distplan.models.compression_instance`: the instance, its derived arrays, its JSON form;
* `distplan.models.compression_plan`: the plan and reading it;
* `distplan.models.compression_eval`: the independent iteration evaluator (and the
  iteration model it simulates).
"""

from __future__ import annotations

from distplan.models.common import Check, KindSpec, register_kind
from distplan.models.compression_eval import evaluate
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan, plan_from_dict


def describe(inst: CompressionInstance, plan: CompressionPlan, check: Check) -> list[str]:
    """A few lines about a checked plan: methods, duplication, channel load, memory."""
    d = check.details
    lines = [
        "methods      " + ", ".join(f"{m}={n}" for m, n in sorted(plan.method_counts().items())),
        f"duplicated   {d.get('duplicated_ops', 0)} ops, {d.get('broadcast_edges', 0)} broadcast tensors",
        f"channel      busy {d.get('channel_busy_seconds', 0.0) * 1e3:.3f} ms, {d.get('channel_bytes', 0.0) / 1e6:.3f} MB",
        f"TAG cost     {d.get('tag_cost_seconds', 0.0) * 1e3:.3f} ms (redundant compute + broadcasts - all-reduce avoided)",
    ]
    mem = d.get("memory_bytes", {})
    cap = d.get("memory_capacity_bytes", {})
    for name, used in mem.items():
        lines.append(f"memory       {name:<12} {used / 2**30:8.3f} / {cap.get(name, float('nan')) / 2**30:.3f} GiB")
    return lines


SPEC = register_kind(
    KindSpec(
        kind="compression",
        from_dict=CompressionInstance.from_dict,
        plan_from_dict=plan_from_dict,
        evaluate=evaluate,
        objective_name="iteration",
        objective_unit="s",
        describe=describe,
        plan_fields=("duplicated", "sync", "order"),
    )
)
