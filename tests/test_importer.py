"""The PyTorch importer (extra ``torch``): FLOPs, parameter bytes, fused views, backward ops,
measured times, clear errors for untraceable models and unknown ops, the CLI."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

from distplan.errors import InputError  # noqa: E402
from distplan.instances import load_instance  # noqa: E402
from distplan.instances.torch_import import import_torch  # noqa: E402
from distplan.models.catalogue import device  # noqa: E402
from distplan.models.common import instance_from_dict  # noqa: E402


class Block(nn.Module):
    """A GPT-2 block: pre-LN, fused QKV, causal attention, GeLU MLP."""

    def __init__(self, hidden: int, heads: int, max_seq: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(hidden)
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.proj = nn.Linear(hidden, hidden)
        self.ln2 = nn.LayerNorm(hidden)
        self.fc1 = nn.Linear(hidden, 4 * hidden)
        self.fc2 = nn.Linear(4 * hidden, hidden)
        self.mask: torch.Tensor
        self.register_buffer("mask", torch.tril(torch.ones(max_seq, max_seq, dtype=torch.bool)))

    def forward(self, x: Any) -> Any:
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (t.view(b, s, self.heads, d).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d)
        att = att.masked_fill(~self.mask[:s, :s], float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, s, h)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class TinyGPT(nn.Module):
    """GPT-2-like decoder with logits tied to the token embedding."""

    def __init__(self, layers: int = 12, hidden: int = 64, heads: int = 4, vocab: int = 512, max_seq: int = 64):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_seq, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, max_seq) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)

    def forward(self, ids: Any) -> Any:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(32, 64)
        self.b = nn.Linear(64, 8)

    def forward(self, x: Any) -> Any:
        return self.b(torch.relu(self.a(x)).reshape(x.shape[0], -1))


class Branchy(nn.Module):
    """Python control flow on a tensor value: torch.export cannot trace it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(8, 8)

    def forward(self, x: Any) -> Any:
        y = self.a(x)
        if y.sum() > 0:
            return y * 2
        return y


class Spectral(nn.Module):
    """Uses an FFT, for which the cost model has no formula."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 16)

    def forward(self, x: Any) -> Any:
        return torch.fft.rfft(self.a(x)).abs()


def gpt_flops(b: int, s: int, h: int, layers: int, vocab: int) -> float:
    """24·b·s·h² + 4·b·s²·h per layer plus the logits 2·b·s·h·V (FLOPs)."""
    return layers * (24 * b * s * h * h + 4 * b * s * s * h) + 2 * b * s * h * vocab


def param_bytes(model: Any) -> float:
    return float(sum(p.numel() * p.element_size() for p in model.parameters()))


def test_tiny_gpt_flops_params_and_fused_views() -> None:
    torch.manual_seed(0)
    model = TinyGPT()
    doc = import_torch(model, (2, 32), input_dtypes="int64", backward=False)
    totals = doc["meta"]["totals"]
    assert totals["forward_flops"] == pytest.approx(gpt_flops(2, 32, 64, 12, 512), rel=0.05)
    assert totals["param_bytes"] == param_bytes(model)
    assert sum(op.get("params", 0.0) for op in doc["graph"]["ops"]) == param_bytes(model)
    types = {op["type"] for op in doc["graph"]["ops"]}
    assert not types & {"aten.view.default", "aten.transpose.int", "aten.split.Tensor", "getitem", "aten.slice.Tensor"}
    fused = doc["meta"]["fused"]
    assert fused and all(v in {op["name"] for op in doc["graph"]["ops"]} or v.split(":")[0] in ("param", "buffer", "input", "none") for v in fused.values())
    # the logits reuse the embedding weight: colocated with it, holding no second copy
    logits = [op for op in doc["graph"]["ops"] if op["type"] == "aten.linear.default"][-1]
    embed = next(op for op in doc["graph"]["ops"] if op["type"] == "aten.embedding.default" and op["name"].startswith("wte/"))
    assert logits["colocate"] == embed["colocate"] and "params" not in logits
    inst = instance_from_dict(doc)
    assert inst.to_dict() == doc


def test_roofline_times_follow_the_catalogue_device() -> None:
    doc = import_torch(MLP(), (4, 32), device="A100-80GB", backward=False)
    op = doc["graph"]["ops"][0]
    assert op["type"] == "aten.linear.default"
    flops = 2 * 4 * 32 * 64
    moved = 4 * (4 * 32 + 32 * 64 + 64 + 4 * 64)  # fp32: input, weight, bias, output
    assert op["flops"] == flops
    assert op["time"] == pytest.approx(device("A100-80GB").roofline_seconds(flops, moved, "fp32"))
    slow = import_torch(MLP(), (4, 32), device=device("A100-80GB").with_(launch_floor=1e-3), backward=False)
    assert slow["graph"]["ops"][0]["time"] == pytest.approx(op["time"] + 1e-3 - device("A100-80GB").launch_floor)


def test_backward_ops_and_gradient_edges() -> None:
    model = MLP()
    doc = import_torch(model, (4, 32))
    ops = {op["name"]: op for op in doc["graph"]["ops"]}
    fwd = [op for op in ops.values() if op["phase"] == "forward"]
    bwd = [op for op in ops.values() if op["phase"] == "backward"]
    assert len(bwd) == len(fwd)
    assert sum(op["flops"] for op in bwd) == pytest.approx(2 * sum(op["flops"] for op in fwd))
    grads = [e for e in doc["graph"]["edges"] if e.get("gradient")]
    holders = [op for op in fwd if op.get("params")]
    assert len(grads) == len(holders) == 2
    for e in grads:
        owner = ops[ops[e["dst"]]["forward"]]
        assert ops[e["dst"]]["phase"] == "update" and e["bytes"] == owner["params"]
    assert sum(e["bytes"] for e in grads) == param_bytes(model)
    # gradients flow backwards along the forward edges
    assert {"src": "b/linear_1.grad", "dst": "relu.grad", "bytes": 4 * 4 * 64.0} in doc["graph"]["edges"]
    load = instance_from_dict(doc)
    assert load.n_ops == len(ops)


def test_gpt2_from_a_transformers_config() -> None:
    transformers = pytest.importorskip("transformers")
    cfg = transformers.GPT2Config(n_layer=12, n_embd=768, n_head=12, n_positions=1024)
    doc = import_torch(lambda: transformers.GPT2LMHeadModel(cfg), (1, 128), cluster="dgx1:4")
    totals = doc["meta"]["totals"]
    assert totals["forward_flops"] == pytest.approx(gpt_flops(1, 128, 768, 12, cfg.vocab_size), rel=0.05)
    with torch.device("meta"):
        reference = transformers.GPT2LMHeadModel(cfg)
    assert totals["param_bytes"] == param_bytes(reference)
    inst = instance_from_dict(doc)
    assert inst.n_devices == 4
    # integer mask arithmetic gets no backward op
    assert not any(op["phase"] == "backward" and op["type"] in ("aten.eq.Tensor", "aten.__and__.Tensor") for op in doc["graph"]["ops"])


def test_untraceable_model_names_the_module_and_the_fix() -> None:
    with pytest.raises(InputError) as err:
        import_torch(Branchy(), (2, 8))
    msg = str(err.value)
    assert "Branchy" in msg and "torch.export cannot trace" in msg and "traceable" in msg


def test_unknown_op_is_an_error_until_given_a_time() -> None:
    with pytest.raises(InputError) as err:
        import_torch(Spectral(), (2, 16))
    msg = str(err.value)
    assert "aten.fft_rfft.default" in msg and "op_times" in msg and "Spectral" in msg
    doc = import_torch(Spectral(), (2, 16), op_times={"aten.fft_rfft.default": 2.5e-4})
    fft = next(op for op in doc["graph"]["ops"] if op["type"] == "aten.fft_rfft.default" and op["phase"] == "forward")
    assert fft["time"] == 2.5e-4
    assert next(op for op in doc["graph"]["ops"] if op["name"] == fft["name"] + ".grad")["time"] == 5e-4


def test_measured_times_on_this_cpu() -> None:
    doc = import_torch(MLP, (4, 32), measure=True, repeats=2)
    assert doc["meta"]["time_source"].startswith("measured")
    ops = {op["name"]: op for op in doc["graph"]["ops"]}
    for op in ops.values():
        assert op["time"] > 0
        if op["phase"] == "backward":
            assert op["time"] == pytest.approx(2 * ops[op["forward"]]["time"])


def test_bad_arguments() -> None:
    with pytest.raises(InputError, match="not a shape"):
        import_torch(MLP(), "abc")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown device"):
        import_torch(MLP(), (4, 32), device="V200")
    with pytest.raises(InputError, match="neither"):
        import_torch(42, (4, 32))


def test_cli_import_torch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distplan.cli import main

    src = tmp_path / "tinymodels.py"
    src.write_text(
        "import torch\n"
        "def make():\n"
        "    return torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))\n"
        "class Odd(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return torch.fft.rfft(x).abs()\n"
    )
    out = tmp_path / "graph.json"
    assert main(["import-torch", f"{src}:make", "--input-shape", "8,16", "--device", "T4", "-o", str(out)]) == 0
    inst = load_instance(out)
    assert inst.device_types == ["T4"] * 4 and inst.n_ops == 3 + 3 + 2
    assert main(["import-torch", f"{src}:make", "--input-shape", "8,16", "--no-backward", "--cluster", "dgx1:2", "-o", str(out)]) == 0
    assert load_instance(out).n_ops == 3
    assert main(["import-torch", f"{src}:Odd", "--input-shape", "8,16", "-o", str(out)]) == 2
    assert "--op-time" in capsys.readouterr().err
    assert main(["import-torch", f"{src}:Odd", "--input-shape", "8,16", "--op-time", "fft_rfft=1e-4", "-o", str(out)]) == 0
    assert main(["import-torch", f"{src}:nothing", "--input-shape", "8,16", "-o", str(out)]) == 2


@pytest.mark.parametrize("key", ["aten.fft_rfft.default", "aten.fft_rfft", "fft_rfft"])
def test_a_time_given_by_any_of_an_ops_names_is_taken(key: str) -> None:
    doc = import_torch(Spectral(), (2, 16), op_times={key: 2.5e-4})
    assert any(op["type"] == "aten.fft_rfft.default" and op["time"] == 2.5e-4 for op in doc["graph"]["ops"])


def test_a_time_for_an_op_the_export_lacks_is_an_error() -> None:
    """Audit of session 27: ``--op-time aten.addmm=1`` on a model whose export has
    aten.linear (no addmm) was dropped without a word."""
    with pytest.raises(InputError, match=r"op_times\['aten.addmm'\]: names no op of the exported model"):
        import_torch(Spectral(), (2, 16), op_times={"aten.fft_rfft.default": 2.5e-4, "aten.addmm": 1.0})
