"""`PipelineInstance.minimum_memory` is computed once per instance (every classic schedule
checks it; its exhaustive search took seconds on 64 stages, review rev24b), and callers get
copies they may change."""

from __future__ import annotations

import numpy as np
import pytest

import distplan
from distplan.models import pipeline


def test_computed_once_and_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    real = pipeline._min_peak

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_min_peak", counted)
    inst = distplan.load_instance("pipeline-tessel-vshape")
    need, exact = inst.minimum_memory()
    first = len(calls)
    assert first > 0
    need[:] = -1.0
    exact[:] = False
    again, exact_again = inst.minimum_memory()
    assert len(calls) == first, "not searched again"
    assert (again >= 0).all() and exact_again.any(), "the cached value is not the caller's copy"
    fresh = distplan.load_instance("pipeline-tessel-vshape").minimum_memory()[0]
    assert np.array_equal(again, fresh)
