"""First-contact defects of review 12 (commands): charts without matplotlib, Megatron flags
that would run another plan (tensor parallelism on an outer mesh axis, ZB-H2 above the
plan's in-flight count, --num-layers on a sharding plan) and plans that name their instance
by a relative path. The import-torch ones are in test_first_contact12_torch.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import assert_named_error, cli_run

ROOT = Path(__file__).resolve().parents[1]


# -- 1. charts need matplotlib: a named error, not a traceback ------------------------------


def test_plot_without_matplotlib_is_a_named_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    rc, _, err = cli_run(["solve", "placement-small-2", "-f", "baechi_etf", "--out", "plan.json"], capsys)
    assert rc == 0, err
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    for argv in (["plot", "placement-small-2", "plan.json", "-o", "gantt.png"], ["plot", "libra-gpt3-3d-total500", "-o", "pareto.png"]):
        rc, out, err = cli_run(argv, capsys)
        assert_named_error(rc, out, err, "plot", "matplotlib", "pip install 'distplan[plot]'")
    assert not (tmp_path / "gantt.png").exists() and not (tmp_path / "pareto.png").exists()


# -- 6, 7, 8. Megatron flags -----------------------------------------------------------------


def test_megatron_refuses_tensor_parallelism_on_an_outer_mesh_axis(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outer, inner = tmp_path / "tp0.json", tmp_path / "tp1.json"
    assert cli_run(["solve", "gpt-24layer-2x4", "-f", "megatron", "--param", "tp_axis=0", "--out", str(outer)], capsys)[0] == 0
    rc, out, err = cli_run(["emit", str(outer), "--target", "megatron"], capsys)
    assert_named_error(rc, out, err, "plan:", "mesh axis 0", "consecutive ranks", "--target dtensor", "tp_axis=1")
    # on the inner axis (the hint's tp_axis=1) the flags stay
    assert cli_run(["solve", "gpt-24layer-2x4", "-f", "megatron", "--param", "tp_axis=1", "--out", str(inner)], capsys)[0] == 0
    rc, out, err = cli_run(["emit", str(inner), "--target", "megatron"], capsys)
    assert rc == 0, err
    assert "--tensor-model-parallel-size 4 " in out


def test_megatron_num_layers_on_a_sharding_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = tmp_path / "tp.json"
    assert cli_run(["solve", "gpt3-4layer-8gpu", "-f", "megatron", "--result", str(plan)], capsys)[0] == 0
    rc, out, err = cli_run(["emit", str(plan), "--target", "megatron", "--num-layers", "96"], capsys)
    assert_named_error(rc, out, err, "num_layers", "96", "4 layers")
    rc, out, err = cli_run(["emit", str(plan), "--target", "megatron", "--num-layers", "4"], capsys)  # the instance's own count
    assert rc == 0 and "--num-layers 4 " in out, err


def _pending(csv: str) -> int:
    """The most micro-batches a rank holds between a forward and its backward (from the
    torch-pipelining CSV: one row of actions per rank, in execution order)."""
    most = 0
    for row in csv.strip().splitlines():
        held: set[str] = set()
        for action in row.split(","):
            stage, mb = action.split("F") if "F" in action else (action[:1], "")
            if "F" in action:
                held.add(f"{stage}:{mb}")
                most = max(most, len(held))
            else:
                for act in ("I", "B"):
                    if act in action:
                        held.discard(":".join(action.split(act)))
    return most


def test_zb_h2_flags_follow_the_plans_in_flight_count(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    # Llama 3 8B on 4 stages: memory keeps ZB-H2 at ZB-H1's 4 micro-batches in flight on rank 0
    assert cli_run(["make", "pipeline", "--model", "llama3-8b", "--stages", "4", "--micro-batches", "8", "--split-backward", "-o", "lp.json"], capsys)[0] == 0
    assert cli_run(["solve", "lp.json", "-f", "zb_h2", "--out", "lp_h2.json"], capsys)[0] == 0
    rc, csv, err = cli_run(["emit", "lp_h2.json", "--target", "torch-pipelining"], capsys)
    assert rc == 0, err
    assert _pending(csv) == 4
    rc, out, err = cli_run(["emit", "lp_h2.json", "--target", "megatron"], capsys)
    assert rc == 0, err
    assert out.strip().splitlines()[-1].endswith("--enable-zero-bubble --zero-bubble-max-pending-backward 4")
    assert "at most 4 micro-batches" in out
    # no memory limit: ZB-H2's 2p-1 in flight, the fork's ZB-H2 setting 2p
    assert cli_run(["make", "pipeline", "--shape", "v", "--stages", "4", "--micro-batches", "8", "--weight-time", "1", "-o", "pp.json"], capsys)[0] == 0
    assert cli_run(["solve", "pp.json", "-f", "zb_h2", "--out", "pp_h2.json"], capsys)[0] == 0
    rc, csv, _ = cli_run(["emit", "pp_h2.json", "--target", "torch-pipelining"], capsys)
    assert _pending(csv) == 7
    rc, out, err = cli_run(["emit", "pp_h2.json", "--target", "megatron"], capsys)
    assert rc == 0 and out.strip().endswith("--zero-bubble-max-pending-backward 8"), err


# -- 10. plans name their instance file by an absolute path -----------------------------------


def test_emit_finds_a_relative_instance_from_another_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    monkeypatch.chdir(tmp_path / "a")
    assert cli_run(["make", "pipeline", "--shape", "v", "--stages", "2", "--micro-batches", "4", "--weight-time", "1", "-o", "pipe.json"], capsys)[0] == 0
    assert cli_run(["solve", "pipe.json", "-f", "zb_h1", "--out", "plan.json", "--result", "res.json"], capsys)[0] == 0
    assert json.loads(Path("plan.json").read_text())["source"] == str(tmp_path / "a" / "pipe.json")
    assert json.loads(Path("res.json").read_text())["info"]["source"] == str(tmp_path / "a" / "pipe.json")
    monkeypatch.chdir(tmp_path / "b")
    for doc in ("plan.json", "res.json"):
        rc, out, err = cli_run(["emit", f"../a/{doc}", "--target", "torch-pipelining"], capsys)
        assert rc == 0, err
        assert out.startswith("0F0")
    # a bundled name stays a name
    assert cli_run(["solve", "gpt3-4layer-8gpu", "-f", "megatron", "--out", "tp.json"], capsys)[0] == 0
    assert json.loads(Path("tp.json").read_text())["source"] == "gpt3-4layer-8gpu"
