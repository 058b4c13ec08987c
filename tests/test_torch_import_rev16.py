"""Importer fix of review rev16 D10: an in-place write through a view feeds the later readers of the tensor."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from distplan.instances.torch_import import import_torch  # noqa: E402


def edges(doc: dict[str, Any]) -> set[tuple[str, str]]:
    return {(e["src"], e["dst"]) for e in doc["graph"]["edges"]}


def edge_bytes(doc: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(e["src"], e["dst"]): e["bytes"] for e in doc["graph"]["edges"]}


def op_names(doc: dict[str, Any]) -> list[str]:
    return [o["name"] for o in doc["graph"]["ops"]]


class LinearThenWrite(nn.Module):
    """l (16 -> 16), an in-place write into its output y (the subclass's forward), then o
    (``reads`` features of y -> 4)."""

    reads = 16

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16)
        self.o = nn.Linear(self.reads, 4)


class WholeInPlace(LinearThenWrite):
    """y.mul_(3): the in-place op's result is what o reads (chained before the fix too)."""

    def forward(self, x: Any) -> Any:
        y = self.l(x)
        y.mul_(3.0)
        return self.o(y)


class SliceInPlace(LinearThenWrite):
    """y[:, :8] *= 3, then o reads y: ATen mul_ on a slice and copy_ into a slice of y."""

    def forward(self, x: Any) -> Any:
        y = self.l(x)
        y[:, :8] *= 3.0
        return self.o(y)


class ItemAssign(LinearThenWrite):
    """y[:, 0] = tanh(y[:, 1]), then o reads y."""

    def forward(self, x: Any) -> Any:
        y = self.l(x)
        y[:, 0] = torch.tanh(y[:, 1])
        return self.o(y)


class TwoWrites(LinearThenWrite):
    """Two writes into views of y (the second into a view taken before the first), then a reader of that view."""

    reads = 8

    def forward(self, x: Any) -> Any:
        y = self.l(x)
        v = y[:, 8:]
        y[:, :4] = torch.sigmoid(y[:, 4:8])
        v[:, 0] = torch.tanh(y[:, 0])
        return self.o(v)


def test_in_place_write_through_a_view_feeds_the_later_readers() -> None:
    """rev16 D10: the copy_ into a slice was a sink and o did not depend on it."""
    whole = import_torch(WholeInPlace(), (4, 16), backward=False)
    assert edges(whole) == {("l/linear", "mul_"), ("mul_", "o/linear_1")}  # unchanged

    for model, first in ((SliceInPlace(), "mul_"), (ItemAssign(), "tanh")):
        doc = import_torch(model, (4, 16), backward=False)
        assert op_names(doc) == ["l/linear", first, "copy_", "o/linear_1"]  # no op added or dropped
        got = edges(doc)
        assert ("copy_", "o/linear_1") in got, got  # the write reaches the reader of y
        assert ("l/linear", "o/linear_1") in got  # the rest of y still comes from the linear
        assert (first, "copy_") in got
        sinks = {o for o in op_names(doc)} - {s for s, _ in got}
        assert sinks == {"o/linear_1"}, sinks  # the write is no dead end
        written = edge_bytes(doc)[("copy_", "o/linear_1")]
        assert 0 < written <= edge_bytes(doc)[("l/linear", "o/linear_1")]  # the bytes written, not more
    # training: the reader's gradient flows back to the write
    train = import_torch(ItemAssign(), (4, 16))
    assert ("o/linear_1.grad", "copy_.grad") in edges(train)


def test_later_writes_depend_on_earlier_ones_and_views_see_them() -> None:
    doc = import_torch(TwoWrites(), (4, 16), backward=False)
    got = edges(doc)
    copies = [n for n in op_names(doc) if n.startswith("copy_")]
    assert len(copies) == 2, op_names(doc)
    first, second = copies
    assert (first, "tanh") in got  # tanh reads y[:, 0], written by the first copy_
    assert (first, second) in got  # the second write goes into y after the first
    assert (second, "o/linear_1") in got  # o reads the view v, written by the second
    assert {o for o in op_names(doc)} - {s for s, _ in got} == {"o/linear_1"}


class BufferWrite(nn.Module):
    """A write into a slice of a buffer, then a reader of the whole buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16)
        self.register_buffer("scale", torch.ones(16))

    def forward(self, x: Any) -> Any:
        self.scale[:4] += 1.0
        return self.l(x) * self.scale


def test_a_write_into_a_buffer_reaches_its_later_readers() -> None:
    doc = import_torch(BufferWrite(), (4, 16), backward=False)
    assert op_names(doc) == ["add_", "copy_", "l/linear", "mul"]
    assert edges(doc) == {("add_", "copy_"), ("copy_", "mul"), ("l/linear", "mul")}
    assert doc["graph"]["ops"][0]["memory"] > 0  # the buffer is still held (by the first op that reads it)


class BufferSliceRead(nn.Module):
    """A 1000 x 16 float32 buffer (64,000 bytes) first read through a slice of 4 rows."""

    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16)
        self.register_buffer("table", torch.ones(1000, 16))

    def forward(self, x: Any) -> Any:
        return self.l(x) + self.table[:4]


def test_a_buffer_first_read_through_a_slice_is_held_whole() -> None:
    """The op that first reads a buffer holds all of it: through a slice it held the
    slice's 256 bytes (review rev16)."""
    doc = import_torch(BufferSliceRead(), (4, 16), backward=False)
    add = next(o for o in doc["graph"]["ops"] if o["name"] == "add")
    assert add["memory"] >= 1000 * 16 * 4
