"""Local search over device assignments: improves the best Baechi plan (placement_search).

A plan's quality is the makespan of the memory-aware list schedule of its device assignment
(`listsched.list_schedule` with the assignment fixed, ETF order on every device, either
communication model), or under independent links and simple memory of the
longest-tail-first order of that assignment (`tailsched`) when it ends first; the api
re-evaluates the final plan with the independent evaluator.

One step looks at the schedule's *critical chain*: walking back from the op that ends
last, every op started exactly when something let it start, either

* a data input (``local``: from the same device; ``data``: a transfer from another
  device), or
* ``device`` contention: the op before it on its device, which is not one of its inputs.

Moves shorten that chain (the critical-path-guided moves of list-scheduling local search,
Kwok & Ahmad, ACM Computing Surveys 31(4), 1999, sec. 6; Wu, Shu & Gu, "Efficient local
search far away from local minima for DAG scheduling", IEEE TPDS 15(4), 2004), each move
carrying whole colocation groups:

* runs of the chain (consecutive chain ops on one device): joined to the device of the run
  before or after, boundaries shifted, the longest runs split (their tail to an idle
  device, so that work queued behind a run, a layer's weight updates say, overlaps);
* offload the blockers (first ops of ``device`` links, preferring ops with slack in the
  graph): all the chain's blockers with slack at once first (then halves, then all onto
  one device), because blockers of one kind replace each other in ETF's order and one at
  a time rarely shortens the chain; a blocker's branch (its slack neighbourhood on its
  device); single blockers to the least busy devices;
* join the ends of a ``data`` link (move the consumer to the producer's device, or back).

A move is kept when it lowers (makespan, sum of the latest twentieth of the end times):
the second key carries the search across plateaus where removing one of many equal
blockers does not yet shorten the makespan. When no move of the chain improves, the least
bad move to an unvisited assignment is taken (a tabu step) and the best plan seen is kept.
The search stops at a deadline, after ``max_evals`` schedules, at a makespan reaching a
proven bound, or after ``escapes`` tabu steps in a row. It is deterministic for a given
seed and number of evaluations. `path_clusters` and `cluster_greedy` build one more start:
critical-path clusters (longest paths, one after another) moved greedily to the device
where the schedule ends first. Times in seconds, memory in bytes.
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import NoSolutionError
from distplan.formulations.placement.listsched import Schedule, list_schedule, topological_positions
from distplan.formulations.placement.listsched_data import static_lists
from distplan.formulations.placement.relaxation import device_classes, heads_tails, longest_path_levels
from distplan.formulations.placement.sinkfill import sinks_in_gaps
from distplan.formulations.placement.tailsched import tail_priority_order
from distplan.models.placement_instance import PlacementInstance

#: links of the critical chain: (kind, from op, to op), kind in {"local", "data", "device"}
Link = tuple[str, int, int]


@dataclass
class SearchLog:
    """What the search did: schedules evaluated, moves kept, makespans (seconds)."""

    evaluations: int = 0
    accepted: int = 0
    start_makespan: float = float("inf")
    makespan: float = float("inf")
    stopped: str = ""
    history: list[float] = field(default_factory=list)


class SearchProblem:
    """Static data of one instance for the search: colocation groups, inputs per op, graph
    slack at fastest times (seconds), memory needs (bytes), topological positions."""

    def __init__(self, inst: PlacementInstance, tail_order: bool = True, sink_fill: bool = False):
        self.inst = inst
        self.accepted = inst.accepted_memory().tolist()  # bytes per device the evaluator accepts
        #: under independent links and the simple memory model (where memory does not
        #: depend on timing), also time each assignment by `tailsched`; the better wins
        self.tail_order = tail_order and inst.communication == "independent" and inst.memory_model == "simple" and inst.n_devices > 1
        self.level = longest_path_levels(inst) if self.tail_order else None  # the graph's, for every timing
        #: with the same models, also move the sinks into idle gaps (`sinkfill`) when that
        #: ends first; off in the search's own steps: resnet-50-dgx1-4's search from m-SCT
        #: ends at 18.02 ms with it, 17.57 ms without (1000 schedules; its key then ranks
        #: moves by where the updates went), so `improve` applies it to its result only
        self.sink_fill = sink_fill and self.tail_order
        n = inst.n_ops
        self.static = static_lists(inst, with_members=False)  # read only: one serves every move
        self.topo = topological_positions(inst, self.static.ids)  # the same int objects
        groups = inst.colocation_groups()
        self.groups = groups
        order = np.argsort(groups, kind="stable")
        cuts = np.flatnonzero(np.diff(groups[order])) + 1
        self.members = {int(groups[g[0]]): g for g in np.split(order, cuts) if g.size}
        self.preds: list[list[int]] = [[] for _ in range(n)]
        for e, b in enumerate(inst.dst.tolist()):
            self.preds[b].append(e)
        p = inst.time.min(axis=1)
        r, q = heads_tails(inst, p)
        self.slack = float((r + p + q).max(initial=0.0)) - (r + p + q)
        self.need = inst.memory_need()
        self.simple = inst.memory_model == "simple"
        self.nbrs: list[list[int]] | None = None  # undirected adjacency, built on first use

    def schedule(self, device: np.ndarray) -> Schedule | None:
        """The list schedule of a fixed assignment, or (``tail_order``) its
        longest-tail-first order (`tailsched`) when that ends first, and then (``sink_fill``)
        that schedule with its sinks moved into idle gaps (`sinkfill`) when that ends first
        (None when memory does not fit)."""
        inst = self.inst
        if self.simple and np.any(np.bincount(device, weights=self.need, minlength=inst.n_devices) > inst.accepted_memory()):
            return None
        try:
            found = list_schedule(inst, assignment=device, topo=self.topo, static=self.static)
        except NoSolutionError:
            return None
        if self.tail_order:
            start = tail_priority_order(inst, device, self.level)
            span = float((start + inst.time[np.arange(inst.n_ops), device]).max())
            if span < found.makespan:
                found = Schedule(device=np.asarray(device, dtype=np.int64).copy(), start=start, makespan=span)
        return self.filled(found) if self.sink_fill else found

    def filled(self, s: Schedule) -> Schedule:
        """``s`` or, under independent links and simple memory, ``s`` with its sinks moved
        into idle gaps (`sinkfill`), whichever ends first."""
        if not self.tail_order:
            return s
        start = sinks_in_gaps(self.inst, s.device, s.start)
        if start is None:
            return s
        span = float((start + self.inst.time[np.arange(self.inst.n_ops), s.device]).max())
        return Schedule(device=np.asarray(s.device, dtype=np.int64).copy(), start=start, makespan=span) if span < s.makespan else s

    def key(self, s: Schedule) -> tuple[float, float]:
        """(makespan, sum of the latest twentieth of the end times), seconds."""
        end = s.start + self.inst.time[np.arange(self.inst.n_ops), s.device]
        k = max(1, self.inst.n_ops // 20)
        return (s.makespan, float(np.partition(end, end.size - k)[end.size - k :].sum()))


def critical_links(prob: SearchProblem, s: Schedule, rng: np.random.Generator) -> list[Link]:
    """The links of one critical chain of schedule ``s``, from the last op back to time 0
    (ties between tight links broken at random)."""
    inst = prob.inst
    n = inst.n_ops
    dev = s.device
    start = s.start
    end = start + inst.time[np.arange(n), dev]
    tol = 1e-9 * max(1.0, s.makespan)
    prev = np.full(n, -1, dtype=np.int64)
    for d in range(inst.n_devices):
        ops = np.flatnonzero(dev == d)
        o = ops[np.lexsort((end[ops], start[ops]))]
        prev[o[1:]] = o[:-1]
    channels = inst.communication == "channels"
    v = int(np.argmax(end))
    links: list[Link] = []
    for _ in range(n):
        cands: list[tuple[str, int]] = []
        inputs = set()
        late: tuple[float, int] | None = None
        for e in prob.preds[v]:
            u = int(inst.src[e])
            inputs.add(u)
            du, dv = int(dev[u]), int(dev[v])
            if du == dv:
                if end[u] >= start[v] - tol:
                    cands.append(("local", u))
                continue
            arrive = end[u] + inst.latency[du, dv] + inst.edge_bytes[e] / inst.bandwidth[du, dv]
            if arrive >= start[v] - tol:
                cands.append(("data", u))
            if late is None or arrive > late[0]:
                late = (arrive, u)
        p = int(prev[v])
        if p >= 0 and p not in inputs and end[p] >= start[v] - tol:
            cands.append(("device", p))
        if not cands and channels and late is not None and start[v] > tol:
            cands.append(("data", late[1]))  # waited for a channel: the latest transfer
        if not cands:
            break
        kind, u = cands[int(rng.integers(len(cands)))]
        links.append((kind, u, v))
        v = u
    return links


def _destinations(prob: SearchProblem, device: np.ndarray, busy: np.ndarray, used: np.ndarray, ops: np.ndarray, avoid: int) -> list[int]:
    """Devices other than ``avoid`` that hold ``ops`` (simple memory), least busy first."""
    need = float(prob.need[ops].sum())
    out = []
    for d in np.argsort(busy, kind="stable").tolist():
        if d == avoid:
            continue
        if prob.simple and used[d] + need > prob.accepted[d]:
            continue
        out.append(int(d))
    return out


def candidate_moves(prob: SearchProblem, device: np.ndarray, links: list[Link], fanout: int = 2) -> list[list[tuple[np.ndarray, int]]]:
    """Moves for a chain, best first; a move is a list of (ops, device) reassignments.

    Moves of the chain's runs (`run_splits`: joins and boundary shifts first), compound
    offloads of the blockers with slack (all, then halves, then all onto one device),
    their branches, single offloads of blockers (by decreasing graph slack) to the
    ``fanout`` least busy devices, then joins of transfer links."""
    inst = prob.inst
    m = inst.n_devices
    busy = np.bincount(device, weights=inst.time[np.arange(inst.n_ops), device], minlength=m)
    used = np.bincount(device, weights=prob.need, minlength=m)
    blockers: list[int] = []  # first ops of device links, then the ops they delay
    blocked: list[int] = []
    seen: set[int] = set()
    for kind, u, v in links:
        if kind == "device":
            for w, out in ((u, blockers), (v, blocked)):
                g = int(prob.groups[w])
                if g not in seen:
                    seen.add(g)
                    out.append(w)
    blockers.sort(key=lambda w: -prob.slack[w])
    blocked.sort(key=lambda w: -prob.slack[w])
    moves: list[list[tuple[np.ndarray, int]]] = run_splits(prob, device, links, busy, used, fanout)
    with_slack = [w for w in blockers if prob.slack[w] > 0]
    size = len(with_slack)
    while size >= 2:
        b2, u2 = busy.copy(), used.copy()
        move = []
        for w in with_slack[:size]:
            ops = prob.members[int(prob.groups[w])]
            dests = _destinations(prob, device, b2, u2, ops, int(device[w]))
            if not dests:
                continue
            d = dests[0]
            t = float(inst.time[ops, d].sum())
            b2[d] += t
            b2[device[w]] -= float(inst.time[ops, device[w]].sum())
            u2[d] += prob.need[ops].sum()
            move.append((ops, d))
        if move:
            moves.append(move)
        size //= 2
    if with_slack:  # all of them together onto one device (keeps their own edges local)
        ops = np.unique(np.concatenate([prob.members[int(prob.groups[w])] for w in with_slack]))
        for d in _destinations(prob, device, busy, used, ops, -1)[:fanout]:
            moves.append([(ops[device[ops] != d], d)])
    chain_ops = {u for _, u, _ in links} | {v for _, _, v in links}
    for w in with_slack[:4]:  # a blocker's whole branch: its slack neighbourhood on its device
        ops = branch(prob, device, w, chain_ops)
        if ops.size > 1:
            for d in _destinations(prob, device, busy, used, ops, int(device[w]))[:fanout]:
                moves.append([(ops, d)])
    for w in blockers + blocked:
        ops = prob.members[int(prob.groups[w])]
        for d in _destinations(prob, device, busy, used, ops, int(device[w]))[:fanout]:
            moves.append([(ops, d)])
    for kind, u, v in links:
        if kind == "data":
            for w, d in ((v, int(device[u])), (u, int(device[v]))):
                ops = prob.members[int(prob.groups[w])]
                if not prob.simple or used[d] + prob.need[ops].sum() <= prob.accepted[d]:
                    moves.append([(ops, d)])
    return moves


def branch(prob: SearchProblem, device: np.ndarray, w: int, chain_ops: set[int], limit: int = 400) -> np.ndarray:
    """The ops connected to ``w`` (edges either way) on its device, off the critical chain,
    with at least half its graph slack, and their colocation groups (breadth first, at most
    ``limit`` ops): a side branch that can run elsewhere with few transfers."""
    inst = prob.inst
    if prob.nbrs is None:
        nb: list[list[int]] = [[] for _ in range(inst.n_ops)]
        for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
            nb[a].append(b)
            nb[b].append(a)
        prob.nbrs = nb
    d = int(device[w])
    floor = 0.5 * float(prob.slack[w])
    seen = {w}
    queue = [w]
    k = 0
    while k < len(queue) and len(seen) < limit:
        v = queue[k]
        k += 1
        for u in prob.nbrs[v]:
            if u not in seen and device[u] == d and u not in chain_ops and prob.slack[u] >= floor:
                seen.add(u)
                queue.append(u)
    ops = np.unique(np.concatenate([prob.members[int(prob.groups[v])] for v in seen]))
    return ops[device[ops] == d]


def chain_runs(device: np.ndarray, links: list[Link]) -> list[list[int]]:
    """The critical chain (first op first) cut into runs of consecutive ops on one device."""
    if not links:
        return []
    chain = [links[-1][1]] + [v for _, _, v in reversed(links)]
    runs: list[list[int]] = []
    for v in chain:
        if runs and device[runs[-1][-1]] == device[v]:
            runs[-1].append(v)
        else:
            runs.append([v])
    return runs


def run_splits(prob: SearchProblem, device: np.ndarray, links: list[Link], busy: np.ndarray, used: np.ndarray, fanout: int) -> list[list[tuple[np.ndarray, int]]]:
    """Moves of parts of the critical chain's runs (consecutive chain ops on one device),
    each with the colocation groups of its ops:

    * boundary shifts and joins: the whole run, or its first / last half (quarter), to the
      device of the run before or after it on the chain (fewer transfers on the chain,
      or memory moved across a boundary so that a later join fits);
    * splits of the longest runs: their later or earlier half (quarter, three quarters,
      seven eighths) to the least busy devices, so that work queued behind a run (a
      layer's weight updates, say) overlaps with the rest of the chain."""
    runs = chain_runs(device, links)
    moves: list[list[tuple[np.ndarray, int]]] = []

    def part_move(part: list[int], d: int) -> None:
        if not part:
            return
        here = int(device[part[0]])
        ops = np.unique(np.concatenate([prob.members[int(prob.groups[w])] for w in part]))
        ops = ops[device[ops] == here]
        if ops.size and (not prob.simple or used[d] + prob.need[ops].sum() <= prob.accepted[d]):
            moves.append([(ops, d)])

    for k, run in enumerate(runs):
        size = len(run)
        if k > 0:  # towards the previous run's device: the whole run or its head
            d = int(device[runs[k - 1][0]])
            for cut in sorted({size, (size + 1) // 2, (size + 3) // 4}):
                part_move(run[:cut], d)
        if k + 1 < len(runs):  # towards the next run's device: the whole run or its tail
            d = int(device[runs[k + 1][0]])
            for cut in sorted({0, size // 2, (3 * size) // 4}):
                part_move(run[cut:], d)
    for run in sorted(runs, key=len, reverse=True)[:4]:
        if len(run) < 4:
            continue
        here = int(device[run[0]])
        for frac in (0.5, 0.75, 0.25, 0.875):
            cut = int(round(frac * len(run)))
            for part in (run[cut:], run[:cut]):
                if not part:
                    continue
                ops = np.unique(np.concatenate([prob.members[int(prob.groups[w])] for w in part]))
                ops = ops[device[ops] == here]
                for d in _destinations(prob, device, busy, used, ops, here)[:fanout]:
                    moves.append([(ops, d)])
    return moves


def improve(
    inst: PlacementInstance,
    device: np.ndarray,
    *,
    deadline: float | None = None,
    max_evals: int | None = None,
    seed: int = 0,
    per_step: int = 80,
    escapes: int = 30,
    target: float = 0.0,
    tail_order: bool = True,
) -> tuple[Schedule | None, SearchLog]:
    """Local search from ``device`` (one id per op) until ``deadline`` (a
    ``time.perf_counter()`` value) or ``max_evals`` schedules.

    First improvement among the first ``per_step`` moves of the chain (two destination
    devices each); when none improves, every move with every destination; when still none
    does, the least bad move not leading to a visited assignment is taken (a tabu step,
    at most ``escapes`` times in a row) and the best schedule seen is kept. Stops early at
    a makespan <= ``target`` (a proven lower bound, seconds). ``tail_order``: under
    independent links and simple memory each assignment is also timed longest-tail-first
    (`tailsched`).
    Returns the best schedule (None when the start does not fit memory) or, when one ends
    first, the best of the schedules it stepped to with their sinks moved into idle gaps
    (`SearchProblem.filled`), and the log."""
    prob = SearchProblem(inst, tail_order)
    rng = np.random.default_rng(seed)
    log = SearchLog()
    m = inst.n_devices
    dev = np.asarray(device, dtype=np.int64).copy()
    cur = prob.schedule(dev)
    log.evaluations += 1
    if cur is None:
        log.stopped = "start does not fit"
        return None, log
    ck = prob.key(cur)
    best, bk = cur, ck
    shown = prob.filled(cur)  # the best plan with its sinks moved, over every step taken
    log.start_makespan = cur.makespan
    log.history.append(cur.makespan)
    visited = {dev.tobytes()}
    stuck = 0

    def out_of_budget() -> str:
        if best.makespan <= target:
            return "reached the bound"
        if deadline is not None and time.perf_counter() >= deadline:
            return "time limit"
        if max_evals is not None and log.evaluations >= max_evals:
            return "evaluation limit"
        return ""

    while not log.stopped and m > 1:
        links = critical_links(prob, cur, rng)
        step: tuple[tuple[float, float], np.ndarray, Schedule] | None = None
        for wide in (False, True):
            moves = candidate_moves(prob, dev, links, fanout=m - 1 if wide else 2)
            if not wide:
                moves = moves[:per_step]
            for move in moves:
                why = out_of_budget()
                if why:
                    log.stopped = why
                    break
                trial = dev.copy()
                for ops, d in move:
                    trial[ops] = d
                h = trial.tobytes()
                if h in visited:
                    continue
                visited.add(h)
                s = prob.schedule(trial)
                log.evaluations += 1
                if s is None:
                    continue
                k = prob.key(s)
                if step is None or k < step[0]:
                    step = (k, trial, s)
                if k < ck:
                    break
            if log.stopped or (step is not None and step[0] < ck):
                break
        if step is None:
            if not log.stopped:
                log.stopped = "no move left"
            break
        if step[0] >= ck:
            stuck += 1
            if stuck > escapes:
                log.stopped = "no improving move"
                break
        else:
            stuck = 0 if step[0] < bk else stuck
        ck, dev, cur = step
        log.accepted += 1
        moved = prob.filled(cur)
        if moved.makespan < shown.makespan:
            shown = moved
        if ck < bk:
            best, bk = cur, ck
            if cur.makespan < log.history[-1]:
                log.history.append(cur.makespan)
    if shown.makespan < best.makespan:
        best = shown
    log.makespan = best.makespan
    return best, log


def search_info(log: SearchLog) -> dict[str, Any]:
    return {
        "search_evaluations": log.evaluations,
        "search_moves": log.accepted,
        "search_start_makespan": log.start_makespan,
        "search_makespan": log.makespan,
        "search_stopped": log.stopped,
    }


def path_clusters(inst: PlacementInstance, min_share: float = 0.002, limit: int = 400) -> np.ndarray:
    """Cluster id per op: repeatedly the longest path (fastest times) through the ops not yet
    clustered (a critical-path clustering in the spirit of Kim & Browne's linear clustering,
    ICPP 1988), until the next path holds less than ``min_share`` of the total work or
    ``limit`` clusters exist; every other op joins the cluster of an input (else of a
    consumer)."""
    n = inst.n_ops
    p = inst.time.min(axis=1)
    order = inst.topo_order().tolist()
    succ: list[list[int]] = [[] for _ in range(n)]
    pred: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].append(b)
        pred[b].append(a)
    cl = [-1] * n
    pl = p.tolist()
    floor = min_share * float(p.sum())
    for k in range(limit):
        best = [0.0] * n
        nxt = [-1] * n
        for v in reversed(order):
            if cl[v] >= 0:
                continue
            bv, bn = 0.0, -1
            for w in succ[v]:
                if cl[w] < 0 and best[w] > bv:
                    bv, bn = best[w], w
            best[v] = pl[v] + bv
            nxt[v] = bn
        free = [v for v in range(n) if cl[v] < 0]
        if not free:
            break
        v = max(free, key=lambda u: best[u])
        if best[v] < floor and k > 0:
            break
        while v >= 0:
            cl[v] = k
            v = nxt[v]
    for v in order:
        if cl[v] < 0:
            nb = [u for u in pred[v] if cl[u] >= 0] or [w for w in succ[v] if cl[w] >= 0]
            cl[v] = cl[nb[0]] if nb else 0
    return np.asarray(cl, dtype=np.int64)


def cluster_greedy(inst: PlacementInstance, device: np.ndarray, deadline: float | None = None) -> Schedule | None:
    """From ``device``, move each `path_clusters` cluster (heaviest first, with its
    colocation groups) to the device where the list schedule finishes first, keeping a
    move only when it shortens the makespan (seconds); stops at ``deadline``."""
    prob = SearchProblem(inst)
    dev = np.asarray(device, dtype=np.int64).copy()
    cur = prob.schedule(dev)
    if cur is None or inst.n_devices < 2:
        return cur
    cl = path_clusters(inst)
    work = np.bincount(cl, weights=inst.time.min(axis=1))
    for c in np.argsort(-work, kind="stable").tolist():
        ops = np.flatnonzero(cl == c)
        ops = np.unique(np.concatenate([prob.members[int(prob.groups[o])] for o in ops]))
        best: tuple[Schedule, int] | None = None
        for d in range(inst.n_devices):
            if deadline is not None and time.perf_counter() >= deadline:
                return cur
            if np.all(dev[ops] == d):
                continue
            trial = dev.copy()
            trial[ops] = d
            s = prob.schedule(trial)
            if s is not None and s.makespan < (cur.makespan if best is None else best[0].makespan):
                best = (s, d)
        if best is not None:
            cur = best[0]
            dev[ops] = best[1]
    return cur


def renamings(classes: list[np.ndarray], n_devices: int, max_perms: int, swaps: bool = False) -> list[np.ndarray]:
    """Device renamings (arrays old -> new device) within each class of interchangeable
    devices (``classes``, `relaxation.device_classes`): all of them when there are at most
    ``max_perms``; else the identity, and with ``swaps`` also every swap of two devices of
    one class."""
    count = 1
    for c in classes:
        count *= int(np.prod(np.arange(1, c.size + 1)))
    if count <= max_perms:
        out = []
        for perm in itertools.product(*(itertools.permutations(c.tolist()) for c in classes)):
            mapping = np.arange(n_devices)
            for c, q in zip(classes, perm):
                mapping[c] = q
            out.append(mapping)
        return out
    out = [np.arange(n_devices)]
    for c in classes if swaps else []:
        for a, b in itertools.combinations(c.tolist(), 2):
            mapping = np.arange(n_devices)
            mapping[[a, b]] = [b, a]
            out.append(mapping)
    return out


def relabelled(inst: PlacementInstance, device: np.ndarray, max_perms: int = 120) -> Schedule | None:
    """The assignment ``device`` with its devices renamed within each class of
    interchangeable devices (equal op times and memory, `relaxation.device_classes`) so
    that its schedule (`SearchProblem.schedule`) ends first: every renaming when there are at
    most ``max_perms``, else the assignment as it is. A relaxation that charges every cut
    its fastest link (the assignment relaxation) names devices without regard to the links
    between them; on DGX-1 the links differ by 2x. None when nothing fits memory."""
    prob = SearchProblem(inst)
    dev = np.asarray(device, dtype=np.int64)
    best: Schedule | None = None
    for mapping in renamings([c for c in device_classes(inst) if c.size > 1], inst.n_devices, max_perms):
        s = prob.schedule(mapping[dev])
        if s is not None and (best is None or s.makespan < best.makespan):
            best = s
    return best
