"""`models.common.per_instance`: a value derived from an instance is computed once per
instance object (verify's solver-free bounds, alpa_ilp's least objective scale), and
another object, even an equal one, gets its own."""

from __future__ import annotations

from typing import Any

import distplan
from distplan.models.common import per_instance


def test_once_per_instance_object() -> None:
    calls: list[str] = []

    @per_instance
    def name_of(instance: Any) -> str:
        calls.append(instance.name)
        return instance.name

    a = distplan.load_instance("placement-small-1")
    b = distplan.load_instance("placement-small-1")
    assert [name_of(a), name_of(a), name_of(b), name_of(a)] == ["placement-small-1"] * 4
    assert calls == ["placement-small-1", "placement-small-1"]  # a once, b once
