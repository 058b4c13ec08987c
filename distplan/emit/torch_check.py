"""Run emitted plans in PyTorch on CPU processes and compare with the unsharded model
(extra ``torch``; used by the tests and ``examples/``).

`run_pipeline_schedules(jobs, ...)` starts one gloo process per rank on 127.0.0.1 and,
in that one launch, runs every job: a small MLP (``stages`` blocks of Linear + tanh,
``width`` features, float32) split one block per stage, driven by PyTorch's own
``_PipelineScheduleRuntime`` loading the job's compute-only schedule CSV
(``_load_csv(path, format="compute_only")``, which runs torch's ``_validate_schedule``
and its send/receive lowering). The parent computes the unpipelined model's loss (mean
of the micro-batch MSE losses) and gradients on the same data and returns the largest
absolute differences. Processes are forked where the platform can (else spawned: a script
calling these functions then needs an ``if __name__ == "__main__":`` guard).

`run_dtensor_plan(module_text, ...)` applies an emitted ``parallelize_plan`` with
``parallelize_module`` to a small GPT (`gpt_class`) on a ``world``-process CPU gloo mesh
and compares the logits, the loss and every parameter gradient with the unsharded model.

Every number compared is float32; differences are absolute.
"""

from __future__ import annotations

import importlib
import math
import multiprocessing as mp
import os
import queue
import socket
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from distplan.errors import InputError

#: seconds a launch may take before its processes are stopped
DEFAULT_TIMEOUT = 120.0


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        raise InputError("torch", "PyTorch is not installed", "pip install 'distplan[torch]'") from None
    return torch


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# -- models ----------------------------------------------------------------------------------


def make_mlp(stages: int, width: int = 16, seed: int = 0) -> Any:
    """``nn.Sequential`` of ``stages`` blocks, each ``Linear(width, width)`` + ``Tanh``
    (float32, seeded: every process builds the same weights)."""
    torch = _torch()
    from torch import nn

    gen = torch.Generator().manual_seed(seed)
    blocks = []
    for _ in range(stages):
        lin = nn.Linear(width, width)
        with torch.no_grad():
            lin.weight.copy_(torch.randn(width, width, generator=gen) / math.sqrt(width))
            lin.bias.copy_(torch.randn(width, generator=gen) * 0.1)
        blocks.append(nn.Sequential(lin, nn.Tanh()))
    return nn.Sequential(*blocks)


def _data(batch: int, width: int, seed: int) -> tuple[Any, Any]:
    torch = _torch()
    gen = torch.Generator().manual_seed(seed + 1)
    return torch.randn(batch, width, generator=gen), torch.randn(batch, width, generator=gen)


@dataclass
class PipelineJob:
    """One schedule to run: the CSV text, the number of stages and micro-batches."""

    name: str
    csv: str
    stages: int
    micro_batches: int
    batch: int = 0  # default: 2 rows per micro-batch

    def rows(self) -> int:
        return self.batch or 2 * self.micro_batches


@dataclass
class RunReport:
    """Largest absolute differences against the unsharded model, per job."""

    name: str
    loss: float
    reference_loss: float
    max_grad_diff: float
    max_output_diff: float = 0.0
    n_params: int = 0
    details: dict[str, float] = field(default_factory=dict)

    @property
    def loss_diff(self) -> float:
        return abs(self.loss - self.reference_loss)


def _stage_ranks(text: str) -> dict[int, int]:
    from torch.distributed.pipelining.schedules import _Action

    out: dict[int, int] = {}
    for rank, line in enumerate(x for x in text.splitlines() if x.strip()):
        for cell in line.split(","):
            act = _Action.from_str(cell)
            if act is not None:
                out.setdefault(act.stage_index, rank)
    return out


def _pipeline_worker(rank: int, world: int, port: int, jobs: Sequence[PipelineJob], width: int, seed: int, results: Any) -> None:
    try:
        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        torch = _torch()
        torch.set_num_threads(1)
        import torch.distributed as dist
        from torch.distributed.pipelining import PipelineStage
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime

        dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
        try:
            for job in jobs:
                model = make_mlp(job.stages, width, seed)
                x, y = _data(job.rows(), width, seed)
                owner = _stage_ranks(job.csv)
                mine = sorted(s for s, r in owner.items() if r == rank)
                stages = [PipelineStage(model[s], s, job.stages, torch.device("cpu")) for s in mine]
                sched = _PipelineScheduleRuntime(stages, job.micro_batches, loss_fn=torch.nn.functional.mse_loss, scale_grads=True)
                with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as fh:
                    fh.write(job.csv)
                try:
                    sched._load_csv(fh.name, format="compute_only")
                finally:
                    os.unlink(fh.name)
                kwargs: dict[str, Any] = {}
                args: tuple[Any, ...] = (x,) if 0 in mine else ()
                losses: list[Any] = []
                if job.stages - 1 in mine:
                    kwargs = {"target": y, "losses": losses}
                sched.step(*args, **kwargs)
                grads = {f"{s}.{n}": p.grad.detach().numpy().copy() for s in mine for n, p in model[s].named_parameters()}
                loss = float(torch.stack(losses).detach().mean()) if losses else None
                results.put((job.name, rank, grads, loss, None))
                dist.barrier()
        finally:
            dist.destroy_process_group()
    except BaseException:  # report to the parent, which raises
        results.put(("?", rank, {}, None, traceback.format_exc()))


def _launch(target: Any, world: int, args: tuple[Any, ...], expect: int, timeout: float) -> list[tuple[Any, ...]]:
    # fork: the children inherit the imported torch (an import costs seconds on a busy
    # machine); the parent runs no torch math before forking and children use 1 thread
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    results = ctx.Queue()
    port = free_port()
    procs = [ctx.Process(target=target, args=(r, world, port, *args, results), daemon=True) for r in range(world)]  # type: ignore[attr-defined]
    for p in procs:
        p.start()
    got: list[tuple[Any, ...]] = []
    try:
        while len(got) < expect:
            try:
                item = results.get(timeout=timeout)
            except queue.Empty:
                raise RuntimeError(f"no result from the {world} processes within {timeout:g} s") from None
            if item[-1] is not None:
                raise RuntimeError(f"rank {item[1]} failed:\n{item[-1]}")
            got.append(item)
    finally:
        for p in procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()
                p.join()
    return got


def run_pipeline_schedules(jobs: Sequence[PipelineJob], world: int = 4, width: int = 16, seed: int = 0, timeout: float = DEFAULT_TIMEOUT) -> list[RunReport]:
    """Run every job's schedule on ``world`` gloo processes (one launch) and compare the
    loss and every gradient with the unpipelined model (see the module docstring)."""
    torch = _torch()
    importlib.import_module("torch.distributed.pipelining")  # imported once, before the fork

    got = _launch(_pipeline_worker, world, (list(jobs), width, seed), world * len(jobs), timeout)
    reports = []
    for job in jobs:
        model = make_mlp(job.stages, width, seed)
        x, y = _data(job.rows(), width, seed)
        chunks = zip(torch.tensor_split(x, job.micro_batches), torch.tensor_split(y, job.micro_batches))
        ref_loss = torch.stack([torch.nn.functional.mse_loss(model(a), b) for a, b in chunks]).mean()
        ref_loss.backward()
        ref = {f"{s}.{n}": p.grad.numpy() for s in range(job.stages) for n, p in model[s].named_parameters()}
        grads: dict[str, Any] = {}
        loss = math.nan
        for name, _rank, g, lo, _ in got:
            if name == job.name:
                grads.update(g)
                if lo is not None:
                    loss = lo
        if set(grads) != set(ref):
            raise RuntimeError(f"{job.name}: gradients of {sorted(set(ref) - set(grads))} missing")
        diffs = {k: float(abs(grads[k] - ref[k]).max()) for k in ref}
        reports.append(RunReport(job.name, loss, float(ref_loss.detach()), max(diffs.values()), n_params=len(ref), details=diffs))
    return reports


# -- tensor parallelism ----------------------------------------------------------------------


def gpt_class() -> Any:
    """A pre-norm GPT built from plain ``torch.nn`` with the module names of
    `distplan.emit.dtensor.GPT_MODULES` (``tok_embeddings``, ``layers.{i}.ln1``,
    ``layers.{i}.attn.wq|wk|wv|wo``, ``layers.{i}.ln2``, ``layers.{i}.mlp.fc1|fc2``,
    ``norm``, ``output``) and the ops of `distplan.instances.transformer.transformer`
    (learned positions, biases, GeLU, LM head without bias); the attention infers its local
    head count from the projection's width (``view(b, s, -1, head_dim)``), as
    tensor-parallel blocks do. ``Model(vocab, seq, layers, hidden, heads, ffn)``."""
    torch = _torch()
    from torch import nn

    class Attention(nn.Module):
        def __init__(self, hidden: int, heads: int):
            super().__init__()
            self.head_dim = hidden // heads
            self.wq = nn.Linear(hidden, hidden)
            self.wk = nn.Linear(hidden, hidden)
            self.wv = nn.Linear(hidden, hidden)
            self.wo = nn.Linear(hidden, hidden)

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
            o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.wo(o.transpose(1, 2).reshape(b, s, -1))

    class MLP(nn.Module):
        def __init__(self, hidden: int, ffn: int):
            super().__init__()
            self.fc1 = nn.Linear(hidden, ffn)
            self.fc2 = nn.Linear(ffn, hidden)

        def forward(self, x: Any) -> Any:
            return self.fc2(torch.nn.functional.gelu(self.fc1(x)))

    class Block(nn.Module):
        def __init__(self, hidden: int, heads: int, ffn: int):
            super().__init__()
            self.ln1 = nn.LayerNorm(hidden)
            self.attn = Attention(hidden, heads)
            self.ln2 = nn.LayerNorm(hidden)
            self.mlp = MLP(hidden, ffn)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln1(x))
            return x + self.mlp(self.ln2(x))

    class Model(nn.Module):
        def __init__(self, vocab: int, seq: int, layers: int, hidden: int, heads: int, ffn: int):
            super().__init__()
            self.tok_embeddings = nn.Embedding(vocab, hidden)
            self.pos_embeddings = nn.Embedding(seq, hidden)
            self.layers = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
            self.norm = nn.LayerNorm(hidden)
            self.output = nn.Linear(hidden, vocab, bias=False)

        def forward(self, ids: Any) -> Any:
            x = self.tok_embeddings(ids) + self.pos_embeddings(torch.arange(ids.shape[1]))
            for layer in self.layers:
                x = layer(x)
            return self.output(self.norm(x))

    return Model


@dataclass(frozen=True)
class GPTShape:
    """Sizes of the test GPT (match them to the sharding instance's dims)."""

    vocab: int = 256
    seq: int = 8
    layers: int = 1
    hidden: int = 32
    heads: int = 4
    ffn: int = 64
    batch: int = 2


def _gpt(shape: GPTShape, seed: int, factory: Callable[[], Any] | None = None) -> Any:
    torch = _torch()
    torch.manual_seed(seed)
    if factory is not None:
        return factory()
    return gpt_class()(shape.vocab, shape.seq, shape.layers, shape.hidden, shape.heads, shape.ffn)


def _tokens(shape: GPTShape, seed: int) -> tuple[Any, Any]:
    torch = _torch()
    gen = torch.Generator().manual_seed(seed + 1)
    ids = torch.randint(0, shape.vocab, (shape.batch, shape.seq), generator=gen)
    return ids, torch.randint(0, shape.vocab, (shape.batch, shape.seq), generator=gen)


def _gpt_loss(logits: Any, target: Any) -> Any:
    torch = _torch()
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), target.flatten())


def _dtensor_worker(rank: int, world: int, port: int, text: str, shape: GPTShape, seed: int, factory: Callable[[], Any] | None, results: Any) -> None:
    try:
        torch = _torch()
        torch.set_num_threads(1)
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor import DTensor
        from torch.distributed.tensor.parallel import loss_parallel, parallelize_module

        os.environ["MASTER_ADDR"] = "127.0.0.1"
        os.environ["MASTER_PORT"] = str(port)
        dist.init_process_group("gloo", rank=rank, world_size=world, init_method=f"tcp://127.0.0.1:{port}")
        try:
            namespace: dict[str, Any] = {}
            exec(compile(text, "<emitted parallelize_plan>", "exec"), namespace)  # the emitted module
            model = _gpt(shape, seed, factory)
            mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("tp",))
            parallelize_module(model, mesh["tp"], namespace["parallelize_plan"])
            ids, target = _tokens(shape, seed)
            logits = model(ids)
            if namespace.get("LOSS_PARALLEL"):
                with loss_parallel():
                    loss = _gpt_loss(logits, target)
                    loss.backward()
            else:
                loss = _gpt_loss(logits, target)
                loss.backward()
            full = logits.full_tensor() if isinstance(logits, DTensor) else logits
            loss_value = float((loss.full_tensor() if isinstance(loss, DTensor) else loss).detach())
            grads: dict[str, Any] = {}
            sharded = sum(1 for p in model.parameters() if isinstance(p, DTensor) and any(pl.is_shard() for pl in p.placements))
            grads["__sharded__"] = sharded
            for n, p in model.named_parameters():
                g = p.grad
                grads[n] = (g.full_tensor() if isinstance(g, DTensor) else g).detach().numpy().copy()
            results.put(("dtensor", rank, {"__out__": full.detach().numpy().copy(), **grads}, loss_value, None))
        finally:
            dist.destroy_process_group()
    except BaseException:
        results.put(("?", rank, {}, None, traceback.format_exc()))


def run_dtensor_plan(
    module_text: str,
    shape: GPTShape | None = None,
    world: int = 2,
    seed: int = 0,
    timeout: float = DEFAULT_TIMEOUT,
    factory: Callable[[], Any] | None = None,
) -> RunReport:
    """Apply an emitted ``parallelize_plan`` to the `gpt_class` model (or ``factory()``, a
    token-id model of ``shape.vocab``, e.g. ``examples/llama_style.py``'s) on ``world`` CPU
    gloo processes (one ``tp`` mesh axis); compare logits, cross-entropy loss and every
    parameter gradient with the unsharded model (largest absolute differences). A module
    that states the tensor-parallel degree it was made for (``TP_SIZE``, as `emit.dtensor`
    writes it) runs on that many processes only: an `InputError` otherwise (its costs and
    memory were planned for that degree)."""
    _torch()
    importlib.import_module("torch.distributed.tensor.parallel")  # imported once, before the fork
    namespace: dict[str, Any] = {}
    exec(compile(module_text, "<emitted parallelize_plan>", "exec"), namespace)  # (the workers run it again)
    made_for = namespace.get("TP_SIZE")
    if made_for is not None and made_for != world:
        raise InputError("world", f"the plan was made for a tensor-parallel degree of {made_for} (TP_SIZE), but it would run on {world} processes", f"run it with world={made_for}, or plan for {world} devices")
    shape = shape or GPTShape()
    got = _launch(_dtensor_worker, world, (module_text, shape, seed, factory), world, timeout)
    model = _gpt(shape, seed, factory)
    ids, target = _tokens(shape, seed)
    logits = model(ids)
    loss = _gpt_loss(logits, target)
    loss.backward()
    ref = {n: p.grad.numpy() for n, p in model.named_parameters()}
    worst_out = worst_grad = 0.0
    details: dict[str, float] = {}
    run_loss = math.nan
    for _, _rank, tensors, lo, _ in got:
        run_loss = lo
        details["sharded_params"] = float(tensors["__sharded__"])
        worst_out = max(worst_out, float(abs(tensors["__out__"] - logits.detach().numpy()).max()))
        for n, g in ref.items():
            d = float(abs(tensors[n] - g).max())
            details[n] = max(details.get(n, 0.0), d)
            worst_grad = max(worst_grad, d)
    return RunReport("dtensor", run_loss, float(loss.detach()), worst_grad, worst_out, len(ref), details)


__all__ = ["GPTShape", "PipelineJob", "RunReport", "free_port", "gpt_class", "make_mlp", "run_dtensor_plan", "run_pipeline_schedules"]

