"""Bad command lines are named errors with exit 2, never tracebacks (the CLI review):
outputs that cannot be written are rejected before any work and named by their option;
numbers are checked by type; `make` writes nothing `validate` would reject; the status
line of a command that writes a file goes to stderr."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import assert_named_error, cli_run

from distplan.cli import main
from distplan.errors import InputError

SHARDING = ["make", "sharding", "--model", "transformer", "--layers", "1", "--hidden", "256", "--heads", "4", "--seq", "32", "--batch", "2"]

#: (case, argv with {out} for the output path, the option the error names)
WRITERS = [
    ("solve --out", ["solve", "placement-small-1", "-f", "baechi_etf", "--out", "{out}"], "--out"),
    ("solve --result", ["solve", "placement-small-1", "-f", "baechi_etf", "--result", "{out}"], "--result"),
    ("export --to", ["export", "placement-small-1", "-f", "placement_milp", "--to", "{out}.mps"], "--to"),
    ("make placement", ["make", "placement", "--model", "gpt2-small", "--cluster", "dgx1", "-o", "{out}"], "-o/--output"),
    ("make sharding", [*SHARDING, "-o", "{out}"], "-o/--output"),
    ("make pipeline", ["make", "pipeline", "--shape", "v", "--stages", "2", "--micro-batches", "2", "-o", "{out}"], "-o/--output"),
    ("make random", ["make", "random", "--ops", "3", "-o", "{out}"], "-o/--output"),
    ("emit", ["emit", "plan.json", "--target", "megatron", "-o", "{out}"], "-o/--output"),
    ("plot", ["plot", "placement-small-1", "-f", "baechi_etf", "-o", "{out}.png"], "--out/-o"),
    ("bench run --db", ["bench", "run", "campaign.toml", "--db", "{out}"], "--db"),
    ("bench export --csv", ["bench", "export", "results.db", "--csv", "{out}"], "--csv"),
    ("bench export --parquet", ["bench", "export", "results.db", "--parquet", "{out}"], "--parquet"),
    ("measure-codecs", ["measure-codecs", "compression-mlp-small", "-o", "{out}"], "-o/--out"),
    ("import-torch", ["import-torch", "model.py:make", "--input-shape", "8,128", "-o", "{out}"], "-o/--output"),
]


@pytest.mark.parametrize(("case", "argv", "option"), WRITERS, ids=[w[0] for w in WRITERS])
@pytest.mark.parametrize("where", ["missing directory", "a directory"])
def test_an_output_that_cannot_be_written_is_named_before_any_work(
    case: str, argv: list[str], option: str, where: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import distplan.cli.core

    def no_solve(*args: object, **kwargs: object) -> None:
        raise AssertionError("solved before checking the output")

    monkeypatch.setattr(distplan.cli.core, "_solve_args", no_solve)
    if where == "a directory":
        out = tmp_path / "adir"
        for suffix in ("", ".mps", ".png"):
            Path(f"{out}{suffix}").mkdir()
    else:
        out = tmp_path / "missing" / "x"
    rc, stdout, err = cli_run([a.format(out=out) for a in argv], capsys)
    assert_named_error(rc, stdout, err, f"error: {option}: cannot write {out}", "is a directory" if where == "a directory" else "does not exist")


def test_a_report_directory_that_is_a_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "quick.db"
    db.write_bytes(b"")
    rc, out, err = cli_run(["bench", "report", str(db), "--out", str(db)], capsys)
    assert_named_error(rc, out, err, "--out: cannot write to", "exists and is not a directory")


@pytest.mark.parametrize("flag", [["--out", "rr"], ["--no-figures"]])
def test_a_json_report_refuses_the_options_of_a_written_one(flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Audit of session 27: `bench report DB --json --out rr` dropped --out without a word."""
    db = tmp_path / "quick.db"
    db.write_bytes(b"")
    rc, out, err = cli_run(["bench", "report", str(db), "--json", *[f if f != "rr" else str(tmp_path / "rr") for f in flag]], capsys)
    assert_named_error(rc, out, err, f"{flag[0]}: --json prints the report's tables on stdout")


@pytest.mark.parametrize(
    "argv",
    [
        ["make", "random", "--ops", "3", "-o", "{missing}/r.json"],
        ["solve", "placement-small-1", "-f", "baechi_etf", "--result", "{missing}/r.json"],
    ],
    ids=["make", "solve"],
)
def test_an_os_error_while_writing_is_named_by_its_option(
    argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the check (the directory vanished meanwhile, a full disk), the OSError of the
    write is still a named error."""
    import distplan.cli

    monkeypatch.setattr(distplan.cli, "check_outputs", lambda args: None)
    rc, out, err = cli_run([a.format(missing=tmp_path / "missing") for a in argv], capsys)
    assert rc == 2 and "Traceback" not in err, err
    assert "cannot write" in err and str(tmp_path / "missing") in err and ("-o/--output" in err or "--result" in err), err


def test_an_os_error_elsewhere_is_not_blamed_on_an_output(tmp_path: Path) -> None:
    """Only an OSError on one of the command's outputs becomes an output error."""
    import argparse

    from distplan.cli.args import Output, output_errors

    args = argparse.Namespace(_outputs=(Output("out", "--out"),), out=str(tmp_path / "missing" / "p.json"))
    with pytest.raises(FileNotFoundError), output_errors(args):
        (tmp_path / "other.json").read_text()
    with pytest.raises(InputError, match="--out: cannot write"), output_errors(args):
        (tmp_path / "missing" / "p.json").write_text("{}")


#: (case, argv, text the error must contain)
BAD_ARGS = [
    ("export suffix", ["export", "placement-small-1", "-f", "placement_milp", "--to", "{tmp}/m.txt"], "--to: cannot write {tmp}/m.txt: unsupported suffix '.txt'"),
    ("plot suffix", ["plot", "placement-small-1", "-f", "baechi_etf", "-o", "{tmp}/g.txt"], "--out/-o: cannot write {tmp}/g.txt: unsupported suffix '.txt'"),
    ("mesh 0", [*SHARDING, "--mesh", "0", "-o", "{tmp}/s.json"], "--mesh: '0' has an axis of 0 devices"),
    ("mesh 4 axes", [*SHARDING, "--mesh", "2x2x2x2", "-o", "{tmp}/s.json"], "--mesh: '2x2x2x2' has 4 axes"),
    ("bandwidth per axis", [*SHARDING, "--mesh", "2x2", "--bandwidth-gbs", "100", "-o", "{tmp}/s.json"], "--bandwidth-gbs: 1 value(s) for a 2-axis mesh"),
    ("latency negative", [*SHARDING, "--mesh", "2", "--latency-us", "-1", "-o", "{tmp}/s.json"], "--latency-us: -1 is not a finite number >= 0"),
    ("sharding memory", [*SHARDING, "--memory-gb", "-3", "-o", "{tmp}/s.json"], "argument --memory-gb: -3 is not a number > 0"),
    ("sharding batch 0", [*SHARDING, "--batch", "0", "-o", "{tmp}/s.json"], "argument --batch: 0 is not a whole number >= 1"),
    ("sharding seq 0", [*SHARDING, "--seq", "0", "-o", "{tmp}/s.json"], "argument --seq: 0 is not a whole number >= 1"),
    ("sharding layers 0", [*SHARDING, "--layers", "0", "-o", "{tmp}/s.json"], "argument --layers: 0 is not a whole number >= 1"),
    ("placement batch", ["make", "placement", "--model", "gpt2-small", "--cluster", "dgx1", "--batch", "-1", "-o", "{tmp}/p.json"], "argument --batch: -1 is not a whole number >= 1"),
    ("placement memory limit", ["make", "placement", "--model", "gpt2-small", "--cluster", "dgx1", "--memory-limit=-3GB", "-o", "{tmp}/p.json"], "--memory-limit: '-3GB' is not a size > 0"),
    ("pipeline chunks", ["make", "pipeline", "--shape", "interleaved", "--stages", "4", "--micro-batches", "4", "--chunks", "0", "-o", "{tmp}/p.json"], "argument --chunks: 0 is not a whole number >= 1"),
    ("pipeline time", ["make", "pipeline", "--shape", "v", "--stages", "2", "--micro-batches", "2", "--forward-time", "nan", "-o", "{tmp}/p.json"], "argument --forward-time: nan is not a finite number"),
    ("random seed", ["make", "random", "--ops", "2", "--generator", "chain", "--seed", "-1", "-o", "{tmp}/r.json"], "argument --seed: -1 is not a whole number >= 0"),
    ("random ops", ["make", "random", "--ops", "x", "-o", "{tmp}/r.json"], "argument --ops: 'x' is not a whole number"),
    ("codecs repeat", ["measure-codecs", "compression-mlp-small", "-o", "{tmp}/c.json", "--repeat", "0"], "argument --repeat: 0 is not a whole number >= 1"),
    ("codecs elements", ["measure-codecs", "compression-mlp-small", "-o", "{tmp}/c.json", "--elements", "-5"], "argument --elements: -5 is not a whole number >= 1"),
    ("emit layers negative", ["emit", "plan.json", "--target", "megatron", "--num-layers", "-4"], "argument --num-layers: -4 is not a whole number >= 1"),
    ("emit layers 0", ["emit", "plan.json", "--target", "megatron", "--num-layers", "0"], "argument --num-layers: 0 is not a whole number >= 1"),
    ("solver option", ["solve", "placement-small-1", "-f", "placement_milp", "--solver-option", "noeq"], "--solver-option: 'noeq' is not KEY=VALUE"),
    ("list kind", ["list", "--kind", "nope"], "--kind: unknown kind 'nope'"),
    ("list backends kind", ["list", "backends", "--kind", "placement"], "--kind: backends are not per kind"),
    ("directory instance", ["solve", "{tmp}", "-f", "baechi_etf"], "{tmp}: is a directory, not an instance file"),
]


@pytest.mark.parametrize(("case", "argv", "named"), BAD_ARGS, ids=[c[0] for c in BAD_ARGS])
def test_bad_arguments_are_named_errors_with_exit_2(case: str, argv: list[str], named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run([a.format(tmp=tmp_path) for a in argv], capsys)
    assert_named_error(rc, out, err, named.format(tmp=tmp_path))
    assert not any(tmp_path.iterdir()), "wrote a file for a rejected command line"


def test_a_number_beyond_the_float_range_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "huge",
        "graph": {"ops": [{"name": "a", "time": 0.001, "memory": 1}], "edges": []},
        "cluster": {"devices": [{"name": "gpu0", "memory": 10**400}], "bandwidth": 1e10, "latency": 1e-5},
    }
    path = tmp_path / "huge.json"
    path.write_text(json.dumps(doc))
    rc, out, err = cli_run(["validate", str(path)], capsys)
    assert_named_error(rc, out, err, "cluster.devices[0].memory: an integer of 401 digits is too large")
    path.write_text('{"format": "distplan/1", "n": 1' + "0" * 5000 + "}")  # beyond what Python's int() reads
    rc, out, err = cli_run(["validate", str(path)], capsys)
    assert_named_error(rc, out, err, f"{path}: not readable JSON")


def test_a_long_integer_in_range_of_a_double_is_named_by_its_magnitude(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """10**300 micro-batches: "1e+300", not its 301 digits; a short integer as written."""
    rc, out, err = cli_run(["make", "pipeline", "--shape", "v", "--stages", "2", "--micro-batches", "2", "-o", str(tmp_path / "p.json")], capsys)
    assert rc == 0, err
    doc = json.loads((tmp_path / "p.json").read_text())
    for value, named in ((10**300, "1e+300 micro-batches is beyond"), (-(10**300), "-1e+300 must be > 0"), (1_000_001, "1000001 micro-batches is beyond")):
        doc["micro_batches"] = value
        (tmp_path / "p.json").write_text(json.dumps(doc))
        rc, out, err = cli_run(["solve", str(tmp_path / "p.json"), "-f", "1f1b"], capsys)  # (validate: the schema's message)
        assert_named_error(rc, out, err, f"micro_batches: {named}")
        assert len(err) < 300, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize("argv, option", [
    (["solve", "placement-small-1", "-f", "baechi_etf", "--out", "/dev/full"], "--out"),
    (["solve", "placement-small-1", "-f", "baechi_etf", "--json", "--result", "/dev/full"], "--result"),
    (["make", "random", "--ops", "10", "-o", "/dev/full"], "-o/--output"),
], ids=["out", "result-json", "make"])
def test_a_write_that_fails_midway_is_a_named_error(argv: list[str], option: str, capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/full opens but refuses every write (ENOSPC, an OSError naming no file): a
    traceback and exit 1 before; now the option and the reason, exit 2 (and one JSON
    document under --json)."""
    rc, out, err = cli_run(argv, capsys)
    assert_named_error(rc, out, err, f"{option}: cannot write /dev/full: no space left on the device")
    if "--json" in argv:
        assert json.loads(out)["error"]["exit_code"] == 2


def test_an_output_that_is_another_output_or_the_input_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--out X --result X`` kept only the result, and ``solve t.json --out t.json``
    replaced the instance with its plan: both refused before the solve (exit 2), nothing
    written; distinct paths still work."""
    same = tmp_path / "same.json"
    rc, out, err = cli_run(["solve", "placement-small-1", "-f", "baechi_etf", "--out", str(same), "--result", str(tmp_path / "." / "same.json")], capsys)
    assert_named_error(rc, out, err, "--result: cannot write", "--out writes the same file")
    assert not same.exists()
    inst = tmp_path / "t.json"
    rc, out, err = cli_run(["make", "pipeline", "--shape", "v", "--stages", "2", "--micro-batches", "2", "-o", str(inst)], capsys)
    assert rc == 0, err
    before = inst.read_text()
    rc, out, err = cli_run(["solve", str(inst), "-f", "1f1b", "--out", str(inst)], capsys)
    assert_named_error(rc, out, err, f"--out: cannot write {inst}: it is the file the command reads")
    assert inst.read_text() == before
    rc, out, err = cli_run(["solve", str(inst), "-f", "1f1b", "--out", str(tmp_path / "plan.json"), "--result", str(tmp_path / "result.json")], capsys)
    assert rc == 0 and (tmp_path / "plan.json").exists() and (tmp_path / "result.json").exists(), err


@pytest.mark.parametrize("name", ["placement-small-1", "gpt-2layer-2x2", "pipeline-vshape-p8", "compression-mlp-small", "libra-dlrm-3d-total500"])
def test_a_document_without_its_name_is_refused_by_solve_as_by_validate(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The schema requires ``name``: placement and compression documents without one were
    solved as "unnamed" while ``validate`` refused them."""
    from distplan.instances import load_document

    doc = json.loads(json.dumps(dict(load_document(name))))
    del doc["name"]
    path = tmp_path / "noname.json"
    path.write_text(json.dumps(doc))
    for argv in (["validate", str(path)], ["inspect", str(path)]):
        rc, out, err = cli_run(argv, capsys)
        assert_named_error(rc, out, err, "name: missing")


def test_a_key_given_twice_in_an_object_is_a_named_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Python's JSON reader keeps the last of two equal keys silently: an instance named
    twice ran as the second name. Now the file and the key are named (exit 2)."""
    from distplan.instances import load_document

    text = json.dumps(dict(load_document("placement-small-1")))
    path = tmp_path / "dup.json"
    path.write_text(text.replace('"name": "placement-small-1"', '"name": "placement-small-1", "name": "other"', 1))
    rc, out, err = cli_run(["solve", str(path), "-f", "baechi_etf"], capsys)
    assert_named_error(rc, out, err, f"{path}: an object gives the key 'name' twice")


def test_export_reads_the_suffix_in_any_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.MPS"
    rc, out, err = cli_run(["export", "placement-small-1", "-f", "placement_milp", "--to", str(path)], capsys)
    assert rc == 0, err
    assert "ENDATA" in path.read_text() and f"wrote {path}" in err


@pytest.mark.parametrize(
    "argv",
    [
        [*SHARDING, "--mesh", "2x2", "--bandwidth-gbs", "100,25", "--latency-us", "2,10", "--memory-gb", "40"],
        ["make", "pipeline", "--shape", "interleaved", "--stages", "2", "--micro-batches", "2", "--chunks", "1"],
        ["make", "random", "--ops", "1", "--seed", "0"],
    ],
    ids=["sharding", "pipeline", "random"],
)
def test_make_writes_what_validate_accepts_and_speaks_on_stderr(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "inst.json"
    rc, out, err = cli_run([*argv, "-o", str(path)], capsys)
    assert rc == 0, err
    assert out == "" and err.startswith(f"wrote {path}: ") and err.count("\n") == 1, (out, err)
    rc, out, err = cli_run(["validate", str(path)], capsys)
    assert rc == 0 and "valid" in out, err


def test_library_builders_name_bad_values() -> None:
    import numpy as np

    from distplan.instances.codec_measure import CodecSpec, measure_one
    from distplan.instances.generators import chain_of_blocks
    from distplan.instances.pipelines import make_pipeline
    from distplan.instances.transformer import transformer

    with pytest.raises(InputError, match="chunks"):
        make_pipeline("interleaved", 4, 4, chunks=0)
    with pytest.raises(InputError, match="seed"):
        chain_of_blocks(4, seed=-1)
    with pytest.raises(InputError, match="repeat"):
        measure_one(CodecSpec("sparse", "sparse_index", "numpy", None), np.zeros(4, dtype=np.float32), repeat=0)
    with pytest.raises(InputError, match="bandwidth: 1 values for a 2-axis mesh"):
        transformer(1, 256, 4, 32, 2, 1000, mesh=(2, 2), bandwidth=(1e11,))
    with pytest.raises(InputError, match="mesh"):
        transformer(1, 256, 4, 32, 2, 1000, mesh=0)


@pytest.mark.parametrize(
    ("source", "named"),
    [
        ("def make(:\n", "model.py:1: cannot be loaded (SyntaxError: "),
        ("import nonexistent_pkg_xyz\n", "cannot be loaded (ModuleNotFoundError: No module named 'nonexistent_pkg_xyz')"),
        ("def make():\n    raise RuntimeError('boom')\n", "model.py:make: raised RuntimeError: boom"),
    ],
    ids=["syntax error", "import error", "factory raises"],
)
def test_import_torch_names_the_files_own_error(source: str, named: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("torch")
    model = tmp_path / "model.py"
    model.write_text(source)
    rc, out, err = cli_run(["import-torch", f"{model}:make", "--input-shape", "8,128", "-o", str(tmp_path / "g.json")], capsys)
    assert_named_error(rc, out, err, named)


def test_import_torch_reports_a_trace_error_in_one_line(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    """torch logs a whole traceback for a shape mismatch; the named error says it once."""
    pytest.importorskip("torch")
    model = tmp_path / "model.py"
    model.write_text("import torch.nn as nn\ndef make():\n    return nn.Sequential(nn.Linear(128, 64))\n")
    rc = main(["import-torch", f"{model}:make", "--input-shape", "8,127", "-o", str(tmp_path / "g.json")])
    err = capfd.readouterr().err
    assert rc == 2 and "torch.export cannot trace it" in err
    assert "Traceback" not in err, err


def _sharding_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: str) -> Path:
    plan = tmp_path / "plan.json"
    assert main(["solve", "gpt-1layer-tp8", "-f", "alpa_ilp", "--out", str(plan)]) == 0
    doc = json.loads(plan.read_text())
    first = next(iter(doc["strategies"]))
    if edit == "unknown op":
        doc["strategies"]["foo"] = doc["strategies"][first]
    else:
        doc["strategies"][first] = "XYZ"
    plan.write_text(json.dumps(doc))
    capsys.readouterr()
    return plan


@pytest.mark.parametrize("edit", ["unknown op", "unknown strategy"])
def test_evaluate_a_sharding_plan_with_unknown_names_has_no_traceback(edit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _sharding_plan(tmp_path, capsys, edit)
    rc = main(["evaluate", "gpt-1layer-tp8", str(plan)])
    captured = capsys.readouterr()
    assert rc in (2, 3) and "Traceback" not in captured.err, captured
    assert "foo" in captured.out + captured.err or "XYZ" in captured.out + captured.err


@pytest.mark.parametrize("edit", ["unknown op", "unknown strategy"])
def test_evaluate_a_sharding_plan_with_unknown_names_exits_2(edit: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = _sharding_plan(tmp_path, capsys, edit)
    assert main(["evaluate", "gpt-1layer-tp8", str(plan)]) == 2


def test_verify_rejects_an_objective_without_a_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    result = tmp_path / "r.json"
    assert main(["solve", "placement-small-1", "-f", "baechi_etf", "--result", str(result)]) == 0
    doc = json.loads(result.read_text())
    del doc["plan"]
    result.write_text(json.dumps(doc))
    rc, out, err = cli_run(["verify", str(result)], capsys)
    assert rc == 1 and ": plan: " in out and "no plan stored" in out, out
    doc["status"] = "none"  # the objective alone, without a plan to re-evaluate, is no claim to trust either
    result.write_text(json.dumps(doc))
    rc, out, err = cli_run(["verify", str(result)], capsys)
    assert rc == 1 and "no plan stored" in out, out


def test_an_argparse_error_is_exit_2_from_main(capsys: pytest.CaptureFixture[str]) -> None:
    """`main(argv)` returns argparse's exit code (as the console script exits with it)."""
    rc, out, err = cli_run(["solve"], capsys)
    assert rc == 2 and "the following arguments are required" in err
    assert cli_run(["--help"], capsys)[0] == 0


@pytest.mark.parametrize("flag", [["--device", "T4"], ["--n-devices", "3"]])
def test_import_torch_refuses_device_flags_its_cluster_would_override(flag: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Audit of session 27: with --cluster dgx1, --device T4 and --n-devices 3 were dropped
    without a word (8 V100s and V100 times). Checked before the model file is read."""
    rc, out, err = cli_run(["import-torch", "model.py:make", "--input-shape", "8,128", "--cluster", "dgx1", *flag, "-o", str(tmp_path / "g.json")], capsys)
    assert_named_error(rc, out, err, f"{flag[0]}: --cluster dgx1 sets the devices")
