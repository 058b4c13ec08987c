"""Defects found by review rev31's audit of bench, import-torch and emit (E): each is now a
named error (exit 2), or a refusal where a plan was emitted that its runtime would not run
as labelled."""

from __future__ import annotations

import importlib.util
import sqlite3
from pathlib import Path

import pytest

import distplan
from distplan.cli.importers import _op_times
from distplan.emit import emit
from distplan.emit.megatron import megatron_1f1b_order
from distplan.emit.pipeline import rank_orders
from distplan.errors import InputError
from distplan.instances import load_instance
from distplan.instances.pipelines import make_pipeline
from distplan.models.pipeline import PipelinePlan
from tests.conftest import assert_named_error, cli_run


@pytest.mark.skipif(importlib.util.find_spec("distributed") is None, reason="dask.distributed is not installed here")
@pytest.mark.parametrize("address", ["tcp://127.0.0.1", "garbage", "tcp://127.0.0.1:abc", "foo://127.0.0.1:1"])
def test_a_malformed_scheduler_address_is_named(address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """They ended in a ValueError traceback (exit 1)."""
    campaign = tmp_path / "c.toml"
    campaign.write_text('name = "c"\nformulations = ["baechi_etf"]\nbackends = ["highs"]\ninstances = ["placement-small-1"]\n')
    rc, out, err = cli_run(["bench", "run", str(campaign), "--db", str(tmp_path / "c.db"), "--executor", "dask", "--scheduler", address], capsys)
    assert_named_error(rc, out, err, "--scheduler", "is not a scheduler address")


@pytest.mark.parametrize("value", ["-1", "inf", "nan", "-0.5", "2e9"])
def test_an_op_time_outside_an_instances_range_is_named(value: str) -> None:
    """-1 and inf were written into the instance (which `validate` then refused), and NaN
    became a made-up 7e-6 s."""
    with pytest.raises(InputError, match=r"^--op-time: .* is not a time in \[0, 1e\+09\] seconds"):
        _op_times([f"aten.fft_fft.default={value}"])
    assert _op_times(["aten.fft_fft.default=2e-4", "aten.real.default=0"]) == {"aten.fft_fft.default": 2e-4, "aten.real.default": 0.0}


def test_import_torch_takes_at_most_the_devices_an_instance_may_have(capsys: pytest.CaptureFixture[str]) -> None:
    """--n-devices 100000 wrote an instance no command could read (74.5 GiB of bandwidths)."""
    rc, out, err = cli_run(["import-torch", "x.py:make", "--input-shape", "8,128", "--n-devices", "100000", "-o", "g.json"], capsys)
    assert_named_error(rc, out, err, "--n-devices", "4096")


def test_a_module_given_two_styles_is_refused() -> None:
    """Mapping the MLP's row-parallel fc2 onto the column-parallel q projection's module
    replaced qkv's ColwiseParallel (the last op won): DTensor then failed at run time."""
    inst = load_instance("gpt3-4layer-8gpu")
    res = distplan.solve(inst, "megatron")
    with pytest.raises(InputError, match=r"maps to module 'layers\.0\.attn\.wq', which op 'l0\.qkv' maps to with another style"):
        emit(res, "dtensor", inst, modules={"l{i}.fc2": "layers.{i}.attn.wq"})
    assert "ColwiseParallel" in emit(res, "dtensor", inst)


def test_a_plan_labelled_1f1b_must_run_megatrons_1f1b_order() -> None:
    """A Tessel plan (split backwards, more forwards in flight) relabelled "1f1b" got
    Megatron's default 1F1B flags; distplan's own 1F1B plans are that order exactly."""
    for p, m in [(2, 2), (4, 3), (4, 8), (3, 7)]:
        inst = make_pipeline("v", p, m)
        res = distplan.solve(inst, "1f1b")
        _, orders = rank_orders(inst, res.plan)
        assert orders == [megatron_1f1b_order(r, p, m) for r in range(p)]
        assert "Megatron-LM's default 1F1B schedule" in emit(res, "megatron", inst)
    inst = make_pipeline("v", 4, 8, weight_time=1.0)
    tessel = distplan.solve(inst, "tessel", time_limit=20).plan
    relabelled = PipelinePlan(tessel.block_names, tessel.start, {"schedule": "1f1b"})
    with pytest.raises(InputError, match="labelled 1f1b, but rank 0 does not run Megatron-LM's 1F1B order"):
        emit(relabelled, "megatron", inst)


def test_another_programs_runs_table_is_named_as_such(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The message said "tables ['runs'], no runs table"."""
    db = tmp_path / "other.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE runs (x INTEGER)")
    rc, out, err = cli_run(["bench", "report", str(db)], capsys)
    assert_named_error(rc, out, err, "not a benchmark database", "without distplan's meta table")
    assert "no runs table" not in err
