"""Re-timing a schedule with its sinks moved into idle gaps.

A sink (an op without successors: a weight update of a traced training graph) delays
nobody but the ops after it on its device. The list schedulers (`listsched`, and
Schrage's rule in `tailsched`) are non-delay: a device that falls idle starts any ready
op, so a weight update that becomes ready in a short gap runs there and pushes back the
critical op whose input arrives a moment later (inception-v3-dgx1-4: Mixed_7c's
branch1x1 update, 0.038 ms, starts 0.017 ms before the input of the gradient on the
critical chain arrives, and the whole plan ends 0.0215 ms later).

Here every other op keeps its device and its order on the device and is re-timed at its
earliest (the evaluator's exact timing in the plan's orders,
`placement_evaluate.start_times_in_order`, on the instance without its sinks, which
changes no other op's inputs), and then each sink, by increasing ready time, takes the
earliest interval on its device after its inputs arrive that is idle for its whole
duration (first fit). No op other than a sink starts later than in the re-timed schedule,
and sinks only fill gaps or follow the device's last op. This is the idea of inserting
ops into idle slots without delaying those already placed, as in the insertion-based
list schedulers (HEFT, Topcuoglu, Hariri & Wu, IEEE TPDS 13(3), 2002), applied once to
the ops whose delay matters least. Independent links only: under Baechi's channel model a
sink's input transfer occupies a channel and the sinks' times are not free to move. Simple
memory only: under the liveness model a sink moved earlier holds its temporary memory
while other ops' outputs are live and can push the device past its capacity.
Seconds throughout.
"""

from __future__ import annotations

import bisect

import numpy as np

from distplan.models.placement_evaluate import start_times_in_order
from distplan.models.placement_instance import PlacementInstance


def sinks_in_gaps(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> np.ndarray | None:
    """Start times (seconds) of the schedule ``start`` (with the devices ``device``) with
    its sinks moved into idle gaps (module docstring); None under the channel model or the
    liveness memory model, when no sink takes time, or when the orders of ``start``
    contradict the graph."""
    n = inst.n_ops
    if inst.communication != "independent" or inst.memory_model != "simple" or n == 0:
        return None
    dev = np.asarray(device, dtype=np.int64)
    st = np.asarray(start, dtype=float)
    dur = inst.time[np.arange(n), dev]
    sink = np.bincount(inst.src, minlength=n) == 0
    sink &= dur > 0
    if not sink.any():
        return None
    pos = np.empty(n, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(n)
    core = np.flatnonzero(~sink)
    sub = inst.induced(~sink)
    rank = np.empty(core.size, dtype=np.int64)
    rank[np.lexsort((pos[core], st[core]))] = np.arange(core.size)
    timed = start_times_in_order(sub, dev[core], rank)
    if timed is None:
        return None
    out = np.empty(n)
    out[core] = timed
    end = np.zeros(n)
    end[core] = timed + dur[core]
    # idle intervals per device: [gap_lo[k], gap_hi[k]) sorted, the last one open-ended
    gaps_lo: list[list[float]] = []
    gaps_hi: list[list[float]] = []
    for d in range(inst.n_devices):
        on = core[dev[core] == d]
        on = on[np.argsort(out[on], kind="stable")]
        lo, hi = [0.0], []
        for v in on.tolist():
            if out[v] > lo[-1]:
                hi.append(float(out[v]))
                lo.append(float(end[v]))
            else:
                lo[-1] = max(lo[-1], float(end[v]))
        hi.append(np.inf)
        gaps_lo.append(lo)
        gaps_hi.append(hi)
    sinks = np.flatnonzero(sink)
    ready = np.zeros(n)
    into = np.flatnonzero(sink[inst.dst])
    arrive = end[inst.src[into]] + inst.delay(into, dev[inst.src[into]], dev[inst.dst[into]])
    np.maximum.at(ready, inst.dst[into], arrive)
    for v in sinks[np.lexsort((pos[sinks], ready[sinks]))].tolist():
        lo, hi = gaps_lo[dev[v]], gaps_hi[dev[v]]
        p = float(dur[v])
        k = bisect.bisect_right(hi, float(ready[v]))
        while True:
            t = max(lo[k], float(ready[v]))
            if t + p <= hi[k]:
                break
            k += 1
        out[v] = t
        # the gap [lo, hi) becomes [lo, t) and [t + p, hi), dropping empty pieces
        pieces = [(a, b) for a, b in ((lo[k], t), (t + p, hi[k])) if b > a or b == np.inf]
        lo[k : k + 1] = [a for a, _ in pieces]
        hi[k : k + 1] = [b for _, b in pieces]
    return out
