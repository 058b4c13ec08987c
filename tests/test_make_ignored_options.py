"""`make pipeline` and `make sharding` refuse an option the asked instance would ignore, by
name: pipeline block times with ``--model`` (they come from its layer costs), model options
without it, ``--chunks`` on a shape other than interleaved; a sharding shape option with a
zoo model, ``--cluster`` with a GPT, ``--device`` with a Llama model (all were silently
dropped, review rev25)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import cli_run

BASE = ["make", "pipeline", "--stages", "4", "--micro-batches", "8"]


@pytest.mark.parametrize(
    ("source", "extra", "flag", "why"),
    [
        (["--model", "gpt2-small"], ["--forward-time", "2"], "--forward-time", "has no effect with --model"),
        (["--model", "gpt2-small"], ["--weight-time", "1"], "--weight-time", "has no effect with --model"),
        (["--model", "gpt2-small"], ["--mode", "inference"], "--mode", "has no effect with --model"),
        (["--model", "gpt2-small"], ["--comm-delay", "0.5"], "--comm-delay", "has no effect with --model"),
        (["--shape", "v"], ["--batch", "8"], "--batch", "applies only with --model"),
        (["--shape", "v"], ["--split-backward"], "--split-backward", "applies only with --model"),
        (["--shape", "v"], ["--cluster", "dgx1"], "--cluster", "applies only with --model"),
        (["--shape", "v2"], ["--chunks", "4"], "--chunks", "only the interleaved shape"),
        (["--model", "gpt2-small", "--shape", "v"], ["--chunks", "4"], "--chunks", "only the interleaved shape"),
    ],
)
def test_ignored_option_refused(source: list[str], extra: list[str], flag: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    rc, _, err = cli_run([*BASE, *source, *extra, "-o", str(out)], capsys)
    assert rc == 2 and err.startswith(f"error: {flag}: {why}"), err
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--shape", "interleaved", "--chunks", "3"],
        ["--shape", "v", "--forward-time", "2", "--backward-time", "4", "--weight-time", "1", "--comm-delay", "0.1", "--mode", "training"],
        ["--model", "gpt2-small", "--shape", "interleaved", "--chunks", "2", "--batch", "2", "--seq", "128", "--split-backward", "--cluster", "h100-sxm"],
    ],
)
def test_options_that_apply_are_taken(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "p.json"
    rc, _, err = cli_run([*BASE, *args, "-o", str(out)], capsys)
    assert rc == 0 and out.exists(), err


SHARDING = ["make", "sharding", "--mesh", "2x4"]


@pytest.mark.parametrize(
    ("args", "flag", "why"),
    [
        (["--model", "llama3-8b", "--layers", "2", "--hidden", "999"], "--hidden", "has no effect with --model llama3-8b (the model's shape is its own)"),
        (["--model", "llama3-8b", "--layers", "2", "--device", "V100-32GB"], "--device", "has no effect with --model llama3-8b (the device is the --cluster's)"),
        (["--model", "llama3-8b", "--layers", "2", "--flash"], "--flash", "has no effect with --model llama3-8b"),
        (["--model", "gpt2-xl", "--layers", "2", "--vocab", "1000"], "--vocab", "has no effect with --model gpt2-xl"),
        (["--model", "gpt2-xl", "--layers", "2", "--no-flash"], "--no-flash", "has no effect with --model gpt2-xl"),
        (["--layers", "2", "--hidden", "256", "--heads", "4", "--seq", "64", "--cluster", "dgx1"], "--cluster", "has no effect with --model transformer (only Llama models take a cluster"),
    ],
)
def test_sharding_ignored_option_refused(args: list[str], flag: str, why: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    rc, _, err = cli_run([*SHARDING, *args, "-o", str(out)], capsys)
    assert rc == 2 and err.startswith(f"error: {flag}: {why}"), err
    assert not out.exists()


@pytest.mark.parametrize(
    "args",
    [
        ["--layers", "2", "--hidden", "256", "--heads", "4", "--seq", "64", "--vocab", "1000", "--ffn", "512", "--device", "V100-32GB", "--flash"],
        ["--model", "gpt2-xl", "--layers", "2", "--seq", "128", "--device", "V100-32GB"],
        ["--model", "llama3-8b", "--layers", "2", "--seq", "1024", "--cluster", "h100-sxm", "--no-flash"],
    ],
)
def test_sharding_options_that_apply_are_taken(args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "s.json"
    rc, _, err = cli_run([*SHARDING, *args, "-o", str(out)], capsys)
    assert rc == 0 and out.exists(), err
