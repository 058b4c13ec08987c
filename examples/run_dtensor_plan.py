"""Run a distplan sharding plan as a DTensor ``parallelize_plan`` (``pip install '.[torch]'``).

Makes a one-layer GPT sharding instance on a 2-device mesh, solves it with the Megatron
plan, writes the plan as a Python module (``distplan.emit(result, "dtensor")``), applies
it with ``parallelize_module(model, mesh["tp"], parallelize_plan)`` to a GPT built from
plain ``torch.nn`` on 2 CPU gloo processes (127.0.0.1), and compares logits, loss and every
gradient with the unsharded model.

Run: python examples/run_dtensor_plan.py [--out plan_tp.py]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import distplan
from distplan.emit.torch_check import GPTShape, run_dtensor_plan
from distplan.errors import InputError
from distplan.instances.torch_export import require_torch
from distplan.instances.transformer import transformer


def main() -> None:
    ap = argparse.ArgumentParser(description="run a distplan sharding plan with DTensor")
    ap.add_argument("--out", default=None, help="also write the emitted module here")
    args = ap.parse_args()
    try:  # before any solving: the plans run in torch.distributed
        require_torch()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    shape = GPTShape(vocab=256, seq=8, layers=2, hidden=32, heads=4, ffn=64, batch=2)
    inst = transformer(shape.layers, shape.hidden, shape.heads, shape.seq, shape.batch, shape.vocab, ffn=shape.ffn, mesh=2)
    res = distplan.solve(inst, formulation="megatron")
    text = distplan.emit(res, "dtensor", inst)
    if args.out:
        Path(args.out).write_text(text)
    print(text)
    report = run_dtensor_plan(text, shape, world=2)
    print(
        f"{int(report.details['sharded_params'])} parameters sharded; loss {report.loss:.6f} (unsharded {report.reference_loss:.6f}); "
        f"largest differences: logits {report.max_output_diff:.2e}, gradients {report.max_grad_diff:.2e}"
    )


if __name__ == "__main__":
    main()
