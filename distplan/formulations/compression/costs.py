"""Coefficients shared by the compression formulations, computed vectorized from an instance.

Units: seconds, bytes. Cost model (one per-device model throughout; see
`distplan.models.compression_eval`): ring all-reduce ``2 (M-1)/M * S / B``; all-gather of a
per-replica payload ``P``: ``(M-1) * P / B``; a duplicated op costs ``(M-1) * t`` more
compute (it runs on the whole batch). TAG's code (ylxdzsw/tag ``search/sfb.jl``) charges a
broadcast ``M (M-1) S / B`` (total bytes on a shared medium) next to a per-device all-reduce
term; we charge both per device so the two terms are comparable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from distplan.models.compression_eval import memory_limit
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_records import DTYPE_BYTES, INDEX_BYTES


@dataclass
class SyncOption:
    """One way (other than sfb) to synchronize one gradient."""

    gradient: int
    method: str  # "allreduce" or a codec name
    channel_seconds: float
    #: encode / decode seconds per device class (0 where the class holds no replica)
    encode_seconds: np.ndarray
    decode_seconds: np.ndarray


@dataclass
class CostData:
    """Everything the formulations need, as arrays (index order of the instance)."""

    n_ops: int
    n_gradients: int
    eligible: np.ndarray  # bool [n_ops]
    #: TAG redundant compute (M_i - 1) * mean replica seconds of op i
    dup_seconds: np.ndarray
    #: candidate broadcast edges (edges into eligible ops)
    cand_edges: np.ndarray
    cand_src: np.ndarray
    cand_dst: np.ndarray
    cand_seconds: np.ndarray  # (M-1) * bytes / B
    cand_gradient: np.ndarray  # gradient tree of the consumer
    #: per gradient
    grad_op: np.ndarray
    grad_allreduce_seconds: np.ndarray
    grad_bandwidth: np.ndarray
    #: device classes: devices with the same type and the same hosted ops share a timeline
    class_rep: np.ndarray  # representative device per class
    class_of_device: np.ndarray
    class_time: np.ndarray  # [n_ops, n_classes] seconds (0 where not hosted)
    class_host: np.ndarray  # [n_ops, n_classes] bool
    grad_classes: list[np.ndarray]
    options: list[SyncOption] = field(default_factory=list)
    #: update seconds per [gradient, class]
    update_seconds: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    #: memory: base bytes per device, extra bytes of duplicating op i on device d, of broadcast candidate e on d
    memory_base: np.ndarray = field(default_factory=lambda: np.zeros(0))
    #: the most bytes each device holds in a plan the evaluator accepts (`memory_limit` of its capacity)
    memory_capacity: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def n_classes(self) -> int:
        return int(self.class_rep.size)


def cost_data(inst: CompressionInstance) -> CostData:
    """Coefficients of an instance (cached on the instance object)."""
    cached = getattr(inst, "_cost_data", None)
    if cached is not None:
        return cached
    n = inst.n_ops
    hosted = inst.host
    M = inst.replicas.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_t = np.where(M > 0, inst.time.sum(axis=1) / np.maximum(M, 1), 0.0)
    dup_seconds = np.where(inst.eligible, (M - 1) * mean_t, 0.0)

    # bottleneck bandwidth per distinct replica group
    group_bw: dict[bytes, float] = {}

    def bw_of(mask: np.ndarray) -> float:
        key = mask.tobytes()
        if key not in group_bw:
            group_bw[key] = inst.group_bandwidth(mask)
        return group_bw[key]

    op_bw = np.array([bw_of(hosted[i]) for i in range(n)]) if n else np.zeros(0)
    cand = np.flatnonzero(inst.eligible[inst.edge_dst]) if inst.n_edges else np.zeros(0, np.int64)
    cand_src = inst.edge_src[cand]
    cand_dst = inst.edge_dst[cand]
    Md = M[cand_dst]
    cand_seconds = (Md - 1) * inst.edge_bytes[cand] / op_bw[cand_dst]
    cand_gradient = inst.tree[cand_dst]

    G = inst.n_gradients
    gM = M[inst.grad_op] if G else np.zeros(0)
    gB = op_bw[inst.grad_op] if G else np.zeros(0)
    with np.errstate(invalid="ignore", divide="ignore"):
        ar = np.where(gM >= 2, 2.0 * (gM - 1) / np.maximum(gM, 1) * inst.grad_bytes / gB, 0.0)

    # device classes
    keys: dict[tuple[str, bytes], int] = {}
    class_of_device = np.zeros(inst.n_devices, dtype=np.int64)
    reps: list[int] = []
    for d, dev in enumerate(inst.devices):
        key = (dev.type, hosted[:, d].tobytes())
        if key not in keys:
            keys[key] = len(reps)
            reps.append(d)
        class_of_device[d] = keys[key]
    class_rep = np.array(reps, dtype=np.int64)
    class_time = inst.time[:, class_rep]
    class_host = hosted[:, class_rep]
    grad_classes = [np.unique(class_of_device[hosted[p]]) for p in inst.grad_op.tolist()]

    nk = class_rep.size
    options: list[SyncOption] = []
    for g, grad in enumerate(inst.gradients):
        zero = np.zeros(nk)
        options.append(SyncOption(g, "allreduce", float(ar[g]), zero, zero.copy()))
        if gM[g] < 2:
            continue
        for codec in inst.codecs:
            if not inst.codec_applies(codec, grad):
                continue
            if grad.profile in codec.ratio:
                ratio = codec.ratio[grad.profile]
            else:  # sparse-index from the given density
                assert grad.shape is not None
                row = grad.shape[1] * DTYPE_BYTES[grad.dtype]
                ratio = grad.density * (row + INDEX_BYTES) / row
            enc = np.zeros(nk)
            dec = np.zeros(nk)
            for k in grad_classes[g].tolist():
                dtype = inst.devices[class_rep[k]].type
                enc[k] = grad.bytes / codec.encode_bytes_per_second[dtype]
                dec[k] = (gM[g] - 1) * grad.bytes / codec.decode_bytes_per_second[dtype]
            options.append(SyncOption(g, codec.name, float((gM[g] - 1) * ratio * grad.bytes / gB[g]), enc, dec))
    update_seconds = class_time[inst.grad_update] if G else np.zeros((0, nk))

    data = CostData(
        n_ops=n,
        n_gradients=G,
        eligible=inst.eligible.copy(),
        dup_seconds=dup_seconds,
        cand_edges=cand,
        cand_src=cand_src,
        cand_dst=cand_dst,
        cand_seconds=cand_seconds,
        cand_gradient=cand_gradient,
        grad_op=inst.grad_op.copy(),
        grad_allreduce_seconds=ar,
        grad_bandwidth=gB,
        class_rep=class_rep,
        class_of_device=class_of_device,
        class_time=class_time,
        class_host=class_host,
        grad_classes=grad_classes,
        options=options,
        update_seconds=update_seconds,
        memory_base=inst.memory_without_duplication(),
        memory_capacity=memory_limit(inst.device_capacity),
    )
    inst._cost_data = data  # type: ignore[attr-defined]
    return data


def memory_terms(inst: CompressionInstance) -> tuple[np.ndarray, np.ndarray]:
    """Extra bytes per device of duplicating each op ([n_devices, n_ops]) and of each
    candidate broadcast ([n_devices, n_candidates])."""
    cd = cost_data(inst)
    M = inst.replicas.astype(float)
    dup_bytes = inst.host.T * ((M - 1) * inst.op_memory * cd.eligible)[None, :]
    Md = M[cd.cand_dst]
    bcast_bytes = inst.host[cd.cand_dst].T * ((Md - 1) * inst.edge_bytes[cd.cand_edges])[None, :]
    return dup_bytes, bcast_bytes


def memory_can_bind(inst: CompressionInstance) -> np.ndarray:
    """Devices whose memory could be exceeded when every eligible op is duplicated."""
    cd = cost_data(inst)
    dup_bytes, bcast_bytes = memory_terms(inst)
    worst = cd.memory_base + dup_bytes.sum(axis=1) + bcast_bytes.sum(axis=1)
    return worst > cd.memory_capacity


def tag_objective(inst: CompressionInstance, dup: np.ndarray, alpha: float) -> float:
    """TAG's objective of a duplicated set: redundant compute + broadcasts - all-reduce
    avoided + alpha per duplicated op (seconds)."""
    cd = cost_data(inst)
    x = np.asarray(dup, dtype=float)
    b = np.maximum(0.0, x[cd.cand_dst] - x[cd.cand_src])
    return float(cd.dup_seconds @ x + cd.cand_seconds @ b - cd.grad_allreduce_seconds @ x[cd.grad_op] + alpha * x.sum())


def prune_dangling(inst: CompressionInstance, dup: np.ndarray) -> np.ndarray:
    """Drop duplicated ops whose consumer is neither duplicated nor the update of the
    gradient they produce (TAG's objective only improves: the op costs and saves nothing)."""
    dup = np.asarray(dup, dtype=bool).copy()
    root = np.zeros(inst.n_ops, dtype=bool)
    root[inst.grad_op] = True
    changed = True
    while changed:
        bad = dup & inst.eligible & ~root & ~dup[np.maximum(inst.consumer, 0)]
        bad &= inst.consumer >= 0
        changed = bool(bad.any())
        dup &= ~bad
    return dup & inst.eligible


def horizon(inst: CompressionInstance) -> float:
    """An upper bound on every time of an earliest schedule of any plan (seconds)."""
    cd = cost_data(inst)
    stream = (cd.class_time * (~inst.is_update)[:, None]).sum(axis=0).max(initial=0.0)
    per_grad = np.zeros(cd.n_gradients)
    for opt in cd.options:
        total = opt.channel_seconds + float(opt.encode_seconds.max(initial=0.0)) + float(opt.decode_seconds.max(initial=0.0))
        per_grad[opt.gradient] = max(per_grad[opt.gradient], total)
    sfb_chan = np.bincount(cd.cand_gradient[cd.cand_gradient >= 0], weights=cd.cand_seconds[cd.cand_gradient >= 0], minlength=cd.n_gradients)
    elig = np.flatnonzero(cd.eligible)
    full = (cd.class_time[elig] * inst.replicas[elig][:, None]).max(axis=1) if elig.size else np.zeros(0)
    sfb_work = np.bincount(inst.tree[elig], weights=full, minlength=cd.n_gradients) if elig.size else np.zeros(cd.n_gradients)
    per_grad = np.maximum(per_grad, sfb_chan + sfb_work)
    upd = cd.update_seconds.max(axis=1) if cd.n_gradients else np.zeros(0)
    total = float(stream + per_grad.sum() + upd.sum())
    return max(total, 1e-6) * 1.05 + 1e-6 if math.isfinite(total) else math.inf
