"""Run distplan pipeline plans in PyTorch (``pip install '.[torch]'``).

Solves the pipeline instances of issue 19 (V shape, 4 stages, 8 micro-batches: 1F1B and
Tessel without the B/W split; ZB-H1, ZB-H2, Tessel and the exact MILP with it; interleaved
1F1B with 2 stages per rank; ZB-V on the V placement, 2 stages per rank in zig-zag order), writes each plan as PyTorch's compute-only schedule CSV
(``distplan.emit(result, "torch-pipelining")``), and runs all of them in one launch of 4
CPU gloo processes on 127.0.0.1 with ``torch.distributed.pipelining``: a 4-block MLP, one
block per stage, compared with the unpipelined model (loss and every gradient).

In your own training script the CSV is used like this (on every rank)::

    stages = [PipelineStage(model_part(s), s, num_stages, device) for s in my_stages]
    schedule = _PipelineScheduleRuntime(stages, n_microbatches=8, loss_fn=loss_fn)
    schedule._load_csv("schedule.csv", format="compute_only")
    schedule.step(x if 0 in my_stages else ..., target=y, losses=losses)

Run: python examples/run_pipeline_plan.py [--out DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import distplan
from distplan.emit.torch_check import PipelineJob, run_pipeline_schedules
from distplan.errors import InputError
from distplan.instances.pipelines import make_pipeline
from distplan.instances.torch_export import require_torch


def main() -> None:
    ap = argparse.ArgumentParser(description="run distplan pipeline plans in torch.distributed.pipelining")
    ap.add_argument("--out", default=None, help="also write the CSV files to this folder")
    args = ap.parse_args()
    try:  # before any solving: the plans run in torch.distributed
        require_torch()
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    cases = [
        (make_pipeline("v", 4, 8), ["1f1b", "tessel"]),
        (make_pipeline("v", 4, 8, forward_time=1.0, backward_time=1.0, weight_time=1.0), ["zb_h1", "zb_h2", "tessel", "pipeline_milp"]),
        (make_pipeline("interleaved", 4, 8, chunks=2), ["interleaved_1f1b"]),
        (make_pipeline("v2", 4, 8, forward_time=1.0, backward_time=1.0, weight_time=1.0), ["zb_v"]),  # rank d: stages d, 7-d
    ]
    jobs = []
    for inst, names in cases:
        stages = sum(1 for b in inst.blocks if b.role == "F")
        for name in names:
            res = distplan.solve(inst, formulation=name, time_limit=30)
            text = distplan.emit(res, "torch-pipelining", inst)
            if args.out:
                Path(args.out).mkdir(parents=True, exist_ok=True)
                (Path(args.out) / f"{inst.name}-{name}.csv").write_text(text)
            print(f"{inst.name:<20} {name:<16} makespan {res.objective:g}  rank 0: {text.splitlines()[0][:60]}...")
            jobs.append(PipelineJob(f"{inst.name}/{name}", text, stages, inst.micro_batches))
    t0 = time.perf_counter()
    reports = run_pipeline_schedules(jobs, world=4)
    print(f"ran {len(jobs)} schedules on 4 gloo processes in {time.perf_counter() - t0:.1f} s")
    for r in reports:
        print(f"{r.name:<36} loss {r.loss:.6f} (unpipelined {r.reference_loss:.6f})  largest gradient difference {r.max_grad_diff:.2e}")


if __name__ == "__main__":
    main()
