"""Tessel's repetend search as MILPs (Lin et al., HPCA 2024), in modulo-scheduling form.

A *repetend* holds one instance of every block (``unfold`` instances with ``unfold`` > 1),
drawn from different micro-batches; repeated every ``T`` seconds it forms the steady
state. We write it as a flat schedule of one micro-batch, ``sigma_b`` (seconds), executed
for micro-batch m at ``sigma_b + m T`` (software pipelining / modulo scheduling; Tessel's
micro-batch offset of block b is ``floor(sigma_b / T)``). Divided by T (``theta = sigma /
T``, ``rate = 1 / T``) every constraint is linear, with no big-M (Hanen & Munier 1995):

* dependencies: ``theta_v - theta_u >= (d_u + delay) rate``;
* no overlap on a device across period boundaries: an integer winding number ``q_ab`` per
  pair of blocks sharing a device, ``theta_b - theta_a + q_ab`` in ``[d_a rate, 1 - d_b
  rate]``, consistent on every triple of blocks of one device;
* steady-state memory at the start of every allocating block a:
  ``mu_a + sum_b mu_b q_ab <= capacity`` (b has ``-q_ab`` more instances in flight than
  the ones counted for a; every device frees what a micro-batch allocates);
* the flat schedule spans at most K periods: ``theta_b + d_b rate <= K``;
* maximize the rate (minimize T); then, T fixed, minimize the flat length.

The search: modulo scheduling (Rau 1994; for integral data with limited-discrepancy
backtracking) gives an incumbent for K from the critical path doubling up to what memory
allows (Tessel's repetends hold at most that many micro-batches), stopping at the resource
bound ``max_d work_d``. At the largest K the incumbent is proven least: for integral data
by fixed-period feasibility MILPs at the largest period below it that any repetend can
have (the least period is a cycle ratio L / h with bounded integers, and feasibility is
monotone in T), otherwise (or when a probe is undecided) by the rate MILP. The search
never sees N.

The repetend is then unrolled to N micro-batches; the warm-up (the partial periods before
the first full repetend) and the cool-down (after the last) are re-solved as makespan
MILPs over their own operations (`milp.OpProblem`) against the fixed steady state, and
the result is retimed to exact earliest starts. When N is so small that the schedule has
fewer full repetends than warm-up periods, the whole schedule is completed by the
whole-schedule MILP instead (bounded size: about 2 K micro-batches), warm-started from the
better of the unrolled repetend and the classic schedules.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError
from distplan.formulations.blocks.scheduling import cyclic_no_overlap, cyclic_precedence, modulo_prefix, winding_triangles
from distplan.formulations.model import Model
from distplan.formulations.pipeline.baselines import best_baseline
from distplan.formulations.pipeline.bounds import pipeline_bounds
from distplan.formulations.pipeline.common import (
    OpArcs,
    asap,
    block_depth,
    check_capacity,
    dependency_arcs,
    integral_data,
    orders_from_starts,
    retime,
)
from distplan.formulations.pipeline.compaction import best_candidate, guided
from distplan.formulations.pipeline.milp import OpProblem, solve_op_problem
from distplan.formulations.registry import Outcome, RunContext, build_model
from distplan.models.pipeline import PipelineInstance, make_plan

DEFAULTS: dict[str, Any] = {
    "offsets": None,  # periods one micro-batch may span (None: from the critical path)
    "unfold": 1,  # micro-batches per repetend
    "phase_time_limit": 0.3,  # seconds for each warm-up / cool-down MILP (0: none; small N: whole-schedule MILP, at least 1 s)
    "phase_model": "disjunctive",  # warm-up / cool-down model: auto | disjunctive | time_indexed
    "min_flat_length": True,  # second solve: shortest flat schedule at the optimal period
    "flat_time_limit": 0.25,  # seconds for that second solve
    "probe_time_limit": 1.0,  # seconds per fixed-period feasibility probe
    "period_proof": "auto",  # least period proven by: auto (candidate periods for integral data) | rate_milp
    "baselines": True,  # also evaluate the classic schedules that apply and keep the best plan
    "search_time_limit": None,  # seconds for the repetend search in a tessel run (None: until the period is proven; a budget weakens the heuristics)
}


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


def _longest(cy: Cyclic) -> np.ndarray:
    """(n, n) longest dependency distance sigma_j - sigma_i >= dist[i, j] (-inf if none)."""
    n = cy.n
    dist = np.full((n, n), -np.inf)
    np.fill_diagonal(dist, 0.0)
    for _ in range(n):
        changed = False
        for a, b, g in zip(cy.src.tolist(), cy.dst.tolist(), cy.gap.tolist()):
            cand = dist[:, a] + g
            better = cand > dist[:, b]
            if better.any():
                dist[better, b] = cand[better]
                changed = True
        if not changed:
            break
    return dist


# -- model blocks ---------------------------------------------------------------------------


def _steady_memory(cy: Cyclic, sigma: np.ndarray, period: float) -> np.ndarray:
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


def modulo_heuristic(
    cy: Cyclic, inst: PipelineInstance, offsets: int, t_lb: float, t_ub: float, nodes: int = 24_000, deadline: float | None = None
) -> tuple[np.ndarray, float] | None:
    """Iterative modulo scheduling (Rau, MICRO 1994) without backtracking: for periods
    T = t_lb, t_lb + step, ..., place blocks in topological order at the earliest time
    after their dependencies whose modulo-T interval is free on all their devices; keep
    the first T whose flat schedule spans at most ``offsets`` periods and whose
    steady-state memory fits. Integral data: `modulo_backtrack` instead, at most ``nodes``
    placements in all (a third of them for one period). Returns (sigma, T) or None."""
    integral = integral_data(inst)
    step = 1.0 if integral else max(t_lb / 64.0, 1e-9)
    t = math.ceil(t_lb - 1e-9) if integral else t_lb
    if integral:
        budget = nodes
        while t <= t_ub + 1e-9:
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
    while t <= t_ub + eps:
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
            mem = _steady_memory(cy, sigma, t)
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
    if max(dur, default=0) > t:
        return None, 0
    devs = [np.flatnonzero(cy.mask[b]).tolist() for b in range(n)]
    full = (1 << t) - 1
    span = [((1 << d) - 1) for d in dur]
    caps = inst.capacity
    dist = _longest(cy)
    tail = np.where(np.isfinite(dist), dist + cy.dur[None, :], -np.inf).max(axis=1)
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
        """`_steady_memory` of one device in plain Python (integers; called at every placement)."""
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


def rep_prepare(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Repetend blocks, period bounds (a heuristic repetend gives the upper bound),
    offsets, and the range of the winding number of every pair of blocks on a device."""
    params = data["params"]
    unfold = int(params.get("unfold", 1))
    if unfold < 1:
        raise InputError("params.unfold", f"expected a positive integer, got {unfold!r}")
    cy = cyclic_blocks(inst, unfold)
    data["cyclic"] = cy
    capped = np.isfinite(inst.capacity)
    net = inst.memory @ inst.device_mask
    bad = np.flatnonzero(capped & (np.abs(net) > 1e-9 * (1 + np.abs(inst.memory).sum())))
    if bad.size:
        d = int(bad[0])
        raise InputError(
            "blocks", f"{inst.name}: a micro-batch leaves {net[d]:.6g} memory on device {inst.devices[d]}",
            "tessel's steady state needs every device to free what a micro-batch allocates (or no capacity)",
        )
    work = cy.dur @ cy.mask
    t_lb = float(max(work.max(), cy.dur.max()))
    _, _, lag = inst.edges
    t_ub = max(float(unfold * (inst.duration.sum() + lag.sum())), t_lb)
    dist = _longest(cy)
    crit = float(np.max(block_depth(inst) + inst.duration))
    k = params.get("offsets")
    k = int(k) if k is not None else int(min(max(2, math.ceil(crit / t_lb) + 2), 2 * inst.n_blocks + 2))
    if k < 1:
        raise InputError("params.offsets", f"expected a positive integer, got {k!r}")
    fixed = params.get("_t")
    if fixed is None:
        below = params.get("_below")  # only periods below an incumbent's are of interest
        t_hi = t_ub if below is None else min(t_ub, math.ceil(below - 1e-9) - 1)
        found = modulo_heuristic(cy, inst, k, t_lb, t_hi, deadline=params.get("_deadline"))
        if found:
            data["heuristic"] = found
            t_ub = max(found[1], t_lb)
    else:
        t_lb = t_ub = float(fixed)
    preds = np.zeros(cy.n, dtype=bool)
    preds[cy.dst] = True
    roots = np.flatnonzero(~preds)
    share = (cy.mask.astype(np.int64) @ cy.mask.T.astype(np.int64)) > 0
    ia, ib = np.nonzero(np.triu(share, 1))
    q_lo = np.full(ia.size, -k + 1)
    q_hi = np.full(ia.size, k)
    after = np.isfinite(dist[ia, ib])  # b after a: sigma_b - sigma_a > 0, so q <= 0
    before = np.isfinite(dist[ib, ia])  # a after b: q >= 1
    q_hi[after] = 0
    q_lo[before] = 1
    data.update(t_lb=t_lb, t_ub=t_ub, offsets=k, dist=dist, pair_a=ia, pair_b=ib, q_lo=q_lo, q_hi=q_hi, anchor=int(roots[0]) if roots.size == 1 else -1)


def rep_variables(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """theta = flat start / period (periods), rho = 1 / period (1/seconds)."""
    cy: Cyclic = data["cyclic"]
    k = data["offsets"]
    hi = np.full(cy.n, float(k))
    if data["anchor"] >= 0:
        hi[data["anchor"]] = 0.0
    data["theta"] = model.add_vars("theta", cy.n, lb=0.0, ub=hi)
    data["rate"] = model.add_vars("rate", 1, lb=1.0 / data["t_ub"], ub=1.0 / data["t_lb"])


def rep_dependencies(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Dependencies and the flat span (at most `offsets` periods), in period units."""
    cy: Cyclic = data["cyclic"]
    theta, rate = data["theta"], data["rate"]
    cyclic_precedence(model, theta, rate, cy.src, cy.dst, cy.gap, "flat-dependencies")
    zero = np.zeros(cy.n, dtype=np.int64)
    model.add_constraints("flat-length", theta + rate[zero] * cy.dur <= float(data["offsets"]))
    if cy.unfold > 1:  # identical copies keep their order (symmetry)
        nb = inst.n_blocks
        first = int(inst.topo_order[0])
        idx = np.arange(cy.unfold - 1) * nb + first
        model.add_constraints("copy-order", theta[idx + nb] - theta[idx] >= 0.0)


def rep_no_overlap(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Integer winding number per pair of blocks sharing a device, and their consistency
    on every triple of blocks of one device."""
    cy: Cyclic = data["cyclic"]
    a, b = data["pair_a"], data["pair_b"]
    data["wind"] = cyclic_no_overlap(model, data["theta"], data["rate"], a, b, cy.dur[a], cy.dur[b], data["q_lo"], data["q_hi"], "modulo")
    index = {(int(x), int(y)): j for j, (x, y) in enumerate(zip(a.tolist(), b.tolist()))}
    triples: set[tuple[int, int, int]] = set()
    for d in range(cy.mask.shape[1]):
        on = np.flatnonzero(cy.mask[:, d]).tolist()
        for i, x in enumerate(on):
            for j in range(i + 1, len(on)):
                for m in range(j + 1, len(on)):
                    triples.add((x, on[j], on[m]))
    if triples:
        tri = np.array(sorted(triples), dtype=np.int64)
        ab = np.array([index[(x, y)] for x, y, _ in tri.tolist()])
        bc = np.array([index[(y, z)] for _, y, z in tri.tolist()])
        ac = np.array([index[(x, z)] for x, _, z in tri.tolist()])
        winding_triangles(model, data["wind"], ab, bc, ac, "winding-triangle")


def rep_memory(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Steady-state memory at every allocating block: mu_a + sum_b mu_b q_ab <= cap."""
    cy: Cyclic = data["cyclic"]
    a, b = data["pair_a"], data["pair_b"]
    cap = inst.capacity
    consts, caps, rows, cols, coefs = [], [], [], [], []
    nrow = 0
    for d in range(inst.n_devices):
        if not math.isfinite(cap[d]):
            continue
        for t in np.flatnonzero(cy.mask[:, d] & (cy.mem > 0)).tolist():
            # pair stored (t, x): q_tx = q; stored (x, t): q_tx = 1 - q
            ja = np.flatnonzero((a == t) & cy.mask[b, d] & (cy.mem[b] != 0))
            jb = np.flatnonzero((b == t) & cy.mask[a, d] & (cy.mem[a] != 0))
            cols.append(np.concatenate([ja, jb]))
            coefs.append(np.concatenate([cy.mem[b[ja]], -cy.mem[a[jb]]]))
            rows.append(np.full(ja.size + jb.size, nrow))
            consts.append(cy.mem[t] + cy.mem[a[jb]].sum())
            caps.append(cap[d])
            nrow += 1
    if nrow == 0:
        return
    modulo_prefix(
        model, data["wind"], np.asarray(consts), np.asarray(caps), np.concatenate(rows), np.concatenate(cols), np.concatenate(coefs), "steady-memory"
    )


def rep_objective(model: Model, inst: PipelineInstance, data: dict[str, Any]) -> None:
    """Maximize the rate 1/T (minimize the period); with the period fixed, minimize the
    flat length (periods)."""
    if data["params"].get("_t") is None:
        model.maximize(data["rate"])
        return
    if data["params"].get("_feasibility"):
        return
    cy: Cyclic = data["cyclic"]
    length = model.add_vars("flat-length", (), lb=0.0)
    model.add_constraints("flat-length-epigraph", data["theta"] + data["rate"][np.zeros(cy.n, dtype=np.int64)] * cy.dur - length <= 0.0)
    model.minimize(length)


REPETEND_BLOCKS = (rep_prepare, rep_variables, rep_dependencies, rep_no_overlap, rep_memory, rep_objective)


@dataclass
class Repetend:
    """A solved repetend: flat starts (seconds) of the cyclic blocks and the period."""

    sigma: np.ndarray
    period: float
    period_bound: float | None
    proven: bool
    offsets: int
    unfold: int
    search_seconds: float


def _warm(model: Model, data: dict[str, Any], sigma: np.ndarray, period: float) -> np.ndarray:
    cy: Cyclic = data["cyclic"]
    a, b = data["pair_a"], data["pair_b"]
    q = np.ceil((sigma[a] + cy.dur[a] - sigma[b]) / period - 1e-9)
    vals: dict[str, Any] = {"theta": sigma / period, "rate": [1.0 / period], "modulo-wind": q}
    if "flat-length" in model.var_blocks:
        vals["flat-length"] = float(np.max((sigma + cy.dur) / period))
    return model.vector(vals)


def _sub_ctx(ctx: RunContext, limit: float, share: float = 1 / 3) -> RunContext:
    """A context for one auxiliary solve: at most ``limit`` seconds (and ``share`` of what
    remains), recording into the run's solver results."""
    remaining = ctx.remaining_time()
    lim = limit if remaining is None else max(0.05, min(limit, remaining * share))
    sub = RunContext(ctx.backend, ctx.options.with_(time_limit=lim), dict(ctx.params))
    sub.solver_results = ctx.solver_results
    return sub


def probe_period(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], period: float) -> tuple[np.ndarray | None, bool]:
    """Fixed-period feasibility MILP with the offsets in ``params`` (at most
    ``probe_time_limit`` seconds): (flat starts in seconds, or None; True when proven
    infeasible). None and False: undecided within the time limit."""
    mp, _ = build_model("tessel-probe", REPETEND_BLOCKS, inst, {**params, "_t": float(period), "_feasibility": True})
    rp = _sub_ctx(ctx, float(params.get("probe_time_limit", DEFAULTS["probe_time_limit"]))).solve_model(mp)
    if rp.values is not None:
        return np.asarray(rp.values_by_block["theta"], dtype=float) * float(period), False
    return None, rp.termination.value in ("infeasible", "infeasible_or_unbounded")


def offsets_range(inst: PipelineInstance, unfold: int) -> tuple[int, int]:
    """(first, largest) number of periods one micro-batch's flat schedule may span:
    first from the critical path (``ceil(path / T_lb) + 2``); largest from memory (the
    micro-batches a device can hold, + 1; Tessel's repetends hold at most that many), or
    four times the first without capacities."""
    work = unfold * (inst.duration @ inst.device_mask)
    t_lb = float(max(work.max(), inst.duration.max()))
    crit = float(np.max(block_depth(inst) + inst.duration))
    first = max(2, math.ceil(crit / t_lb) + 2)
    alloc = np.clip(inst.memory, 0, None) @ inst.device_mask
    capped = np.isfinite(inst.capacity) & (alloc > 0)
    if capped.any():
        largest = int(np.max(np.floor(inst.capacity[capped] / alloc[capped]))) + 1
    else:
        largest = 4 * first
    hard = 2 * inst.n_blocks * unfold + 2
    first = min(first, hard)
    return first, max(first, min(largest, hard))


def search_repetend(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> Repetend:
    """Minimize the period over repetends spanning at most K periods, for K from the
    critical path doubling up to what memory allows (stopping at the resource bound, which
    no K beats); then, time-limited, minimize the flat length at the best period."""
    t0 = time.perf_counter()
    if params.get("offsets") is not None:
        ks = [int(params["offsets"])]
    else:
        first, largest = offsets_range(inst, int(params.get("unfold", 1)))
        ks = [first]
        while ks[-1] < largest:
            ks.append(min(largest, 2 * ks[-1]))
    best: tuple[np.ndarray, float, float | None, bool, int, dict[str, Any]] | None = None
    reached: list[tuple[int, float, np.ndarray]] = []  # (K, least period found, its flat starts)
    for i, k in enumerate(ks):
        last = i == len(ks) - 1
        # the best repetend so far is feasible for a larger K: it warm-starts the next search
        best = _search_once(inst, ctx, {**params, "offsets": k}, None if best is None else (best[0], best[1]), prove=last)
        reached.append((k, best[1], best[0]))
        if best[1] <= best[5]["t_lb"] * (1 + 1e-9) + 1e-12:
            best = (best[0], best[1], best[5]["t_lb"], True, best[4], best[5])
            break
    assert best is not None
    sigma, period, bound, proven, k, data = best
    sigma, k = _fewest_offsets(inst, ctx, params, reached, period, sigma, k)
    if params.get("min_flat_length", True):
        t1 = time.perf_counter()
        m2, d2 = build_model("tessel-flat", REPETEND_BLOCKS, inst, {**params, "offsets": k, "_t": period})
        r2 = _sub_ctx(ctx, float(params.get("flat_time_limit", 0.5))).solve_model(m2, warm_start=_warm(m2, d2, sigma, period), build_seconds=time.perf_counter() - t1)
        if r2.values is not None:
            sigma = np.asarray(r2.values_by_block["theta"], dtype=float) * period
    sigma = sigma - sigma.min()
    if integral_data(inst) and float(period).is_integer() and np.all(np.abs(sigma - np.round(sigma)) < 1e-6):
        sigma = np.round(sigma)  # remove the solver's tolerance from integral times
    return Repetend(sigma, period, bound, proven, int(k), int(data["cyclic"].unfold), time.perf_counter() - t0)


def _fewest_offsets(
    inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], reached: list[tuple[int, float, np.ndarray]], period: float, sigma: np.ndarray, k: int
) -> tuple[np.ndarray, int]:
    """The same period with the fewest periods per micro-batch: bisection with
    fixed-period feasibility probes between the largest K tried that missed the period and
    the smallest that reached it. Fewer micro-batches in flight give shorter warm-up and
    cool-down phases (Tessel likewise searches its repetends with the fewest micro-batches)."""
    tol = 1e-9 * max(1.0, period)
    hits = [(kk, sg) for kk, pp, sg in reached if pp <= period + tol]
    misses = [kk for kk, pp, _ in reached if pp > period + tol]
    if not hits:
        return sigma, k
    hi, best_sigma = min(hits, key=lambda h: h[0])
    lo = max((kk for kk in misses if kk < hi), default=hi)
    quick = integral_data(inst) and float(period).is_integer()
    cy = cyclic_blocks(inst, int(params.get("unfold", 1)))
    while hi - lo > 1:
        mid = (lo + hi) // 2
        found = modulo_backtrack(cy, inst, mid, int(period), deadline=params.get("_deadline"))[0] if quick else None
        if found is not None:
            hi, best_sigma = mid, found
            continue
        sigma_mid, infeasible = probe_period(inst, ctx, {**params, "offsets": mid}, period)
        if sigma_mid is not None:
            hi, best_sigma = mid, sigma_mid
        elif infeasible:
            lo = mid
        else:
            break  # undecided within the probe's time limit: keep what is known
    return np.asarray(best_sigma), int(hi)


def _search_once(
    inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], incumbent: tuple[np.ndarray, float] | None = None, prove: bool = True
) -> tuple[np.ndarray, float, float | None, bool, int, dict[str, Any]]:
    """Least period with a fixed number of offsets: the backtracking heuristic (below the
    incumbent of a smaller K, if any); without ``prove`` that is all. With ``prove``:
    integer-period probes when there is no incumbent yet, then (integral data) the
    candidate-period proof, else the rate MILP; nothing once the resource bound is met."""
    t0 = time.perf_counter()
    below = None if incumbent is None or not integral_data(inst) else incumbent[1]
    model, data = build_model("tessel-repetend", REPETEND_BLOCKS, inst, {**params, "_t": None, "_below": below})
    build_seconds = time.perf_counter() - t0
    heur = data.get("heuristic")
    if incumbent is not None and (not heur or incumbent[1] <= heur[1]):
        heur = incumbent
    t_lb = float(data["t_lb"])
    if incumbent is None and prove and heur and heur[1] > t_lb * (1 + 1e-9) + 1e-12 and integral_data(inst):
        # probe integer periods below the heuristic's with fixed-period feasibility MILPs
        # (feasibility is monotone in the period: a T-feasible repetend is T'-feasible for
        # T' > T); the last one below it is left to the candidate-period proof
        for t_try in range(math.ceil(t_lb - 1e-9), math.ceil(heur[1] - 1e-9) - 1):
            sigma_try, infeasible = probe_period(inst, ctx, params, float(t_try))
            if sigma_try is not None:
                heur = (sigma_try, float(t_try))
                break
            if not infeasible:
                break
    if heur and heur[1] <= t_lb * (1 + 1e-9) + 1e-12:
        return np.asarray(heur[0]), float(heur[1]), t_lb, True, int(data["offsets"]), data
    if not prove and heur:
        return np.asarray(heur[0]), float(heur[1]), None, False, int(data["offsets"]), data
    proof = params.get("period_proof", "auto")
    if proof not in ("auto", "rate_milp"):
        raise InputError("params.period_proof", f"expected 'auto' or 'rate_milp', got {proof!r}")
    if heur and proof == "auto" and integral_data(inst):
        heur, proven = _prove_by_candidates(inst, ctx, params, data, heur)
        if proven:
            return np.asarray(heur[0]), float(heur[1]), float(heur[1]), True, int(data["offsets"]), data
    warm = _warm(model, data, heur[0], heur[1]) if heur else None
    remaining = ctx.remaining_time()
    if remaining is not None and heur and params.get("_deadline") is None:  # leave the warm-up and cool-down their time
        reserve = 2 * float(params.get("phase_time_limit", DEFAULTS["phase_time_limit"])) + float(params.get("flat_time_limit", DEFAULTS["flat_time_limit"]))
        ctx = _sub_ctx(ctx, remaining - reserve, share=1.0)
    res = ctx.solve_model(model, warm_start=warm, build_seconds=build_seconds)
    if res.values is None and heur and res.termination.value not in ("infeasible", "infeasible_or_unbounded"):
        bound = None if res.bound is None or res.bound <= 0 else 1.0 / res.bound  # rate bound: a period bound
        return np.asarray(heur[0]), float(heur[1]), bound, False, int(data["offsets"]), data
    if res.values is None:
        if res.termination.value in ("infeasible", "infeasible_or_unbounded"):
            raise InfeasibleError(
                f"{inst.name}: no repetend with at most {data['offsets']} micro-batch offsets fits the memory capacity",
                details={"offsets": data["offsets"]},
            )
        raise InfeasibleError(f"{inst.name}: the repetend search found no solution ({res.termination.value})", details={})
    period = 1.0 / float(res.values_by_block["rate"][0])
    if integral_data(inst) and abs(period - round(period)) < 1e-6:
        period = float(round(period))
    sigma = np.asarray(res.values_by_block["theta"], dtype=float) * period
    bound = None if res.bound is None or res.bound <= 0 else 1.0 / res.bound
    return sigma, period, bound, res.termination.value == "optimal", int(data["offsets"]), data


def candidate_periods_below(cy: Cyclic, t_lb: float, upper: Fraction) -> Fraction | None:
    """The largest period below ``upper`` that a repetend of integral data can have.

    With the winding numbers fixed, the constraints in ``theta`` are difference
    constraints with lengths ``l * rate`` and integer heights (a dependency: length
    d_u + delay, height 0; no overlap: length d_a, height -q or q - 1; the flat length:
    length d_b, height K), so the least period is ``max(t_lb, L / h)`` over the cycles,
    with integers ``L <= L_max`` (one outgoing arc per block: its duration plus its
    largest outgoing delay) and ``1 <= h <= L_max / t_lb``. The largest such value below
    ``upper`` is ``max_h (ceil(upper h) - 1) / h`` (or ``t_lb``)."""
    out_delay = np.zeros(cy.n)
    np.maximum.at(out_delay, cy.src, cy.gap - cy.dur[cy.src])
    l_max = int(round(float((cy.dur + out_delay).sum())))
    h_max = max(1, int(l_max // max(t_lb, 1e-12)))
    lb = Fraction(round(t_lb))
    best: Fraction | None = lb if lb < upper else None
    for h in range(1, h_max + 1):
        cand = Fraction(math.ceil(upper * h) - 1, h)
        if lb <= cand < upper and (best is None or cand > best):
            best = cand
    return best


def _prove_by_candidates(
    inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], data: dict[str, Any], heur: tuple[np.ndarray, float]
) -> tuple[tuple[np.ndarray, float], bool]:
    """Integral data: prove the incumbent period least by one fixed-period feasibility
    probe at the largest period below it that a repetend can have
    (`candidate_periods_below`; feasibility is monotone in the period: scaling ``rate``
    down keeps every constraint in ``theta`` satisfied with the same winding numbers).
    A feasible probe (the incumbent was not least) becomes the incumbent and leaves the
    rest to the rate MILP, as does an undecided one."""
    cy: Cyclic = data["cyclic"]
    cand = candidate_periods_below(cy, float(data["t_lb"]), Fraction(heur[1]).limit_denominator(10**6))
    if cand is None:
        return heur, True
    sigma, infeasible = probe_period(inst, ctx, params, float(cand))
    if sigma is not None:
        return (sigma, float(cand)), False
    return heur, infeasible


def naive_unroll(inst: PipelineInstance, rep: Repetend) -> np.ndarray:
    """(B, N) start times: copy u of block b for super-step M runs micro-batch U M + u."""
    nb, n, u = inst.n_blocks, inst.micro_batches, rep.unfold
    start = np.zeros((nb, n))
    for m in range(n):
        big, c = divmod(m, u)
        start[:, m] = rep.sigma[c * nb : (c + 1) * nb] + big * rep.period
    return start


def _phase_problem(
    inst: PipelineInstance, start: np.ndarray, free: np.ndarray, kind: str, horizon_extra: float
) -> tuple[OpProblem, np.ndarray, float]:
    """The MILP of the free operations (warm-up or cool-down) against the fixed rest."""
    n = inst.micro_batches
    ops = np.flatnonzero(free.reshape(-1))
    local = -np.ones(inst.n_blocks * n, dtype=np.int64)
    local[ops] = np.arange(ops.size)
    flat = start.reshape(-1)
    dur_op = np.repeat(inst.duration, n)
    mask_op = np.repeat(inst.device_mask, n, axis=0)
    mem_op = np.repeat(inst.memory, n)
    arcs = dependency_arcs(inst)
    b = np.repeat(np.arange(inst.n_blocks), n - 1)
    m = np.tile(np.arange(n - 1), inst.n_blocks)
    src = np.concatenate([arcs.src, b * n + m])
    dst = np.concatenate([arcs.dst, b * n + m + 1])
    gap = np.concatenate([arcs.gap, inst.duration[b]])
    inside = (local[src] >= 0) & (local[dst] >= 0)
    sub = OpArcs(local[src[inside]], local[dst[inside]], gap[inside])
    fixed_ops = np.flatnonzero(~free.reshape(-1))
    nd = inst.n_devices
    if kind == "warmup":
        # free -> fixed: s_free + gap <= base + shift; device: free ends before the first fixed op
        cross = (local[src] >= 0) & (local[dst] < 0)
        d_ops = [local[src[cross]]]
        d_gap = [gap[cross]]
        d_base = [flat[dst[cross]]]
        for d in range(nd):
            fd = fixed_ops[mask_op[fixed_ops, d]]
            vd = ops[mask_op[ops, d]]
            if fd.size and vd.size:
                d_ops.append(local[vd])
                d_gap.append(dur_op[vd])
                d_base.append(np.full(vd.size, flat[fd].min()))
        base = np.concatenate(d_base)
        horizon = float(base.max())
        prob = OpProblem(
            name=f"{inst.name}-warmup",
            dur=dur_op[ops],
            mask=mask_op[ops],
            mem=mem_op[ops],
            arcs=sub,
            capacity=inst.capacity,
            horizon=horizon,
            objective="shift",
            deadline_ops=np.concatenate(d_ops),
            deadline_gap=np.concatenate(d_gap),
            deadline_base=base,
            integral=False,
            block_of=ops // n,
            block_reach=inst.reach,
        )
        return prob, ops, 0.0
    # cool-down: release times from the fixed part; memory held after it
    release = np.zeros(ops.size)
    cross = (local[src] < 0) & (local[dst] >= 0)
    np.maximum.at(release, local[dst[cross]], flat[src[cross]] + gap[cross])
    init = np.zeros(nd)
    for d in range(nd):
        fd = fixed_ops[mask_op[fixed_ops, d]]
        init[d] = mem_op[fd].sum()
        vd = ops[mask_op[ops, d]]
        if fd.size and vd.size:
            release[local[vd]] = np.maximum(release[local[vd]], (flat[fd] + dur_op[fd]).max())
    t_shift = float(release.min()) if release.size else 0.0
    horizon = float((flat[ops] + dur_op[ops]).max()) - t_shift + horizon_extra
    prob = OpProblem(
        name=f"{inst.name}-cooldown",
        dur=dur_op[ops],
        mask=mask_op[ops],
        mem=mem_op[ops],
        arcs=sub,
        capacity=inst.capacity,
        horizon=horizon,
        objective="makespan",
        release=release - t_shift,
        init_mem=init,
        integral=False,
        block_of=ops // n,
        block_reach=inst.reach,
    )
    return prob, ops, t_shift


def complete_phases(
    inst: PipelineInstance, rep: Repetend, ctx: RunContext, limit: float, model: str = "auto", seed: tuple[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    """Unroll, then re-solve warm-up and cool-down as MILPs against the steady state
    (for small N the whole schedule, warm-started from ``seed`` when it is better)."""
    n, nb, u = inst.micro_batches, inst.n_blocks, rep.unfold
    start = naive_unroll(inst, rep)
    info: dict[str, Any] = {}
    # period index of every operation in the naive unroll
    offs = np.floor((rep.sigma + 1e-9 * max(1.0, rep.period)) / rep.period).astype(np.int64)  # per cyclic block
    k_eff = int(offs.max()) + 1
    steps = (n + u - 1) // u
    period_of = np.zeros((nb, n), dtype=np.int64)
    for m in range(n):
        big, c = divmod(m, u)
        period_of[:, m] = big + offs[c * nb : (c + 1) * nb]
    first_full, last_full = k_eff - 1, steps - 1
    if last_full - first_full + 1 < first_full:
        # fewer full repetends than warm-up periods: warm-up and cool-down are (nearly) the
        # whole schedule, so complete it with the whole-schedule MILP (its size is bounded
        # by 2 x offsets micro-batches), warm-started from the better of the unrolled
        # repetend and the classic schedules
        return _complete_whole(inst, start, ctx, max(limit, 1.0), model, info, seed)
    warm = period_of < first_full
    if warm.any():
        prob, ops, _ = _phase_problem(inst, start, warm, "warmup", 0.0)
        s, res, _ = solve_op_problem(prob, _sub_ctx(ctx, limit), start.reshape(-1)[ops], model)
        if s is not None:
            shift = float(np.max(s[prob.deadline_ops] + prob.deadline_gap - prob.deadline_base)) if prob.deadline_ops.size else 0.0
            shift = min(shift, 0.0)
            flat = start.reshape(-1).copy()
            fixed = ~warm.reshape(-1)
            flat[fixed] += shift
            flat[ops] = s
            start = flat.reshape(nb, n)
            info["warmup_shift"] = shift
            info["warmup_termination"] = res.termination.value
    cool = period_of > last_full
    if cool.any():
        prob, ops, t0 = _phase_problem(inst, start, cool, "cooldown", 0.0)
        s, res, _ = solve_op_problem(prob, _sub_ctx(ctx, limit), start.reshape(-1)[ops] - t0, model)
        if s is not None:
            flat = start.reshape(-1).copy()
            flat[ops] = s + t0
            start = flat.reshape(nb, n)
            info["cooldown_termination"] = res.termination.value
    return start, info


def _complete_whole(
    inst: PipelineInstance, start: np.ndarray, ctx: RunContext, limit: float, model: str, info: dict[str, Any], seed: tuple[str, np.ndarray] | None = None
) -> tuple[np.ndarray, dict[str, Any]]:
    from distplan.formulations.pipeline.milp import full_problem, serial_horizon
    from distplan.models.pipeline import evaluate

    unrolled = asap(inst, orders_from_starts(inst, start))
    best, source = unrolled, "unrolled repetend"
    found = best_baseline(inst)
    if found is not None and evaluate(inst, found[1]).objective < _objective(inst, unrolled) - 1e-9:
        best, source = found[1].start, found[0]
    if seed is not None and _objective(inst, seed[1]) < _objective(inst, best) - 1e-9:
        best, source = seed[1], seed[0]
    value = _objective(inst, best)
    prob = full_problem(inst, serial_horizon(inst))
    if inst.objective == "makespan":
        prob.horizon = value * (1 + 1e-9) + 1e-9
    else:
        prob.span_ub = value * (1 + 1e-9) + 1e-9
    s, res, _ = solve_op_problem(prob, _sub_ctx(ctx, limit), best.reshape(-1), model if model != "disjunctive" else "auto")
    info.update(phases="whole-schedule MILP", completion_warm_start=source, completion_termination=res.termination.value)
    if s is not None and _objective(inst, s.reshape(best.shape)) <= value + 1e-9:
        return s.reshape(best.shape), info
    return best, info


def run_tessel(inst: PipelineInstance, ctx: RunContext) -> Outcome:
    """Search the repetend (independent of N), unroll it, complete warm-up and cool-down.

    The completion keeps the best (by the evaluator) of: the naive unroll; list schedules
    of the whole run guided by the unrolled repetend's start times (`compaction`: warm-up
    and cool-down compacted around the steady state, deferred W passes filling the idle
    time), within the capacity and within the repetend's own steady-state peak; the
    warm-up/cool-down MILPs (or, for small N, the whole-schedule MILP warm-started from
    the best so far); and the classic schedules that apply (``baselines``: a guarantee
    that tessel never returns worse than them). ``info["completion"]`` names the winner."""
    check_capacity(inst)
    params = {**DEFAULTS, **ctx.params}
    rep = _budgeted_search(inst, ctx, params)
    naive = naive_unroll(inst, rep)
    candidates: list[tuple[str, np.ndarray]] = [("naive unroll", asap(inst, orders_from_starts(inst, naive)))]
    steady = _steady_peak(inst, rep)
    deferred = naive + (inst.role_code == 2)[:, None] * (float(naive.max()) + 1.0)  # W passes only when idle
    for prio, label in ((naive, "repetend-guided list schedule"), (deferred, "repetend-guided list schedule, W deferred")):
        for s in guided(inst, prio, [inst.capacity, steady]):
            candidates.append((label, s))
    if params.get("baselines", True):
        found = best_baseline(inst)
        if found is not None:
            candidates.append((f"baseline {found[0]}", found[1].start))
    limit = float(params["phase_time_limit"])
    info: dict[str, Any] = {}
    name, seed, scores = best_candidate(inst, candidates)
    at_bound = scores[name] <= max(b.value for b in pipeline_bounds(inst)) * (1 + 1e-9)  # nothing to gain
    if limit > 0 and not at_bound:
        start, info = complete_phases(inst, rep, ctx, limit, str(params.get("phase_model", "auto")), seed=(name, seed))
        candidates.append((str(info.get("phases", "warm-up/cool-down MILPs")), retime(inst, orders_from_starts(inst, start), ctx)))
    name, exact, scores = best_candidate(inst, candidates)
    if inst.objective == "device_span":
        exact = retime(inst, orders_from_starts(inst, exact), ctx)
    exact = exact - exact.min()
    plan_info = {
        "schedule": "tessel",
        "period": rep.period,
        "period_bound": rep.period_bound,
        "period_proven_optimal": rep.proven,
        "offsets": int(np.floor((rep.sigma + 1e-9) / rep.period).max()) + 1,
        "unfold": rep.unfold,
        "repetend_search_seconds": rep.search_seconds,
        **info,
        "completion": name,
        "completion_candidates": scores,
    }
    plan = make_plan(inst, exact, plan_info)
    return Outcome(plan=plan, solver_results=list(ctx.solver_results), info=plan_info)


def _budgeted_search(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> Repetend:
    """`search_repetend` within ``search_time_limit`` seconds (heuristics, probes and the
    rate MILP share it; the period is then proven only if the proof fit). Without any
    repetend in that time, the search runs again without the budget."""
    budget = params.get("search_time_limit")
    if budget is None:
        return search_repetend(inst, ctx, params)
    sub = _sub_ctx(ctx, float(budget), share=1.0)
    try:
        return search_repetend(inst, sub, {**params, "_deadline": time.perf_counter() + float(budget)})
    except InfeasibleError as err:
        if "found no solution" not in str(err):
            raise
    finally:
        if sub.solver_results is not ctx.solver_results:
            ctx.solver_results.extend(sub.solver_results)
    return search_repetend(inst, ctx, params)


def _steady_peak(inst: PipelineInstance, rep: Repetend) -> np.ndarray:
    """(D,) the repetend's steady-state peak memory per device (bytes)."""
    cy = cyclic_blocks(inst, rep.unfold)
    mem = _steady_memory(cy, rep.sigma, rep.period)
    out = np.full(inst.n_devices, np.inf)
    for d in range(inst.n_devices):
        on = cy.mask[:, d] & (cy.mem > 0)
        if on.any():
            out[d] = float(mem[on, d].max())
    return out


def _objective(inst: PipelineInstance, start: np.ndarray) -> float:
    end = start + inst.duration[:, None]
    if inst.objective == "makespan":
        return float(end.max() - start.min())
    spans = [float(end[inst.device_mask[:, d]].max() - start[inst.device_mask[:, d]].min()) for d in range(inst.n_devices) if inst.device_mask[:, d].any()]
    return max(spans)

