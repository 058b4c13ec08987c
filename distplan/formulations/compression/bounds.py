"""Solver-free lower bounds on the iteration time of a compression instance (seconds).

* sync streams: every device runs all its updates one after another after its backward
  pass, which is at least as short as with every eligible op duplicated:
  T >= End_k(all duplicated) + sum_g update_gk.
* channel: for any time r, the transfers that cannot be released before r follow one another
  on the channel after r, then one update runs:
  T >= r + sum_{h: release_lb(h) >= r} min_tau_h + min update, over r = release_lb(g) (the
  earliest release of g on every replica device: the channel order and the release order by
  op position may differ across replica groups, release times need not), where min_tau_h is the
  least channel time over the codecs, all-reduce and every sufficient-factor cut of h's tree
  (the cheapest cut is found exactly by a pass over the in-tree).
"""

from __future__ import annotations

import numpy as np

from distplan.formulations.compression.costs import cost_data
from distplan.formulations.registry import Bound
from distplan.models.compression_instance import CompressionInstance


def min_sfb_channel(inst: CompressionInstance) -> np.ndarray:
    """Least broadcast seconds per gradient over every duplicated set containing its producer
    (inf where the producer is not eligible): f(v) = sum over v's inputs e = (u -> v) of
    c_e if u is not eligible, else min(c_e, f(u))."""
    cd = cost_data(inst)
    f = np.zeros(inst.n_ops)
    order = np.flatnonzero(cd.eligible)  # document order is topological: inputs come first
    incoming: dict[int, list[tuple[int, float]]] = {}
    for src, dst, sec in zip(cd.cand_src.tolist(), cd.cand_dst.tolist(), cd.cand_seconds.tolist()):
        incoming.setdefault(dst, []).append((src, sec))
    for v in order.tolist():
        total = 0.0
        for u, sec in incoming.get(v, []):
            total += min(sec, f[u]) if cd.eligible[u] else sec
        f[v] = total
    out = np.full(inst.n_gradients, np.inf)
    elig_prod = cd.eligible[cd.grad_op]
    out[elig_prod] = f[cd.grad_op[elig_prod]]
    return out


def compression_bounds(inst: CompressionInstance) -> list[Bound]:
    cd = cost_data(inst)
    stream_t = cd.class_time * (~inst.is_update)[:, None]
    fastest = np.cumsum(stream_t - cd.class_time * cd.eligible[:, None], axis=0)
    end_lb = fastest[-1]
    upd_sum = np.zeros(cd.n_classes)
    for g, ks in enumerate(cd.grad_classes):
        upd_sum[ks] += cd.update_seconds[g, ks]
    sync = float((end_lb + upd_sum).max())
    if inst.n_gradients == 0:  # nothing to send: each stream's compute alone
        return [Bound(sync, "compression load bound (compute streams, no gradients)")]
    min_tau = min_sfb_channel(inst)
    for opt in cd.options:
        min_tau[opt.gradient] = min(min_tau[opt.gradient], opt.channel_seconds)
    release_lb = np.zeros(inst.n_gradients)
    for g, ks in enumerate(cd.grad_classes):
        release_lb[g] = fastest[cd.grad_op[g], ks].max()
    rank = np.argsort(release_lb, kind="stable")  # by earliest release time
    suffix = np.cumsum(min_tau[rank][::-1])[::-1]
    tail = min(float(cd.update_seconds[g, ks].min(initial=np.inf)) for g, ks in enumerate(cd.grad_classes))
    tail = tail if np.isfinite(tail) else 0.0
    channel = float((release_lb[rank] + suffix).max() + tail)
    return [Bound(max(sync, channel), "compression load bound (sync streams, channel)")]
