"""Generators, `distplan make` and campaigns take bounded sizes (review rev16 D6).

``make random --ops 1000000000`` was killed for memory (exit 137; under ``ulimit -v`` a
numpy ``_ArrayMemoryError`` traceback), ``make pipeline --stages 100000`` and ``make sharding
--layers 100000000`` ran for minutes, ``bench run --dry-run`` of ``repetitions =
1000000000`` was killed, and ``make placement --batch 1000000000000`` wrote 1e12 GB. Each is
now a named range error (exit 2) before any work, the documented maxima are taken, and a
MemoryError in any command is a named error, not a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distplan.bench import campaign as campaign_mod
from distplan.bench.campaign import MAX_GRID, MAX_REPETITIONS, MAX_RUNS, parse_campaign
from distplan.cli import build_parser
from distplan.cli.make import MAX_BATCH, MAX_CHUNKS, MAX_LAYERS, MAX_PLACEMENT_MICRO_BATCHES, MAX_STAGES
from distplan.errors import InputError
from distplan.instances import generators
from distplan.instances.generators import MAX_DEVICES, MAX_OPS
from distplan.models.pipeline import MAX_MICRO_BATCHES
from tests.conftest import assert_named_error, cli_run

OUT = "-o"


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["make", "random", "--ops", "1000000000"], ["--ops", f"largest taken, {MAX_OPS}"]),
        (["make", "random", "--generator", "chain", "--ops", str(MAX_OPS // 8 + 1)], ["--ops", "blocks of 8 ops"]),
        (["make", "random", "--ops", "10", "--devices", "100000"], ["--devices", str(MAX_DEVICES)]),
        (["make", "pipeline", "--shape", "v", "--stages", "100000", "--micro-batches", "100000"], ["--stages", str(MAX_STAGES)]),
        (["make", "pipeline", "--shape", "v", "--stages", "4", "--micro-batches", str(MAX_MICRO_BATCHES + 1)], ["--micro-batches"]),
        (["make", "pipeline", "--shape", "interleaved", "--stages", "1000", "--chunks", "60", "--micro-batches", "8"], ["--chunks", "pipeline stages"]),
        (["make", "pipeline", "--shape", "interleaved", "--stages", "4", "--chunks", "100000", "--micro-batches", "8"], ["--chunks", str(MAX_CHUNKS)]),
        (["make", "sharding", "--model", "transformer", "--layers", "100000000", "--hidden", "128", "--heads", "4", "--seq", "64"], ["--layers", str(MAX_LAYERS)]),
        (["make", "sharding", "--model", "transformer", "--layers", "2", "--hidden", "128", "--heads", "4", "--seq", "64", "--mesh", "10000000"], ["--mesh", "1048576"]),
        (["make", "placement", "--model", "gpt2-small", "--cluster", "dgx1", "--batch", "1000000000000"], ["--batch", str(MAX_BATCH)]),
        (["make", "placement", "--model", "llama3-8b", "--cluster", "h100-sxm", "--micro-batches", "1000"], ["--micro-batches", str(MAX_PLACEMENT_MICRO_BATCHES)]),
    ],
    ids=lambda v: " ".join(v[:4]) if isinstance(v, list) and v and v[0] == "make" else None,
)
def test_make_names_a_size_beyond_its_maximum(argv: list[str], named: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out.json"
    rc, stdout, err = cli_run([*argv, OUT, str(out)], capsys)
    assert_named_error(rc, stdout, err, *named)
    assert not out.exists()


def test_the_maxima_are_taken() -> None:
    """The documented maxima parse (generous: Llama-3 70B is 80 layers, ~30k ops a step)."""
    parser = build_parser()
    args = parser.parse_args(["make", "random", "--ops", str(MAX_OPS), "--devices", str(MAX_DEVICES), OUT, "x.json"])
    assert (args.ops, args.devices) == (MAX_OPS, MAX_DEVICES)
    args = parser.parse_args(["make", "pipeline", "--shape", "v", "--stages", str(MAX_STAGES), "--micro-batches", str(MAX_MICRO_BATCHES), "--chunks", str(MAX_CHUNKS), OUT, "x.json"])
    assert (args.stages, args.micro_batches, args.chunks) == (MAX_STAGES, MAX_MICRO_BATCHES, MAX_CHUNKS)
    args = parser.parse_args(["make", "sharding", "--layers", str(MAX_LAYERS), "--batch", str(MAX_BATCH), OUT, "x.json"])
    assert args.layers == MAX_LAYERS


def test_generators_check_sizes_before_allocating() -> None:
    cases: list[tuple[Any, str]] = [
        (lambda: generators.random_layered_dag(10**9), "n_ops"),
        (lambda: generators.series_parallel(10**9), "n_ops"),
        (lambda: generators.chain_of_blocks(MAX_OPS // 8 + 1), "n_blocks"),
        (lambda: generators.chain_of_blocks(4, block_size=10**6), "block_size"),
        (lambda: generators.series_parallel(5, n_devices=10**6), "n_devices"),
        (lambda: generators.random_layered_dag(MAX_OPS, width=1000, edge_prob=1.0), "edge_prob"),
    ]
    for make, path in cases:
        with pytest.raises(InputError) as info:
            make()
        assert info.value.path == path, str(info.value)
        assert "largest taken" in str(info.value) or "from 1 to" in str(info.value), str(info.value)
    assert len(generators.random_layered_dag(50, n_devices=2)["graph"]["ops"]) == 50  # in range: unchanged


def _campaign(**changes: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": "c", "formulations": ["baechi_etf"], "backends": ["highs"], "instances": ["placement-small-1"]}
    data.update(changes)
    return data


def test_campaign_repetitions_beyond_the_maximum_are_named() -> None:
    with pytest.raises(InputError) as info:
        parse_campaign(_campaign(repetitions=10**9))
    assert info.value.path == "repetitions" and f"{MAX_REPETITIONS:,}" in str(info.value)


def test_campaign_runs_are_counted_before_they_are_built(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[int] = []
    real = campaign_mod.Campaign._spec
    monkeypatch.setattr(campaign_mod.Campaign, "_spec", lambda self, *a: built.append(1) or real(self, *a))
    camp = parse_campaign(_campaign(repetitions=MAX_REPETITIONS, seeds=list(range(MAX_RUNS // MAX_REPETITIONS + 1))))
    with pytest.raises(InputError) as info:
        camp.runs()
    assert info.value.path == "campaign" and "runs" in str(info.value) and built == []
    assert len(parse_campaign(_campaign(repetitions=3, seeds=[0, 1])).runs()) == 6  # in range: unchanged


def test_campaign_generator_grid_is_bounded() -> None:
    side = int(MAX_GRID**0.5) + 1
    entry = {"generator": "random_layered_dag", "n_ops": list(range(10, 10 + side)), "seed": list(range(side))}
    with pytest.raises(InputError) as info:
        parse_campaign(_campaign(instances=[entry]))
    assert info.value.path == "instances[0]" and "grid" in str(info.value)


def test_cli_dry_run_of_a_huge_campaign_is_a_named_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    toml = tmp_path / "c9.toml"
    toml.write_text('name = "c9"\nrepetitions = 1000000000\nformulations = ["baechi_etf"]\nbackends = ["highs"]\ninstances = ["placement-small-1"]\n')
    rc, out, err = cli_run(["bench", "run", str(toml), "--dry-run", "--db", str(tmp_path / "c9.db")], capsys)
    assert_named_error(rc, out, err, "repetitions", "largest taken")


def test_memory_error_in_a_command_is_a_named_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def exhausted(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError("Unable to allocate 7.45 GiB for an array with shape (1000000000,) and data type float64")

    monkeypatch.setattr(generators, "random_layered_dag", exhausted)
    rc, out, err = cli_run(["make", "random", "--ops", "1000", OUT, str(tmp_path / "r.json")], capsys)
    assert_named_error(rc, out, err, "memory: ran out of memory", "7.45 GiB", "smaller sizes")
