"""The list scheduler's static data (`listsched_data.static_lists`): the flat edge lists
against the instance's edges, the edge sort against numpy's stable argsort, and one
`StaticLists` reused by many `list_schedule` calls giving the plans of fresh ones."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
from test_placement_heuristics import random_instance

from distplan.formulations.placement.listsched import list_schedule
from distplan.formulations.placement.listsched_data import edges_by, kahn_positions, static_lists
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict


def test_edges_by_is_a_stable_argsort() -> None:
    rng = np.random.default_rng(3)
    for n, m in ((1, 0), (5, 1), (40, 300), (70_000, 5_000), (300_000, 20_000)):  # the last two: radix sort of two 16-bit halves
        key = rng.integers(0, n, size=m)
        assert np.array_equal(edges_by(key, n), np.argsort(key, kind="stable"))
        key.sort()
        assert np.array_equal(edges_by(key, n), np.arange(m))


def test_flat_lists_hold_every_edge_in_edge_id_order() -> None:
    for seed in range(12):
        inst = random_instance(seed)
        st = static_lists(inst, True)
        for v in range(inst.n_ops):
            ins = np.flatnonzero(inst.dst == v)
            got = range(st.in_cut[v], st.in_cut[v + 1])
            assert [st.in_src[k] for k in got] == inst.src[ins].tolist()
            assert [st.in_bytes[k] for k in got] == inst.edge_bytes[ins].tolist()
            assert st.outs(v) == inst.dst[inst.src == v].tolist()
        assert st.indeg == np.bincount(inst.dst, minlength=inst.n_ops).tolist()
        same = bool(np.all(inst.time == inst.time[:, :1]))
        assert (st.t_op, st.t_dev, len(st.times)) == ((1, 0, inst.n_ops) if same or inst.n_devices == 1 else (inst.n_devices, 1, inst.time.size))
        for v in range(inst.n_ops):
            for d in range(inst.n_devices):
                assert st.times[v * st.t_op + d * st.t_dev] == inst.time[v, d]


def test_kahn_positions_are_inverse_permutations() -> None:
    rng = np.random.default_rng(4)
    for n in (1, 6, 50):
        src = rng.integers(0, n, size=3 * n)
        dst = rng.integers(0, n, size=3 * n)
        keep = src != dst
        lo, hi = np.minimum(src, dst)[keep], np.maximum(src, dst)[keep]
        for perm in (np.arange(n), rng.permutation(n)):  # forward numbering (fast path) and shuffled
            order, pos = kahn_positions(n, perm[lo], perm[hi])
            assert sorted(order) == list(range(n))
            assert all(pos[v] == k for k, v in enumerate(order))
            assert all(pos[a] < pos[b] for a, b in zip(perm[lo].tolist(), perm[hi].tolist()))


def test_one_static_serves_many_schedules() -> None:
    """The scheduler counts in-degrees and consumers down on copies: a `StaticLists` passed
    to several calls (as the local search does, one per move) gives the fresh result each
    time, for free and fixed assignments and both memory models."""
    rng = np.random.default_rng(5)
    for seed in range(30):
        inst = random_instance(seed)
        groups = inst.colocation_groups()
        st_free, st_fixed = static_lists(inst, True), static_lists(inst, False)
        for _ in range(3):
            assignment = rng.integers(0, inst.n_devices, size=int(groups.max()) + 1)[groups]
            for kw, st in (({}, st_free), ({"assignment": assignment}, st_fixed)):
                try:
                    fresh = list_schedule(inst, **kw)  # type: ignore[arg-type]
                except Exception as e:  # noqa: BLE001 (the same error is expected)
                    fresh_err = str(e)
                    try:
                        list_schedule(inst, static=st, **kw)  # type: ignore[arg-type]
                    except Exception as e2:  # noqa: BLE001
                        assert str(e2) == fresh_err
                    else:
                        raise AssertionError("the reused static lists scheduled an infeasible instance")
                    continue
                again = list_schedule(inst, static=st, **kw)  # type: ignore[arg-type]
                assert again.device.tolist() == fresh.device.tolist() and again.start.tolist() == fresh.start.tolist()


def test_tensor_keys_and_shared_op_ids() -> None:
    """Under the channel model two in-edges share an arrival key exactly when they carry the
    same tensor (producer and bytes), keys are the tensor's index times the device count;
    op ids in the edge lists, the groups and the topological order are the objects of
    ``ids`` (one int object per op: the compact working set)."""
    big = instance_from_dict(random_layered_dag(600, n_devices=3, seed=1))  # ids above 256: not the interpreter's cached small ints
    for inst in (big, dataclasses.replace(big, dst=big.src[::-1].copy(), src=big.dst[::-1].copy())):  # forward and reversed numbering
        st = static_lists(inst, True)
        order, pos = kahn_positions(inst.n_ops, inst.src, inst.dst, st.ids)
        for lst in (st.in_src, st.out_dst, st.groups, order, pos):
            assert all(x is st.ids[x] for x in lst)
    seen = 0
    for seed in range(40):
        inst = random_instance(seed)
        st = static_lists(inst, True)
        if inst.communication != "channels":
            assert st.ins == [] and st.n_tensors == 0
            continue
        seen += 1
        nd = inst.n_devices
        key_of: dict[tuple[int, float], int] = {}
        for v in range(inst.n_ops):
            assert [(u, b) for u, b, _ in st.ins[v]] == [(st.in_src[k], st.in_bytes[k]) for k in range(st.in_cut[v], st.in_cut[v + 1])]
            for u, b, k in st.ins[v]:
                assert k % nd == 0 and 0 <= k // nd < st.n_tensors
                assert key_of.setdefault((u, b), k) == k
        assert len(set(key_of.values())) == len(key_of) == st.n_tensors
    assert seen > 5


def test_topological_order_is_a_copy_of_the_shared_ids() -> None:
    """`kahn_positions` shares the int objects of ``ids`` but never the list itself: a
    caller that reorders its order leaves `StaticLists.ids` (``ids[i] == i``) intact."""
    inst = instance_from_dict(random_layered_dag(300, n_devices=2, seed=1))
    st = static_lists(inst, True)
    order, pos = kahn_positions(inst.n_ops, inst.src, inst.dst, st.ids)
    assert order is not st.ids and pos is not st.ids
    order.reverse()
    assert st.ids == list(range(inst.n_ops))
    assert kahn_positions(inst.n_ops, inst.src, inst.dst, st.ids)[0] == list(range(inst.n_ops))



def test_channel_arrivals_before_time_zero_count_as_sent() -> None:
    """A tensor already sent to a device is not sent again even when its arrival is
    negative (an instance built with negative latency, which the parser refuses): the
    reference scheduler's plan, under the channel model, on a random 41-op instance whose
    producers send one tensor to several consumers (a marker of -1 for "not sent" re-sent
    them and gave another plan)."""
    from placement_reference import reference_list_schedule
    from test_placement_heuristics import outcome

    inst = instance_from_dict(json.loads((Path(__file__).parent / "data" / "channels_shared_tensors.json").read_text()))
    assert inst.communication == "channels"
    latency = inst.latency.copy()
    latency[~np.eye(inst.n_devices, dtype=bool)] = -50.0
    inst = dataclasses.replace(inst, latency=latency)
    assert outcome(list_schedule, inst) == outcome(reference_list_schedule, inst)


def test_arrivals_from_the_largest_remote_one_match_the_general_form() -> None:
    """`independent_arrival` with ``remote_last`` (every device but the largest remote
    arrival's gets that arrival) gives the per-device maximum of the general form, bit for
    bit, on random inputs with ties, zero bytes and local producers; the flag is off when a
    delay could put an arrival before its tensor's end (negative latency, NaN bytes)."""
    from distplan.formulations.placement.listsched_data import independent_arrival

    def per_device_max(src: list[int], nbytes: list[float], device: list[int], end: list[float], st: Any, nd: int) -> list[float]:
        """Every input's arrival on every device, the largest kept, never below 0."""
        return [max([0.0] + [end[u] if device[u] == d else end[u] + st.lat0 + b * st.ib0 for u, b in zip(src, nbytes)]) for d in range(nd)]

    rng = np.random.default_rng(5)
    layered = instance_from_dict(random_layered_dag(50, n_devices=3, seed=2))
    assert static_lists(layered, False).remote_last
    latency = layered.latency.copy()
    latency[~np.eye(3, dtype=bool)] = -1.0
    negative = dataclasses.replace(layered, latency=latency)
    assert not static_lists(negative, False).remote_last
    checked = 0
    for inst in [random_instance(seed) for seed in range(40)] + [layered, negative]:
        st = static_lists(inst, False)
        if not st.homogeneous:
            continue
        assert st.remote_last == (st.lat0 >= 0 and all(b >= 0 for b in st.in_bytes))
        general = dataclasses.replace(st, remote_last=False)
        nd = inst.n_devices
        for _ in range(30):
            k = int(rng.integers(0, 6))
            src = rng.integers(0, 8, size=k).tolist()
            nbytes = rng.choice([0.0, 10.0, 20.0], size=k).tolist()
            device = rng.integers(0, nd, size=8).tolist()
            end = (rng.integers(0, 4, size=8) * 0.5).tolist()
            got = independent_arrival(src, nbytes, device, end, st)
            assert got == independent_arrival(src, nbytes, device, end, general)
            assert got == per_device_max(src, nbytes, device, end, st, nd)
            checked += 1
    assert checked > 300
    nan_bytes = inst.edge_bytes.astype(float)
    nan_bytes[0] = np.nan
    assert not static_lists(dataclasses.replace(inst, edge_bytes=nan_bytes), False).remote_last


def _charged(inst: Any, assignment: np.ndarray | None) -> np.ndarray:
    """Bytes the scheduler may ever charge each device, written out per op (persistent
    bytes of the op's group plus its temporary and output bytes under liveness; the group's
    need under the simple model), over all ops or those assigned to the device."""
    groups = inst.colocation_groups()
    if inst.memory_model == "liveness":
        per_op = [float(inst.memory[groups == groups[v]].sum() + inst.temporary[v] + inst.output[v]) for v in range(inst.n_ops)]
    else:
        per_op = [float(inst.memory[groups == groups[v]].sum()) for v in range(inst.n_ops)]
    if assignment is None:
        return np.full(inst.n_devices, sum(per_op))
    return np.array([sum(p for p, a in zip(per_op, assignment) if a == d) for d in range(inst.n_devices)])


def test_memory_never_binds_at_its_boundary_and_schedules_as_the_reference() -> None:
    """With every device's capacity just above the bytes the scheduler could ever charge it, memory
    cannot bind (the timelines are skipped); one byte less on one device and it may. Both
    sides schedule as the reference (free and fixed assignments, both memory models, channels
    or not); negative memory never counts as loose."""
    from placement_reference import reference_list_schedule
    from test_placement_heuristics import outcome

    from distplan.formulations.placement.listsched_data import memory_never_binds

    rng = np.random.default_rng(11)
    seen = 0
    for seed in range(40):
        base = random_instance(seed)
        groups = base.colocation_groups()
        assignment = rng.integers(0, base.n_devices, size=int(groups.max()) + 1)[groups]
        for asg in (None, assignment):
            charged = _charged(base, asg)
            for short in (0.0, 1.0):  # 0: a relative 1e-8 above (the check keeps a 1e-9 margin against rounding)
                cap = np.maximum(charged, 1.0) * (1 + 1e-8)
                d = int(np.argmax(charged))
                cap[d] = charged[d] * (1 + 1e-8) - short
                if cap[d] <= 0:
                    continue
                inst = dataclasses.replace(base, device_memory=cap)
                loose = memory_never_binds(inst, asg)
                assert loose == (short == 0.0), (seed, asg is None, short)
                seen += loose
                kw = {} if asg is None else {"assignment": asg}
                assert outcome(list_schedule, inst, **kw) == outcome(reference_list_schedule, inst, **kw), (seed, short)
    assert seen > 40
    inst = random_instance(3)
    neg = dataclasses.replace(inst, memory=-np.ones(inst.n_ops), device_memory=np.full(inst.n_devices, 1e30))
    assert not memory_never_binds(neg, None)


def test_memory_never_binds_keeps_its_relative_margin() -> None:
    """Loose only when every device holds what could be charged it times 1 + 1e-9: at
    1 + 2e-9 yes, at 1 + 0.5e-9 and below no, at byte scales 1 and 1e9 (simple and
    liveness memory, free and fixed assignments)."""
    from distplan.formulations.placement.listsched_data import memory_never_binds

    for seed in range(6):
        base = random_instance(seed)
        groups = base.colocation_groups()
        assignment = np.arange(int(groups.max()) + 1)[groups] % base.n_devices
        for scale in (1.0, 1e9):
            scaled = dataclasses.replace(base, memory=base.memory * scale, temporary=base.temporary * scale, output=base.output * scale)
            for asg in (None, assignment):
                charged = _charged(scaled, asg)
                if charged.max() <= 0:
                    continue
                for rel, loose in ((2e-9, True), (0.5e-9, False), (0.0, False)):
                    cap = np.where(charged > 0, charged * (1 + rel), 1.0)
                    inst = dataclasses.replace(scaled, device_memory=cap)
                    assert memory_never_binds(inst, asg) == loose, (seed, scale, asg is None, rel)


def test_an_assignment_must_give_every_op_a_device() -> None:
    """``assignment`` fixes every op's device: a -1 entry (no device), a device beyond the
    last or a wrong length is refused by name before scheduling, and a whole one schedules."""
    import pytest

    base = random_instance(4)
    inst = dataclasses.replace(base, device_memory=np.full(base.n_devices, 1e30))
    whole = np.asarray(list_schedule(inst).device, dtype=np.int64)
    assert np.array_equal(list_schedule(inst, assignment=whole).device, whole)
    for bad in (np.where(np.arange(inst.n_ops) == 1, -1, whole), np.where(np.arange(inst.n_ops) == 2, inst.n_devices, whole), whole[:-1]):
        with pytest.raises(ValueError, match="assignment must give each of the"):
            list_schedule(inst, assignment=bad)
