"""Series composition over cut waists with each module's proven optimum.

A refinement of the series composition over waist ops (`waist`). Take ops w_1, ..., w_K,
each a descendant of the one before, and the modules between them: M_0 the ancestors of
w_1, M_k (0 < k < K) the ops that descend from w_k and are ancestors of w_{k+1}, M_K the
descendants of w_K. The window instance W_k is the sub-instance on M_k with w_k and
w_{k+1} (those that exist) as endpoints whose time is zero on every device. In any plan,
put w_k at its end C(w_k) and w_{k+1} at its start S(w_{k+1}), both on their devices with
zero duration, and the ops of M_k where they are: those times satisfy every constraint of
W_k's scheduling model (a subset of the plan's ops, transfers and memory: precedence with
transfer delays, one op at a time per device, one transfer at a time per channel with one
transfer per tensor and destination, memory; every M_k op starts after C(w_k) and ends
before S(w_{k+1}), so the zero-length endpoints overlap nothing; under both
communication models and both memory models), and their span is S(w_{k+1}) - C(w_k)
(S(w_1) for M_0, makespan - C(w_K) for M_K). Hence

    makespan >= sum_k L(W_k) + sum_k min_d p(w_k, d),

L any lower bound on that scheduling model's optimum for W_k (the segment bounds and the
MILP's dual bound are). Not the evaluator's optimum of W_k under channels: the evaluator
re-times a plan by a greedy simulation of the channels, and without the ops left out of
W_k that simulation can end later (a module alone can time worse than inside the plan). Unlike the segment bounds of `waist`, which see
the ops between two waists without them, W_k holds the transfers out of w_k and into
w_{k+1}: a branch of a module moved to another device pays both, which the critical path
and the load rows do not see, and inside a small module (an Inception block, ~5-11 ops)
the optimum, proven by a MILP, sees exactly the transfers and the queueing. Ops that are
neither ancestors nor descendants of some waist (such as the weight updates that hang off
a backward pass) belong to no window: leaving them out only lowers the bound (`lasthop`
charges them to the device that runs the last waists, over the same windows). Two
windows whose ops share co-location groups (a forward block and its gradient block) hold
one assignment in every plan: `joined` bounds the sum of their spans by one program, which
replaces their two terms in the sum above (`compose`, step 4).

The waists are the ops of `waist.waist_chain` (a longest path at fastest times) whose
unrelated ops (neither ancestors nor descendants) are all sinks: the joins of modules.
L(W_k) is the best of `waist.segment_bound` of M_k and, for modules of at most
``max_ops`` ops, the proven dual bound of ``solve_window`` (the placement MILP in
`milp.module_bound`, passed in by the caller), which makes the bound "solver" graded.
This is the series (modular) decomposition of precedence-constrained scheduling bounds
(Möhring, "Computationally tractable classes of ordered sets", 1989; Klein & Scholl, EJOR
112(2), 1999), with each module solved exactly as a sub-problem (the decomposition bounds
of Carlier & Néron, "On linear lower bounds for the resource constrained project
scheduling problem", EJOR 149(2), 2003, in spirit). Seconds throughout.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from distplan.formulations.placement.improve import SearchProblem, renamings
from distplan.formulations.placement.joined import joined_instance, tied_pairs
from distplan.formulations.placement.lasthop import SOURCE as LAST_STINT
from distplan.formulations.placement.lasthop import last_stint_bound
from distplan.formulations.placement.listsched_data import successors
from distplan.formulations.placement.relaxation import device_classes
from distplan.formulations.placement.waist import longest_composition, reachable, segment_bound, waist_chain
from distplan.formulations.registry import Bound, round_down
from distplan.models.placement_instance import PlacementInstance

SOURCE = "series composition over cut waists with each module's optimum"

#: a lower bound (seconds) on the optimum of a window instance, proven until a deadline
#: (a ``time.perf_counter()`` value) given one already proven (seconds), at a stage (0:
#: quick, 1: thorough, after every window had its quick one), or None
WindowSolver = Callable[[PlacementInstance, float, float, int], "float | None"]
#: a lower bound (seconds) on the value of a joined instance (`joined`: two windows'
#: spans summed) with its parts (0, 1 per op), the two windows' fingerprints, proven until
#: a deadline (a ``time.perf_counter()`` value) given the windows' proven bounds (seconds),
#: and whether it is the value (within a gap: no bound of either window alone can add
#: to it), or None
JoinedSolver = Callable[[PlacementInstance, np.ndarray, tuple[bytes, bytes], float, tuple[float, float]], "tuple[float, bool] | None"]


@dataclass(frozen=True)
class Composition:
    """A composed bound (seconds, not rounded), the number of waists and of the modules
    whose bound came from ``solve_window``, and of all non-empty modules; ``seg``: every
    segment's bound (seconds, nodes 0..K+1: the start, the waists, the end), ``windows``:
    how many of them came from ``solve_window``, ``desc`` and ``anc``: each waist's
    descendants and ancestors (boolean per op; for `lasthop`); ``joined``: the pairs of
    windows whose joined bound (`joined`) is in ``value`` (0: the longest composition is)."""

    value: float
    waists: int
    solved: int
    modules: int
    seg: Mapping[tuple[int, int], float] = field(default_factory=dict)
    windows: int = 0
    desc: Sequence[np.ndarray] = ()
    anc: Sequence[np.ndarray] = ()
    joined: int = 0


def cut_waists(inst: PlacementInstance, deadline: float | None = None) -> list[int]:
    """Ops of `waist.waist_chain` (every candidate on a longest path, in path order) whose
    unrelated ops are all sinks (ops without successors), looked at until ``deadline``
    (a ``time.perf_counter()`` value)."""
    n = inst.n_ops
    chain = waist_chain(inst, unrelated_share=1.0, candidates=n, deadline=deadline)
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    sink = np.bincount(inst.src, minlength=n) == 0
    out: list[int] = []
    for v in chain:
        if deadline is not None and time.perf_counter() >= deadline:
            break
        related = reachable(n, succ, v) | reachable(n, pred, v) | sink
        related[v] = True
        if related.all():
            out.append(v)
    return out


def window_instance(inst: PlacementInstance, module: np.ndarray, first: int | None, last: int | None) -> PlacementInstance:
    """The window instance (module docstring): the ops where ``module`` holds, with the
    waists ``first`` and ``last`` (None: none) as endpoints of zero time on every device."""
    keep = module.copy()
    ends = [v for v in (first, last) if v is not None]
    keep[ends] = True
    sub = inst.induced(keep)
    pos = np.cumsum(keep) - 1
    sub.time = sub.time.copy()
    sub.time[pos[ends]] = 0.0
    return sub


def fingerprint(sub: PlacementInstance) -> bytes:
    """Bytes that are equal for two window instances with the same data (op times, memory,
    edges with their bytes, co-location pattern) in the same op order: the key of
    identical windows in `compose` and of a window's assignments for `glued_assignment`.
    Each part carries its shape, so parts of different sizes cannot run together."""
    groups = np.unique(sub.colocation_groups(), return_inverse=True)[1]
    parts = (sub.time, sub.memory, sub.temporary, sub.output, sub.src, sub.dst, sub.edge_bytes, groups)
    return b"|".join(np.asarray(a.shape, dtype=np.int64).tobytes() + np.ascontiguousarray(a).tobytes() for a in parts)


def compose(
    inst: PlacementInstance,
    chain: list[int],
    solve_window: WindowSolver | None = None,
    deadline: float | None = None,
    max_ops: int = 40,
    solve_joined: JoinedSolver | None = None,
    joined_deadline: float | None = None,
) -> Composition:
    """The best composition (module docstring) over sub-chains of ``chain`` (ops each a
    descendant of the one before; ValueError otherwise), by a longest path over the waists
    as in `waist.best_composition`. Segments, until ``deadline`` (a ``time.perf_counter()``
    value), each within an equal share of the time left to it: (1) the modules between
    consecutive waists by `waist.segment_bound` (always, so a path exists); (2) with
    ``solve_window``, the windows of those with 1..``max_ops`` ops, smallest first, at
    stage 0 (identical windows, such as repeated blocks, solved once), then at stage 1;
    (3) the segments from the start to a waist and from a waist to the end, smallest
    first, by both; (4) with ``solve_joined``, the windows of disjoint pairs of modules
    tied by co-location (`joined.tied_pairs`, each module of 1..``max_ops`` ops), smallest
    first, identical pairs solved once: the composition over the consecutive modules with
    each pair's two bounds replaced by its joined bound (`joined`, when higher) is the
    value when it beats the longest composition; this step runs (after stage 0; stage 1
    skips the windows of pairs whose joined bound closed) until ``joined_deadline``
    (default ``deadline``), after which the other steps stop at ``deadline``.
    It returns when done, before the deadline if it can: the segments
    between two waists that are not consecutive, which `waist.waist_bound` composes, left
    resnet-50-dgx1-4 and inception-v3-dgx1-4 where they were (30 s standalone)."""
    n, k = inst.n_ops, len(chain)
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    p = inst.time.min(axis=1)
    anc = [reachable(n, pred, v) for v in chain]
    desc = [reachable(n, succ, v) for v in chain]
    for a, b in zip(range(k - 1), range(1, k)):
        if not desc[a][chain[b]]:
            raise ValueError(f"op {inst.op_names[chain[b]]!r} does not follow the waist before it")
    everything = np.ones(n, dtype=bool)

    def between(i: int, j: int) -> np.ndarray:  # nodes 0..k+1: the start, the waists, the end
        return (everything if i == 0 else desc[i - 1]) & (everything if j == k + 1 else anc[j - 1])

    def until(left: int) -> float | None:
        return None if deadline is None else time.perf_counter() + max(0.0, deadline - time.perf_counter()) / max(left, 1)

    def late() -> bool:
        return deadline is not None and time.perf_counter() >= deadline

    seg: dict[tuple[int, int], float] = {}
    size: dict[tuple[int, int], int] = {}
    solved: set[tuple[int, int]] = set()
    seen: dict[tuple[bytes, int], float | None] = {}  # identical windows (repeated blocks) are solved once
    framed: dict[tuple[int, int], tuple[PlacementInstance, bytes]] = {}

    def window_of(ij: tuple[int, int]) -> tuple[PlacementInstance, bytes]:
        """The window instance of the segment ``ij`` and its fingerprint, built once."""
        if ij not in framed:
            sub = window_instance(inst, between(*ij), *_ends(chain, *ij))
            framed[ij] = (sub, fingerprint(sub))
        return framed[ij]

    def refine(ij: tuple[int, int], left: int, stage: int = 0) -> None:
        if solve_window is None or not 0 < size[ij] <= max_ops or late():
            return
        sub, print_ = window_of(ij)
        key = (print_, stage)
        if key not in seen:
            stop = until(left)
            seen[key] = solve_window(sub, time.perf_counter() + 3600.0 if stop is None else stop, seg[ij], stage)
        found = seen[key]
        if found is not None and found > seg[ij]:
            seg[ij] = found
            solved.add(ij)

    consecutive = [(i, i + 1) for i in range(k + 1)]
    for ij in consecutive:
        size[ij] = int(between(*ij).sum())
        seg[ij] = segment_bound(inst.induced(between(*ij)), until(len(consecutive))) if size[ij] else 0.0
    todo = sorted((ij for ij in consecutive if size[ij]), key=lambda ij: size[ij])
    for idx, ij in enumerate(todo):
        refine(ij, len(todo) - idx + 1)
    joined: dict[tuple[tuple[int, int], tuple[int, int]], tuple[float, bool]] = {}
    if solve_joined is not None:
        last = deadline if joined_deadline is None or deadline is None else max(deadline, joined_deadline)

        def until_joined(left: int) -> float | None:
            return None if last is None else time.perf_counter() + max(0.0, last - time.perf_counter()) / max(left, 1)

        joined = joined_bounds(inst, chain, seg, between, consecutive, size, solve_joined, until_joined, lambda: last is not None and time.perf_counter() >= last, max_ops, lambda ij: window_of(ij)[1])
    covered = {ij for pair, (_, closed) in joined.items() if closed for ij in pair}  # solved jointly
    for idx, ij in enumerate(todo):
        if ij not in covered:
            refine(ij, len(todo) - idx + 1, stage=1)
    ends = sorted({(0, j) for j in range(2, k + 2)} | {(i, k + 1) for i in range(k - 1, 0, -1)}, key=lambda ij: int(between(*ij).sum()))
    for idx, ij in enumerate(ends):
        if late():
            break
        size[ij] = int(between(*ij).sum())
        seg[ij] = segment_bound(inst.induced(between(*ij)), until(2 * (len(ends) - idx))) if size[ij] else 0.0
        refine(ij, 2 * (len(ends) - idx))
    gains = {(ia, ib): v - seg[ia] - seg[ib] for (ia, ib), (v, _) in joined.items() if v > seg[ia] + seg[ib]}
    value, path = longest_composition(seg, p[chain])
    used = list(zip(path[:-1], path[1:]))
    series = sum(seg[ij] for ij in consecutive) + float(p[chain].sum()) + sum(gains.values())
    if gains and series > value:
        paired = {ij for pair in gains for ij in pair}
        return Composition(series, k, sum(1 for ij in consecutive if ij in solved or ij in paired), sum(1 for ij in consecutive if size[ij]), seg, len(solved), desc, anc, len(gains))
    return Composition(value, len(path) - 2, sum(1 for ij in used if ij in solved), sum(1 for ij in used if size[ij]), seg, len(solved), desc, anc)


def joined_bounds(
    inst: PlacementInstance,
    chain: list[int],
    seg: Mapping[tuple[int, int], float],
    between: Callable[[int, int], np.ndarray],
    consecutive: list[tuple[int, int]],
    size: Mapping[tuple[int, int], int],
    solve_joined: JoinedSolver,
    until: Callable[[int], float | None],
    late: Callable[[], bool],
    max_ops: int,
    key_of: Callable[[tuple[int, int]], bytes],
) -> dict[tuple[tuple[int, int], tuple[int, int]], tuple[float, bool]]:
    """For the pairs of consecutive modules (``consecutive``, nodes of `compose`) tied by
    co-location (`joined.tied_pairs`, both of 1..``max_ops`` ops), the joined bound
    ``solve_joined`` of their windows (seconds; given their bounds ``seg`` so far) and
    whether it closed, when it gave one; solved smallest first, each within a share of the time left (``until``) of
    one in four of the pairs left (one in three for the first of eleven: most pairs close
    well within it, and equal shares stopped every pair early on a loaded machine),
    identical joined instances once, until ``late``. ``key_of``: a segment's window
    fingerprint (`fingerprint`), which names the windows' filed plans."""
    ok = [t for t, ij in enumerate(consecutive) if 0 < size[ij] <= max_ops]
    inner = [between(*consecutive[t]) for t in ok]
    adjacent = [(a, b) for a in range(len(ok)) for b in range(a + 1, len(ok)) if abs(ok[a] - ok[b]) < 2]
    pairs = [(ok[a], ok[b]) for a, b in tied_pairs([np.flatnonzero(m) for m in inner], inst.colocation_groups(), adjacent)]

    def window_ops(t: int) -> tuple[np.ndarray, list[int]]:
        ends = [v for v in _ends(chain, t, t + 1) if v is not None]
        return np.union1d(np.flatnonzero(between(t, t + 1)), ends), ends

    pairs.sort(key=lambda ab: size[consecutive[ab[0]]] + size[consecutive[ab[1]]])
    out: dict[tuple[tuple[int, int], tuple[int, int]], tuple[float, bool]] = {}
    seen: dict[bytes, tuple[float, bool] | None] = {}
    for idx, (a, b) in enumerate(pairs):
        if late():
            break
        (ops_a, ends_a), (ops_b, ends_b) = window_ops(a), window_ops(b)
        sub, part = joined_instance(inst, ops_a, ops_b, ends_a + ends_b)
        ia, ib = consecutive[a], consecutive[b]
        keys = (key_of(ia), key_of(ib))
        key = fingerprint(sub) + part.tobytes() + np.asarray([seg[ia], seg[ib]]).tobytes()
        if key not in seen:
            stop = until(max(1, (len(pairs) - idx + 3) // 4))  # most pairs close well within it
            seen[key] = solve_joined(sub, part, keys, time.perf_counter() + 3600.0 if stop is None else stop, (seg[ia], seg[ib]))
        found = seen[key]
        if found is not None:
            out[(ia, ib)] = found
    return out


def _ends(chain: Sequence[int], i: int, j: int) -> tuple[int | None, int | None]:
    """The waists that bound the segment between nodes i and j of `compose` (nodes 0..K+1:
    the start, the waists, the end; None: the start or the end)."""
    return (chain[i - 1] if i > 0 else None), (chain[j - 1] if j <= len(chain) else None)


def module_bound(
    inst: PlacementInstance,
    solve_window: WindowSolver | None,
    deadline: float | None = None,
    max_ops: int = 40,
    waists: list[int] | None = None,
    also: list[Bound] | None = None,
    solve_joined: JoinedSolver | None = None,
    joined_extra: float = 0.0,
) -> Bound | None:
    """The composition over `cut_waists` (a tenth of the time to ``deadline`` looks for
    them), rounded down: graded "solver" when some module's bound came from
    ``solve_window``, "safe" otherwise. None for one device or without a cut waist. The
    waists found are appended to ``waists`` when given (for `glued_assignment`); with
    ``also``, the last-stint bound over the same windows (`lasthop`, graded "solver" when
    some window's bound came from ``solve_window``) is appended to it when above the
    composition. With ``solve_joined``, windows tied by co-location are also joined in pairs
    (`compose`, `joined`), for up to ``joined_extra`` times the phase's length (from the
    call to ``deadline``) past ``deadline``."""
    if inst.n_devices < 2 or inst.n_ops < 2:
        return None
    started = time.perf_counter()
    find_by = None if deadline is None else time.perf_counter() + 0.1 * max(0.0, deadline - time.perf_counter())
    chain = cut_waists(inst, find_by)
    if waists is not None:
        waists.extend(chain)
    if not chain:
        return None
    joined_by = None if deadline is None else deadline + joined_extra * max(0.0, deadline - started)
    c = compose(inst, chain, solve_window, deadline, max_ops, solve_joined, joined_by)
    # the windows' MILP calls are not recorded (`milp.child_dual_bound`): their bounds hold
    # within the solver's tolerances, and the source says how many there were
    # (`registry.BOUND_SOURCES` grades the composition "safe" only with none)
    grade = "solver" if c.solved or c.joined else "safe"
    source = f"{SOURCE}: {c.waists} waists, {c.solved} of {c.modules} modules solved"
    if c.joined:
        source += f", {c.joined} pairs tied by co-location joined"
    if also is not None:
        # the stint bound takes well under a second (gpt2-xl-dgx1, 1160 waists: 0.5 s CPU);
        # past the module phase's deadline it may use a quarter of that phase's length
        until = None if deadline is None else max(deadline, time.perf_counter() + 0.25 * (deadline - started))
        found = last_stint_bound(inst, chain, c.seg, c.desc, c.anc, until)
        value, case = found if found is not None else (-np.inf, 0)
        if value > c.value:
            where = "one device" if case == 0 else f"after {inst.op_names[chain[case - 1]]!r}"
            also.append(Bound(round_down(value), f"{LAST_STINT}: {len(chain)} waists, {c.windows} windows solved, weakest case {where}", "solver" if c.windows else "safe"))
    return Bound(round_down(c.value), source, grade)


@dataclass(frozen=True)
class Window:
    """One module between consecutive waists: its window instance, the ops of ``inst`` it
    holds (sorted, the window's op order; the waists included), its fingerprint, and its
    first and last waist (None: none)."""

    sub: PlacementInstance
    ops: np.ndarray
    key: bytes
    first: int | None = None
    last: int | None = None


def chain_windows(inst: PlacementInstance, chain: Sequence[int], deadline: float | None = None) -> list[Window] | None:
    """The windows of the modules between consecutive waists of ``chain`` (as in
    `compose`), empty modules between two waists included (their window holds the
    two waists: it costs the transfer between them); None at ``deadline`` (a
    ``time.perf_counter()`` value)."""
    n, k = inst.n_ops, len(chain)
    succ, pred = successors(n, inst.src, inst.dst), successors(n, inst.dst, inst.src)
    anc, desc = [], []
    for v in chain:
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        anc.append(reachable(n, pred, v))
        desc.append(reachable(n, succ, v))
    everything = np.ones(n, dtype=bool)
    out: list[Window] = []
    for i in range(k + 1):
        if deadline is not None and time.perf_counter() >= deadline:
            return None
        module = (everything if i == 0 else desc[i - 1]) & (everything if i == k else anc[i])
        module[list(chain)] = False
        first, last = _ends(chain, i, i + 1)
        if not module.any() and (first is None or last is None):
            continue
        sub = window_instance(inst, module, first, last)
        keep = module.copy()
        keep[[v for v in (first, last) if v is not None]] = True
        out.append(Window(sub, np.flatnonzero(keep), fingerprint(sub), first, last))
    return out


def glued_assignment(inst: PlacementInstance, chain: list[int], found: Mapping[bytes, Sequence[np.ndarray]], fallback: np.ndarray, max_perms: int = 120) -> np.ndarray:
    """A device per op of ``inst`` glued from its modules' assignments: for the modules
    between consecutive waists of ``chain`` in order (as in `compose`), the window
    assignments filed under the window's `fingerprint` in ``found`` (the window solver's
    incumbents: optimal or near-optimal for the module alone), each with its devices
    renamed within classes of interchangeable devices (`relaxation.device_classes`) so
    that the waist it shares with the module before stays on the device that module gave
    it, the renaming and assignment whose list schedule of the window ends first. Ops of
    no module, or of a module without assignments, keep ``fallback``; a co-location group
    split by the gluing goes to its first member's device. The gluing of sub-schedules at
    series (module) boundaries of Möhring's decomposition, "Computationally tractable
    classes of ordered sets", 1989."""
    dev = np.asarray(fallback, dtype=np.int64).copy()
    if not chain or not found:
        return dev
    options_renamed = renamings([c for c in device_classes(inst) if c.size > 1], inst.n_devices, max_perms, swaps=True)
    for window in chain_windows(inst, chain) or []:
        options = found.get(window.key, ())
        if not options:
            continue
        sub, ops, first = window.sub, window.ops, window.first
        pos_first = None if first is None else int(np.searchsorted(ops, first))
        prob = SearchProblem(sub)
        best: tuple[float, np.ndarray] | None = None
        for assign in options:
            for mapping in options_renamed:
                cand = mapping[np.asarray(assign, dtype=np.int64)]
                if pos_first is not None and cand[pos_first] != dev[first]:
                    continue
                s = prob.schedule(cand)
                if s is not None and (best is None or s.makespan < best[0]):
                    best = (s.makespan, cand)
        if best is None:
            continue
        sel = ops if first is None else ops[ops != first]
        dev[sel] = best[1][np.searchsorted(ops, sel)]
    groups = inst.colocation_groups()
    _, lead = np.unique(groups, return_index=True)
    return dev[lead][np.unique(groups, return_inverse=True)[1]]
