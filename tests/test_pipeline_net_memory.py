"""A micro-batch that frees more memory on a device than it allocates there is refused by
name (review rev26: with every B block at -5 after F blocks of +1, `validate` said valid
and `pipeline_milp` returned an "optimal" 56 s within a capacity of 1 where the balanced
instance needs 128 s; only tessel refused it). What a micro-batch keeps (a positive sum)
stays allowed."""

from __future__ import annotations

import pytest

import distplan
from distplan.errors import InputError
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelineInstance


def freeing(memory_of_b: float) -> dict:  # type: ignore[type-arg]
    inst = make_pipeline("v", 4, 8, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=1.0)
    doc = inst.to_dict()
    for block in doc["blocks"]:
        if block["role"] == "B":
            block["memory"] = memory_of_b
    return doc


def test_the_loader_names_the_block_and_the_device() -> None:
    with pytest.raises(InputError, match=r"frees more memory than it allocates on device d0: its blocks there sum to -[0-9.]+ bytes") as err:
        PipelineInstance.from_dict(freeing(-5.0))
    assert err.value.path.startswith("blocks[") and err.value.path.endswith("].memory")


@pytest.mark.parametrize("formulation", ["pipeline_milp", "tessel", "1f1b", "zb_h1"])
def test_every_formulation_refuses_an_instance_built_in_python(formulation: str) -> None:
    import dataclasses

    inst = make_pipeline("v", 4, 8, forward_time=1.0, backward_time=2.0, weight_time=1.0, memory_capacity=1.0)
    blocks = [dataclasses.replace(b, memory=-5.0) if b.role == "B" else b for b in inst.blocks]
    with pytest.raises(InputError, match="frees more memory than it allocates"):
        distplan.solve(dataclasses.replace(inst, blocks=blocks), formulation, time_limit=10)


def test_a_micro_batch_that_keeps_memory_is_still_taken() -> None:
    inst = PipelineInstance.from_dict(freeing(-0.5))  # (F +1, B -0.5: half of it kept)
    res = distplan.solve(inst.with_(memory_capacity=100.0), "1f1b")
    assert res.plan is not None and res.check is not None and res.check.feasible


def test_the_cli_validate_exits_2(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from distplan.cli import main

    path = tmp_path / "freeing.json"
    path.write_text(json.dumps(freeing(-5.0)))
    assert main(["validate", str(path)]) == 2
    assert "blocks[" in capsys.readouterr().err
