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
`distplan.instances.zoo.LayerGraph.training`.

An op whose cost the model does not know (not a matmul/conv counted by the FLOP counter,
not pointwise, not a known reduction / normalisation / data movement) is an error naming
the op and its module: give it a time with ``op_times={"aten.op.overload": seconds}``.
Hugging Face ``transformers`` models built from a config work (``use_cache`` is switched
off so the output is a plain tensor tree); nothing is downloaded.
"""

from __future__ import annotations

import datetime as _dt
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from distplan.errors import InputError
from distplan.instances.zoo import DTYPE_BYTES, GENERATOR_VERSION, LayerGraph, LayerOp
from distplan.models.catalogue import LAT_PCIE, PCIE3_X16, ClusterSpec, DeviceSpec, uniform_cluster
from distplan.models.catalogue import cluster as catalogue_cluster
from distplan.models.catalogue import device as catalogue_device

try:  # the extra is optional: everything else in distplan works without it
    import torch
    import torch.fx
    from torch.utils._pytree import tree_flatten, tree_map
    from torch.utils.flop_counter import FlopCounterMode
except ImportError:  # pragma: no cover - exercised only without torch
    torch = None  # type: ignore[assignment]

def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: ATen ops that only re-describe memory (fused into their producer; cost zero)
VIEW_OPS = _names(
    """view _unsafe_view reshape _reshape_alias expand expand_as permute transpose t squeeze unsqueeze slice select
    alias detach split split_with_sizes unbind as_strided unflatten flatten view_as narrow chunk movedim
    lift_fresh_copy view_as_real view_as_complex tensor_split swapaxes swapdims numpy_T mT"""
)
#: nodes that check or query metadata (no kernel)
META_OPS = _names(
    """_assert_tensor_metadata _assert_scalar _assert_async sym_size sym_numel sym_stride sym_storage_offset
    sym_constrain_range_for_size sym_constrain_range _functional_assert_async"""
)
#: memory-bound ops that are not tagged pointwise: normalisations, reductions, data movement, creation
MEMORY_BOUND_OPS = _names(
    """layer_norm native_layer_norm group_norm native_group_norm batch_norm _native_batch_norm_legit
    _native_batch_norm_legit_no_training _native_batch_norm_legit_functional instance_norm rms_norm _fused_rms_norm
    softmax _softmax log_softmax _log_softmax _safe_softmax embedding index index_select gather scatter scatter_add
    scatter_reduce index_put index_add index_fill index_copy _unsafe_index masked_fill masked_scatter where cat
    concat stack hstack vstack sum mean amax amin max min var var_mean std std_mean prod norm linalg_vector_norm
    logsumexp cumsum cumprod argmax argmin topk sort max_pool1d max_pool2d max_pool3d max_pool2d_with_indices
    max_pool3d_with_indices avg_pool1d avg_pool2d avg_pool3d adaptive_avg_pool1d adaptive_avg_pool2d
    adaptive_avg_pool3d _adaptive_avg_pool2d adaptive_max_pool1d adaptive_max_pool2d upsample_nearest1d
    upsample_nearest2d upsample_bilinear2d upsample_bicubic2d _upsample_nearest_exact2d constant_pad_nd pad
    reflection_pad1d reflection_pad2d replication_pad1d replication_pad2d arange full full_like zeros zeros_like
    ones ones_like new_ones new_zeros new_full new_empty empty empty_like empty_strided rand randn rand_like
    randn_like randint randint_like clone contiguous copy copy_ _to_copy to fill fill_ diff tril triu repeat tile
    flip roll one_hot nll_loss nll_loss_forward nll_loss2d_forward cross_entropy_loss mse_loss l1_loss smooth_l1_loss
    binary_cross_entropy binary_cross_entropy_with_logits kl_div dropout native_dropout feature_dropout
    alpha_dropout bernoulli any all scalar_tensor unfold im2col col2im pixel_shuffle pixel_unshuffle
    channel_shuffle repeat_interleave count_nonzero cosine_similarity pairwise_distance linspace logspace eye
    _unsafe_masked_index squeeze_copy unsqueeze_copy expand_copy permute_copy view_copy t_copy transpose_copy
    slice_copy select_copy split_copy as_strided_copy detach_copy alias_copy __and__ __or__ __xor__ __lshift__
    __rshift__ __iand__ __ior__ __ixor__"""
)


def _require_torch() -> None:
    if torch is None:
        raise InputError("torch", "PyTorch is not installed", "pip install 'distplan[torch]'")


def _op_key(target: Any) -> tuple[str, str]:
    """(full name like 'aten.addmm.default', base name like 'addmm') of a node target."""
    if target is operator.getitem:
        return "getitem", "getitem"
    name = str(target)
    base = getattr(target, "_opname", None) or getattr(target, "__name__", name)
    return name, str(base)


def _tensor_bytes(value: Any) -> float:
    leaves, _ = tree_flatten(value)
    total = 0
    for t in leaves:
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return float(total)


def _shapes(value: Any) -> list[list[int]]:
    leaves, _ = tree_flatten(value)
    return [list(map(int, t.shape)) for t in leaves if isinstance(t, torch.Tensor)]


def _is_floating(value: Any) -> bool:
    leaves, _ = tree_flatten(value)
    return any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) for t in leaves)


def _module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    for prefix in ("L['self'].", "L__self__.", "L['self']"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return str(path)


def _module_type(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][1]) if stack else ""


def _to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.device.type != "meta":
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


class _FlopInterpreter(torch.fx.Interpreter if torch is not None else object):  # type: ignore[misc]
    """Runs an exported graph on shape-only meta tensors, recording FLOPs per node."""

    def __init__(self, gm: Any, counter: Any):
        super().__init__(gm)
        self.counter = counter
        self.flops: dict[str, float] = {}

    def run_node(self, n: Any) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        args = tree_map(_to_meta, args)
        kwargs = {k: (torch.device("meta") if k == "device" and v is not None else tree_map(_to_meta, v)) for k, v in kwargs.items()}
        before = self.counter.get_total_flops()
        out = n.target(*args, **kwargs)
        self.flops[n.name] = float(self.counter.get_total_flops() - before)
        return out


class _ProfiledInterpreter(torch.fx.Interpreter if torch is not None else object):  # type: ignore[misc]
    """Runs an exported graph on real tensors, each node inside a profiler record_function."""

    def run_node(self, n: Any) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        with torch.profiler.record_function(f"distplan::{n.name}"):
            return super().run_node(n)


_INDEX_MODULES = ("Embedding", "EmbeddingBag")


def _first_leaf(module: Any) -> Any:
    """The first registered submodule without children that holds parameters (a model's
    input layer in the usual registration order), or None."""
    for sub in module.modules():
        if next(sub.children(), None) is None and next(sub.parameters(recurse=False), None) is not None:
            return sub
    return None


def _default_input_dtype(module: Any) -> Any:
    """int64 for token-id models (Hugging Face ``input_ids``, or an ``nn.Embedding`` /
    ``nn.EmbeddingBag`` input layer), else the dtype of the floating-point weights."""
    if getattr(module, "main_input_name", None) == "input_ids":
        return torch.long
    first = _first_leaf(module) if hasattr(module, "modules") else None
    if first is not None and isinstance(first, torch.nn.Embedding | torch.nn.EmbeddingBag):
        return torch.long
    for p in module.parameters() if hasattr(module, "parameters") else []:
        if p.is_floating_point():
            return p.dtype
    return torch.float32


def _wants_indices(exc: BaseException) -> bool:
    """An export failure that says a floating input reached an index argument."""
    text = str(exc)
    return "indices" in text and ("Long, Int" in text or "Long" in text) and "float" in text.lower()


def linear_modules(module: Any) -> list[dict[str, Any]]:
    """Fully qualified names and sizes of the ``nn.Linear`` layers of a module, in
    registration order: the names a DTensor ``parallelize_plan`` keys on (see
    `distplan.emit.dtensor`)."""
    out: list[dict[str, Any]] = []
    for name, sub in module.named_modules():
        if isinstance(sub, torch.nn.Linear):
            out.append({"name": name, "in_features": int(sub.in_features), "out_features": int(sub.out_features), "bias": sub.bias is not None})
    return out


_DTYPES = {"long": "int64", "int": "int32", "float": "float32", "half": "float16", "fp16": "float16", "bf16": "bfloat16", "fp32": "float32"}


def _parse_dtype(spec: Any, path: str) -> Any:
    if spec is None or isinstance(spec, torch.dtype):
        return spec
    name = _DTYPES.get(str(spec), str(spec))
    dt = getattr(torch, name, None)
    if not isinstance(dt, torch.dtype):
        raise InputError(path, f"unknown dtype {spec!r}", "use e.g. float32, float16, bfloat16, int64")
    return dt


def _make_inputs(shapes: Sequence[Sequence[int]], dtypes: Sequence[Any], device: Any) -> list[Any]:
    out = []
    for shape, dt in zip(shapes, dtypes):
        if dt.is_floating_point:
            out.append(torch.randn(*shape, dtype=dt, device=device) if device != "meta" else torch.empty(*shape, dtype=dt, device="meta"))
        else:
            out.append(torch.zeros(*shape, dtype=dt, device=device))  # token id 0 exists in every vocabulary
    return out


def _normalise_shapes(input_shapes: Any) -> list[list[int]]:
    if isinstance(input_shapes, int):
        return [[input_shapes]]
    if not isinstance(input_shapes, Sequence) or not input_shapes:
        raise InputError("input_shape", f"{input_shapes!r} is not a shape", "give e.g. (8, 128) or [(8, 128), (8, 128)]")
    if all(isinstance(d, int) for d in input_shapes):
        return [list(input_shapes)]
    shapes = []
    for k, s in enumerate(input_shapes):
        if not isinstance(s, Sequence) or not all(isinstance(d, int) and d > 0 for d in s):
            raise InputError(f"input_shape[{k}]", f"{s!r} is not a shape of positive integers")
        shapes.append(list(s))
    return shapes


def _lookup_time(op_times: Mapping[str, float], full: str, base: str) -> float | None:
    for key in (full, full.rsplit(".", 1)[0], base):
        if key in op_times:
            return float(op_times[key])
    return None


def export_module(module_or_factory: Any, input_shapes: Any, *, measure: bool = False, input_dtypes: Any = None, precision: str | None = None) -> tuple[Any, Any, list[Any], str]:
    """(ExportedProgram, module or None, example inputs, model label). A factory is called
    under the meta device unless ``measure`` (then real weights are needed)."""
    _require_torch()
    if isinstance(module_or_factory, torch.export.ExportedProgram):
        ep = module_or_factory
        return ep, None, [], "ExportedProgram"
    shapes = _normalise_shapes(input_shapes)
    if isinstance(module_or_factory, torch.nn.Module):
        module = module_or_factory
    elif callable(module_or_factory):
        if measure:
            module = module_or_factory()
        else:
            try:
                with torch.device("meta"):
                    module = module_or_factory()
            except Exception:  # a factory that cannot run on meta (loads files, ...) builds real weights
                module = module_or_factory()
        if not isinstance(module, torch.nn.Module):
            raise InputError("module", f"the factory returned {type(module).__name__}, not a torch.nn.Module", "return the model from the factory")
    else:
        raise InputError("module", f"{module_or_factory!r} is neither a torch.nn.Module nor a factory", "pass a module or a zero-argument function returning one")
    label = type(module).__qualname__
    if precision is not None:
        module = module.to(_parse_dtype(precision, "precision"))
    config = getattr(module, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        config.use_cache = False  # Hugging Face caches are not exportable tensor trees
    module = module.eval() if not measure else module
    dev = next((p.device for p in module.parameters()), torch.device("cpu"))
    if isinstance(input_dtypes, str | torch.dtype) or input_dtypes is None:
        dts = [_parse_dtype(input_dtypes, "input_dtype") or _default_input_dtype(module)] * len(shapes)
    else:
        dts = [_parse_dtype(d, f"input_dtype[{k}]") for k, d in enumerate(input_dtypes)]
        if len(dts) != len(shapes):
            raise InputError("input_dtype", f"{len(dts)} dtypes for {len(shapes)} inputs", "give one dtype per input")
    if precision is not None:
        pd = _parse_dtype(precision, "precision")
        dts = [pd if d.is_floating_point else d for d in dts]
    inputs = _make_inputs(shapes, dts, "meta" if dev.type == "meta" else dev)
    try:
        try:
            ep = torch.export.export(module, tuple(inputs), strict=False)
        except Exception as first_exc:
            # an index input (token ids) that the first leaf did not reveal: retry as int64
            if input_dtypes is not None or not _wants_indices(first_exc) or not all(d.is_floating_point for d in dts):
                raise
            inputs = _make_inputs(shapes, [torch.long] * len(shapes), "meta" if dev.type == "meta" else dev)
            ep = torch.export.export(module, tuple(inputs), strict=False)
    except InputError:
        raise
    except Exception as exc:  # torch raises many types here; all mean "cannot trace"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(
            f"module {label}",
            f"torch.export cannot trace it ({type(exc).__name__}: {first[:300]})",
            "make forward() traceable: no Python branches on tensor values, no unsupported outputs "
            "(return tensors or tuples/dicts of tensors); or export it yourself and pass the ExportedProgram",
        ) from exc
    return ep, module, inputs, label


def graph_from_export(
    ep: Any,
    module: Any = None,
    inputs: Sequence[Any] = (),
    *,
    label: str = "model",
    measure: bool = False,
    repeats: int = 3,
    op_times: Mapping[str, float] | None = None,
) -> tuple[LayerGraph, dict[str, str]]:
    """The forward `LayerGraph` of an ExportedProgram and the map of fused nodes."""
    _require_torch()
    op_times = dict(op_times or {})
    gm = ep.graph_module
    graph = gm.graph
    specs = {s.arg.name: s for s in ep.graph_signature.input_specs if hasattr(s.arg, "name")}
    named_params: dict[str, Any] = dict(module.named_parameters(remove_duplicate=False)) if module is not None else {}
    named_buffers: dict[str, Any] = dict(module.named_buffers(remove_duplicate=False)) if module is not None else {}

    # FLOPs per node on meta tensors
    placeholders = [n for n in graph.nodes if n.op == "placeholder"]
    meta_args = []
    for n in placeholders:
        val = n.meta.get("val")
        meta_args.append(_to_meta(val) if isinstance(val, torch.Tensor) else val)
    counter = FlopCounterMode(display=False)
    interp = _FlopInterpreter(gm, counter)
    with counter:
        interp.run(*meta_args)
    flops = interp.flops

    measured: dict[str, float] = {}
    if measure:
        measured = _measure(ep, inputs, repeats)

    # dtype of the math: that of most parameter bytes
    dtype_bytes: dict[str, float] = {}
    for n in placeholders:
        spec = specs.get(n.name)
        val = n.meta.get("val")
        if spec is not None and spec.kind.name == "PARAMETER" and isinstance(val, torch.Tensor):
            key = str(val.dtype).replace("torch.", "")
            dtype_bytes[key] = dtype_bytes.get(key, 0.0) + _tensor_bytes(val)
    dtype = max(dtype_bytes, key=lambda k: dtype_bytes[k]) if dtype_bytes else "float32"
    g = LayerGraph(label, dtype if dtype in DTYPE_BYTES else "float32")

    # roots: what each node stands for once views are fused away
    root: dict[str, tuple[str, str]] = {}  # node -> ("op"|"param"|"buffer"|"input"|"none", key)
    fused: dict[str, str] = {}
    param_owner: dict[int, str] = {}  # id(parameter) -> op name that holds it
    buffer_owner: dict[int, str] = {}
    op_name_of: dict[str, str] = {}
    for n in placeholders:
        spec = specs.get(n.name)
        kind = spec.kind.name if spec is not None else "USER_INPUT"
        target = getattr(spec, "target", None) or n.name
        if kind == "PARAMETER":
            root[n.name] = ("param", target)
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
            continue
        if n.op != "call_function":
            raise InputError(f"graph node {n.name}", f"unsupported fx node kind {n.op!r} (target {n.target})", "export with torch.export (ATen IR)")
        full, base = _op_key(n.target)
        val = n.meta.get("val")
        tensor_args = [a for a in tree_flatten((n.args, n.kwargs))[0] if isinstance(a, torch.fx.Node)]
        fixed = _lookup_time(op_times, full, base)
        zero_cost = fixed is None and (
            base in META_OPS
            or full == "getitem"
            or base in VIEW_OPS
            or (base in ("to", "_to_copy", "type_as", "contiguous", "clone") and _same_tensor(n))
            or (base in ("dropout", "native_dropout", "feature_dropout") and _identity_dropout(n))
        )
        if zero_cost:
            src = next((a for a in tensor_args if a.name in root), None)
            root[n.name] = root[src.name] if src is not None else ("none", n.name)
            fused[n.name] = _describe_root(root[n.name], op_name_of)
            continue
        if fixed is None and n.name not in measured and flops.get(n.name, 0.0) <= 0 and not _known_memory_bound(n.target, base):
            path = _module_path(n)
            where = f"module {path} ({_module_type(n)})" if path else f"the top-level module ({label})"
            raise InputError(
                f"graph node {n.name}",
                f"no cost model for op {full} in {where}",
                f"give it a time per call in seconds with op_times={{'{full}': SECONDS}} (CLI: --op-time {full}=SECONDS), or use measure=True",
            )
        path = _module_path(n)
        name = f"{path}/{n.name}" if path else n.name
        out_bytes = _tensor_bytes(val)
        params = 0.0
        buffers = 0.0
        read = 0.0
        shares: str | None = None
        preds: dict[str, float] = {}
        for a in tensor_args:
            kind, key = root.get(a.name, ("none", a.name))
            nbytes = _tensor_bytes(a.meta.get("val"))
            read += nbytes
            if kind == "op":
                preds[key] = preds.get(key, 0.0) + nbytes
            elif kind == "param":
                ident = identity_of("param", key)
                if ident not in param_owner:
                    param_owner[ident] = name
                    params += _tensor_bytes(_param_value(ep, placeholders, specs, key))
                elif param_owner[ident] != name:
                    shares = param_owner[ident]
            elif kind == "buffer":
                ident = identity_of("buffer", key)
                if ident not in buffer_owner:
                    buffer_owner[ident] = name
                    buffers += nbytes
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
                differentiable=_is_floating(val),
                shares_params_of=shares,
                info={"module": path, "shapes": _shapes(val)},
            )
        )
        op_name_of[n.name] = name
        root[n.name] = ("op", name)
        for src_op, nbytes in preds.items():
            cap = g.ops[g.index[src_op]].output
            g.connect(src_op, name, min(nbytes, cap) if cap > 0 else nbytes)
        if shares is not None:
            g.colocate_ops([shares, name], g.colocate.get(g.index[shares], shares))
    if not g.ops:
        raise InputError(f"module {label}", "the exported graph has no compute ops", "export a model that computes something")
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
    base = _op_key(n.target)[1]
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


def _measure(ep: Any, inputs: Sequence[Any], repeats: int) -> dict[str, float]:
    """Mean CPU seconds per node over ``repeats`` runs (after one warm-up), torch profiler."""
    if not inputs:
        raise InputError("measure", "measuring needs the module and example inputs", "pass the module or a factory, not an ExportedProgram")
    gm = ep.graph_module
    args: list[Any] = []
    user = iter(inputs)
    consts = getattr(ep, "constants", {})
    for spec in ep.graph_signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            args.append(next(user))
        elif kind in ("PARAMETER", "BUFFER"):
            args.append(ep.state_dict[spec.target] if spec.target in ep.state_dict else consts[spec.target])
        elif kind == "CONSTANT_TENSOR":
            args.append(consts[spec.target])
        else:
            raise InputError("measure", f"cannot feed graph input of kind {kind}", "use measure=False")
    if any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args):
        raise InputError("measure", "the model has meta (shape-only) weights", "pass a real module or a factory for measure=True")
    interp = _ProfiledInterpreter(gm)
    with torch.no_grad():
        interp.run(*args)  # warm-up
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(max(1, repeats)):
                interp.run(*args)
    out: dict[str, float] = {}
    for ev in prof.key_averages():
        if ev.key.startswith("distplan::"):
            out[ev.key[len("distplan::") :]] = ev.cpu_time_total / max(1, ev.count) * 1e-6
    return out


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
    ExportedProgram. ``input_shapes``: one shape ``(8, 128)`` or one per input. Integer
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
    _require_torch()
    t0 = time.perf_counter()
    spec = device if isinstance(device, DeviceSpec) else catalogue_device(device)
    if isinstance(device, DeviceSpec):
        catalogue_device(spec.name)  # the cluster names catalogue types
    if cluster is None:
        cl = uniform_cluster(f"{n_devices}x{spec.name}", f"{n_devices}x {spec.name} on PCIe 3.0", spec.name, n_devices, PCIE3_X16, LAT_PCIE, "catalogue: PCIe 3.0 x16")
    else:
        cl = catalogue_cluster(cluster) if isinstance(cluster, str) else cluster
    cl = cl.with_memory_limit(memory_limit)
    ep, module, inputs, label = export_module(module_or_factory, input_shapes, measure=measure, input_dtypes=input_dtypes, precision=precision)
    t_export = time.perf_counter() - t0
    graph, fused = graph_from_export(ep, module, inputs, label=label, measure=measure, repeats=repeats, op_times=op_times)
    fwd_flops = graph.total_flops("forward")
    params = graph.total_params()
    n_forward = len(graph)
    if backward:
        graph = graph.training(optimizer)
    overrides = {spec.name: spec} if isinstance(device, DeviceSpec) else None
    doc = graph.to_document(cl, name or f"{label}-{cl.name}", None, None, overrides)
    doc["meta"] = {
        "source": f"torch.export of {label} (torch {torch.__version__})",
        "parameters": {
            "input_shapes": _normalise_shapes(input_shapes) if not isinstance(module_or_factory, torch.export.ExportedProgram) else None,
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
        "totals": {"forward_flops": fwd_flops, "param_bytes": params, "forward_ops": n_forward},
        "input_dtypes": [str(t.dtype).replace("torch.", "") for t in inputs],
        "linear_modules": linear_modules(module) if module is not None else [],
        "fused": fused,
        "import_seconds": {"export": t_export, "total": time.perf_counter() - t0},
    }
    return doc
