"""``codec_select``: choose, per gradient, all-reduce / sufficient factors / sparse-index /
entropy coding, and the order on the shared channel, minimizing the iteration time.

Beyond TAG (Zhang et al., arXiv 2302.06126): TAG sums costs; here communication overlaps the
backward pass. The MILP is the evaluator's iteration model (`distplan.models.compression_eval`)
written as a scheduling program, per device class k (devices with one type and one set of
ops share a timeline):

* F_k(g) = C_k(p_g) - sum_{eligible j <= p_g on k} t_jk x_j          release of g on k
* c_g >= F_k(g);  e_gk >= F_k(g) - H (1 - coded_g);  c_g >= e_gk + enc_gk   channel start
* u_gk >= c_g + tau_g;  u_gk >= End_k;  T >= u_gk + w_gk;  T >= End_k         sync stream
* order binaries y_gh (one per pair, g released first) make the channel, each encode stream
  and each sync stream disjunctive in one common order (big-M = a horizon bound H);
* tau_g = sum_m z_gm tau_gm + sum_{e into g's tree} b_e c_e,
  w_gk = sum_m z_gm dec_gmk + update_gk + sum_{j in g's tree} M_j t_jk x_j;
* sum_m z_gm + x_{p_g} = 1; b_e >= x_j - x_i; x_i <= x_consumer(i) (duplicated ops feed
  duplicated ops); memory rows where duplication can overflow a device.

For fixed choices the least schedule of these rows is the evaluator's simulation, so the
objectives agree; TAG's plan (all-reduce or sfb, channel in release order) is one point of
this program, which therefore is never worse than ``tag_sfb``. ``window`` (an int) fixes the
order of gradients more than ``window`` apart in release order to first-come-first-served;
then the dual bound holds only for that restricted program and is not reported.
"""


from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from distplan.formulations.compression.baselines import allreduce_plan, greedy_plan, poseidon_if_fits, without_gradients
from distplan.formulations.compression.choices import choice_from_plan, choice_to_plan, improve_choice, min_channel_choice
from distplan.formulations.compression.costs import CostData, cost_data, memory_can_bind, memory_terms
from distplan.formulations.compression.schedule import Choice, SelectIndex, least_schedule, select_index
from distplan.formulations.compression.tag import run_tag_sfb
from distplan.formulations.contract import ModelSpec
from distplan.formulations.deadline import DeadlineReached, check, made_in_time, past
from distplan.formulations.registry import Bound, Outcome, RunContext
from distplan.modeling.model import LinExpr, Model, linear_sum
from distplan.modeling.scheduling import ordered_rows
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan
from distplan.solvers.result import SolverResult, Termination


@dataclass(frozen=True)
class CodecIndex:
    """What the blocks of codec_select share (block contract: `distplan.formulations.contract`)."""

    cd: CostData
    si: SelectIndex
    #: gradient pairs (first, second), ``first`` released first, one per unordered pair
    first: np.ndarray
    second: np.ndarray
    #: which pairs get an order binary (within ``window`` in release order; the others stay
    #: first-come-first-served)
    free: np.ndarray
    window: int | None
    #: the run's deadline (a ``time.perf_counter()`` value; None: none): the build stops past
    #: it before each block (`contract.ModelSpec.build_from`)
    deadline: float | None = None


def prepare_codec_select(inst: CompressionInstance, params: Mapping[str, Any]) -> CodecIndex:
    """Cost and index arrays, and the gradient pairs; ``_upper`` (s) is an iteration time some
    plan reaches (the horizon and time unit), ``window`` the ordering window, ``deadline``
    the run's (`DeadlineReached` past it)."""
    deadline = params.get("deadline")
    check(deadline, "the codec_select model's preparation")
    cd = cost_data(inst)
    si = select_index(inst, cd, params.get("_upper"))
    window = params.get("window")
    ia, ib = np.triu_indices(cd.n_gradients, k=1)
    free = np.ones(ia.size, dtype=bool) if window is None else (ib - ia) <= int(window)
    check(deadline, "the codec_select model's preparation")
    return CodecIndex(cd, si, si.rank[ia], si.rank[ib], free, None if window is None else int(window), None if deadline is None else float(deadline))


def _dup_time_triplets(inst: CompressionInstance, cd: CostData, si: SelectIndex, pairs: np.ndarray, upto: np.ndarray | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Triplets (row, x index, seconds) of sum_{eligible j (<= upto) hosted on class k} t_jk x_j
    for each pair (gradient, class) in ``pairs`` (row = position in ``pairs``)."""
    rows_out, cols_out, vals_out = [], [], []
    for k in np.unique(si.pair_k[pairs]).tolist():
        sel = np.flatnonzero(si.pair_k[pairs] == k)
        ops_k = si.elig[cd.class_host[si.elig, k]]  # sorted op ids
        if ops_k.size == 0 or sel.size == 0:
            continue
        if upto is None:
            counts = np.full(sel.size, ops_k.size)
        else:
            counts = np.searchsorted(ops_k, upto[sel], side="right")
        total = int(counts.sum())
        if total == 0:
            continue
        rows = np.repeat(sel, counts)
        offs = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
        ops = ops_k[offs]
        rows_out.append(rows)
        cols_out.append(si.x_of_op[ops])
        vals_out.append(cd.class_time[ops, k])
    if not rows_out:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    return np.concatenate(rows_out), np.concatenate(cols_out), np.concatenate(vals_out)


# -- blocks -----------------------------------------------------------------------------------


def select_choice(model: Model, inst: CompressionInstance, index: CodecIndex) -> None:
    """x (duplicate eligible op), b (broadcast), z (method per gradient) and their links."""
    cd, si = index.cd, index.si
    x = model.add_vars("duplicate", si.elig.size, vtype="binary")
    b = model.add_vars("broadcast", cd.cand_edges.size, vtype="binary")
    z = model.add_vars("method", len(cd.options), vtype="binary")
    G = cd.n_gradients
    # one method per gradient: sum_m z_gm + x_{p_g} = 1
    rows = [si.opt_grad]
    cols = [z.index]
    prod_x = si.x_of_op[cd.grad_op]
    has = np.flatnonzero(prod_x >= 0)
    rows.append(has)
    cols.append(x.index[prod_x[has]])
    expr = linear_sum(np.concatenate(cols), np.ones(sum(c.size for c in cols)), np.concatenate(rows), G, model.num_vars)
    model.add_constraints("one-method", expr == 1.0)
    # closure: b_e >= x_dst - x_src
    n = cd.cand_edges.size
    if n:
        src_x = si.x_of_op[cd.cand_src]
        r = np.arange(n)
        keep = src_x >= 0
        expr = linear_sum(
            np.concatenate([b.index, x.index[si.x_of_op[cd.cand_dst]], x.index[src_x[keep]]]),
            np.concatenate([np.ones(n), -np.ones(n), np.ones(int(keep.sum()))]),
            np.concatenate([r, r, r[keep]]),
            n,
            model.num_vars,
        )
        model.add_constraints("broadcast-closure", expr >= 0.0)
    # duplicated ops feed duplicated ops: x_i <= x_consumer(i)
    cons = inst.consumer[si.elig]
    inner = np.flatnonzero((cons >= 0) & cd.eligible[np.maximum(cons, 0)])
    if inner.size:
        m = inner.size
        r = np.arange(m)
        expr = linear_sum(
            np.concatenate([x.index[inner], x.index[si.x_of_op[cons[inner]]]]),
            np.concatenate([np.ones(m), -np.ones(m)]),
            np.concatenate([r, r]),
            m,
            model.num_vars,
        )
        model.add_constraints("duplicate-closure", expr <= 0.0)


def select_memory(model: Model, inst: CompressionInstance, index: CodecIndex) -> None:
    """Memory rows for the devices where duplication can overflow (none otherwise)."""
    cd, si = index.cd, index.si
    bind = memory_can_bind(inst)
    if not bind.any():
        return
    devs = np.flatnonzero(bind)
    dup_bytes, bcast_bytes = memory_terms(inst)
    A_dup = dup_bytes[devs][:, si.elig]
    A_b = bcast_bytes[devs]
    r1, c1 = np.nonzero(A_dup)
    r2, c2 = np.nonzero(A_b)
    x, b = model["duplicate"], model["broadcast"]
    expr = linear_sum(
        np.concatenate([x.index[c1], b.index[c2]]),
        np.concatenate([A_dup[r1, c1], A_b[r2, c2]]),
        np.concatenate([r1, r2]),
        devs.size,
        model.num_vars,
    )
    scale = 1.0 / cd.memory_capacity[devs]
    model.add_constraints("memory", expr * scale <= (cd.memory_capacity[devs] - cd.memory_base[devs]) * scale)


def _durations(model: Model, inst: CompressionInstance, cd: CostData, si: SelectIndex) -> tuple[LinExpr, LinExpr, LinExpr]:
    """tau (channel seconds per gradient), enc (encode seconds per encode pair), w (sync
    seconds per pair) as expressions of z, b and x."""
    x, b, z = model["duplicate"], model["broadcast"], model["method"]
    G = cd.n_gradients
    nv = model.num_vars
    k_ = 1.0 / si.unit
    chan = np.array([o.channel_seconds for o in cd.options]) * k_
    cg = cd.cand_gradient
    tau = linear_sum(np.concatenate([z.index, b.index]), np.concatenate([chan, cd.cand_seconds * k_]), np.concatenate([si.opt_grad, cg]), G, nv)
    # encode seconds per encode pair
    er, ec, ev = [], [], []
    dr, dc, dv = [], [], []
    for o_idx, opt in enumerate(cd.options):
        g = opt.gradient
        for k in cd.grad_classes[g].tolist():
            p = si.pair_of[g, k]
            if opt.encode_seconds[k] > 0:
                er.append(si.enc_of_pair[p])
                ec.append(z.index[o_idx])
                ev.append(opt.encode_seconds[k] * k_)
            if opt.decode_seconds[k] > 0:
                dr.append(p)
                dc.append(z.index[o_idx])
                dv.append(opt.decode_seconds[k] * k_)
    enc = linear_sum(np.array(ec, dtype=np.int64), np.array(ev), np.array(er, dtype=np.int64), si.enc_pairs.size, nv)
    # duplicated work of a gradient's tree on the sync stream: M_j t_jk x_j
    tree_ops = si.elig[inst.tree[si.elig] >= 0]
    tr, tc, tv = [], [], []
    for k in range(cd.n_classes):
        on_k = tree_ops[cd.class_host[tree_ops, k]]
        if on_k.size == 0:
            continue
        tr.append(si.pair_of[inst.tree[on_k], k])
        tc.append(x.index[si.x_of_op[on_k]])
        tv.append(inst.replicas[on_k] * cd.class_time[on_k, k] * k_)
    rows = np.concatenate([np.array(dr, dtype=np.int64), *tr]) if tr else np.array(dr, dtype=np.int64)
    cols = np.concatenate([np.array(dc, dtype=np.int64), *tc]) if tc else np.array(dc, dtype=np.int64)
    vals = np.concatenate([np.array(dv, dtype=float), *tv]) if tv else np.array(dv, dtype=float)
    w = linear_sum(cols, vals, rows, si.pair_g.size, nv) + cd.update_seconds[si.pair_g, si.pair_k] * k_
    return tau, enc, w


def select_timing(model: Model, inst: CompressionInstance, index: CodecIndex) -> None:
    """Release, encode, channel, sync-stream and iteration-time rows (no order yet). Names
    the durations (time units) ``channel_seconds``, ``encode_seconds`` and ``sync_seconds``."""
    cd, si = index.cd, index.si
    P = si.pair_g.size
    G = cd.n_gradients
    nk = cd.n_classes
    k_ = 1.0 / si.unit
    H = si.H * k_
    c = model.add_vars("channel_start", G, ub=H)
    e = model.add_vars("encode_start", si.enc_pairs.size, ub=H)
    u = model.add_vars("sync_start", P, ub=H)
    T = model.add_vars("iteration", 1, ub=H)
    x = model["duplicate"]
    nv = model.num_vars
    tau, enc, w = _durations(model, inst, cd, si)
    model.define("channel_seconds", tau)
    model.define("encode_seconds", enc)
    model.define("sync_seconds", w)
    z = model["method"]
    # release per pair: R = sum t x over eligible ops up to the producer
    prod = cd.grad_op[si.pair_g]
    rr, rc, rv = _dup_time_triplets(inst, cd, si, np.arange(P), prod)
    R = linear_sum(x.index[rc], rv * k_, rr, P, nv)
    C = si.stream_const[prod, si.pair_k] * k_
    model.add_constraints("channel-release", c.expr()[si.pair_g] + R >= C)
    if si.enc_pairs.size:
        ep = si.enc_pairs
        coded_opts = np.flatnonzero(si.opt_coded)
        # coded_g = sum of z over the gradient's codec options, one row per encode pair
        row_of_grad: dict[int, list[int]] = {}
        for q, p in enumerate(ep.tolist()):
            row_of_grad.setdefault(int(si.pair_g[p]), []).append(q)
        cr, cc = [], []
        for o in coded_opts.tolist():
            for q in row_of_grad.get(int(si.opt_grad[o]), []):
                cr.append(q)
                cc.append(z.index[o])
        coded = linear_sum(np.array(cc, dtype=np.int64), np.ones(len(cc)), np.array(cr, dtype=np.int64), ep.size, nv)
        model.add_constraints("encode-release", e.expr() + R[ep] - coded * H >= C[ep] - H)
        model.add_constraints("encode-before-channel", c.expr()[si.pair_g[ep]] - e.expr() - enc >= 0.0)
    model.add_constraints("sync-after-channel", u.expr() - c.expr()[si.pair_g] - tau[si.pair_g] >= 0.0)
    # End_k = stream_end_k - sum over eligible ops on k of t x
    er_, ec_, ev_ = _dup_time_triplets(inst, cd, si, np.arange(P), None)
    End_sub = linear_sum(x.index[ec_], ev_ * k_, er_, P, nv)
    stream_end = si.stream_end * k_
    model.add_constraints("sync-after-backward", u.expr() + End_sub >= stream_end[si.pair_k])
    model.add_constraints("iteration-after-sync", T.expr()[np.zeros(P, dtype=np.int64)] - u.expr() - w >= 0.0)
    cls = np.arange(nk)
    ops_rows, ops_cols, ops_vals = [], [], []
    for k in cls.tolist():
        on_k = si.elig[cd.class_host[si.elig, k]]
        ops_rows.append(np.full(on_k.size, k))
        ops_cols.append(x.index[si.x_of_op[on_k]])
        ops_vals.append(cd.class_time[on_k, k] * k_)
    End_all = linear_sum(np.concatenate(ops_cols), np.concatenate(ops_vals), np.concatenate(ops_rows), nk, nv)
    model.add_constraints("iteration-after-backward", T.expr()[np.zeros(nk, dtype=np.int64)] + End_all >= stream_end)
    # valid inequalities (implied by the disjunctive rows, not by their LP relaxation):
    # each sync stream starts after its backward pass and runs its items one at a time ...
    load = w.group_sum(si.pair_k, nk)
    model.add_constraints("sync-load", T.expr()[np.zeros(nk, dtype=np.int64)] - load + End_all >= stream_end)
    # ... and the channel carries, after the release of g on class k, every transfer released
    # on k no earlier than g (later in k's stream: F_k(h) >= F_k(g); gradients not on k may be
    # released earlier in time whatever their position), then at least one update:
    # T >= F_k(g) + sum_{h on k, h >= g} tau_h + tail
    tail = float(cd.update_seconds[si.pair_g, si.pair_k].min(initial=0.0)) * k_
    pos = np.empty(G, dtype=np.int64)
    pos[si.rank] = np.arange(G)
    later = (pos[None, :] >= pos[si.pair_g][:, None]) & (si.pair_of[:, si.pair_k].T >= 0)  # [P, G]
    lr, lh = np.nonzero(later)
    tau_rows = tau.A[lh]
    suffix = LinExpr(sp.csr_matrix((np.ones(lr.size), (lr, np.arange(lr.size))), shape=(P, lr.size)) @ tau_rows, np.zeros(P), (P,))
    model.add_constraints("channel-load", T.expr()[np.zeros(P, dtype=np.int64)] + R - suffix >= C + tail)
    model.minimize(T.expr())


def select_order(model: Model, inst: CompressionInstance, index: CodecIndex) -> None:
    """One order binary per pair of gradients (within ``window`` in release order; the others
    stay first-come-first-served): disjunctive channel, encode and sync streams."""
    cd, si = index.cd, index.si
    a, bb, free = index.first, index.second, index.free  # a is released first
    nfree = int(free.sum())
    y = model.add_vars("order", nfree, vtype="binary")
    k_ = 1.0 / si.unit
    H = si.H * k_
    yslot = np.full(a.size, -1, dtype=np.int64)
    yslot[free] = np.arange(nfree)
    c = model["channel_start"].expr()
    u = model["sync_start"].expr()
    e = model["encode_start"].expr()
    tau, enc, w = model.expression("channel_seconds"), model.expression("encode_seconds"), model.expression("sync_seconds")
    ye = y.expr()

    def disjunctive(name: str, start: LinExpr, dur: LinExpr, ra: np.ndarray, rb: np.ndarray, pair_ids: np.ndarray, lb: np.ndarray) -> None:
        """The disjunction of each pair in the common order y (`ordered_rows`), M = H -
        (earliest start of the later item) per row; pairs outside the window in release
        order (first come, first served)."""
        if pair_ids.size == 0:
            return
        check(index.deadline, "the codec_select model's build")  # (each stream's rows: seconds on 3M pairs)
        ra, rb = ra[pair_ids], rb[pair_ids]
        fr = free[pair_ids]
        fx = np.flatnonzero(~fr)
        fi = np.flatnonzero(fr)
        if fi.size:
            ordered_rows(model, start[ra[fi]], start[rb[fi]], dur[ra[fi]], dur[rb[fi]], ye[yslot[pair_ids[fi]]], H - lb[rb[fi]], H - lb[ra[fi]], name)
        if fx.size:
            model.add_constraints(f"{name}-fcfs", start[rb[fx]] - start[ra[fx]] - dur[ra[fx]] >= 0.0)

    all_pairs = np.arange(a.size)
    disjunctive("channel", c, tau, a, bb, all_pairs, si.release_lb * k_)
    sync_lb = si.sync_lb[si.pair_k] * k_
    enc_lb = np.zeros(si.enc_pairs.size)
    for k in range(cd.n_classes):
        pa, pb = si.pair_of[a, k], si.pair_of[bb, k]
        both = np.flatnonzero((pa >= 0) & (pb >= 0))
        disjunctive(f"sync{k}", u, w, pa, pb, both, sync_lb)
        ea = np.where(pa >= 0, si.enc_of_pair[np.maximum(pa, 0)], -1)
        eb = np.where(pb >= 0, si.enc_of_pair[np.maximum(pb, 0)], -1)
        both_e = np.flatnonzero((ea >= 0) & (eb >= 0))
        disjunctive(f"encode{k}", e, enc, ea, eb, both_e, enc_lb)


def decode_choice(inst: CompressionInstance, result: SolverResult, index: CodecIndex) -> Choice:
    """The choices of a solution: duplicated ops, one option per gradient, the channel order."""
    cd, si = index.cd, index.si
    vb = result.values_by_block
    dup = np.zeros(cd.n_ops, dtype=bool)
    dup[si.elig[vb["duplicate"] > 0.5]] = True
    option = np.full(cd.n_gradients, -1, dtype=np.int64)
    zval = vb["method"]
    for g in range(cd.n_gradients):
        if dup[cd.grad_op[g]]:
            continue
        opts = np.flatnonzero(si.opt_grad == g)
        option[g] = opts[int(np.argmax(zval[opts]))]
    a, bb, free = index.first, index.second, index.free
    before = np.ones(a.size, dtype=bool)
    before[free] = vb["order"] > 0.5
    preds = np.zeros(cd.n_gradients)
    np.add.at(preds, bb, before.astype(float))
    np.add.at(preds, a, (~before).astype(float))
    order = np.lexsort((np.arange(cd.n_gradients), vb["channel_start"], preds))
    return Choice(dup, option, order)


def decode(inst: CompressionInstance, result: SolverResult, index: CodecIndex) -> CompressionPlan:
    return choice_to_plan(inst, decode_choice(inst, result, index))


#: the scheduling MILP of codec_select
CODEC_SELECT = ModelSpec("codec_select", prepare_codec_select, (select_choice, select_memory, select_timing, select_order), decode)



def warm_vector(model: Model, inst: CompressionInstance, index: CodecIndex, ch: Choice) -> np.ndarray:
    """A full solution vector of the codec_select model for fixed choices."""
    cd, si = index.cd, index.si
    sched = least_schedule(inst, ch, si)
    k_ = 1.0 / si.unit
    vals: dict[str, np.ndarray] = {
        "duplicate": (ch.dup[si.elig]).astype(float),
        "broadcast": sched["broadcast"],
        "method": np.zeros(len(cd.options)),
        "channel_start": sched["channel_start"] * k_,
        "encode_start": sched["encode_start"] * k_,
        "sync_start": sched["sync_start"] * k_,
        "iteration": np.array([sched["iteration"] * k_]),
    }
    has = ch.option >= 0
    vals["method"][ch.option[has]] = 1.0
    a, bb, free = index.first, index.second, index.free
    pos = np.empty(cd.n_gradients, dtype=np.int64)
    pos[ch.order] = np.arange(ch.order.size)
    vals["order"] = (pos[a] < pos[bb])[free].astype(float)
    out = np.zeros(model.num_vars)
    for name, blk in model.var_blocks.items():
        out[blk.start : blk.stop] = np.asarray(vals[name], dtype=float).reshape(-1)
    return out


def run_codec_select(inst: CompressionInstance, ctx: RunContext) -> Outcome:
    """Solve the scheduling MILP, warm-started with the best of all-reduce, TAG's plan and the
    greedy plan (each in release order); return the best plan found. Past the run's
    deadline no further candidate starts once all-reduce's plan is in hand (each takes
    seconds on 46,080 ops: review rev30), and the best one so far is the plan (termination
    time_limit)."""
    inst.check_base_memory()
    trivial = without_gradients(inst)
    if trivial is not None:
        return trivial
    window = ctx.param("window", None)
    candidates: dict[str, CompressionPlan] = {"allreduce_all": allreduce_plan(inst)}
    candidates |= made_in_time(ctx.deadline, [
        ("greedy_by_saving", lambda: greedy_plan(inst)),
        # the best TAG plan (its iteration MILP): codec_select is never worse than tag_sfb
        ("tag_sfb", lambda: run_tag_sfb(inst, ctx.child({"objective": "iteration"})).plan),
        ("sfb_poseidon_rule", lambda: poseidon_if_fits(inst)),
    ])
    sched_si = select_index(inst, cost_data(inst))
    scored = {}
    for name, plan in candidates.items():
        ch = choice_from_plan(inst, plan)
        scored[name] = (least_schedule(inst, ch, sched_si)["iteration"], ch)
    if not past(ctx.deadline):
        ch = min_channel_choice(inst)
        scored["min_channel"] = (least_schedule(inst, ch, sched_si)["iteration"], ch)
    best0 = min(scored, key=lambda n: scored[n][0])
    remaining = ctx.remaining_time()
    budget = float(ctx.param("improve_seconds", 5.0))
    if remaining is not None:
        budget = min(budget, 0.25 * remaining)
    improved, changes = improve_choice(inst, scored[best0][1], sched_si, time.perf_counter() + budget)
    scored["improved"] = (least_schedule(inst, improved, sched_si)["iteration"], improved)
    start_name = min(scored, key=lambda n: scored[n][0])
    upper = scored[start_name][0] * (1 + 1e-6) + 1e-12
    t0 = time.perf_counter()
    try:
        model, index = CODEC_SELECT.build(inst, {"window": window, "_upper": upper, "deadline": ctx.deadline})
    except DeadlineReached as exc:  # the heuristics' best plan, as a run the limit cut (review rev30 D2)
        info_cut: dict[str, Any] = {"candidates": {n: v[0] for n, v in scored.items()}, "improvement_changes": changes, "window": window, "chosen": start_name, "stopped": str(exc)}
        return Outcome(plan=choice_to_plan(inst, scored[start_name][1]), solver_results=list(ctx.solver_results), claimed_objective=scored[start_name][0], info=info_cut, termination=Termination.TIME_LIMIT)
    build = time.perf_counter() - t0
    start = warm_vector(model, inst, index, scored[start_name][1])
    saved = ctx.options
    if saved.mip_gap is None:  # prove optimality, not HiGHS's default 0.01 % gap
        ctx.options = saved.with_(mip_gap=1e-7)
    try:
        res = ctx.solve_model(model, warm_start=start, build_seconds=build)
    finally:
        ctx.options = saved
    unit = index.si.unit
    res.extra["time_unit_seconds"] = unit  # time variables in res.values are in this unit
    if res.objective is not None:
        res.objective *= unit
    if res.bound is not None:
        res.bound *= unit
    info: dict[str, Any] = {
        "candidates": {n: v[0] for n, v in scored.items()},
        "warm_start": start_name,
        "improvement_changes": changes,
        "window": window,
        "order_binaries": int(model.var_blocks["order"].stop - model.var_blocks["order"].start),
        "milp_objective": res.objective,
        "milp_bound": res.bound,
    }
    exact = window is None or int(window) >= inst.n_gradients - 1
    # (the call's bound is in seconds: multiplied by the time unit above, in its record too)
    bounds = [Bound(res.bound, f"codec_select dual bound ({res.backend})", solver_record=res)] if exact and res.bound is not None else []
    best_name, (best_seconds, best_ch) = start_name, scored[start_name]
    if res.has_solution:
        ch = decode_choice(inst, res, index)
        seconds = least_schedule(inst, ch, index.si)["iteration"]
        info["milp_plan_iteration"] = seconds
        if seconds <= best_seconds + 1e-12:
            best_name, best_seconds, best_ch = "milp", seconds, ch
    info["chosen"] = best_name
    optimal = exact and res.termination is Termination.OPTIMAL and res.objective is not None and best_seconds <= res.objective + 1e-9 * max(1.0, abs(res.objective))
    return Outcome(
        plan=choice_to_plan(inst, best_ch),
        bounds=bounds,
        solver_results=list(ctx.solver_results),
        claimed_objective=best_seconds,
        proven_optimal=optimal,
        info=info,
    )
