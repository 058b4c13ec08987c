"""The channel schedule of fixed compression choices, shared by ``codec_select`` and TAG.

`select_index` derives the index arrays of a codec_select build (option and (gradient,
device class) pairs, stream times per class, the big-M horizon H); a `Choice` fixes the
decisions (duplicated ops, one option per gradient, the channel order); `least_schedule`
computes the earliest schedule of a choice under the codec_select rows (see
`distplan.formulations.compression.select`), which is the evaluator's iteration model
(`distplan.models.compression_eval`). Units: seconds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.formulations.compression.costs import CostData, cost_data, horizon
from distplan.models.compression_instance import CompressionInstance

# -- index structures -------------------------------------------------------------------------


@dataclass(frozen=True)
class SelectIndex:
    """Index arrays of one codec_select build."""

    elig: np.ndarray  # op ids of eligible ops (x variables)
    x_of_op: np.ndarray  # op id -> x index or -1
    opt_grad: np.ndarray  # option -> gradient
    opt_coded: np.ndarray  # option has an encode stage (a codec)
    grad_coded: np.ndarray  # gradient has at least one codec option
    pair_g: np.ndarray  # (gradient, class) pairs
    pair_k: np.ndarray
    pair_of: np.ndarray  # [G, n_classes] -> pair id or -1
    enc_pairs: np.ndarray  # pair ids of coded gradients
    enc_of_pair: np.ndarray  # pair id -> encode variable index or -1
    stream_const: np.ndarray  # [n_ops, n_classes] C_k(i): stream time up to op i with nothing duplicated
    stream_end: np.ndarray  # [n_classes]
    rank: np.ndarray  # gradients in release order
    H: float
    release_lb: np.ndarray  # [G] earliest possible channel start (everything eligible duplicated)
    sync_lb: np.ndarray  # [n_classes] earliest possible end of backward
    #: seconds per model time unit: the MILP measures time in units of H so its values are
    #: O(1) and solver tolerances (absolute gap 1e-6, feasibility 1e-7) are relative
    unit: float


def select_index(inst: CompressionInstance, cd: CostData, upper: float | None = None) -> SelectIndex:
    """Index arrays; ``upper`` (seconds) is an iteration time some plan reaches: every time of
    a solution that is at least as good is below it, so it serves as the big-M."""
    elig = np.flatnonzero(cd.eligible)
    x_of_op = np.full(cd.n_ops, -1, dtype=np.int64)
    x_of_op[elig] = np.arange(elig.size)
    opt_grad = np.array([o.gradient for o in cd.options], dtype=np.int64)
    opt_coded = np.array([o.method != "allreduce" for o in cd.options], dtype=bool)
    grad_coded = np.zeros(cd.n_gradients, dtype=bool)
    grad_coded[opt_grad[opt_coded]] = True
    nk = cd.n_classes
    pair_g_list, pair_k_list = [], []
    for g, ks in enumerate(cd.grad_classes):
        pair_g_list.extend([g] * ks.size)
        pair_k_list.extend(ks.tolist())
    pair_g = np.array(pair_g_list, dtype=np.int64)
    pair_k = np.array(pair_k_list, dtype=np.int64)
    pair_of = np.full((cd.n_gradients, nk), -1, dtype=np.int64)
    pair_of[pair_g, pair_k] = np.arange(pair_g.size)
    enc_pairs = np.flatnonzero(grad_coded[pair_g])
    enc_of_pair = np.full(pair_g.size, -1, dtype=np.int64)
    enc_of_pair[enc_pairs] = np.arange(enc_pairs.size)
    stream_t = cd.class_time * (~inst.is_update)[:, None]
    stream_const = np.cumsum(stream_t, axis=0)
    stream_end = stream_const[-1] if cd.n_ops else np.zeros(nk)
    rank = np.lexsort((np.arange(cd.n_gradients), cd.grad_op))
    H = horizon(inst) if upper is None else upper
    all_dup = np.cumsum(cd.class_time * cd.eligible[:, None], axis=0)
    fastest = stream_const - all_dup
    release_lb = np.zeros(cd.n_gradients)
    np.maximum.at(release_lb, pair_g, fastest[cd.grad_op[pair_g], pair_k])
    sync_lb = fastest[-1] if cd.n_ops else np.zeros(nk)
    return SelectIndex(
        elig, x_of_op, opt_grad, opt_coded, grad_coded, pair_g, pair_k, pair_of, enc_pairs, enc_of_pair,
        stream_const, stream_end, rank, H, release_lb, sync_lb, max(H, 1e-12),
    )

# -- the least schedule of fixed choices (warm start, candidate comparison) -------------------


@dataclass
class Choice:
    """Fixed decisions: duplicated ops (mask over ops), option index per gradient (-1 = sfb),
    channel order (gradient indices)."""

    dup: np.ndarray
    option: np.ndarray
    order: np.ndarray


def least_schedule(inst: CompressionInstance, ch: Choice, si: SelectIndex | None = None) -> dict[str, Any]:
    """The earliest schedule of fixed choices under the model's rows: iteration seconds and
    every time variable (the MILP's values for a warm start). ``si``: the index arrays, when
    the caller has them (they are rebuilt otherwise)."""
    cd = cost_data(inst)
    si = si if si is not None else select_index(inst, cd)
    dupf = (ch.dup & cd.eligible).astype(float)
    sub = np.cumsum(cd.class_time * dupf[:, None], axis=0)
    F = si.stream_const - sub
    End = si.stream_end - (sub[-1] if cd.n_ops else 0.0)
    nk = cd.n_classes
    b = np.maximum(0.0, dupf[cd.cand_dst] - dupf[cd.cand_src])
    sfb_chan = np.bincount(cd.cand_gradient[cd.cand_gradient >= 0], weights=(b * cd.cand_seconds)[cd.cand_gradient >= 0], minlength=cd.n_gradients)
    tree_work = np.zeros((cd.n_gradients, nk))
    elig = np.flatnonzero(cd.eligible & ch.dup & (inst.tree >= 0))
    np.add.at(tree_work, inst.tree[elig], inst.replicas[elig][:, None] * cd.class_time[elig])
    enc_free = np.zeros(nk)
    sync_free = np.zeros(nk)
    chan_free = 0.0
    busy = 0.0
    c = np.zeros(cd.n_gradients)
    e = np.zeros(si.enc_pairs.size)
    u = np.zeros(si.pair_g.size)
    for g in ch.order.tolist():
        ks = cd.grad_classes[g]
        p = cd.grad_op[g]
        o = int(ch.option[g])
        opt = cd.options[o] if o >= 0 else None
        coded = opt is not None and opt.method != "allreduce"
        chan = opt.channel_seconds if opt is not None else float(sfb_chan[g])
        ready = 0.0
        for k in ks.tolist():
            q = si.enc_of_pair[si.pair_of[g, k]]
            if coded:
                s = max(enc_free[k], F[p, k])
                e[q] = s
                enc_free[k] = s + opt.encode_seconds[k]  # type: ignore[union-attr]
                ready = max(ready, enc_free[k])
            else:
                if q >= 0:
                    e[q] = enc_free[k]
                ready = max(ready, F[p, k])
        start = max(chan_free, ready)
        c[g] = start
        chan_free = start + chan
        busy += chan
        for k in ks.tolist():
            work = cd.update_seconds[g, k] + tree_work[g, k] + (opt.decode_seconds[k] if opt is not None else 0.0)
            s = max(sync_free[k], chan_free, End[k])
            u[si.pair_of[g, k]] = s
            sync_free[k] = s + work
    T = float(max(End.max(initial=0.0), sync_free.max(initial=0.0), chan_free))
    return {"iteration": T, "channel_start": c, "encode_start": e, "sync_start": u, "broadcast": b, "channel_busy": busy}
