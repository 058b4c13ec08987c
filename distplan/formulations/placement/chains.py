"""Layer chains and a search over whole layers: structured starts for placement_search.

A traced graph of a recurrent network (or any layer applied step after step) holds *layer
chains*: the ops of one layer unrolled over time, which a tracer names after one scope and
one op name with a counter (``.../cell_1/lstm_cell/LSTMBlockCell``, ``..._1``, ``..._2``, ...)
and where each step feeds the next. Under Baechi's channel model every cut tensor occupies
the channels of both its ends, so good plans keep each chain on one device and pipeline the
layers across devices, handing one tensor per step between them; op-by-op moves from the
Baechi heuristics' plans rarely get there, since moving one step of a chain adds transfers
before it removes any.

* `layer_chains` finds the chains: ops grouped by their name stem (the name without the
  counter ``_<n>`` of its last component), kept when the group, in topological order, is a
  path of the graph (each op feeds the next) of at least ``min_length`` ops.
* `layer_groups` turns the chains into a partition of all ops: every other op joins a chain
  along the costliest edges (`edge_weights`: the seconds a cut would cost, under channels
  shared among the consumers of one tensor; a maximum spanning forest built costliest edge
  first, Kruskal 1956, in which no tree holds two chains), so that a layer's weights, its per-step inputs
  and the ops reading its outputs travel with it; colocation groups stay whole; ops joined
  to no chain form groups of their own (one per connected component).
* `group_search` assigns whole groups to devices: hill climbing over moves of one group and
  swaps of two (first improvement; moves in random order, then swaps; the list schedule of
  `improve.SearchProblem` as the measure, (makespan, late end times) as the key), from the
  heuristics' assignment read per group, all groups on one device, and pipeline starts
  (groups in topological order cut into consecutive blocks of balanced work, for 2 .. m
  blocks), then iterated local search (random kicks of two moves from the best assignment,
  Lourenço, Martin & Stützle, "Iterated local search", Handbook of Metaheuristics 2003)
  until the deadline.

The result is one more start for `improve`'s op-level local search. Times in seconds,
memory in bytes, edge sizes in bytes.
"""

from __future__ import annotations

import itertools
import re
import time

import numpy as np

from distplan.formulations.placement.improve import SearchLog, SearchProblem
from distplan.formulations.placement.listsched import Schedule
from distplan.formulations.placement.relaxation import transfer_classes
from distplan.models.placement_instance import PlacementInstance

_COUNTER = re.compile(r"_\d+$")


def name_stem(name: str) -> str:
    """``name`` without the counter ``_<n>`` at the end of its last component (the suffix
    tracers add to the repeats of one op in one scope)."""
    head, sep, last = name.rpartition("/")
    return head + sep + _COUNTER.sub("", last)


def layer_chains(inst: PlacementInstance, min_length: int = 4) -> list[np.ndarray]:
    """The layer chains of ``inst``: for each name stem shared by at least ``min_length``
    ops that, in topological order, each feed the next, those ops (in that order). Chains
    are listed by their first op's topological position."""
    n = inst.n_ops
    pos = np.empty(n, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(n)
    stems: dict[str, list[int]] = {}
    for v, name in enumerate(inst.op_names):
        stems.setdefault(name_stem(name), []).append(v)
    arcs = set(zip(inst.src.tolist(), inst.dst.tolist()))
    found: list[np.ndarray] = []
    for ops in stems.values():
        if len(ops) < min_length:
            continue
        ops.sort(key=lambda v: pos[v])
        if all((a, b) in arcs for a, b in zip(ops, ops[1:])):
            found.append(np.asarray(ops, dtype=np.int64))
    found.sort(key=lambda c: pos[c[0]])
    return found


def edge_weights(inst: PlacementInstance) -> np.ndarray:
    """Seconds per edge that a cut would cost on an average link (latency + bytes /
    bandwidth over distinct device pairs); under the channel model a tensor reaches a
    device once, so an edge's cost is shared among the consumers of its tensor (edges from
    one producer with equal bytes, `relaxation.transfer_classes`)."""
    m = inst.n_devices
    off = ~np.eye(m, dtype=bool)
    lat = float(inst.latency[off].mean()) if m > 1 else 0.0
    bw = float(inst.bandwidth[off].mean()) if m > 1 else 1.0
    w = lat + inst.edge_bytes / bw
    if inst.communication == "channels" and inst.n_edges:
        cls, count = transfer_classes(inst)
        w = w / np.bincount(cls, minlength=count)[cls]
    return w


def layer_groups(inst: PlacementInstance, chains: list[np.ndarray]) -> np.ndarray:
    """Group id per op: group k holds chain k (and the colocation groups of its ops) and the
    ops joined to it along the costliest edges (`edge_weights`); two chains that share a colocation group
    share a group. Ops joined to no chain form one group per connected component, numbered
    after the chains'. Ids are 0 .. G-1."""
    # imported here: scipy.cluster takes ~0.1 s to import, charged to every placement run's limit
    from scipy.cluster.hierarchy import DisjointSet

    n = inst.n_ops
    sets = DisjointSet(range(n))
    chain_of: dict[int, int] = {}  # chain label of each labelled set, by its root

    def join(a: int, b: int) -> None:
        """Merge the sets of ``a`` and ``b``; the merged set keeps ``a``'s chain label, else ``b``'s."""
        ra, rb = sets[a], sets[b]
        if ra == rb:
            return
        label_a, label_b = chain_of.pop(ra, -1), chain_of.pop(rb, -1)
        sets.merge(ra, rb)
        label = label_a if label_a >= 0 else label_b
        if label >= 0:
            chain_of[sets[ra]] = label

    for k, ops in enumerate(chains):
        for v in ops[1:].tolist():
            join(int(ops[0]), v)
        chain_of[sets[int(ops[0])]] = k
    colo = inst.colocation_groups()
    first: dict[int, int] = {}
    for v, g in enumerate(colo.tolist()):  # colocated ops always together, chains or not
        if g in first:
            join(first[g], v)
        else:
            first[g] = v
    for e in np.argsort(-edge_weights(inst), kind="stable").tolist():
        a, b = int(inst.src[e]), int(inst.dst[e])
        if sets[a] != sets[b] and not (sets[a] in chain_of and sets[b] in chain_of):
            join(a, b)
    roots = [sets[v] for v in range(n)]
    ids: dict[int, int] = {}
    label = np.empty(n, dtype=np.int64)
    # chains first, in their order, then the other components in order of their first op
    keyed = {r: chain_of[r] for r in set(roots) if r in chain_of}
    for r in sorted(keyed, key=lambda r: keyed[r]):
        ids[r] = len(ids)
    for v, r in enumerate(roots):
        if r not in ids:
            ids[r] = len(ids)
        label[v] = ids[r]
    return label


def pipeline_blocks(work: np.ndarray, parts: int) -> np.ndarray:
    """Block id per item when ``work`` (per item, in pipeline order) is cut into at most
    ``parts`` consecutive blocks minimizing the largest block's work (dynamic program over
    cut points, O(parts x items^2))."""
    g = work.size
    prefix = np.concatenate([[0.0], np.cumsum(work)])
    best = np.full((parts + 1, g + 1), np.inf)
    cut = np.zeros((parts + 1, g + 1), dtype=np.int64)
    best[0, 0] = 0.0
    for k in range(1, parts + 1):
        for j in range(1, g + 1):
            val = np.maximum(best[k - 1, :j], prefix[j] - prefix[:j])  # last block i .. j-1
            i = int(np.argmin(val))
            best[k, j], cut[k, j] = val[i], i
    k = int(np.argmin(best[1:, g])) + 1
    out = np.empty(g, dtype=np.int64)
    j = g
    while k > 0:
        i = int(cut[k, j])
        out[i:j] = k - 1
        j, k = i, k - 1
    return out


def group_search(
    inst: PlacementInstance,
    label: np.ndarray,
    device: np.ndarray | None = None,
    *,
    deadline: float | None = None,
    max_evals: int | None = None,
    seed: int = 0,
    kicks: int = 50,
    swap_groups: int = 40,
) -> tuple[Schedule | None, SearchLog]:
    """The best list schedule (seconds) found by moving whole groups (``label``: group id
    per op, 0 .. G-1) between devices, from the starts named in the module docstring
    (``device``: an assignment per op, read per group by the device holding most of the
    group's work) until ``deadline`` (a ``time.perf_counter()`` value) or ``max_evals``
    schedules, or after ``kicks`` kicks in a row that lead only to assignments measured
    before. Swaps pair the ``swap_groups`` groups of most work. Deterministic for a seed and
    an evaluation budget. Returns the schedule (None when no start fits memory) and the
    search's log."""
    prob = SearchProblem(inst)
    m = inst.n_devices
    g = int(label.max()) + 1 if label.size else 0
    p = inst.time.min(axis=1)
    work = np.bincount(label, weights=p, minlength=g)
    rng = np.random.default_rng(seed)
    heavy = np.sort(np.argsort(-work, kind="stable")[:swap_groups]).tolist()
    log = SearchLog()
    seen: dict[bytes, tuple[tuple[float, float], Schedule] | None] = {}
    evals = 0

    def over() -> bool:
        return (deadline is not None and time.perf_counter() >= deadline) or (max_evals is not None and evals >= max_evals)

    def measure(assign: np.ndarray) -> tuple[tuple[float, float], Schedule] | None:
        nonlocal evals
        h = assign.tobytes()
        if h not in seen:
            s = prob.schedule(assign[label])
            evals += 1
            seen[h] = None if s is None else (prob.key(s), s)
        return seen[h]

    starts: list[np.ndarray] = []
    if device is not None:
        share = np.zeros((g, m))
        np.add.at(share, (label, np.asarray(device, dtype=np.int64)), p + 1e-12)
        starts.append(np.argmax(share, axis=1).astype(np.int64))
    starts.append(np.full(g, int(np.argmin(inst.time.sum(axis=0))), dtype=np.int64))
    pos = np.asarray(prob.topo[1], dtype=np.int64)  # topological position of each op
    first = np.full(g, inst.n_ops, dtype=np.int64)
    np.minimum.at(first, label, pos)
    order = np.argsort(first, kind="stable")
    for parts in range(2, min(m, g) + 1):
        assign = np.empty(g, dtype=np.int64)
        assign[order] = pipeline_blocks(work[order], parts)
        starts.append(assign)
    best: tuple[tuple[float, float], np.ndarray, Schedule] | None = None
    measured = []
    for a in starts:
        if over():
            break
        r = measure(a)
        if r is not None:
            measured.append((r[0], a))
            if best is None or r[0] < best[0]:
                best = (r[0], a, r[1])
    measured.sort(key=lambda t: t[0])
    if best is not None:
        log.start_makespan = best[2].makespan
        log.history.append(best[2].makespan)

    def climb(assign: np.ndarray, key: tuple[float, float]) -> tuple[tuple[float, float], np.ndarray]:
        while not over():
            moves: list[tuple[int, int, int]] = [(a, d, -1) for a in range(g) for d in range(m) if d != assign[a]]
            moves += [(a, -1, b) for a, b in itertools.combinations(heavy, 2) if assign[a] != assign[b]]
            better = False
            singles = sum(1 for mv in moves if mv[2] < 0)  # moves of one group first, then swaps
            for k in np.concatenate([rng.permutation(singles), singles + rng.permutation(len(moves) - singles)]).tolist():
                if over():
                    break
                a, d, b = moves[k]
                trial = assign.copy()
                if b < 0:
                    trial[a] = d
                else:
                    trial[a], trial[b] = assign[b], assign[a]
                r = measure(trial)
                if r is not None and r[0] < key:
                    assign, key, better = trial, r[0], True
                    break
            if not better:
                break
        return key, assign

    def keep(key: tuple[float, float], assign: np.ndarray) -> None:
        nonlocal best
        if best is None or key < best[0]:
            r = seen[assign.tobytes()]
            assert r is not None
            best = (key, assign, r[1])
            if r[1].makespan < log.history[-1]:
                log.history.append(r[1].makespan)
                log.accepted += 1

    for key, a in measured:  # every start climbed, best first
        if over():
            break
        keep(*climb(a, key))
    stale = 0  # kicks in a row that reached only assignments seen before
    while best is not None and not over() and g > 1 and stale < kicks:  # kicks from the best
        trial = best[1].copy()
        for a in rng.choice(g, size=min(2, g), replace=False).tolist():
            trial[a] = int(rng.integers(m))
        before = evals
        r = measure(trial)
        if r is not None:
            keep(*climb(trial, r[0]))
        stale = 0 if evals > before else stale + 1
    log.evaluations = evals
    log.stopped = "time limit" if deadline is not None and time.perf_counter() >= deadline else "evaluation limit" if max_evals is not None and evals >= max_evals else "no new assignment" if best is not None else "no start fits"
    if best is None:
        return None, log
    log.makespan = best[2].makespan
    return best[2], log
