"""Compression selection (TAG): the plan (duplicated ops, one method per gradient, channel
order) and reading it from JSON."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_records import BUILTIN_METHODS


@dataclass
class CompressionPlan:
    """Which ops are duplicated, how each gradient is synchronized, the channel order.

    ``sync`` maps every gradient to ``"allreduce"``, ``"sfb"`` (its producer is duplicated)
    or a codec name; ``order`` lists the gradients in channel order (None: by release, i.e.
    the position of the producer in the compute stream).
    """

    duplicated: tuple[str, ...]
    sync: dict[str, str]
    order: tuple[str, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"duplicated": list(self.duplicated), "sync": dict(self.sync)}
        if self.order is not None:
            out["order"] = list(self.order)
        return out

    def method_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.sync.values():
            counts[m] = counts.get(m, 0) + 1
        return counts


def make_plan(inst: CompressionInstance, duplicated: np.ndarray, methods: list[str], order: list[int] | None = None) -> CompressionPlan:
    """A plan from a duplicated-op mask, one method per gradient (index order) and an
    optional channel order of gradient indices."""
    dup = tuple(inst.ops[i].name for i in np.flatnonzero(np.asarray(duplicated, dtype=bool)).tolist())
    sync = {g.name: m for g, m in zip(inst.gradients, methods)}
    ordered = tuple(inst.gradients[k].name for k in order) if order is not None else None
    return CompressionPlan(dup, sync, ordered)


def _known_names(value: Any, path: str, known: Mapping[str, int], what: str, where: str) -> list[str]:
    """A list of names at ``path``, each one a ``what`` of the instance (listed in ``where``)."""
    if not isinstance(value, list):
        raise InputError(path, f"expected a list of {what} names")
    for k, nm in enumerate(value):
        if nm not in known:
            raise InputError(f"{path}[{k}]", f"unknown {what} {nm!r}", f"name {'an' if what[0] in 'aeiou' else 'a'} {what} of {where}")
    return value


def plan_from_dict(inst: CompressionInstance, data: Mapping[str, Any]) -> CompressionPlan:
    """Read a plan: {"duplicated": [op, ...], "sync": {gradient: method}, "order": [...]}.

    A gradient missing from ``sync`` is ``sfb`` when its producer is duplicated and
    ``allreduce`` otherwise.
    """
    if not isinstance(data, Mapping):
        raise InputError("plan", "expected an object")
    dup = set(_known_names(data.get("duplicated", []), "duplicated", inst.op_index, "op", "graph.ops"))
    sync_raw = data.get("sync", {})
    if not isinstance(sync_raw, Mapping):
        raise InputError("sync", "expected an object {gradient: method}")
    valid = set(BUILTIN_METHODS) | set(inst.codec_index)
    for gname, m in sync_raw.items():
        if gname not in inst.gradient_index:
            raise InputError(f"sync.{gname}", f"unknown gradient {gname!r}", "name a gradient of graph.gradients")
        if m not in valid:
            raise InputError(f"sync.{gname}", f"unknown method {m!r}", f"use one of: {', '.join(sorted(valid))}")
    sync = {g.name: str(sync_raw.get(g.name, "sfb" if g.op in dup else "allreduce")) for g in inst.gradients}
    order = data.get("order")
    if order is not None:
        order = tuple(_known_names(order, "order", inst.gradient_index, "gradient", "graph.gradients"))
    ordered_dup = tuple(o.name for o in inst.ops if o.name in dup)
    return CompressionPlan(ordered_dup, sync, order)


# -- the independent evaluator ---------------------------------------------------------------
