"""The parts of the list scheduler (`listsched`) that do not run per placement: the memory
timeline of Baechi's liveness model, the topological order, the favorites check, the
instance's data as Python lists (element access in the scheduling loop is faster on lists
than on numpy arrays) and the infeasibility report. Times in seconds, memory in bytes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NoReturn

import numpy as np

from distplan.errors import NoSolutionError
from distplan.models.graphs import edges_by, topological_order
from distplan.models.placement_instance import PlacementInstance, byte_text

_INF = math.inf


class MemoryTimeline:
    """Bytes in use on one device over time (Baechi's liveness model), for placement checks.

    Events are (time [s], delta [bytes]); at equal times frees come before allocations, as
    in the evaluator. `earliest_fit` answers: from which start time on can ``extra`` more
    bytes stay resident forever without exceeding the capacity at any later event? The
    caller checks the cheap sufficient condition first (every byte ever allocated plus
    ``extra`` fits: then the answer is ``start``).
    """

    def __init__(self, capacity: float):
        self.capacity = capacity  # (bytes: what the evaluator accepts, `PlacementInstance.accepted_memory`)
        self.times: list[float] = []
        self.deltas: list[float] = []
        self._cache: tuple[int, np.ndarray, np.ndarray] | None = None  # (events, times, suffix max)

    def add(self, time: float, delta: float) -> None:
        self.times.append(time)
        self.deltas.append(delta)

    def earliest_fit(self, start: float, extra: float) -> float:
        if self._cache is None or self._cache[0] != len(self.times):
            t = np.asarray(self.times)
            dl = np.asarray(self.deltas)
            order = np.lexsort((dl > 0, t))
            usage = np.cumsum(dl[order])
            self._cache = (t.size, t[order], np.maximum.accumulate(usage[::-1])[::-1])
        _, t, suffix = self._cache
        limit = self.capacity - extra
        k0 = int(np.searchsorted(t, start, side="right")) - 1
        if k0 < 0 and (suffix.size == 0 or max(0.0, float(suffix[0])) <= limit):
            return start
        k = max(k0, int(np.searchsorted(-suffix, -limit, side="left")), 0)
        if k >= t.size:
            return _INF
        return max(start, float(t[k]))


def topological_positions(inst: PlacementInstance, ids: list[int] | None = None) -> tuple[list[int], list[int]]:
    """Kahn's order with the smallest op id first among ready ops (the order of
    `PlacementInstance.topo_order`), as (order, position of each op); O((V + E) log V).
    ``ids``: the int objects to share (`StaticLists.ids`)."""
    return kahn_positions(inst.n_ops, inst.src, inst.dst, ids)


def kahn_positions(n: int, src: np.ndarray, dst: np.ndarray, ids: list[int] | None = None) -> tuple[list[int], list[int]]:
    """`topological_positions` of the graph with ``n`` nodes and edges ``src`` -> ``dst``
    (`graphs.topological_order` and its inverse; the identity when the numbering is
    topological already), its ints the objects of ``ids`` (``list(range(n))``) when given,
    else one set of int objects for both."""
    if ids is None:
        ids = list(range(n))
    if np.all(src < dst):  # graphs' fast path (copies: ``ids`` itself stays as it is)
        return ids[:], ids[:]
    order = topological_order(n, src, dst)
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n)
    objs = id_objects(ids)
    return shared_ints(order, objs), shared_ints(pos, objs)


def id_objects(ids: list[int]) -> np.ndarray:
    """``ids`` as a numpy array of dtype object holding the same int objects (for
    `shared_ints`)."""
    objs = np.empty(len(ids), dtype=object)
    objs[:] = ids
    return objs


def shared_ints(a: np.ndarray, objs: np.ndarray) -> list[int]:
    """``a.tolist()`` with the int objects of ``objs`` (`id_objects` of ``ids``, ``ids[i] ==
    i``): each op's id is one object however many lists hold it, so the scheduler's working
    set stays small (an int object takes 32 bytes, a list slot 8). Gathered by numpy on
    object pointers: no int is made (at 100k ops 3-8x faster than mapping ``ids`` over
    ``a.tolist()``)."""
    return objs[a].tolist()  # type: ignore[no-any-return]


def consumers_of(inst: PlacementInstance) -> list[list[int]]:
    """Per op, the consumers of its out-edges in edge id order."""
    return successors(inst.n_ops, inst.src, inst.dst)


def successors(n: int, src: np.ndarray, dst: np.ndarray) -> list[list[int]]:
    """Per node, the heads of its out-edges in edge id order."""
    e_out = edges_by(src, n)
    cut = np.searchsorted(src[e_out], np.arange(n + 1)).tolist()
    dsts = dst[e_out].tolist()
    return [dsts[cut[v] : cut[v + 1]] for v in range(n)]


def check_favorites(inst: PlacementInstance, favorite: np.ndarray) -> list[int]:
    """``favorite`` as a list, after checking that each op has at most one favorite child
    (a successor's id, or -1), and each op is the favorite of at most one op."""
    n = inst.n_ops
    fv = np.asarray(favorite, dtype=np.int64)
    has = np.flatnonzero(fv >= 0) if fv.shape == (n,) else np.zeros(0, dtype=np.int64)
    edges = np.sort(inst.src * n + inst.dst)
    want = has * n + fv[has] if fv.shape == (n,) else has
    at = np.minimum(np.searchsorted(edges, want), max(edges.size - 1, 0))
    if (
        fv.shape != (n,)
        or np.any(fv >= n)
        or np.any(np.bincount(fv[has], minlength=1) > 1)
        or (want.size > 0 and (edges.size == 0 or np.any(edges[at] != want)))
    ):
        raise ValueError("favorite must give each op at most one favorite child (a successor's id or -1), each the favorite of at most one op")
    return fv.tolist()  # type: ignore[no-any-return]


@dataclass
class StaticLists:
    """What the scheduler reads of the instance, flat and indexed by op / edge / device /
    group: the in-edges of op v are ``in_src[k], in_bytes[k]`` for k in ``range(in_cut[v],
    in_cut[v + 1])`` (in edge id order), its consumers ``out_dst[out_cut[v]:out_cut[v + 1]]``.

    Compact: op ids are the int objects of ``ids`` wherever they appear (one 32-byte object
    per op instead of one per list entry; a list slot takes 8 bytes). Numbers stay in lists:
    `array.array` would take 8 bytes an entry instead of 40, but every read then makes an
    object (callgrind, 100k-op m-TOPO schedule: +6% instructions and +19% first-level
    instruction-cache misses against half the last-level misses; no faster in CPU time).
    Flat rather than a list per op: at 100k ops the per-op objects took ~35 MB more. What only the liveness memory model reads
    (``gpers``, ``transient``, ``temporary``, ``output``, ``consumers``) and what only the
    channel model reads (``ins``, ``distinct``) are empty otherwise."""

    ids: list[int]  # list(range(n)): the int objects of op ids (`shared_ints`)
    ins: list[list[tuple[int, float, int]]]  # channel model only: per op, (producer, bytes, key) of its in-edges
    n_tensors: int  # channel model: distinct (producer, bytes) pairs; an in-edge's key is its pair's index x n_devices
    in_cut: list[int]
    in_src: list[int]  # producer per in-edge
    in_bytes: list[float]  # bytes per in-edge
    out_cut: list[int]
    out_dst: list[int]  # consumer per out-edge
    distinct: list[bool]  # per op: its in-edges carry distinct tensors (producer, bytes)
    times: list[float]  # seconds of op v on device d at v * t_op + d * t_dev
    t_op: int  # n_devices, or 1 when every op takes the same time on every device
    t_dev: int  # 1, or 0 when every op takes the same time on every device
    groups: list[int]  # colocation group per op
    gneed: list[float]  # per group: bytes under the instance's memory model
    gpers: list[float]  # per group: persistent bytes
    members: dict[int, list[int]]  # ops of every group with more than one op
    transient: list[float]  # per op: temporary + output bytes
    temporary: list[float]
    output: list[float]
    consumers: list[int]  # per op: out-degree
    indeg: list[int]
    inv_bw: list[list[float]]  # s/byte per device pair
    lat: list[list[float]]  # s per device pair
    homogeneous: bool  # every pair of distinct devices has the same latency and bandwidth
    lat0: float  # that latency (s) and inverse bandwidth (s/byte)
    ib0: float
    remote_last: bool  # homogeneous, and no transfer arrives before its tensor's end (delays and bytes finite, >= 0)

    def outs(self, v: int) -> list[int]:
        """The consumers of op v's out-edges, in edge id order."""
        return self.out_dst[self.out_cut[v] : self.out_cut[v + 1]]


def static_lists(inst: PlacementInstance, with_members: bool) -> StaticLists:
    """The instance as `StaticLists`; ``members`` only when ``with_members``. The lists are
    only read by the scheduler: one `StaticLists` serves any number of `list_schedule` calls
    on the instance (with the same ``with_members``)."""
    n, nd = inst.n_ops, inst.n_devices
    ids = list(range(n))
    objs = id_objects(ids)
    e_in = edges_by(inst.dst, n)
    e_out = edges_by(inst.src, n)
    groups_a = inst.colocation_groups()
    groups = shared_ints(groups_a, objs)
    gsize = np.bincount(groups_a)
    members: dict[int, list[int]] = {}
    if with_members and np.any(gsize > 1):
        for v, g in enumerate(groups):
            if gsize[g] > 1:
                members.setdefault(g, []).append(v)
    off = ~np.eye(nd, dtype=bool)
    inv = 1.0 / inst.bandwidth
    time_a = np.asarray(inst.time, dtype=float)
    same_time = bool(nd == 1 or np.all(time_a == time_a[:, :1]))
    liveness = inst.memory_model == "liveness"
    indeg = np.bincount(inst.dst, minlength=n)
    outdeg = np.bincount(inst.src, minlength=n)
    in_cut = np.concatenate([[0], np.cumsum(indeg)]).astype(np.int64)
    src_in = inst.src[e_in]
    in_src = shared_ints(src_in, objs)
    bytes_in = inst.edge_bytes[e_in].astype(float)
    channels = inst.communication == "channels"
    ins: list[list[tuple[int, float, int]]] = []
    n_tensors = 0
    if channels:
        # a tensor is a (producer, bytes) pair: its index keys the arrival lists
        tensor, n_tensors = tensor_ids(src_in, bytes_in)
        triples = list(zip(in_src, bytes_in.tolist(), (tensor * nd).tolist()))
        cut = in_cut.tolist()
        ins = [triples[cut[v] : cut[v + 1]] for v in range(n)]
    homogeneous = bool(nd == 1 or (np.ptp(inst.latency[off]) == 0 and np.ptp(inv[off]) == 0))
    lat0 = float(inst.latency[off][0]) if nd > 1 else 0.0
    ib0 = float(inv[off][0]) if nd > 1 else 0.0
    return StaticLists(
        ids=ids,
        ins=ins,
        n_tensors=n_tensors,
        in_cut=in_cut.tolist(),
        in_src=in_src,
        in_bytes=bytes_in.tolist(),
        out_cut=np.concatenate([[0], np.cumsum(outdeg)]).tolist(),
        out_dst=shared_ints(inst.dst[e_out], objs),
        distinct=_distinct(indeg, tensor, n_tensors) if channels else [],
        times=(time_a[:, 0] if same_time else time_a.ravel()).tolist(),
        t_op=1 if same_time else nd,
        t_dev=0 if same_time else 1,
        groups=groups,
        gneed=np.bincount(groups_a, weights=inst.memory_need()).tolist(),
        gpers=np.bincount(groups_a, weights=inst.memory).tolist() if liveness else [],
        members=members,
        transient=(inst.temporary + inst.output).tolist() if liveness else [],
        temporary=np.asarray(inst.temporary, dtype=float).tolist() if liveness else [],
        output=np.asarray(inst.output, dtype=float).tolist() if liveness else [],
        consumers=outdeg.tolist() if liveness else [],
        indeg=indeg.tolist(),
        inv_bw=inv.tolist(),
        lat=np.asarray(inst.latency, dtype=float).tolist(),
        homogeneous=homogeneous,
        lat0=lat0,
        ib0=ib0,
        remote_last=homogeneous and 0 <= lat0 < _INF and 0 <= ib0 < _INF and bool(np.all((bytes_in >= 0) & (bytes_in < _INF))),
    )


def memory_never_binds(inst: PlacementInstance, assignment: np.ndarray | None) -> bool:
    """Can no memory check of the list scheduler fail? True when every byte it could ever
    charge a device fits there (with a relative margin of 1e-9 against rounding): under
    the liveness model the persistent bytes of every op's group plus its temporary and
    output bytes, which bound the bytes ever allocated on a device (`MemoryTimeline` is then
    never asked), under the simple model every op's group's need (a group counted once per
    member: an upper bound); with ``assignment`` (every op's device) only the ops assigned to
    each device count. Every memory size must be >= 0 (else False). Vectorized: O(V)."""
    groups = inst.colocation_groups()
    if inst.memory_model == "liveness":
        per_op = np.asarray(inst.temporary, dtype=float) + np.asarray(inst.output, dtype=float) + np.bincount(groups, weights=inst.memory)[groups]
    else:
        per_op = np.bincount(groups, weights=inst.memory_need())[groups]
    if per_op.size == 0:
        return True
    if not all(np.all(np.asarray(x) >= 0) for x in (inst.memory, inst.temporary, inst.output, per_op)):  # also NaN
        return False
    cap = np.asarray(inst.device_memory, dtype=float)
    if assignment is None:
        charged = np.full(inst.n_devices, per_op.sum())
    else:
        charged = np.bincount(np.asarray(assignment, dtype=np.int64), weights=per_op, minlength=inst.n_devices)
    return bool(np.all(charged * (1 + 1e-9) <= cap))


def tensor_ids(src: np.ndarray, nbytes: np.ndarray) -> tuple[np.ndarray, int]:
    """Per edge (producer ``src``, ``nbytes`` bytes) the index of its tensor, the distinct
    (producer, bytes) pairs numbered in sorted order (NaN bytes: a tensor of its own), and
    their number."""
    o = np.lexsort((nbytes, src))
    s_o, b_o = src[o], nbytes[o]
    first = np.r_[True, (s_o[1:] != s_o[:-1]) | (b_o[1:] != b_o[:-1])] if o.size else np.zeros(0, dtype=bool)
    tensor = np.empty(o.size, dtype=np.int64)
    tensor[o] = np.cumsum(first) - 1
    return tensor, int(first.sum())


def _distinct(indeg: np.ndarray, tensor: np.ndarray, n_tensors: int) -> list[bool]:
    """Per op: no two of its in-edges (``indeg`` each, their ``tensor`` ids in op order)
    carry the same tensor."""
    pair = np.sort(np.repeat(np.arange(indeg.size, dtype=np.int64), indeg) * max(n_tensors, 1) + tensor)
    distinct = np.ones(indeg.size, dtype=bool)
    distinct[pair[1:][pair[1:] == pair[:-1]] // max(n_tensors, 1)] = False
    return distinct.tolist()  # type: ignore[no-any-return]


def distinct_inputs(inst: PlacementInstance) -> list[bool]:
    """Per op: no two of its in-edges carry the same tensor (producer and bytes)."""
    e_in = edges_by(inst.dst, inst.n_ops)
    tensor, n_tensors = tensor_ids(inst.src[e_in], inst.edge_bytes[e_in].astype(float))
    return _distinct(np.bincount(inst.dst, minlength=inst.n_ops), tensor, n_tensors)


def independent_arrival(src_v: list[int], bytes_v: list[float], device: list[int], end: list[float], st: StaticLists) -> list[float]:
    """Arrival time (s) of an op's last input on every device without channel contention,
    its inputs from producers ``src_v`` (``bytes_v`` bytes each) placed on ``device`` and
    ending at ``end`` (s). With ``st.remote_last`` the largest remote arrival is at least every
    local one: only its device's arrival differs (the runner-up from another device, or the
    local inputs)."""
    nd = len(st.lat)
    if st.homogeneous:  # one delay per tensor: the largest remote arrival and the runner-up
        lat0, ib0 = st.lat0, st.ib0
        loc = [0.0] * nd  # from another device than the largest
        top1 = top2 = 0.0
        dev1 = -1
        for u, b in zip(src_v, bytes_v):
            du = device[u]
            eu = end[u]
            if eu > loc[du]:
                loc[du] = eu
            a = eu + lat0 + b * ib0
            if a > top1:
                if du != dev1:
                    top2 = top1
                top1 = a
                dev1 = du
            elif du != dev1 and a > top2:
                top2 = a
        rt = [top1] * nd if st.remote_last else [lo if lo >= top1 else top1 for lo in loc]
        if dev1 >= 0:
            lo = loc[dev1]
            rt[dev1] = lo if lo >= top2 else top2
        return rt
    rt = [0.0] * nd
    for u, b in zip(src_v, bytes_v):
        du = device[u]
        eu = end[u]
        la, ib = st.lat[du], st.inv_bw[du]
        for d in range(nd):
            a = eu if d == du else eu + la[d] + b * ib[d]
            if a > rt[d]:
                rt[d] = a
    return rt


def arrival_on(src_v: list[int], bytes_v: list[float], d: int, device: list[int], end: list[float], st: StaticLists) -> float:
    """`independent_arrival` on device d alone (s)."""
    lat, inv_bw = st.lat, st.inv_bw
    r = 0.0
    for u, b in zip(src_v, bytes_v):
        du = device[u]
        a = end[u] if du == d else end[u] + lat[du][d] + b * inv_bw[du][d]
        if a > r:
            r = a
    return r


def raise_never_starts(inst: PlacementInstance, v: int, placed: int) -> NoReturn:
    """NoSolutionError for op v, ready but with an infinite earliest start on every device
    it may run on (an infinite transfer time, bytes / bandwidth, or op time) while memory
    does not stop it: the list scheduler stops there, which proves nothing about other
    plans."""
    raise NoSolutionError(
        f"{inst.name}: op {inst.op_names[v]!r} can never start: its earliest start is infinite (an infinite transfer time, bytes / bandwidth, or op time), not its memory; "
        f"{placed} of {inst.n_ops} ops were placed",
        {"op": inst.op_names[v]},
    )


def raise_no_fit(inst: PlacementInstance, v: int, device: int, want: float, free: float, placed: int) -> NoReturn:
    """NoSolutionError for op v that needs ``want`` bytes where ``device`` has ``free``
    (bytes; negative when the ops placed there already hold more than it has, as a fixed
    assignment can make them): the list scheduler stops there, which proves nothing about
    other plans (``details["stopped"]``: where, without the instance's name)."""
    if free < 0:
        where = f"device {inst.device_names[device]!r} is already {byte_text(-free)} bytes over its capacity with the ops placed there"
    else:
        where = f"device {inst.device_names[device]!r} has only {byte_text(free)} free"
    stopped = f"op {inst.op_names[v]!r} needs {byte_text(want)} bytes but {where} (short by {byte_text(want - free)} bytes); {placed} of {inst.n_ops} ops were placed"
    raise NoSolutionError(
        f"{inst.name}: {stopped}",
        {"op": inst.op_names[v], "device": inst.device_names[device], "shortfall_bytes": float(want - free), "stopped": stopped},
    )
