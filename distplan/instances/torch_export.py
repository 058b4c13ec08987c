"""Export a PyTorch model and read its ATen graph (extra ``torch``): the torch side of the importer.

`export_module` runs ``torch.export`` (a factory under the meta device unless measuring),
`FlopInterpreter` counts FLOPs per node with ``torch.utils.flop_counter`` on shape-only
meta tensors, `measure_seconds` times every node on this machine's CPU with the torch profiler
(seconds), and the op tables say which ATen ops are views, metadata or memory-bound.
`distplan.instances.torch_import` builds the placement instance from what this reads.
torch is imported when this module is loaded (the importer and the CLI load it lazily: the core
never needs torch); without it ``torch`` is None and `require_torch` names the extra.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import logging
import operator
import re
import statistics
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from distplan.errors import InputError

try:  # the extra is optional: everything else in distplan works without it
    import torch
    import torch.fx
    from torch.utils._pytree import tree_flatten, tree_map
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


def require_torch() -> None:
    if torch is None:
        raise InputError("torch", "PyTorch is not installed", "pip install 'distplan[torch]'")


def op_key(target: Any) -> tuple[str, str]:
    """(full name like 'aten.addmm.default', base name like 'addmm') of a node target."""
    if target is operator.getitem:
        return "getitem", "getitem"
    name = str(target)
    base = getattr(target, "_opname", None) or getattr(target, "__name__", name)
    return name, str(base)


def tensor_bytes(value: Any) -> float:
    leaves, _ = tree_flatten(value)
    total = 0
    for t in leaves:
        if isinstance(t, torch.Tensor):
            total += t.numel() * t.element_size()
    return float(total)


def tensor_shapes(value: Any) -> list[list[int]]:
    leaves, _ = tree_flatten(value)
    return [list(map(int, t.shape)) for t in leaves if isinstance(t, torch.Tensor)]


def is_floating(value: Any) -> bool:
    leaves, _ = tree_flatten(value)
    return any(isinstance(t, torch.Tensor) and (t.is_floating_point() or t.is_complex()) for t in leaves)


def module_path(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return ""
    path = list(stack.values())[-1][0]
    for prefix in ("L['self'].", "L__self__.", "L['self']"):
        if path.startswith(prefix):
            path = path[len(prefix) :]
    return str(path)


def module_type(node: Any) -> str:
    stack = node.meta.get("nn_module_stack") or {}
    return str(list(stack.values())[-1][1]) if stack else ""


def to_meta(x: Any) -> Any:
    if isinstance(x, torch.Tensor) and x.device.type != "meta":
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


class FlopInterpreter(torch.fx.Interpreter if torch is not None else object):  # type: ignore[misc]
    """Runs an exported graph on shape-only meta tensors, recording FLOPs and the value of
    every node. ``binding`` maps the symbols of a dynamic export's input dims to sizes
    (`input_binding`): a node whose shape-only kernel fails takes its exported shape with the
    symbols replaced."""

    def __init__(self, gm: Any, counter: Any, binding: Mapping[Any, int] | None = None):
        super().__init__(gm)
        self.extra_traceback = False  # errors raised here are one-line InputErrors
        self.counter = counter
        self.binding: dict[Any, int] = dict(binding or {})
        self.flops: dict[str, float] = {}
        self.values: dict[str, Any] = {}  # node -> its shape-only value (concrete shapes)

    def run_node(self, n: Any) -> Any:
        out = self._run_node(n)
        self.values[n.name] = out
        return out

    def _run_node(self, n: Any) -> Any:
        if n.op != "call_function":
            return super().run_node(n)
        full = op_key(n.target)[0]
        val = n.meta.get("val")
        path = module_path(n)
        where = f"module {path} ({module_type(n)})" if path else "the top-level module"
        if data_dependent(val):  # x[mask], nonzero, unique: the meta kernel may run, the size stays unknown
            raise _data_dependent_error(n, full, where, "its traced size is a symbol of the data")
        args, kwargs = self.fetch_args_kwargs_from_env(n)
        args = tree_map(to_meta, args)
        kwargs = {k: (torch.device("meta") if k == "device" and v is not None else tree_map(to_meta, v)) for k, v in kwargs.items()}
        mixed_dtypes(n, full, where, args)
        before = self.counter.get_total_flops()
        try:
            out = n.target(*args, **kwargs)
        except Exception as exc:  # no shape-only kernel: a data-dependent output shape, or an op without a meta kernel
            if not any(isinstance(t, torch.Tensor) for t in tree_flatten(val)[0]):
                raise InputError(
                    f"graph node {n.name}",
                    f"op {full} in {where} cannot run on shape-only tensors ({first_line(exc)}) and its export recorded no output shape",
                    "use measure=True (CLI: --measure), or rewrite the op so that torch.export records its output",
                ) from None
            out = concrete(val, self.binding)  # the exported output's shape; no FLOPs counted: its time must come from op_times / measure
            self.flops[n.name] = 0.0
            return out
        try:
            self.flops[n.name] = float(self.counter.get_total_flops() - before)
        except Exception as exc:  # FLOPs that are a symbol of the data (torch's data-dependent guard)
            raise _data_dependent_error(n, full, where, first_line(exc)[:160]) from None
        return out


def _data_dependent_error(n: Any, full: str, where: str, detail: str) -> InputError:
    return InputError(
        f"graph node {n.name}",
        f"op {full} in {where} has an output shape that depends on the tensor values ({detail}); "
        "the shape-only cost pass cannot size it or the ops after it (--op-time gives a time, not a shape)",
        "keep shapes a function of the input shapes, e.g. torch.where(mask, x, 0) instead of x[mask], topk instead of nonzero",
    )


#: ATen ops whose CPU and CUDA kernels refuse operands of different dtypes ("mat1 and mat2 must
#: have the same dtype"); their meta kernels do not check, so a shape-only trace would cost a
#: model that cannot run (an int64 input into nn.Linear)
SAME_DTYPE_OPS = _names("mm addmm bmm baddbmm matmul linear conv1d conv2d conv3d convolution _convolution conv_transpose1d conv_transpose2d conv_transpose3d")


def mixed_dtypes(n: Any, full: str, where: str, args: Sequence[Any]) -> None:
    """Refuses a matrix product or convolution whose tensor operands differ in dtype."""
    if op_key(n.target)[1] not in SAME_DTYPE_OPS:
        return
    dtypes = sorted({str(a.dtype).replace("torch.", "") for a in args if isinstance(a, torch.Tensor)})
    if len(dtypes) > 1:
        raise InputError(
            f"graph node {n.name}",
            f"op {full} in {where} takes operands of dtypes {' and '.join(dtypes)}; it runs only on one dtype",
            "give the inputs the model's dtype (--input-dtype, Python: input_dtypes=...)",
        )


def data_dependent(value: Any) -> bool:
    """A traced value whose shape holds an unbacked symbol (a size known only from the data:
    nonzero, x[mask], unique); the symbols of a dynamic input dim (``torch.export.Dim``) are not."""
    leaves, _ = tree_flatten(value)
    return any(isinstance(t, torch.Tensor) and any(_unbacked(d) for d in t.shape) for t in leaves)


def _unbacked(d: Any) -> bool:
    if isinstance(d, int):
        return False
    try:
        from torch.fx.experimental.symbolic_shapes import free_unbacked_symbols

        return bool(free_unbacked_symbols(d))
    except Exception:  # pragma: no cover - an older torch: every symbol counts as data-dependent
        return True


def _expr(d: Any) -> Any:
    """The sympy expression of a symbolic size (None for a concrete int)."""
    node = getattr(d, "node", None)
    return getattr(node, "expr", None) if node is not None else None


def _evaluate(d: Any, binding: Mapping[Any, int]) -> Any:
    """A size with the bound symbols replaced: an int, or ``d`` unchanged if a symbol is unbound."""
    if isinstance(d, int):
        return d
    expr = _expr(d)
    if expr is None:
        return d
    got = expr.xreplace(dict(binding))  # a plain int when expr is a bound symbol itself
    if isinstance(got, int) or getattr(got, "is_Integer", False):
        return int(got)
    return d


def concrete(value: Any, binding: Mapping[Any, int]) -> Any:
    """Shape-only meta tensors (and ints) for a traced value, symbolic sizes evaluated under ``binding``."""

    def one(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and not all(isinstance(d, int) for d in x.shape):
            shape = [_evaluate(d, binding) for d in x.shape]
            if all(isinstance(d, int) for d in shape):
                return torch.empty(shape, dtype=x.dtype, device="meta")
        if isinstance(x, torch.SymInt):
            return _evaluate(x, binding)
        return to_meta(x)

    return tree_map(one, value)


def symbolic_dims(value: Any) -> list[tuple[int, Any]]:
    """(axis, size) of every symbolic size of a traced tensor."""
    if not isinstance(value, torch.Tensor):
        return []
    return [(k, d) for k, d in enumerate(value.shape) if not isinstance(d, int)]


def _range_text(ep: Any, expr: Any) -> str:
    vr = (getattr(ep, "range_constraints", None) or {}).get(expr)
    if vr is None:
        return ""
    return f", {_bound_text(vr.lower)}..{_bound_text(vr.upper)}"


def _bound_text(bound: Any) -> str:
    """A range bound of a dynamic dim as a user reads it: torch's unbounded ``int_oo`` as inf."""
    text = str(bound)
    return {"int_oo": "inf", "-int_oo": "-inf", "oo": "inf", "-oo": "-inf"}.get(text, text)


#: what a symbol in a dynamic dim's text is (torch names them s0, s77, ...; an exported
#: program keeps no torch.export.Dim names to say instead)
SYMBOLS_HINT = "s<n> are torch's symbols for the program's dynamic dims (an ExportedProgram keeps no torch.export.Dim names)"


def _with_symbols_hint(hint: str, message: str) -> str:
    """``hint``, and what torch's symbols are when ``message`` shows one."""
    return f"{hint}; {SYMBOLS_HINT}" if re.search(r"\bs\d+\b", message) else hint


def input_binding(ep: Any, user_inputs: Sequence[tuple[str, Any]], shapes: Sequence[Sequence[int]] | None) -> dict[Any, int]:
    """The sizes of the symbolic dims of an ExportedProgram's inputs (``torch.export.Dim``):
    solved from ``shapes`` (one per tensor input, in order), or the example inputs' sizes when
    ``shapes`` is None; {} for a static program whose inputs have ``shapes``. ``user_inputs``:
    (name, traced value) of the tensor inputs. A shape that does not fit (count, rank, a static
    size, a dim's range or a relation between dims) is an `InputError` naming the input and dim."""
    dyn = [(name, k, d) for name, val in user_inputs for k, d in symbolic_dims(val)]

    def describe(name: str, k: int, d: Any) -> str:
        return f"{name} dim {k} ({_expr(d)}{_range_text(ep, _expr(d))})"

    if shapes is None:  # the example inputs' sizes
        example: list[list[int]] = []
        for name, val in user_inputs:
            example.append([])
            for k, d in enumerate(val.shape):
                hint = d if isinstance(d, int) else getattr(getattr(d, "node", None), "hint", None)
                if hint is None:
                    raise InputError(
                        "ExportedProgram",
                        f"input {describe(name, k, d)} is dynamic and has no example size",
                        f"give input_shapes (CLI: --input-shape) to size the dynamic dims; {SYMBOLS_HINT}",
                    )
                example[-1].append(int(hint))
        shapes = example
    if len(shapes) != len(user_inputs):
        raise InputError(
            "input_shapes",
            f"{len(shapes)} shape(s) for an ExportedProgram with {len(user_inputs)} tensor input(s) ({', '.join(n for n, _ in user_inputs)})",
            "give one shape per tensor input, in order",
        )
    binding: dict[Any, int] = {}
    pending: list[tuple[str, int, Any, int]] = []
    for (name, val), shape in zip(user_inputs, shapes):
        exported = [d if isinstance(d, int) else str(_expr(d)) for d in val.shape]
        if len(shape) != len(val.shape):
            raise InputError(f"input_shapes for {name}", f"{list(shape)} has {len(shape)} dims; the program's input {name} has {len(val.shape)}: {exported}", "give a shape of that rank")
        for k, (d, want) in enumerate(zip(val.shape, shape)):
            if isinstance(d, int):
                if d != want:
                    hint = "export with a dynamic dim (torch.export.Dim) to import it at another size" if not dyn else f"the dynamic dims are {', '.join(describe(*x) for x in dyn)}"
                    message = f"dim {k} is {want}, but the program was exported with the static size {d} ({exported})"
                    raise InputError(f"input_shapes for {name}", message, _with_symbols_hint(hint, message + hint))
                continue
            expr = _expr(d)
            if expr is not None and expr.is_Symbol:
                if expr in binding and binding[expr] != want:
                    raise InputError(
                        f"input_shapes for {name}",
                        f"dim {k} is {want}, but it is the dynamic dim {expr}, already sized {binding[expr]} by another input",
                        f"give equal sizes for the dims the program ties together; {SYMBOLS_HINT}",
                    )
                binding[expr] = int(want)
            else:
                pending.append((name, k, d, int(want)))
    import sympy  # a dependency of torch

    for _ in range(len(pending)):  # dims like 2*s0: solve for a single unbound symbol
        for _name, _k, d, want in pending:
            expr = _expr(d)
            free = [s for s in expr.free_symbols if s not in binding] if expr is not None else []
            if len(free) == 1:
                sols = [v for v in sympy.solve(sympy.Eq(expr.xreplace(binding), want), free[0]) if getattr(v, "is_integer", False)]
                if sols:
                    binding[free[0]] = int(sols[0])
    for name, val in user_inputs:
        for k, d in symbolic_dims(val):
            want = shapes[[n for n, _ in user_inputs].index(name)][k]
            got = _evaluate(d, binding)
            if not isinstance(got, int) or got != want:  # (a SymInt compared would specialise the program)
                message = f"dim {k} is {want}, which the dynamic dim {describe(name, k, d)} cannot take"
                raise InputError(f"input_shapes for {name}", message, _with_symbols_hint("give a size the exported program allows", message))
    for expr, vr in (getattr(ep, "range_constraints", None) or {}).items():
        if not expr.free_symbols or not all(s in binding for s in expr.free_symbols):
            continue
        got = expr.xreplace(binding)
        try:
            outside = bool(got < vr.lower) or bool(got > vr.upper)
        except TypeError:  # pragma: no cover - an unorderable bound
            outside = False
        if outside:
            where = ", ".join(describe(n, k, d) for n, k, d in dyn if _expr(d) == expr or expr.free_symbols & _expr(d).free_symbols) or str(expr)
            message = f"{expr} = {got} is outside the range {_bound_text(vr.lower)}..{_bound_text(vr.upper)} the program was exported for ({where})"
            raise InputError("input_shapes", message, _with_symbols_hint("give sizes in the exported range, or export with a wider torch.export.Dim", message))
    return binding


#: Python functions an exported graph calls on symbolic sizes (``x.shape[0] // 2``): no kernel
def symbolic_arithmetic(target: Any) -> bool:
    if getattr(target, "__module__", None) in ("_operator", "operator", "math"):
        return target is not operator.getitem
    return any(target is getattr(torch, f, None) for f in ("sym_int", "sym_float", "sym_max", "sym_min", "sym_not", "sym_sqrt", "sym_ite", "sym_sum"))


def _schema_arg(n: Any, k: int, arg: Any) -> Any:
    if not arg.kwarg_only and k < len(n.args):
        return n.args[k]
    return n.kwargs.get(arg.name)


def written_args(n: Any) -> list[Any]:
    """The graph nodes an op writes in place (schema ``Tensor(a!)``: ``mul_``'s self,
    ``copy_``'s destination, an ``out=`` tensor, batch norm's running statistics)."""
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return []
    out = []
    for k, arg in enumerate(schema.arguments):
        info = arg.alias_info
        if info is None or not info.is_write:
            continue
        out += [a for a in tree_flatten(_schema_arg(n, k, arg))[0] if isinstance(a, torch.fx.Node)]
    return out


def aliased_arg(n: Any) -> Any:
    """The graph node whose memory an op returns (an in-place op's self, an ``out=`` tensor), or None."""
    schema = getattr(n.target, "_schema", None)
    if schema is None or not schema.returns or schema.returns[0].alias_info is None:
        return None
    sets = set(schema.returns[0].alias_info.before_set)
    for k, arg in enumerate(schema.arguments):
        if arg.alias_info is not None and sets & set(arg.alias_info.before_set):
            a = _schema_arg(n, k, arg)
            return a if isinstance(a, torch.fx.Node) else None
    return None


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


def normalise_shapes(input_shapes: Any) -> list[list[int]]:
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


def lookup_time(op_times: Mapping[str, float], full: str, base: str, matched: set[str] | None = None) -> float | None:
    """The time (seconds per call) ``op_times`` gives the op ``full`` (``aten.linear.default``),
    by its full name, its name without the overload (``aten.linear``) or its base name
    (``linear``); the key used is added to ``matched``."""
    for key in (full, full.rsplit(".", 1)[0], base):
        if key in op_times:
            if matched is not None:
                matched.add(key)
            return float(op_times[key])
    return None


def first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` of an exception (at most 300 characters; a
    syntax error's message without its file and line)."""
    text = str(exc.msg if isinstance(exc, SyntaxError) and exc.msg else exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


def _factory_label(factory: Any) -> str:
    name = getattr(factory, "__qualname__", None) or repr(factory)
    try:
        where = inspect.getsourcefile(factory)
    except TypeError:
        where = None
    return f"{where}:{name}" if where else name


def call_factory(factory: Any) -> Any:
    """``factory()``; an exception it raises is an `InputError` naming the factory (its file
    and name) with the exception's first line (the original is the error's cause)."""
    try:
        return factory()
    except InputError:
        raise
    except Exception as exc:
        raise InputError(f"factory {_factory_label(factory)}", f"raised {first_line(exc)}", "fix the factory; call it in Python to see the traceback") from exc


#: torch loggers that print a whole traceback for an error `export_module` reports in one line
_NOISY_LOGGERS = ("torch._subclasses.fake_tensor", "torch.export", "torch._export", "torch._dynamo")


@contextmanager
def _quiet_torch_logs() -> Iterator[None]:
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def export_module(
    module_or_factory: Any, input_shapes: Any, *, measure: bool = False, input_dtypes: Any = None, precision: str | None = None, training: bool = False
) -> tuple[Any, Any, list[Any], str]:
    """(ExportedProgram, module or None, example inputs, model label). A factory is called
    under the meta device unless ``measure`` (then real weights are needed). The module is
    traced in train mode with ``training`` (dropout, batch statistics: the graph a training
    step runs), else in eval mode, measured or not. The inputs go on the device of the
    module's parameters, else of its buffers; tensors that ``forward`` creates without a
    ``device=`` (``torch.arange(n)``) are created there too."""
    require_torch()
    if isinstance(module_or_factory, torch.export.ExportedProgram):
        ep = module_or_factory
        return ep, None, [], "ExportedProgram"
    shapes = normalise_shapes(input_shapes)
    if isinstance(module_or_factory, torch.nn.Module):
        module = module_or_factory
    elif callable(module_or_factory):
        if measure:
            module = call_factory(module_or_factory)
        else:
            try:
                with torch.device("meta"):
                    module = module_or_factory()
            except Exception:  # a factory that cannot run on meta (loads files, ...) builds real weights
                module = call_factory(module_or_factory)
        if isinstance(module, torch.export.ExportedProgram):  # a program the user exported (dynamic shapes, own tracing)
            return module, None, [], "ExportedProgram"
        if not isinstance(module, torch.nn.Module):
            raise InputError("module", f"the factory returned {type(module).__name__}, not a torch.nn.Module or a torch.export.ExportedProgram", "return the model (or its ExportedProgram) from the factory")
    else:
        raise InputError("module", f"{module_or_factory!r} is neither a torch.nn.Module nor a factory", "pass a module or a zero-argument function returning one")
    label = type(module).__qualname__
    if precision is not None:
        module = module.to(_parse_dtype(precision, "precision"))
    config = getattr(module, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        config.use_cache = False  # Hugging Face caches are not exportable tensor trees
    module = module.train(training)
    dev = next((t.device for t in itertools.chain(module.parameters(), module.buffers())), torch.device("cpu"))
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
    factories = torch.device("meta") if dev.type == "meta" else contextlib.nullcontext()
    try:
        with _quiet_torch_logs(), factories:  # the error below says it in one line; forward's factories on meta
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
        if "DeviceMismatch" in type(exc).__name__ or "same device" in first:
            hint = (
                f"create tensors in forward() on the input's device (device=x.device, or register them as buffers); "
                f"the model is traced on {dev.type}" + (" (shape-only weights)" if dev.type == "meta" else "")
            )
        else:
            hint = (
                "make forward() traceable: no Python branches on tensor values, no unsupported outputs "
                "(return tensors or tuples/dicts of tensors); or export it yourself (torch.export.export) and pass the ExportedProgram, or return it from the factory"
            )
        raise InputError(f"module {label}", f"torch.export cannot trace it ({type(exc).__name__}: {first[:300]})", hint) from exc
    return ep, module, inputs, label


def program_inputs(ep: Any) -> list[Any]:
    """The traced values of an ExportedProgram's user inputs (tensors), in order."""
    user = set(ep.graph_signature.user_inputs)
    return [n.meta["val"] for n in ep.graph.nodes if n.op == "placeholder" and n.name in user and isinstance(n.meta.get("val"), torch.Tensor)]


def measure_seconds(ep: Any, inputs: Sequence[Any], repeats: int) -> dict[str, float]:
    """Median CPU seconds per node over ``repeats`` runs (after one warm-up; the median keeps
    one run slowed by another process out), torch profiler."""
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
    runs: dict[str, list[float]] = {}
    with torch.no_grad():
        try:
            interp.run(*args)  # warm-up
        except Exception as exc:  # the model cannot run on these inputs (a dtype or value the shape-only trace let through)
            dtypes = ", ".join(str(t.dtype).replace("torch.", "") for t in inputs if isinstance(t, torch.Tensor))
            raise InputError(
                "measure",
                f"the model fails on real inputs of dtype {dtypes} ({type(exc).__name__}: {first_line(exc)[:200]})",
                "give inputs it can run on (--input-dtype, --input-shape), or drop --measure",
            ) from None
        for _ in range(max(1, repeats)):
            with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
                interp.run(*args)
            for ev in prof.key_averages():
                if ev.key.startswith("distplan::"):
                    runs.setdefault(ev.key[len("distplan::") :], []).append(ev.cpu_time_total / max(1, ev.count) * 1e-6)
    return {name: float(statistics.median(times)) for name, times in runs.items()}
