"""Import a PyTorch model as a placement instance (extra ``torch``).

`import_torch(module_or_factory, input_shapes, device="V100")` exports the model with
``torch.export`` (an ATen-level fx graph), then for every node records its op type, output
shapes and bytes, parameter bytes and FLOPs (``torch.utils.flop_counter`` on shape-only
meta tensors, so no real math runs), and connects ops by the bytes of the tensors they
pass. Views and other zero-cost nodes (reshape, transpose, getitem, asserts, identity
dropout, ...) are fused into their producer; ``meta.fused`` maps each of them to what it
was merged into. Op time is the roofline of the chosen catalogue device
(`DeviceSpec.roofline_seconds`: compute vs. bytes moved, plus a launch floor), or, with
``measure=True``, the op's time on this machine's CPU measured with the torch profiler
(real, though not a GPU). With ``backward=True`` the graph describes training: backward
ops (2x forward FLOPs), activation-gradient edges, and optimizer updates fed by
parameter-gradient edges (``"gradient": true``, bytes = parameter bytes); see
`distplan.instances.zoo.LayerGraph.training`. The model is then traced in train mode
(dropout, batch-norm statistics: the graph a training step runs), without backward in eval
mode. Frozen parameters (``requires_grad=False``) are held like buffers: no weight
gradient, no optimizer update or state (``meta.totals.frozen_param_bytes``).

An op whose cost the model does not know (not a matmul/conv counted by the FLOP counter,
not pointwise, not a known reduction / normalisation / data movement) is an error naming
the op and its module: give it a time with ``op_times={"aten.op.overload": seconds}``.
Hugging Face ``transformers`` models built from a config work (``use_cache`` is switched
off so the output is a plain tensor tree); nothing is downloaded.
"""

from __future__ import annotations

import datetime as _dt
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distplan.errors import InputError
from distplan.instances.torch_export import (
    MEMORY_BOUND_OPS,
    META_OPS,
    VIEW_OPS,
    FlopInterpreter,
    aliased_arg,
    concrete,
    export_module,
    input_binding,
    is_floating,
    linear_modules,
    lookup_time,
    measure_seconds,
    module_path,
    module_type,
    normalise_shapes,
    op_key,
    program_inputs,
    require_torch,
    symbolic_arithmetic,
    tensor_bytes,
    tensor_shapes,
    to_meta,
    written_args,
)
from distplan.instances.zoo import DTYPE_BYTES, GENERATOR_VERSION, LayerGraph, LayerOp
from distplan.models.catalogue import LAT_PCIE, PCIE3_X16, ClusterSpec, DeviceSpec, uniform_cluster
from distplan.models.catalogue import cluster as catalogue_cluster
from distplan.models.catalogue import device as catalogue_device

try:  # the extra is optional: everything else in distplan works without it
    import torch
    import torch.fx
    from torch.utils._pytree import tree_flatten
    from torch.utils.flop_counter import FlopCounterMode
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None  # type: ignore[assignment]


def graph_from_export(
    ep: Any,
    module: Any = None,
    inputs: Sequence[Any] = (),
    *,
    label: str = "model",
    measure: bool = False,
    repeats: int = 3,
    op_times: Mapping[str, float] | None = None,
    input_shapes: Sequence[Sequence[int]] | None = None,
) -> tuple[LayerGraph, dict[str, str]]:
    """The forward `LayerGraph` of an ExportedProgram and the map of fused nodes.

    ``input_shapes`` (one per tensor input) size the dims of a program exported with dynamic
    dims (``torch.export.Dim``), which are otherwise taken from its example inputs; with a
    static program they must equal the exported shapes. An op that writes in place into a
    tensor or a view of it (``y[:, :8] *= 3``, ``y[:, 0] = t``: ATen ``mul_`` / ``copy_``
    into a slice) is the source of what later ops read of that tensor: an edge runs from the
    write to every later reader of the written memory (any view of the same base), beside the
    edge from the op that made the tensor."""
    require_torch()
    op_times = dict(op_times or {})
    matched: set[str] = set()  # the keys of op_times some op took
    gm = ep.graph_module
    graph = gm.graph
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    named_params: dict[str, Any] = dict(module.named_parameters(remove_duplicate=False)) if module is not None else {}
    named_buffers: dict[str, Any] = dict(module.named_buffers(remove_duplicate=False)) if module is not None else {}

    # FLOPs per node on meta tensors; a dynamic program's symbolic dims sized first
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    user_inputs = [
        (n.name, n.meta["val"])
        for n in placeholders
        if (specs[n.name].kind.name if n.name in specs else "USER_INPUT") == "USER_INPUT" and isinstance(n.meta.get("val"), torch.Tensor)
    ]
    dynamic = any(not isinstance(d, int) for _, v in user_inputs for d in v.shape)
    binding = input_binding(ep, user_inputs, input_shapes) if dynamic or input_shapes is not None else {}
    meta_args = []
    for n in placeholders:
        val = n.meta.get("val")
        if dynamic:
            meta_args.append(concrete(val, binding))
        else:
            meta_args.append(to_meta(val) if isinstance(val, torch.Tensor) else val)
    counter = FlopCounterMode(display=False)
    interp = FlopInterpreter(gm, counter, binding)
    with counter:
        interp.run(*meta_args)
    flops = interp.flops

    def value(n: Any) -> Any:
        """A node's traced value; a dynamic program's with its sizes from the binding."""
        if dynamic and n.name in interp.values:
            return interp.values[n.name]
        return n.meta.get("val")

    measured: dict[str, float] = {}
    if measure:
        measured = measure_seconds(ep, inputs, repeats)

    # dtype of the math: that of most parameter bytes
    dtype_bytes: dict[str, float] = {}
    for n in placeholders:
        spec = specs.get(n.name)
        val = n.meta.get("val")
        if spec is not None and spec.kind.name == "PARAMETER" and isinstance(val, torch.Tensor):
            key = str(val.dtype).replace("torch.", "")
            dtype_bytes[key] = dtype_bytes.get(key, 0.0) + tensor_bytes(val)
    dtype = max(dtype_bytes, key=lambda k: dtype_bytes[k]) if dtype_bytes else "float32"
    g = LayerGraph(label, dtype if dtype in DTYPE_BYTES else "float32")

    # roots: what each node stands for once views are fused away
    root: dict[str, tuple[str, str]] = {}  # node -> ("op"|"param"|"buffer"|"input"|"none", key)
    fused: dict[str, str] = {}
    param_owner: dict[int, str] = {}  # id(parameter) -> op name that holds it
    buffer_owner: dict[int, str] = {}
    op_name_of: dict[str, str] = {}
    # in-place writes: node -> the node whose memory it is (views share their base's), and
    # that memory -> the op that wrote it last (its later readers depend on that write)
    memory: dict[str, str] = {n.name: n.name for n in placeholders}
    last_write: dict[str, str] = {}
    attr_values: dict[str, Any] = {}  # a constant read by get_attr -> its whole tensor

    def frozen(target: str) -> bool:
        """A parameter that takes no gradient (``requires_grad_(False)``): held like a buffer,
        with no weight gradient, no optimizer update and no optimizer state."""
        obj = named_params.get(target)
        if obj is None:
            obj = ep.state_dict.get(target)
        return isinstance(obj, torch.Tensor) and not obj.requires_grad

    for n in placeholders:
        spec = specs.get(n.name)
        kind = spec.kind.name if spec is not None else "USER_INPUT"
        target = getattr(spec, "target", None) or n.name
        if kind == "PARAMETER":
            root[n.name] = ("frozen", target) if frozen(target) else ("param", target)
        elif kind in ("BUFFER", "CONSTANT_TENSOR"):
            root[n.name] = ("buffer", target)
        elif kind == "USER_INPUT":
            root[n.name] = ("input", n.name)
        else:
            root[n.name] = ("none", n.name)

    def identity_of(kind: str, target: str) -> int:
        obj = (named_params if kind == "param" else named_buffers).get(target)
        if obj is None:
            obj = ep.state_dict.get(target, ep.constants.get(target) if hasattr(ep, "constants") else None)
        return id(obj) if obj is not None else hash((kind, target))

    for n in graph.nodes:
        if n.op in ("placeholder", "output"):
            continue
        if n.op == "get_attr":
            root[n.name] = ("buffer", str(n.target))
            memory[n.name] = n.name
            attr_values[str(n.target)] = value(n)
            continue
        if n.op != "call_function":
            raise InputError(f"graph node {n.name}", f"unsupported fx node kind {n.op!r} (target {n.target})", "export with torch.export (ATen IR)")
        full, base = op_key(n.target)
        val = value(n)
        tensor_args = [a for a in tree_flatten((n.args, n.kwargs))[0] if isinstance(a, torch.fx.Node)]
        fixed = lookup_time(op_times, full, base, matched)
        zero_cost = fixed is None and (
            base in META_OPS
            or full == "getitem"
            or base in VIEW_OPS
            or (base in ("to", "_to_copy", "type_as", "contiguous", "clone") and _same_tensor(n))
            or (base in ("dropout", "native_dropout", "feature_dropout") and _identity_dropout(n))
            or (symbolic_arithmetic(n.target) and not isinstance(val, torch.Tensor))
        )
        if zero_cost:
            src = next((a for a in tensor_args if a.name in root), None)
            root[n.name] = root[src.name] if src is not None else ("none", n.name)
            fused[n.name] = _describe_root(root[n.name], op_name_of)
            # a view (or a no-op conversion) is the memory of its source; _to_copy makes new memory
            memory[n.name] = memory.get(src.name, src.name) if src is not None and base != "_to_copy" else n.name
            continue
        if fixed is None and n.name not in measured and flops.get(n.name, 0.0) <= 0 and not _known_memory_bound(n.target, base):
            path = module_path(n)
            where = f"module {path} ({module_type(n)})" if path else f"the top-level module ({label})"
            raise InputError(
                f"graph node {n.name}",
                f"no cost model for op {full} in {where}",
                f"give it a time per call in seconds with op_times={{'{full}': SECONDS}} (CLI: --op-time {full}=SECONDS), or use measure=True",
            )
        path = module_path(n)
        name = f"{path}/{n.name}" if path else n.name
        out_bytes = tensor_bytes(val)
        params = 0.0
        buffers = 0.0
        read = 0.0
        shares: str | None = None
        preds: dict[str, float] = {}
        for a in tensor_args:
            if dynamic and isinstance(value(a), int | torch.SymInt):
                continue  # a size (x.shape[0] // 2): known once the dims are sized, not data passed
            kind, key = root.get(a.name, ("none", a.name))
            nbytes = tensor_bytes(value(a))
            read += nbytes
            writer = last_write.get(memory.get(a.name, a.name))
            if writer is not None and writer != key:  # written in place since it was made
                preds[writer] = preds.get(writer, 0.0) + nbytes
            if kind == "op":
                preds[key] = preds.get(key, 0.0) + nbytes
            elif kind == "param":
                ident = identity_of("param", key)
                if ident not in param_owner:
                    param_owner[ident] = name
                    params += tensor_bytes(_param_value(ep, placeholders, specs, key))
                elif param_owner[ident] != name:
                    shares = param_owner[ident]
            elif kind == "buffer":
                ident = identity_of("buffer", key)
                if ident not in buffer_owner:
                    buffer_owner[ident] = name
                    # the whole buffer, not what this op reads of it (a slice, a view)
                    whole = _param_value(ep, placeholders, specs, key)
                    whole = attr_values.get(key) if whole is None else whole
                    buffers += tensor_bytes(whole) if isinstance(whole, torch.Tensor) else nbytes
            elif kind == "frozen":
                ident = identity_of("param", key)
                if ident not in buffer_owner:
                    buffer_owner[ident] = name
                    buffers += tensor_bytes(_param_value(ep, placeholders, specs, key))
        g.add_op(
            LayerOp(
                name,
                full,
                flops=flops.get(n.name, 0.0),
                bytes_moved=read + out_bytes,
                params=params,
                output=out_bytes,
                buffers=buffers,
                seconds=fixed if fixed is not None else measured.get(n.name),
                differentiable=is_floating(val),
                shares_params_of=shares,
                info={"module": path, "shapes": tensor_shapes(val)},
            )
        )
        op_name_of[n.name] = name
        root[n.name] = ("op", name)
        alias = aliased_arg(n)
        memory[n.name] = memory.get(alias.name, alias.name) if alias is not None else n.name
        for w in written_args(n):
            last_write[memory.get(w.name, w.name)] = name
        for src_op, nbytes in preds.items():
            cap = g.ops[g.index[src_op]].output
            g.connect(src_op, name, min(nbytes, cap) if cap > 0 else nbytes)
        if shares is not None:
            g.colocate_ops([shares, name], g.colocate.get(g.index[shares], shares))
    if not g.ops:
        raise InputError(f"module {label}", "the exported graph has no compute ops", "export a model that computes something")
    unmatched = [key for key in op_times if key not in matched]
    if unmatched:  # (a time that names no op of the export would be dropped without a word)
        raise InputError(f"op_times[{unmatched[0]!r}]", "names no op of the exported model", "name it as the export does: aten.linear.default, aten.linear or linear (CLI: --op-time linear=SECONDS)")
    return g, fused


def _param_value(ep: Any, placeholders: Sequence[Any], specs: Mapping[str, Any], target: str) -> Any:
    for n in placeholders:
        spec = specs.get(n.name)
        if spec is not None and getattr(spec, "target", None) == target:
            return n.meta.get("val")
    return None


def _describe_root(r: tuple[str, str], op_name_of: Mapping[str, str]) -> str:
    kind, key = r
    return key if kind == "op" else f"{kind}:{key}"


def _same_tensor(n: Any) -> bool:
    """A dtype/device conversion or copy that returns its input unchanged (same dtype, device)."""
    val = n.meta.get("val")
    src = n.args[0] if n.args else None
    if not isinstance(src, torch.fx.Node) or not isinstance(val, torch.Tensor):
        return False
    sval = src.meta.get("val")
    if not isinstance(sval, torch.Tensor):
        return False
    base = op_key(n.target)[1]
    if base in ("clone", "contiguous"):
        return base == "contiguous" and sval.is_contiguous()
    return sval.dtype == val.dtype and sval.device == val.device


def _identity_dropout(n: Any) -> bool:
    args = list(n.args) + [n.kwargs.get("p"), n.kwargs.get("train")]
    p = args[1] if len(args) > 1 and isinstance(args[1], float | int) else None
    train = args[2] if len(args) > 2 and isinstance(args[2], bool) else n.kwargs.get("train")
    return p == 0 or train is False


def _known_memory_bound(target: Any, base: str) -> bool:
    tags = getattr(target, "tags", ()) or ()
    if torch.Tag.pointwise in tags:
        return True
    return base in MEMORY_BOUND_OPS or base.rstrip("_") in MEMORY_BOUND_OPS  # in-place variants (fill_)


def import_torch(
    module_or_factory: torch.nn.Module | Callable[[], Any] | Any,
    input_shapes: Sequence[int] | Sequence[Sequence[int]],
    device: str | DeviceSpec = "V100",
    measure: bool = False,
    backward: bool = True,
    *,
    cluster: str | ClusterSpec | None = None,
    n_devices: int = 4,
    memory_limit: float | None = None,
    input_dtypes: Any = None,
    precision: str | None = None,
    op_times: Mapping[str, float] | None = None,
    optimizer: str | None = "adam",
    repeats: int = 3,
    name: str | None = None,
) -> dict[str, Any]:
    """A placement document for a PyTorch model (seconds, bytes).

    ``module_or_factory``: an ``nn.Module``, a zero-argument factory (called on the meta
    device, so no memory is allocated, unless ``measure``), or a ``torch.export``
    ExportedProgram. ``input_shapes``: one shape ``(8, 128)`` or one per input (for an
    ExportedProgram: the sizes of its dynamic dims, ``torch.export.Dim``; its static dims
    must match). Integer
    inputs (token ids, int64) are inferred for Hugging Face models, for a model whose
    first layer is an ``nn.Embedding`` and when tracing with floating inputs fails on an
    index argument; else the weights' dtype (override with ``input_dtypes``).
    ``meta.linear_modules`` lists the fully qualified names and sizes of the model's
    ``nn.Linear`` layers (what a DTensor ``parallelize_plan`` keys on), ``meta.input_dtypes``
    the dtypes traced. A factory runs under ``torch.device("meta")``, so even an
    8e9-parameter model imports without allocating its weights.
    Times: roofline of ``device`` (catalogue name, or a `DeviceSpec` of a catalogue name with
    other constants) on each device of ``cluster`` (default: ``n_devices`` of ``device`` on
    PCIe 3.0), or measured on this CPU. ``op_times`` maps an op (``"aten.foo.default"``,
    ``"aten.foo"`` or ``"foo"``) to seconds per call and overrides the cost model.
    """
    require_torch()
    t0 = time.perf_counter()
    spec = device if isinstance(device, DeviceSpec) else catalogue_device(device)
    if isinstance(device, DeviceSpec):
        catalogue_device(spec.name)  # the cluster names catalogue types
    if cluster is None:
        cl = uniform_cluster(f"{n_devices}x{spec.name}", f"{n_devices}x {spec.name} on PCIe 3.0", spec.name, n_devices, PCIE3_X16, LAT_PCIE, "catalogue: PCIe 3.0 x16")
    else:
        cl = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    cl = cl.with_memory_limit(memory_limit)
    ep, module, inputs, label = export_module(module_or_factory, input_shapes, measure=measure, input_dtypes=input_dtypes, precision=precision, training=backward)
    t_export = time.perf_counter() - t0
    is_program = module is None  # an ExportedProgram, given or returned by the factory
    shapes = normalise_shapes(input_shapes) if is_program else None  # sizes a dynamic program's dims, checks a static one's
    graph, fused = graph_from_export(ep, module, inputs, label=label, measure=measure, repeats=repeats, op_times=op_times, input_shapes=shapes)
    fwd_flops = graph.total_flops("forward")
    params = graph.total_params()  # trainable: frozen parameters are held like buffers
    frozen = sum(tensor_bytes(p) for p in (module if module is not None else ep).parameters() if not p.requires_grad)
    n_forward = len(graph)
    if backward:
        graph = graph.training(optimizer)
    overrides = {spec.name: spec} if isinstance(device, DeviceSpec) else None
    doc = graph.to_document(cl, name or f"{label}-{cl.name}", None, None, overrides)
    doc["meta"] = {
        "source": f"torch.export of {label} (torch {torch.__version__})",
        "parameters": {
            "input_shapes": shapes if is_program else normalise_shapes(input_shapes),
            "device": spec.name,
            "cluster": cl.name,
            "measure": measure,
            "backward": backward,
            "optimizer": optimizer if backward else None,
            "precision": precision,
            "op_times": dict(op_times or {}),
        },
        "date": _dt.date.today().isoformat(),
        "generator": "distplan.instances.torch_import.import_torch",
        "generator_version": GENERATOR_VERSION,
        "time_source": "measured on this CPU (torch profiler)" if measure else f"roofline of the catalogue devices ({', '.join(cl.type_names())})",
        "totals": {"forward_flops": fwd_flops, "param_bytes": params, "frozen_param_bytes": frozen, "forward_ops": n_forward},
        "input_dtypes": [str(t.dtype).replace("torch.", "") for t in (inputs or program_inputs(ep))],
        "linear_modules": linear_modules(module) if module is not None else [],
        "fused": fused,
        "import_seconds": {"export": t_export, "total": time.perf_counter() - t0},
    }
    return doc
