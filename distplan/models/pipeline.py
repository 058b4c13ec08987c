"""Pipeline scheduling: instance, plan and the independent evaluator (kind ``pipeline``).

A micro-batch is a DAG of *blocks* (Tessel, Lin et al. HPCA 2024): each block has a
duration (seconds), the set of devices it occupies while it runs (a tensor-parallel block
holds several), a memory delta (bytes, charged at the block's start on every device of
its set: positive for forward activations, negative when a backward block frees them), a
role (``F`` forward, ``B`` backward or input-gradient backward, ``W`` weight-gradient
backward; Qi et al., Zero Bubble PP, ICLR 2024) and dependencies on other blocks of the
same micro-batch. All ``micro_batches`` micro-batches run the same DAG. A dependency
``u -> v`` whose blocks occupy different device sets waits ``comm_delay`` seconds (or the
dependency's own ``delay``) between the end of ``u`` and the start of ``v``.

A plan gives the start time (seconds) of every (block, micro-batch). The evaluator checks
dependencies with their delays, no overlap on any device, and the memory prefix per device
(the sum of the deltas of the blocks started so far, counted at every block start) within
the device's capacity; it recomputes the makespan (last end - first start), the longest
per-device span (last end - first start on one device: Zero Bubble's objective) and the
bubble ratio (idle device time / total device time over the makespan).

The instance's ``objective`` names the quantity the plan is judged by: ``makespan``
(default; in ``inference`` mode the latency of the N requests) or ``device_span``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.common import (
    FORMAT,
    MAX_BYTES,
    MAX_SECONDS,
    Check,
    JsonDocument,
    KindSpec,
    name_list,
    need,
    number,
    register_kind,
)
from distplan.models.graphs import find_cycle, topological_order, transitive_closure

ROLES = ("F", "B", "W")
MODES = ("training", "inference")
OBJECTIVES = ("makespan", "device_span")
#: relative tolerance of time comparisons (times in seconds)
TIME_TOL = 1e-7
#: relative tolerance of the memory check: a device's memory prefix is within its
#: capacity when at most `capacity_limit` (``capacity + MEMORY_TOLERANCE x max(1, |capacity|)``)
MEMORY_TOLERANCE = 1e-9
#: most down-closed block sets (dependency-consistent prefixes of one device's blocks) the
#: exact minimum-memory search visits on one device before it settles for an upper estimate
#: (2**16: an antichain of 16 blocks, or a chain of any length)
MAX_MEMORY_PREFIXES = 1 << 16
#: the most micro-batches an instance may give: schedules are (blocks x micro-batches)
#: arrays of start times, and baselines and evaluator walk every micro-batch
MAX_MICRO_BATCHES = 10**6


@dataclass(frozen=True)
class PipelineBlock:
    """One block of a micro-batch. Duration in seconds, memory delta in bytes."""

    name: str
    duration: float
    devices: tuple[str, ...]
    memory: float = 0.0
    deps: tuple[str, ...] = ()
    #: explicit delay (seconds) per dependency name, overriding the instance's comm_delay
    dep_delays: tuple[tuple[str, float], ...] = ()
    role: str = "F"


@dataclass
class PipelineInstance(JsonDocument):
    """Blocks of one micro-batch, devices, number of micro-batches and memory capacities."""

    name: str
    devices: list[str]
    blocks: list[PipelineBlock]
    micro_batches: int
    #: bytes per device: one number for all, a dict per device name, or None (unlimited)
    memory_capacity: float | dict[str, float] | None = None
    comm_delay: float = 0.0
    mode: str = "training"
    objective: str = "makespan"
    description: str = ""
    #: free-form metadata, kept as given
    meta: dict[str, Any] = field(default_factory=dict)
    kind: str = "pipeline"

    # -- sizes and arrays -----------------------------------------------------------------
    @property
    def n_blocks(self) -> int:
        return len(self.blocks)

    @property
    def n_devices(self) -> int:
        return len(self.devices)

    @cached_property
    def block_index(self) -> dict[str, int]:
        return {b.name: i for i, b in enumerate(self.blocks)}

    @cached_property
    def device_index(self) -> dict[str, int]:
        return {d: i for i, d in enumerate(self.devices)}

    @cached_property
    def duration(self) -> np.ndarray:
        """(B,) seconds."""
        return np.array([b.duration for b in self.blocks], dtype=float)

    @cached_property
    def memory(self) -> np.ndarray:
        """(B,) bytes charged at the block's start on each of its devices."""
        return np.array([b.memory for b in self.blocks], dtype=float)

    @cached_property
    def device_mask(self) -> np.ndarray:
        """(B, D) True where the block occupies the device."""
        mask = np.zeros((self.n_blocks, self.n_devices), dtype=bool)
        for i, b in enumerate(self.blocks):
            for d in b.devices:
                mask[i, self.device_index[d]] = True
        return mask

    @cached_property
    def role_code(self) -> np.ndarray:
        """(B,) 0 forward, 1 backward (input gradient), 2 weight gradient."""
        return np.array([ROLES.index(b.role) for b in self.blocks], dtype=np.int64)

    @cached_property
    def edges(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(src, dst, lag): dependency arrays; lag in seconds between src's end and dst's start."""
        src: list[int] = []
        dst: list[int] = []
        lag: list[float] = []
        for j, b in enumerate(self.blocks):
            explicit = dict(b.dep_delays)
            for dep in b.deps:
                i = self.block_index[dep]
                src.append(i)
                dst.append(j)
                if dep in explicit:
                    lag.append(float(explicit[dep]))
                elif set(self.blocks[i].devices) != set(b.devices):
                    lag.append(float(self.comm_delay))
                else:
                    lag.append(0.0)
        return np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64), np.asarray(lag, dtype=float)

    @cached_property
    def capacity(self) -> np.ndarray:
        """(D,) bytes per device, inf when unlimited."""
        cap = self.memory_capacity
        if cap is None:
            return np.full(self.n_devices, np.inf)
        if isinstance(cap, dict):
            return np.array([float(cap.get(d, np.inf)) for d in self.devices])
        return np.full(self.n_devices, float(cap))

    @cached_property
    def topo_order(self) -> np.ndarray:
        """Blocks in a topological order (smallest index first among ready ones)."""
        src, dst, _ = self.edges
        return topological_order(self.n_blocks, src, dst)

    @cached_property
    def reach(self) -> np.ndarray:
        """(B, B) True where a dependency path block i -> block j exists (i != j)."""
        src, dst, _ = self.edges
        return transitive_closure(self.n_blocks, src, dst, self.topo_order)

    def device_work(self) -> np.ndarray:
        """(D,) seconds of work of one micro-batch on each device."""
        return self.duration @ self.device_mask

    def with_(self, **changes: Any) -> PipelineInstance:
        """A copy with some fields replaced (e.g. ``micro_batches=64``, ``memory_capacity=5``)."""
        return replace(self, **changes)

    # -- memory need ----------------------------------------------------------------------
    def minimum_memory(self) -> tuple[np.ndarray, np.ndarray]:
        """(need, exact) per device: the least peak memory prefix (bytes) any schedule of one
        micro-batch reaches on the device, and whether it was found by exhaustive search
        over the dependency-consistent orders of that device's blocks (else it is the
        peak of the topological order, an upper estimate).

        Running micro-batches one after another reaches exactly this peak, so no capacity
        below it admits a schedule whenever every order keeps the device's memory prefix
        non-negative (true for the usual forward-then-backward blocks).

        Computed once per instance (copies returned): every classic schedule checks it,
        and its exhaustive search took seconds on 64 stages (review rev24b).
        """
        need, exact = self._minimum_memory
        return need.copy(), exact.copy()

    @cached_property
    def _minimum_memory(self) -> tuple[np.ndarray, np.ndarray]:
        need = np.zeros(self.n_devices)
        exact = np.ones(self.n_devices, dtype=bool)
        searched: dict[tuple[bytes, tuple[int, ...]], float | None] = {}
        for d in range(self.n_devices):
            blocks = np.flatnonzero(self.device_mask[:, d])
            if blocks.size == 0:
                continue
            mem = self.memory[blocks]
            reach = self.reach[np.ix_(blocks, blocks)]
            preds = tuple(int(sum(1 << i for i in np.flatnonzero(reach[:, j]))) for j in range(blocks.size))
            key = (mem.tobytes(), preds)
            if key not in searched:  # devices of one stage shape share the search
                searched[key] = _min_peak(mem, preds)
            peak = searched[key]
            if peak is None:
                order = [b for b in self.topo_order.tolist() if self.device_mask[b, d]]
                need[d] = max(0.0, float(np.max(np.cumsum(self.memory[order]))))
                exact[d] = False
            else:
                need[d] = peak
        return need, exact

    # -- I/O ------------------------------------------------------------------------------
    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> PipelineInstance:
        return _parse(data)

    def to_dict(self) -> dict[str, Any]:
        blocks = []
        for b in self.blocks:
            delays = dict(b.dep_delays)
            deps: list[Any] = [({"block": d, "delay": delays[d]} if d in delays else d) for d in b.deps]
            blocks.append(
                {"name": b.name, "role": b.role, "duration": b.duration, "devices": list(b.devices), "memory": b.memory, "deps": deps}
            )
        cap = self.memory_capacity
        out: dict[str, Any] = {
            "format": FORMAT,
            "kind": "pipeline",
            "name": self.name,
            "description": self.description,
            "mode": self.mode,
            "objective": self.objective,
            "devices": list(self.devices),
            "memory_capacity": dict(cap) if isinstance(cap, dict) else cap,
            "micro_batches": self.micro_batches,
            "comm_delay": self.comm_delay,
            "blocks": blocks,
        }
        if self.meta:
            out["meta"] = dict(self.meta)
        return out

    def summary(self) -> dict[str, Any]:
        work = self.device_work()
        need, _ = self.minimum_memory()
        roles = {r: int(np.sum(self.role_code == k)) for k, r in enumerate(ROLES)}
        return {
            "name": self.name,
            "kind": self.kind,
            "mode": self.mode,
            "objective": self.objective,
            "devices": self.n_devices,
            "blocks per micro-batch": self.n_blocks,
            "blocks by role": roles,
            "multi-device blocks": int(np.sum(self.device_mask.sum(axis=1) > 1)),
            "micro-batches": self.micro_batches,
            "work per micro-batch per device (s)": [float(w) for w in work],
            "memory capacity": [None if not math.isfinite(c) else float(c) for c in self.capacity],
            "minimum memory per device": [float(x) for x in need],
            "comm delay (s)": self.comm_delay,
        }


def capacity_limit(cap: float) -> float:
    """The most memory a device of capacity ``cap`` may hold in a schedule `evaluate`
    accepts (the blocks' units)."""
    return cap + MEMORY_TOLERANCE * max(1.0, abs(cap))


def _min_peak(mem: np.ndarray, preds: tuple[int, ...]) -> float | None:
    """Least peak prefix sum of ``mem`` over the linear extensions of a partial order (block
    ``j`` after every block in the bit set ``preds[j]``), or None when the order has more than
    `MAX_MEMORY_PREFIXES` down-closed sets.

    A DP over the down-closed sets, grown one block at a time from the empty set: only sets
    an order can reach are visited, so a chain of any length costs its length, and an
    antichain of k blocks 2**k.
    """
    k = len(preds)
    values = [float(x) for x in mem]
    # down-closed set -> (its memory total, least peak of an order reaching it)
    level: dict[int, tuple[float, float]] = {0: (0.0, 0.0)}
    visited = 1
    for _ in range(k):
        following: dict[int, tuple[float, float]] = {}
        for placed, (total, peak) in level.items():
            for j in range(k):
                if placed >> j & 1 or preds[j] & placed != preds[j]:
                    continue
                grown = placed | 1 << j
                grown_total = total + values[j]
                grown_peak = max(peak, grown_total)
                seen = following.get(grown)
                if seen is None or grown_peak < seen[1]:
                    following[grown] = (grown_total, grown_peak)
        visited += len(following)
        if visited > MAX_MEMORY_PREFIXES:
            return None
        level = following
    (_, peak), = level.values()
    return max(0.0, peak)


def _parse(data: Mapping[str, Any]) -> PipelineInstance:
    if data.get("kind") != "pipeline":
        raise InputError("kind", f"expected 'pipeline', got {data.get('kind')!r}")
    name = need(data, "name", "")
    if not isinstance(name, str) or not name:
        raise InputError("name", "expected a non-empty string")
    devices_raw = need(data, "devices", "")
    if not isinstance(devices_raw, list) or not devices_raw:
        raise InputError("devices", "expected a non-empty list of device names", 'e.g. "devices": ["gpu0", "gpu1"]')
    devices: list[str] = []
    for k, d in enumerate(devices_raw):
        if not isinstance(d, str) or not d:
            raise InputError(f"devices[{k}]", f"expected a non-empty string, got {d!r}")
        if d in devices:
            raise InputError(f"devices[{k}]", f"duplicate device {d!r}", "give every device a unique name")
        devices.append(d)
    mode = data.get("mode", "training")
    if mode not in MODES:
        raise InputError("mode", f"unknown mode {mode!r}", f"use one of: {', '.join(MODES)}")
    objective = data.get("objective", "makespan")
    if objective not in OBJECTIVES:
        raise InputError("objective", f"unknown objective {objective!r}", f"use one of: {', '.join(OBJECTIVES)}")
    n_micro = number(need(data, "micro_batches", ""), "micro_batches", positive=True, integer=True, at_most=MAX_MICRO_BATCHES, unit="micro-batches")
    # times are at most MAX_SECONDS (31 years): at 2**60 s a start time's rounding is
    # above a second, and baselines' schedules were rejected by the evaluator
    comm = number(data.get("comm_delay", 0.0), "comm_delay", at_most=MAX_SECONDS, unit="s")
    cap_raw = data.get("memory_capacity")
    capacity: float | dict[str, float] | None
    if cap_raw is None:
        capacity = None
    elif isinstance(cap_raw, Mapping):
        capacity = {}
        for key, value in cap_raw.items():
            if key not in devices:
                raise InputError(f"memory_capacity.{key}", f"unknown device {key!r}", f"use one of: {', '.join(devices)}")
            capacity[key] = number(value, f"memory_capacity.{key}")
    else:
        capacity = number(cap_raw, "memory_capacity")

    items = need(data, "blocks", "")
    names = name_list(items, "blocks", "blocks")
    if not names:
        raise InputError("blocks", "a micro-batch needs at least one block")
    known = set(names)
    blocks: list[PipelineBlock] = []
    for i, item in enumerate(items):
        path = f"blocks[{i}]"
        bname = names[i]
        dur_raw = need(item, "duration", path)
        if isinstance(dur_raw, bool) or not isinstance(dur_raw, int | float) or not math.isfinite(float(dur_raw)):
            raise InputError(f"{path}.duration", f"block {bname!r}: expected a finite number of seconds, got {dur_raw!r}")
        if float(dur_raw) <= 0:
            raise InputError(f"{path}.duration", f"block {bname!r} has non-positive duration {dur_raw!r}", "give a duration > 0 seconds")
        number(dur_raw, f"{path}.duration", at_most=MAX_SECONDS, unit="s")
        devs_raw = need(item, "devices", path)
        if isinstance(devs_raw, str):
            devs_raw = [devs_raw]
        if not isinstance(devs_raw, list) or not devs_raw:
            raise InputError(f"{path}.devices", f"block {bname!r}: expected a non-empty list of device names")
        devs: list[str] = []
        for k, dv in enumerate(devs_raw):
            if dv not in devices:
                raise InputError(
                    f"{path}.devices[{k}]", f"block {bname!r} is placed on unknown device {dv!r}", f"use one of: {', '.join(devices)}"
                )
            if dv in devs:
                raise InputError(f"{path}.devices[{k}]", f"block {bname!r} lists device {dv!r} twice")
            devs.append(dv)
        mem = number(item.get("memory", 0.0), f"{path}.memory", nonneg=False, at_least=-MAX_BYTES, at_most=MAX_BYTES, unit="bytes")
        role = item.get("role", "F")
        if role not in ROLES:
            raise InputError(f"{path}.role", f"block {bname!r}: unknown role {role!r}", "use F (forward), B (backward) or W (weight gradient)")
        if mode == "inference" and role != "F":
            raise InputError(f"{path}.role", f"block {bname!r} is a {role} block in inference mode", 'inference has forward blocks only; use "mode": "training"')
        deps_raw = item.get("deps", [])
        if not isinstance(deps_raw, list):
            raise InputError(f"{path}.deps", f"block {bname!r}: expected a list of block names")
        deps: list[str] = []
        delays: list[tuple[str, float]] = []
        for k, dep in enumerate(deps_raw):
            dpath = f"{path}.deps[{k}]"
            if isinstance(dep, Mapping):
                target = need(dep, "block", dpath)
                delays.append((str(target), number(need(dep, "delay", dpath), f"{dpath}.delay", at_most=MAX_SECONDS, unit="s")))
            else:
                target = dep
            if not isinstance(target, str) or target not in known:
                raise InputError(dpath, f"block {bname!r} depends on unknown block {target!r}", "name a block listed in blocks")
            if target == bname:
                raise InputError(dpath, f"block {bname!r} depends on itself", "remove this dependency")
            if target in deps:
                raise InputError(dpath, f"block {bname!r} lists dependency {target!r} twice")
            deps.append(target)
        blocks.append(
            PipelineBlock(
                name=bname,
                duration=float(dur_raw),
                devices=tuple(devs),
                memory=mem,
                deps=tuple(deps),
                dep_delays=tuple(delays),
                role=role,
            )
        )
    inst = PipelineInstance(
        name=name,
        devices=devices,
        blocks=blocks,
        micro_batches=int(n_micro),
        memory_capacity=capacity,
        comm_delay=comm,
        mode=mode,
        objective=objective,
        description=str(data.get("description", "")),
        meta=dict(data["meta"]) if isinstance(data.get("meta"), Mapping) else {},
    )
    src, dst, _ = inst.edges
    cycle = find_cycle(inst.n_blocks, src, dst)
    if cycle is not None:
        path = " -> ".join(names[v] for v in [*cycle, cycle[0]])
        raise InputError(f"blocks[{cycle[0]}].deps", f"dependency cycle: {path}", "remove one of these dependencies")
    check_net_memory(inst)
    return inst


def check_net_memory(inst: PipelineInstance) -> None:
    """Raise an `InputError` when a micro-batch frees more memory on a device than its
    blocks there allocate (their memory deltas sum below 0, beyond rounding): every
    micro-batch would leave the device with less than it started with, so that a schedule
    of N of them could count memory it never had (review rev26: B blocks freeing 5 bytes
    each after F blocks allocating 1; `pipeline_milp` called an impossible schedule
    optimal within a capacity of 1). What a micro-batch allocates and keeps (a sum above
    0) stays allowed: the evaluator and the capacity check count it as held at the end."""
    net = inst.memory @ inst.device_mask
    scale = np.abs(inst.memory) @ inst.device_mask
    bad = np.flatnonzero(net < -1e-9 * (1.0 + scale))
    if bad.size:
        d = int(bad[0])
        on = np.flatnonzero(inst.device_mask[:, d])
        k = int(on[np.argmin(inst.memory[on])])  # the block that frees most there
        raise InputError(
            f"blocks[{k}].memory",
            f"a micro-batch frees more memory than it allocates on device {inst.devices[d]}: its blocks there sum to {net[d]:.6g} bytes "
            f"(block {inst.blocks[k].name!r} frees {-inst.memory[k]:.6g})",
            "make each device's memory deltas of one micro-batch sum to 0 (what the forward blocks allocate, the backward blocks free) or more",
        )


# -- plans ---------------------------------------------------------------------------------


@dataclass
class PipelinePlan:
    """Start time (seconds) of every (block, micro-batch): ``start[b, m]``."""

    block_names: list[str]
    start: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"start": {n: [float(x) for x in self.start[i]] for i, n in enumerate(self.block_names)}}
        if self.info:
            out["info"] = self.info
        return out


def make_plan(inst: PipelineInstance, start: np.ndarray, info: dict[str, Any] | None = None) -> PipelinePlan:
    start = np.asarray(start, dtype=float).reshape(inst.n_blocks, inst.micro_batches)
    return PipelinePlan([b.name for b in inst.blocks], start.copy(), dict(info or {}))


def plan_from_dict(inst: PipelineInstance, data: Mapping[str, Any]) -> PipelinePlan:
    """A plan from ``{"start": {block: [start of micro-batch 0, 1, ...]}}`` (seconds)."""
    starts = need(data, "start", "")
    if not isinstance(starts, Mapping):
        raise InputError("start", "expected an object mapping block names to lists of start times")
    out = np.zeros((inst.n_blocks, inst.micro_batches))
    for i, b in enumerate(inst.blocks):
        if b.name not in starts:
            raise InputError(f"start.{b.name}", "missing", f"give {inst.micro_batches} start times (seconds)")
        row = starts[b.name]
        if not isinstance(row, list) or len(row) != inst.micro_batches:
            raise InputError(f"start.{b.name}", f"expected a list of {inst.micro_batches} start times")
        for m, v in enumerate(row):
            out[i, m] = number(v, f"start.{b.name}[{m}]", nonneg=False)
    for key in starts:
        if key not in inst.block_index:
            raise InputError(f"start.{key}", f"unknown block {key!r}", "name blocks of the instance")
    info = data.get("info", {})
    return PipelinePlan([b.name for b in inst.blocks], out, dict(info) if isinstance(info, Mapping) else {})


# -- the independent evaluator ---------------------------------------------------------------


def evaluate(inst: PipelineInstance, plan: PipelinePlan) -> Check:
    """Check a plan from scratch and recompute makespan, device spans and bubble ratio."""
    nb, n, nd = inst.n_blocks, inst.micro_batches, inst.n_devices
    violations: list[str] = []
    start = np.asarray(plan.start, dtype=float)
    if start.shape != (nb, n):
        return Check(False, math.inf, [f"plan has start times of shape {start.shape}, expected ({nb}, {n})"])
    if not np.all(np.isfinite(start)):
        return Check(False, math.inf, ["plan has non-finite start times"])
    names = [b.name for b in inst.blocks]
    if list(plan.block_names) != names:  # rows are read by name, never by position alone
        if sorted(plan.block_names) != sorted(names):
            return Check(False, math.inf, [f"plan names blocks {list(plan.block_names)}, the instance has {names}"])
        start = start[[list(plan.block_names).index(nm) for nm in names]]
    dur = np.array([b.duration for b in inst.blocks], dtype=float)
    # times from the first start: the makespan does not change when every start moves by
    # the same amount, so neither may the checks' tolerance (it was relative to the
    # absolute times: starts near 1e10 s were allowed 1000 s of overlap, and a plan under
    # the proven optimum passed; review rev12 D1)
    t0 = float(start.min()) if start.size else 0.0
    start = start - t0
    end = start + dur[:, None]
    t1 = float(end.max()) if end.size else 0.0
    tol = TIME_TOL * max(1.0, t1)

    # dependencies (recomputed from the block list, not from the cached arrays)
    index = {b.name: i for i, b in enumerate(inst.blocks)}
    for j, block in enumerate(inst.blocks):
        explicit = dict(block.dep_delays)
        for dep in block.deps:
            i = index[dep]
            if dep in explicit:
                lag = explicit[dep]
            elif set(inst.blocks[i].devices) != set(block.devices):
                lag = inst.comm_delay
            else:
                lag = 0.0
            slack = start[j] - (end[i] + lag)
            bad = np.flatnonzero(slack < -tol)
            for m in bad[:3].tolist():
                violations.append(
                    f"dependency {dep} -> {block.name} of micro-batch {m}: starts at {start[j, m] + t0:.9g} s, "
                    f"before {dep} ends ({end[i, m] + t0:.9g} s) plus delay {lag:.9g} s"
                )

    # devices: no overlap, memory prefix at every block start
    caps = inst.capacity
    busy = np.zeros(nd)
    peak = np.zeros(nd)
    first = np.full(nd, np.nan)
    last = np.full(nd, np.nan)
    for d, dev in enumerate(inst.devices):
        on = [i for i, b in enumerate(inst.blocks) if dev in b.devices]
        if not on:
            continue
        blk = np.repeat(np.asarray(on), n)
        mb = np.tile(np.arange(n), len(on))
        s = start[blk, mb]
        e = end[blk, mb]
        order = np.lexsort((e, s))
        s, e, blk, mb = s[order], e[order], blk[order], mb[order]
        busy[d] = float(np.sum(dur[blk]))
        first[d], last[d] = float(s[0]), float(e.max())
        overlap = np.flatnonzero(e[:-1] > s[1:] + tol)
        for k in overlap[:3].tolist():
            violations.append(
                f"device {dev}: {names[blk[k]]} of micro-batch {mb[k]} runs until {e[k] + t0:.9g} s but "
                f"{names[blk[k + 1]]} of micro-batch {mb[k + 1]} starts at {s[k + 1] + t0:.9g} s"
            )
        mem = np.array([inst.blocks[b].memory for b in blk.tolist()], dtype=float)
        prefix = np.cumsum(mem)
        peak[d] = max(0.0, float(prefix.max()))
        cap = caps[d]
        if math.isfinite(cap):
            over = np.flatnonzero(prefix > capacity_limit(cap))
            if over.size:
                k = int(over[0])
                violations.append(
                    f"device {dev}: memory {prefix[k]:.9g} exceeds capacity {cap:.9g} by {prefix[k] - cap:.9g} "
                    f"when {names[blk[k]]} of micro-batch {mb[k]} starts at {s[k] + t0:.9g} s"
                )
    makespan = t1
    spans = np.where(np.isnan(first), 0.0, last - first)
    device_span = float(spans.max())
    idle = makespan - busy
    bubble = float(idle.sum() / (nd * makespan)) if makespan > 0 else 0.0
    objective = makespan if inst.objective == "makespan" else device_span
    details = {
        "objective": inst.objective,
        "makespan": makespan,
        "device_span": device_span,
        "bubble_ratio": bubble,
        "devices": {
            dev: {
                "busy_seconds": float(busy[d]),
                "idle_seconds": float(idle[d]),
                "span_seconds": float(spans[d]),
                "peak_memory": float(peak[d]),
                "capacity": None if not math.isfinite(caps[d]) else float(caps[d]),
            }
            for d, dev in enumerate(inst.devices)
        },
    }
    return Check(not violations, objective, violations, details)


def describe(inst: PipelineInstance, plan: PipelinePlan, check: Check) -> list[str]:
    det = check.details
    lines = [
        f"makespan     {det.get('makespan', float('nan')):.6g} s   longest device span {det.get('device_span', float('nan')):.6g} s"
        f"   bubble ratio {det.get('bubble_ratio', float('nan')):.4f}",
    ]
    for key in ("period", "period_bound", "offsets", "schedule"):
        if key in plan.info:
            lines.append(f"{key:<12} {plan.info[key]}")
    for dev, row in det.get("devices", {}).items():
        cap = "unlimited" if row["capacity"] is None else f"{row['capacity']:.6g}"
        lines.append(
            f"  {dev:<10} busy {row['busy_seconds']:.6g} s  idle {row['idle_seconds']:.6g} s  "
            f"peak memory {row['peak_memory']:.6g} / {cap}"
        )
    return lines


SPEC = register_kind(
    KindSpec(
        kind="pipeline",
        from_dict=PipelineInstance.from_dict,
        plan_from_dict=plan_from_dict,
        evaluate=evaluate,
        objective_name="iteration_time",
        objective_unit="s",
        describe=describe,
        plan_fields=("start", "info"),
    )
)
