"""First-contact defects of review 12 (import-torch): data-dependent output shapes, models
with buffers but no parameters, factories without device=, frozen parameters, a training
step traced in eval mode, and torch missing. Tests that need torch skip without it."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import assert_named_error, cli_run, torch_model_file

ROOT = Path(__file__).resolve().parents[1]


# -- 9. import-torch without torch names the extra --------------------------------------------


def test_import_torch_without_torch_names_the_extra(tmp_path: Path) -> None:
    model = tmp_path / "m.py"
    model.write_text("import torch\n\nclass X(torch.nn.Module):\n    pass\n")
    code = textwrap.dedent(
        f"""
        import sys
        sys.modules["torch"] = None  # as if torch were not installed
        from distplan.cli import main
        sys.exit(main(["import-torch", {str(model) + ":X"!r}, "--input-shape", "4,16", "-o", {str(tmp_path / "x.json")!r}]))
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=False)
    assert_named_error(proc.returncode, proc.stdout, proc.stderr, "torch", "pip install 'distplan[torch]'")
    assert "fix the file" not in proc.stderr


# -- 2, 3, 4, 5. import-torch -----------------------------------------------------------------

MODELS = '''
import torch
from torch import nn


class Dyn(nn.Module):
    def forward(self, x):
        return x[x > 0]


class BufferOnly(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.ones(16))

    def forward(self, x):
        return x * self.scale


class Arange(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x):
        return self.l(x) + torch.arange(x.shape[-1])


class CpuTensor(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x):
        return self.l(x) + torch.ones(16, device="cpu")


class Frozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)
        self.a.requires_grad_(False)

    def forward(self, x):
        return self.b(self.a(x))


class Drop(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(16, 16)
        self.d = nn.Dropout(0.1)

    def forward(self, x):
        return self.d(self.l(x))
'''


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return torch_model_file(tmp_path_factory, "fc12", MODELS)


def test_data_dependent_shapes_are_a_named_error(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(["import-torch", f"{models}:Dyn", "--input-shape", "4,16", "-o", str(tmp_path / "x.json")], capsys)
    assert_named_error(rc, out, err, "graph node index", "aten.index.Tensor", "depends on the tensor values", "--op-time")
    assert "While executing" not in err


def test_buffers_without_parameters_and_factories_without_device(models: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("BufferOnly", "Arange"):
        out_file = tmp_path / f"{name}.json"
        rc, _, err = cli_run(["import-torch", f"{models}:{name}", "--input-shape", "4,16", "-o", str(out_file)], capsys)
        assert rc == 0, err
        assert json.loads(out_file.read_text())["graph"]["ops"]
    # a tensor forced onto another device than the model's: the hint says what to write
    rc, out, err = cli_run(["import-torch", f"{models}:CpuTensor", "--input-shape", "4,16", "-o", str(tmp_path / "c.json")], capsys)
    assert_named_error(rc, out, err, "module CpuTensor", "device=x.device")


def test_frozen_parameters_get_no_gradient_or_update(models: Path) -> None:
    from distplan.instances.torch_import import import_torch

    sys.path.insert(0, str(models.parent))
    try:
        import fc12_models  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(models.parent))
    doc = import_torch(fc12_models.Frozen, (4, 16))
    names = [op["name"] for op in doc["graph"]["ops"]]
    assert "b/linear_1.update" in names and "b/linear_1.grad" in names
    assert not any(n.startswith("a/") and n.endswith((".update", ".grad")) for n in names), names
    assert doc["meta"]["totals"]["param_bytes"] == doc["meta"]["totals"]["frozen_param_bytes"] == (16 * 16 + 16) * 4
    updates = [op for op in doc["graph"]["ops"] if op["name"].endswith(".update")]
    assert len(updates) == 1


def test_a_training_step_is_traced_in_train_mode(models: Path) -> None:
    from distplan.instances.torch_import import import_torch

    sys.path.insert(0, str(models.parent))
    try:
        import fc12_models  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(models.parent))

    def kinds(doc: dict) -> list[str]:
        return [op["name"].rsplit("/", 1)[-1] for op in doc["graph"]["ops"] if not op["name"].endswith((".grad", ".update"))]

    train = import_torch(fc12_models.Drop, (4, 16))
    measured = import_torch(fc12_models.Drop, (4, 16), measure=True, repeats=1)
    infer = import_torch(fc12_models.Drop, (4, 16), backward=False)
    assert any("dropout" in k for k in kinds(train)), kinds(train)  # the dropout a training step runs
    assert kinds(train) == kinds(measured)
    assert not any("dropout" in k for k in kinds(infer)), kinds(infer)
