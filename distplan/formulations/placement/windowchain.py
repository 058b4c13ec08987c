"""The module windows' assignments combined by a dynamic program over the waist chain.

`segments.glued_assignment` glues the module windows' assignments one module at a time,
each renamed so that the waist it shares with the module before stays put: a greedy pass
that never looks at the waist it hands on to the next module, and that breaks up the
modules co-location ties together (a traced training graph co-locates each layer's
forward op, gradient and weight update, so Inception's forward block k and its backward
block share every group: the greedy gluing lets the forward block decide, and the
backward block's own optimum is lost).

Here the choice is made for the whole chain at once. The devices of the waists' co-location
groups are the variables (one per group, in chain order). Modules tied by co-location
groups other than the waists' form a *component*; a component's candidates are device
choices for all its groups: each window assignment the window solver filed for one of its
modules (`segments.fingerprint`), under every renaming of interchangeable devices
(`improve.renamings`), completed from the fallback plan, and the fallback plan itself,
renamed. A candidate costs the sum of its modules' window makespans (the list schedule of
the window instance, `segments.window_instance`, with the candidate's devices: the span
from the end of the module's first waist to the start of its last), and fixes the devices
of the waist groups it touches. Each waist group adds its waists' times on its device.
When every component touches at most two waist groups, adjacent in chain order, the sum
is minimized exactly over the candidates by a dynamic program along the chain (the
sub-schedules at the series boundaries of Möhring's decomposition, "Computationally
tractable classes of ordered sets", 1989, combined as in the shortest-path gluing of
serial dynamic programming, Bertelè & Brioschi, "Nonserial dynamic programming", 1972);
otherwise there is no result. The sum is the makespan of the glued plan when the ops of
no module (weight updates, sinks) delay nobody, so the plan is then timed as a whole.
Seconds throughout.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components

from distplan.formulations.placement.improve import SearchProblem, improve, renamings
from distplan.formulations.placement.listsched import Schedule, evaluated_schedule
from distplan.formulations.placement.relaxation import device_classes
from distplan.formulations.placement.segments import Window, chain_windows
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan


def _components(n_windows: int, window_groups: list[np.ndarray], tie: np.ndarray) -> np.ndarray:
    """Component label per window: windows sharing a group where ``tie`` holds."""
    rows, cols = [], []
    owner: dict[int, int] = {}
    for w, gs in enumerate(window_groups):
        for g in gs[tie[gs]].tolist():
            if g in owner:
                rows.append(owner[g])
                cols.append(w)
            else:
                owner[g] = w
    graph = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(n_windows, n_windows))
    return connected_components(graph, directed=False)[1]


class _Problems(dict[bytes, SearchProblem]):
    """`SearchProblem` of each window instance (by fingerprint), built when first asked."""

    def __init__(self, subs: Mapping[bytes, PlacementInstance]):
        super().__init__()
        self.subs = subs

    def __missing__(self, key: bytes) -> SearchProblem:
        self[key] = SearchProblem(self.subs[key])
        return self[key]


@dataclass
class ChainProgram:
    """What `chained_assignment` needs that no fallback changes: the chain's windows, the
    waist variables (``var_of``: a variable per waist co-location group, in chain order,
    -1 for other groups), each waist variable's waist times per device (seconds), the
    components (windows, their groups, the waist variables they touch), the device
    renamings, each window's `SearchProblem` and the window makespans timed so far."""

    groups: np.ndarray
    windows: list[Window]
    var_of: np.ndarray
    waist_time: np.ndarray
    parts: list[tuple[list[int], np.ndarray, tuple[int, ...]]]
    maps: list[np.ndarray]
    probs: _Problems
    first_member: np.ndarray
    cost_cache: dict[tuple[bytes, bytes], float] = field(default_factory=dict)  # repeated blocks are timed once


def chain_program(inst: PlacementInstance, chain: Sequence[int], deadline: float | None = None, max_perms: int = 120) -> ChainProgram | None:
    """The program of `chained_assignment` over ``chain``; None without waists, with one
    device, at ``deadline`` (a ``time.perf_counter()`` value), or when a component's waist
    groups are not adjacent in chain order (the sum is then no chain of pairs).
    ``max_perms``: renamings tried (`improve.renamings`, with swaps beyond it)."""
    if not chain or inst.n_devices < 2:
        return None
    groups = inst.colocation_groups()  # dense ids, numbered by first occurrence
    n_groups = int(groups.max()) + 1
    windows = chain_windows(inst, chain, deadline)
    if not windows:
        return None
    var_of = np.full(n_groups, -1, dtype=np.int64)
    for v in chain:
        if var_of[groups[v]] < 0:
            var_of[groups[v]] = int(var_of.max()) + 1
    waist_time = np.zeros((int(var_of.max()) + 1, inst.n_devices))
    for v in chain:
        waist_time[var_of[groups[v]]] += inst.time[v]
    wgroups = [np.unique(groups[w.ops]) for w in windows]
    comp = _components(len(windows), wgroups, var_of < 0)
    parts: list[tuple[list[int], np.ndarray, tuple[int, ...]]] = []
    for c in range(int(comp.max()) + 1):
        members = np.flatnonzero(comp == c).tolist()
        cgroups = np.unique(np.concatenate([wgroups[w] for w in members]))
        scope = tuple(sorted(int(var_of[g]) for g in cgroups if var_of[g] >= 0))
        if len(scope) > 2 or (len(scope) == 2 and scope[1] != scope[0] + 1):
            return None
        parts.append((members, cgroups, scope))
    maps = renamings([c for c in device_classes(inst) if c.size > 1], inst.n_devices, max_perms, swaps=True)
    first_member = np.unique(groups, return_index=True)[1]
    return ChainProgram(groups, windows, var_of, waist_time, parts, maps, _Problems({w.key: w.sub for w in windows}), first_member)


def chained_assignment(
    inst: PlacementInstance,
    chain: Sequence[int],
    found: Mapping[bytes, Sequence[np.ndarray]],
    fallback: np.ndarray,
    deadline: float | None = None,
    max_perms: int = 120,
    program: ChainProgram | None = None,
    extra: Mapping[int, Sequence[np.ndarray]] | None = None,
) -> tuple[np.ndarray, float] | None:
    """A device per op of ``inst`` (module docstring) and the sum it minimizes (seconds:
    window makespans plus waist times), from the window assignments filed in ``found``
    under `segments.fingerprint` (in each window's op order) and ``fallback`` (a device per
    op: ops of no module keep it). Each component gets an equal share of the time left to
    ``deadline`` (a ``time.perf_counter()`` value) and keeps the candidates it timed by
    then (the fallback's own first). ``program``: `chain_program` of ``chain`` (built
    here, with ``max_perms``, when None). None when there is no program, when some
    component has no candidate that fits memory, or when the deadline passes before every
    component has timed at least the fallback's own candidate. ``extra``: more candidates
    of a component (by its index in ``program.parts``), each a device per co-location
    group (`joint_candidates`), timed right after the fallback's own."""
    prog = chain_program(inst, chain, deadline, max_perms) if program is None else program
    if prog is None:
        return None
    m = inst.n_devices
    groups, var_of = prog.groups, prog.var_of
    n_vars = prog.waist_time.shape[0]
    base = np.asarray(fallback, dtype=np.int64)[prog.first_member]  # a group's device: its first member's
    factors: list[tuple[np.ndarray, tuple[int, ...], dict[tuple[int, ...], tuple[float, np.ndarray]]]] = []
    n_comp = len(prog.parts)
    for c, (members, cgroups, scope) in enumerate(prog.parts):
        if deadline is not None and time.perf_counter() >= deadline:
            return None  # a component without even the fallback's candidate: no program
        until = None if deadline is None else time.perf_counter() + max(0.0, deadline - time.perf_counter()) / (n_comp - c)
        more = () if extra is None else extra.get(c, ())
        table = _factor_table([prog.windows[w] for w in members], prog.probs, groups, base, found, prog.maps, cgroups, var_of, m, until, prog.cost_cache, more)
        if not table:
            return None
        factors.append((cgroups, scope, table))
    # dynamic program along the waist variables (chain order): value[device]
    unary = prog.waist_time.copy()
    pair = np.zeros((max(n_vars - 1, 0), m, m))
    free_total = 0.0
    for _, scope, table in factors:
        best = np.full((m,) * len(scope), np.inf)
        for at, (cost, _) in table.items():
            best[at] = min(best[at], cost)
        if not scope:
            free_total += float(best)
        elif len(scope) == 1:
            unary[scope[0]] += best
        else:
            pair[scope[0]] += best
    value = unary[0].copy()
    back: list[np.ndarray] = []
    for v in range(1, n_vars):
        step = value[:, None] + pair[v - 1] + unary[v][None, :]
        back.append(np.argmin(step, axis=0))
        value = step.min(axis=0)
    devs = [int(np.argmin(value))]
    total = float(value[devs[0]]) + free_total
    if not np.isfinite(total):
        return None
    for arg in reversed(back):
        devs.append(int(arg[devs[-1]]))
    devs.reverse()
    out = base.copy()
    for cgroups, scope, table in factors:
        at = tuple(devs[v] for v in scope)
        cand = table[at][1] if scope else min(table.values(), key=lambda t: t[0])[1]
        out[cgroups] = cand[cgroups]
    waist_groups = np.flatnonzero(var_of >= 0)
    out[waist_groups] = np.asarray(devs)[var_of[waist_groups]]
    return out[groups], total


def _factor_table(
    windows: list[Window],
    probs: Mapping[bytes, SearchProblem],
    groups: np.ndarray,
    base: np.ndarray,
    found: Mapping[bytes, Sequence[np.ndarray]],
    maps: list[np.ndarray],
    cgroups: np.ndarray,
    var_of: np.ndarray,
    m: int,
    deadline: float | None,
    cost_cache: dict[tuple[bytes, bytes], float],
    extra: Sequence[np.ndarray] = (),
) -> dict[tuple[int, ...], tuple[float, np.ndarray]]:
    """One component's best candidate (cost in seconds, a device per group) for each
    choice of devices (of ``m``) of the waist groups it touches (in chain order), among,
    in this order: the fallback's group devices ``base``; ``extra`` (a device per group,
    only the component's groups ``cgroups`` taken); every filed assignment of its
    windows (the last filed, the window MILP's incumbent, first) under each of ``maps``,
    completed from ``base``; ``base`` with the waist groups set to every choice; ``base``
    under each of ``maps``. Candidates are timed until ``deadline`` (``base`` always, so
    the fallback plan stays a solution of the program)."""
    scope_groups = cgroups[var_of[cgroups] >= 0]
    scope_groups = scope_groups[np.argsort(var_of[scope_groups], kind="stable")]

    def candidates() -> Iterator[np.ndarray]:
        yield base
        for got in extra:
            cand = base.copy()
            cand[cgroups] = np.asarray(got, dtype=np.int64)[cgroups]
            yield cand
        for win in windows:
            gw = groups[win.ops]
            gw_groups, gw_first = np.unique(gw, return_index=True)
            for assign in reversed(found.get(win.key, ())):
                a = np.asarray(assign, dtype=np.int64)
                if a.shape != gw.shape:
                    continue
                for mp in maps:
                    cand = base.copy()
                    cand[gw_groups] = mp[a][gw_first]  # a group split inside the window: its first op's device
                    yield cand
        for at in itertools.product(range(m), repeat=scope_groups.size):
            cand = base.copy()
            cand[scope_groups] = at
            yield cand
        for mp in maps:
            yield mp[base]

    table: dict[tuple[int, ...], tuple[float, np.ndarray]] = {}
    seen: set[bytes] = set()
    for k, cand in enumerate(candidates()):
        if k > 0 and deadline is not None and time.perf_counter() >= deadline:
            break
        h = cand[cgroups].tobytes()
        if h in seen:
            continue
        seen.add(h)
        cost = 0.0
        for win in windows:
            sub = cand[groups[win.ops]]
            key = (win.key, sub.tobytes())
            if key not in cost_cache:
                s = probs[win.key].schedule(sub)
                cost_cache[key] = np.inf if s is None else s.makespan
            cost += cost_cache[key]
        at = tuple(int(d) for d in cand[scope_groups])
        if np.isfinite(cost) and (at not in table or cost < table[at][0]):
            table[at] = (cost, cand)
    return table


def joint_instance(inst: PlacementInstance, windows: Sequence[Window]) -> tuple[PlacementInstance, np.ndarray] | None:
    """The windows of one component in series (chain order): disjoint copies of their
    window instances, each window's last waist joined to the next window's first waist by
    an edge of 0 bytes, and every op co-located as in ``inst`` (so copies of one op, and
    the ops of one group, share a device). In a traced training graph the joined waists
    (a forward block's closing join and its gradient's opening join) are co-located, so
    the joint makespan (seconds) is the sum of the windows' makespans under one
    assignment: what a component costs in `chained_assignment`. (instance, the op of
    ``inst`` behind each of its ops) or None when a window lacks a waist to join."""
    if len(windows) < 2 or any(w.last is None for w in windows[:-1]) or any(w.first is None for w in windows[1:]):
        return None
    groups = inst.colocation_groups()
    subs = [w.sub for w in windows]
    offset = np.cumsum([0] + [sub.n_ops for sub in subs])
    joined = copy.copy(subs[0])
    joined.name = f"{inst.name}-joint"
    joined.op_names = [f"{name}#{k}" for k, sub in enumerate(subs) for name in sub.op_names]
    for attr in ("time", "memory", "temporary", "output"):
        setattr(joined, attr, np.concatenate([getattr(sub, attr) for sub in subs]))
    ops = np.concatenate([w.ops for w in windows])
    joined.colocate = [f"group {g}" for g in groups[ops].tolist()]
    ends = [(int(offset[k] + np.searchsorted(a.ops, a.last)), int(offset[k + 1] + np.searchsorted(b.ops, b.first))) for k, (a, b) in enumerate(zip(windows[:-1], windows[1:]))]  # type: ignore[arg-type]  # (not None: tested above)
    joined.src = np.concatenate([sub.src + offset[k] for k, sub in enumerate(subs)] + [np.asarray([a for a, _ in ends], dtype=np.int64)])
    joined.dst = np.concatenate([sub.dst + offset[k] for k, sub in enumerate(subs)] + [np.asarray([b for _, b in ends], dtype=np.int64)])
    joined.edge_bytes = np.concatenate([sub.edge_bytes for sub in subs] + [np.zeros(len(ends))])
    joined.document = None
    return joined, ops


def joint_candidates(
    inst: PlacementInstance, program: ChainProgram, device: np.ndarray, deadline: float | None = None, seed: int = 0, max_evals: int = 200
) -> dict[int, list[np.ndarray]]:
    """For each component of several windows (a forward block and its gradient block), the
    local search (`improve.improve`) on its `joint_instance` from ``device`` (a device per
    op of ``inst``), each component within an equal share of the time left to
    ``deadline`` (a ``time.perf_counter()`` value): the assignment it finds when it ends
    before the start, as a device per co-location group (the other groups as in
    ``device``), by component index (for ``extra`` of `chained_assignment`). At most
    ``max_evals`` schedules each (on inception-v3-dgx1-4, 150 find all that 600 do). The windows'
    own solver sees one window at a time, so a block pair's joint optimum (one assignment
    for both, co-located) is often none of the filed pairs: on inception-v3-dgx1-4 the
    chained plan's Mixed_5b pair spans 0.8793 ms where the joint optimum is 0.8545 ms
    (proven by the placement MILP on the joint instance)."""
    dev = np.asarray(device, dtype=np.int64)
    base = dev[program.first_member]
    multi = [(c, [program.windows[w] for w in members]) for c, (members, _, _) in enumerate(program.parts) if len(members) > 1]
    out: dict[int, list[np.ndarray]] = {}
    for k, (c, windows) in enumerate(multi):
        if deadline is not None and time.perf_counter() >= deadline:
            break
        built = joint_instance(inst, windows)
        if built is None:
            continue
        joined, ops = built
        until = None if deadline is None else time.perf_counter() + max(0.0, deadline - time.perf_counter()) / (len(multi) - k)
        found, log = improve(joined, dev[ops], deadline=until, seed=seed, max_evals=max_evals)
        if found is None or found.makespan >= log.start_makespan:
            continue
        cand = base.copy()
        _, first = np.unique(program.groups[ops], return_index=True)
        cand[program.groups[ops[first]]] = found.device[first]
        out[c] = [cand]
    return out


def chained_start(
    inst: PlacementInstance,
    chain: Sequence[int],
    found: Mapping[bytes, Sequence[np.ndarray]],
    fallbacks: Sequence[np.ndarray],
    deadline: float | None = None,
    fit: float = 0.02,
    joint: bool = True,
    seed: int = 0,
) -> Schedule | None:
    """The best evaluated plan of `chained_assignment` from each of ``fallbacks`` (a device
    per op; ops of no window keep it, which matters on devices that differ), one after the
    other until ``deadline`` (a ``time.perf_counter()`` value; the windows timed for one
    are cached for the next), each
    device ordered by `SearchProblem.schedule`; None when there is none, none fits, or
    its makespan exceeds the sum it minimized by more than ``fit`` (relative): then the
    windows do not describe the plan (resnet-50-dgx1-4: 18.09 ms against a sum of 17.29,
    the weight updates outside every window decide it, and the local search from this
    start ends worse than from m-SCT's, 17.76 vs 17.57 ms at 120 s; on the Inception
    instances the two are within 0.4-0.9%). A start for the local search beside
    `segments.glued_assignment`'s gluing, which the caller passes as a fallback:
    inception-v3-dgx1-4, from the same windows (40 s under load 6) with m-SCT's plan and
    the glued one as fallbacks: 15.29 ms before any search, against 15.93 ms glued and
    15.48 ms after 40 s of local search from the glued plan.

    With ``joint``, when the first plan is found before ``deadline``, the block pairs are
    re-solved as one (`joint_candidates`, from the first plan, within 0.4 of the time
    left), the program is run again with those candidates (0.5 of the time left), and
    that plan, when it ends no earlier than the first, improved by the local search
    (`improve.improve`, ``seed``, until ``deadline``, or 500 schedules without one); the better of
    it and the first plan is the result. The second plan's windows sum less, but the
    weight updates it moves (outside every window) can make it end later before the
    search (inception-v3-dgx1-4: sum 15.2158 -> 15.1843 ms, plan 15.2885 -> 15.2921 ms,
    15.2752 ms after 500 moves, where the first plan has no improving move)."""
    def until(share: float) -> float | None:  # a share of the time left
        return None if deadline is None else time.perf_counter() + share * max(0.0, deadline - time.perf_counter())

    program = chain_program(inst, chain, deadline)
    if program is None:
        return None
    prob = SearchProblem(inst, sink_fill=True)

    def planned(extra: Mapping[int, Sequence[np.ndarray]] | None, until: float | None) -> Schedule | None:
        best: Schedule | None = None
        for fallback in fallbacks:  # the first one times most windows; the others hit the cache
            got = chained_assignment(inst, chain, found, fallback, deadline=until, program=program, extra=extra)
            s = None if got is None else prob.schedule(got[0])
            if s is None or got is None:
                continue
            timed = evaluated_schedule(inst, make_plan(inst, s.device, s.start))
            if timed is not None and timed.makespan <= got[1] * (1 + fit) and (best is None or timed.makespan < best.makespan):
                best = timed
        return best

    best = planned(None, deadline)
    if not joint or best is None or (deadline is not None and time.perf_counter() >= deadline):
        return best
    extra = joint_candidates(inst, program, best.device, until(0.4), seed)
    if not extra:
        return best
    second = planned(extra, until(0.5))
    if second is None or np.array_equal(second.device, best.device):
        return best
    if second.makespan < best.makespan:
        return second  # the caller's search goes on from the better start
    found_s, _ = improve(inst, second.device, deadline=deadline, seed=seed, max_evals=None if deadline is not None else 500)
    if found_s is not None and found_s.makespan < second.makespan:
        again = evaluated_schedule(inst, make_plan(inst, found_s.device, found_s.start))
        if again is not None and again.makespan < second.makespan:
            second = again
    return second if second.makespan < best.makespan else best
