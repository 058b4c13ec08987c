"""Operator placement with memory limits: the kind entry (``distplan.kinds``) and its public API.

The instance lives in ``placement_instance``, the plan in ``placement_plan``, the
independent evaluator in ``placement_evaluate``; this module registers the kind and keeps
the names users import from ``distplan.models.placement``.
"""

from __future__ import annotations

from distplan.models.common import KindSpec, register_kind
from distplan.models.placement_evaluate import describe, evaluate, memory_peaks, schedule_fixed_placement
from distplan.models.placement_instance import PlacementInstance, check_total_memory
from distplan.models.placement_plan import PlacementPlan, make_plan, plan_from_dict

__all__ = ["SPEC", "PlacementInstance", "PlacementPlan", "describe", "evaluate", "make_plan", "memory_peaks", "plan_from_dict", "schedule_fixed_placement"]

SPEC = register_kind(
    KindSpec(
        kind="placement",
        from_dict=PlacementInstance.from_dict,
        plan_from_dict=plan_from_dict,  # type: ignore[arg-type]
        evaluate=evaluate,
        objective_name="makespan",
        objective_unit="s",
        describe=describe,  # type: ignore[arg-type]
        check_plan_exists=check_total_memory,  # type: ignore[arg-type]
        plan_fields=("device", "start"),
    )
)
