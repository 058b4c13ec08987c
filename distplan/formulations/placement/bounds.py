"""Solver-free lower bounds on the placement makespan (seconds).

Valid for every memory and communication model: each relaxes memory timing and
communication contention.
* critical path: the longest chain with every op at its fastest device time;
* work / m: the total fastest-device time spread evenly over the m devices;
* memory-driven cuts on a path (`pathcut`): the path's length plus the cheapest cuts that
  split it into segments whose colocation groups fit a device.
(The single-device time is an upper bound, not a lower one: it is the `single_device` plan.)
"""

from __future__ import annotations

import numpy as np

from distplan.formulations.placement.pathcut import path_cut_bound
from distplan.formulations.registry import Bound
from distplan.models.placement_instance import PlacementInstance


def critical_path(inst: PlacementInstance, times: np.ndarray | None = None) -> float:
    """Longest path length (seconds) with op weights ``times`` (default fastest device)."""
    p = inst.time.min(axis=1) if times is None else times
    order = inst.topo_order()
    finish = p.copy()
    # relax edges in topological order of their source
    pos = np.empty(inst.n_ops, dtype=np.int64)
    pos[order] = np.arange(inst.n_ops)
    eorder = np.argsort(pos[inst.src], kind="stable")
    src, dst = inst.src[eorder], inst.dst[eorder]
    head = np.zeros(inst.n_ops)  # earliest start
    # process sources in order; numpy over groups of edges sharing a source position
    bounds_idx = np.searchsorted(pos[src], np.arange(inst.n_ops + 1))
    for k in range(inst.n_ops):
        lo, hi = bounds_idx[k], bounds_idx[k + 1]
        if lo == hi:
            continue
        v = order[k]
        f = head[v] + p[v]
        np.maximum.at(head, dst[lo:hi], f)
    finish = head + p
    return float(finish.max()) if inst.n_ops else 0.0


def placement_bounds(inst: PlacementInstance, deadline: float | None = None) -> list[Bound]:
    """Critical path, work / devices and, when memory forces cuts, the memory-driven cuts
    on a path (`pathcut`, O(V + E) per path; 1 s on 12,000 ops: as many paths as
    ``deadline``, a ``time.perf_counter()`` value, allows)."""
    p = inst.time.min(axis=1)
    out = [
        Bound(critical_path(inst, p), "critical path without communication"),
        Bound(float(p.sum()) / inst.n_devices, "total work / number of devices"),
    ]
    cut = path_cut_bound(inst, deadline=deadline)
    if cut is not None:
        out.append(cut)
    return out
