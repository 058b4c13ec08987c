"""The device/cluster catalogue, the analytic model zoo, the generators and the bundled zoo."""

from __future__ import annotations

import gzip
import importlib.util
import json
import math
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.errors import InputError
from distplan.instances import bundled, load_document, load_instance
from distplan.instances.generators import cached, chain_of_blocks, random_layered_dag, series_parallel
from distplan.instances.zoo import MODELS, TRANSFORMERS, LayerGraph, make_placement, model_graph
from distplan.models.catalogue import (
    CLUSTERS,
    DGX1_NVLINKS,
    NVLINK2_LINK,
    PCIE3_X16,
    GiB,
    Link,
    cluster,
    device,
    dgx1,
    libra_4d,
    tpu_v4_torus,
)
from distplan.models.common import instance_from_dict

ROOT = Path(__file__).resolve().parent.parent
ZOO_INDEX = ROOT / "distplan" / "instances" / "data" / "index-placement-zoo.json"
ZOO = json.loads(ZOO_INDEX.read_text())
PROVENANCE = ("source", "parameters", "date", "generator", "generator_version")


def _one_op_doc(cl: Any) -> dict[str, Any]:
    types = cl.type_names()
    return {
        "format": "distplan/1",
        "kind": "placement",
        "name": "probe",
        "graph": {"ops": [{"name": "a", "time": {t: 1e-3 for t in types}, "memory": 1.0}], "edges": []},
        "cluster": cl.placement_section(),
    }


# -- catalogue -------------------------------------------------------------------------------------


def test_devices_have_spec_numbers_and_roofline() -> None:
    v100 = device("V100")
    assert v100.name == "V100-16GB" and v100.memory_bytes == 16 * GiB
    # compute-bound: 1 TFLOP at 125 TFLOP/s x 0.7
    assert v100.roofline_seconds(1e12, 0) == pytest.approx(1e12 / (125e12 * 0.7) + v100.launch_floor)
    # memory-bound: 1 GB at 900 GB/s x 0.7
    assert v100.roofline_seconds(0, 1e9) == pytest.approx(1e9 / (900e9 * 0.7) + v100.launch_floor)
    # a 1080Ti computes "fp16" at its fp32 rate (fp16 is 1/64 rate on that chip)
    assert device("1080Ti").peak_flops("fp16") == device("1080Ti").peak_fp32_flops
    assert device("A100-80GB").with_(efficiency=0.5).roofline_seconds(0, 1e9) > device("A100-80GB").roofline_seconds(0, 1e9)
    with pytest.raises(InputError, match="unknown device"):
        device("V200")


def test_dgx1_hybrid_cube_mesh() -> None:
    dgx = dgx1()
    links_per_gpu: Counter[int] = Counter()
    for a, b, n in DGX1_NVLINKS:
        links_per_gpu[a] += n
        links_per_gpu[b] += n
    assert all(links_per_gpu[g] == 6 for g in range(8))  # V100: 6 NVLink ports
    bw, lat = dgx.pair_matrices()
    assert np.allclose(bw, bw.T)
    assert bw[0, 3] == 2 * NVLINK2_LINK and bw[0, 1] == NVLINK2_LINK and bw[0, 5] == PCIE3_X16
    # each GPU has NVLink to exactly 4 others; 12 pairs go over PCIe
    off = ~np.eye(8, dtype=bool)
    assert int(np.sum(bw[off] == PCIE3_X16)) == 2 * 12
    quad = dgx.subset(4)
    assert quad.n_devices == 4 and len(quad.links) == 6  # a fully connected NVLink quad


def test_every_catalogue_cluster_is_a_valid_placement_cluster() -> None:
    for name in CLUSTERS:
        cl = cluster(name)
        inst = instance_from_dict(_one_op_doc(cl))
        assert inst.n_devices == cl.n_devices
        bw, lat = cl.pair_matrices()
        off = ~np.eye(cl.n_devices, dtype=bool)
        assert np.allclose(inst.bandwidth[off], bw[off]) and np.allclose(inst.latency[off], lat[off])


def test_multi_node_and_heterogeneous_clusters() -> None:
    two = cluster("2xdgx1-ib")
    bw, _ = two.pair_matrices()
    assert two.n_devices == 16
    assert bw[0, 8] == pytest.approx(12.5e9)  # EDR InfiniBand between nodes
    assert bw[0, 3] == 2 * NVLINK2_LINK and bw[8, 11] == 2 * NVLINK2_LINK  # NVLink inside each node
    mix = cluster("tag-mix")
    assert Counter(mix.device_types) == {"V100-16GB": 4, "P100": 4, "1080Ti": 4}
    bw, _ = mix.pair_matrices()
    assert bw[0, 4] < bw[4, 5] < bw[0, 1]  # Ethernet < PCIe < NVLink
    assert cluster("tag-mix-slow").bandwidth < mix.bandwidth


def test_libra_multidimensional_network_pairs() -> None:
    net = libra_4d()
    assert net.n_npus == 4096 and net.shape() == (4, 8, 4, 32)
    ids = np.array([0, 1, 2, 4, 32, 128])
    bw, lat = net.pair_matrices(ids)
    b = 500e9 / 4
    # npu0-npu1, npu0-npu2: same ring of 4 (both directions); npu0-npu4: fully connected 8 (one of 7 links)
    assert bw[0, 1] == b and bw[0, 2] == b
    assert bw[0, 3] == pytest.approx(b / 7)
    # npu0-npu128 differ in the switch dimension only; npu4-npu128 cross the FC dimension too
    assert bw[0, 5] == b and bw[3, 5] == pytest.approx(b / 7)
    assert lat[0, 2] == pytest.approx(2 * net.dims[0].latency)  # two ring hops
    assert lat[0, 4] == pytest.approx(net.dims[2].latency)
    with pytest.raises(InputError, match="device pairs"):
        net.cluster()
    assert len(net.dimensions()) == 4


def test_tpu_torus_hops() -> None:
    torus = tpu_v4_torus((4, 4, 4))
    hops = torus.hop_matrix(np.arange(64))
    assert hops.max() == 6  # 2 + 2 + 2 with wrap-around
    assert hops[0, 3] == 1  # wrap-around neighbour on a ring of 4
    cl = torus.cluster()
    _, lat = cl.pair_matrices()
    assert lat[0, 3] == pytest.approx(torus.hop_latency)
    assert lat[0, 42] == pytest.approx(6 * torus.hop_latency)  # coordinates (2, 2, 2)


def test_cluster_lookup_errors_and_memory_limit() -> None:
    with pytest.raises(InputError, match="unknown cluster"):
        cluster("dgx7")
    with pytest.raises(InputError, match="outside"):
        cluster("dgx1:9")
    capped = cluster("dgx1:2").with_memory_limit(3 * GiB)
    assert capped.memory() == [3 * GiB, 3 * GiB]
    assert Link("a", "b", 1.0, 0.0, directed=True).to_dict()["directed"] is True


# -- analytic zoo ----------------------------------------------------------------------------------

KNOWN_PARAMS = {  # published / library parameter counts
    "gpt2-small": 124_439_808,
    "gpt2-medium": 354_823_168,
    "gpt2-large": 774_030_080,
    "gpt2-xl": 1_557_611_200,
    "bert-base": 109_514_298,  # BertForMaskedLM without pooler
    "resnet-50": 25_557_032,
    "inception-v3": 23_834_568,  # torchvision inception_v3 minus the auxiliary head
}


@pytest.mark.parametrize("model", sorted(KNOWN_PARAMS))
def test_zoo_parameter_counts(model: str) -> None:
    g = model_graph(model)
    assert g.total_params() / g.elem == KNOWN_PARAMS[model]


@pytest.mark.parametrize("model", [m for m in TRANSFORMERS if m.startswith("gpt2")])
def test_transformer_matmul_flops_match_the_analytic_formula(model: str) -> None:
    cfg = TRANSFORMERS[model]
    b, s = 2, 256
    g = model_graph(model, batch=b, seq=s)
    h, L, V = cfg.hidden, cfg.layers, cfg.vocab
    analytic = L * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * V
    assert g.total_flops(types=["matmul", "bmm"]) == analytic


def test_cnn_flops_per_image() -> None:
    convs = ["conv_bn_relu", "conv_bn", "matmul"]
    assert model_graph("resnet-50", batch=1).total_flops(types=convs) == pytest.approx(8.2e9, rel=0.01)  # 4.1 GMACs
    assert model_graph("inception-v3", batch=1).total_flops(types=convs) == pytest.approx(11.46e9, rel=0.01)  # 5.73 GMACs


def test_training_graph_structure() -> None:
    fwd = model_graph("gpt2-small", batch=1, seq=64)
    train = fwd.training("adam")
    phases = Counter(op.phase for op in train.ops)
    assert phases["forward"] == len(fwd)
    assert phases["backward"] == len(fwd)  # every op of a GPT lies between the embedding and the loss
    holders = [op for op in fwd.ops if op.params > 0]
    assert phases["update"] == len(holders)
    assert train.total_flops("backward") == pytest.approx(2 * fwd.total_flops("forward"))
    grad_edges = [e for e in train.edges if e.gradient]
    # one per parameter holder, plus the tied logits -> embedding update
    assert len(grad_edges) == len(holders) + 1
    for e in grad_edges:
        dst = train.ops[e.dst]
        assert dst.phase == "update"
        assert e.bytes == fwd.ops[fwd.index[dst.info["forward"]]].params
    # ZeRO accounting: 2 (weights) + 2 (gradients) + 12 (Adam) bytes per parameter, plus stashed activations
    weights_grads_states = sum((op.memory or 0.0) for op in train.ops if op.phase != "forward")
    assert weights_grads_states == pytest.approx(14 * fwd.total_params() / 2)
    with pytest.raises(InputError, match="already"):
        train.training()


@pytest.mark.parametrize("model", ["gpt2-small", "bert-base", "resnet-50"])
def test_backward_and_update_ops_are_colocated_with_their_forward_op(model: str) -> None:
    """Each ``<op>.grad`` and ``<op>.update`` is in the colocation group that holds ``<op>``
    itself (the weights it reads), in the graph and in the placement instance built from it."""
    train = model_graph(model, batch=1).training("adam")
    group = {train.ops[k].name: g for k, g in train.colocate.items()}
    checked = 0
    for op in train.ops:
        if op.phase in ("backward", "update"):
            fwd = op.info["forward"]
            assert fwd in group and group[op.name] == group[fwd], op.name
            checked += 1
    assert checked > 0
    inst = instance_from_dict(make_placement(train, "dgx1:4", backward=False))
    by_name = dict(zip(inst.op_names, inst.colocation_groups().tolist()))
    for op in train.ops:
        if op.phase in ("backward", "update"):
            assert by_name[op.name] == by_name[op.info["forward"]], op.name


def test_layer_graph_rejects_unknown_inputs_and_duplicates() -> None:
    g = LayerGraph("t")
    g.add("a", "matmul", flops=1.0, output=4.0)
    with pytest.raises(InputError, match="not an op yet"):
        g.add("b", "add", inputs=["zzz"])
    with pytest.raises(InputError, match="duplicate"):
        g.add("a", "add")
    with pytest.raises(InputError, match="unknown model"):
        model_graph("gpt5")


def test_make_placement_heterogeneous_times_and_memory_limit() -> None:
    doc = make_placement("resnet-50", "tag-mix", 2 * GiB, batch=8)
    inst = instance_from_dict(doc)
    assert all(d["memory"] == 2 * GiB for d in doc["cluster"]["devices"])
    t = doc["graph"]["ops"][1]["time"]
    assert set(t) == {"V100-16GB", "P100", "1080Ti"}
    assert t["V100-16GB"] < t["P100"] < t["1080Ti"]  # conv1 is compute-bound
    assert inst.time.shape == (len(doc["graph"]["ops"]), 12)
    for key in PROVENANCE:
        assert key in doc["meta"]


# -- bundled zoo -----------------------------------------------------------------------------------


def test_zoo_index_entries_are_bundled() -> None:
    names = bundled()
    for name, entry in ZOO.items():
        assert name in names and entry["kind"] == "placement"
        assert (ROOT / "distplan" / "instances" / "data" / entry["file"]).is_file()
        assert entry["description"] and entry["size"]
    assert "gpt2-xl-dgx1" in ZOO


@pytest.mark.parametrize("name", sorted(ZOO))
def test_bundled_zoo_instance_validates_round_trips_and_solves(name: str, tmp_path: Path) -> None:
    from distplan.models.schema import validate_document

    doc = load_document(name)
    validate_document(doc)
    for key in PROVENANCE:
        assert key in doc["meta"], f"{name}: meta.{key} missing"
    inst = load_instance(name)
    assert inst.to_dict() == doc
    path = tmp_path / "copy.json"
    inst.to_json(path)
    again = load_instance(path)
    assert again.to_dict() == doc
    assert np.array_equal(again.time, inst.time) and np.array_equal(again.edge_bytes, inst.edge_bytes)
    total = float(inst.memory.sum())
    if "does not fit one device" in ZOO[name]["description"]:
        assert total > inst.device_memory.max()
    res = distplan.solve(inst, formulation="baechi_etf", time_limit=30)
    assert res.check is not None and res.check.feasible
    assert res.objective is not None
    assert res.bound is None or res.bound <= res.objective * (1 + 1e-9)


def test_bundled_zoo_is_reproducible_from_the_build_script() -> None:
    spec = importlib.util.spec_from_file_location("build_zoo", ROOT / "scripts" / "build_zoo.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    docs, index = mod.build()
    assert index == ZOO
    for name, doc in docs.items():
        with gzip.open(ROOT / "distplan" / "instances" / "data" / index[name]["file"], "rt") as fh:
            stored = json.load(fh)
        assert mod._strip_date(stored) == mod._strip_date(doc), f"{name} is stale: run python scripts/build_zoo.py"


# -- generators ------------------------------------------------------------------------------------


def _edges(doc: dict[str, Any]) -> tuple[np.ndarray, np.ndarray]:
    ix = {op["name"]: k for k, op in enumerate(doc["graph"]["ops"])}
    src = np.array([ix[e["src"]] for e in doc["graph"]["edges"]], dtype=np.int64)
    dst = np.array([ix[e["dst"]] for e in doc["graph"]["edges"]], dtype=np.int64)
    return src, dst


def test_random_layered_dag_shape_and_determinism() -> None:
    doc = random_layered_dag(2000, n_devices=3, seed=5)
    assert len(doc["graph"]["ops"]) == 2000 and len(doc["cluster"]["devices"]) == 3
    src, dst = _edges(doc)
    assert np.all(src < dst)  # ops are numbered in a topological order
    assert 1.5 < src.size / 2000 < 2.5  # about two inputs per op by default
    assert len(set(zip(src.tolist(), dst.tolist()))) == src.size  # no duplicate edges
    assert random_layered_dag(2000, n_devices=3, seed=5)["graph"] == doc["graph"]
    assert random_layered_dag(2000, n_devices=3, seed=6)["graph"] != doc["graph"]
    for key in PROVENANCE:
        assert key in doc["meta"]


def test_generators_reach_100k_ops() -> None:
    for doc in (random_layered_dag(100_000, seed=1), series_parallel(100_000, seed=1), chain_of_blocks(12_500, block_size=8, seed=1)):
        assert len(doc["graph"]["ops"]) == 100_000
        src, dst = _edges(doc)
        assert np.all(src < dst)


def _is_series_parallel(n: int, src: np.ndarray, dst: np.ndarray) -> bool:
    """Reduce by series (in = out = 1) and parallel (multi-edge) steps to a single edge."""
    edges = Counter(zip(src.tolist(), dst.tolist()))
    alive = set(range(n))
    changed = True
    while changed:
        changed = False
        for v in list(alive):
            ins = [(a, b) for (a, b) in edges if b == v]
            outs = [(a, b) for (a, b) in edges if a == v]
            if len(ins) == 1 and len(outs) == 1 and edges[ins[0]] == 1 and edges[outs[0]] == 1:
                (u, _), (_, w) = ins[0], outs[0]
                del edges[ins[0]], edges[outs[0]]
                edges[(u, w)] += 1
                alive.discard(v)
                changed = True
        for key in list(edges):
            if edges[key] > 1:
                edges[key] = 1
                changed = True
    return len(alive) == 2 and len(edges) == 1


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 40), seed=st.integers(0, 10_000), p=st.floats(0.0, 1.0))
def test_series_parallel_generator_builds_series_parallel_dags(n: int, seed: int, p: float) -> None:
    doc = series_parallel(n, seed=seed, parallel_prob=p)
    src, dst = _edges(doc)
    assert np.all(src < dst)
    assert _is_series_parallel(n, src, dst)
    instance_from_dict(doc)


def test_series_parallel_recognizer_rejects_a_non_sp_dag() -> None:
    # the "N" graph (a->c, a->d, b->d) with a source and sink is the forbidden minor
    src = np.array([0, 0, 1, 1, 2, 2, 3, 4])
    dst = np.array([1, 2, 3, 4, 4, 5, 5, 5])
    assert not _is_series_parallel(6, src, dst)


@settings(max_examples=20, deadline=None)
@given(blocks=st.integers(1, 6), size=st.integers(1, 9), seed=st.integers(0, 10_000))
def test_chain_of_blocks_repeats_one_block(blocks: int, size: int, seed: int) -> None:
    doc = chain_of_blocks(blocks, block_size=size, seed=seed)
    ops = doc["graph"]["ops"]
    assert len(ops) == blocks * size
    times = np.array([op["time"] for op in ops]).reshape(blocks, size)
    assert np.all(times == times[0])
    src, dst = _edges(doc)
    assert np.all(src < dst)
    indeg = np.bincount(dst, minlength=len(ops)).reshape(blocks, size)
    outdeg = np.bincount(src, minlength=len(ops)).reshape(blocks, size)
    if size > 1:
        assert np.all(indeg[:, 1:] >= 1) and np.all(outdeg[:, :-1] >= 1)
    # blocks talk only through exit -> entry edges
    cross = (src // size) != (dst // size)
    assert np.all(src[cross] % size == size - 1) and np.all(dst[cross] % size == 0) and int(cross.sum()) == blocks - 1
    instance_from_dict(doc)


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 60), devices=st.integers(1, 5), seed=st.integers(0, 1000), frac=st.one_of(st.none(), st.floats(0.05, 2.0)))
def test_generated_documents_validate_and_memory_fraction(n: int, devices: int, seed: int, frac: float | None) -> None:
    doc = random_layered_dag(n, n_devices=devices, seed=seed, memory_fraction=frac)
    inst = instance_from_dict(doc)
    total = inst.memory.sum()
    cap = inst.device_memory[0]
    if frac is None:
        assert cap >= total
    else:
        assert cap == pytest.approx(max(frac * total, inst.memory.max()), rel=1e-9, abs=1.0)


def test_generator_input_errors() -> None:
    with pytest.raises(InputError, match="n_ops"):
        random_layered_dag(0)
    with pytest.raises(InputError, match="edge_prob"):
        random_layered_dag(10, edge_prob=1.5)
    with pytest.raises(InputError, match="memory_fraction"):
        series_parallel(10, memory_fraction=-1)
    with pytest.raises(InputError, match="unknown generator"):
        cached("nope", n_ops=3)


def test_cached_generation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISTPLAN_CACHE", str(tmp_path))
    first = cached("random_layered_dag", n_ops=300, seed=3)
    files = list(tmp_path.glob("*.json.gz"))
    assert len(files) == 1
    assert cached("random_layered_dag", n_ops=300, seed=3) == first
    assert len(list(tmp_path.glob("*.json.gz"))) == 1


# -- CLI -------------------------------------------------------------------------------------------


def test_cli_make_placement_and_catalogue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distplan.cli import main

    out = tmp_path / "inst.json"
    assert main(["make", "placement", "--model", "bert-base", "--cluster", "dgx1:4", "--memory-limit", "3GiB", "--batch", "2", "-o", str(out)]) == 0
    inst = load_instance(out)
    assert inst.n_devices == 4 and inst.device_memory[0] == 3 * GiB
    assert main(["make", "placement", "--model", "gpt9", "--cluster", "dgx1", "-o", str(out)]) == 2
    assert "unknown model" in capsys.readouterr().err
    assert main(["catalogue", "clusters"]) == 0
    assert "dgx1" in capsys.readouterr().out
    assert set(MODELS) >= {"gpt2-small", "gpt2-xl", "bert-large", "resnet-50", "inception-v3"}


# -- Llama-class models (issue 20) -------------------------------------------------------------

from distplan.instances.pipelines import pipeline_from_model  # noqa: E402
from distplan.instances.zoo_llama import LLAMA_MODELS, LlamaConfig, llama_config, llama_graph  # noqa: E402
from distplan.instances.zoo_sharding import llama_sharding, mesh_links  # noqa: E402
from distplan.models.graphs import topological_order  # noqa: E402

TINY = LlamaConfig("tiny", 2, 64, 4, 2, 96, 128, 64, 16, 2, 2, "test")
TINY_MOE = LlamaConfig("tiny-moe", 2, 64, 4, 2, 96, 128, 64, 16, 2, 2, "test", experts=4, top_k=2)


def _matmul_params(cfg: LlamaConfig) -> int:
    pc = cfg.param_count()
    return pc["attention"] + pc["mlp"] + pc["router"] + pc["output"]


def test_llama_param_counts_match_the_papers() -> None:
    # Llama 3 paper: 8B and 70B (8.03 B / 70.6 B in Meta's model cards); Mixtral: 46.7 B total
    totals = {n: sum(c.param_count().values()) for n, c in LLAMA_MODELS.items()}
    assert totals["llama3-8b"] == 8_030_261_248
    assert totals["llama3-70b"] == pytest.approx(70.55e9, rel=1e-3)
    assert totals["mixtral-8x7b"] == pytest.approx(46.70e9, rel=1e-3)


@pytest.mark.parametrize("granularity", ["kernel", "module"])
@pytest.mark.parametrize("cfg", [TINY, TINY_MOE], ids=["dense", "moe"])
def test_llama_graph_is_a_well_formed_training_step(cfg: LlamaConfig, granularity: str) -> None:
    g = llama_graph(cfg, granularity=granularity)
    tr = g.training("adam")
    n = len(tr.ops)
    src = np.array([e.src for e in tr.edges])
    dst = np.array([e.dst for e in tr.edges])
    assert len(topological_order(n, src, dst)) == n  # acyclic
    assert {o.phase for o in tr.ops} == {"forward", "backward", "update"}
    # weights are held once (micro-batch 0) and counted once
    assert g.total_params() == sum(cfg.param_count().values()) * g.elem
    owners = [o for o in g.ops if o.params > 0]
    assert all(o.name.startswith("mb0.") for o in owners)
    updates = [o for o in tr.ops if o.phase == "update"]
    assert len(updates) == len(owners)
    # each update gets the gradient of every micro-batch's copy of its op
    into = Counter(tr.ops[e.dst].name for e in tr.edges if e.gradient)
    assert all(into[u.name] == cfg.micro_batches for u in updates)
    # every copy of an op, its backward and its update share one colocation group
    groups: dict[str, set[str]] = {}
    for k, grp in tr.colocate.items():
        groups.setdefault(grp, set()).add(tr.ops[k].name)
    q = groups["layers.1.self_attn.q_proj"]
    assert {"mb0.layers.1.self_attn.q_proj", "mb1.layers.1.self_attn.q_proj", "mb0.layers.1.self_attn.q_proj.grad", "mb0.layers.1.self_attn.q_proj.update"} <= q
    # rotary tables carry no gradient: no backward op
    assert not any(o.name.startswith("mb0.rotary_emb") for o in tr.ops if o.phase == "backward")


@pytest.mark.parametrize("granularity", ["kernel", "module"])
def test_llama_flops_match_closed_forms(granularity: str) -> None:
    cfg = TINY
    g = llama_graph(cfg, granularity=granularity)
    tr = g.training("adam")
    tokens = cfg.batch * cfg.seq * cfg.micro_batches
    n_mm = _matmul_params(cfg)
    # dense part: 2 FLOPs per parameter per token forward, 6 with the backward pass
    assert g.total_flops("forward", ["matmul"]) - _rotary_flops(g) == pytest.approx(2 * n_mm * tokens)
    train_mm = tr.total_flops("forward", ["matmul"]) + tr.total_flops("backward", ["matmul"]) - _rotary_flops(g)
    assert train_mm == pytest.approx(6 * n_mm * tokens)
    # attention: 4 b s^2 heads head_dim per layer (full score matrix)
    att = 4 * cfg.batch * cfg.seq**2 * cfg.heads * cfg.head_dim * cfg.layers * cfg.micro_batches
    assert g.total_flops("forward", ["flash_attention"]) == pytest.approx(att)
    # Adam: 12 FLOPs per parameter
    assert tr.total_flops("update") == pytest.approx(12 * sum(cfg.param_count().values()))


def _rotary_flops(g: Any) -> float:
    """The rotary table's frequency product is a (non-parameter) matmul: b s d/2 x 2."""
    return sum(o.flops for o in g.ops if o.type == "matmul" and "rotary" in o.name)


@pytest.mark.parametrize("capacity", [1.0, 1.25])
def test_moe_routing_flops_match_top_k(capacity: float) -> None:
    cfg = llama_config(TINY_MOE, capacity_factor=capacity)
    g = llama_graph(cfg, granularity="kernel", micro_batches=1)
    T, h, f, E, k = cfg.batch * cfg.seq, cfg.hidden, cfg.ffn, cfg.experts, cfg.top_k
    te = math.ceil(capacity * k * T / E)
    assert cfg.expert_tokens(T) == te
    experts = sum(o.flops for o in g.ops if ".experts." in o.name and o.type == "matmul")
    assert experts == pytest.approx(cfg.layers * E * 6 * te * h * f)
    if capacity == 1.0:  # balanced, no padding: every token through k experts' SwiGLU
        assert experts == pytest.approx(cfg.layers * k * T * 6 * h * f)
    router = sum(o.flops for o in g.ops if o.name.endswith("block_sparse_moe.gate"))
    assert router == pytest.approx(cfg.layers * 2 * T * h * E)
    combine = sum(o.flops for o in g.ops if o.name.endswith("combine"))
    assert combine == pytest.approx(cfg.layers * 2 * k * T * h)
    dispatch = [o for o in g.ops if o.name.endswith("dispatch")]
    assert all(o.output == E * te * h * g.elem for o in dispatch)


def test_llama_config_errors() -> None:
    with pytest.raises(InputError, match="kv_heads"):
        LlamaConfig("bad", 2, 64, 4, 3, 96, 128, 64, 16, 1, 1, "test")
    with pytest.raises(InputError, match="granularity"):
        llama_graph(TINY, granularity="op")
    with pytest.raises(InputError, match="micro_batches"):
        model_graph("gpt2-small", micro_batches=2)
    with pytest.raises(InputError, match="unknown Llama"):
        llama_config("llama9")
    with pytest.raises(InputError, match="mixture-of-experts"):
        llama_sharding("mixtral-8x7b", 8)


def test_llama_placement_loads_and_solves() -> None:
    doc = make_placement(llama_graph(TINY), "h100-nvl:4")
    inst = instance_from_dict(doc)
    assert inst.n_ops == len(doc["graph"]["ops"])
    res = distplan.solve(inst, formulation="baechi_etf")
    assert res.check.feasible and res.bound is not None and res.bound <= res.objective
    # the zoo name builds the full model (not solved here): >= 10k ops for the 8B step
    full = model_graph("llama3-8b")
    assert len(full.training("adam").ops) >= 10_000
    assert full.total_params() == 8_030_261_248 * full.elem


def test_h100_catalogue() -> None:
    nvl = device("H100-NVL")
    assert nvl.peak_flops("bf16") == 835.5e12 and nvl.memory_bandwidth == 3.9e12 and nvl.memory_bytes == 94 * GiB
    assert device("H100-SXM").peak_flops("bf16") == 989e12
    bw, _ = cluster("h100-nvl").pair_matrices()
    assert bw[0, 1] == 300e9 and bw[0, 2] == 63e9 and bw[2, 3] == 300e9
    bw, _ = cluster("8xh100-sxm-ib").pair_matrices()
    assert bw[0, 7] == 450e9 and bw[0, 8] == 50e9 and bw.shape == (64, 64)
    assert mesh_links("8xh100-sxm-ib", (8, 8))[:2] == ((50e9, 450e9), (1.5e-5, 5e-6))
    assert mesh_links("h100-nvl", (2, 2))[0] == (63e9, 300e9)
    with pytest.raises(InputError, match="needs 64"):
        mesh_links("h100-sxm", (8, 8))


def test_llama_sharding_instance_loads_and_solves() -> None:
    cfg = TINY
    inst = llama_sharding(cfg, batch=8, mesh=(2, 2), cluster="h100-nvl", memory=2e8)
    again = instance_from_dict(inst.to_dict())
    assert len(again.ops) == len(inst.ops) == 5 + 17 * cfg.layers
    b, s = 8, cfg.seq
    linear = sum(inst.semantics(k).flops for k, op in enumerate(inst.ops) if op.type == "linear")
    assert linear == pytest.approx(2 * b * s * (_matmul_params(cfg)))
    att = sum(inst.semantics(k).flops for k, op in enumerate(inst.ops) if op.type == "attention")
    assert att == pytest.approx(4 * b * s * s * cfg.heads * cfg.head_dim * cfg.layers)
    params = sum(t.numel for k in range(len(inst.ops)) for t in inst.semantics(k).params)
    assert params == sum(cfg.param_count().values())
    for formulation in ("data_parallel", "tap"):
        res = distplan.solve(again, formulation=formulation)
        assert res.check.feasible and res.check.details["memory_bytes"] <= 2e8


def test_pipeline_from_model_block_times() -> None:
    from distplan.instances.zoo import model_graph as zoo_graph

    inst = pipeline_from_model("gpt2-small", 3, 4, "h100-sxm", dtype="fp16", split_backward=True)
    blocks = {b.name: b for b in inst.blocks}
    tr = zoo_graph("gpt2-small", dtype="fp16").training("adam")
    t = tr.times(["H100-80GB"])["H100-80GB"]
    phase = np.array([o.phase for o in tr.ops])
    assert sum(blocks[f"F{j}"].duration for j in range(3)) == pytest.approx(t[phase == "forward"].sum())
    back = sum(blocks[f"B{j}"].duration + blocks[f"W{j}"].duration for j in range(3))
    assert back == pytest.approx(t[phase == "backward"].sum())
    assert all(blocks[f"F{j}"].memory == pytest.approx(-(blocks[f"B{j}"].memory + blocks[f"W{j}"].memory)) for j in range(3))
    res = distplan.solve(inst, formulation="zb_h1")
    assert res.check.feasible
    with pytest.raises(InputError, match="layers"):
        pipeline_from_model("gpt2-small", 8, 4, "h100-sxm", shape="interleaved", chunks=2)


def test_pipeline_from_model_on_the_v_placement() -> None:
    """``shape="v2"``: 2p stages, device d holding stages d and 2p - 1 - d, the same
    model time as the plain pipeline in twice the stages; the V schedules take it (they
    took only `make_pipeline`'s toy costs, review rev24b)."""
    v2 = pipeline_from_model("gpt2-small", 3, 6, "h100-sxm", shape="v2", dtype="fp16", split_backward=True)
    plain = pipeline_from_model("gpt2-small", 3, 6, "h100-sxm", dtype="fp16", split_backward=True)
    blocks = {b.name: b for b in v2.blocks}
    assert len(blocks) == 3 * 6 and v2.name == "gpt2-small-v2-zb-p3-n6"
    assert [blocks[f"F{j}"].devices for j in range(6)] == [(v2.devices[d],) for d in (0, 1, 2, 2, 1, 0)]
    assert sum(b.duration for b in v2.blocks) == pytest.approx(sum(b.duration for b in plain.blocks))
    for formulation in ("v_half", "v_zb", "zb_v"):
        res = distplan.solve(v2.with_(memory_capacity=None), formulation=formulation)
        assert res.check is not None and res.check.feasible, formulation
    with pytest.raises(InputError, match="v, interleaved and v2"):
        pipeline_from_model("gpt2-small", 3, 6, "h100-sxm", shape="x")


def test_make_llama_instances_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distplan.cli import main

    place, shard, pipe = (str(tmp_path / f) for f in ("p.json", "s.json", "q.json"))
    assert main(["make", "placement", "--model", "llama3-8b", "--cluster", "h100-nvl", "--micro-batches", "1", "--granularity", "module", "--seq", "1024", "-o", place]) == 0
    doc = json.loads(Path(place).read_text())
    assert doc["meta"]["parameters"]["micro_batches"] == 1 and len(doc["cluster"]["devices"]) == 8
    assert main(["make", "sharding", "--model", "llama3-8b", "--layers", "2", "--mesh", "2x4", "--cluster", "h100-sxm", "--batch", "8", "-o", shard]) == 0
    inst = load_instance(shard)
    assert inst.mesh.shape == (2, 4) and inst.mesh.bandwidth == (450e9, 450e9) and inst.mesh.device == "H100-80GB"
    assert main(["make", "pipeline", "--model", "gpt2-small", "--stages", "2", "--micro-batches", "4", "--cluster", "dgx1", "-o", pipe]) == 0
    assert load_instance(pipe).micro_batches == 4
    assert main(["make", "pipeline", "--stages", "2", "--micro-batches", "4", "-o", pipe]) == 2  # no --shape, no --model
    capsys.readouterr()
