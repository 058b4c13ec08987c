"""Modulo-scheduling heuristics for Tessel's repetend (Rau, MICRO 1994; limited
discrepancy search, Harvey & Ginsberg 1995): the blocks a repetend is made of
(`Cyclic`), their longest dependency distances, the steady-state memory of a flat
schedule, and the iterative / backtracking placements that give the search its
incumbents. Times in seconds, memory in bytes."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from distplan.formulations.deadline import check, past
from distplan.formulations.pipeline.common import (
    integral_data,
)
from distplan.models.pipeline import PipelineInstance

#: the longest period the residue searches take, in time units (`modulo_backtrack` here,
#: `residue.residue_search`): they keep a T-bit reservation mask per block and walk up to T
#: delays per placement, so a period of 1e9 units (a block of 1e9 s beside blocks of 1 s)
#: held the run far past its time limit; beyond it they decide nothing
MAX_PERIOD_UNITS = 1 << 14


@dataclass
class Cyclic:
    """The blocks the repetend is made of (``unfold`` copies of the micro-batch)."""

    inst: PipelineInstance
    unfold: int
    dur: np.ndarray
    mask: np.ndarray
    mem: np.ndarray
    src: np.ndarray
    dst: np.ndarray
    gap: np.ndarray  # duration of src + delay
    block: np.ndarray  # original block of each copy
    copy: np.ndarray  # copy index of each

    @property
    def n(self) -> int:
        return int(self.dur.size)


def cyclic_blocks(inst: PipelineInstance, unfold: int) -> Cyclic:
    nb = inst.n_blocks
    src, dst, lag = inst.edges
    u = np.arange(unfold)
    return Cyclic(
        inst=inst,
        unfold=unfold,
        dur=np.tile(inst.duration, unfold),
        mask=np.tile(inst.device_mask, (unfold, 1)),
        mem=np.tile(inst.memory, unfold),
        src=(u[:, None] * nb + src[None, :]).reshape(-1),
        dst=(u[:, None] * nb + dst[None, :]).reshape(-1),
        gap=np.tile(inst.duration[src] + lag, unfold),
        block=np.tile(np.arange(nb), unfold),
        copy=np.repeat(u, nb),
    )


def longest(cy: Cyclic, deadline: float | None = None) -> np.ndarray:
    """(n, n) longest dependency distance sigma_j - sigma_i >= dist[i, j] (-inf if none).

    One pass over the blocks in the instance's topological order (`PipelineInstance.topo_order`,
    copy after copy: the copies share no arc), so a block's column is final once its
    predecessors' are and each arc is relaxed once (O(arcs x n); rounds of every arc until
    nothing changed took up to n rounds, 34 s on an interleaved pipeline of 8,192 blocks).
    `DeadlineReached` past ``deadline``."""
    n, nb = cy.n, cy.inst.n_blocks
    rows = np.full((n, n), -np.inf)  # rows[j, i] = dist[i, j]: a block's column as a row
    np.fill_diagonal(rows, 0.0)
    preds: list[list[tuple[int, float]]] = [[] for _ in range(n)]
    for a, b, g in zip(cy.src.tolist(), cy.dst.tolist(), cy.gap.tolist()):
        preds[b].append((a, g))
    order = (np.arange(cy.unfold)[:, None] * nb + cy.inst.topo_order[None, :]).ravel()
    for k, b in enumerate(order.tolist()):
        if k % 256 == 0:
            check(deadline, "the repetend's dependency distances")
        row = rows[b]
        for a, g in preds[b]:
            np.maximum(row, rows[a] + g, out=row)
    return rows.T


# -- model blocks ---------------------------------------------------------------------------


def steady_memory(cy: Cyclic, sigma: np.ndarray, period: float) -> np.ndarray:
    """(n, D) steady-state memory at the start of every cyclic block on each device."""
    n, nd = cy.n, cy.mask.shape[1]
    out = np.zeros((n, nd))
    # q_ab: sigma_b + q T in [sigma_a + d_a, sigma_a + T - d_b]
    q = np.ceil((sigma[:, None] + cy.dur[:, None] - sigma[None, :]) / period - 1e-9)
    for d in range(nd):
        on = cy.mask[:, d]
        contrib = cy.mem[None, :] * q * on[None, :]
        np.fill_diagonal(contrib, 0.0)
        out[:, d] = cy.mem + contrib.sum(axis=1)
    return out


def flat_tails(cy: Cyclic) -> np.ndarray:
    """Per block, the least time (seconds) from its start to the end of the flat schedule:
    its longest dependency path to any block, with that block's duration."""
    dist = longest(cy)
    return np.asarray(np.where(np.isfinite(dist), dist + cy.dur[None, :], -np.inf).max(axis=1))


def least_fitting_period(cy: Cyclic, offsets: int) -> float:
    """The least period (seconds) whose ``offsets`` periods hold the flat schedule of one
    repetend: the longest `flat_tails` / ``offsets``. Below it every period is refuted at
    the root of the searches here and in `residue`, one call per period (a 1e9 s link delay
    beside 1 s blocks made that ~1e9 calls)."""
    return float(flat_tails(cy).max()) / max(offsets, 1)


def modulo_heuristic(
    cy: Cyclic, inst: PipelineInstance, offsets: int, t_lb: float, t_ub: float, nodes: int = 24_000, deadline: float | None = None
) -> tuple[np.ndarray, float] | None:
    """Iterative modulo scheduling (Rau, MICRO 1994) without backtracking: for periods
    T = t_lb, t_lb + step, ..., place blocks in topological order at the earliest time
    after their dependencies whose modulo-T interval is free on all their devices; keep
    the first T whose flat schedule spans at most ``offsets`` periods and whose
    steady-state memory fits. Integral data: `modulo_backtrack` instead, at most ``nodes``
    placements in all (a third of them for one period). None when none is found, or when
    ``deadline`` (a ``time.perf_counter()`` value) passes first; else (sigma, T)."""
    integral = integral_data(inst)
    step = 1.0 if integral else max(t_lb / 64.0, 1e-9)
    t_lb = max(t_lb, least_fitting_period(cy, offsets))
    t = math.ceil(t_lb - 1e-9) if integral else t_lb
    if integral:
        budget = nodes
        while t <= min(t_ub, MAX_PERIOD_UNITS) + 1e-9 and not past(deadline):
            sigma_found, used = modulo_backtrack(cy, inst, offsets, int(t), max(2 * cy.n, min(budget, nodes // 3)), deadline)
            budget -= used
            if sigma_found is not None:
                return sigma_found, float(t)
            t += 1
        return None
    nb = inst.n_blocks
    order = np.concatenate([u * nb + inst.topo_order for u in range(cy.unfold)])
    preds: list[list[tuple[int, float]]] = [[] for _ in range(cy.n)]
    for a, b, g in zip(cy.src.tolist(), cy.dst.tolist(), cy.gap.tolist()):
        preds[b].append((a, g))
    caps = inst.capacity
    eps = 1e-9 * max(1.0, t_ub)
    while t <= t_ub + eps and not past(deadline):
        busy: list[list[tuple[float, float]]] = [[] for _ in range(cy.mask.shape[1])]
        sigma = np.zeros(cy.n)
        ok = True
        for b in order.tolist():
            x = max([sigma[a] + g for a, g in preds[b]], default=0.0)
            devs = np.flatnonzero(cy.mask[b]).tolist()
            for _ in range(4 * cy.n + 4):
                moved = False
                lo = x % t
                for d in devs:
                    for s0, p0 in busy[d]:
                        # overlap of [lo, lo + p) and [s0, s0 + p0) modulo t
                        delta = (s0 - lo) % t
                        if delta < cy.dur[b] - eps or (t - delta) < p0 - eps:
                            x += (delta + p0) % t if delta < cy.dur[b] - eps else (p0 - (t - delta))
                            moved = True
                            break
                    if moved:
                        break
                if not moved:
                    break
            else:
                ok = False
            if not ok or x + cy.dur[b] > offsets * t + eps:
                ok = False
                break
            sigma[b] = x
            for d in devs:
                busy[d].append((x % t, float(cy.dur[b])))
        if ok:
            mem = steady_memory(cy, sigma, t)
            fits = all(mem[cy.mask[:, d] & (cy.mem > 0), d].max(initial=-np.inf) <= caps[d] + 1e-9 for d in range(cy.mask.shape[1]))
            if fits:
                return sigma, float(t)
        t += step
    return None


def modulo_backtrack(
    cy: Cyclic, inst: PipelineInstance, offsets: int, period: int, node_limit: int = 8_000, deadline: float | None = None
) -> tuple[np.ndarray | None, int]:
    """Integral data, integer period: depth-first modulo scheduling with backtracking.

    Blocks in topological order (copies in order, each copy's first block no earlier
    than the previous copy's), each at its earliest start after its dependencies plus a
    delay in ``[0, period)`` whose residues are free on all its devices (Python-int
    reservation masks), the flat schedule within ``offsets`` periods, steady-state memory
    checked on complete schedules. The first branch is Rau's greedy placement; at most
    ``node_limit`` placements are tried (fewer when the ``time.perf_counter()`` deadline
    passes). Returns flat starts (seconds) or None, and the number of placements tried."""
    n, nd, t = cy.n, cy.mask.shape[1], period
    nb = inst.n_blocks
    order = np.concatenate([u * nb + inst.topo_order for u in range(cy.unfold)]).tolist()
    preds: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b, g in zip(cy.src.tolist(), cy.dst.tolist(), np.round(cy.gap).astype(np.int64).tolist()):
        preds[b].append((a, g))
    first = int(inst.topo_order[0])
    for u in range(1, cy.unfold):  # copy order (symmetry): as the MILP's copy-order rows
        preds[u * nb + first].append(((u - 1) * nb + first, 0))
    dur = np.round(cy.dur).astype(np.int64).tolist()
    if max(dur, default=0) > t or t > MAX_PERIOD_UNITS:
        return None, 0
    devs = [np.flatnonzero(cy.mask[b]).tolist() for b in range(n)]
    full = (1 << t) - 1
    span = [((1 << d) - 1) for d in dur]
    caps = inst.capacity
    tail = flat_tails(cy)
    last_start = (offsets * t - np.round(tail).astype(np.int64)).tolist()  # the rest must fit
    occ = [0] * nd
    sigma = [0] * n
    budget = [node_limit]

    # steady-state memory of a device is known once its last memory block is placed
    position = {b: i for i, b in enumerate(order)}
    checks: list[list[int]] = [[] for _ in range(n)]
    holders: list[list[tuple[int, float]]] = []
    for d in range(nd):
        on = [b for b in range(n) if cy.mask[b, d] and cy.mem[b] != 0]
        holders.append([(b, float(cy.mem[b])) for b in on])
        if on and math.isfinite(caps[d]) and any(cy.mem[b] > 0 for b in on):
            checks[max(position[b] for b in on)].append(d)

    def fits(d: int) -> bool:
        """`steady_memory` of one device in plain Python (integers; called at every placement)."""
        for a, mu_a in holders[d]:
            if mu_a > 0:
                end = sigma[a] + dur[a]
                if mu_a + sum(mu * -((sigma[b] - end) // t) for b, mu in holders[d] if b != a) > caps[d] + 1e-9:
                    return False
        return True

    def place(i: int, slack: int) -> bool:
        """Place blocks i.. taking the j-th free start at a cost of j discrepancies."""
        if i == n:
            return True
        b = order[i]
        est = max((sigma[a] + g for a, g in preds[b]), default=0)
        j = 0
        for x in range(est, min(est + t, last_start[b] + 1)):
            r = x % t
            m = ((span[b] << r) | (span[b] >> (t - r))) & full
            if any(occ[d] & m for d in devs[b]):
                continue
            budget[0] -= 1
            if budget[0] < 0 or (deadline is not None and budget[0] % 256 == 0 and time.perf_counter() > deadline):
                budget[0] = min(budget[0], -1)
                return False
            for d in devs[b]:
                occ[d] |= m
            sigma[b] = x
            ok = all(fits(d) for d in checks[i]) and place(i + 1, slack - j)
            for d in devs[b]:
                occ[d] &= ~m
            if ok:
                return True
            j += 1
            if j > slack or budget[0] < 0:
                return False
        return False

    for discrepancies in range(n + 1):  # limited discrepancy search (Harvey & Ginsberg 1995)
        if place(0, discrepancies):
            return np.asarray(sigma, dtype=float), node_limit - budget[0]
        if budget[0] < 0:
            break
    return None, node_limit - max(budget[0], 0)
