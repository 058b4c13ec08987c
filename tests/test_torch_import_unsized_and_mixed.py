"""import-torch on models the shape-only trace cannot cost as they are (review rev29):
a data-dependent size reached by an op that has a meta kernel, operands of two dtypes
(a model that cannot run), a model that fails on real inputs while measured, a
higher-order op (torch.cond) timed with --op-time, and a factory that returns its own
ExportedProgram (dynamic dims sized by --input-shape). Each ends in a named error (exit
2, no traceback) or in an instance. Skipped without torch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_named_error, cli_run, torch_model_file

MODELS = '''
import torch
from torch import nn
from torch.export import Dim


class MaskAfterLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)

    def forward(self, x):
        return self.a(x)[x > 0].sum()


class MaskThenLinear(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return self.b(x[x > 0].reshape(-1, 16)[:2])


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(128, 256)
        self.b = nn.Linear(256, 10)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


class Cholesky(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x):
        return torch.linalg.cholesky(self.a(x) - 100.0)  # not positive definite: fails when run


class Cond(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return torch.cond(x.sum() > 0, lambda x: self.a(x), lambda x: self.b(x), (x,))


def exported():
    return torch.export.export(MLP(), (torch.randn(8, 128),), dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}})
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return torch_model_file(tmp_path_factory, "rev29", MODELS)


@pytest.mark.parametrize("model", ["MaskAfterLinear", "MaskThenLinear"])
def test_a_data_dependent_size_is_a_named_error_where_it_arises(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str) -> None:
    rc, out, err = cli_run(["import-torch", f"{models}:{model}", "--input-shape", "8,16", "-o", str(tmp_path / "x.json")], capsys)
    assert_named_error(rc, out, err, "graph node index", "aten.index.Tensor", "depends on the tensor values", "torch.where(mask, x, 0)")
    assert not (tmp_path / "x.json").exists()


@pytest.mark.parametrize("measure", [False, True])
def test_operands_of_two_dtypes_are_refused(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], measure: bool) -> None:
    """An int64 input into nn.Linear: the meta kernels accept it, the CPU kernel does not."""
    argv = ["import-torch", f"{models}:MLP", "--input-shape", "8,128", "--input-dtype", "int64", "-o", str(tmp_path / "x.json")]
    rc, out, err = cli_run(argv + (["--measure"] if measure else []), capsys)
    assert_named_error(rc, out, err, "graph node linear", "module a", "float32 and int64", "--input-dtype")


def test_a_model_that_fails_when_measured_is_a_named_error(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["import-torch", f"{models}:Cholesky", "--input-shape", "8,8", "--measure", "-o", str(tmp_path / "x.json")]
    rc, out, err = cli_run(argv, capsys)
    assert_named_error(rc, out, err, "measure", "fails on real inputs of dtype float32", "drop --measure")
    rc, out, err = cli_run(argv[:-3] + ["--op-time", "linalg_cholesky=1e-5"] + argv[-2:], capsys)  # unmeasured, it imports
    assert rc == 0, err


def test_a_higher_order_op_takes_its_time_from_op_time(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = ["import-torch", f"{models}:Cond", "--input-shape", "8,16", "--no-backward"]
    rc, out, err = cli_run(base + ["-o", str(tmp_path / "x.json")], capsys)
    assert_named_error(rc, out, err, "graph node cond", "no cost model for op cond", "--op-time cond=SECONDS")
    rc, out, err = cli_run(base + ["--op-time", "cond=0.25", "-o", str(tmp_path / "y.json")], capsys)
    assert rc == 0, err
    doc = json.loads((tmp_path / "y.json").read_text())
    cond = [op for op in doc["graph"]["ops"] if op["type"] == "cond"]
    assert len(cond) == 1 and cond[0]["time"] == 0.25 and cond[0]["shapes"] == [[8, 16]], cond
    assert cond[0]["params"] == 2 * (16 * 16 + 16) * 4  # both branches' Linear weights, float32


def test_a_factory_may_return_its_exported_program(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The factory's program has a dynamic batch (2..64): --input-shape sizes it."""
    flops = {}
    for rows in (8, 32):
        out_file = tmp_path / f"x{rows}.json"
        rc, out, err = cli_run(["import-torch", f"{models}:exported", "--input-shape", f"{rows},128", "--no-backward", "-o", str(out_file)], capsys)
        assert rc == 0, err
        doc = json.loads(out_file.read_text())
        assert doc["meta"]["input_dtypes"] == ["float32"] and doc["meta"]["parameters"]["input_shapes"] == [[rows, 128]]
        flops[rows] = doc["meta"]["totals"]["forward_flops"]
    assert flops[8] == 2 * 8 * (128 * 256 + 256 * 10)  # the two matrix products
    assert flops[32] == 4 * flops[8]
    rc, out, err = cli_run(["import-torch", f"{models}:exported", "--input-shape", "128,128", "-o", str(tmp_path / "z.json")], capsys)
    assert_named_error(rc, out, err, "input_shapes", "128 is outside the range 2..64")
