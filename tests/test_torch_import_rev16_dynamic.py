"""Importer fix of review rev16 D4: an ExportedProgram with dynamic dims (torch.export.Dim)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from distplan.errors import InputError  # noqa: E402
from distplan.instances.torch_import import graph_from_export, import_torch  # noqa: E402


class Dyn(nn.Module):
    """A relation between a dynamic dim and the computation (x.shape[0] // 2) and a second dynamic input."""

    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(16, 32)
        self.b = nn.Linear(64, 8)

    def forward(self, x: Any, y: Any) -> Any:
        h = torch.relu(self.a(x))
        h = h.reshape(h.shape[0] // 2, -1)
        return self.b(h) + y.sum()


@pytest.fixture(scope="module")
def dynamic_program() -> Any:
    from torch.export import Dim

    batch = Dim("batch", min=2, max=64)
    return torch.export.export(Dyn(), (torch.randn(4, 16), torch.randn(3, 5)), dynamic_shapes=({0: 2 * batch}, {0: Dim("n"), 1: Dim("m")}), strict=False)


def summary(doc: dict[str, Any]) -> tuple[Any, ...]:
    g = doc["graph"]
    return (
        [(o["name"], o["type"], o["flops"], o.get("params"), o.get("output")) for o in g["ops"]],
        sorted((e["src"], e["dst"], e["bytes"]) for e in g["edges"]),
        doc["meta"]["totals"]["forward_flops"],
    )


def test_dynamic_export_is_sized_by_the_input_shapes(dynamic_program: Any) -> None:
    """rev16 D4: a program with torch.export.Dim dims failed with a 'data-dependent shape' error."""
    model = dynamic_program.module()
    shapes = [(8, 16), (3, 5)]
    doc = import_torch(dynamic_program, shapes)
    static = torch.export.export(model, tuple(torch.randn(*s) for s in shapes), strict=False)
    assert summary(doc) == summary(import_torch(static, shapes))
    assert doc["meta"]["totals"]["forward_flops"] == 2 * 8 * 16 * 32 + 2 * 4 * 64 * 8
    assert doc["meta"]["parameters"]["input_shapes"] == [[8, 16], [3, 5]]
    # another size of the same program
    small = import_torch(dynamic_program, [(4, 16), (2, 2)], backward=False)
    assert small["meta"]["totals"]["forward_flops"] == 2 * 4 * 16 * 32 + 2 * 2 * 64 * 8
    assert still_dynamic(dynamic_program)
    # without input_shapes (graph_from_export): the example inputs' sizes, x = 2*batch included
    graph, _ = graph_from_export(dynamic_program)
    assert graph.total_flops("forward") == 2 * 4 * 16 * 32 + 2 * 2 * 64 * 8
    assert still_dynamic(dynamic_program)


def still_dynamic(program: Any) -> bool:
    """Every dim of the inputs x and y is still a symbol (sizing it must not specialise the program)."""
    dims = [d for n in program.graph.nodes if n.name in ("x", "y") for d in n.meta["val"].shape]
    return [str(d).isdigit() for d in dims] == [False, True, False, False]


@pytest.mark.parametrize(
    ("shapes", "words"),
    [
        ([(7, 16), (3, 5)], ["x", "dim 0", "2*s", "torch's symbols"]),  # x's dim is 2*batch: odd sizes impossible
        ([(8, 17), (3, 5)], ["x", "dim 1", "static size 16", "dynamic dims", "0..inf", "torch's symbols"]),  # (torch's int_oo: inf)
        ([(200, 16), (3, 5)], ["outside the range", "4..128"]),
        ([(8, 16)], ["1 shape(s)", "2 tensor input(s)", "x, y"]),
        ([(8, 16, 1), (3, 5)], ["x", "3 dims", "has 2"]),
    ],
)
def test_dynamic_export_with_shapes_it_cannot_take_is_a_named_error(dynamic_program: Any, shapes: Any, words: list[str]) -> None:
    with pytest.raises(InputError) as info:
        import_torch(dynamic_program, shapes, backward=False)
    msg = str(info.value)
    assert all(w in msg for w in words), msg
    assert "depends on the tensor values" not in msg and "int_oo" not in msg
    assert still_dynamic(dynamic_program)


class Masked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = nn.Linear(16, 16)

    def forward(self, x: Any) -> Any:
        y = self.l(x)
        return y[y > 0].sum()


def test_a_data_dependent_shape_in_a_dynamic_program_is_still_named_as_such() -> None:
    from torch.export import Dim

    program = torch.export.export(Masked(), (torch.randn(4, 16),), dynamic_shapes=({0: Dim("batch")},), strict=False)
    with pytest.raises(InputError, match="depends on the tensor values"):
        import_torch(program, (8, 16), backward=False)


def test_static_export_with_other_shapes_is_a_named_error() -> None:
    program = torch.export.export(nn.Linear(16, 8), (torch.randn(4, 16),), strict=False)
    assert len(import_torch(program, (4, 16), backward=False)["graph"]["ops"]) == 1
    with pytest.raises(InputError) as info:
        import_torch(program, (8, 16), backward=False)
    assert "static size 4" in str(info.value) and "torch.export.Dim" in str(info.value)
