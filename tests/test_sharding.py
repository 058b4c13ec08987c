"""Sharding: cost model, evaluator, Alpa's ILP, TAP folding, baselines, errors."""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import networkx as nx
import numpy as np
import pytest
from conftest import backend_params, takes_milp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import distplan
from distplan.errors import InfeasibleError, InputError
from distplan.formulations import folding
from distplan.formulations.folding import Family, FoldingError, LabelledGraph, check_family, find_repeated_subgraphs
from distplan.formulations.registry import get_formulation
from distplan.formulations.sharding.alpa_ilp import build_sharding_model
from distplan.formulations.sharding.costgraph import CostTables, build_cost_graph, build_folded_cost_graph, build_skeleton
from distplan.formulations.sharding.expert_plans import megatron_plan
from distplan.formulations.sharding.tap import fold_instance
from distplan.instances import bundled, load_document
from distplan.instances.transformer import gpt3_175b, transformer
from distplan.models.catalogue import device
from distplan.models.common import instance_from_dict
from distplan.models.sharding import ShardingInstance, ShardingPlan, evaluate
from distplan.models.sharding_costs import (
    enumerate_strategies,
    op_cost,
    parse_strategy,
    reshard_seconds,
    strategy_name,
    tensor_spec,
)
from distplan.solvers.base import all_backends

MILP_BACKENDS = backend_params(takes_milp)
_AVAILABLE_MILP = [b.name for b in all_backends() if b.available() and b.capabilities.milp]
#: the backends the folding sweep runs on: highs and pulp-cbc (the issue's pair), else the next available
SWEEP_BACKENDS = [b for b in ("highs", "pulp-cbc", "scip", "cvxpy-SCIPY", "pyomo-cbc") if b in _AVAILABLE_MILP][:2]
BUNDLED = sorted(n for n, e in bundled().items() if e["kind"] == "sharding")
A100 = device("A100-80GB")


def tiny_doc(mesh: list[int] | None = None, memory: float | None = None, **dims: int) -> dict[str, Any]:
    """x[b,h] -> fc (linear [h,f]) -> loss over f."""
    mesh = mesh or [4]
    sizes = {"b": 8, "h": 1024, "f": 4096, **dims}
    m: dict[str, Any] = {"shape": mesh, "bandwidth": [1e11] * len(mesh), "latency": [1e-6] * len(mesh), "device": "A100-80GB"}
    if memory is not None:
        m["memory"] = memory
    return {
        "format": "distplan/1",
        "kind": "sharding",
        "name": "tiny",
        "mesh": m,
        "training": {"batch_dim": "b"},
        "graph": {
            "dims": sizes,
            "ops": [
                {"name": "x", "type": "input", "out": ["b", "h"]},
                {"name": "fc", "type": "linear", "inputs": ["x"], "out": ["b", "f"], "params": [{"name": "w", "dims": ["h", "f"]}]},
                {"name": "loss", "type": "loss", "inputs": ["fc"], "out": ["b"], "dtype": "fp32"},
            ],
        },
    }


def tiny(**kw: Any) -> ShardingInstance:
    return ShardingInstance.from_dict(tiny_doc(**kw))


# -- the cost model, against hand-written formulas ----------------------------------------------


def roofline(flops: float, nbytes: float, peak: float, bandwidth: float) -> float:
    return max(flops / (peak * 0.7), nbytes / (bandwidth * 0.7)) + 7e-6


def ring_all_reduce(n: float, p: int = 4, alpha: float = 1e-6, bw: float = 1e11) -> float:
    return 2 * (p - 1) * alpha + 2 * (p - 1) / p * n / bw


def ring_all_gather(n: float, p: int = 4, alpha: float = 1e-6, bw: float = 1e11) -> float:
    return (p - 1) * alpha + (p - 1) / p * n / bw


def fc_compute(shards: int, x_bytes: float, w_bytes: float, out_bytes: float) -> float:
    return 3 * roofline(2 * 8 * 1024 * 4096 / shards, x_bytes + w_bytes + out_bytes, A100.peak_fp16_flops, A100.memory_bandwidth)


def loss_compute(logit_bytes: float, out_bytes: float, shards: int = 1) -> float:
    return 3 * roofline(5 * 8 * 4096 / shards, logit_bytes + out_bytes, A100.peak_fp32_flops, A100.memory_bandwidth)


X, W, OUT = 8 * 1024 * 2, 1024 * 4096 * 2, 8 * 4096 * 2  # bytes (fp16)


def test_column_split_costs_match_the_formula() -> None:
    inst = tiny()
    plan = ShardingPlan({"x": "R", "fc": "S(f)", "loss": "R"})
    check = evaluate(inst, plan)
    expected = fc_compute(4, X, W / 4, OUT / 4) + loss_compute(OUT, 8 * 4) + ring_all_gather(OUT)
    assert check.feasible
    assert check.objective == pytest.approx(expected, rel=1e-12)
    params = 1024 * 4096 / 4 * 16
    acts = X + OUT / 4 + 8 * 4
    assert check.details["memory_bytes"] == pytest.approx(params + acts, rel=1e-12)


def test_contracting_split_pays_an_all_reduce_and_batch_split_syncs_gradients() -> None:
    inst = tiny()
    row = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(h)", "loss": "R"}))
    assert row.objective == pytest.approx(fc_compute(4, X / 4, W / 4, OUT) + ring_all_reduce(OUT) + loss_compute(OUT, 32), rel=1e-12)
    dp = evaluate(inst, ShardingPlan({"x": "S(b)", "fc": "S(b)", "loss": "S(b)"}))
    assert dp.objective == pytest.approx(fc_compute(4, X / 4, W, OUT / 4) + ring_all_reduce(W) + loss_compute(OUT / 4, 8, 4), rel=1e-12)
    # replicated: full compute on every device, no communication
    rep = evaluate(inst, ShardingPlan({"x": "R", "fc": "R", "loss": "R"}))
    assert rep.objective == pytest.approx(fc_compute(1, X, W, OUT) + loss_compute(OUT, 32), rel=1e-12)


def test_resharding_between_two_splits_is_an_all_to_all_both_ways() -> None:
    inst = tiny()
    a = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(b)", "loss": "S(b)"}))
    b = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(f)", "loss": "S(b)"}))
    a2a = 3 * 1e-6 + 3 / 16 * OUT / 1e11
    fc_b = fc_compute(4, X / 4, W, OUT / 4) + ring_all_reduce(W)
    fc_f = fc_compute(4, X, W / 4, OUT / 4)
    assert b.objective - a.objective == pytest.approx(fc_f - fc_b + 2 * a2a, rel=1e-9)


def test_strategies_are_generated_from_semantics() -> None:
    inst = tiny()
    names = [strategy_name(s) for s in enumerate_strategies(inst.semantics(1), inst.cost_context)]
    assert names == ["R", "S(b)", "S(h)", "S(f)"]
    two = tiny(mesh=[2, 4])
    names2 = {strategy_name(s) for s in enumerate_strategies(two.semantics(1), two.cost_context)}
    assert {"RR", "S(b)S(f)", "S(h)S(b)", "S(b)S(b)", "RS(f)"} <= names2
    assert "S(f)S(f)" not in names2  # only the batch dim spans two axes
    odd = tiny(mesh=[3])  # b=8, h=1024, f=4096 do not divide by 3
    assert [strategy_name(s) for s in enumerate_strategies(odd.semantics(1), odd.cost_context)] == ["R"]
    for s in enumerate_strategies(two.semantics(1), two.cost_context):
        assert parse_strategy(strategy_name(s), 2) == s


def test_nothing_to_decide_is_solved_without_a_solver() -> None:
    inst = tiny(mesh=[3])  # no dim divides by 3: every op is replicated
    for formulation in ("alpa_ilp", "tap"):
        res = distplan.solve(inst, formulation)
        assert res.status.value == "optimal" and set(res.plan.strategies.values()) == {"R"}


def test_evaluator_rejects_bad_plans() -> None:
    inst = tiny()
    assert not evaluate(inst, ShardingPlan({"x": "R", "fc": "S(f)"})).feasible  # loss missing
    bad = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(q)", "loss": "R"}))
    assert not bad.feasible and "cannot be split along 'q'" in bad.violations[0]
    assert not evaluate(inst, ShardingPlan({"x": "R", "fc": "S(f)S(b)", "loss": "R"})).feasible
    assert not evaluate(inst, ShardingPlan({"x": "R", "fc": "R", "loss": "R", "ghost": "R"})).feasible
    d = tiny_doc()
    d["graph"]["ops"].insert(2, {"name": "act", "type": "elementwise", "inputs": ["fc"], "out": ["b", "f"]})
    d["graph"]["ops"][3]["inputs"] = ["act"]
    follow = ShardingInstance.from_dict(d)
    assert evaluate(follow, ShardingPlan({"x": "R", "fc": "S(f)", "act": "S(f)", "loss": "R"})).feasible
    stray = evaluate(follow, ShardingPlan({"x": "R", "fc": "S(f)", "act": "R", "loss": "R"}))
    assert not stray.feasible and "follows its input 'fc'" in stray.violations[0]
    small = tiny(memory=1e6)
    over = evaluate(small, ShardingPlan({"x": "R", "fc": "R", "loss": "R"}))
    assert not over.feasible and "GB missing" in over.violations[0]


# -- instances ----------------------------------------------------------------------------------


def test_round_trip_and_bundled_instances() -> None:
    inst = transformer(2, 256, 4, 64, 4, 1000, mesh=(2, 2))
    d = inst.to_dict()
    assert ShardingInstance.from_dict(d).to_dict() == d
    assert len(BUNDLED) >= 6
    for name in BUNDLED:
        doc = load_document(name)
        assert instance_from_dict(doc).to_dict() == doc
    assert gpt3_175b().summary()["parameters"] == pytest.approx(175e9, rel=0.01)
    with pytest.raises(InputError, match="heads"):
        transformer(2, 100, 3, 64, 4, 1000)


@pytest.mark.parametrize(
    ("edit", "path", "words"),
    [
        (lambda d: d["graph"]["ops"][1].update(inputs=["nope"]), "graph.ops[1].inputs[0]", "unknown op"),
        (lambda d: d["graph"]["ops"][1].update(out=["b", "h"]), "graph.ops[1].out", "produces dims"),
        (lambda d: d["graph"]["ops"][1].update(type="conv9"), "graph.ops[1].type", "unknown op type"),
        (lambda d: d["graph"]["ops"][1]["params"][0].update(dims=["h", "zz"]), "graph.ops[1].params[0].dims[1]", "unknown dimension"),
        (lambda d: d["mesh"].update(bandwidth=[1e11, 1e11]), "mesh.bandwidth", "one per mesh axis"),
        (lambda d: d["mesh"].update(device="TPU9"), "mesh.device", "unknown device"),
        (lambda d: d["training"].update(batch_dim="n"), "training.batch_dim", "not a dim"),
        (lambda d: d["graph"]["ops"].insert(0, {**copy.deepcopy(d["graph"]["ops"][1]), "name": "early"}), "graph.ops[0].inputs[0]", "comes later"),
    ],
)
def test_bad_input_names_the_path(edit: Any, path: str, words: str) -> None:
    d = tiny_doc()
    edit(d)
    with pytest.raises(InputError) as err:
        ShardingInstance.from_dict(d)
    assert err.value.path == path and words in str(err.value)


def test_views_merge_into_their_producer() -> None:
    d = tiny_doc(a=16, e=256)
    d["graph"]["ops"].insert(2, {"name": "split", "type": "view", "inputs": ["fc"], "out": ["b", "a", "e"]})
    d["graph"]["ops"][3] = {"name": "loss", "type": "loss", "inputs": ["split"], "out": ["b", "a"], "dtype": "fp32"}
    inst = ShardingInstance.from_dict(d)
    sk = build_skeleton(inst)
    assert [inst.ops[k].name for k in sk.node_ops[1]] == ["fc", "split"]
    graph = build_cost_graph(inst)
    fc_node = sk.node_ops.index((1, 2))
    names = [strategy_name(s[1]) for s in graph.node_strategies[fc_node]]
    assert names == ["R", "S(b)", "R", "S(a)"]  # S(f) maps to the leading dim a; S(h) is reduced first
    follow = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(f)", "split": "S(a)", "loss": "S(a)"}))
    gather = evaluate(inst, ShardingPlan({"x": "R", "fc": "S(f)", "split": "R", "loss": "S(a)"}))
    assert follow.feasible and gather.objective > follow.objective  # the view itself costs nothing
    res = distplan.solve(inst, "alpa_ilp")
    assert res.status.value == "optimal"


def plain_evaluation(inst: ShardingInstance, plan: ShardingPlan) -> tuple[float, float]:
    """Iteration time (s) and memory (bytes) summed op by op and edge by edge, nothing cached."""
    ctx, ndim = inst.cost_context, len(inst.mesh.shape)
    chosen = [parse_strategy(plan.strategies[op.name], ndim) for op in inst.ops]
    compute = comm = reshard = param_bytes = act_bytes = 0.0
    for k, op in enumerate(inst.ops):
        sem = inst.semantics(k)
        c = op_cost(sem, chosen[k], ctx)
        compute += c.compute
        comm += c.communication
        param_bytes += c.param_bytes
        act_bytes += c.activation_bytes
        edge_t = 0.0
        for j, src in enumerate(op.inputs):
            out = inst.semantics(inst.index[src]).output
            edge_t += reshard_seconds(out, tensor_spec(out, chosen[inst.index[src]]), tensor_spec(sem.inputs[j], chosen[k]), ctx)
        reshard += edge_t
    return compute + comm + reshard, param_bytes + act_bytes


@pytest.mark.parametrize("mesh", [[8], [2, 4]])
def test_evaluator_caches_change_nothing(mesh: list[int]) -> None:
    """The evaluator computes each cost once per (signature, strategy) and each resharding
    once per (producer, consumer, slot, strategies): bit for bit the plain sums, on random
    plans where copies of a layer take different strategies. The cost graph (its tables
    cached per signature, layout and tensor) prices the same plans alike, and
    `plan_memory` sums their node memories bit for bit."""
    from distplan.formulations.sharding.chain_program import plan_memory

    bandwidth = (25e9, 240e9) if len(mesh) == 2 else (25e9,)
    inst = transformer(3, 256, 4, 128, 8, 1000, mesh=tuple(mesh) if len(mesh) > 1 else mesh[0], device="V100", memory=1e15, bandwidth=bandwidth)
    sk = build_skeleton(inst)
    tables = CostTables(inst)
    graph = build_cost_graph(inst, sk, tables)
    rng = np.random.default_rng(3)
    for _ in range(8):
        choice = [int(rng.integers(len(c))) for c in graph.node_cost]
        plan = ShardingPlan(graph.plan(choice))
        check = evaluate(inst, plan)
        assert check.feasible
        assert (check.objective, check.details["memory_bytes"]) == plain_evaluation(inst, plan)
        priced = sum(float(graph.node_cost[i][k]) for i, k in enumerate(choice))
        priced += sum(float(M[choice[u], choice[v]]) for u, v, M in zip(graph.edge_u.tolist(), graph.edge_v.tolist(), graph.edge_cost))
        assert priced == pytest.approx(check.objective, rel=1e-12)
        memory = sum(float(graph.node_memory[i][k]) for i, k in enumerate(choice))
        assert plan_memory(sk, tables, np.array(choice)) == memory == pytest.approx(check.details["memory_bytes"], rel=1e-12)


# -- Alpa's ILP ---------------------------------------------------------------------------------


def brute_force(inst: ShardingInstance) -> float:
    """Least evaluator objective over every combination of cost-graph node choices."""
    graph = build_cost_graph(inst)
    best = math.inf
    for choice in itertools.product(*[range(len(c)) for c in graph.node_cost]):
        check = evaluate(inst, ShardingPlan(graph.plan(choice)))
        if check.feasible:
            best = min(best, check.objective)
    return best


def mlp_doc(mesh: list[int], b: int, h: int, f: int, bw: list[float], memory: float | None) -> dict[str, Any]:
    m: dict[str, Any] = {"shape": mesh, "bandwidth": bw, "latency": [2e-6] * len(mesh), "device": "V100-16GB"}
    if memory is not None:
        m["memory"] = memory
    return {
        "format": "distplan/1",
        "kind": "sharding",
        "name": "mlp",
        "mesh": m,
        "training": {"batch_dim": "b"},
        "graph": {
            "dims": {"b": b, "h": h, "f": f},
            "ops": [
                {"name": "x", "type": "input", "out": ["b", "h"]},
                {"name": "ln", "type": "layernorm", "inputs": ["x"], "out": ["b", "h"], "params": [{"name": "g", "dims": ["h"]}]},
                {"name": "fc1", "type": "linear", "inputs": ["ln"], "out": ["b", "f"], "params": [{"name": "w", "dims": ["h", "f"]}]},
                {"name": "act", "type": "elementwise", "inputs": ["fc1"], "out": ["b", "f"], "attrs": {"flops_per_element": 8}},
                {"name": "fc2", "type": "linear", "inputs": ["act"], "out": ["b", "h"], "params": [{"name": "w", "dims": ["f", "h"]}]},
                {"name": "res", "type": "elementwise", "inputs": ["fc2", "ln"], "out": ["b", "h"]},
                {"name": "loss", "type": "loss", "inputs": ["res"], "out": ["b"], "dtype": "fp32"},
            ],
        },
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    mesh_b=st.sampled_from([([2], 1), ([2], 16), ([4], 4), ([4], 16), ([2, 2], 1)]),
    h=st.sampled_from([256, 2048]),
    f=st.sampled_from([1024, 8192]),
    bw=st.sampled_from([1e10, 3e11]),
    mem_frac=st.sampled_from([None, 0.6, 0.9]),
)
def test_ilp_equals_brute_force_over_the_cost_graph(mesh_b: tuple[list[int], int], h: int, f: int, bw: float, mem_frac: float | None) -> None:
    mesh, b = mesh_b
    inst = ShardingInstance.from_dict(mlp_doc(mesh, b, h, f, [bw] * len(mesh), None))
    if mem_frac is not None:
        graph = build_cost_graph(inst)
        least = sum(float(m.min()) for m in graph.node_memory)
        most = sum(float(m.max()) for m in graph.node_memory)
        inst = inst.with_memory(least + mem_frac * (most - least))
    best = brute_force(inst)
    res = distplan.solve(inst, "alpa_ilp")
    assert res.objective == pytest.approx(best, rel=1e-6)
    assert res.status.value == "optimal" and res.bound <= res.objective * (1 + 1e-9)
    cheapest = [b.value for b in res.bounds if b.source.startswith("every op")]
    assert cheapest and cheapest[0] <= res.objective * (1 + 1e-12)


def test_one_layer_ilp_finds_megatron_column_row_plan() -> None:
    """One GPT layer, 1-D tensor-parallel mesh of 8, batch 1 (data parallelism impossible),
    no memory pressure: the ILP costs no more than Megatron and picks its layer plan."""
    inst = distplan.load_instance("gpt-1layer-tp8")
    ilp = distplan.solve(inst, "alpa_ilp")
    meg = distplan.solve(inst, "megatron")
    assert ilp.status.value == "optimal"
    assert ilp.objective <= meg.objective * (1 + 1e-12)
    layer = [op.name for op in inst.ops if op.name.startswith("l0.")]
    assert {n: ilp.plan.strategies[n] for n in layer} == {n: meg.plan.strategies[n] for n in layer}
    assert ilp.plan.strategies["l0.qkv"] == "S(a)" and ilp.plan.strategies["l0.fc1"] == "S(f)"  # column-parallel
    assert ilp.plan.strategies["l0.proj"] == "S(a)" and ilp.plan.strategies["l0.fc2"] == "S(f)"  # row-parallel
    # outside the layer the ILP splits the embedding table on hidden (all-gather) instead of
    # Megatron's vocab-parallel all-reduce: cheaper in the alpha-beta model
    assert ilp.plan.strategies["embed"] == "S(h)" and meg.plan.strategies["embed"] == "S(v)"


@pytest.mark.parametrize("backend", MILP_BACKENDS)
def test_backends_agree_on_a_two_layer_model(backend: str) -> None:
    inst = distplan.load_instance("gpt-2layer-2x2")
    res = distplan.solve(inst, "alpa_ilp", backend=backend, time_limit=60)
    assert res.objective == pytest.approx(0.005498693508554467, rel=1e-6)


def test_lp_relaxation_is_reported() -> None:
    tp = distplan.solve("gpt-1layer-tp8", "alpa_ilp", lp_first=True)
    assert tp.info["lp_relaxation"]["integral"] is True and tp.status.value == "optimal"
    tight = distplan.load_instance("gpt-4layer-memtight")
    lp = distplan.solve(tight, "alpa_ilp", lp_first=True)
    ilp = distplan.solve(tight, "alpa_ilp")
    assert lp.info["lp_relaxation"]["integral"] is False  # the memory row makes it fractional
    assert lp.objective == pytest.approx(ilp.objective, rel=1e-6)
    assert lp.info["lp_relaxation"]["objective"] <= ilp.objective * (1 + 1e-9)


def test_infinite_costs_are_fixed_to_zero() -> None:
    inst = transformer(1, 512, 8, 128, 8, 1000, mesh=(2, 2), all_to_all=False)
    graph = build_cost_graph(inst)
    model, data = build_sharding_model(graph)
    arrays = model.to_arrays()
    e = model.var_blocks["e"]
    fixed = arrays.col_hi[e.start : e.stop] == 0
    infinite = int(np.sum(~np.isfinite(np.concatenate([m.ravel() for m in graph.edge_cost]))))
    assert 0 < fixed.sum() <= infinite
    assert np.all(np.isfinite(arrays.c))
    res = distplan.solve(inst, "alpa_ilp")
    assert math.isfinite(res.objective) and res.check.feasible


# -- memory --------------------------------------------------------------------------------------


def test_shrinking_memory_shards_more_until_infeasible() -> None:
    base = transformer(2, 2048, 16, 1024, 16, 50257, mesh=4, device="V100-16GB")
    free = distplan.solve(base.with_memory(1e12), "alpa_ilp")
    m0 = free.check.details["memory_bytes"]
    previous = free
    for frac in (0.85, 0.7):
        res = distplan.solve(base.with_memory(m0 * frac), "alpa_ilp")
        d, p = res.check.details, previous.check.details
        assert d["memory_bytes"] <= m0 * frac * (1 + 1e-9)
        assert d["param_state_bytes"] < p["param_state_bytes"]  # weights are split more ways
        assert res.objective >= previous.objective * (1 - 1e-9)
        previous = res
    with pytest.raises(InfeasibleError) as err:
        distplan.solve(base.with_memory(m0 * 0.3), "alpa_ilp")
    msg = str(err.value)
    assert "device 0" in msg and "GB missing" in msg and "end of the forward pass" in msg
    missing = err.value.details["missing_bytes"]
    assert missing == pytest.approx(err.value.details["needed_bytes"] - m0 * 0.3)
    # exactly the least memory is feasible
    ok = distplan.solve(base.with_memory(err.value.details["needed_bytes"] * (1 + 1e-9)), "alpa_ilp")
    assert ok.check.feasible


def test_baselines_report_their_memory_shortfall() -> None:
    inst = distplan.load_instance("gpt3-4layer-8gpu")
    with pytest.raises(InfeasibleError, match="data_parallel plan needs .* GB missing"):
        distplan.solve(inst, "data_parallel")
    meg = distplan.solve(inst, "megatron")
    assert meg.plan.strategies["l1.qkv"] == "S(a)" and meg.plan.strategies["head"] == "S(v)"
    assert distplan.solve(inst, "alpa_ilp").objective <= meg.objective


def test_data_parallel_splits_the_batch_everywhere() -> None:
    inst = transformer(1, 256, 4, 64, 8, 1000, mesh=(2, 2))
    res = distplan.solve(inst, "data_parallel")
    assert set(res.plan.strategies.values()) == {"S(b)S(b)"}
    assert distplan.solve(inst, "alpa_ilp").objective <= res.objective * (1 + 1e-12)


def test_megatron_uses_the_fastest_axis_for_tensor_parallelism() -> None:
    inst = transformer(1, 256, 4, 64, 8, 1000, mesh=(2, 4))
    plan = megatron_plan(inst)
    assert plan.strategies["l0.fc1"] == "S(b)S(f)" and plan.strategies["l0.ln1"] == "S(b)R"


# -- folding ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", SWEEP_BACKENDS)
@pytest.mark.parametrize("layers", [2, 4, 8, 24])
def test_tap_folding_is_exact(layers: int, backend: str) -> None:
    """GPT-3 shapes on 8 devices: boundary layers differ from the interior in the optimum,
    so only copies with identical surroundings may share variables (the generic folding:
    the layers next to the embedding and the head stay apart); tap's exact walk takes every
    layer as a copy (consecutive blocks, or the folding's copies grown at their ends)."""
    inst = gpt3_175b(batch=8, mesh=8, layers=layers, memory=1e15)
    alpa = distplan.solve(inst, "alpa_ilp", backend=backend, time_limit=120)
    tap = distplan.solve(inst, "tap", backend=backend, time_limit=120)
    assert tap.objective == pytest.approx(alpa.objective, rel=1e-6)
    assert tap.bound is not None and tap.bound <= alpa.objective * (1 + 1e-6)
    copies = [f["copies"] for f in fold_instance(inst, {})[1].stats["families"]]
    assert copies == ([] if layers == 2 else [layers - 2])
    assert [c["copies"] for c in tap.info["chains"]["chains"]] == ([] if layers == 2 else [layers])
    if layers >= 8:
        assert tap.info["variables_folded"] < tap.info["variables_unfolded"]


def test_fold_true_reuses_alpa_ilp_and_certified_tap_is_optimal() -> None:
    inst = distplan.load_instance("gpt2-xl-8gpu")
    tap = distplan.solve(inst, "tap")
    folded = distplan.solve(inst, "alpa_ilp", fold=True)
    assert folded.objective == pytest.approx(tap.objective, rel=1e-9)
    assert folded.status.value == "feasible"  # folding is not exact in general: no folded bound carries over
    assert all(b.source.startswith("every op") for b in folded.bounds)
    assert tap.status.value == "optimal"  # the symmetric LP bound meets the plan here
    assert folded.info["folding"]["folded_nodes"] < folded.info["folding"]["nodes"]


@pytest.mark.parametrize("formulation", ["tap", "megatron", "data_parallel"])
def test_only_alpa_ilp_takes_a_folded_instance(formulation: str) -> None:
    with pytest.raises(InputError, match="does not take a folded instance"):
        distplan.solve("gpt-2layer-2x2", formulation, fold=True)


def chain(blocks: int, labels: list[str], tweak: int | None = None) -> nx.DiGraph:
    """A chain of identical blocks (a diamond of ``labels``), block ``tweak`` relabelled."""
    G = nx.DiGraph()
    prev = None
    for k in range(blocks):
        names = [f"{k}.{j}" for j in range(4)]
        for j, n in enumerate(names):
            G.add_node(n, label=labels[j % len(labels)] + ("'" if k == tweak and j == 2 else ""))
        for u, v in [(0, 1), (0, 2), (1, 3), (2, 3)]:
            G.add_edge(names[u], names[v], label=(u, v))
        if prev is not None:
            G.add_edge(prev, names[0], label="next")
        prev = names[3]
    return G


@settings(max_examples=25, deadline=None)
@given(blocks=st.integers(3, 12), labels=st.lists(st.sampled_from("abc"), min_size=1, max_size=4), tweak=st.none() | st.integers(0, 11), iterations=st.integers(0, 3))
def test_folding_finds_isomorphic_copies(blocks: int, labels: list[str], tweak: int | None, iterations: int) -> None:
    G = chain(blocks, labels, tweak if tweak is not None and tweak < blocks else None)
    fold = find_repeated_subgraphs(G, iterations=iterations)
    for fam in fold.families:
        check_family(G, fam)
        assert fam.num_copies >= 2 and fam.size >= 2
    assert set(fold.representative) == set(G.nodes)
    assert sum(fold.multiplicity.values()) == G.number_of_nodes()
    unfolded = fold.unfold({r: r for r in fold.representatives})
    assert all(G.nodes[n]["label"] == G.nodes[unfolded[n]]["label"] for n in G.nodes)


def test_folding_finds_two_different_stacks() -> None:
    G = nx.DiGraph()
    prev = None
    for stack in ("enc", "dec"):
        for k in range(6):
            names = [f"{stack}{k}.{j}" for j in range(3)]
            for j, n in enumerate(names):
                G.add_node(n, label=f"{stack}{j}")
            G.add_edge(names[0], names[1], label=0)
            G.add_edge(names[1], names[2], label=0)
            if prev is not None:
                G.add_edge(prev, names[0], label=1)
            prev = names[2]
    fold = find_repeated_subgraphs(G, iterations=1)
    assert sorted((f.num_copies, f.size) for f in fold.families) == [(5, 3), (5, 3)]
    assert {fold.copy_of[n][0] for n in fold.copy_of if n.startswith("enc")} != {fold.copy_of[n][0] for n in fold.copy_of if n.startswith("dec")}


def test_check_family_rejects_a_wrong_mapping() -> None:
    G = chain(3, ["a", "b"])
    good = Family([[f"{k}.{j}" for j in range(4)] for k in range(3)])
    check_family(G, good)
    with pytest.raises(FoldingError):
        check_family(G, Family([["0.0", "0.1", "0.2", "0.3"], ["1.0", "1.2", "1.1", "1.3"], ["2.3", "2.1", "2.2", "2.0"]]))



def stack(blocks: int, labels: list[int], inner: list[tuple[int, int, int]], cross: list[tuple[int, int, int]], tweak: tuple[int, int] | None = None) -> LabelledGraph:
    """``blocks`` copies of a block (node labels ``labels``, arcs ``inner`` as (a, b, edge
    label)), consecutive copies joined by ``cross`` arcs, between a head and a tail node;
    ``tweak = (block, arc)`` relabels that inner arc of that block (a near-copy)."""
    size = len(labels)
    node_labels = labels * blocks + [90, 91]
    edges: list[tuple[int, int]] = [(size * blocks, 0), (size * blocks - 1, size * blocks + 1)]
    edge_labels = [9, 9]
    for k in range(blocks):
        for arc, (a, b, lab) in enumerate(inner):
            edges.append((k * size + a, k * size + b))
            edge_labels.append(lab + (5 if (k, arc) == tweak else 0))
        for a, b, lab in cross if k else []:
            edges.append(((k - 1) * size + a, k * size + b))
            edge_labels.append(lab)
    return LabelledGraph(node_labels, edges, edge_labels)


def fold_both_ways(G: LabelledGraph, iterations: int) -> tuple[list[Family], list[Family], list[tuple[tuple[int, int], bool]]]:
    """Families found (vectorized growth from many seeds, as shipped) and with the lock
    step on every seed only; and the replays of the first: (region shape, confirmed)."""
    replays: list[tuple[tuple[int, int], bool]] = []
    replay = folding._replays

    def spy(region: np.ndarray, steps: np.ndarray, gr: Any) -> bool:
        replays.append((region.shape, replay(region, steps, gr)))
        return replays[-1][1]

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(folding, "_replays", spy)
        fast = find_repeated_subgraphs(G, iterations=iterations).families
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(folding, "TEMPLATE_SEEDS", 10**9)
        slow = find_repeated_subgraphs(G, iterations=iterations).families
    return fast, slow, replays


@pytest.mark.parametrize("iterations", [0, 2])
def test_vectorized_growth_is_the_lock_step(iterations: int) -> None:
    """30 copies: the region grown on three seeds, mapped and replayed is the lock step's;
    a near-copy in the middle (one edge label differs, unseen by the three template seeds)
    must make the replay fail, so the region is the lock step's again, never a wrong fold."""
    labels, inner, cross = [0, 1, 1, 2], [(1, 3, 1), (0, 2, 0), (0, 1, 1), (2, 3, 1)], [(3, 0, 2)]  # 0's arcs not in key order
    fast, slow, replays = fold_both_ways(stack(30, labels, inner, cross), iterations)
    assert [f.copies for f in fast] == [f.copies for f in slow] and fast[0].num_copies >= 28
    assert ((fast[0].num_copies, fast[0].size), True) in replays  # confirmed by the replay
    G = stack(30, labels, inner, cross, tweak=(14, 2))
    fast, slow, replays = fold_both_ways(G, iterations)
    assert [f.copies for f in fast] == [f.copies for f in slow]
    assert any(not ok for _, ok in replays)
    for fam in fast:
        check_family(G, fam)
        assert not any({14 * 4 + 0, 14 * 4 + 1} <= set(copy) for copy in fam.copies)  # the relabelled arc



def renumbered(G: LabelledGraph, order: list[int]) -> LabelledGraph:
    """G with node ``order[i]`` renamed i."""
    name = {old: new for new, old in enumerate(order)}
    return LabelledGraph([G.node_labels[i] for i in order], [(name[u], name[v]) for u, v in G.edges], list(G.edge_labels))


def test_vectorized_growth_rejects_misplaced_and_shared_nodes() -> None:
    """Copies that the template's mapping gets wrong must fail the replay: block 14's
    nodes 1 and 2 numbered the other way round (a shift of the template's copies
    misplaces them); and, with the last block's numbered so (mapped along the growth, no
    shift), blocks 10 and 11 sharing a successor."""
    labels, inner, cross = [0, 1, 1, 2], [(1, 3, 1), (0, 2, 0), (0, 1, 1), (2, 3, 1)], [(3, 0, 2)]

    def swapped(G: LabelledGraph, block: int) -> LabelledGraph:
        order = list(range(G.num_nodes))
        order[block * 4 + 1], order[block * 4 + 2] = order[block * 4 + 2], order[block * 4 + 1]
        return renumbered(G, order)

    G = stack(30, labels, inner, cross)
    fast, slow, replays = fold_both_ways(swapped(G, 14), 0)
    assert [f.copies for f in fast] == [f.copies for f in slow] and fast[0].num_copies == 30
    assert ((30, 4), False) in replays
    shared = LabelledGraph(G.node_labels, [(u, 10 * 4 + 1) if (u, v) == (11 * 4, 11 * 4 + 1) else (u, v) for u, v in G.edges], G.edge_labels)
    fast, slow, replays = fold_both_ways(swapped(shared, 29), 0)
    assert [f.copies for f in fast] == [f.copies for f in slow]
    # the 4-node region mapped from the template is rejected (a later seed class may grow a
    # smaller region that replays: the families still equal the lock step's)
    assert ((30, 4), False) in replays and not any(ok for shape, ok in replays if shape == (30, 4))

def test_vectorized_growth_skips_claimed_nodes() -> None:
    """60 blocks a0 -> a1 -> a2 (a chain), 30 of them with b0 -> b1 hanging off a1: the
    second family (the b parts, 30 copies) grows next to the claimed a parts."""
    labels: list[int] = []
    for k in range(60):
        labels += [0, 1, 2] + ([3, 4] if k < 30 else [])
    a = [[n for n, lab in enumerate(labels) if lab == x] for x in range(5)]
    edges = [(a[0][k], a[1][k]) for k in range(60)] + [(a[1][k], a[2][k]) for k in range(60)] + [(a[2][k], a[0][k + 1]) for k in range(59)]
    edges += [(a[1][k], a[3][k]) for k in range(30)] + [(a[3][k], a[4][k]) for k in range(30)]
    fast, slow, replays = fold_both_ways(LabelledGraph(labels, edges, [0] * len(edges)), 0)
    assert [f.copies for f in fast] == [f.copies for f in slow]
    assert [(f.num_copies, f.size) for f in fast] == [(60, 3), (30, 2)] and ((30, 2), True) in replays


@settings(max_examples=30, deadline=None)
@given(
    blocks=st.integers(24, 40),
    labels=st.lists(st.integers(0, 2), min_size=2, max_size=5),
    arcs=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=8),
    cross=st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4), st.integers(0, 1)), min_size=1, max_size=3),
    tweak=st.none() | st.tuples(st.integers(0, 39), st.integers(0, 7)),
    iterations=st.integers(0, 2),
)
def test_vectorized_growth_matches_the_lock_step(blocks: int, labels: list[int], arcs: list[tuple[int, int, int]], cross: list[tuple[int, int, int]], tweak: tuple[int, int] | None, iterations: int) -> None:
    size = len(labels)
    inner = [(a % size, b % size, lab) for a, b, lab in arcs if a % size != b % size]
    G = stack(blocks, labels, inner, [(a % size, b % size, lab) for a, b, lab in cross], tweak)
    fast, slow, _ = fold_both_ways(G, iterations)
    assert [f.copies for f in fast] == [f.copies for f in slow]
    for fam in fast:
        check_family(G, fam)


def reference_skeleton(inst: ShardingInstance) -> tuple[list[tuple[int, ...]], list[tuple[int, int]], list[tuple[Any, ...]], list[int], list[int]]:
    """Skeleton in plain Python: members, edges, edge links, label ids by first appearance."""
    node_of: list[int] = []
    members: list[list[int]] = []
    for k, ins in enumerate(inst.producers):
        if ins and inst.semantics(k).follows:
            node_of.append(node_of[ins[0]])
            members[node_of[ins[0]]].append(k)
        else:
            node_of.append(len(members))
            members.append([k])
    pos = {k: m.index(k) for m in members for k in m}
    internal: list[list[tuple[int, int, int]]] = [[] for _ in members]
    links: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for k, ins in enumerate(inst.producers):
        for slot, p in enumerate(ins):
            u, v = node_of[p], node_of[k]
            (internal[v] if u == v else links.setdefault((u, v), [])).append((pos[p], pos[k], slot))
    labels = [(tuple(inst.signature(k) for k in m), tuple(sorted(x))) for m, x in zip(members, internal)]
    edge_links = [tuple(sorted(x)) for x in links.values()]
    node_ids: dict[Any, int] = {}
    edge_ids: dict[Any, int] = {}
    return (
        [tuple(m) for m in members],
        list(links),
        edge_links,
        [node_ids.setdefault(lab, len(node_ids)) for lab in labels],
        [edge_ids.setdefault(lab, len(edge_ids)) for lab in edge_links],
    )


@pytest.mark.parametrize("name", ["gpt3-4", *BUNDLED[:3]])
def test_skeleton_matches_a_plain_python_reference(name: str) -> None:
    inst = gpt3_175b(batch=8, mesh=8, layers=4, memory=1e15) if name == "gpt3-4" else distplan.load_instance(name)
    sk = build_skeleton(inst)
    node_ops, edges, edge_links, node_ids, edge_ids = reference_skeleton(inst)
    assert sk.node_ops == node_ops
    assert list(zip(sk.edge_u.tolist(), sk.edge_v.tolist())) == edges
    assert [sk.edge_links(e) for e in range(sk.num_edges)] == edge_links
    assert sk.node_label_id.tolist() == node_ids and sk.edge_label_id.tolist() == edge_ids


@pytest.mark.parametrize("boundary_edges", [True, False])
def test_folded_cost_graph_sums_in_edge_order(boundary_edges: bool) -> None:
    """Bit for bit the sequential sums over the skeleton's edges (same objective, same plans)."""
    inst = gpt3_175b(batch=8, mesh=8, layers=8, memory=1e15)
    sk, fold = fold_instance(inst, {})
    tables = CostTables(inst)
    graph, reps = build_folded_cost_graph(sk, fold, tables, boundary_edges=boundary_edges)
    index = {r: j for j, r in enumerate(reps)}
    cost = [tables.node(sk, r).cost * fold.multiplicity[r] for r in reps]
    acc: dict[tuple[int, int], np.ndarray] = {}
    for e in range(sk.num_edges):
        u, v = int(sk.edge_u[e]), int(sk.edge_v[e])
        if fold.same_copy(u, v):
            if fold.copy_of[u][1]:
                continue
            M = tables.edge(sk, e) * fold.multiplicity[u]
        elif boundary_edges or fold.multiplicity[fold.representative[u]] == fold.multiplicity[fold.representative[v]] == 1:
            M = tables.edge(sk, e)
        else:
            continue
        a, b = index[fold.representative[u]], index[fold.representative[v]]
        if a == b:
            cost[a] = cost[a] + np.diag(M)
        elif a < b:
            acc[(a, b)] = acc[(a, b)] + M if (a, b) in acc else M
        else:
            acc[(b, a)] = acc[(b, a)] + M.T if (b, a) in acc else M.T
    assert any(k > 1 for k in graph.multiplicity) and len(acc) == len(graph.edge_cost)
    assert all(np.array_equal(x, y) for x, y in zip(graph.node_cost, cost))
    assert list(zip(graph.edge_u.tolist(), graph.edge_v.tolist())) == sorted(acc)
    assert all(np.array_equal(graph.edge_cost[j], acc[p]) for j, p in enumerate(sorted(acc)))

def test_formulations_are_registered_with_references() -> None:
    names = {f.name for f in distplan.formulations("sharding")}
    assert {"alpa_ilp", "tap", "data_parallel", "megatron"} <= names
    assert get_formulation("sharding", "alpa_ilp").exact and "Alpa" in get_formulation("sharding", "alpa_ilp").reference
    model, _ = get_formulation("sharding", "alpa_ilp").build(tiny())
    assert {"one-strategy", "memory"} <= set(model.con_blocks)
