"""LIBRA bandwidth provisioning: the plan (per-NPU bandwidth of every dimension, bytes/s)
and reading it from JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from distplan.errors import InputError
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_records import OBJECTIVES
from distplan.models.common import need, number


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
