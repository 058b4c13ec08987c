"""The dtensor target on meshes with an axis of size 1 (review rev29): a split along such
an axis splits nothing, so it reads as replicated there. A plan whose only non-batch splits
lie on a size-1 axis is data parallel and is refused as such (it was refused with a
ColwiseParallel message about the split it does not make); a plan whose tensor-parallel
axis has more than one device emits as on the mesh without the size-1 axis."""

from __future__ import annotations

import pytest

import distplan
from distplan.emit.dtensor import chosen_labels, dtensor_module
from distplan.errors import InputError
from distplan.instances.transformer import transformer


def gpt(mesh: object) -> object:
    return transformer(2, 32, 4, 8, 2, 256, ffn=64, mesh=mesh)


@pytest.mark.parametrize(("mesh", "formulation"), [((2, 1), "alpa_ilp"), ((1, 2), "tap"), ((2, 1), "megatron")])
def test_splits_only_on_a_size_one_axis_are_data_parallel(mesh: tuple[int, int], formulation: str) -> None:
    inst = gpt(mesh)
    res = distplan.solve(inst, formulation)
    ndim = len(mesh)
    one = mesh.index(1)
    labels = chosen_labels(inst, res.plan)
    assert all(lab[one] is None for lab in labels.values()) and len(next(iter(labels.values()))) == ndim
    with pytest.raises(InputError, match="data parallel") as got:
        distplan.emit(res, "dtensor", inst)
    assert "ColwiseParallel splits" not in str(got.value)


def test_a_size_one_outer_axis_emits_the_plan_of_the_inner_axis() -> None:
    flat, outer = gpt(2), gpt((1, 2))
    text_flat = dtensor_module(flat, distplan.solve(flat, "megatron").plan)
    text_outer = dtensor_module(outer, distplan.solve(outer, "megatron").plan)
    def styles(text: str) -> list[str]:  # (each line's comment names the op's strategy, S(b)S(v) on the 1x2 mesh)
        return [line.split("#")[0] for line in text.splitlines() if "Parallel(" in line]

    assert styles(text_flat) and styles(text_flat) == styles(text_outer)
    assert "tensor parallel on mesh axis 1" in text_outer
