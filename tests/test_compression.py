"""Compression selection (TAG): instances, the iteration evaluator, tag_sfb (the iteration
MILP, TAG's cost program on every MILP backend, its LP relaxation, minimum cuts), codec_select
(scheduling MILP) and baselines.

Known optima: a two-device fixture computed by hand; tiny random instances solved by
enumerating every plan (and every TAG plan) with the evaluator. Differential tests: the
formulations' schedule vs the evaluator, the MILP objectives vs the evaluator, TAG's cost
MILP vs max-flow; no baseline beats tag_sfb, tag_sfb_maxflow or codec_select.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
from typing import Any

import numpy as np
import pytest
from conftest import backend_params, takes_milp
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from distplan.api import solve
from distplan.cli import main as cli_main
from distplan.errors import InfeasibleError, InputError
from distplan.formulations.compression.bounds import compression_bounds, min_sfb_channel
from distplan.formulations.compression.choices import choice_from_plan
from distplan.formulations.compression.costs import cost_data, tag_objective
from distplan.formulations.compression.schedule import least_schedule
from distplan.formulations.compression.tag import (
    TAG_ITERATION,
    min_cut_duplicated,
    prune_dangling,
    tag_iteration,
    tag_warm_vector,
)
from distplan.formulations.registry import formulations, get_formulation
from distplan.instances import compression_models as cm
from distplan.instances import load_instance
from distplan.instances.codec_measure import CodecSpec, gradient_tensor, measure_codecs, measure_one
from distplan.models.compression_eval import evaluate
from distplan.models.compression_instance import CompressionInstance
from distplan.models.compression_plan import CompressionPlan, make_plan, plan_from_dict

MILP_BACKENDS = backend_params(takes_milp)
BASELINES = ("allreduce_all", "sfb_poseidon_rule", "greedy_by_saving")
FORMULATIONS = (*BASELINES, "tag_sfb", "tag_sfb_maxflow", "codec_select")


# -- fixtures ------------------------------------------------------------------------------


def two_device_doc() -> dict[str, Any]:
    """One layer on two identical devices; every number chosen for hand computation.

    Stream: fwd 1 ms, dw 2 ms. Gradient 1e6 bytes, bandwidth 1e9 B/s: all-reduce
    2 (M-1)/M S / B = 1 ms. SFB broadcasts x and dy (1e5 bytes each): 0.2 ms; duplicated dw
    runs on the full batch: M * 2 ms = 4 ms. Update 0.5 ms.
    """
    devices = [{"name": "a", "type": "V100", "node": "n"}, {"name": "b", "type": "V100", "node": "n"}]
    ops = [
        {"name": "fwd", "role": "forward", "compute_seconds": {"V100": 1e-3}, "memory_bytes": 1e5},
        {"name": "dw", "role": "backward", "compute_seconds": {"V100": 2e-3}, "eligible": True},
        {"name": "upd", "role": "update", "compute_seconds": {"V100": 5e-4}},
    ]
    edges = [{"src": "fwd", "dst": "dw", "bytes": 1e5}, {"src": "fwd", "dst": "dw", "bytes": 1e5}, {"src": "dw", "dst": "upd", "bytes": 1e6}]
    return {
        "format": "distplan/1",
        "kind": "compression",
        "name": "two-devices",
        "batch_size": 8,
        "cluster": {"devices": devices, "intra_node_bandwidth": 1e9, "inter_node_bandwidth": 1e9},
        "graph": {
            "ops": ops,
            "edges": edges,
            "gradients": [{"name": "w", "op": "dw", "update": "upd", "bytes": 1e6, "shape": [500, 500], "factor_rows": 8}],
        },
        "codecs": [],
    }


def random_doc(seed: int) -> dict[str, Any]:
    """A small random MLP on 2-4 mixed devices, random links and random codecs (one of them
    sparse-index on a sparse first gradient); sometimes the first layer on a device subset."""
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(2, 5))
    types = ["V100", "P100", "1080Ti"]
    devices = [{"name": f"d{k}", "type": types[int(rng.integers(0, 3))], "node": f"n{int(rng.integers(0, 2))}"} for k in range(nd)]
    cluster = {"devices": devices, "intra_node_bandwidth": float(rng.choice([8e9, 2e10])), "inter_node_bandwidth": float(rng.choice([1e9, 3e9]))}
    widths = [int(w) for w in rng.choice([64, 256, 1024, 4096], size=int(rng.integers(3, 5)))]
    doc = cm.mlp(widths, int(rng.choice([4, 32, 256])), cluster=cluster, name=f"random-{seed}")
    used = sorted({d["type"] for d in devices})
    codecs = []
    for k in range(int(rng.integers(0, 3))):
        codecs.append(
            {
                "name": f"ent{k}",
                "method": "entropy",
                "lossless": True,
                "ratio": {"float32": float(rng.uniform(0.05, 1.0))},
                "encode_bytes_per_second": {t: float(rng.uniform(1e9, 2e10)) for t in used},
                "decode_bytes_per_second": {t: float(rng.uniform(1e9, 2e10)) for t in used},
            }
        )
    grads = doc["graph"]["gradients"]
    if rng.random() < 0.5:
        grads[0]["density"] = float(rng.choice([0.01, 0.2]))
        codecs.append(
            {
                "name": "sparse",
                "method": "sparse_index",
                "lossless": True,
                "encode_bytes_per_second": {t: 5e10 for t in used},
                "decode_bytes_per_second": {t: 5e10 for t in used},
            }
        )
    doc["codecs"] = codecs
    if nd >= 3 and rng.random() < 0.4:  # first layer replicated on a subset only
        subset = [d["name"] for d in devices[:2]]
        for op in doc["graph"]["ops"]:
            if op["name"] in ("input", "fc0.fwd", "fc0.dw", "upd.fc0"):
                op["devices"] = subset
            if op["name"] in ("fc0.dw", "fc1.dw"):
                op["eligible"] = False  # their inputs come from ops on other replica groups
    return doc


def brute_force(inst: CompressionInstance) -> float:
    """The least feasible iteration time over every plan (tiny instances only)."""
    ways: list[list[tuple[str, frozenset[str]]]] = []
    for g in inst.gradients:
        options = [("allreduce", frozenset())]
        for c in inst.codecs:
            if inst.codec_applies(c, g) and len(inst.ops[inst.op_index[g.op]].devices) >= 2:
                options.append((c.name, frozenset()))
        if inst.ops[inst.op_index[g.op]].eligible:
            tree = [o.name for i, o in enumerate(inst.ops) if inst.eligible[i] and inst.tree[i] == inst.gradient_index[g.name]]
            others = [t for t in tree if t != g.op]
            for r in range(len(others) + 1):
                for extra in itertools.combinations(others, r):
                    options.append(("sfb", frozenset((g.op, *extra))))
        ways.append(options)
    best = math.inf
    names = [g.name for g in inst.gradients]
    for combo in itertools.product(*ways):
        dup = frozenset().union(*(d for _, d in combo))
        for order in itertools.permutations(names):
            plan = CompressionPlan(tuple(sorted(dup)), {n: m for n, (m, _) in zip(names, combo)}, order)
            check = evaluate(inst, plan)
            if check.feasible:
                best = min(best, check.objective)
    return best


def brute_force_tag(inst: CompressionInstance) -> float:
    """The least feasible iteration time over TAG's plans: every duplicated set closed under
    consumers (all-reduce or sfb, channel in release order); tiny instances only."""
    elig = np.flatnonzero(inst.eligible)
    best = math.inf
    for r in range(elig.size + 1):
        for subset in itertools.combinations(elig.tolist(), r):
            dup = np.zeros(inst.n_ops, dtype=bool)
            dup[list(subset)] = True
            if not np.array_equal(prune_dangling(inst, dup), dup):
                continue
            methods = ["sfb" if dup[p] else "allreduce" for p in inst.grad_op.tolist()]
            check = evaluate(inst, make_plan(inst, dup, methods))
            if check.feasible:
                best = min(best, check.objective)
    return best


@pytest.fixture(scope="module")
def bundled() -> dict[str, CompressionInstance]:
    return {n: load_instance(f"compression-{n}") for n in ("mlp-small", "vgg16", "bert-large", "gpt2-medium")}


# -- instances -------------------------------------------------------------------------------


def test_round_trip_and_bundled(bundled: dict[str, CompressionInstance]) -> None:
    for inst in bundled.values():
        doc = inst.to_dict()
        assert CompressionInstance.from_dict(json.loads(json.dumps(doc))).to_dict() == doc
        assert inst.summary()["gradients"] == inst.n_gradients
        # codec ratios were measured by running the codecs and are recorded with the instance
        assert inst.codecs and all(c.measured is not None and c.measured["elements"] > 0 for c in inst.codecs)


def test_builders_parameter_counts() -> None:
    # BERT-large ~335M parameters (+ the decoder output counted as its own sync unit),
    # GPT-2 medium ~355M (the tied embedding twice), VGG-16 ~138M
    vgg = CompressionInstance.from_dict(cm.vgg16())
    assert vgg.grad_bytes.sum() / 4 == pytest.approx(138.36e6, rel=0.01)
    bert = CompressionInstance.from_dict(cm.bert_large())
    dense = sum(g.bytes for g in bert.gradients if g.name != "emb.word.lookup") / 4
    assert dense == pytest.approx(335e6, rel=0.03)
    gpt = CompressionInstance.from_dict(cm.gpt2_medium())
    assert gpt.n_gradients == 24 * 5 + 4
    assert [g.density for g in gpt.gradients if g.density < 1] == [pytest.approx(256 / 50257)]


@pytest.mark.parametrize(
    "edit,path",
    [
        (lambda d: d["codecs"].append({"name": "topk", "method": "entropy", "lossless": False, "encode_bytes_per_second": {"V100": 1}, "decode_bytes_per_second": {"V100": 1}}), "codecs[0].lossless"),
        (lambda d: d["graph"]["edges"].append({"src": "fwd", "dst": "nope", "bytes": 1}), "graph.edges[3].dst"),
        (lambda d: d["graph"]["edges"].append({"src": "dw", "dst": "fwd", "bytes": 1}), "graph.edges[3]"),
        (lambda d: d["graph"]["ops"][0].update(compute_seconds={"P100": 1.0}), "graph.ops[0].compute_seconds.V100"),
        (lambda d: d["graph"]["ops"][0].update(eligible=True), "graph.ops[0]"),
        (lambda d: d["graph"]["gradients"][0].update(update="fwd"), "graph.gradients[0].update"),
        (lambda d: d["graph"]["gradients"][0].update(density=1.5), "graph.gradients[0].density"),
        (lambda d: d["cluster"]["devices"][0].update(type="TPU"), "cluster.devices[0].type"),
    ],
)
def test_bad_input_names_the_path(edit: Any, path: str) -> None:
    doc = two_device_doc()
    edit(doc)
    with pytest.raises(InputError) as err:
        CompressionInstance.from_dict(doc)
    assert err.value.path == path


def test_lossy_codec_is_rejected() -> None:
    doc = two_device_doc()
    doc["codecs"] = [{"name": "fp8", "method": "entropy", "lossless": False, "encode_bytes_per_second": {"V100": 1e9}, "decode_bytes_per_second": {"V100": 1e9}}]
    with pytest.raises(InputError, match="only exact synchronization"):
        CompressionInstance.from_dict(doc)


# -- the evaluator on a hand-computed fixture --------------------------------------------------


def test_evaluator_by_hand() -> None:
    inst = CompressionInstance.from_dict(two_device_doc())
    ar = evaluate(inst, plan_from_dict(inst, {}))
    # stream 3 ms, channel 3 -> 4 ms, update 4 -> 4.5 ms
    assert ar.feasible and ar.objective == pytest.approx(4.5e-3)
    sfb = evaluate(inst, plan_from_dict(inst, {"duplicated": ["dw"]}))
    # stream 1 ms, broadcasts 1 -> 1.2 ms, duplicated dw 2 x 2 ms + update 0.5 ms
    assert sfb.feasible and sfb.objective == pytest.approx(5.7e-3)
    assert sfb.details["tag_cost_seconds"] == pytest.approx(2e-3 + 0.2e-3 - 1e-3)
    assert sfb.details["memory_bytes"]["a"] == pytest.approx(1e5 + 2e5)
    # the known optimum is the all-reduce plan, found by every exact method
    assert solve(inst, "codec_select").objective == pytest.approx(4.5e-3)


def test_evaluator_rejects_inconsistent_plans() -> None:
    inst = CompressionInstance.from_dict(two_device_doc())
    bad = evaluate(inst, CompressionPlan(("dw",), {"w": "allreduce"}))
    assert not bad.feasible and "duplicated" in bad.violations[0]
    bad = evaluate(inst, CompressionPlan((), {"w": "sfb"}))
    assert not bad.feasible and "not duplicated" in bad.violations[0]
    bad = evaluate(inst, CompressionPlan(("fwd",), {"w": "allreduce"}))
    assert any("not eligible" in v for v in bad.violations)
    with pytest.raises(InputError):
        plan_from_dict(inst, {"sync": {"w": "gzip"}})


def test_memory_overflow_names_the_device() -> None:
    doc = two_device_doc()
    doc["cluster"]["devices"][1]["memory_bytes"] = 1.5e5  # base 1e5 fits, +2e5 gathered does not
    inst = CompressionInstance.from_dict(doc)
    check = evaluate(inst, plan_from_dict(inst, {"duplicated": ["dw"]}))
    assert not check.feasible
    assert any(v.startswith("device b:") and "exceeds" in v for v in check.violations)
    # tag_sfb adds memory rows and keeps all-reduce; the pure cut refuses
    res = solve(inst, "tag_sfb")
    assert res.plan.duplicated == () and res.info["memory_rows"] == 1
    with pytest.raises(InputError, match="device b"):
        solve(inst, "tag_sfb_maxflow")
    doc["cluster"]["devices"][1]["memory_bytes"] = 5e4
    with pytest.raises(InfeasibleError, match="device b"):
        solve(CompressionInstance.from_dict(doc), "allreduce_all")


# -- tag_sfb: the iteration MILP; TAG's cost program on every backend, LP relaxation, cuts -----


def _cut_plan_dup(inst: CompressionInstance) -> np.ndarray:
    """TAG's cost optimum by one minimum cut at TAG's price 1 (pruned as the plans are)."""
    dup, _, _ = min_cut_duplicated(inst, 1e-6)
    return prune_dangling(inst, dup)


def _names(inst: CompressionInstance, dup: np.ndarray) -> tuple[str, ...]:
    return tuple(inst.ops[i].name for i in np.flatnonzero(dup))


@pytest.mark.parametrize("backend", MILP_BACKENDS)
def test_tag_sfb_backends_agree_with_maxflow(backend: str, bundled: dict[str, CompressionInstance]) -> None:
    for name in ("mlp-small", "vgg16"):
        inst = bundled[name]
        cut = solve(inst, "tag_sfb_maxflow")
        milp = solve(inst, "tag_sfb", backend=backend, time_limit=30, objective="tag_cost")
        assert milp.info["tag_objective"] == pytest.approx(cut.info["tag_objective"], rel=1e-9, abs=1e-12)
        assert milp.plan.duplicated == _names(inst, _cut_plan_dup(inst))
        # the iteration MILP reaches the same least iteration time on every backend
        it = solve(inst, "tag_sfb", backend=backend, time_limit=30)
        assert it.objective == pytest.approx(solve(inst, "tag_sfb").objective, rel=1e-6)


@pytest.mark.parametrize("name", ["mlp-small", "vgg16", "bert-large", "gpt2-medium"])
def test_tag_sfb_lp_relaxation_is_integral(name: str, bundled: dict[str, CompressionInstance]) -> None:
    inst = bundled[name]
    res = solve(inst, "tag_sfb", objective="tag_cost", relaxation=True)
    lp = res.info["lp_relaxation"]
    assert lp["termination"] == "optimal" and lp["integral"], lp
    cut = solve(inst, "tag_sfb_maxflow")
    assert res.info["tag_objective"] == pytest.approx(cut.info["tag_objective"], rel=1e-9)
    dup = _cut_plan_dup(inst)
    assert res.plan.duplicated == _names(inst, dup)
    assert tag_objective(inst, dup, 1e-6) == pytest.approx(cut.info["tag_objective"], rel=1e-9)


def test_tag_sfb_on_a_deep_synthetic_graph() -> None:
    inst = CompressionInstance.from_dict(cm.synthetic(600, seed=3))
    res = solve(inst, "tag_sfb", objective="tag_cost", relaxation=True)
    cut = solve(inst, "tag_sfb_maxflow")
    assert res.info["lp_relaxation"]["integral"]
    assert res.info["tag_objective"] == pytest.approx(cut.info["tag_objective"], rel=1e-9)
    assert res.plan.duplicated == _names(inst, _cut_plan_dup(inst))
    # the iteration MILP is never worse than TAG's cost optimum, nor than any cut of the scan
    it = solve(inst, "tag_sfb")
    assert it.objective <= tag_iteration(inst, _cut_plan_dup(inst))
    assert it.objective <= cut.objective
    # some trees are duplicated only in part (the cut chooses inside trees)
    dup = set(_names(inst, _cut_plan_dup(inst)))
    partial = [g for g in inst.gradients if g.op in dup and any(inst.ops[i].name not in dup for i in np.flatnonzero(inst.tree == inst.gradient_index[g.name]))]
    whole = [g for g in inst.gradients if g.op in dup]
    assert whole, "the synthetic graph should make some SFB worthwhile"
    assert len(partial) <= len(whole)


@pytest.mark.parametrize("name", ["mlp-small", "vgg16", "bert-large", "gpt2-medium"])
def test_no_baseline_beats_tag_sfb(name: str, bundled: dict[str, CompressionInstance]) -> None:
    """tag_sfb and tag_sfb_maxflow are evaluated no slower than every baseline (zero
    tolerance); codec_select no slower than all of them (where it finishes quickly)."""
    inst = bundled[name]
    base = {b: solve(inst, b).objective for b in BASELINES}
    tag = solve(inst, "tag_sfb")
    cut = solve(inst, "tag_sfb_maxflow")
    for b, value in base.items():
        assert tag.objective <= value, (b, tag.objective, value)
        assert cut.objective <= value, (b, cut.objective, value)
    # the MILP's dual bound holds over TAG's plans; the result claims no instance optimum
    space = tag.info["tag_space"]
    assert space["termination"] == "optimal" and space["bound"] <= tag.objective
    # (the gap is the bound's margin: 1e-6 of feasibility tolerance and 1e-6 of the MIP's
    # absolute gap, `solvers.common.MIP_ABSOLUTE_GAP`, on an objective of ~1)
    assert space["gap"] <= 3e-6 and tag.status.value == "feasible"
    if name in ("mlp-small", "vgg16"):
        sel = solve(inst, "codec_select", time_limit=30)
        assert sel.objective <= min(tag.objective, cut.objective, *base.values())


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_tag_iteration_model_is_the_evaluator(seed: int, plan_seed: int) -> None:
    """A random TAG plan fixed in the iteration MILP: its LP value is the evaluator's time,
    and the schedule vector of the plan is feasible with that value."""
    from distplan.solvers.base import get_backend

    inst = CompressionInstance.from_dict(random_doc(seed))
    rng = np.random.default_rng(plan_seed)
    dup = np.zeros(inst.n_ops, dtype=bool)
    for g in range(inst.n_gradients):
        if inst.eligible[inst.grad_op[g]] and rng.random() < 0.5:
            tree = np.flatnonzero(inst.eligible & (inst.tree == g))
            dup[tree[rng.random(tree.size) < 0.7]] = True
            dup[inst.grad_op[g]] = True
    dup = prune_dangling(inst, dup)
    methods = ["sfb" if dup[p] else "allreduce" for p in inst.grad_op.tolist()]
    truth = evaluate(inst, make_plan(inst, dup, methods)).objective
    model, index = TAG_ITERATION.build(inst, name="fixed")
    unit = index.si.unit
    x = model["duplicate"]
    model.set_bounds(x, lb=dup.astype(float), ub=dup.astype(float))
    arrays = model.to_arrays()
    res = get_backend("highs").solve(arrays)
    assert res.objective * unit == pytest.approx(truth, rel=1e-7)
    vec = tag_warm_vector(model, inst, index, dup)
    act = arrays.A @ vec
    assert np.all(act >= arrays.row_lo - 1e-9) and np.all(act <= arrays.row_hi + 1e-9)
    assert vec[model["iteration"].index[0]] * unit == pytest.approx(truth, rel=1e-12)


def test_min_sfb_channel_is_the_cheapest_cut() -> None:
    """The tree pass equals enumeration over every duplicated set containing the producer."""
    inst = CompressionInstance.from_dict(cm.synthetic(120, seed=5))
    cd = cost_data(inst)
    fast = min_sfb_channel(inst)
    for g in range(inst.n_gradients):
        tree = np.flatnonzero(inst.eligible & (inst.tree == g))
        p = int(inst.grad_op[g])
        others = [int(i) for i in tree if i != p]
        best = math.inf
        for r in range(len(others) + 1):
            for extra in itertools.combinations(others, r):
                dup = np.zeros(inst.n_ops, dtype=bool)
                dup[[p, *extra]] = True
                into = dup[cd.cand_dst] & ~dup[cd.cand_src]
                best = min(best, float(cd.cand_seconds[into].sum()))
        assert fast[g] == pytest.approx(best, rel=1e-12)


def test_export_codec_select(tmp_path: Any) -> None:
    out = tmp_path / "m.lp"
    assert cli_main(["export", "compression-mlp-small", "-f", "codec_select", "--to", str(out)]) == 0
    assert "order" in out.read_text()


# -- codec_select -----------------------------------------------------------------------------


def test_codec_select_exact_on_vgg(bundled: dict[str, CompressionInstance]) -> None:
    inst = bundled["vgg16"]
    res = solve(inst, "codec_select", time_limit=60)
    assert res.status.value == "optimal"
    assert res.solver_results[-1].objective == pytest.approx(res.objective, rel=1e-9)
    for name in (*BASELINES, "tag_sfb"):
        assert res.objective <= solve(inst, name).objective * (1 + 1e-9)


def test_codec_select_never_worse_on_bert(bundled: dict[str, CompressionInstance]) -> None:
    inst = bundled["bert-large"]
    res = solve(inst, "codec_select", time_limit=2, window=2, improve_seconds=1.0)
    tag = solve(inst, "tag_sfb")
    assert res.objective <= tag.objective
    assert res.plan.sync["emb.word.lookup"] in ("sfb", "sparse-index", "zstd-1", "zstd-3", "lz4")
    # a windowed order space proves nothing about the instance: only the load bound holds
    assert all(not b.source.startswith("codec_select") for b in res.bounds)
    assert res.bound_source is not None and res.bound_source.startswith("compression load bound")
    assert res.gap is not None and res.bound <= res.objective  # how small the gap gets depends on time: benchmarks


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000))
@example(180)  # terms of ~1e-5 s: in seconds HiGHS's LP stopped 1e-4 (relative) above the optimum
@example(367)  # codec_select "optimal" at the default gap 1e-4 was 2.9e-5 above the optimum
def test_random_instances_against_enumeration(seed: int) -> None:
    inst = CompressionInstance.from_dict(random_doc(seed))
    cut = solve(inst, "tag_sfb_maxflow")
    milp = solve(inst, "tag_sfb", objective="tag_cost", relaxation=True)
    assert milp.info["lp_relaxation"]["integral"]
    assert milp.info["tag_objective"] == pytest.approx(cut.info["tag_objective"], rel=1e-9, abs=1e-12)
    tag = solve(inst, "tag_sfb")
    # (a MIP gap of 1e-9: at the default 1e-4 an "optimal" plan may be 3e-5 above the
    # optimum, seed 367, and the comparison with enumeration below is at 1e-7)
    sel = solve(inst, "codec_select", time_limit=20, mip_gap=1e-9)
    for name in BASELINES:
        other = solve(inst, name)
        if all(m in ("allreduce", "sfb") for m in other.plan.sync.values()):  # a TAG plan
            assert tag.objective <= other.objective
        assert sel.objective <= other.objective * (1 + 1e-9) + 1e-12
    assert tag.objective <= cut.objective * (1 + 2e-6)  # the cut scan is no candidate of tag_sfb
    assert sel.objective <= tag.objective * (1 + 1e-9) + 1e-12
    if inst.n_gradients <= 3:
        # tag_sfb is the least evaluated time over TAG's plans (HiGHS's gap: 1e-6)
        assert tag.objective == pytest.approx(brute_force_tag(inst), rel=2e-6)
        best = brute_force(inst)
        assert compression_bounds(inst)[0].value <= best * (1 + 1e-12)
        assert sel.objective == pytest.approx(best, rel=1e-7)
        # optimal, or a proven gap at the solver's feasibility tolerance (big-M rows)
        assert sel.status.value == "optimal" or (sel.gap is not None and sel.gap <= 1e-5)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.integers(0, 10_000))
def test_formulation_schedule_matches_evaluator(seed: int, plan_seed: int) -> None:
    """Random plans: the formulations' least schedule equals the evaluator's simulation."""
    inst = CompressionInstance.from_dict(random_doc(seed))
    rng = np.random.default_rng(plan_seed)
    cd = cost_data(inst)
    dup = np.zeros(inst.n_ops, dtype=bool)
    methods = []
    for g in range(inst.n_gradients):
        opts = [o.method for o in cd.options if o.gradient == g]
        if inst.eligible[inst.grad_op[g]] and rng.random() < 0.4:
            dup |= inst.eligible & (inst.tree == g)
            methods.append("sfb")
        else:
            methods.append(opts[int(rng.integers(0, len(opts)))])
    order = rng.permutation(inst.n_gradients).tolist()
    plan = make_plan(inst, dup, methods, order)
    check = evaluate(inst, plan)
    sched = least_schedule(inst, choice_from_plan(inst, plan))
    assert sched["iteration"] == pytest.approx(check.objective, rel=1e-12, abs=1e-15)


def test_milp_objective_is_the_evaluator_objective() -> None:
    """Solve codec_select with its choices fixed to a plan: the MILP value is the evaluator's."""
    from distplan.formulations.compression.select import CODEC_SELECT, warm_vector
    from distplan.solvers.base import get_backend

    inst = CompressionInstance.from_dict(random_doc(7))
    for plan_name in ("allreduce_all", "tag_sfb", "greedy_by_saving"):
        plan = solve(inst, plan_name).plan
        model, index = CODEC_SELECT.build(inst, {"window": None}, name="fixed")
        ch = choice_from_plan(inst, plan)
        vec = warm_vector(model, inst, index, ch)
        for name in ("duplicate", "method", "order"):
            model.set_bounds(model[name], lb=vec[model[name].index], ub=vec[model[name].index])
        res = get_backend("highs").solve(model.to_arrays())
        assert res.objective * index.si.unit == pytest.approx(evaluate(inst, plan).objective, rel=1e-7)


def test_poseidon_rule() -> None:
    doc = two_device_doc()
    inst = CompressionInstance.from_dict(doc)  # 8 < 500*500/1000 = 250: SFB
    assert solve(inst, "sfb_poseidon_rule").plan.sync == {"w": "sfb"}
    doc["graph"]["gradients"][0]["factor_rows"] = 250
    inst = CompressionInstance.from_dict(doc)
    assert solve(inst, "sfb_poseidon_rule").plan.sync == {"w": "allreduce"}


def test_every_formulation_is_checked(bundled: dict[str, CompressionInstance]) -> None:
    inst = bundled["mlp-small"]
    ar = solve(inst, "allreduce_all").objective
    for name in FORMULATIONS:
        res = solve(inst, name, time_limit=20)
        assert res.check is not None and res.check.feasible
        assert res.objective <= ar * (1 + 1e-9) or name == "sfb_poseidon_rule"
    model, _ = get_formulation("compression", "codec_select").build(inst, {"window": None})
    assert model.stats()["binaries"] > 0


# -- codecs ------------------------------------------------------------------------------------


def test_codecs_round_trip_and_ratios() -> None:
    dense = gradient_tensor(1 << 14, "float32", 1.0, 256, seed=1)
    sparse = gradient_tensor(1 << 14, "float32", 0.02, 256, seed=1)
    half = gradient_tensor(1 << 14, "float16", 1.0, 256, seed=1)
    assert half.dtype == np.float16 and np.count_nonzero(sparse.any(axis=1)) == 1
    zstd = CodecSpec("zstd-1", "entropy", "zstandard", 1)
    sp_idx = CodecSpec("sparse-index", "sparse_index", "numpy", None)
    assert 0.5 < measure_one(zstd, dense, 1)["ratio"] < 1.05
    assert measure_one(zstd, sparse, 1)["ratio"] < 0.1
    assert measure_one(sp_idx, sparse, 1)["ratio"] == pytest.approx(1 / 64 * (1 + 4 / 1024), rel=1e-9)
    section = measure_codecs([("float32", 1.0, 256), ("float16", 1.0, 256), ("float32", 0.02, 256)], ["V100", "P100"], elements=1 << 12, repeat=1)
    names = {c["name"] for c in section}
    assert {"zstd-1", "lz4", "sparse-index"} <= names
    assert all(set(c["encode_bytes_per_second"]) == {"P100", "V100"} for c in section)


def test_measure_codecs_cli(tmp_path: Any) -> None:
    out = tmp_path / "measured.json"
    assert cli_main(["measure-codecs", "compression-mlp-small", "-o", str(out), "--elements", "4096", "--repeat", "1"]) == 0
    inst = load_instance(out)
    assert {c.name for c in inst.codecs} >= {"zstd-1", "zstd-3", "lz4"}
    assert all(c.measured and c.measured["elements"] == 4096 for c in inst.codecs)
    assert cli_main(["solve", str(out), "-f", "codec_select", "--time-limit", "10"]) == 0


def test_measure_codecs_shows_progress(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A long measurement says on stderr that it runs (audit of session 27: 19 s at 5e7
    elements printed nothing until 'wrote'); stdout keeps only the table."""
    import time

    from distplan.cli import codecs, progress

    real = codecs.measure_instance

    def slow(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)
        return real(*args, **kwargs)

    monkeypatch.setattr(codecs, "measure_instance", slow)
    monkeypatch.setattr(progress, "QUIET_SECONDS", 0.05)
    monkeypatch.setattr(progress, "LINE_EVERY_SECONDS", 0.05)
    assert cli_main(["measure-codecs", "compression-mlp-small", "-o", str(tmp_path / "m.json"), "--elements", "4096", "--repeat", "1", "--codecs", "lz4"]) == 0
    out, err = capsys.readouterr()
    assert "measuring 1 codecs on compression-mlp-small: done in " in err and "measuring" not in out


def test_plan_file_round_trip(tmp_path: Any, bundled: dict[str, CompressionInstance]) -> None:
    inst = bundled["vgg16"]
    res = solve(inst, "tag_sfb_maxflow")
    doc = copy.deepcopy(res.plan.to_dict())
    again = evaluate(inst, plan_from_dict(inst, doc))
    assert again.objective == pytest.approx(res.objective, rel=1e-12)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(doc))
    assert cli_main(["evaluate", "compression-vgg16", str(path)]) == 0


@pytest.mark.parametrize("formulation", [f.name for f in formulations("compression")])
def test_an_instance_without_gradients_has_its_one_plan(formulation: str) -> None:
    """No gradient to send: tag_sfb and codec_select built empty schedules and raised
    ValueError (exit 1, review rev10); every formulation returns the all-compute plan, optimal."""
    from distplan.models.compression_instance import CompressionInstance

    doc = load_instance("compression-mlp-small").to_dict()
    doc["graph"]["gradients"] = []
    for op in doc["graph"]["ops"]:
        op["eligible"] = False
    res = solve(CompressionInstance.from_dict(doc), formulation)
    assert res.check is not None and res.check.feasible
    assert res.status.value == "optimal" and res.bound is not None and res.bound <= res.objective
