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
