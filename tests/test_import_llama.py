"""import-torch for the planner's side (issues 19, 20): token-id inputs inferred, nn.Linear
module names listed, and a Llama-style module traced on the meta device (weights never
allocated). The 8B config is measured in benchmarks/bench_import.py."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from distplan.cli import main  # noqa: E402
from distplan.instances.torch_import import import_torch  # noqa: E402

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "llama_style.py"


def _llama():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("llama_style", EXAMPLE)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llama_style"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_llama_style_on_meta_without_input_dtype() -> None:
    llama = _llama()
    devices: list[str] = []

    def factory():  # type: ignore[no-untyped-def]
        model = llama.tiny()
        devices.append(next(model.parameters()).device.type)
        return model

    doc = import_torch(factory, (2, 16), device="H100-80GB")
    assert devices == ["meta"]  # built without allocating weights
    meta = doc["meta"]
    assert meta["input_dtypes"] == ["int64"]  # nn.Embedding first layer: token ids
    names = [m["name"] for m in meta["linear_modules"]]
    assert names[:7] == [
        "layers.0.attention.wq", "layers.0.attention.wk", "layers.0.attention.wv", "layers.0.attention.wo",
        "layers.0.feed_forward.w1", "layers.0.feed_forward.w2", "layers.0.feed_forward.w3",
    ]  # fmt: skip
    assert names[-1] == "output" and len(names) == 2 * 7 + 1
    wk = meta["linear_modules"][1]
    assert (wk["in_features"], wk["out_features"], wk["bias"]) == (64, 32, False)  # 2 KV heads of 16
    cfg = llama.tiny().cfg
    assert meta["totals"]["param_bytes"] == pytest.approx(4 * llama.parameter_count(cfg))  # fp32 on meta
    ops = {op["name"] for op in doc["graph"]["ops"]}
    assert any("attention" in n for n in ops) and any("feed_forward" in n for n in ops)


class _Bag(torch.nn.Module):
    """Embedding registered after the head: found by the retry on the index error."""

    def __init__(self) -> None:
        super().__init__()
        self.head = torch.nn.Linear(8, 4)
        self.emb = torch.nn.Embedding(16, 8)

    def forward(self, ids):  # type: ignore[no-untyped-def]
        return self.head(self.emb(ids))


def test_embedding_input_retry_and_cli(tmp_path) -> None:
    doc = import_torch(_Bag(), (2, 3), backward=False)
    assert doc["meta"]["input_dtypes"] == ["int64"]
    assert [m["name"] for m in doc["meta"]["linear_modules"]] == ["head"]
    out = tmp_path / "tiny.json"
    assert main(["import-torch", f"{EXAMPLE}:tiny", "--input-shape", "2,8", "--no-backward", "-o", str(out)]) == 0
    assert out.is_file()
