"""Series composition over waist ops: segment bounds added up along a chain of ops.

Take ops i_1, ..., i_K, each a descendant of the one before (a chain of "waists", such as
the encoder's output stack, the attention memory layer and the output projection of a
sequence model). In any plan, every ancestor of i_1 ends before i_1 starts, every op
between i_k and i_{k+1} (a descendant of i_k and an ancestor of i_{k+1}) runs after i_k
ends and before i_{k+1} starts, and every descendant of i_K starts after i_K ends. The
plan restricted to the ops of one segment is a feasible schedule of the induced
sub-instance (fewer ops, fewer transfers: every precedence, device, channel and memory
constraint still holds, under both communication models and both memory models), so its
span is at least any lower bound L(S) of that sub-instance, and

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

import copy
import time

import numpy as np

from distplan.formulations.placement.forced import forced_bound
from distplan.formulations.placement.relaxation import heads_tails
from distplan.formulations.registry import Bound, round_down
from distplan.models.placement_instance import PlacementInstance

SOURCE = "series composition over waist ops (segment bounds added along a chain)"


def induced(inst: PlacementInstance, keep: np.ndarray) -> PlacementInstance:
    """The sub-instance on the ops where ``keep`` (boolean per op) holds, with the edges
    between them; devices, links, memory and models unchanged."""
    ops = np.flatnonzero(keep)
    pos = np.full(inst.n_ops, -1, dtype=np.int64)
    pos[ops] = np.arange(ops.size)
    inside = (pos[inst.src] >= 0) & (pos[inst.dst] >= 0)
    sub = copy.copy(inst)
    sub.name = f"{inst.name}-segment"
    sub.op_names = [inst.op_names[v] for v in ops.tolist()]
    sub.time = inst.time[ops]
    sub.memory = inst.memory[ops]
    sub.temporary = inst.temporary[ops]
    sub.output = inst.output[ops]
    sub.colocate = [inst.colocate[v] for v in ops.tolist()]
    sub.src = pos[inst.src[inside]]
    sub.dst = pos[inst.dst[inside]]
    sub.edge_bytes = inst.edge_bytes[inside]
    sub.document = None
    return sub


def _reach(n: int, adj: list[list[int]], start: int) -> np.ndarray:
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
    p = sub.time.min(axis=1)
    r, q = heads_tails(sub, p)
    best = max(float((r + p + q).max()), float(p.sum()) / sub.n_devices)
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
    succ, pred = adjacency(inst)
    chain: list[int] = []
    after = np.ones(n, dtype=bool)  # descendants of the last waist kept (a chain: each after the one before)
    for v in on_path.tolist():
        if deadline is not None and time.perf_counter() >= deadline:
            break
        if not after[v]:
            continue
        desc = _reach(n, succ, v)
        related = desc | _reach(n, pred, v)
        related[v] = True
        if total - float(p[related].sum()) <= unrelated_share * total:
            chain.append(v)
            after = desc
    return chain


def adjacency(inst: PlacementInstance) -> tuple[list[list[int]], list[list[int]]]:
    """Successor and predecessor lists per op."""
    succ: list[list[int]] = [[] for _ in range(inst.n_ops)]
    pred: list[list[int]] = [[] for _ in range(inst.n_ops)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].append(b)
        pred[b].append(a)
    return succ, pred


def composed_bound(inst: PlacementInstance, chain: list[int], deadline: float | None = None) -> float:
    """The series composition (module docstring, seconds) over ``chain``, ops each a
    descendant of the one before (ValueError otherwise), each segment bounded by
    `segment_bound` within an equal share of the time to ``deadline`` (a
    ``time.perf_counter()`` value). Not rounded."""
    n = inst.n_ops
    succ, pred = adjacency(inst)
    p = inst.time.min(axis=1)
    segments: list[np.ndarray] = []
    before = np.ones(n, dtype=bool)  # descendants of the previous waist (all ops at first)
    for v in chain:
        if not before[v]:
            raise ValueError(f"op {inst.op_names[v]!r} does not follow the waist before it")
        segments.append(before & _reach(n, pred, v))
        before = _reach(n, succ, v)
    segments.append(before)
    value = float(p[chain].sum())
    for k, seg in enumerate(segments):
        share = None
        if deadline is not None:
            share = time.perf_counter() + max(0.0, deadline - time.perf_counter()) / (len(segments) - k)
        value += segment_bound(induced(inst, seg), share)
    return value


def waist_bound(
    inst: PlacementInstance, deadline: float | None = None, unrelated_share: float = 0.01, max_waists: int = 8, singles: int = 4
) -> Bound | None:
    """The best series composition (module docstring) over chains of `waist_chain`: each
    of up to ``singles`` waists alone, and up to ``max_waists`` of them together (spread
    evenly along it); more waists split the graph finer, which can lose what a segment's
    rules see in one piece (a fork and its join), so both are tried. Rounded down; the
    search for waists gets a fifth of the time to ``deadline`` (a ``time.perf_counter()``
    value) and the chains share the rest (the first is always bounded). None for one
    device, without a waist, or when no better than the critical path."""
    if inst.n_devices < 2:
        return None
    find_by = None if deadline is None else time.perf_counter() + 0.2 * max(0.0, deadline - time.perf_counter())
    chain = waist_chain(inst, unrelated_share, deadline=find_by)
    if not chain:
        return None

    def spread(k: int) -> list[int]:
        return [chain[i] for i in np.unique(np.linspace(0, len(chain) - 1, k).round().astype(np.int64)).tolist()]

    trials = [[v] for v in spread(min(singles, len(chain)))]
    if len(chain) > 1:
        trials.append(spread(min(max_waists, len(chain))))
    best: tuple[float, int] | None = None
    for k, trial in enumerate(trials):
        if best is not None and deadline is not None and time.perf_counter() >= deadline:
            break
        share = None if deadline is None else time.perf_counter() + max(0.0, deadline - time.perf_counter()) / (len(trials) - k)
        value = composed_bound(inst, trial, share)
        if best is None or value > best[0]:
            best = (value, len(trial))
    assert best is not None
    p = inst.time.min(axis=1)
    r, q = heads_tails(inst, p)
    if best[0] <= float((r + p + q).max()):
        return None
    return Bound(round_down(best[0]), f"{SOURCE}: {best[1]} waist{'s' if best[1] > 1 else ''}", "safe")
