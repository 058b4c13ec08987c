"""Series composition over waist ops: segment bounds added up along a chain of ops.

Take ops i_1, ..., i_K, each a descendant of the one before (a chain of "waists", such as
the encoder's output stack, the attention memory layer and the output projection of a
sequence model). In any plan, every ancestor of i_1 ends before i_1 starts, every op
between i_k and i_{k+1} (a descendant of i_k and an ancestor of i_{k+1}) runs after i_k
ends and before i_{k+1} starts, and every descendant of i_K starts after i_K ends. The
plan's times restricted to the ops of one segment satisfy every constraint of the induced
sub-instance's scheduling model (fewer ops, fewer transfers: every precedence, device,
channel and memory constraint still holds, under both communication models and both
memory models), so its span is at least any lower bound L(S) of that model's optimum (not
of the evaluator's optimum of the sub-instance under channels, which re-times by a greedy
simulation that can end later without the ops left out), and

    makespan >= L(anc(i_1)) + p(i_1) + L(between(i_1, i_2)) + p(i_2) + ... + p(i_K) + L(desc(i_K)),

p the fastest time of the waist. Ops related to no waist in the right way (neither an
ancestor nor a descendant of some waist) are simply left out, which only lowers the
bound. This is the series decomposition of precedence-constrained scheduling bounds
(Möhring, "Computationally tractable classes of ordered sets", 1989, for the modular
decomposition; Klein & Scholl, EJOR 112(2), 1999, for bounds combined over parts of a
project). L is the best of the sub-instance's critical path, its work over the devices and
its forced co-location + one-machine bound (`forced`), so each segment gains what the
destructive rules prove inside it, with heads and tails of its own.

The waists are ops on a longest path (fastest times) whose unrelated work (ops neither
before nor after them) is at most ``unrelated_share`` of the total: those split the graph
into consecutive segments. Seconds throughout.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from distplan.formulations.placement.bounds import critical_path
from distplan.formulations.placement.forced import forced_bound
from distplan.formulations.placement.forced import recheck as forced_recheck
from distplan.formulations.placement.listsched_data import successors
from distplan.formulations.placement.relaxation import heads_tails
from distplan.formulations.registry import Bound, Unchecked, round_down
from distplan.models.placement_instance import PlacementInstance

SOURCE = "series composition over waist ops (segment bounds added along a chain)"


def reachable(n: int, adj: list[list[int]], start: int) -> np.ndarray:
    """Ops reachable from ``start`` along ``adj`` (boolean per op, ``start`` excluded)."""
    seen = np.zeros(n, dtype=bool)
    stack = list(adj[start])
    while stack:
        v = stack.pop()
        if not seen[v]:
            seen[v] = True
            stack.extend(adj[v])
    return seen


def segment_bound(sub: PlacementInstance, deadline: float | None = None) -> float:
    """A lower bound (seconds) on the makespan of ``sub``: the best of its critical path,
    its work over the devices and its forced co-location + one-machine bound (searched up
    to its single-device time, until ``deadline``, a ``time.perf_counter()`` value)."""
    if sub.n_ops == 0:
        return 0.0
    best = easy_segment_bound(sub)
    upper = float(sub.time.sum(axis=0).min())
    if sub.n_devices > 1 and sub.n_edges and upper > best:
        b = forced_bound(sub, upper, deadline=deadline)
        if b is not None:
            best = max(best, b.value)
    return best


def waist_chain(inst: PlacementInstance, unrelated_share: float = 0.01, candidates: int = 1000, deadline: float | None = None) -> list[int]:
    """Waists in path order, each a descendant of the one before: among up to
    ``candidates`` ops of longest length through them (fastest times), in order of their
    heads, those whose unrelated work is at most ``unrelated_share`` of the total work
    (looked at until ``deadline``, a ``time.perf_counter()`` value)."""
    n = inst.n_ops
    if n < 3 or inst.n_edges == 0:
        return []
    p = inst.time.min(axis=1)
    r, q = heads_tails(inst, p)
    length = r + p + q
    total = float(p.sum())
    on_path = np.flatnonzero(length >= length.max() * (1 - 1e-12))
    on_path = on_path[np.argsort(r[on_path], kind="stable")]
    if on_path.size > candidates:
        on_path = on_path[np.unique(np.linspace(0, on_path.size - 1, candidates).round().astype(np.int64))]
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    chain: list[int] = []
    after = np.ones(n, dtype=bool)  # descendants of the last waist kept (a chain: each after the one before)
    for v in on_path.tolist():
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if not after[v]:
            continue
        desc = reachable(n, succ, v)
        related = desc | reachable(n, pred, v)
        related[v] = True
        if total - float(p[related].sum()) <= unrelated_share * total:
            chain.append(v)
            after = desc
    return chain


def chain_segments(inst: PlacementInstance, chain: list[int]) -> list[np.ndarray]:
    """The segments of ``chain`` (ops each a descendant of the one before; ValueError
    otherwise), as op masks: the ancestors of the first waist, the ops between each waist
    and the next, and the descendants of the last."""
    n = inst.n_ops
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    segments: list[np.ndarray] = []
    before = np.ones(n, dtype=bool)  # descendants of the previous waist (all ops at first)
    for v in chain:
        if not before[v]:
            raise ValueError(f"op {inst.op_names[v]!r} does not follow the waist before it")
        segments.append(before & reachable(n, pred, v))
        before = reachable(n, succ, v)
    segments.append(before)
    return segments


def composed_bound(inst: PlacementInstance, chain: list[int], deadline: float | None = None) -> float:
    """The series composition (module docstring, seconds) over ``chain``, ops each a
    descendant of the one before (ValueError otherwise), each segment bounded by
    `segment_bound` within an equal share of the time to ``deadline`` (a
    ``time.perf_counter()`` value). Not rounded."""
    p = inst.time.min(axis=1)
    segments = chain_segments(inst, chain)
    value = float(p[chain].sum())
    for k, seg in enumerate(segments):
        share = None
        if deadline is not None:
            share = time.perf_counter() + max(0.0, deadline - time.perf_counter()) / (len(segments) - k)
        value += segment_bound(inst.induced(seg), share)
    return value


def best_composition(inst: PlacementInstance, chain: list[int], deadline: float | None = None, parts: list[float] | None = None) -> tuple[float, list[int]]:
    """The best series composition over sub-chains of ``chain`` (ops each a descendant of
    the one before): every segment between two of its waists (or the start or the end) is
    bounded by `segment_bound`, the shortest first, until ``deadline`` (a
    ``time.perf_counter()`` value; the segments of the whole chain and of each waist alone
    are always bounded), and a longest path over the waists picks the best sub-chain:
    (seconds, not rounded; the waists used). A finer split is not always better: it can cut
    apart what a segment's rules see in one piece, such as a fork and its join."""
    n = inst.n_ops
    k = len(chain)
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    p = inst.time.min(axis=1)
    anc = [reachable(n, pred, v) for v in chain]
    desc = [reachable(n, succ, v) for v in chain]
    for a, b in zip(chain[:-1], chain[1:]):
        if not desc[chain.index(a)][b]:
            raise ValueError(f"op {inst.op_names[b]!r} does not follow the waist before it")
    # nodes 0..k+1: the start, the waists, the end; seg[(i, j)]: bound of the ops between
    everything = np.ones(n, dtype=bool)

    def ops_between(i: int, j: int) -> np.ndarray:
        lo = everything if i == 0 else desc[i - 1]
        hi = everything if j == k + 1 else anc[j - 1]
        return lo & hi

    pairs = sorted(((i, j) for i in range(k + 1) for j in range(i + 1, k + 2)), key=lambda ij: (ij[1] - ij[0], ij[0]))
    must = {(i, i + 1) for i in range(k + 1)} | {(0, j) for j in range(1, k + 1)} | {(i, k + 1) for i in range(1, k + 1)}
    seg: dict[tuple[int, int], float] = {}
    for idx, (i, j) in enumerate(pairs):
        if (i, j) not in must and deadline is not None and time.perf_counter() >= deadline:
            continue
        left = len(pairs) - idx
        share = None if deadline is None else time.perf_counter() + max(0.0, deadline - time.perf_counter()) / left
        seg[(i, j)] = segment_bound(inst.induced(ops_between(i, j)), share)
    value, path = longest_composition(seg, p[chain])
    if parts is not None:  # the segments' bounds along the path, in order (`waist_bound`'s certificate)
        parts.extend(seg[(i, j)] for i, j in zip(path[:-1], path[1:]))
    return value, [chain[i - 1] for i in path[1:-1]]


def longest_composition(seg: Mapping[tuple[int, int], float], waist_time: np.ndarray) -> tuple[float, list[int]]:
    """The best composition over nodes 0 .. K+1 (the start, K waists, the end): a longest
    path from 0 to K+1 over the pairs (i, j) of ``seg`` (the bound of the ops between node
    i and node j, seconds), each waist on the path adding its time ``waist_time[i - 1]``.
    (seconds, the nodes of the path from 0 to K+1)."""
    k = len(waist_time)
    best = [-np.inf] * (k + 2)
    back = [-1] * (k + 2)
    best[0] = 0.0
    for j in range(1, k + 2):
        for i in range(j):
            if (i, j) in seg and np.isfinite(best[i]):
                val = best[i] + (float(waist_time[i - 1]) if i > 0 else 0.0) + seg[(i, j)]
                if val > best[j]:
                    best[j], back[j] = val, i
    path = [k + 1]
    while path[-1] > 0:
        path.append(back[path[-1]])
    return float(best[k + 1]), path[::-1]


def waist_bound(
    inst: PlacementInstance, deadline: float | None = None, unrelated_share: float = 0.1, max_waists: int = 12
) -> Bound | None:
    """The best series composition (`best_composition`) over up to ``max_waists`` waists
    of `waist_chain` spread evenly along it, rounded down; the search for waists gets a
    fifth of the time to ``deadline`` (a ``time.perf_counter()`` value), the segments the
    rest. None for one device, without a waist, or when no better than the critical path."""
    if inst.n_devices < 2:
        return None
    find_by = None if deadline is None else time.perf_counter() + 0.2 * max(0.0, deadline - time.perf_counter())
    chain = waist_chain(inst, unrelated_share, deadline=find_by)
    if not chain:
        return None
    if len(chain) > max_waists:
        chain = [chain[i] for i in np.unique(np.linspace(0, len(chain) - 1, max_waists).round().astype(np.int64)).tolist()]
    parts: list[float] = []
    value, used = best_composition(inst, chain, deadline, parts)
    if value <= critical_path(inst):
        return None
    certificate = {"waists": [str(inst.op_names[v]) for v in used], "segments": [float(v) for v in parts]}
    return Bound(round_down(value), f"{SOURCE}: {len(used)} waist{'' if len(used) == 1 else 's'}", "safe", certificate=certificate)


def composition_value(waist_times: list[float], segments: list[float]) -> float:
    """The series composition's value (seconds) along a path of waists, summed as
    `longest_composition` sums it: segment 0, then each waist's time and the segment after
    it (the same floating-point operations, so a recheck gets the same number)."""
    value = 0.0
    for k, part in enumerate(segments):
        value = value + (waist_times[k - 1] if k > 0 else 0.0) + part
    return value


def recheck(inst: PlacementInstance, entry: Mapping[str, Any]) -> str | None:
    """`BoundSource.recheck` of `waist_bound`: None when its certificate (the waists used,
    in order, and each segment's bound) proves the bound again on the instance, else why
    not. Each waist must follow the one before; each segment (the ops after one waist and
    before the next, `best_composition`) must be bounded by at least its recorded value:
    by its critical path or its work over the devices, or by the forced co-location +
    one-machine rules at that value (`forced.recheck`, on the segment's sub-instance); and
    the composition of those values (`composition_value`), rounded down, must reach the
    bound. `Unchecked` when the entry keeps no certificate."""
    cert = entry.get("certificate")
    if cert is None:
        raise Unchecked("the bound keeps no certificate (its waists and segment bounds)")
    if not isinstance(cert, Mapping) or not isinstance(cert.get("waists"), list) or not isinstance(cert.get("segments"), list):
        return "its certificate is not {'waists': [...], 'segments': [...]}"
    index = {name: k for k, name in enumerate(inst.op_names)}
    names, parts = cert["waists"], cert["segments"]
    if any(not isinstance(nm, str) or nm not in index for nm in names):
        return "its certificate names a waist that is no op of the instance"
    if len(parts) != len(names) + 1 or any(isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) for v in parts):
        return f"its certificate has {len(parts)} segment bounds for {len(names)} waists (one more than the waists, finite numbers)"
    chain = [index[nm] for nm in names]
    try:
        segments = chain_segments(inst, chain)
    except ValueError as exc:
        return f"its waists are no chain: {exc}"
    for k, (seg, part) in enumerate(zip(segments, parts, strict=True)):
        sub = inst.induced(seg)
        if sub.n_ops == 0:
            if part > 0:
                return f"segment {k} has no ops, and a bound of {part!r} s"
            continue
        if part > easy_segment_bound(sub) and forced_recheck(sub, {"value": float(part)}) is not None:
            return f"segment {k} ({sub.n_ops} ops) is not bounded by {part!r} s"
    p = inst.time.min(axis=1)
    value = round_down(composition_value([float(p[v]) for v in chain], [float(v) for v in parts]))
    stated = float(entry["value"])
    return None if stated <= value else f"its waists and segment bounds compose to {value!r} s, less than {stated!r}"


def easy_segment_bound(sub: PlacementInstance) -> float:
    """The better of the critical path and the work over the devices of a (non-empty)
    sub-instance (seconds): `segment_bound` before its forced rules."""
    p = sub.time.min(axis=1)
    r, q = heads_tails(sub, p)
    return max(float((r + p + q).max()), float(p.sum()) / sub.n_devices)
