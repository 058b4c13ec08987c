"""`PipelineInstance.minimum_memory`: the least peak memory of one device's blocks over the
orders its dependencies allow, equal to a brute force over every order; searched once per
instance and per stage shape (its search over all block subsets took 1.5 s on 64 stages,
reviews rev24b and rev25), and callers get copies they may change."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.instances.pipelines import make_pipeline
from distplan.models import pipeline


def _brute_min_peak(mem: list[float], preds: list[int]) -> float:
    best = np.inf
    for order in itertools.permutations(range(len(mem))):
        placed, total, peak = 0, 0.0, 0.0
        for j in order:
            if preds[j] & placed != preds[j]:
                break
            placed |= 1 << j
            total += mem[j]
            peak = max(peak, total)
        else:
            best = min(best, peak)
    return float(best)


@st.composite
def _partial_orders(draw: st.DrawFn) -> tuple[list[float], list[int]]:
    k = draw(st.integers(1, 6))
    mem = draw(st.lists(st.sampled_from([-3.0, -1.0, -0.5, 0.0, 0.25, 1.0, 2.0, 4.0]), min_size=k, max_size=k))
    # an edge i -> j only for i < j keeps it acyclic; close it transitively like `reach`
    preds = [0] * k
    for j in range(k):
        for i in range(j):
            if draw(st.booleans()):
                preds[j] |= 1 << i | preds[i]
    return mem, preds


@settings(max_examples=150, deadline=None)
@given(_partial_orders())
def test_least_peak_equals_brute_force(order: tuple[list[float], list[int]]) -> None:
    mem, preds = order
    assert pipeline._min_peak(np.array(mem), tuple(preds)) == pytest.approx(max(0.0, _brute_min_peak(mem, preds)), abs=1e-12)


def test_a_long_chain_is_exact_and_a_wide_antichain_is_an_estimate() -> None:
    chain = tuple((1 << j) - 1 for j in range(200))  # block j after every earlier one
    mem = np.array([1.0, -1.0] * 100)
    assert pipeline._min_peak(mem, chain) == 1.0
    assert pipeline._min_peak(np.ones(17), (0,) * 17) is None  # 2**17 subsets
    assert pipeline._min_peak(np.array([2.0, -2.0] * 8), (0,) * 16) == 0.0  # 2**16: searched (frees first)


@pytest.fixture
def searches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """One entry per search `_min_peak` runs."""
    calls: list[int] = []
    real = pipeline._min_peak

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "_min_peak", counted)
    return calls


def test_devices_of_one_stage_shape_share_the_search(searches: list[int]) -> None:
    calls = searches
    inst = make_pipeline("interleaved", 16, 32, chunks=4)
    need, exact = inst.minimum_memory()
    assert exact.all() and len(calls) < inst.n_devices
    assert len(set(need.tolist())) <= len(calls)


def test_computed_once_and_copied(searches: list[int]) -> None:
    calls = searches
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
