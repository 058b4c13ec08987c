"""Plans that run: write a distplan plan in a training runtime's own format.

``emit(plan, target, instance=None, **options) -> str`` (also ``distplan emit PLAN.json
--target TARGET -o OUT``). Targets:

* ``torch-pipelining``: a pipeline plan as PyTorch's compute-only schedule CSV
  (`distplan.emit.pipeline`), loaded with ``_PipelineScheduleRuntime._load_csv``.
* ``dtensor``: a sharding plan of a transformer as a Python module defining
  ``parallelize_plan`` for ``torch.distributed.tensor.parallel.parallelize_module``
  (`distplan.emit.dtensor`).
* ``megatron``: Megatron-LM command-line flags (and the Zero Bubble fork's schedule flags)
  for a sharding or pipeline plan that fits Megatron's knobs (`distplan.emit.megatron`).

None of them needs PyTorch installed: they write text. A plan that the target cannot
express is an `InputError` (exit code 2) that says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from distplan.errors import InputError

TARGETS = ("torch-pipelining", "dtensor", "megatron")


def _instance_of(plan: Any, instance: Any) -> Any:
    from distplan.instances import load_instance
    from distplan.models.schema import refuse_instance

    if instance is not None:
        return load_instance(instance) if isinstance(instance, str | Path) else instance
    source = None
    if isinstance(plan, Mapping):
        refuse_instance(plan)
        source = (plan.get("info") or {}).get("source") if isinstance(plan.get("info"), Mapping) else None
        source = plan.get("source") or source or plan.get("instance")
    else:
        info = getattr(plan, "info", None)
        source = (info or {}).get("source") if isinstance(info, Mapping) else None
        source = source or (plan.instance if isinstance(getattr(plan, "instance", None), str) else None)
    if not source:
        raise InputError("instance", "the plan does not say which instance it solves", "pass the instance (Python: instance=..., CLI: --instance FILE)")
    try:
        return load_instance(source)
    except InputError as exc:
        raise InputError("instance", f"the plan names instance {source!r}, which is neither a file nor bundled", "pass the instance (Python: instance=..., CLI: --instance FILE)") from exc


def resolve(plan: Any, instance: Any = None) -> tuple[Any, Any]:
    """(instance, plan object) from a `Result`, a plan object, or a plan / result document
    (``{"strategies": ...}`` / ``{"start": ...}`` or ``{"plan": {...}}``)."""
    from distplan.models.common import kind_spec

    inst = _instance_of(plan, instance)
    spec = kind_spec(inst.kind)
    obj = getattr(plan, "plan", plan) if not isinstance(plan, Mapping) else plan
    if isinstance(obj, Mapping):
        kind = obj.get("kind")
        if isinstance(kind, str) and kind not in (inst.kind, f"{inst.kind}-plan"):
            raise InputError("kind", f"a {kind} document, but instance {inst.name!r} is a {inst.kind} instance", "pass the plan's own instance")
        obj = spec.read_plan(inst, obj)
    if obj is None:
        raise InputError("plan", "the result holds no plan", "emit a result with a plan")
    return inst, obj


def emit(plan: Any, target: str, instance: Any = None, *, out: str | Path | None = None, **options: Any) -> str:
    """The plan in ``target``'s format (text); also written to ``out`` when given.

    ``plan``: a `distplan.Result`, a plan object, or a plan/result document (dict).
    ``instance``: the instance object, a file or a bundled name (default: the one the
    result names). ``options`` go to the target: ``modules`` (dtensor: op name or
    ``l{i}.op`` template -> module name(s)), ``num_layers`` (megatron).
    """
    if target not in TARGETS:
        raise InputError("target", f"unknown target {target!r}", f"use one of: {', '.join(TARGETS)}")
    inst, obj = resolve(plan, instance)
    if target == "torch-pipelining":
        if inst.kind != "pipeline":
            raise InputError(
                "target",
                f"torch-pipelining runs pipeline plans; {inst.name!r} is a {inst.kind} instance",
                "emit a pipeline plan (distplan make pipeline ...; distplan solve ... -f 1f1b --out PLAN.json)",
            )
        if options:
            raise InputError("options", f"torch-pipelining takes no options, got {sorted(options)}")
        from distplan.emit.pipeline import torch_pipelining_csv

        text = torch_pipelining_csv(inst, obj)
    elif target == "dtensor":
        from distplan.emit.dtensor import dtensor_module

        text = dtensor_module(inst, obj, **options)
    else:
        from distplan.emit.megatron import megatron_flags

        text = megatron_flags(inst, obj, **options)
    if out is not None:
        Path(out).write_text(text)
    return text


__all__ = ["TARGETS", "emit", "resolve"]
