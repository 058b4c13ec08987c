"""Review rev6b's cases for the memory-binding walk of tap: a budget just under the memory
of the memory-free plan (the Lagrangian search starts from that plan: a start above the
walk's least cost would give a bound above the optimum), and passes over fronts pruned by a
Lagrangian bound (each pass must compute its own tables to go: the first walk's tables kept
across passes gave a plan above the optimum with a bound above it)."""

from __future__ import annotations

import pytest
from test_tap_exact import tight

import distplan
from distplan.formulations.sharding import chain_dp


def _agrees_with_alpa_ilp(inst) -> None:  # type: ignore[no-untyped-def]
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    tap = distplan.solve(inst, "tap", mip_gap=1e-9)
    assert tap.objective == pytest.approx(alpa.objective, rel=1e-9)
    assert tap.bound is not None and tap.bound <= tap.objective and tap.bound <= alpa.objective


@pytest.mark.parametrize("frac", [0.9815, 0.995])
def test_budget_just_under_the_memory_free_plan(frac: float) -> None:
    _agrees_with_alpa_ilp(tight(13, 4, frac))


def test_passes_over_lagrangian_pruned_fronts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forces the pruned-front path with several passes (one-row first fronts, further bounds
    from the first step, a tiny first gap and no incumbent shortcut)."""
    monkeypatch.setattr(chain_dp, "FIRST_ROWS", 1)
    monkeypatch.setattr(chain_dp, "FURTHER_LABELS", 0)
    monkeypatch.setattr(chain_dp, "FIRST_GAP", 1e-7)
    monkeypatch.setattr(chain_dp, "INCUMBENT_GAP", 0.0)
    _agrees_with_alpa_ilp(tight(13, (2, 4), 0.093))
