"""Module windows joined by co-location: one bound on the sum of two windows' spans.

In a traced training graph a forward block (an Inception module) and its gradient block
share co-location groups (an op and its gradient run on one device), so in every plan
one assignment serves both. The series composition (`segments`) bounds each window's
span by that window's optimum alone, the two optima possibly under assignments that no
plan can hold at once. Take two windows W_a and W_b of `segments` (modules M_a, M_b
between consecutive cut waists, with their waists as zero-time endpoints) that hold no op
in common. The joined instance J(a, b) is their disjoint union: the ops of both windows,
the waists at zero time on every device, only the edges inside one window (an edge from
a forward op to its gradient is left out), the co-location groups of the instance, and a
part label per op (0: W_a, 1: W_b). Its value is

    min over assignments x (co-location groups together, both windows' memory fitting
    each device at once) of  T_a(x) + T_b(x),

T_k(x) the least span of W_k's scheduling model under x restricted to W_k. For any plan
the evaluator accepts, its assignment restricted to the union is such an x (the plan
holds both windows' memory: all of it under the simple model, at least the persistent
part to the end under liveness), and each
window's ops with its waists, at their times in the plan, form a schedule of W_k's model
of span S(last_k) - C(first_k) (the argument of `segments`, under both communication
models and both memory models): the plan's two spans sum to at least T_a(x) + T_b(x),
hence at least the value of J(a, b). So in the composition

    makespan >= sum_k span_k + sum_k min_d p(w_k, d)

the two terms of a and b may be replaced by any lower bound on J(a, b), as long as each
window is counted once (the pairs of `tied_pairs` are disjoint). A program for J(a, b)
(the placement MILP with one span per part, `milp.JOINED_MILP`) keeps, per part,
precedence with transfer delays, one op at a time per device, the makespan rows and the
device loads; the memory rows sum over both parts (the plan holds both, under the simple
model; only what is held to the end under liveness), and a part's ops never conflict with the
other part's (two time axes). Device automorphisms of the instance (`device_automorphisms`:
renamings that keep op times, memory and every link) map a plan to one of equal spans, so
one op's device may be fixed to a representative of its orbit.

A decomposition bound on coupled sub-problems (the "linked modules" of Carlier & Néron,
EJOR 149(2), 2003, over Möhring's series decomposition, 1989). On inception-v3-dgx1-4 the
11 forward/gradient pairs, each solved to optimality, raise the composition by ~0.125 ms
over the separate windows' optima. Seconds throughout.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np

from distplan.models.placement_instance import PlacementInstance


def tied_pairs(inner: Sequence[np.ndarray], groups: np.ndarray, adjacent: Sequence[tuple[int, int]] = ()) -> list[tuple[int, int]]:
    """Disjoint pairs (a, b), a < b, of modules (``inner``: the ops of each module, its
    waists excluded) whose ops share a co-location group (``groups``: id per op), greedily
    by the number of groups they share (most first, then the earlier pair); pairs in
    ``adjacent`` (modules that share a waist, so their windows are not disjoint) are left
    out. Each module is in at most one pair, so the joined bounds of the pairs add up."""
    sets = [set(groups[np.asarray(ops, dtype=np.int64)].tolist()) for ops in inner]
    skip = {tuple(sorted(p)) for p in adjacent}
    cands: list[tuple[int, int, int]] = []
    for a in range(len(sets)):
        for b in range(a + 1, len(sets)):
            if (a, b) in skip or not sets[a] or not sets[b]:
                continue
            shared = len(sets[a] & sets[b])
            if shared:
                cands.append((-shared, a, b))
    used: set[int] = set()
    out: list[tuple[int, int]] = []
    for _, a, b in sorted(cands):
        if a not in used and b not in used:
            used.update((a, b))
            out.append((a, b))
    return out


def joined_instance(inst: PlacementInstance, ops_a: np.ndarray, ops_b: np.ndarray, ends: Sequence[int]) -> tuple[PlacementInstance, np.ndarray]:
    """J(a, b) of the module docstring: the ops ``ops_a`` and ``ops_b`` of ``inst`` (two
    windows' ops with their waists, disjoint; ValueError otherwise), the ops of ``ends``
    (the waists) at zero time, only the edges inside one of the two sets; and the part of
    each op of the result (0: ``ops_a``, 1: ``ops_b``; the result's ops in ``inst``'s
    order)."""
    a = np.zeros(inst.n_ops, dtype=bool)
    b = np.zeros(inst.n_ops, dtype=bool)
    a[np.asarray(ops_a, dtype=np.int64)] = True
    b[np.asarray(ops_b, dtype=np.int64)] = True
    if np.any(a & b):
        raise ValueError("the two windows share an op")
    keep = a | b
    ops = np.flatnonzero(keep)
    sub = inst.induced(keep)
    part = np.where(a[ops], 0, 1).astype(np.int64)
    inside = part[sub.src] == part[sub.dst]
    sub.src, sub.dst, sub.edge_bytes = sub.src[inside], sub.dst[inside], sub.edge_bytes[inside]
    sub.time = sub.time.copy()
    sub.time[np.searchsorted(ops, [v for v in ends if keep[v]])] = 0.0
    sub.name = f"{inst.name}-joined"
    return sub, part


def device_automorphisms(inst: PlacementInstance, max_devices: int = 6) -> list[np.ndarray]:
    """Renamings sigma of the devices (sigma[d]: the new name of device d) that keep every
    op's time and every device's memory (time[:, sigma[d]] = time[:, d]) and every link
    (bandwidth and latency between sigma[d] and sigma[e] equal those between d and e): a
    plan renamed so is accepted by the evaluator with the same start times. The identity
    first; only the identity above ``max_devices`` devices (at most max_devices!
    candidates are tried)."""
    m = inst.n_devices
    ident = np.arange(m, dtype=np.int64)
    if m > max_devices or m < 2:
        return [ident]
    off = ~np.eye(m, dtype=bool)
    out = [ident]
    for perm in itertools.permutations(range(m)):
        s = np.asarray(perm, dtype=np.int64)
        if np.array_equal(s, ident):
            continue
        if not (np.array_equal(inst.time[:, s], inst.time) and np.array_equal(inst.device_memory[s], inst.device_memory)):
            continue
        bw, lat = inst.bandwidth[np.ix_(s, s)], inst.latency[np.ix_(s, s)]
        if np.array_equal(bw[off], inst.bandwidth[off]) and np.array_equal(lat[off], inst.latency[off]):
            out.append(s)
    return out


def orbit_representatives(autos: Sequence[np.ndarray], m: int) -> np.ndarray:
    """The least device of each orbit of the group generated by ``autos`` on ``m``
    devices (sorted): every device is mapped to one of them by some element of ``autos``
    when ``autos`` is a group (as `device_automorphisms` returns: all of them)."""
    rep = np.arange(m, dtype=np.int64)
    for s in autos:
        for d in range(m):
            rep[d] = min(rep[d], int(s[d]))
    return np.unique(rep)
