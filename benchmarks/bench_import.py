"""Benchmark of ``import-torch`` on a Llama-style module traced on the meta device (issue 20).

Run: python benchmarks/bench_import.py [--config 8b|tiny] [--seq 2048] [--batch 1] [--device H100-80GB]

Builds `examples/llama_style.py`'s model (Llama 3 8B's shapes by default: 32 layers, hidden
4096, 32 heads / 8 KV heads, FFN 14336, vocabulary 128256, about 8.03e9 parameters) from a
factory, so `distplan.instances.torch_import.import_torch` builds it under
``torch.device("meta")``: no weight is allocated. Prints the export seconds, the total
import seconds (export, FLOP counting on meta tensors, training graph, document), the op
and edge counts, forward FLOPs, parameter bytes as the graph counts them, and the peak
resident memory of this process (MB; Linux ``ru_maxrss``), which stays far below the
16 GB that the bf16 weights would need.
"""

from __future__ import annotations

import argparse
import importlib.util
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distplan.instances.torch_import import import_torch  # noqa: E402


def _llama_module():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("llama_style", ROOT / "examples" / "llama_style.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llama_style"] = mod
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", choices=["8b", "tiny"], default="8b")
    ap.add_argument("--seq", type=int, default=2048, help="tokens per sequence")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--device", default="H100-80GB", help="catalogue device for roofline times")
    args = ap.parse_args()
    llama = _llama_module()
    factory = llama.llama3_8b if args.config == "8b" else llama.tiny
    cfg = llama.LlamaConfig() if args.config == "8b" else factory().cfg
    t0 = time.perf_counter()
    doc = import_torch(factory, (args.batch, args.seq), device=args.device)
    wall = time.perf_counter() - t0
    meta = doc["meta"]
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"model            Llama-style {args.config}: {llama.parameter_count(cfg) / 1e9:.3f}e9 parameters, input {args.batch}x{args.seq} ({meta['input_dtypes'][0]})")
    print(f"export           {meta['import_seconds']['export']:.2f} s (torch.export on the meta device)")
    print(f"import total     {wall:.2f} s")
    print(f"graph            {len(doc['graph']['ops'])} ops ({meta['totals']['forward_ops']} forward), {len(doc['graph']['edges'])} edges")
    print(f"forward          {meta['totals']['forward_flops'] / 1e12:.2f} TFLOP, parameters {meta['totals']['param_bytes'] / 1e9:.2f} GB")
    print(f"nn.Linear        {len(meta['linear_modules'])} modules (e.g. {meta['linear_modules'][0]['name']})")
    print(f"peak RSS         {peak_mb:.0f} MB")


if __name__ == "__main__":
    main()
