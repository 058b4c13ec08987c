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

from distplan.modeling.model import Model, linear_sum
from distplan.models.graphs import transitive_closure
from distplan.models.placement_instance import PlacementInstance

#: nonzeros of the descendant and ancestor rows together at most (default). resnet-50-dgx1-4,
#: relaxation solved to optimality (CPU seconds, load ~9): 30,000 -> 16.802 ms in 19.6 s,
#: 60,000 -> 16.803 ms in 16.6 s, all 138,000 -> 16.820 ms in 62 s; none: 16.59 ms
MAX_NONZEROS = 60_000


def precedence_sets(inst: PlacementInstance) -> np.ndarray:
    """reach[i, j] = True when a path i -> j exists (boolean, n x n)."""
    return transitive_closure(inst.n_ops, inst.src, inst.dst, inst.topo_order())


def _selected(excess: np.ndarray, sizes: np.ndarray, m: int, budget: int) -> np.ndarray:
    """Ops whose row beats the static one (excess > 0), most excess per nonzero first,
    within budget nonzeros (each op has m rows of size + 3 entries)."""
    cand = np.flatnonzero(excess > 1e-9)
    cand = cand[np.argsort(-excess[cand] / (sizes[cand] + 3), kind="stable")]
    cost = np.cumsum((sizes[cand] + 3) * m)
    return np.sort(cand[cost <= budget])


def precedence_load_rows(model: Model, inst: PlacementInstance, T: Any, w: Any, P: np.ndarray, r: np.ndarray, q: np.ndarray, max_nonzeros: int = MAX_NONZEROS) -> None:
    """The descendant rows (``descendant-load``) and ancestor rows (``ancestor-load``) of
    the module docstring, for head/start variables ``T`` and makespan ``w``; ``P`` (ops x
    devices), ``r`` and ``q`` in model units; ``x`` is ``model["assign"]`` and p_i(x) the
    ``duration`` expression."""
    n, m = inst.n_ops, inst.n_devices
    if n < 2 or inst.n_edges == 0 or max_nonzeros <= 0:
        return
    reach = precedence_sets(inst)
    pmax = P.max(axis=1)
    x = model["assign"]
    dur = model.expression("duration")
    for name, rel in (("descendant-load", reach), ("ancestor-load", reach.T)):
        sizes = rel.sum(axis=1)
        has = sizes > 0
        work = rel.astype(float) @ pmax
        # least tail (descendants) or head (ancestors) over the set
        other = q if rel is reach else r
        least = np.where(rel, other[None, :], np.inf).min(axis=1, initial=np.inf)
        least = np.where(has, least, 0.0)
        static = q if rel is reach else r
        excess = np.where(has, work + least - static, 0.0)
        sel = _selected(excess, sizes, m, max_nonzeros // 2)
        if sel.size == 0:
            continue
        cols, coefs, rows = [], [], []
        nrow = 0
        for i in sel.tolist():
            js = np.flatnonzero(rel[i])
            for d in range(m):
                cols.append(x.index[js, d])
                coefs.append(P[js, d])
                rows.append(np.full(js.size, nrow))
                nrow += 1
        load = linear_sum(np.concatenate(cols), np.concatenate(coefs), np.concatenate(rows), nrow, model.num_vars)
        ops = np.repeat(sel, m)
        if rel is reach:
            # w >= T_i + p_i(x) + load_d(desc(i)) + least tail
            model.add_constraints(name, T[ops] + dur[ops] + load - w <= -least[ops])
        else:
            # T_i >= least head + load_d(anc(i))
            model.add_constraints(name, load - T[ops] <= -least[ops])
