"""Review rev16/c, emitters: D1 (megatron/dtensor flags for plans that replicate compute on
a data-parallel mesh axis), D2 (Megatron's default 1F1B for a memory-shrunk 1f1b plan), D3
(dtensor: token ids split along the sequence) and D5 (torch-pipelining: ties in start time
broken by the action's text, not by the dependencies). Text only: no torch needed."""

from __future__ import annotations

import csv
import io
import json

import pytest

import distplan
from distplan.cli import main
from distplan.emit import emit
from distplan.errors import InputError
from distplan.instances.pipelines import make_pipeline
from distplan.instances.transformer import transformer
from distplan.models.common import write_json
from distplan.models.pipeline import PipelineInstance
from distplan.models.sharding import evaluate, plan_from_dict
from distplan.models.sharding_costs import parse_strategy


def _replicate_axis0(strategies: dict[str, str]) -> dict[str, str]:
    """The same plan with mesh axis 0 replicated (``S(b)X`` -> ``RX``)."""
    return {k: "R" + v[4:] if v.startswith("S(b)") else v for k, v in strategies.items()}


# -- D1 ------------------------------------------------------------------------------------


def test_megatron_plan_whose_outer_axis_cannot_split_the_batch_is_refused(tmp_path) -> None:
    """Batch 3 on a 4x2 mesh: the megatron formulation replicates axis 0 (RR, RS(a), ...);
    the flags had said "data parallel 4" and --micro-batch-size 0."""
    inst = transformer(1, 64, 4, 16, 3, 256, ffn=128, mesh=(4, 2))
    res = distplan.solve(inst, formulation="megatron")
    assert res.check is not None and res.check.feasible
    assert res.plan.strategies["l0.qkv"] == "RS(a)"
    for target in ("megatron", "dtensor"):
        with pytest.raises(InputError, match=r"mesh axis 0 \(size 4\) replicates op .*no replicated-compute mode"):
            emit(res, target, inst)
    path, result = tmp_path / "inst.json", tmp_path / "res.json"
    write_json(inst.to_dict(), path)
    assert main(["solve", str(path), "-f", "megatron", "--result", str(result)]) == 0
    for target in ("megatron", "dtensor"):
        assert main(["emit", str(result), "-i", str(path), "-t", target]) == 2


def test_replicated_axis_is_refused_where_the_dp_tp_plan_is_not() -> None:
    """meg_repl.py: on 2x2 the DP+TP plan and the same plan with axis 0 replicated (feasible,
    slower) got byte-identical flags."""
    inst = transformer(1, 64, 4, 16, 8, 256, ffn=128, mesh=(2, 2))
    res = distplan.solve(inst, formulation="megatron")
    flags = emit(res, "megatron", inst).strip().splitlines()[-1].split()
    assert flags[flags.index("--micro-batch-size") + 1] == "4"
    assert "split the batch only" in emit(res, "dtensor", inst)
    replicated = _replicate_axis0(dict(res.plan.strategies))
    assert evaluate(inst, plan_from_dict(inst, {"strategies": replicated})).feasible
    for target in ("megatron", "dtensor"):
        with pytest.raises(InputError, match=r"not data parallel: mesh axis 0 \(size 2\) replicates op 'embed'"):
            emit({"strategies": replicated}, target, inst)
    # one op left replicated on axis 0 is replicated compute too
    one = dict(res.plan.strategies, **{"l0.ln2": "RR"})
    assert evaluate(inst, plan_from_dict(inst, {"strategies": one})).feasible
    with pytest.raises(InputError, match=r"replicates op 'l0.ln2' \(RR\) instead of splitting the batch"):
        emit({"strategies": one}, "megatron", inst)
    # an input op computes nothing: reading the whole batch on every device is still data parallel
    whole_ids = dict(res.plan.strategies, tokens="RR")
    assert evaluate(inst, plan_from_dict(inst, {"strategies": whole_ids})).feasible
    assert emit({"strategies": whole_ids}, "megatron", inst).endswith("--micro-batch-size 4\n")


def test_pure_data_parallel_plan_with_one_replicated_op_is_refused() -> None:
    """The data-parallel branch counted an axis as data parallel when any op split the batch on it."""
    inst = transformer(1, 64, 4, 16, 8, 256, ffn=128, mesh=(2, 2))
    res = distplan.solve(inst, formulation="data_parallel")
    assert emit(res, "megatron", inst).endswith("--micro-batch-size 2\n")
    partial = dict(res.plan.strategies, **{"l0.ln2": "S(b)R"})
    assert evaluate(inst, plan_from_dict(inst, {"strategies": partial})).feasible
    with pytest.raises(InputError, match=r"not pure data parallelism: mesh axis 1 \(size 2\) replicates op 'l0.ln2'.*no replicated-compute mode"):
        emit({"strategies": partial}, "megatron", inst)


def test_data_parallel_problem_checks_that_the_batch_divides() -> None:
    """The evaluator refuses an uneven batch split already; the emitters' own check does too
    (--micro-batch-size is batch // dp)."""
    from distplan.emit.dtensor import data_parallel_problem

    inst = transformer(1, 64, 4, 16, 6, 256, ffn=128, mesh=(4, 2))
    strategies = {op.name: "S(b)R" for op in inst.ops}
    plan = plan_from_dict(inst, {"strategies": strategies})
    chosen = {k: parse_strategy(v, 2) for k, v in strategies.items()}
    assert data_parallel_problem(inst, plan, chosen, [0]) == "the batch 'b' (6) does not divide by the data-parallel size 4"
    assert data_parallel_problem(inst, plan, chosen, [1]).startswith("mesh axis 1 (size 2) replicates op 'embed'")


# -- D2 ------------------------------------------------------------------------------------


def test_megatron_refuses_a_1f1b_plan_whose_warmup_memory_shrank(tmp_path) -> None:
    """repro_megatron_1f1b_memory.sh: capacity 2 keeps one micro-batch in flight; Megatron's
    1F1B holds p = 4 on rank 0."""
    inst = make_pipeline("v", 4, 8, memory_capacity=2)
    res = distplan.solve(inst, formulation="1f1b")
    assert res.plan.info["warmup"] == [0, 0, 0, 0]
    with pytest.raises(InputError, match=r"keeps at most 1 micro-batch\(es\) in flight on rank 0 .* Megatron-LM's 1F1B keeps 4"):
        emit(res, "megatron", inst)
    path, plan = tmp_path / "pipe.json", tmp_path / "plan.json"
    write_json(inst.to_dict(), path)
    assert main(["solve", str(path), "-f", "1f1b", "--out", str(plan)]) == 0
    assert main(["emit", str(plan), "-i", str(path), "-t", "megatron"]) == 2
    assert main(["emit", str(plan), "-i", str(path), "-t", "torch-pipelining"]) == 0


@pytest.mark.parametrize(("micro_batches", "capacity"), [(8, None), (8, 4), (3, 3), (1, 1)])
def test_megatron_still_emits_1f1b_plans_at_megatrons_warmup(micro_batches: int, capacity: float | None) -> None:
    """Megatron's warm-up on rank r is min(p - r - 1, m - 1): with 1 micro-batch and memory
    for 1, the plan is Megatron's 1F1B."""
    inst = make_pipeline("v", 4, micro_batches, memory_capacity=capacity)
    res = distplan.solve(inst, formulation="1f1b")
    assert "Megatron-LM's default 1F1B schedule" in emit(res, "megatron", inst)


# -- D3 ------------------------------------------------------------------------------------

_SEQ_PLAN = {
    "tokens": "S(s)", "embed": "S(v)", "l0.ln1": "R", "l0.qkv": "S(a)", "l0.attn": "S(a)", "l0.proj": "S(a)",
    "l0.res1": "R", "l0.ln2": "R", "l0.fc1": "S(f)", "l0.gelu": "S(f)", "l0.fc2": "S(f)", "l0.res2": "R",
    "ln_f": "R", "head": "S(v)", "loss": "S(v)",
}  # fmt: skip


def test_dtensor_refuses_token_ids_split_along_the_sequence() -> None:
    """repro_dtensor_seq_input.py: tokens S(s) gave tok_embeddings RowwiseParallel(input_layouts=Shard(1)),
    which fails on the GPT layout whichever ids each rank is fed."""
    inst = transformer(1, 32, 4, 8, 2, 256, ffn=64, mesh=2, sequence_split=True)
    assert evaluate(inst, plan_from_dict(inst, {"strategies": _SEQ_PLAN})).feasible
    with pytest.raises(InputError, match=r"strategies.tokens: .*token ids split along the sequence, read by embedding 'embed'"):
        emit({"strategies": _SEQ_PLAN}, "dtensor", inst)
    whole = emit({"strategies": dict(_SEQ_PLAN, tokens="R")}, "dtensor", inst)
    assert "'tok_embeddings': RowwiseParallel(input_layouts=Replicate())" in whole and "sequence shard" not in whole


# -- D5 ------------------------------------------------------------------------------------


def _rows(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def test_torch_pipelining_breaks_start_ties_by_dependency() -> None:
    """repro_pipeline_tie.sh: B1 (1e-8 s, under the evaluator's tolerance) and B0 start
    together; the text key wrote 0B0 before the 1B0 it depends on."""
    inst = PipelineInstance.from_dict(json.loads(
        '{"format": "distplan/1", "kind": "pipeline", "name": "tie", "mode": "training", "objective": "makespan",'
        ' "devices": ["d0"], "memory_capacity": null, "micro_batches": 1, "comm_delay": 0.0, "blocks": ['
        '{"name": "F0", "role": "F", "duration": 0.5, "devices": ["d0"], "memory": 0.5, "deps": []},'
        '{"name": "F1", "role": "F", "duration": 0.5, "devices": ["d0"], "memory": 0.5, "deps": ["F0"]},'
        '{"name": "B1", "role": "B", "duration": 1e-08, "devices": ["d0"], "memory": -0.5, "deps": ["F1"]},'
        '{"name": "B0", "role": "B", "duration": 1.5, "devices": ["d0"], "memory": -0.5, "deps": ["B1"]}]}'
    ))  # fmt: skip
    plan = {"start": {"F0": [0.0], "F1": [0.5], "B1": [1.0], "B0": [1.0]}}
    assert _rows(emit(plan, "torch-pipelining", inst)) == [["0F0", "1F0", "1B0", "0B0"]]


def test_torch_pipelining_orders_stage_10_after_stage_9() -> None:
    """11 stages on one device with F9 shorter than the tolerance: 10F0 and 9F0 start together,
    and the text key put "10F0" before "9F0"."""
    n = 11
    blocks = []
    for s in range(n):
        blocks.append({"name": f"F{s}", "role": "F", "duration": 1e-9 if s == 9 else 1.0, "devices": ["d0"], "deps": [f"F{s - 1}"] if s else []})
    for s in reversed(range(n)):
        blocks.append({"name": f"B{s}", "role": "B", "duration": 1.0, "devices": ["d0"], "deps": [f"F{n - 1}" if s == n - 1 else f"B{s + 1}"]})
    inst = PipelineInstance.from_dict({"format": "distplan/1", "kind": "pipeline", "name": "ten", "mode": "training", "devices": ["d0"], "micro_batches": 1, "blocks": blocks})
    start = {f"F{s}": [float(min(s, 9))] for s in range(n)}
    start.update({f"B{s}": [10.0 + (n - 1 - s)] for s in range(n)})
    row = _rows(emit({"start": start}, "torch-pipelining", inst))[0]
    assert row.index("9F0") < row.index("10F0")
    assert row == [f"{s}F0" for s in range(n)] + [f"{s}B0" for s in reversed(range(n))]
