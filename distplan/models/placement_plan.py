"""Operator placement: the plan (device per op, optional start times in seconds) and its parser."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.common import need, number
from distplan.models.placement_instance import PlacementInstance


@dataclass
class PlacementPlan:
    """Device id per op and, optionally, start time per op (seconds)."""

    device: np.ndarray  # (n_ops,) int
    start: np.ndarray | None = None  # (n_ops,) seconds
    op_names: list[str] = field(default_factory=list)
    device_names: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"device": {o: self.device_names[int(d)] for o, d in zip(self.op_names, self.device)}}
        if self.start is not None:
            out["start"] = {o: float(s) for o, s in zip(self.op_names, self.start)}
        return out


def make_plan(inst: PlacementInstance, device: np.ndarray, start: np.ndarray | None = None) -> PlacementPlan:
    return PlacementPlan(
        device=np.asarray(device, dtype=np.int64),
        start=None if start is None else np.asarray(start, dtype=float),
        op_names=inst.op_names,
        device_names=inst.device_names,
    )


def plan_from_dict(inst: PlacementInstance, data: Mapping[str, Any]) -> PlacementPlan:
    """A plan from {"device": {op: device name}, "start": {op: seconds}?} (a result's plan:
    `KindSpec.read_plan`)."""
    devmap = need(data, "device", "plan")
    if not isinstance(devmap, Mapping):
        raise InputError("plan.device", "expected an object mapping op name to device name")
    dix = {n: k for k, n in enumerate(inst.device_names)}
    oix = inst.op_index
    device = np.full(inst.n_ops, -1, dtype=np.int64)
    for op, dev in devmap.items():
        if op not in oix:
            raise InputError(f"plan.device.{op}", f"unknown op {op!r}", "use op names of the instance")
        if dev not in dix:
            raise InputError(f"plan.device.{op}", f"unknown device {dev!r}", f"use one of: {', '.join(inst.device_names)}")
        device[oix[op]] = dix[dev]
    missing = np.flatnonzero(device < 0)
    if missing.size:
        raise InputError("plan.device", f"op {inst.op_names[int(missing[0])]!r} has no device ({missing.size} ops missing)", "place every op")
    start = None
    if "start" in data and data["start"] is not None:
        start = np.full(inst.n_ops, np.nan)
        for op, s in data["start"].items():
            if op not in oix:
                raise InputError(f"plan.start.{op}", f"unknown op {op!r}", "use op names of the instance")
            start[oix[op]] = number(s, f"plan.start.{op}")
        if np.isnan(start).any():
            k = int(np.flatnonzero(np.isnan(start))[0])
            raise InputError("plan.start", f"op {inst.op_names[k]!r} has no start time", "give every op a start time, or none")
    return make_plan(inst, device, start)
