"""Plans that run (issue 19): emitted formats, named errors, and (with torch) execution.

Without torch only the text is checked; with the ``torch`` extra the pipeline schedules
run on 4 gloo CPU processes and the DTensor plan on a 2-process mesh, compared with the
unsharded model within 1e-5.
"""

from __future__ import annotations

import ast
import csv
import io
import json
import re

import pytest

import distplan
from distplan.cli import main
from distplan.emit import emit
from distplan.emit.pipeline import stage_layout
from distplan.errors import InputError
from distplan.instances.pipelines import make_pipeline
from distplan.instances.transformer import transformer
from distplan.models.common import write_json
from distplan.models.sharding import ShardingInstance

TOL = 1e-5
ACTION = re.compile(r"(\d+)([FBIW])(\d+)\Z")


@pytest.fixture(scope="module")
def pipeline_plans() -> dict[str, tuple[object, object]]:
    """The 6 plans of the issue (V shape, 4 stages, 8 micro-batches) and an interleaved one."""
    plain = make_pipeline("v", 4, 8)
    split = make_pipeline("v", 4, 8, forward_time=1.0, backward_time=1.0, weight_time=1.0)
    inter = make_pipeline("interleaved", 4, 8, chunks=2)
    out: dict[str, tuple[object, object]] = {}
    for inst, names in ((plain, ("1f1b", "tessel")), (split, ("zb_h1", "zb_h2", "tessel", "pipeline_milp")), (inter, ("interleaved_1f1b",))):
        for f in names:
            res = distplan.solve(inst, formulation=f, time_limit=30)
            assert res.check is not None and res.check.feasible
            out[f"{inst.name}/{f}"] = (inst, res)
    return out


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_pipeline_csv_format(pipeline_plans: dict[str, tuple[object, object]]) -> None:
    assert len(pipeline_plans) == 7
    for key, (inst, res) in pipeline_plans.items():
        rows = _rows(emit(res, "torch-pipelining", inst))
        assert len(rows) == 4, key
        split = "-zb-" in key
        stages = 8 if "interleaved" in key else 4
        seen: dict[tuple[int, str], set[int]] = {}
        for rank, row in enumerate(rows):
            for cell in row:
                m = ACTION.match(cell)
                assert m, (key, cell)
                s, a, mb = int(m.group(1)), m.group(2), int(m.group(3))
                assert s % 4 == rank, (key, cell)  # stage = chunk * devices + device
                seen.setdefault((s, a), set()).add(mb)
        letters = ("F", "I", "W") if split else ("F", "B")
        assert set(seen) == {(s, a) for s in range(stages) for a in letters}, key
        assert all(v == set(range(8)) for v in seen.values()), key
    # execution order: a rank's row follows the plan's start times
    inst, res = pipeline_plans["v-p4-n8/1f1b"]
    assert _rows(emit(res, "torch-pipelining", inst))[3][:4] == ["3F0", "3B0", "3F1", "3B1"]


def test_v_placement_stage_order() -> None:
    inst = make_pipeline("v2", 4, 8, weight_time=1.0)
    layout = stage_layout(inst)
    assert layout.rank_of_stage == (0, 1, 2, 3, 3, 2, 1, 0)
    assert layout.shape() == "v"
    res = distplan.solve(inst, formulation="zb_v")
    rows = _rows(emit(res, "torch-pipelining", inst))
    assert {int(ACTION.match(c).group(1)) for c in rows[0]} == {0, 7}  # type: ignore[union-attr]


def test_pipeline_named_errors(tmp_path) -> None:
    placement = distplan.solve("placement-small-1", formulation="baechi_topo")
    with pytest.raises(InputError, match="pipeline plans"):
        emit(placement, "torch-pipelining", "placement-small-1")
    m = make_pipeline("m", 4, 4)
    res = distplan.solve(m, formulation="1f1b")
    with pytest.raises(InputError, match="block 'SF' runs on 4 devices"):
        emit(res, "torch-pipelining", m)
    x = make_pipeline("x", 4, 4)
    with pytest.raises(InputError, match="forward blocks have no dependency"):
        stage_layout(x)
    with pytest.raises(InputError, match="inference pipeline"):
        stage_layout(make_pipeline("v", 4, 4, mode="inference"))
    k = make_pipeline("k", 4, 4)
    with pytest.raises(InputError, match="block 'JF' runs on 4 devices"):
        stage_layout(k)
    # the CLI: exit code 2 for a placement plan
    plan = tmp_path / "plan.json"
    write_json({"format": "distplan/1", "kind": "placement-plan", "instance": "placement-small-1", **placement.plan.to_dict()}, plan)
    assert main(["emit", str(plan), "-t", "torch-pipelining"]) == 2


def test_cli_emit(tmp_path, capsys) -> None:
    inst = make_pipeline("v", 4, 8)
    path = tmp_path / "p.json"
    write_json(inst.to_dict(), path)
    plan = tmp_path / "plan.json"
    assert main(["solve", str(path), "-f", "1f1b", "--out", str(plan)]) == 0
    out = tmp_path / "s.csv"
    assert main(["emit", str(plan), "-i", str(path), "-t", "torch-pipelining", "-o", str(out)]) == 0
    assert out.read_text().splitlines()[3].startswith("3F0,3B0,3F1")
    capsys.readouterr()
    # solve --out records the instance's source: emit finds it without -i
    assert main(["emit", str(plan), "-t", "torch-pipelining"]) == 0
    assert capsys.readouterr().out.splitlines()[3].startswith("3F0,3B0,3F1")
    # a plan whose instance cannot be found is a named error
    doc = json.loads(plan.read_text())
    doc["source"] = str(tmp_path / "gone.json")
    doc["instance"] = "no-such-instance"
    plan.write_text(json.dumps(doc))
    assert main(["emit", str(plan), "-t", "torch-pipelining"]) == 2
    assert "--instance" in capsys.readouterr().err


@pytest.fixture(scope="module")
def tp_case() -> tuple[object, object]:
    inst = transformer(1, 32, 4, 8, 2, 256, ffn=64, mesh=2)
    return inst, distplan.solve(inst, formulation="megatron")


def test_dtensor_text(tp_case) -> None:
    inst, res = tp_case
    text = emit(res, "dtensor", inst)
    body = text.split("parallelize_plan = ", 1)[1]
    assert "'layers.0.attn.wq': ColwiseParallel()" in body
    assert "'layers.0.attn.wo': RowwiseParallel()" in body
    assert "'layers.0.mlp.fc1': ColwiseParallel()" in body
    assert "'layers.0.mlp.fc2': RowwiseParallel()" in body
    assert "'tok_embeddings': RowwiseParallel(input_layouts=Replicate())" in body
    assert "'output': ColwiseParallel(use_local_output=False)" in body
    assert "LOSS_PARALLEL = True" in text and "TP_SIZE = 2" in text
    tree = ast.parse(text)  # valid Python; its plan names every module of the Megatron split
    plan = next(n.value for n in tree.body if isinstance(n, ast.Assign) and n.targets[0].id == "parallelize_plan")  # type: ignore[attr-defined]
    assert len(plan.keys) == 8  # type: ignore[attr-defined]
    # other module names through templates
    text2 = emit(res, "dtensor", inst, modules={"l{i}.fc1": "blocks.{i}.ff.w1"})
    assert "'blocks.0.ff.w1': ColwiseParallel()" in text2


def test_dtensor_named_errors(tp_case) -> None:
    inst, res = tp_case
    strategies = dict(res.plan.strategies)
    strategies.update({"l0.fc1": "S(b)", "l0.gelu": "S(b)"})  # a feasible plan: fc1 runs batch-split
    with pytest.raises(InputError, match=r"op 'l0.fc1' \(linear, S\(b\)\).*no parallelize_plan style"):
        emit({"strategies": strategies}, "dtensor", inst)
    with pytest.raises(InputError, match=r"op 'l0.qkv'.*along 't', not 'a'"):
        emit(res, "dtensor", inst, modules={"l{i}.qkv": "layers.{i}.attn.qkv"})
    with pytest.raises(InputError, match=r"^modules\.l\{i\}\.fc9: no op of .* is named 'l\{i\}\.fc9'"):
        emit(res, "dtensor", inst, modules={"l{i}.fc1": "blocks.{i}.ff.w1", "l{i}.fc9": "blocks.{i}.ff.w9"})  # a misspelt op was ignored
    # module names that are no text (review rev23c: 5 and True ended in a TypeError
    # traceback, [3] and "" were written into the plan, "" naming the root module)
    for bad in (5, True, [3], "", [], ["  "]):
        with pytest.raises(InputError, match=r"^modules\.l0\.qkv: .* is not a module name"):
            emit(res, "dtensor", inst, modules={"l0.qkv": bad})
    dp = distplan.solve(inst, formulation="data_parallel")
    with pytest.raises(InputError, match="data parallel"):
        emit(dp, "dtensor", inst)


def test_megatron_flags(tp_case, pipeline_plans) -> None:
    inst = transformer(2, 64, 4, 16, 8, 256, mesh=(2, 4))
    res = distplan.solve(inst, formulation="megatron")
    flags = emit(res, "megatron", inst).splitlines()[-1].split()
    assert flags[:2] == ["--tensor-model-parallel-size", "4"]
    assert flags[flags.index("--micro-batch-size") + 1] == "4"  # batch 8 over data-parallel 2
    assert flags[flags.index("--num-layers") + 1] == "2"
    from distplan.instances.zoo_sharding import llama_sharding

    llama = llama_sharding("llama3-8b", batch=16, mesh=(2, 8), layers=2, memory=1e12)
    line = emit(distplan.solve(llama, formulation="megatron"), "megatron", llama).splitlines()[-1]
    assert line.startswith("--tensor-model-parallel-size 8 --num-layers 2 --hidden-size 4096")
    assert "--num-attention-heads 32 --group-query-attention --num-query-groups 8" in line and line.endswith("--micro-batch-size 8")
    inst_zb, zb = pipeline_plans["v-zb-p4-n8/zb_h1"]
    line = emit(zb, "megatron", inst_zb, num_layers=8).splitlines()[-1]
    assert line == "--pipeline-model-parallel-size 4 --num-layers 8 --enable-zero-bubble --zero-bubble-max-pending-backward 4"
    inst_i, inter = pipeline_plans["interleaved2-p4-n8/interleaved_1f1b"]
    assert "--num-layers-per-virtual-pipeline-stage 2" in emit(inter, "megatron", inst_i, num_layers=16)
    inst_t, tessel = pipeline_plans["v-zb-p4-n8/tessel"]
    with pytest.raises(InputError, match="no Megatron equivalent for a tessel schedule"):
        emit(tessel, "megatron", inst_t)


# -- executed in PyTorch (extra "torch") ---------------------------------------------------------


def test_csv_passes_torch_validation(pipeline_plans) -> None:
    pytest.importorskip("torch")
    from torch.distributed.pipelining.schedules import _Action, _validate_schedule

    for key, (inst, res) in pipeline_plans.items():
        rows = _rows(emit(res, "torch-pipelining", inst))
        stages = 8 if "interleaved" in key else 4
        mapping = _validate_schedule({r: [_Action.from_str(c) for c in row] for r, row in enumerate(rows)}, 4, stages, 8)
        assert mapping == {s: s % 4 for s in range(stages)}, key


def test_schedules_run_in_torch(pipeline_plans) -> None:
    pytest.importorskip("torch")
    from distplan.emit.torch_check import PipelineJob, run_pipeline_schedules

    jobs = [PipelineJob(key, emit(res, "torch-pipelining", inst), 8 if "interleaved" in key else 4, 8) for key, (inst, res) in pipeline_plans.items()]
    v2 = make_pipeline("v2", 4, 8, forward_time=1.0, backward_time=1.0, weight_time=1.0)  # zig-zag: rank d holds d and 7-d
    jobs.append(PipelineJob("v2/zb_v", emit(distplan.solve(v2, formulation="zb_v"), "torch-pipelining", v2), 8, 8))
    reports = run_pipeline_schedules(jobs, world=4)
    assert [r.name for r in reports] == [*pipeline_plans, "v2/zb_v"]
    for r in reports:
        assert r.n_params == (16 if "interleaved" in r.name or "v2" in r.name else 8)
        assert r.loss_diff <= TOL, r
        assert r.max_grad_diff <= TOL, r


def test_dtensor_plan_runs(tp_case) -> None:
    pytest.importorskip("torch")
    from distplan.emit.torch_check import GPTShape, run_dtensor_plan

    inst, res = tp_case
    report = run_dtensor_plan(emit(res, "dtensor", inst), GPTShape(vocab=256, seq=8, layers=1, hidden=32, heads=4, ffn=64, batch=2), world=2)
    assert report.details["sharded_params"] == 12  # the plan really shards the weights
    assert report.max_output_diff <= TOL
    assert report.max_grad_diff <= TOL
    assert abs(report.loss - report.reference_loss) <= TOL


def test_dtensor_plan_runs_only_at_its_tensor_parallel_degree(tp_case) -> None:
    """A plan made for TP_SIZE 2 is refused on 4 processes (or 1) before any starts: a
    named error, not a run of a plan at a degree its costs were not made for."""
    pytest.importorskip("torch")
    from distplan.emit.torch_check import GPTShape, run_dtensor_plan

    inst, res = tp_case
    text = emit(res, "dtensor", inst)
    assert "TP_SIZE = 2" in text
    with pytest.raises(InputError, match="tensor-parallel degree of 2 .*4 processes"):
        run_dtensor_plan(text, GPTShape(vocab=256, seq=8, layers=1, hidden=32, heads=4, ffn=64, batch=2), world=4)
    with pytest.raises(InputError, match="world=2"):
        run_dtensor_plan(text, world=1)


def _sequence_parallel(ops: int = 5) -> ShardingInstance:
    """A sequence-parallel block: input x, layernorm, two linears around an activation
    (its first ``ops`` ops)."""
    doc = {
        "format": "distplan/1", "kind": "sharding", "name": "sp",
        "mesh": {"shape": [2], "bandwidth": [1e11], "latency": [1e-6], "device": "A100-80GB"},
        "training": {"batch_dim": "b"},
        "graph": {"dims": {"b": 2, "s": 8, "h": 16, "f": 32}, "ops": [
            {"name": "x", "type": "input", "out": ["b", "s", "h"]},
            {"name": "ln", "type": "layernorm", "inputs": ["x"], "out": ["b", "s", "h"], "params": [{"name": "g", "dims": ["h"]}]},
            {"name": "fc1", "type": "linear", "inputs": ["ln"], "out": ["b", "s", "f"], "params": [{"name": "w", "dims": ["h", "f"]}]},
            {"name": "act", "type": "elementwise", "inputs": ["fc1"], "out": ["b", "s", "f"]},
            {"name": "fc2", "type": "linear", "inputs": ["act"], "out": ["b", "s", "h"], "params": [{"name": "w", "dims": ["f", "h"]}]},
        ]},
    }  # fmt: skip
    doc["graph"]["ops"] = doc["graph"]["ops"][:ops]
    return ShardingInstance.from_dict(doc)


def test_dtensor_sequence_parallel() -> None:
    inst = _sequence_parallel()
    plan = {"strategies": {"x": "S(s)", "ln": "S(s)", "fc1": "S(f)", "act": "S(f)", "fc2": "S(f)"}}
    body = emit(plan, "dtensor", inst, modules={"ln": "norm", "fc1": "w1", "fc2": "w2"}).split("parallelize_plan = ")[1]
    assert "'norm': SequenceParallel(use_local_output=True)" in body
    assert "'w1': ColwiseParallel(input_layouts=Shard(1))" in body  # all-gather of the sequence
    assert "'w2': RowwiseParallel()" in body
    plan["strategies"].update({"x": "R", "ln": "S(s)"})  # a replicated input cannot enter SequenceParallel
    with pytest.raises(InputError, match="SequenceParallel takes its input split along the sequence"):
        emit(plan, "dtensor", inst, modules={"ln": "norm", "fc1": "w1", "fc2": "w2"})


def test_dtensor_says_how_to_feed_a_sequence_split_activation_input() -> None:
    inst = _sequence_parallel(ops=3)
    text = emit({"strategies": {"x": "S(s)", "ln": "S(s)", "fc1": "S(f)"}}, "dtensor", inst, modules={"ln": "norm", "fc1": "w1"})
    assert 'Feed each rank its sequence shard (dim 1 split over mesh["tp"]) of input(s) x.' in text


def test_llama_dtensor_plan_runs_on_the_example_module() -> None:
    """A Llama-class sharding instance's Megatron plan, emitted with torchtitan's module
    names, runs on examples/llama_style.py's module (GQA, rotary, SwiGLU, RMSNorm)."""
    pytest.importorskip("torch")
    import importlib.util
    import sys
    from pathlib import Path

    from distplan.emit.torch_check import GPTShape, run_dtensor_plan
    from distplan.instances.zoo_llama import llama_config
    from distplan.instances.zoo_sharding import llama_sharding

    path = Path(__file__).resolve().parent.parent / "examples" / "llama_style.py"
    spec = importlib.util.spec_from_file_location("llama_style", path)
    assert spec is not None and spec.loader is not None
    llama = importlib.util.module_from_spec(spec)
    sys.modules["llama_style"] = llama
    spec.loader.exec_module(llama)
    tiny = llama.tiny().cfg
    cfg = llama_config("llama3-8b", layers=tiny.layers, hidden=tiny.hidden, heads=tiny.heads, kv_heads=tiny.kv_heads, ffn=tiny.ffn, vocab=tiny.vocab, seq=16, max_seq=tiny.max_seq)
    inst = llama_sharding(cfg, batch=2, mesh=2, cluster="8xh100-sxm-ib")
    text = emit(distplan.solve(inst, formulation="megatron"), "dtensor", inst)
    assert "'layers.1.feed_forward.w3': ColwiseParallel()" in text
    report = run_dtensor_plan(text, GPTShape(vocab=tiny.vocab, seq=16, batch=2), world=2, factory=llama.tiny)
    assert report.details["sharded_params"] == 1 + 2 * 7 + 1
    assert report.max_output_diff <= TOL and report.max_grad_diff <= TOL
