"""Order-aware load rows for the placement programs: an op's ancestors and descendants.

The assignment relaxation (`relaxation`) drops the order of the ops on a device; its
energetic rows use heads and tails at fastest times without communication, so a device
that must run a long chain *and* work that waits for that chain (resnet's weight updates,
which wait for their gradients and share a device with them) looks free. These rows keep
the assignment and add what precedence alone implies, whatever the order on a device:

* every descendant j of op i starts after i ends, on every device, so for each device d
  the descendants of i placed on d run one at a time after T_i + p_i(x), and the last of
  them is followed by its tail:
  w >= T_i + p_i(x) + sum_{j in desc(i)} p_{j,d} x[j, d] + min_{j in desc(i)} q_j;
* every ancestor j of op i ends before i starts, so for each device d
  T_i >= min_{j in anc(i)} r_j + sum_{j in anc(i)} p_{j,d} x[j, d].

T_i is the relaxation's head of op i (its start in the MILP), which already carries the
cut edges' delays on the paths into i, so the rows chain both: the ancestors on one device,
then i, then the descendants on another. Both rows hold for every plan (set T_i to the
op's start), under both communication models and both memory models. They are the
one-machine "head + work + tail" bound (Carlier, "The one-machine sequencing problem",
EJOR 11(1), 1982) for the sets desc(i) and anc(i), with the set's head and tail read from
the plan's own start of i instead of static heads (the energetic reasoning of Baptiste, Le
Pape & Nuijten, Constraint-Based Scheduling, 2001, over precedence-defined windows).

Rows that the static ones already imply (desc(i)'s whole work + its least tail <= q_i,
and the mirror) are left out; the others are kept, most excess per nonzero first, up to
``max_nonzeros`` (times in model units, microseconds). On resnet-50-dgx1-4 the rows that
lift the bound are those of late ops with few descendants (a gradient and the weight
updates after it): the 30,000 nonzeros of the ops with the most excess left the
relaxation at 16.59 ms, all 138,000 give 16.82 ms.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distplan.formulations.deadline import check
from distplan.modeling.model import Model, linear_sum
from distplan.models.graphs import transitive_closure, transitive_closure_bits
from distplan.models.placement_instance import PlacementInstance

#: nonzeros of the descendant and ancestor rows together at most (default). resnet-50-dgx1-4,
#: relaxation solved to optimality (CPU seconds, load ~9): 30,000 -> 16.802 ms in 19.6 s,
#: 60,000 -> 16.803 ms in 16.6 s, all 138,000 -> 16.820 ms in 62 s; none: 16.59 ms
MAX_NONZEROS = 60_000


#: rows of the n x n reach matrix handled at once by `precedence_load_rows` (a block of
#: floats instead of the whole matrix: 5.9 GB on 27,083 ops), with a deadline check per block
ROW_BLOCK = 1024


def precedence_sets(inst: PlacementInstance) -> np.ndarray:
    """reach[i, j] = True when a path i -> j exists (boolean, n x n)."""
    return transitive_closure(inst.n_ops, inst.src, inst.dst, inst.topo_order())


def _closure_bits(inst: PlacementInstance, deadline: float | None) -> np.ndarray:
    """`precedence_sets` as bit sets (`graphs.transitive_closure_bits`: n x words uint64)
    without unpacking the n x n matrix (733 MB and 2 s on 27,083 ops); past ``deadline``
    `DeadlineReached`."""
    return transitive_closure_bits(
        inst.n_ops, np.asarray(inst.src, dtype=np.int64), np.asarray(inst.dst, dtype=np.int64), inst.topo_order(),
        lambda: check(deadline, "the transitive closure of the placement graph"),
    )


def _reach_block(bits: np.ndarray, lo: int, hi: int, n: int, ancestors: bool) -> np.ndarray:
    """Rows lo..hi-1 of reach (``ancestors``: of reach.T; ``lo`` a multiple of 64) as booleans."""
    if not ancestors:
        return np.unpackbits(bits[lo:hi].view(np.uint8), axis=1, bitorder="little")[:, :n].astype(bool)
    cols = np.ascontiguousarray(bits[:, lo // 64 : (hi + 63) // 64])
    return np.unpackbits(cols.view(np.uint8), axis=1, bitorder="little")[:, : hi - lo].T.astype(bool)


def _set_sums(bits: np.ndarray, n: int, ancestors: bool, pmax: np.ndarray, other: np.ndarray, deadline: float | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op i, its descendants' (``ancestors``: ancestors') count, work (sum of ``pmax``)
    and least ``other`` (inf when none), `ROW_BLOCK` ops at a time."""
    sizes = np.zeros(n, dtype=np.int64)
    work = np.zeros(n)
    least = np.full(n, np.inf)
    for lo in range(0, n, ROW_BLOCK):
        check(deadline, "the ancestor and descendant rows")
        blk = _reach_block(bits, lo, min(lo + ROW_BLOCK, n), n, ancestors)
        sizes[lo : lo + ROW_BLOCK] = blk.sum(axis=1)
        work[lo : lo + ROW_BLOCK] = blk.astype(float) @ pmax
        least[lo : lo + ROW_BLOCK] = np.where(blk, other[None, :], np.inf).min(axis=1, initial=np.inf)
    return sizes, work, least


def _reach_sets(bits: np.ndarray, n: int, ancestors: bool, ops: np.ndarray, deadline: float | None) -> list[np.ndarray]:
    """The descendants (``ancestors``: ancestors) of each of ``ops`` (ascending)."""
    out: list[np.ndarray] = []
    ops_list = ops.tolist()
    k = 0
    for lo in range(0, n, ROW_BLOCK):
        hi = min(lo + ROW_BLOCK, n)
        if k == len(ops_list):
            break
        if ops_list[k] >= hi:
            continue
        check(deadline, "the ancestor and descendant rows")
        blk = _reach_block(bits, lo, hi, n, ancestors)
        while k < len(ops_list) and ops_list[k] < hi:
            out.append(np.flatnonzero(blk[ops_list[k] - lo]))
            k += 1
    return out


def _selected(excess: np.ndarray, sizes: np.ndarray, m: int, budget: int, extra: int = 3) -> np.ndarray:
    """Candidates whose row beats the static one (excess > 0), most excess per nonzero
    first, within budget nonzeros (each has m rows of size + ``extra`` entries); sorted."""
    cand = np.flatnonzero(excess > 1e-9)
    cand = cand[np.argsort(-excess[cand] / (sizes[cand] + extra), kind="stable")]
    cost = np.cumsum((sizes[cand] + extra) * m)
    return np.sort(cand[cost <= budget])


def device_loads(model: Model, sets: list[np.ndarray], P: np.ndarray) -> Any:
    """The load of each op set on each device, sum_{j in S} P[j, d] x[j, d]: one linear
    expression per (set, device), sets outermost (row s * m + d); ``x`` is
    ``model["assign"]``, ``P`` ops x devices in model units."""
    x = model["assign"]
    m = P.shape[1]
    cols = [x.index[js, d] for js in sets for d in range(m)]
    coefs = [P[js, d] for js in sets for d in range(m)]
    rows = [np.full(js.size, k * m + d) for k, js in enumerate(sets) for d in range(m)]
    return linear_sum(np.concatenate(cols), np.concatenate(coefs), np.concatenate(rows), len(sets) * m, model.num_vars)


def precedence_load_rows(
    model: Model, inst: PlacementInstance, T: Any, w: Any, P: np.ndarray, r: np.ndarray, q: np.ndarray, max_nonzeros: int = MAX_NONZEROS, deadline: float | None = None
) -> None:
    """The descendant rows (``descendant-load``) and ancestor rows (``ancestor-load``) of
    the module docstring, for head/start variables ``T`` and makespan ``w``; ``P`` (ops x
    devices), ``r`` and ``q`` in model units; ``x`` is ``model["assign"]`` and p_i(x) the
    ``duration`` expression. Past ``deadline`` (a ``time.perf_counter()`` value)
    `DeadlineReached` (review rev16 D3: 20 s on 27,083 ops after a limit of 4 s)."""
    n, m = inst.n_ops, inst.n_devices
    if n < 2 or inst.n_edges == 0 or max_nonzeros <= 0:
        return
    bits = _closure_bits(inst, deadline)
    pmax = P.max(axis=1)
    dur = model.expression("duration")
    for name, ancestors in (("descendant-load", False), ("ancestor-load", True)):
        # least tail (descendants) or head (ancestors) over the set
        other = r if ancestors else q
        sizes, work, least = _set_sums(bits, n, ancestors, pmax, other, deadline)
        has = sizes > 0
        least = np.where(has, least, 0.0)
        static = r if ancestors else q
        excess = np.where(has, work + least - static, 0.0)
        sel = _selected(excess, sizes, m, max_nonzeros // 2)
        if sel.size == 0:
            continue
        load = device_loads(model, _reach_sets(bits, n, ancestors, sel, deadline), P)
        ops = np.repeat(sel, m)
        if not ancestors:
            # w >= T_i + p_i(x) + load_d(desc(i)) + least tail
            model.add_constraints(name, T[ops] + dur[ops] + load - w <= -least[ops])
        else:
            # T_i >= least head + load_d(anc(i))
            model.add_constraints(name, load - T[ops] <= -least[ops])


#: nonzeros of the waiting rows (`waiting_load_rows`) and of the window rows
#: (`window_load_rows`) at most (defaults). resnet-50-dgx1-4, the relaxation's MILP at 200 s
#: (load ~5): both 60,000 -> optimum 17.297 ms proven in 100 s; windows only -> 17.297 ms
#: found but the bound at 16.75 ms after 200 s; waiting rows only -> 16.805 ms (as none)
WAIT_NONZEROS = 60_000
WINDOW_NONZEROS = 60_000


def gap_matrix(inst: PlacementInstance, p: np.ndarray) -> np.ndarray:
    """(n, n): the longest path from the end of op i to the start of op j (the durations
    ``p`` of the ops strictly between them, no communication), -inf when no path i -> j
    exists; 0 for an edge i -> j."""
    n = inst.n_ops
    gap_t = np.full((n, n), -np.inf)  # gap_t[j, i]: from i to j
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        preds[b].append(a)
    for j in inst.topo_order().tolist():
        row = gap_t[j]
        for k in preds[j]:
            np.maximum(row, gap_t[k] + p[k], out=row)
            if row[k] < 0.0:
                row[k] = 0.0
    return gap_t.T.copy()


def _best_thresholds(dist: np.ndarray, work: np.ndarray, other: np.ndarray, static: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per op i, the threshold delta > 0 among its distances ``dist[i]`` (-inf: unrelated)
    that maximizes delta + work of {j: dist[i, j] >= delta} + least ``other`` over that set
    - ``static[i]``: (delta, that excess, set size) per op (excess 0 when none beats the
    static bound)."""
    n = dist.shape[0]
    delta = np.zeros(n)
    excess = np.zeros(n)
    size = np.zeros(n, dtype=np.int64)
    for i in range(n):
        js = np.flatnonzero(dist[i] > 0.0)
        if js.size == 0:
            continue
        o = np.argsort(-dist[i, js], kind="stable")
        js = js[o]
        d = dist[i, js]
        ex = d + np.cumsum(work[js]) + np.minimum.accumulate(other[js]) - static[i]
        # only the last of equal distances closes a set
        last = np.append(d[1:] != d[:-1], True)
        ex = np.where(last, ex, -np.inf)
        k = int(np.argmax(ex))
        if ex[k] > 1e-9:
            delta[i], excess[i], size[i] = d[k], ex[k], k + 1
    return delta, excess, size


def waiting_load_rows(model: Model, inst: PlacementInstance, T: Any, w: Any, P: np.ndarray, r: np.ndarray, q: np.ndarray, max_nonzeros: int = WAIT_NONZEROS) -> None:
    """Load rows for the ops that must *wait* after (before) op i: with g(i, j) the longest
    path from the end of i to the start of j at fastest times (`gap_matrix`, model units)
    and a threshold delta > 0, the descendants S = {j: g(i, j) >= delta} all start after
    T_i + p_i(x) + delta, one at a time on each device d, and the last is followed by its
    tail:  w >= T_i + p_i(x) + delta + sum_{j in S} p_{j,d} x[j, d] + min_{j in S} q_j
    (``waiting-descendant-load``); mirrored, the ancestors A = {j: g(j, i) >= delta} all end
    by T_i - delta:  T_i >= min_{j in A} r_j + sum_{j in A} p_{j,d} x[j, d] + delta
    (``waiting-ancestor-load``). Per op, the delta with the most excess over the static
    bound; most excess per nonzero first, up to ``max_nonzeros``.

    These see a device that waits: on resnet-50 the ops of the backward pass placed on the
    device that ran the forward pass up to op i wait for the rest of the forward and the
    backward pass back to them (delta), which the rows of `precedence_load_rows` (delta
    = 0) do not charge. Valid for every plan (T_i its start) under both communication
    models (delays only lengthen the paths) and both memory models: the one-machine head +
    work + tail bound (Carlier, EJOR 11(1), 1982) of the set, its head read from the plan's
    own start of i plus a path length."""
    n, m = inst.n_ops, inst.n_devices
    if n < 3 or inst.n_edges == 0 or max_nonzeros <= 0:
        return
    pmin = P.min(axis=1)
    pmax = P.max(axis=1)
    gap = gap_matrix(inst, pmin)
    dur = model.expression("duration")
    for name, dist, other, static in (("waiting-descendant-load", gap, q, q), ("waiting-ancestor-load", gap.T, r, r)):
        delta, excess, size = _best_thresholds(dist, pmax, other, static)
        sel = _selected(excess, size, m, max_nonzeros // 2)
        if sel.size == 0:
            continue
        sets = [np.flatnonzero(dist[i] >= delta[i]) for i in sel.tolist()]
        least = np.repeat([float(other[js].min()) + delta[i] for i, js in zip(sel.tolist(), sets)], m)
        load = device_loads(model, sets, P)
        ops = np.repeat(sel, m)
        if name == "waiting-descendant-load":
            model.add_constraints(name, T[ops] + dur[ops] + load - w <= -np.asarray(least))
        else:
            model.add_constraints(name, load - T[ops] <= -np.asarray(least))


def window_load_rows(model: Model, inst: PlacementInstance, T: Any, P: np.ndarray, r: np.ndarray, max_nonzeros: int = WINDOW_NONZEROS) -> None:
    """Load rows between two ops k -> i (a path from k to i): every op j strictly between
    them (a descendant of k and an ancestor of i) starts after k ends and ends before i
    starts, so on each device d
    T_i >= T_k + p_k(x) + sum_{j in desc(k) & anc(i)} p_{j,d} x[j, d]  (``window-load``).

    With heads T that carry the cut edges' delays, these see what a device's side work
    costs the chain on it: on resnet-50 the downsample branches placed with the main
    chain, one at a time with it, and the chain's own segment on the device that must also
    run the backward pass later. Pairs whose window holds more work than their static
    heads allow (r_k + p_k + work - r_i > 0, work at the slowest times) are kept, most
    excess per nonzero first, up to ``max_nonzeros``. Valid for every plan (T its start
    times) under both communication and both memory models: the ops between k and i on one
    device run one at a time inside [end of k, start of i] (Carlier's one-machine bound,
    EJOR 11(1), 1982, over a window given by two of the plan's own starts)."""
    n, m = inst.n_ops, inst.n_devices
    if n < 3 or inst.n_edges == 0 or max_nonzeros <= 0:
        return
    reach = precedence_sets(inst)
    R = reach.astype(float)
    pmin, pmax = P.min(axis=1), P.max(axis=1)
    size = R @ R  # |desc(k) & anc(i)|
    work = (R * pmax[None, :]) @ R
    excess = np.where(reach & (size > 0), r[:, None] + pmin[:, None] + work - r[None, :], 0.0)
    k, i = np.nonzero(excess > 1e-9)
    chosen = _selected(excess[k, i], size[k, i].astype(np.int64), m, max_nonzeros, extra=4)
    if chosen.size == 0:
        return
    k, i = k[chosen], i[chosen]
    dur = model.expression("duration")
    load = device_loads(model, [np.flatnonzero(reach[a] & reach[:, b]) for a, b in zip(k.tolist(), i.tolist())], P)
    kk, ii = np.repeat(k, m), np.repeat(i, m)
    model.add_constraints("window-load", T[kk] + dur[kk] + load - T[ii] <= 0)
