"""alpa_ilp's memory shortfall lists the three largest needs, equal ones in graph order:
it sorted ties by op name descending, so twelve equal layers named ``l9`` first (review
rev24b)."""

from __future__ import annotations

import pytest

import distplan
from distplan.errors import InfeasibleError
from distplan.instances.transformer import transformer


def test_equal_needs_in_graph_order() -> None:
    inst = transformer(12, 1024, 16, 512, 8, 32000, mesh=4, memory=0.5)
    with pytest.raises(InfeasibleError) as err:
        distplan.solve(inst, "alpa_ilp")
    largest = str(err.value).split("Largest needs: ")[1]
    assert [part.rsplit(" ", 2)[0] for part in largest.split(", ")] == ["head", "embed", "l0.fc1"]


@pytest.mark.parametrize("formulation", ["alpa_ilp", "tap"])
def test_the_budget_is_named_as_the_instance_sets_it(formulation: str) -> None:
    """Review rev26: "mesh of A100-80GB ... it has 60.000 GB" read as the device's memory
    when the instance's mesh.memory set 60 GB."""
    inst = transformer(12, 1024, 16, 512, 8, 32000, mesh=4, memory=1e9)  # (bytes per device)
    with pytest.raises(InfeasibleError, match=r"its budget is 1\.000 GB \(mesh\.memory\)"):
        distplan.solve(inst, formulation)
    with pytest.raises(InfeasibleError, match=r"its budget is [\d.]+ GB \(the V100's memory\)"):
        distplan.solve(transformer(96, 12288, 96, 2048, 64, 50000, mesh=2, device="V100"), formulation)
