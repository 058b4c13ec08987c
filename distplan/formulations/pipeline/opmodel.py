"""The operation-scheduling engine shared by the pipeline MILPs.

An `OpProblem` is a set of operations (a block of one micro-batch each, or any subset of
them) with durations (seconds), device sets, memory deltas (bytes), precedence arcs with
gaps, capacities, release times, initial memory and deadlines. The disjunctive model
built here (Zero Bubble style; Qi et al., ICLR 2024, Sec. 3) is described in `milp.py`,
which schedules the whole run with it; Tessel's warm-up and cool-down completions
(`tessel.py`) schedule subsets with it; `timeindexed.py` writes the same schedule space
with step variables, and `opsolve.py` picks one of the two and solves it.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, check
from distplan.formulations.pipeline.common import (
    OpArcs,
    block_tail,
    dependency_arcs,
    integral_data,
    longest_path_starts,
)
from distplan.modeling.model import Model, Variable, linear_sum
from distplan.modeling.scheduling import (
    cumulative_prefix,
    disjunctive_pairs,
    indicator_sum,
    makespan_epigraph,
    order_implications,
    precedence_with_lag,
)
from distplan.models.graphs import transitive_closure
from distplan.models.pipeline import PipelineInstance


@dataclass
class OpProblem:
    """A set of operations to schedule (times in seconds, memory in bytes)."""

    name: str
    dur: np.ndarray  # (n,)
    mask: np.ndarray  # (n, D) devices of each operation
    mem: np.ndarray  # (n,) delta at start on each of its devices
    arcs: OpArcs  # s[dst] >= s[src] + gap
    capacity: np.ndarray  # (D,)
    horizon: float  # every end time of interest is <= horizon
    objective: str = "makespan"  # makespan | device_span | shift
    release: np.ndarray | None = None  # (n,) earliest starts
    tail: np.ndarray | None = None  # (n,) least time from an op's end to the schedule's end
    init_mem: np.ndarray | None = None  # (D,) memory held before the first operation
    #: objective "shift": s[deadline_ops] + deadline_gap <= deadline_base + shift
    deadline_ops: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    deadline_gap: np.ndarray = field(default_factory=lambda: np.zeros(0))
    deadline_base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    integral: bool = False
    energy_cuts: bool = True
    #: block of each operation and the block-level reachability (enables memory-implied
    #: precedences; valid when each block's operations form a chain in micro-batch order)
    block_of: np.ndarray | None = None
    block_reach: np.ndarray | None = None
    #: device-span objective: an incumbent's span; solutions no worse satisfy
    #: |s_i - s_j| <= span_ub on a device, a much smaller big-M than the horizon
    span_ub: float | None = None

    @property
    def n(self) -> int:
        return int(self.dur.size)


#: most operations whose transitive closure `closure` builds: its (n, n) bool matrix takes
#: n^2 bytes (256 MiB here; N = 4096 micro-batches of 24 blocks took 1.7 GB and 12 s before
#: its deadline stopped it), and a disjunctive or time-indexed model of that many
#: operations is beyond what the solvers prove anyway
CLOSURE_MAX_OPS = 16_384


class ClosureTooLarge(DeadlineReached):
    """The transitive closure of a problem's operations would not fit (`CLOSURE_MAX_OPS`):
    the model that needs it is not built (a `DeadlineReached`: callers keep what they have)."""


def closure(n: int, arcs: OpArcs, run_deadline: float | None = None) -> np.ndarray:
    """(n, n) bool: a path i -> j exists (i != j); ValueError on a cycle; `DeadlineReached`
    when ``run_deadline`` (the run's, a ``time.perf_counter()`` value) passes while it runs,
    `ClosureTooLarge` above `CLOSURE_MAX_OPS` operations."""
    if n > CLOSURE_MAX_OPS:
        raise ClosureTooLarge(f"the transitive closure of {n} operations would take {n * n / 2**30:.1f} GiB (at most {CLOSURE_MAX_OPS} operations): the model is not built")
    stop = None if run_deadline is None else functools.partial(check, run_deadline, f"the transitive closure of {n} operations")
    return transitive_closure(n, arcs.src, arcs.dst, checkpoint=stop)


def _heads(prob: OpProblem, arcs: OpArcs | None = None) -> np.ndarray:
    """Earliest start of every operation (longest path from the release times) along
    ``arcs`` (default: the problem's)."""
    arcs = prob.arcs if arcs is None else arcs
    n = prob.n
    lb = np.zeros(n) if prob.release is None else prob.release.astype(float).copy()
    return longest_path_starts(n, arcs.src, arcs.dst, arcs.gap, lb)[0]


# -- blocks ---------------------------------------------------------------------------------


def memory_implied_arcs(prob: OpProblem, reach: np.ndarray, run_deadline: float | None = None) -> OpArcs:
    """Precedences forced by memory. At an allocating operation a on device d, the memory
    of everything known to precede it, minus the capacity (X > 0), must be freed by
    unrelated freeing operations ordered before a. A block's operations form a chain, so
    the ones before a are its first K_b (f_b known, k_b unrelated), and a block c after b
    in the DAG has K_c <= K_b. The least k_b with
    ``|mu_b| k_b + sum_c |mu_c| min(u_c, cap_c(k_b)) >= X`` (u_c unrelated ops of c; the
    cap ``k_b + f_b - f_c`` for blocks c after b) forces an arc from b's k_b-th unrelated
    operation to a (same device: gap = its duration). `DeadlineReached` past
    ``run_deadline`` (the run's, a ``time.perf_counter()`` value; checked per target)."""
    src: list[int] = []
    dst: list[int] = []
    if prob.block_of is None or prob.block_reach is None:
        return OpArcs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0))
    init = np.zeros(prob.mask.shape[1]) if prob.init_mem is None else prob.init_mem
    for d in range(prob.mask.shape[1]):
        cap = prob.capacity[d]
        if not math.isfinite(cap):
            continue
        on = prob.mask[:, d]
        targets = np.flatnonzero(on & (prob.mem > 0))
        neg = np.flatnonzero(on & (prob.mem < 0))
        if targets.size == 0 or neg.size == 0:
            continue
        fixed = init[d] + prob.mem[targets] + (reach[:, targets] & on[:, None]).T.astype(float) @ prob.mem
        neg_blocks = np.unique(prob.block_of[neg])
        for a, x in zip(targets.tolist(), (fixed - cap).tolist()):
            if x <= 1e-9 * max(1.0, abs(cap)):
                continue
            check(run_deadline, "the memory-implied precedences")
            before = reach[neg, a]
            free = ~before & ~reach[a, neg] & (neg != a)
            f = {int(b): int(np.sum(before & (prob.block_of[neg] == b))) for b in neg_blocks.tolist()}
            chains = {int(b): np.sort(neg[free & (prob.block_of[neg] == b)]) for b in neg_blocks.tolist()}
            mu = {int(b): abs(float(prob.mem[neg[prob.block_of[neg] == b][0]])) for b in neg_blocks.tolist()}
            for b, chain in chains.items():
                if chain.size == 0:
                    continue
                after = [c for c in chains if c != b and prob.block_reach[b, c]]
                other = sum(mu[c] * chains[c].size for c in chains if c != b and not prob.block_reach[b, c])
                need = None
                for k in range(chain.size + 1):
                    freed = mu[b] * k + other + sum(mu[c] * min(chains[c].size, max(0, k + f[b] - f[c])) for c in after)
                    if freed >= x - 1e-9 * max(1.0, abs(x)):
                        need = k
                        break
                if need is not None and need >= 1:
                    j = int(chain[need - 1])  # operation ids grow with the micro-batch
                    if not reach[j, a]:
                        src.append(j)
                        dst.append(a)
    s_arr = np.asarray(src, dtype=np.int64)
    return OpArcs(s_arr, np.asarray(dst, dtype=np.int64), prob.dur[s_arr] if s_arr.size else np.zeros(0))


@dataclass(frozen=True)
class ImpliedArcs:
    """The problem's arcs with the memory-implied precedences added (to a fixpoint), and the
    transitive closure of them."""

    arcs: OpArcs
    reach: np.ndarray
    implied: int


def implied_arcs(prob: OpProblem, run_deadline: float | None = None) -> ImpliedArcs:
    """Transitive closure of the arcs, after adding the memory-implied precedences (to a
    fixpoint: six rounds at most); `DeadlineReached` past ``run_deadline``."""
    n = prob.n
    arcs = prob.arcs
    reach = closure(n, arcs, run_deadline)
    implied = 0
    for _ in range(6):
        check(run_deadline, "the memory-implied precedences")
        extra = memory_implied_arcs(prob, reach, run_deadline)
        if extra.src.size == 0:
            break
        implied += int(extra.src.size)
        arcs = OpArcs(np.concatenate([arcs.src, extra.src]), np.concatenate([arcs.dst, extra.dst]), np.concatenate([arcs.gap, extra.gap]))
        try:
            reach = closure(n, arcs, run_deadline)
        except ValueError:
            raise InfeasibleError(f"{prob.name}: the memory capacity forces a cyclic order (no schedule fits)", details={}) from None
    return ImpliedArcs(arcs, reach, implied)


@dataclass(frozen=True)
class OpIndex:
    """What the blocks of the disjunctive model share (block contract:
    `distplan.formulations.contract`). Times in seconds."""

    #: the problem's arcs plus the memory-implied ones, their closure, and how many were implied
    arcs: OpArcs
    reach: np.ndarray
    implied_arcs: int
    #: start windows
    lb: np.ndarray
    ub: np.ndarray
    #: unrelated pairs sharing a device (first < second), pair id of (i, j) or -1, big-M
    pair_first: np.ndarray
    pair_second: np.ndarray
    pid: np.ndarray
    big_m: np.ndarray
    #: the run's deadline (a ``time.perf_counter()`` value, None: none) that the slow
    #: blocks check, raising `DeadlineReached` (NN shape, 16 stages, 128 micro-batches:
    #: 12 s to build)
    run_deadline: float | None = None


def prepare_ops(prob: OpProblem, params: Mapping[str, Any]) -> OpIndex:
    """Implied arcs and closure, start windows within [earliest start, horizon - duration -
    tail], and the unrelated pairs on each device with their big-M. ``params["_deadline"]``:
    the run's deadline (`OpIndex.run_deadline`)."""
    run_deadline = params.get("_deadline")
    imp = implied_arcs(prob, run_deadline)
    n = prob.n
    reach = imp.reach
    lb = _heads(prob, imp.arcs)
    tail = np.zeros(n) if prob.tail is None else prob.tail
    ub = prob.horizon - prob.dur - tail
    if np.any(ub < lb - 1e-9):
        raise InfeasibleError(f"{prob.name}: no schedule fits the horizon {prob.horizon:.6g} s", details={})
    ub = np.maximum(ub, lb)
    related = reach | reach.T
    keys: list[np.ndarray] = []
    for d in range(prob.mask.shape[1]):
        check(run_deadline, "the op model's pairs")
        ops = np.flatnonzero(prob.mask[:, d])
        if ops.size < 2:
            continue
        ii, jj = np.triu_indices(ops.size, 1)
        a, b = ops[ii], ops[jj]
        keep = ~related[a, b]
        keys.append(a[keep].astype(np.int64) * n + b[keep])
    key = np.unique(np.concatenate(keys)) if keys else np.zeros(0, np.int64)
    first, second = key // n, key % n
    pid = np.full((n, n), -1, dtype=np.int32)
    pid[first, second] = np.arange(key.size, dtype=np.int32)
    pid[second, first] = np.arange(key.size, dtype=np.int32)
    big_m = np.maximum(prob.dur[first] + ub[first] - lb[second], prob.dur[second] + ub[second] - lb[first])
    big_m = np.maximum(big_m, 0.0)
    if prob.objective == "device_span" and prob.span_ub is not None:
        big_m = np.minimum(big_m, prob.span_ub)
    return OpIndex(imp.arcs, reach, imp.implied, lb, ub, first, second, pid, big_m, run_deadline)


def op_variables(model: Model, prob: OpProblem, index: OpIndex) -> None:
    """Start times within their windows (`prepare_ops`): the block ``start``."""
    model.add_vars("start", prob.n, lb=index.lb, ub=index.ub)


def op_precedence(model: Model, prob: OpProblem, index: OpIndex) -> None:
    """s[dst] >= s[src] + gap along the arcs, memory-implied ones included."""
    precedence_with_lag(model, model["start"], index.arcs.src, index.arcs.dst, index.arcs.gap, "precedence")


def op_pairs(model: Model, prob: OpProblem, index: OpIndex) -> None:
    """Order binaries ``no-overlap-order`` for unrelated pairs sharing a device
    (`disjunctive_pairs`), and their transitivity along the arcs."""
    first, second, pid = index.pair_first, index.pair_second, index.pid
    check(index.run_deadline, "the op model's pairs")
    order = disjunctive_pairs(model, model["start"], first, second, prob.dur[first], prob.dur[second], index.big_m, "no-overlap")
    # transitivity along arcs: for arc u -> v and pair (v, x): [v before x] <= [u before x];
    # for pair (x, u): [x before u] <= [x before v]
    low: list[int] = []
    high: list[int] = []
    neg: list[tuple[int, int]] = []
    for k, (u, v) in enumerate(zip(index.arcs.src.tolist(), index.arcs.dst.tolist())):
        if k % 256 == 0:
            check(index.run_deadline, "the op model's order chains")
        row_v = np.flatnonzero(pid[v] >= 0)
        for x in row_v[pid[u, row_v] >= 0].tolist():
            kv, ku = int(pid[v, x]), int(pid[u, x])
            # I(v before x) <= I(u before x)
            v_first, u_first = v < x, u < x
            if v_first and u_first:
                low.append(kv)
                high.append(ku)
            elif not v_first and not u_first:
                low.append(ku)
                high.append(kv)
            elif v_first and not u_first:
                neg.append((kv, ku))  # z_v + z_u' ... handled below
            else:
                neg.append((-1 - kv, -1 - ku))
    check(index.run_deadline, "the op model's order chains")
    order_implications(model, order, np.asarray(low, dtype=np.int64), np.asarray(high, dtype=np.int64), "order-chains")
    check(index.run_deadline, "the op model's order chains")
    if neg:
        # mixed orientation: I(v before x) = z_kv (v < x) and I(u before x) = 1 - z_ku (x < u)
        # gives z_kv <= 1 - z_ku; the other case gives 1 - z_kv <= z_ku.
        a = np.array([p[0] for p in neg])
        b = np.array([p[1] for p in neg])
        pos = a >= 0
        o = order.index.reshape(-1)
        cols_a = np.where(pos, a, -1 - a)
        cols_b = np.where(pos, b, -1 - b)
        rows = np.arange(a.size)
        expr = linear_sum(np.concatenate([o[cols_a], o[cols_b]]), np.ones(2 * a.size), np.concatenate([rows, rows]), a.size, model.num_vars)
        lo_rows = np.flatnonzero(pos)
        hi_rows = np.flatnonzero(~pos)
        if lo_rows.size:
            model.add_constraints("order-chains-mixed-le", expr[lo_rows] <= 1.0)
        if hi_rows.size:
            model.add_constraints("order-chains-mixed-ge", expr[hi_rows] >= 1.0)


def _pair_terms(prob: OpProblem, index: OpIndex, d: int, targets: np.ndarray, others_mask: np.ndarray, before: bool):
    """For each target op (row) and unrelated op b on device d with others_mask[b]: the
    pair index and whether I(b before target) (before=True) / I(target before b) is
    ``order`` (first_before=True) or ``1 - order``."""
    reach = index.reach
    pid = index.pid
    ops = np.flatnonzero(prob.mask[:, d] & others_mask)
    if ops.size == 0 or targets.size == 0:
        return (np.zeros(0, np.int64),) * 3 + (np.zeros(0, bool),)
    rel = reach[np.ix_(targets, ops)] | reach[np.ix_(ops, targets)].T
    same = targets[:, None] == ops[None, :]
    r, c = np.nonzero(~rel & ~same)
    t, b = targets[r], ops[c]
    k = pid[t, b].astype(np.int64)
    if np.any(k < 0):
        raise AssertionError("an unrelated pair on a device has no order binary")
    # order[k] = 1 iff min(t,b) before max(t,b)
    if before:
        first_before = b < t  # I(b before t) = order if b is the pair's first
    else:
        first_before = t < b  # I(t before b) = order if t is the pair's first
    return r, k, b, first_before


def op_memory(model: Model, prob: OpProblem, index: OpIndex) -> None:
    """Memory prefix at every allocating operation within the device capacity."""
    reach = index.reach
    init = np.zeros(prob.mask.shape[1]) if prob.init_mem is None else prob.init_mem
    consts: list[np.ndarray] = []
    caps: list[np.ndarray] = []
    rows_l: list[np.ndarray] = []
    pairs_l: list[np.ndarray] = []
    coef_l: list[np.ndarray] = []
    fb_l: list[np.ndarray] = []
    nrow = 0
    nonzero = prob.mem != 0
    for d in range(prob.mask.shape[1]):
        if not math.isfinite(prob.capacity[d]):
            continue
        check(index.run_deadline, "the op model's memory rows")
        on = prob.mask[:, d]
        targets = np.flatnonzero(on & (prob.mem > 0))
        if targets.size == 0:
            continue
        fixed = (reach[:, targets] & on[:, None]).T.astype(float) @ prob.mem
        consts.append(init[d] + prob.mem[targets] + fixed)
        caps.append(np.full(targets.size, prob.capacity[d]))
        r, k, b, fb = _pair_terms(prob, index, d, targets, nonzero, before=True)
        rows_l.append(r + nrow)
        pairs_l.append(k)
        coef_l.append(prob.mem[b])
        fb_l.append(fb)
        nrow += targets.size
    if nrow == 0:
        return
    cumulative_prefix(
        model,
        model["no-overlap-order"],
        np.concatenate(consts),
        np.concatenate(caps),
        np.concatenate(rows_l),
        np.concatenate(pairs_l),
        np.concatenate(coef_l),
        np.concatenate(fb_l),
        "memory",
    )


def op_objective(model: Model, prob: OpProblem, index: OpIndex) -> None:
    """Objective epigraph (makespan, device span or shift: blocks of those names) and
    energy cuts."""
    s: Variable = model["start"]
    n, nd = prob.n, prob.mask.shape[1]
    tail = np.zeros(n) if prob.tail is None else prob.tail
    has_succ = np.zeros(n, dtype=bool)
    has_succ[prob.arcs.src] = True
    lb = index.lb
    if prob.objective == "makespan":
        ends = np.flatnonzero(~has_succ)
        c = makespan_epigraph(
            model, s, ends, prob.dur[ends] + tail[ends], "makespan", integer=prob.integral, ub=math.floor(prob.horizon + 1e-9) if prob.integral else prob.horizon
        )
        model.minimize(c)
    elif prob.objective == "device_span":
        used = [d for d in range(nd) if prob.mask[:, d].any()]
        first = model.add_vars("device-first", nd, lb=-np.inf)
        last = model.add_vars("device-last", nd, lb=-np.inf)
        span_ub = np.inf if prob.span_ub is None else (math.floor(prob.span_ub + 1e-9) if prob.integral else prob.span_ub)
        span = model.add_vars("span", (), lb=0.0, ub=span_ub, vtype="integer" if prob.integral else "continuous")
        rows_f, cols_f = [], []
        for d in used:
            ops = np.flatnonzero(prob.mask[:, d])
            rows_f.append(np.full(ops.size, d))
            cols_f.append(ops)
        dd = np.concatenate(rows_f)
        oo = np.concatenate(cols_f)
        model.add_constraints("device-first-le", first[dd] - s[oo] <= 0.0)
        model.add_constraints("device-last-ge", last[dd] - s[oo] >= prob.dur[oo])
        used_a = np.asarray(used)
        model.add_constraints("span-epigraph", last[used_a] - first[used_a] - span <= 0.0)
        model.minimize(span)
    elif prob.objective == "shift":
        shift = model.add_vars("shift", (), lb=-np.inf)
        ops = prob.deadline_ops
        model.add_constraints("deadline", s[ops] - shift <= prob.deadline_base - prob.deadline_gap)
        model.minimize(shift)
    else:
        raise ValueError(f"unknown objective {prob.objective!r}")
    if not prob.energy_cuts or prob.objective == "shift":
        return
    reach = index.reach
    order = model["no-overlap-order"]
    every = np.ones(n, dtype=bool)
    for d in range(nd):
        check(index.run_deadline, "the op model's energy cuts")
        on = prob.mask[:, d]
        ops = np.flatnonzero(on)
        if ops.size < 2:
            continue
        work_after = (reach[ops][:, ops].astype(float)) @ prob.dur[ops]
        work_before = (reach[:, ops][ops].T.astype(float)) @ prob.dur[ops]
        r, k, b, fb = _pair_terms(prob, index, d, ops, every, before=False)
        after = indicator_sum(order, ops.size, r, k, prob.dur[b], fb)
        r2, k2, b2, fb2 = _pair_terms(prob, index, d, ops, every, before=True)
        before = indicator_sum(order, ops.size, r2, k2, prob.dur[b2], fb2)
        if prob.objective == "makespan":
            tail_min = float(tail[ops].min())
            c = model["makespan"]
            model.add_constraints(f"energy-after-{d}", s[ops] + after - c <= -(prob.dur[ops] + work_after + tail_min))
            head_min = float(lb[ops].min())
            model.add_constraints(f"energy-before-{d}", s[ops] - before >= head_min + work_before)
        else:
            last = model["device-last"]
            first = model["device-first"]
            model.add_constraints(f"energy-after-{d}", s[ops] + after - last[np.full(ops.size, d)] <= -(prob.dur[ops] + work_after))
            model.add_constraints(f"energy-before-{d}", s[ops] - before - first[np.full(ops.size, d)] >= work_before)


#: the disjunctive op model (Zero Bubble style; Qi et al., ICLR 2024, Sec. 3)
OP_MODEL = ModelSpec("op-model", prepare_ops, (op_variables, op_precedence, op_pairs, op_memory, op_objective))


def build_op_model(prob: OpProblem, run_deadline: float | None = None) -> tuple[Model, OpIndex]:
    """The disjunctive model of ``prob``; `DeadlineReached` when the build passes
    ``run_deadline`` (the run's, a ``time.perf_counter()`` value)."""
    return OP_MODEL.build(prob, None if run_deadline is None else {"_deadline": run_deadline}, name=prob.name)


def warm_vector(model: Model, prob: OpProblem, index: OpIndex, start: np.ndarray) -> np.ndarray:
    """A full MILP vector from feasible start times of the operations."""
    start = np.asarray(start, dtype=float)
    end = start + prob.dur
    vals: dict[str, Any] = {"start": start, "no-overlap-order": (start[index.pair_first] < start[index.pair_second]).astype(float)}
    tail = np.zeros(prob.n) if prob.tail is None else prob.tail
    if prob.objective == "makespan":
        vals["makespan"] = math.ceil(float((end + tail).max()) - 1e-9) if prob.integral else float((end + tail).max())
    elif prob.objective == "device_span":
        nd = prob.mask.shape[1]
        first = np.array([start[prob.mask[:, d]].min() if prob.mask[:, d].any() else 0.0 for d in range(nd)])
        last = np.array([end[prob.mask[:, d]].max() if prob.mask[:, d].any() else 0.0 for d in range(nd)])
        span = float((last - first).max())
        vals.update({"device-first": first, "device-last": last, "span": math.ceil(span - 1e-9) if prob.integral else span})
    elif prob.objective == "shift":
        ops = prob.deadline_ops
        vals["shift"] = float(np.max(start[ops] + prob.deadline_gap - prob.deadline_base)) if ops.size else 0.0
    return model.vector(vals)


def integral_problem(prob: OpProblem) -> bool:
    """True when durations, gaps, release times and deadlines are all exact integers (the
    time-indexed model's steps and an integer objective are exact only then)."""
    parts = [prob.dur, prob.arcs.gap, prob.deadline_gap, prob.deadline_base]
    if prob.release is not None:
        parts.append(prob.release)
    vals = np.concatenate([np.asarray(p, dtype=float).reshape(-1) for p in parts])
    return bool(np.all(vals == np.round(vals)))


# -- whole-schedule problems ----------------------------------------------------------------


def serial_horizon(inst: PipelineInstance) -> float:
    """Every instance has a schedule of this length or shorter (seconds), and for the
    device-span objective some optimum ends by it: all operations back to back plus
    every delay."""
    _, _, lag = inst.edges
    return float(inst.micro_batches * (inst.duration.sum() + lag.sum()))


def full_problem(inst: PipelineInstance, horizon: float, energy_cuts: bool = True) -> OpProblem:
    """All (block, micro-batch) operations of an instance, with symmetry chains."""
    n = inst.micro_batches
    arcs = dependency_arcs(inst)
    b = np.repeat(np.arange(inst.n_blocks), max(n - 1, 0))
    m = np.tile(np.arange(max(n - 1, 0)), inst.n_blocks)
    sym = OpArcs(b * n + m, b * n + m + 1, inst.duration[b])
    all_arcs = OpArcs(np.concatenate([arcs.src, sym.src]), np.concatenate([arcs.dst, sym.dst]), np.concatenate([arcs.gap, sym.gap]))
    tail_b = block_tail(inst)
    return OpProblem(
        name=f"{inst.name}-milp",
        dur=np.repeat(inst.duration, n),
        mask=np.repeat(inst.device_mask, n, axis=0),
        mem=np.repeat(inst.memory, n),
        arcs=all_arcs,
        capacity=inst.capacity,
        horizon=horizon,
        objective=inst.objective,
        tail=np.repeat(tail_b, n) if inst.objective == "makespan" else None,
        integral=integral_data(inst, exact=True),
        energy_cuts=energy_cuts,
        block_of=np.repeat(np.arange(inst.n_blocks), n),
        block_reach=inst.reach,
    )
