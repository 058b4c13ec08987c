"""Review rev13 of sharding and compression: a large finite cost is a cost, not a forbidden
choice; bad numbers and types of an instance are named errors (exit 2) at parse time; a
graph of one input op is solved; tap's shared (exact=False) certificate keeps a margin."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import assert_named_error, backend_params, cli_run, takes_milp

import distplan
from distplan.formulations.sharding.alpa_ilp import OBJECTIVE_SCALE, prepare_alpa
from distplan.formulations.sharding.costgraph import build_cost_graph
from distplan.formulations.sharding.tap import BOUND_MARGIN
from distplan.instances import load_document
from distplan.models.sharding import ShardingInstance

SHARDING = "gpt-2layer-2x2"
COMPRESSION = "compression-mlp-small"


def _doc(name: str) -> dict[str, Any]:
    return copy.deepcopy(load_document(name))


def _huge_batch() -> dict[str, Any]:
    """gpt-2layer-2x2 with a batch of 1e14 and memory 1e300: every plan takes ~3.6e10 s,
    finite (data parallelism's plan is within 4e-9 of the cheapest-op bound)."""
    d = _doc(SHARDING)
    d["graph"]["dims"]["b"] = 10**14
    d["mesh"]["memory"] = 1e300
    return d


def _write(tmp_path: Path, doc: dict[str, Any], name: str = "inst.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc, allow_nan=True))
    return str(path)


# -- 1. finite large costs stay choosable ---------------------------------------------


def test_a_finite_cost_above_1e9_seconds_is_not_forbidden() -> None:
    inst = ShardingInstance.from_dict(_huge_batch())
    graph = build_cost_graph(inst)
    assert max(float(np.max(c)) for c in graph.node_cost) > 1e9
    index = prepare_alpa(graph, {})
    assert np.all(index.s_upper == 1.0) and np.all(index.e_upper == 1.0)
    # the solver's coefficients stay far from HiGHS's infinite cost (1e20)
    assert index.objective_scale < OBJECTIVE_SCALE
    assert float(np.max(index.s_cost)) * index.objective_scale <= 1e12


def _solved_near_data_parallel(formulation: str, backend: str | None = None, **params: Any) -> None:
    inst = ShardingInstance.from_dict(_huge_batch())
    dp = distplan.solve(inst, "data_parallel")
    r = distplan.solve(inst, formulation, backend=backend, **params)
    assert r.plan is not None and r.check is not None and r.check.feasible
    assert 1e10 < r.objective <= dp.objective * (1 + 1e-4)
    assert r.bound is not None and r.bound <= r.objective


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_an_instance_of_3e10_second_iterations_is_solved_not_infeasible(backend: str) -> None:
    _solved_near_data_parallel("alpa_ilp", backend)


@pytest.mark.parametrize("params", [{"lp_first": True}, {"fold": True}], ids=["lp_first", "fold"])
def test_alpa_ilp_variants_solve_the_3e10_second_instance(params: dict[str, Any]) -> None:
    _solved_near_data_parallel("alpa_ilp", **params)


def test_tap_shared_solves_the_3e10_second_instance() -> None:
    _solved_near_data_parallel("tap", exact=False)


def test_tap_exact_solves_the_3e10_second_instance() -> None:
    inst = ShardingInstance.from_dict(_huge_batch())
    dp = distplan.solve(inst, "data_parallel")
    for params in ({}, {"dp": False}):
        r = distplan.solve(inst, "tap", **params)
        assert r.status.value == "optimal" and r.objective <= dp.objective
        assert r.bound is not None and r.bound <= r.objective


def test_cli_alpa_ilp_on_the_3e10_second_instance_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(["solve", _write(tmp_path, _huge_batch()), "-f", "alpa_ilp", "--json"], capsys)
    assert rc == 0, err
    assert json.loads(out)["objective"] > 1e10


def test_a_forbidden_resharding_still_forbids() -> None:
    """The all-to-all of a mesh without one stays infinite: never chosen."""
    d = _doc(SHARDING)
    d["mesh"]["all_to_all"] = False
    inst = ShardingInstance.from_dict(d)
    graph = build_cost_graph(inst)
    assert any(np.isinf(m).any() for m in graph.edge_cost)
    index = prepare_alpa(graph, {})
    assert np.any(index.e_upper == 0.0)
    r = distplan.solve(inst, "alpa_ilp")
    assert r.check is not None and r.check.feasible and math.isfinite(r.objective)


# -- 2. bad input is a named error ------------------------------------------------------


def _set(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> None:
    for key in path[:-1]:
        doc = doc[key]
    doc[path[-1]] = value


#: (case, kind, JSON path to mutate, value, the field the message names)
BAD = [
    ("flops str", SHARDING, ("graph", "ops", 6, "attrs"), {"flops_per_element": "x"}, "graph.ops[6].attrs.flops_per_element"),
    ("flops nan", SHARDING, ("graph", "ops", 6, "attrs"), {"flops_per_element": float("nan")}, "graph.ops[6].attrs.flops_per_element"),
    ("flops inf", SHARDING, ("graph", "ops", 6, "attrs"), {"flops_per_element": float("inf")}, "graph.ops[6].attrs.flops_per_element"),
    ("flops negative", SHARDING, ("graph", "ops", 6, "attrs"), {"flops_per_element": -5}, "graph.ops[6].attrs.flops_per_element"),
    ("flops huge", SHARDING, ("graph", "ops", 6, "attrs"), {"flops_per_element": 1e300}, "graph.ops[6].attrs.flops_per_element"),
    ("seq_dim list", SHARDING, ("graph", "ops", 4, "attrs", "seq_dim"), ["s"], "graph.ops[4].attrs.seq_dim"),
    ("dim 1e308", SHARDING, ("graph", "dims", "t"), 1e308, "graph.dims.t"),
    ("dims span too many elements", SHARDING, ("graph", "dims"), {"b": 2**40, "s": 512, "h": 1024, "t": 3, "a": 16, "d": 64, "f": 4096, "v": 2**53}, "elements"),
    ("bandwidth 1e-300", SHARDING, ("mesh", "bandwidth", 0), 1e-300, "mesh.bandwidth[0]"),
    ("latency 1e300", SHARDING, ("mesh", "latency", 1), 1e300, "mesh.latency[1]"),
    ("mesh axis 2**40", SHARDING, ("mesh", "shape", 0), 2**40, "mesh.shape[0]"),
    ("optimizer bytes 1e300", SHARDING, ("training", "optimizer_bytes_per_param"), 1e300, "training.optimizer_bytes_per_param"),
    ("backward factor 1e300", SHARDING, ("training", "backward_factor"), 1e300, "training.backward_factor"),
    ("graph dtype list", SHARDING, ("graph", "dtype"), ["fp16"], "graph.dtype"),
    ("op dtype unknown", SHARDING, ("graph", "ops", 3, "dtype"), "fp7", "graph.ops[3].dtype"),
    ("op dtype list", SHARDING, ("graph", "ops", 3, "dtype"), ["fp16"], "graph.ops[3].dtype"),
    ("edge dst list", COMPRESSION, ("graph", "edges", 0, "dst"), [], "graph.edges[0].dst"),
    ("edge src dict", COMPRESSION, ("graph", "edges", 0, "src"), {}, "graph.edges[0].src"),
    ("op device list", COMPRESSION, ("graph", "ops", 0, "devices", 0), ["v100-0.0"], "graph.ops[0].devices[0]"),
    ("op role list", COMPRESSION, ("graph", "ops", 0, "role"), ["forward"], "graph.ops[0].role"),
    ("gradient dtype list", COMPRESSION, ("graph", "gradients", 0, "dtype"), ["float32"], "graph.gradients[0].dtype"),
    ("codec method list", COMPRESSION, ("codecs", 0, "method"), ["entropy"], "codecs[0].method"),
    ("bandwidth tiny", COMPRESSION, ("cluster", "intra_node_bandwidth"), 1e-300, "cluster.intra_node_bandwidth"),
    ("link bandwidth tiny", COMPRESSION, ("cluster", "links", 0, "bandwidth"), 1e-300, "cluster.links[0].bandwidth"),
    ("links not a list", COMPRESSION, ("cluster", "links"), "x", "cluster.links"),
    ("compute seconds huge", COMPRESSION, ("graph", "ops", 0, "compute_seconds", "V100"), 1e300, "graph.ops[0].compute_seconds.V100"),
    ("edge bytes huge", COMPRESSION, ("graph", "edges", 0, "bytes"), 1e300, "graph.edges[0].bytes"),
    ("codec rate tiny", COMPRESSION, ("codecs", 0, "encode_bytes_per_second", "V100"), 1e-300, "codecs[0].encode_bytes_per_second.V100"),
    ("codec ratio huge", COMPRESSION, ("codecs", 0, "ratio", "float32"), 1e300, "codecs[0].ratio.float32"),
    ("gradient shape huge", COMPRESSION, ("graph", "gradients", 0, "shape", 1), 1e300, "graph.gradients[0].shape[1]"),
]


@pytest.mark.parametrize(("case", "name", "path", "value", "named"), BAD, ids=[b[0] for b in BAD])
def test_bad_numbers_and_types_are_named_errors(case: str, name: str, path: tuple[Any, ...], value: Any, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(name)
    _set(doc, path, value)
    file = _write(tmp_path, doc)
    formulation = "alpa_ilp" if name == SHARDING else "tag_sfb"
    assert_named_error(*cli_run(["solve", file, "-f", formulation], capsys), named)
    assert_named_error(*cli_run(["validate", file], capsys), named)


def test_megatron_on_nan_flops_is_a_named_error_not_a_null_objective(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(SHARDING)
    doc["graph"]["ops"][6]["attrs"] = {"flops_per_element": float("nan")}
    assert_named_error(*cli_run(["solve", _write(tmp_path, doc), "-f", "megatron", "--json"], capsys), "graph.ops[6].attrs.flops_per_element")


SCALAR_OPS = [
    ("layernorm of a scalar", [{"name": "x", "type": "input", "out": []}, {"name": "n", "type": "layernorm", "inputs": ["x"], "out": []}], "graph.ops[1].out"),
    ("fused attention of one dim", [{"name": "x", "type": "input", "out": ["t"]}, {"name": "n", "type": "attention", "inputs": ["x"], "out": [], "attrs": {"qkv_dim": "t"}}], "graph.ops[1].attrs"),
]


@pytest.mark.parametrize(("case", "ops", "named"), SCALAR_OPS, ids=[s[0] for s in SCALAR_OPS])
def test_ops_without_dims_are_named_errors(case: str, ops: list[dict[str, Any]], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = _doc(SHARDING)
    doc["graph"]["ops"] = ops
    doc["graph"]["dims"]["t"] = 3
    assert_named_error(*cli_run(["solve", _write(tmp_path, doc), "-f", "alpa_ilp"], capsys), named)


# -- 2b. a graph of one input op ---------------------------------------------------------


@pytest.mark.parametrize(("formulation", "params"), [("alpa_ilp", {}), ("alpa_ilp", {"fold": True}), ("tap", {}), ("tap", {"exact": False}), ("megatron", {}), ("data_parallel", {})])
def test_a_graph_of_one_input_op_is_solved(formulation: str, params: dict[str, Any]) -> None:
    doc = _doc(SHARDING)
    doc["graph"]["ops"] = doc["graph"]["ops"][:1]
    r = distplan.solve(ShardingInstance.from_dict(doc), formulation, **params)
    assert r.plan is not None and set(r.plan.strategies) == {"tokens"}
    assert r.objective == 0.0 and r.status.value == "optimal"
    assert r.bound is not None and r.bound <= r.objective


# -- 3. tap exact=False: the certificate's margin ---------------------------------------


def test_tap_shared_certificate_is_lowered_by_the_bound_margin() -> None:
    """On gpt-1layer-tp8 the certifying LP's optimum equals the plan's cost (to ~1e-15): the
    bound keeps BOUND_MARGIN below it, and says so."""
    r = distplan.solve("gpt-1layer-tp8", "tap", exact=False)
    lp = [b for b in r.bounds if b.source.startswith("tap: LP of the folded problem")]
    assert len(lp) == 1
    assert f"less {BOUND_MARGIN:g} relative" in lp[0].source
    assert lp[0].value <= r.objective * (1 - BOUND_MARGIN / 2)
    assert r.bound is not None and r.bound <= r.objective
