"""Operator semantics from op type and shapes: loop labels, tensors and FLOPs of each op type.

The labels and tensors follow the loop-nest view of `distplan.models.sharding_costs` (see
its docstring for the cost model built on them). Units: bytes, FLOPs.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distplan.errors import InputError
from distplan.models.common import number
from distplan.models.sharding_costs import FLOAT_DTYPES, OP_TYPES, OpSemantics, TensorSem

#: FLOPs per output element of the normalizations
_NORM_FLOPS = {"layernorm": 8.0, "rmsnorm": 6.0, "softmax": 5.0}
#: the most elements the dims of one op may span (the product of the sizes of every dim
#: its tensors name): far above any real layer (a GPT-3 logits tensor spans ~1e11), and
#: low enough that every FLOP count, byte count, time and memory computed from it is a
#: finite float (a dim of 1e308 had overflowed: review rev13)
MAX_ELEMENTS = 1e30
#: FLOPs per element an elementwise op may take (``attrs.flops_per_element``), at most
MAX_FLOPS_PER_ELEMENT = 1e6


# -- semantics from op type and shapes ---------------------------------------------------

@dataclass(frozen=True)
class InputTensor:
    """An activation input as the consumer sees it: the producer's dims, dtype, gradient flag."""

    dims: tuple[str, ...]
    dtype: str
    grad: bool


def _check_dims(dims: Sequence[str], table: Mapping[str, int], path: str) -> None:
    seen: set[str] = set()
    for k, d in enumerate(dims):
        if d not in table:
            raise InputError(f"{path}[{k}]", f"unknown dimension {d!r}", f"declare it in graph.dims (known: {', '.join(table)})")
        if d in seen:
            raise InputError(f"{path}[{k}]", f"dimension {d!r} appears twice", "give each dimension of a tensor its own name")
        seen.add(d)


def make_semantics(
    op_type: str,
    inputs: Sequence[InputTensor],
    out: Sequence[str],
    params: Sequence[Sequence[str]],
    attrs: Mapping[str, Any],
    dtype: str,
    dims: Mapping[str, int],
    never_split: frozenset[str],
    path: str,
) -> OpSemantics:
    """Derive an op's loop labels, tensors and FLOPs from its type and dims (validating).

    ``path`` is the JSON path of the op for error messages.
    """
    out = tuple(out)
    _check_dims(out, dims, f"{path}.out")
    for k, p in enumerate(params):
        _check_dims(p, dims, f"{path}.params[{k}].dims")
    for k, t in enumerate(inputs):
        _check_dims(t.dims, dims, f"{path}.inputs[{k}]")
    spanned = dict.fromkeys([*out, *(d for p in params for d in p), *(d for t in inputs for d in t.dims)])
    span = math.prod(dims[d] for d in spanned)  # (exact: Python integers)
    if span > MAX_ELEMENTS:
        sizes = ", ".join(f"{d}={dims[d]}" for d in spanned)
        raise InputError(path, f"its dims ({sizes}) span {float(span):.3g} elements, beyond the largest taken, {MAX_ELEMENTS:g}", "give smaller sizes in graph.dims")
    for key in ("qkv_dim", "seq_dim", "head_dim", "class_dim"):
        if key in attrs and not (attrs[key] is None and key == "qkv_dim") and not isinstance(attrs[key], str):
            raise InputError(f"{path}.attrs.{key}", f"expected a dim name, got {attrs[key]!r}")

    def need_inputs(n: int | tuple[int, ...]) -> None:
        ok = len(inputs) in n if isinstance(n, tuple) else len(inputs) == n
        if not ok:
            raise InputError(f"{path}.inputs", f"a {op_type} op takes {n} activation input(s), got {len(inputs)}")

    def need_params(lo: int, hi: int) -> None:
        if not lo <= len(params) <= hi:
            want = str(lo) if lo == hi else f"{lo} to {hi}"
            raise InputError(f"{path}.params", f"a {op_type} op takes {want} parameter(s), got {len(params)}")

    def params_within_out(start: int) -> None:
        for k in range(start, len(params)):
            extra = [d for d in params[k] if d not in out]
            if extra:
                raise InputError(f"{path}.params[{k}].dims", f"dims {extra} are not output dims", "a bias/scale uses only output dims")

    def expect_out(expected: Sequence[str]) -> None:
        if tuple(expected) != out:
            raise InputError(f"{path}.out", f"a {op_type} op with these inputs produces dims {list(expected)}, not {list(out)}", f"write \"out\": {list(expected)}")

    size = dict(dims)
    out_grad = dtype in FLOAT_DTYPES and op_type != "input"

    def tensor(labels: Sequence[str], shape_dims: Sequence[str], dt: str, grad: bool) -> TensorSem:
        return TensorSem(tuple(labels), tuple(size[d] for d in shape_dims), dt, grad)

    def finish(
        labels: dict[str, int],
        in_t: Sequence[TensorSem],
        out_labels: Sequence[str],
        flops: float,
        *,
        splittable: Sequence[str] | None = None,
        saved: Sequence[TensorSem] = (),
        zero_cost: bool = False,
        follows: bool = False,
        saves_output: bool = True,
        param_labels: Sequence[Sequence[str]] | None = None,
    ) -> OpSemantics:
        cand = list(labels) if splittable is None else list(splittable)
        split = tuple(lab for lab in cand if lab not in never_split)
        plabels = params if param_labels is None else param_labels
        return OpSemantics(
            type=op_type,
            label_size=tuple(labels.items()),
            split_labels=split,
            inputs=tuple(in_t),
            output=TensorSem(tuple(out_labels), tuple(size[d] for d in out), dtype, out_grad),
            params=tuple(tensor(pl, p, dtype, True) for pl, p in zip(plabels, params)),
            flops=float(flops),
            saved=tuple(saved),
            zero_cost=zero_cost,
            follows=follows,
            saves_output=saves_output,
        )

    def union(*groups: Sequence[str]) -> dict[str, int]:
        labels: dict[str, int] = {}
        for g in groups:
            for d in g:
                labels.setdefault(d, size[d])
        return labels

    def plain_inputs() -> list[TensorSem]:
        return [tensor(t.dims, t.dims, t.dtype, t.grad) for t in inputs]

    if op_type == "input":
        need_inputs(0)
        need_params(0, 0)
        return finish(union(out), [], out, 0.0, zero_cost=True)

    if op_type in ("linear", "matmul"):
        need_inputs(1)
        need_params(1, 2)
        x, w = inputs[0].dims, tuple(params[0])
        if not any(d in w for d in x):
            raise InputError(f"{path}.params[0].dims", f"the weight {list(w)} shares no dimension with the input {list(x)}", "name the contracted dimension the same in both")
        expect_out([d for d in x if d not in w] + [d for d in w if d not in x])
        params_within_out(1)
        labels = union(x, w)
        return finish(labels, plain_inputs(), out, 2.0 * math.prod(labels.values()))

    if op_type == "bmm":
        need_inputs(2)
        need_params(0, 0)
        a, b = inputs[0].dims, inputs[1].dims
        missing = [d for d in out if d not in a and d not in b]
        if missing:
            raise InputError(f"{path}.out", f"dims {missing} come from neither input")
        labels = union(a, b)
        return finish(labels, plain_inputs(), out, 2.0 * math.prod(labels.values()))

    if op_type == "embedding":
        need_inputs(1)
        need_params(1, 2)
        ids, table = inputs[0].dims, tuple(params[0])
        if len(table) != 2:
            raise InputError(f"{path}.params[0].dims", f"an embedding table has 2 dims [vocab, hidden], got {list(table)}")
        vocab, hidden = table
        if vocab in ids or vocab in out:
            raise InputError(f"{path}.params[0].dims", f"the vocabulary dim {vocab!r} must appear only in the table")
        expect_out([*ids, hidden])
        params_within_out(1)
        labels = union(ids, table, out)
        return finish(labels, plain_inputs(), out, 0.0)

    if op_type == "attention":
        need_inputs((1, 3))
        q = inputs[0].dims
        if len(inputs) == 3 and not (inputs[1].dims == q and inputs[2].dims == q):
            raise InputError(f"{path}.inputs", "q, k and v must have the same dims")
        need_params(0, 0)
        qkv_dim = attrs.get("qkv_dim")
        if len(inputs) == 1:
            if qkv_dim not in q:
                raise InputError(f"{path}.attrs.qkv_dim", f"a fused attention input needs the dim holding q, k, v; got {qkv_dim!r}", f"name one of {list(q)}")
            o = tuple(d for d in q if d != qkv_dim)
        else:
            if qkv_dim is not None:
                raise InputError(f"{path}.attrs.qkv_dim", "only a single fused input has a qkv dim")
            o = q
        expect_out(o)
        seq = attrs.get("seq_dim", o[1] if len(o) > 1 else None)
        head = attrs.get("head_dim", o[-1] if o else None)
        if seq not in o or head not in o or seq == head:
            raise InputError(f"{path}.attrs", f"seq_dim {seq!r} and head_dim {head!r} must be two different output dims", f"choose among {list(o)}")
        for flag in ("causal", "flash"):
            if not isinstance(attrs.get(flag, False), bool):
                raise InputError(f"{path}.attrs.{flag}", f"expected true or false, got {attrs[flag]!r}")
        flash = bool(attrs.get("flash", False))
        kv_seq = seq + "'"
        labels = union(q)
        labels[kv_seq] = size[seq]
        if len(inputs) == 3:
            kv = tuple(kv_seq if d == seq else d for d in q)
            in_t = [tensor(q, q, inputs[0].dtype, inputs[0].grad)] + [tensor(kv, q, t.dtype, t.grad) for t in inputs[1:]]
            splittable = [d for d in o if d != head]
        else:
            in_t = plain_inputs()
            splittable = [d for d in o if d not in (head, seq)]  # k, v share the query's tensor
        saved: list[TensorSem] = []
        if not flash:
            prob_labels = tuple(d for d in o if d != head) + (kv_seq,)
            shape = tuple(size[d] for d in o if d != head) + (size[seq],)
            saved.append(TensorSem(prob_labels, shape, dtype, True))
        # FLOPs follow the Megatron convention (full score matrix, also when causal)
        flops = 4.0 * math.prod(size[d] for d in o) * size[seq]
        return finish(labels, in_t, o, flops, splittable=splittable, saved=saved)

    if op_type == "elementwise":
        need_inputs((1, 2, 3, 4))
        for k, t in enumerate(inputs):
            extra = [d for d in t.dims if d not in out]
            if extra:
                raise InputError(f"{path}.inputs[{k}]", f"input dims {extra} are not output dims", "elementwise inputs broadcast to the output")
        params_within_out(0)
        fpe = number(attrs.get("flops_per_element", 1.0), f"{path}.attrs.flops_per_element", at_most=MAX_FLOPS_PER_ELEMENT, unit="FLOPs")
        labels = union(out)
        return finish(labels, plain_inputs(), out, fpe * math.prod(labels.values()), follows=inputs[0].dims == out)

    if op_type in _NORM_FLOPS:
        need_inputs(1)
        if inputs[0].dims != out:
            raise InputError(f"{path}.out", f"a {op_type} keeps its input's dims {list(inputs[0].dims)}")
        params_within_out(0)
        if not out:
            raise InputError(f"{path}.out", f"a {op_type} normalizes along a dim; its input has none", "give the input a dim to normalize")
        axis = attrs.get("axis", [out[-1]])
        if isinstance(axis, str):
            axis = [axis]
        if not isinstance(axis, list) or not axis or any(a not in out for a in axis):
            raise InputError(f"{path}.attrs.axis", f"normalized dims must be output dims, got {axis!r}", f"e.g. [{out[-1]!r}]")
        labels = union(out)
        return finish(labels, plain_inputs(), out, _NORM_FLOPS[op_type] * math.prod(labels.values()), splittable=[d for d in out if d not in axis])

    if op_type == "loss":
        need_inputs(1)
        need_params(0, 0)
        logits = inputs[0].dims
        cls = attrs.get("class_dim", logits[-1] if logits else None)
        if cls not in logits:
            raise InputError(f"{path}.attrs.class_dim", f"{cls!r} is not a dim of the logits {list(logits)}")
        expect_out([d for d in logits if d != cls])
        labels = union(logits)
        return finish(labels, plain_inputs(), out, 5.0 * math.prod(labels.values()))

    if op_type in ("view", "reshape"):
        need_inputs(1)
        need_params(0, 0)
        src = inputs[0].dims
        groups = _reshape_groups([size[d] for d in src], [size[d] for d in out])
        if groups is None:
            raise InputError(f"{path}.out", f"cannot reshape {list(src)} into {list(out)}: element counts or factors differ")
        in_labels = [f"~i{k}" for k in range(len(src))]
        out_labels = [f"~o{k}" for k in range(len(out))]
        view_labels: dict[str, int] = {}
        view_split: list[str] = []
        for (i0, i1), (o0, o1) in groups:
            for k in range(i0, i1):
                view_labels[in_labels[k]] = size[src[k]]
            for k in range(o0, o1):
                view_labels[out_labels[k]] = size[out[k]]
            if i1 > i0 and o1 > o0:
                lead = out[o0]  # named after the view's own output dim
                in_labels[i0] = out_labels[o0] = lead
                view_labels.pop(f"~i{i0}", None)
                view_labels.pop(f"~o{o0}", None)
                view_labels[lead] = math.gcd(size[src[i0]], size[out[o0]])
                if src[i0] not in never_split and out[o0] not in never_split:
                    view_split.append(lead)
        in_t = [TensorSem(tuple(in_labels), tuple(size[d] for d in src), inputs[0].dtype, inputs[0].grad)]
        return OpSemantics(
            type=op_type,
            label_size=tuple(view_labels.items()),
            split_labels=tuple(view_split),
            inputs=tuple(in_t),
            output=TensorSem(tuple(out_labels), tuple(size[d] for d in out), dtype, out_grad),
            params=(),
            flops=0.0,
            zero_cost=True,
            follows=True,
            saves_output=False,
        )

    raise InputError(f"{path}.type", f"unknown op type {op_type!r}", f"use one of: {', '.join(OP_TYPES)}")


def _reshape_groups(src: Sequence[int], dst: Sequence[int]) -> list[tuple[tuple[int, int], tuple[int, int]]] | None:
    """Contiguous groups of source and target dims with equal products, or None."""
    if math.prod(src) != math.prod(dst):
        return None
    groups: list[tuple[tuple[int, int], tuple[int, int]]] = []
    i = j = 0
    while i < len(src) or j < len(dst):
        i0, j0 = i, j
        pi = pj = 1
        if i < len(src):
            pi *= src[i]
            i += 1
        if j < len(dst):
            pj *= dst[j]
            j += 1
        while pi != pj:
            if pi < pj and i < len(src):
                pi *= src[i]
                i += 1
            elif pj < pi and j < len(dst):
                pj *= dst[j]
                j += 1
            else:
                return None
        # trailing size-1 dims join the group
        while i < len(src) and src[i] == 1 and (j >= len(dst) or dst[j] != 1):
            i += 1
        while j < len(dst) and dst[j] == 1 and (i >= len(src) or src[i] != 1):
            j += 1
        groups.append(((i0, i), (j0, j)))
    return groups
