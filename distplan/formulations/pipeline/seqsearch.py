"""Local search over device sequences for an `opmodel.OpProblem` (Tessel's warm-up and
cool-down, or a whole small schedule): a cheap improvement phase before (or instead of)
their MILPs.

With the sequence of operations on every device fixed, the earliest start times are a
longest-path computation over the precedence arcs and the sequence arcs, and the memory
prefix of a device is the cumulative sum along its sequence (memory is charged at a
block's start), so a schedule is its sequences. The neighbourhood is that of job-shop
tabu search (van Laarhoven, Aarts & Lenstra, Oper. Res. 1992; Nowicki & Smutnicki,
Management Sci. 1996): reverse two operations adjacent on a device whose sequence arc
lies on a critical path (only such a reversal can shorten it), on every device the two
share, when they are unrelated by precedence and the memory prefixes stay within the
capacities. Steepest descent with a short tabu list of reversed pairs lets the search
cross plateaus of equal objective; the secondary objective (the sum of start times)
breaks ties. Times in seconds, memory in bytes.
"""

from __future__ import annotations

import functools
import math
import time

import numpy as np

from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.pipeline.opmodel import OpProblem, closure

EPS = 1e-9


class SequenceSearch:
    """The evaluation machinery of one problem (arcs, closure, memory) for many moves."""

    def __init__(self, prob: OpProblem, deadline: float | None = None):
        """``deadline`` (a ``time.perf_counter()`` value) stops the closure (`reach`), built
        when a move first needs it, with `DeadlineReached`."""
        self.prob = prob
        self.deadline = deadline
        n = prob.n
        self.n = n
        self.dur = prob.dur.astype(float).tolist()
        self.release = [0.0] * n if prob.release is None else prob.release.astype(float).tolist()
        tail = np.zeros(n) if prob.tail is None else prob.tail
        self.tail = tail.astype(float).tolist()
        self.succ: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        self.indeg0 = [0] * n
        for a, b, g in zip(prob.arcs.src.tolist(), prob.arcs.dst.tolist(), prob.arcs.gap.tolist()):
            self.succ[a].append((b, float(g)))
            self.indeg0[b] += 1
        nd = prob.mask.shape[1]
        self.devs = [np.flatnonzero(prob.mask[i]).tolist() for i in range(n)]
        self.nd = nd
        init = np.zeros(nd) if prob.init_mem is None else prob.init_mem
        self.init = [float(x) for x in init]
        self.cap = [float(c) for c in prob.capacity]
        self.mem = prob.mem.astype(float).tolist()
        self.deadline_rows: list[tuple[int, float]] = []
        if prob.objective == "shift":
            self.deadline_rows = [(int(o), float(g) - float(b)) for o, g, b in zip(prob.deadline_ops.tolist(), prob.deadline_gap.tolist(), prob.deadline_base.tolist())]

    # -- evaluation ----------------------------------------------------------------------

    def memory_ok(self, seq: list[int], d: int) -> bool:
        cap = self.cap[d]
        if not math.isfinite(cap):
            return True
        level = self.init[d]
        tol = EPS * max(1.0, abs(cap))
        for op in seq:
            level += self.mem[op]
            if self.mem[op] > 0 and level > cap + tol:
                return False
        return True

    def heads(self, seqs: list[list[int]]) -> list[float] | None:
        """Earliest starts for the sequences (None: the sequences contradict the arcs)."""
        n = self.n
        nxt: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        indeg = list(self.indeg0)
        for seq in seqs:
            for a, b in zip(seq, seq[1:]):
                nxt[a].append((b, self.dur[a]))
                indeg[b] += 1
        head = list(self.release)
        stack = [v for v in range(n) if indeg[v] == 0]
        seen = 0
        while stack:
            v = stack.pop()
            seen += 1
            hv = head[v]
            for w, g in self.succ[v]:
                if hv + g > head[w]:
                    head[w] = hv + g
                indeg[w] -= 1
                if indeg[w] == 0:
                    stack.append(w)
            for w, g in nxt[v]:
                if hv + g > head[w]:
                    head[w] = hv + g
                indeg[w] -= 1
                if indeg[w] == 0:
                    stack.append(w)
        return head if seen == n else None

    @functools.cached_property
    def reach(self) -> np.ndarray:
        """(n, n) bool: a path i -> j along the problem's arcs."""
        return closure(self.n, self.prob.arcs, self.deadline)

    def closure_in_time(self) -> bool:
        """Build `reach` (the moves need it) now; False when the deadline passes first."""
        try:
            return self.reach is not None
        except DeadlineReached:
            return False

    def objective(self, head: list[float]) -> float:
        if self.prob.objective == "shift":
            return max((head[o] + c for o, c in self.deadline_rows), default=0.0)
        if self.prob.objective == "makespan":
            return max(head[i] + self.dur[i] + self.tail[i] for i in range(self.n))
        first = [math.inf] * self.nd
        last = [-math.inf] * self.nd
        for i in range(self.n):
            for d in self.devs[i]:
                first[d] = min(first[d], head[i])
                last[d] = max(last[d], head[i] + self.dur[i])
        return max((last[d] - first[d] for d in range(self.nd) if math.isfinite(first[d])), default=0.0)

    def critical_pairs(self, seqs: list[list[int]], head: list[float], value: float) -> list[tuple[int, int]]:
        """Adjacent pairs (u, v) on a device whose sequence arc is tight on a critical path."""
        n = self.n
        pred_tight: list[list[int]] = [[] for _ in range(n)]
        seq_pred: dict[tuple[int, int], bool] = {}
        for seq in seqs:
            for a, b in zip(seq, seq[1:]):
                if abs(head[a] + self.dur[a] - head[b]) <= EPS * max(1.0, abs(head[b])):
                    pred_tight[b].append(a)
                    seq_pred[(a, b)] = True
        for a in range(n):
            for b, g in self.succ[a]:
                if abs(head[a] + g - head[b]) <= EPS * max(1.0, abs(head[b])):
                    pred_tight[b].append(a)
        tol = EPS * max(1.0, abs(value))
        if self.prob.objective == "shift":
            ends = [o for o, c in self.deadline_rows if head[o] + c >= value - tol]
        elif self.prob.objective == "makespan":
            ends = [i for i in range(n) if head[i] + self.dur[i] + self.tail[i] >= value - tol]
        else:
            ends = list(range(n))
        on_path = set(ends)
        stack = list(ends)
        while stack:
            v = stack.pop()
            for u in pred_tight[v]:
                if u not in on_path:
                    on_path.add(u)
                    stack.append(u)
        out = []
        for (a, b) in seq_pred:
            if a in on_path and b in on_path and not self.reach[a, b]:
                out.append((a, b))
        return out

    def swap(self, seqs: list[list[int]], u: int, v: int) -> list[list[int]] | None:
        """v moved just before u on every device the two share (None: memory overflows)."""
        out = list(seqs)
        for d in set(self.devs[u]) & set(self.devs[v]):
            seq = list(seqs[d])
            iu, iv = seq.index(u), seq.index(v)
            if iv < iu:
                continue
            seq.pop(iv)
            seq.insert(iu, v)
            if not self.memory_ok(seq, d):
                return None
            out[d] = seq
        return out


def improve_from(prob: OpProblem, starts: list[np.ndarray], deadline: float | None = None) -> tuple[np.ndarray, float, int]:
    """`improve` from every start whose device sequences (by start time, then index) are
    acyclic with the arcs and within the capacities (a start may be a priority key: its
    order is what counts); the first must be feasible. Returns the best start times,
    their objective (seconds) and the index of the start they came from."""
    ss = SequenceSearch(prob, deadline)
    best: tuple[np.ndarray, float, int] | None = None
    for i, start in enumerate(starts):
        start = np.asarray(start, dtype=float)
        if i > 0:
            if deadline is not None and time.perf_counter() > deadline:
                break  # (the first start's result stands)
            seqs = _sequences(prob, ss, start)
            if ss.heads(seqs) is None or not all(ss.memory_ok(seqs[d], d) for d in range(ss.nd)):
                continue
        s, value = improve(prob, start, deadline=deadline, search=ss)
        if best is None or value < best[1] - EPS * max(1.0, abs(best[1])):
            best = (s, value, i)
    assert best is not None
    return best


def improve(
    prob: OpProblem,
    start: np.ndarray,
    max_evals: int = 2_000,
    deadline: float | None = None,
    tabu_size: int = 8,
    stall: int = 12,
    first_improvement: bool = True,
    max_work: int = 150_000,
    search: SequenceSearch | None = None,
) -> tuple[np.ndarray, float]:
    """Tabu search from feasible ``start`` times (the first improving reversal, else the
    best non-tabu one); returns the best start times found (earliest starts of their
    sequences) and their objective (seconds). At most ``max_evals`` evaluations, and at
    most ``max_work`` operations and arcs visited by them (large problems get fewer).
    ``search``: the problem's `SequenceSearch`, when the caller already built it."""
    ss = SequenceSearch(prob, deadline) if search is None else search
    max_evals = min(max_evals, max(20, max_work // max(1, prob.n + int(prob.arcs.src.size))))
    start = np.asarray(start, dtype=float)
    seqs = _sequences(prob, ss, start)
    head = ss.heads(seqs)
    if head is None or not all(ss.memory_ok(seqs[d], d) for d in range(ss.nd)):
        return start, ss.objective(start.tolist())
    value = ss.objective(head)
    best = (value, sum(head), head)
    cur_seqs, cur_head, cur_value = seqs, head, value
    tabu: list[tuple[int, int]] = []
    evals, since = 0, 0
    if not ss.closure_in_time():  # no time to search: the start stands
        return np.asarray(best[2]), float(best[0])
    while evals < max_evals and since < stall:
        if deadline is not None and time.perf_counter() > deadline:
            break
        chosen = None
        for u, v in ss.critical_pairs(cur_seqs, cur_head, cur_value):
            # (the budgets hold within a step too: one step of a 6,867-operation warm-up
            # tried 2,800 reversals, 28 s past a deadline of 8 s, its budget 20)
            if evals >= max_evals or (deadline is not None and time.perf_counter() > deadline):
                break
            cand = ss.swap(cur_seqs, u, v)
            if cand is None:
                continue
            h = ss.heads(cand)
            evals += 1
            if h is None:
                continue
            val = ss.objective(h)
            key = (val, sum(h))
            if (v, u) in tabu and not key < best[:2]:
                continue
            if chosen is None or key < chosen[0]:
                chosen = (key, cand, h, (u, v))
            if first_improvement and val < cur_value - EPS * max(1.0, abs(cur_value)):
                break
        if chosen is None:
            break
        (val, total), cur_seqs, cur_head, pair = chosen
        cur_value = val
        tabu.append(pair)
        if len(tabu) > tabu_size:
            tabu.pop(0)
        if (val, total) < best[:2]:
            if val < best[0] - EPS * max(1.0, abs(best[0])):
                since = 0
            best = (val, total, cur_head)
        since += 1
    return np.asarray(best[2]), float(best[0])


def _sequences(prob: OpProblem, ss: SequenceSearch, start: np.ndarray) -> list[list[int]]:
    """Each device's operations ordered by ``start`` (seconds), ties by index."""
    seqs = []
    for d in range(ss.nd):
        ops = np.flatnonzero(prob.mask[:, d])
        seqs.append(ops[np.lexsort((ops, start[ops]))].tolist())
    return seqs
