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

(The model counts time in units of the period's resource bound, `RepetendIndex.unit`:
its rate is ``unit / T`` and its durations ``d / unit``, so that the rate stays near 1.)

The search: modulo scheduling (Rau 1994; for integral data with limited-discrepancy
backtracking) gives an incumbent for K from the critical path doubling up to what memory
allows (Tessel's repetends hold at most that many micro-batches), stopping at the resource
bound ``max_d work_d``. At the largest K the incumbent is proven least: for integral data
by fixed-period feasibility MILPs at the largest period below it that any repetend can
have (the least period is a cycle ratio L / h with bounded integers, and feasibility is
monotone in T), otherwise (or when a probe is undecided) by the rate MILP.

For integral data the default (``period_proof="residue"``) first tries the exact residue
search (`residue.py`: residues enumerated, offsets computed by longest paths) at the
largest K: it refutes or finds each integer period, refutes the largest fractional
candidate below (after a short MILP probe) and minimizes the flat length, all within a
node budget; whatever it leaves undecided goes to the path above (its rate MILP, an
incumbent in hand, for at most ``proof_time_limit`` seconds), and an unfinished proof is
reported as unproven, with the budget that stopped it (`Repetend.cuts`).

"Integral data" in the proofs means exact integers (`integral_data(inst, exact=True)`):
durations and delays within 1e-12 of integers are searched rounded, for a plan, but no
period is proven from that (`rounded_only`): the bound is then the work bound.

The repetend is unrolled and split into warm-up, steady state and cool-down here
(`Repetend.unroll`, `Repetend.phases`) and completed in `tessel.py`.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, check, past
from distplan.formulations.pipeline.common import (
    block_depth,
    integral_data,
)
from distplan.formulations.pipeline.modulo import (
    Cyclic,
    cyclic_blocks,
    least_fitting_period,
    longest,
    modulo_backtrack,
    modulo_heuristic,
)
from distplan.formulations.pipeline.residue import ResidueResult, residue_search
from distplan.formulations.registry import RunContext
from distplan.modeling.model import Model
from distplan.modeling.scheduling import cyclic_no_overlap, cyclic_precedence, modulo_prefix, winding_triangles
from distplan.models.pipeline import PipelineInstance
from distplan.solvers.result import LIMIT_TERMINATIONS, Termination

DEFAULTS: dict[str, Any] = {
    "offsets": None,  # periods one micro-batch may span (None: from the critical path)
    "unfold": 1,  # micro-batches per repetend
    "phase_time_limit": 0.0,  # seconds for each warm-up / cool-down MILP after the local search (0: none; small N: whole-schedule MILP, at least 1 s)
    "repetend_candidates": 12,  # repetends of the least period (different offsets) whose completions are compared
    "phase_model": "disjunctive",  # warm-up / cool-down model: auto | disjunctive | time_indexed
    "min_flat_length": True,  # second solve: shortest flat schedule at the optimal period
    "flat_time_limit": 0.25,  # seconds for that second solve
    "probe_time_limit": 1.0,  # seconds per fixed-period feasibility probe
    "period_proof": "residue",  # least period proven by: residue (exact residue search, integral data, within residue_nodes; else as auto) | auto (candidate-period MILP probes for integral data) | rate_milp
    "residue_nodes": 20_000,  # placements the residue search may try in one repetend search (period, proof, flat length)
    "flat_residue_nodes": 10_000,  # placements the residue search may try for the least flat length at the least period (at most what residue_nodes leaves; 10,000 proves it on Tessel's K placement at memory 4-20, M at 4 and NN at 6 and 20, 0.01-0.03 s more than 1,000, which left it unproven there)
    "candidate_probe_limit": 0.1,  # seconds for the MILP probe at a fractional candidate period (residue proof)
    "baselines": True,  # also evaluate the classic schedules that apply and keep the best plan
    "proof_time_limit": 1.0,  # seconds for the rate MILP when it proves a period the residue search and the probes left undecided, an incumbent in hand (period_proof="residue"; None: all the time left; "auto" and "rate_milp" always get all of it)
    "search_time_limit": None,  # seconds for the repetend search in a tessel run (None: until the period is proven; a budget weakens the heuristics)
    "whole_search_states": 20_000,  # small N (no steady state): states of the exact whole-schedule search (`statesearch`; 0: none)
    "whole_search_time_limit": 0.5,  # seconds for that search (and at most a third of a limited run's time left)
    "justify_all_ops": 512,  # forward-backward improvement of every completion candidate up to this many operations (blocks x N), of the best one only above
}


@dataclass(frozen=True)
class RepetendIndex:
    """What the blocks of the repetend MILPs share (block contract). Times in seconds.

    The cyclic blocks, the period range [``t_lb``, ``t_ub``] (a heuristic repetend, kept in
    ``heuristic`` as (flat starts, period), gives the upper bound), ``offsets`` (periods one
    micro-batch may span), the longest paths ``dist`` between blocks, the pairs of blocks
    sharing a device with the range of their winding numbers, the ``anchor`` block (the one
    root, or -1), and the mode: ``fixed_period`` None maximizes the rate; a fixed period
    minimizes the flat length, or (``feasibility``) only asks for a repetend. ``unit``:
    the seconds of the model's time unit (the period's resource bound ``t_lb``): the model
    counts durations in it and its rate is ``unit / T``, near 1 at any scale of the data
    (in 1/seconds, blocks of 1e9 s made the rate 7e-11, below CBC's and SCIP's
    feasibility tolerances: they returned a rate of 0, review rev31 D4)."""

    cyclic: Cyclic
    t_lb: float
    t_ub: float
    offsets: int
    dist: np.ndarray
    pair_a: np.ndarray
    pair_b: np.ndarray
    q_lo: np.ndarray
    q_hi: np.ndarray
    anchor: int
    heuristic: tuple[np.ndarray, float] | None
    fixed_period: float | None
    feasibility: bool
    #: the run's deadline (a ``time.perf_counter()`` value; None: none): the build checks it
    deadline: float | None = None
    unit: float = 1.0


def _build_deadline(params: Mapping[str, Any]) -> float | None:
    """The earlier of the search's own deadline (``_deadline``, a ``search_time_limit``
    budget) and the run's (``_run_deadline``); None when neither is set."""
    given = [float(d) for d in (params.get("_deadline"), params.get("_run_deadline")) if d is not None]
    return min(given) if given else None


def context_budget(params: Mapping[str, Any]) -> str:
    """The budget behind the search's context and deadlines (`_build_deadline`, the
    context's time left): within a ``search_time_limit`` budget (``_deadline`` set: the
    context is that budget's, `tessel._budgeted_search`) that budget, or the run's
    ``time_limit`` when the run had less time left (``_deadline_budget``); else the run's
    ``time_limit``."""
    if params.get("_deadline") is not None:
        return str(params.get("_deadline_budget", "search_time_limit"))
    return "time_limit"


#: the share of a run's remaining time an auxiliary solve gets at most (`sub_ctx`; the
#: budget it names, `binding_budget`)
AUX_SHARE = 1 / 3


def binding_budget(ctx: RunContext, params: Mapping[str, Any], name: str | None, limit: float | None, share: float = AUX_SHARE) -> str:
    """The budget that caps an auxiliary solve given ``limit`` seconds of its own (the
    parameter ``name``; None: none) and ``share`` of the context's time left (`sub_ctx`'s by default): ``name``
    when its own limit is the smaller, else the context's (`context_budget`: a
    ``search_time_limit`` budget or the run's ``time_limit``). Call it before the solve."""
    remaining = ctx.remaining_time()
    if name is not None and limit is not None and (remaining is None or limit <= remaining * share):
        return name
    return context_budget(params)


def prepare_repetend(inst: PipelineInstance, params: Mapping[str, Any]) -> RepetendIndex:
    """Repetend blocks, period bounds (a heuristic repetend gives the upper bound), offsets,
    and the range of the winding number of every pair of blocks on a device. Parameters:
    ``unfold``, ``offsets``, ``_t`` (a fixed period), ``_feasibility``, ``_below`` (only
    periods below it are of interest), ``_deadline`` and ``_run_deadline`` (the heuristic
    and the model's build stop there: `DeadlineReached`)."""
    unfold = int(params.get("unfold", 1))
    if unfold < 1:
        raise InputError("params.unfold", f"expected a positive integer, got {unfold!r}")
    cy = cyclic_blocks(inst, unfold)
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
    dist = longest(cy, _build_deadline(params))
    crit = float(np.max(block_depth(inst) + inst.duration))
    k = params.get("offsets")
    k = int(k) if k is not None else int(min(max(2, math.ceil(crit / t_lb) + 2), 2 * inst.n_blocks + 2))
    if k < 1:
        raise InputError("params.offsets", f"expected a positive integer, got {k!r}")
    fixed = params.get("_t")
    heuristic = None
    if fixed is None:
        below = params.get("_below")  # only periods below an incumbent's are of interest
        t_hi = t_ub if below is None else min(t_ub, math.ceil(below - 1e-9) - 1)
        found = modulo_heuristic(cy, inst, k, t_lb, t_hi, deadline=_build_deadline(params))
        if found:
            heuristic = (np.asarray(found[0]), float(found[1]))
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
    return RepetendIndex(
        cy, t_lb, t_ub, k, dist, ia, ib, q_lo, q_hi, int(roots[0]) if roots.size == 1 else -1, heuristic,
        None if fixed is None else float(fixed), bool(params.get("_feasibility", False)), _build_deadline(params), t_lb if t_lb > 0 else 1.0,
    )


def rep_variables(model: Model, inst: PipelineInstance, index: RepetendIndex) -> None:
    """theta = flat start / period (periods), rate = unit / period (``index.unit``)."""
    cy = index.cyclic
    hi = np.full(cy.n, float(index.offsets))
    if index.anchor >= 0:
        hi[index.anchor] = 0.0
    model.add_vars("theta", cy.n, lb=0.0, ub=hi)
    model.add_vars("rate", 1, lb=index.unit / index.t_ub, ub=index.unit / index.t_lb)


def rep_dependencies(model: Model, inst: PipelineInstance, index: RepetendIndex) -> None:
    """Dependencies and the flat span (at most `offsets` periods), in period units."""
    cy = index.cyclic
    theta, rate = model["theta"], model["rate"]
    cyclic_precedence(model, theta, rate, cy.src, cy.dst, cy.gap / index.unit, "flat-dependencies")
    zero = np.zeros(cy.n, dtype=np.int64)
    model.add_constraints("flat-length", theta + rate[zero] * (cy.dur / index.unit) <= float(index.offsets))
    if cy.unfold > 1:  # identical copies keep their order (symmetry)
        nb = inst.n_blocks
        first = int(inst.topo_order[0])
        idx = np.arange(cy.unfold - 1) * nb + first
        model.add_constraints("copy-order", theta[idx + nb] - theta[idx] >= 0.0)


def rep_no_overlap(model: Model, inst: PipelineInstance, index: RepetendIndex) -> None:
    """Integer winding number per pair of blocks sharing a device (``modulo-wind``), and
    their consistency on every triple of blocks of one device."""
    cy = index.cyclic
    a, b = index.pair_a, index.pair_b
    dur = cy.dur / index.unit
    wind = cyclic_no_overlap(model, model["theta"], model["rate"], a, b, dur[a], dur[b], index.q_lo, index.q_hi, "modulo")
    check(index.deadline, "the repetend model's build")
    pair_of = -np.ones((cy.n, cy.n), dtype=np.int64)
    pair_of[a, b] = np.arange(a.size)
    parts = []
    for d in range(cy.mask.shape[1]):
        parts.append(_triples(np.flatnonzero(cy.mask[:, d])))
        check(index.deadline, "the repetend model's build")
    tri = np.unique(np.concatenate(parts), axis=0) if parts else np.zeros((0, 3), dtype=np.int64)
    if tri.size:  # sorted, each once (a triple may share several devices)
        ab, bc, ac = pair_of[tri[:, 0], tri[:, 1]], pair_of[tri[:, 1], tri[:, 2]], pair_of[tri[:, 0], tri[:, 2]]
        winding_triangles(model, wind, ab, bc, ac, "winding-triangle")
    check(index.deadline, "the repetend model's build")


def _triples(on: np.ndarray) -> np.ndarray:
    """(k, 3) every increasing triple of the sorted node ids ``on``, in lexicographic order."""
    m = on.size
    if m < 3:
        return np.zeros((0, 3), dtype=np.int64)
    i, j = np.triu_indices(m, 1)
    count = m - 1 - j  # the third member after j
    i, j = np.repeat(i, count), np.repeat(j, count)
    first = np.cumsum(count) - count
    k = j + 1 + np.arange(i.size) - np.repeat(first, count)
    return np.stack([on[i], on[j], on[k]], axis=1).astype(np.int64)


def rep_memory(model: Model, inst: PipelineInstance, index: RepetendIndex) -> None:
    """Steady-state memory at every allocating block: mu_a + sum_b mu_b q_ab <= cap."""
    cy = index.cyclic
    a, b = index.pair_a, index.pair_b
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
        model, model["modulo-wind"], np.asarray(consts), np.asarray(caps), np.concatenate(rows), np.concatenate(cols), np.concatenate(coefs), "steady-memory"
    )


def rep_objective(model: Model, inst: PipelineInstance, index: RepetendIndex) -> None:
    """Maximize the rate 1/T (minimize the period); with the period fixed, minimize the
    flat length (periods)."""
    if index.fixed_period is None:
        model.maximize(model["rate"])
        return
    if index.feasibility:
        return
    cy = index.cyclic
    length = model.add_vars("flat-length", (), lb=0.0)
    model.add_constraints("flat-length-epigraph", model["theta"] + model["rate"][np.zeros(cy.n, dtype=np.int64)] * (cy.dur / index.unit) - length <= 0.0)
    model.minimize(length)


#: Tessel's repetend (module docstring): the rate MILP, or at a fixed period the flat length
REPETEND = ModelSpec("tessel-repetend", prepare_repetend, (rep_variables, rep_dependencies, rep_no_overlap, rep_memory, rep_objective))


@dataclass(frozen=True)
class Phases:
    """A repetend unrolled over N micro-batches, split in time: ``period`` (B, N) is the
    period (``T`` seconds long) in which each operation starts; every cyclic block runs in
    the periods ``first_full`` .. ``last_full`` (the steady state), the operations before
    them form the warm-up and those after them the cool-down."""

    period: np.ndarray
    first_full: int
    last_full: int

    @property
    def warmup(self) -> np.ndarray:
        """(B, N) True for the warm-up's operations."""
        return self.period < self.first_full

    @property
    def cooldown(self) -> np.ndarray:
        """(B, N) True for the cool-down's operations."""
        return self.period > self.last_full

    @property
    def full_periods(self) -> int:
        """How many periods run the whole repetend (negative: the phases overlap)."""
        return self.last_full - self.first_full + 1


@dataclass
class Repetend:
    """A solved repetend: flat starts (seconds) of the cyclic blocks and the period.

    Copy u of block b (cyclic block ``u B + b``) of super-step M runs micro-batch
    ``U M + u`` at ``sigma[u B + b] + M T``: `unroll` gives those start times, `phases`
    splits them into warm-up, steady state and cool-down.

    ``cuts`` maps each part of the search that a budget stopped before it finished to that
    budget (a parameter's name, or the run's ``time_limit``): ``repetend_search`` when the
    period was left unproven (``search_time_limit``, ``proof_time_limit``,
    ``candidate_probe_limit``), ``repetend_offsets`` when the fewest offsets were not
    established (``probe_time_limit``), ``repetend_flat_length`` when the least flat
    length was not (``flat_time_limit`` on the MILP path; ``flat_residue_nodes`` or
    ``residue_nodes``, whichever allowed fewer placements, on the residue path,
    `_search_residues`); each possibly by ``search_time_limit`` or the run's
    ``time_limit`` instead, when its share of those was the shorter. Empty when nothing
    was cut (a period or flat length may still be unproven for want of a proof, not of a
    budget: `rounded_only` data, a residue search that gives up short of its placements)."""

    sigma: np.ndarray
    period: float
    period_bound: float | None
    proven: bool
    offsets: int
    unfold: int
    search_seconds: float
    cuts: dict[str, str] = field(default_factory=dict)

    def block_offsets(self) -> np.ndarray:
        """(U B,) the period in which each cyclic block's flat start falls: Tessel's
        micro-batch offsets, ``floor(sigma / T)``."""
        return np.floor((self.sigma + 1e-9 * max(1.0, self.period)) / self.period).astype(np.int64)

    def _copies(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """For micro-batches 0 .. n - 1: their super-step and their copy in the repetend."""
        m = np.arange(n)
        return m // self.unfold, m % self.unfold

    def unroll(self, inst: PipelineInstance) -> np.ndarray:
        """(B, N) start times in seconds of the repetend repeated for the instance's N
        micro-batches (the naive unroll)."""
        step, copy = self._copies(inst.micro_batches)
        return np.ascontiguousarray(self.sigma.reshape(self.unfold, inst.n_blocks)[copy].T + step[None, :] * self.period)

    def phases(self, inst: PipelineInstance) -> Phases:
        """The unroll's operations by period: warm-up, steady state, cool-down."""
        n = inst.micro_batches
        step, copy = self._copies(n)
        offs = self.block_offsets()
        period = step[None, :] + offs.reshape(self.unfold, inst.n_blocks)[copy].T
        return Phases(period, int(offs.max()), -(-n // self.unfold) - 1)


def _warm(model: Model, index: RepetendIndex, sigma: np.ndarray, period: float) -> np.ndarray:
    cy = index.cyclic
    a, b = index.pair_a, index.pair_b
    q = np.ceil((sigma[a] + cy.dur[a] - sigma[b]) / period - 1e-9)
    vals: dict[str, Any] = {"theta": sigma / period, "rate": [index.unit / period], "modulo-wind": q}
    if "flat-length" in model.var_blocks:
        vals["flat-length"] = float(np.max((sigma + cy.dur) / period))
    return model.vector(vals)


def sub_ctx(ctx: RunContext, limit: float, share: float = AUX_SHARE) -> RunContext:
    """A context for one auxiliary solve: at most ``limit`` seconds (and ``share`` of what
    remains), recording into the run's solver results."""
    remaining = ctx.remaining_time()
    return ctx.child(time_limit=limit if remaining is None else max(0.05, min(limit, remaining * share)), share_records=True)


def rounded_only(inst: PipelineInstance) -> bool:
    """True when the durations and delays are within 1e-12 of integers but not all exact
    integers: the searches round them (for a plan), but nothing that integrality proves
    holds for them (review rev15: durations 1e-13 below integers had period 4 reported as
    proven least with bound 4, though the schedule scaled by 1 - 2e-14 repeats every
    3.99999999999992; forward blocks 1e-13 above had period 4 proven under a device's work
    of 4.0000000000002)."""
    return integral_data(inst) and not integral_data(inst, exact=True)


def period_on_data(inst: PipelineInstance, period: float) -> float | None:
    """A period (seconds) at which a repetend of ``period``, searched on the rounded data
    of `rounded_only` data, repeats on the instance's own durations and delays: the
    repetend with its times scaled by s = max(1, largest real / rounded value) (every
    value v of rounded r then has v <= s r: no block outgrows its slot and no delay its
    gap; s = 1 when every value is at most its rounding, which only loosens the
    repetend), rounded up. ``period`` itself for other data. None when a value rounded to
    0 is positive (no scaling covers it). Review rev15c: the rounded data's period 4 was
    reported below its own bound, the work bound 4.0000000000001 of durations 1e-13 above
    integers."""
    if not rounded_only(inst):
        return float(period)
    _, _, lag = inst.edges
    vals = np.concatenate([inst.duration, lag])
    rounded = np.round(vals)
    if np.any((rounded == 0) & (vals > 0)):
        return None
    pos = rounded > 0
    scale = max(1.0, float(np.max(vals[pos] / rounded[pos], initial=1.0)))
    # (each float step rounds by at most half an ulp: two ulps up cover both)
    scale = float(np.nextafter(np.nextafter(scale, np.inf), np.inf)) if scale > 1.0 else 1.0
    out = float(period) * scale
    return float(np.nextafter(out, np.inf)) if scale > 1.0 else out


def at_work_bound(inst: PipelineInstance, period: float, t_lb: float) -> bool:
    """The period (a heuristic's) reaches the resource bound ``t_lb`` (so it is least),
    within a relative 1e-9. Never for `rounded_only` data: the heuristics search it
    rounded, and their integer period is the rounded data's (period 4 within that
    tolerance of a bound 3.9999999999997 that a real repetend may reach, or under a
    device's work of 4.0000000000002 that no real repetend fits)."""
    if rounded_only(inst):
        return False
    return period <= t_lb * (1 + 1e-9) + 1e-12


def probe_period(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], period: float) -> tuple[np.ndarray | None, bool]:
    """Fixed-period feasibility MILP with the offsets in ``params`` (at most
    ``probe_time_limit`` seconds): (flat starts in seconds, or None; True when proven
    infeasible). None and False: undecided within the time limit."""
    mp, _ = REPETEND.build(inst, {**params, "_t": float(period), "_feasibility": True}, name="tessel-probe")
    rp = sub_ctx(ctx, float(params.get("probe_time_limit", DEFAULTS["probe_time_limit"]))).solve_model(mp)
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


#: the share of a limited run's time left that the repetend search leaves to the completion
COMPLETION_SHARE = 0.2


def search_repetend(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any]) -> Repetend:
    """Minimize the period over repetends spanning at most K periods, for K from the
    critical path doubling up to what memory allows (stopping at the resource bound, which
    no K beats); then, time-limited, minimize the flat length at the best period."""
    t0 = time.perf_counter()
    # the heuristics and model builds stop at the run's deadline less a fifth of the time
    # left, kept for the completion (the list schedules that turn a repetend into a plan:
    # a search that ran to the deadline left the naive unroll, so nn 8 x 16 with rate_milp
    # gave 281 at 3 s against 150 at 1 s); limits are hard, so a run given less time than
    # the search takes keeps a classic schedule
    left = ctx.remaining_time()
    params = {**params, "_run_deadline": None if ctx.deadline is None or left is None else ctx.deadline - COMPLETION_SHARE * left}
    if params.get("period_proof", "residue") == "residue":
        found = _search_residues(inst, ctx, params, t0)
        if found is not None:
            return found
    if params.get("offsets") is not None:
        ks = [int(params["offsets"])]
    else:
        first, largest = offsets_range(inst, int(params.get("unfold", 1)))
        ks = [first]
        while ks[-1] < largest:
            ks.append(min(largest, 2 * ks[-1]))
    best: tuple[np.ndarray, float, float | None, bool, int, RepetendIndex, str | None] | None = None
    reached: list[tuple[int, float, np.ndarray]] = []  # (K, least period found, its flat starts)
    for i, k in enumerate(ks):
        last = i == len(ks) - 1
        # the best repetend so far is feasible for a larger K: it warm-starts the next search
        try:
            best = _search_once(inst, ctx, {**params, "offsets": k}, None if best is None else (best[0], best[1]), prove=last)
        except DeadlineReached:
            if best is None:
                raise
            best = (best[0], best[1], None, False, best[4], best[5], context_budget(params))  # a smaller K's, unproven
            break
        reached.append((k, best[1], best[0]))
        if at_work_bound(inst, best[1], best[5].t_lb):
            best = (best[0], best[1], best[5].t_lb, True, best[4], best[5], None)
            break
    assert best is not None
    sigma, period, bound, proven, k, index, cut = best
    cuts = {} if proven or cut is None else {"repetend_search": cut}
    sigma, k = _polished(inst, ctx, params, reached, period, sigma, k, cuts)
    sigma = sigma - sigma.min()
    if integral_data(inst) and float(period).is_integer() and np.all(np.abs(sigma - np.round(sigma)) < 1e-6):
        sigma = np.round(sigma)  # remove the solver's tolerance from integral times
    return Repetend(sigma, period, bound, proven, int(k), int(index.cyclic.unfold), time.perf_counter() - t0, cuts)


def _polished(
    inst: PipelineInstance,
    ctx: RunContext,
    params: dict[str, Any],
    reached: list[tuple[int, float, np.ndarray]],
    period: float,
    sigma: np.ndarray,
    k: int,
    cuts: dict[str, str],
) -> tuple[np.ndarray, int]:
    """The repetend at ``period`` (flat starts ``sigma``, seconds, over ``k`` periods) with
    the fewest offsets (`_fewest_offsets`), then (``min_flat_length``) the least flat
    length; each step only improves a feasible repetend, so when the run's deadline stops
    one (a model's build), the repetend of the steps done so far is returned. A step its
    budget stopped is recorded in ``cuts`` (`Repetend.cuts`)."""
    step = "repetend_offsets"
    try:
        sigma, k = _fewest_offsets(inst, ctx, params, reached, period, sigma, k, cuts)
        if params.get("min_flat_length", True):
            step = "repetend_flat_length"
            t1 = time.perf_counter()
            m2, d2 = REPETEND.build(inst, {**params, "offsets": k, "_t": period}, name="tessel-flat")
            limit = float(params.get("flat_time_limit", 0.5))
            budget = binding_budget(ctx, params, "flat_time_limit", limit)
            r2 = sub_ctx(ctx, limit).solve_model(m2, warm_start=_warm(m2, d2, sigma, period), build_seconds=time.perf_counter() - t1)
            if r2.termination in LIMIT_TERMINATIONS:
                cuts.setdefault(step, budget)
            if r2.values is not None:
                sigma = np.asarray(r2.values_by_block["theta"], dtype=float) * period
    except DeadlineReached:
        cuts.setdefault(step, context_budget(params))
        return sigma, k
    return sigma, k


def _fewest_offsets(
    inst: PipelineInstance,
    ctx: RunContext,
    params: dict[str, Any],
    reached: list[tuple[int, float, np.ndarray]],
    period: float,
    sigma: np.ndarray,
    k: int,
    cuts: dict[str, str],
) -> tuple[np.ndarray, int]:
    """The same period with the fewest periods per micro-batch: bisection with
    fixed-period feasibility probes between the largest K tried that missed the period and
    the smallest that reached it. Fewer micro-batches in flight give shorter warm-up and
    cool-down phases (Tessel likewise searches its repetends with the fewest micro-batches).
    A probe undecided within its time limit sends the bisection upwards (only K with a
    repetend in hand are ever returned, so the result may not be the fewest; ``cuts``
    records it under ``repetend_offsets``)."""
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
        found = modulo_backtrack(cy, inst, mid, int(period), deadline=_build_deadline(params))[0] if quick else None
        if found is not None:
            hi, best_sigma = mid, found
            continue
        limit = float(params.get("probe_time_limit", DEFAULTS["probe_time_limit"]))
        budget = binding_budget(ctx, params, "probe_time_limit", limit)  # (`probe_period` takes `sub_ctx`'s share)
        sigma_mid, infeasible = probe_period(inst, ctx, {**params, "offsets": mid}, period)
        if sigma_mid is not None:
            hi, best_sigma = mid, sigma_mid
        elif infeasible:
            lo = mid
        else:
            lo = mid  # undecided within the probe's time limit: look for a feasible K above it only
            if ctx.solver_results and ctx.solver_results[-1].termination in LIMIT_TERMINATIONS:
                cuts.setdefault("repetend_offsets", budget)
    return np.asarray(best_sigma), int(hi)


def _search_once(
    inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], incumbent: tuple[np.ndarray, float] | None = None, prove: bool = True
) -> tuple[np.ndarray, float, float | None, bool, int, RepetendIndex, str | None]:
    """Least period with a fixed number of offsets: the backtracking heuristic (below the
    incumbent of a smaller K, if any); without ``prove`` that is all. With ``prove``:
    integer-period probes when there is no incumbent yet, then (integral data) the
    candidate-period proof, else the rate MILP; nothing once the resource bound is met.
    Returns (flat starts, period, period bound, proven, offsets, index, the budget that
    cut the rate MILP before it proved the period: `binding_budget`, else None)."""
    t0 = time.perf_counter()
    below = None if incumbent is None or not integral_data(inst) else incumbent[1]
    model, data = REPETEND.build(inst, {**params, "_t": None, "_below": below})
    build_seconds = time.perf_counter() - t0
    heur = data.heuristic
    if incumbent is not None and (not heur or incumbent[1] <= heur[1]):
        heur = incumbent
    t_lb = float(data.t_lb)
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
    if heur and at_work_bound(inst, heur[1], t_lb):
        return np.asarray(heur[0]), float(heur[1]), t_lb, True, int(data.offsets), data, None
    if not prove and heur:
        return np.asarray(heur[0]), float(heur[1]), None, False, int(data.offsets), data, None
    proof = params.get("period_proof", "residue")  # one of the formulation's choices
    exact = integral_data(inst, exact=True)  # the proofs from integrality (near-integers: none)
    if heur and proof in ("auto", "residue") and exact:
        heur, proven = _prove_by_candidates(inst, ctx, params, data, heur)
        if proven:
            return np.asarray(heur[0]), float(heur[1]), float(heur[1]), True, int(data.offsets), data, None
    warm = _warm(model, data, heur[0], heur[1]) if heur else None
    remaining = ctx.remaining_time()
    if remaining is not None and heur and params.get("_deadline") is None:  # leave the warm-up and cool-down their time
        reserve = 2 * float(params.get("phase_time_limit", DEFAULTS["phase_time_limit"])) + float(params.get("flat_time_limit", DEFAULTS["flat_time_limit"]))
        ctx = sub_ctx(ctx, remaining - reserve, share=1.0)
    given = params.get("proof_time_limit")
    cap = float(given) if given is not None and heur and proof == "residue" else None
    budget = binding_budget(ctx, params, None if cap is None else "proof_time_limit", cap, share=1.0)  # (before `sub_ctx` below, which takes it all)
    if cap is not None:
        # the rate MILP as the fallback of the residue proof, an incumbent in hand: a
        # bounded attempt (a time-limited MILP keeps the incumbent, its bound unproven)
        ctx = sub_ctx(ctx, cap, share=1.0)
    res = ctx.solve_model(model, warm_start=warm, build_seconds=build_seconds)
    cut = budget if res.termination in LIMIT_TERMINATIONS else None
    if res.values is None and heur and res.termination.value not in ("infeasible", "infeasible_or_unbounded"):
        bound = None if res.bound is None or res.bound <= 0 else data.unit / res.bound  # rate bound: a period bound
        return np.asarray(heur[0]), float(heur[1]), bound, False, int(data.offsets), data, cut
    if res.values is None:
        if res.termination.value in ("infeasible", "infeasible_or_unbounded"):
            raise InfeasibleError(
                f"{inst.name}: no repetend with at most {data.offsets} micro-batch offsets fits the memory capacity",
                details={"offsets": data.offsets},
            )
        if res.termination is Termination.TIME_LIMIT:  # stopped by its limit: nothing is proven
            raise DeadlineReached(f"the repetend search ({res.termination.value})")
        raise NoSolutionError(f"{inst.name}: the repetend search found no solution ({res.termination.value})")
    period = data.unit / float(res.values_by_block["rate"][0])
    if exact and abs(period - round(period)) < 1e-6:
        period = float(round(period))
    sigma = np.asarray(res.values_by_block["theta"], dtype=float) * period
    bound = None if res.bound is None or res.bound <= 0 else data.unit / res.bound
    if bound is not None and bound < period and exact:
        # no repetend period lies strictly between the largest candidate below the
        # incumbent and the incumbent (`candidate_periods_below`): a bound above that
        # candidate is the incumbent itself (removes the solver's tolerance, e.g. 6.99995)
        cand = candidate_periods_below(data.cyclic, float(data.t_lb), Fraction(period).limit_denominator(10**6))
        if cand is None or bound > float(cand):
            bound = period
    # proven least only when the bound reaches the period: "optimal" is the solver's gap on
    # the rate (absolute 1e-6 on a rate of 2e-5 left the period 5% above its bound, review rev14 #1)
    proven = res.termination.value == "optimal" and bound is not None and bound >= period
    return sigma, period, bound, proven, int(data.offsets), data, None if proven else cut


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
    cand = largest_fraction_below(upper, h_max)  # max over h <= h_max of (ceil(upper h) - 1) / h
    if lb <= cand and (best is None or cand > best):
        best = cand
    return best


def largest_fraction_below(x: Fraction, n: int) -> Fraction:
    """The largest fraction below ``x`` with a denominator of at most ``n`` (>= 1), by a
    Stern-Brocot descent whose runs of equal turns are taken in one step (Graham, Knuth and
    Patashnik, Concrete Mathematics, 4.5): O(log n) steps where trying every denominator
    took n (n was ~1e9 for a 1e9 s link delay beside 1 s blocks)."""
    p, q = x.numerator, x.denominator
    a, b = math.ceil(x) - 1, 1  # a / b < x <= c / d, neighbours in the Stern-Brocot tree
    c, d = math.ceil(x), 1
    while b + d <= n:
        if (a + c) * q < p * (b + d):  # the mediant is below x: move the left end right
            above = c * q - p * d  # >= 0
            k = (n - b) // d if above == 0 else min(-(-(p * b - a * q) // above) - 1, (n - b) // d)
            a, b = a + k * c, b + k * d
        else:  # the mediant is at or above x: move the right end left
            k = min((c * q - p * d) // (p * b - a * q), (n - d) // b)
            c, d = c + k * a, d + k * b
        if k == 0:
            break
    return Fraction(a, b)


def _prove_by_candidates(
    inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], data: RepetendIndex, heur: tuple[np.ndarray, float]
) -> tuple[tuple[np.ndarray, float], bool]:
    """Exact integral data: prove the incumbent period least by one fixed-period feasibility
    probe at the largest period below it that a repetend can have
    (`candidate_periods_below`; feasibility is monotone in the period: scaling ``rate``
    down keeps every constraint in ``theta`` satisfied with the same winding numbers).
    A feasible probe (the incumbent was not least) becomes the incumbent and leaves the
    rest to the rate MILP, as does an undecided one."""
    cand = candidate_periods_below(data.cyclic, float(data.t_lb), Fraction(heur[1]).limit_denominator(10**6))
    if cand is None:
        return heur, True
    sigma, infeasible = probe_period(inst, ctx, params, float(cand))
    if sigma is not None:
        return (sigma, float(cand)), False
    return heur, infeasible


def _search_residues(inst: PipelineInstance, ctx: RunContext, params: dict[str, Any], t0: float) -> Repetend | None:
    """Integral data: the least period by the exact residue search (`residue.residue_search`)
    at T = ceil(t_lb), ceil(t_lb) + 1, ... with the largest offsets memory allows, proven
    least when every integer below is refuted and the largest candidate period below T
    (`candidate_periods_below`) too (a short MILP probe); then the least flat length at T (branch and bound),
    which also gives the fewest offsets, within ``flat_residue_nodes`` placements. All within ``residue_nodes`` placements;
    the flat length left unproven by whichever of the two allowed fewer is recorded as cut by it. Returns
    None (the MILP path takes over) when a period is undecided or a fractional candidate
    has a repetend; an undecided candidate leaves the period unproven, with the refuted
    integer as its bound. Data within 1e-12 of integers but not exact (`rounded_only`) is
    searched rounded: the repetend found is returned unproven, with the work bound."""
    if not integral_data(inst):
        return None
    unfold = int(params.get("unfold", 1))
    cy = cyclic_blocks(inst, unfold)
    first, k = offsets_range(inst, unfold)
    if params.get("offsets") is not None:
        first = k = int(params["offsets"])
    work = cy.dur @ cy.mask
    t_lb = float(max(work.max(), cy.dur.max()))
    _, _, lag = inst.edges
    t_ub = float(unfold * (inst.duration.sum() + lag.sum()))
    budget = int(params.get("residue_nodes", DEFAULTS["residue_nodes"]))
    deadline = params.get("_deadline")
    remaining = ctx.remaining_time()
    if remaining is not None:  # the run's time limit: leave half of it to the completion
        own = time.perf_counter() + max(0.0, remaining) / 2
        deadline = own if deadline is None else min(float(deadline), own)
    t = math.ceil(t_lb - 1e-9)
    refuted: int | None = None  # the largest integer period proven to have no repetend
    t_fit = math.ceil(least_fitting_period(cy, k) - 1e-9)  # the periods below are refuted at once
    if t_fit > t:
        refuted, t = t_fit - 1, t_fit
    found = None
    cuts: dict[str, str] = {}  # (`Repetend.cuts`)
    while t <= t_ub + 1e-9:
        if budget <= 0 or past(deadline):
            return None  # each refuted period may cost no node (a block longer than T)
        r = residue_search(cy, inst, k, t, node_limit=max(1, budget), deadline=deadline)
        budget -= r.nodes
        if r.status == "undecided":
            # the backtracking heuristic prunes on memory greedily and may still find one,
            # also with fewer offsets (a repetend within fewer periods fits the largest K)
            for kk in sorted({min(k, first), k}):
                quick, _ = modulo_backtrack(cy, inst, kk, t, node_limit=3_000, deadline=deadline)
                if quick is not None:
                    r = ResidueResult("found", quick, float((quick + cy.dur).max()), False, 0)
                    break
        if r.status == "undecided":
            return None
        if r.status == "found":
            found = r
            break
        refuted, t = t, t + 1
    if found is None:
        return None
    assert found.sigma is not None and found.length is not None  # (status "found")
    sigma, length = found.sigma, float(found.length)
    proven, bound = True, float(t)
    if not integral_data(inst, exact=True):
        # durations within 1e-12 of integers, searched rounded: the repetend is the
        # rounded data's (a plan), and its refutations prove nothing for the instance,
        # whose least period may lie below t (durations below integers) or above the
        # work bound (above integers); the work bound t_lb holds (may exceed t, the
        # rounded data's period)
        proven, bound = False, t_lb
    cand = None if t <= t_lb + 1e-9 or not proven else candidate_periods_below(cy, t_lb, Fraction(t))
    if cand is not None and (refuted is None or cand > refuted):
        # a fractional candidate (time scaled by its denominator makes the residue search
        # slow): a short MILP probe decides it or leaves the period unproven
        limit = float(params.get("candidate_probe_limit", DEFAULTS["candidate_probe_limit"]))
        probe_budget = binding_budget(ctx, params, "candidate_probe_limit", limit)  # (`probe_period` takes `sub_ctx`'s share)
        sig, refuted_cand = probe_period(inst, ctx, {**params, "offsets": k, "probe_time_limit": limit}, float(cand))
        if sig is not None:
            return None  # a fractional period beats every integer one: the rate MILP finds it
        if not refuted_cand:  # undecided: the period is left unproven (cut, when its time ran out)
            proven, bound = False, float(refuted) if refuted is not None else t_lb
            if ctx.solver_results and ctx.solver_results[-1].termination in LIMIT_TERMINATIONS:
                cuts["repetend_search"] = probe_budget
    if params.get("min_flat_length", True):
        flat_nodes = int(params.get("flat_residue_nodes", DEFAULTS["flat_residue_nodes"]))
        node_limit = max(1, min(budget, flat_nodes))
        rm = residue_search(cy, inst, k, t, minimize_length=True, below=length, node_limit=node_limit, deadline=deadline)
        if rm.sigma is not None and rm.length is not None and rm.length < length:
            sigma, length = rm.sigma, float(rm.length)
        # "infeasible": none shorter than the one in hand, which is least; "found" or
        # "undecided" short of that proof: the least flat length is not established
        if rm.status != "infeasible" and not rm.least_length:
            if past(deadline):
                cuts["repetend_flat_length"] = context_budget(params)
            elif rm.stopped_by == "node_limit":  # its placements ran out: the smaller budget stopped it
                cuts["repetend_flat_length"] = "residue_nodes" if budget < flat_nodes else "flat_residue_nodes"
    sigma = np.round(sigma - sigma.min(), 9)
    offsets = max(1, math.ceil(length / t - 1e-9))
    return Repetend(sigma, float(t), bound, proven, offsets, unfold, time.perf_counter() - t0, cuts)
