"""The exact residue search of Tessel's repetend (`residue.py`): its refutations and
repetends against the fixed-period MILP probe, valid unrolled schedules, the least flat
length against the flat-length MILP (issue 16)."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distplan.formulations.pipeline.modulo import cyclic_blocks, steady_memory
from distplan.formulations.pipeline.repetend import DEFAULTS, REPETEND, Repetend, probe_period
from distplan.formulations.pipeline.residue import residue_search
from distplan.formulations.registry import RunContext
from distplan.instances.pipelines import make_pipeline, tessel_case
from distplan.models.pipeline import PipelineInstance, evaluate, make_plan
from distplan.solvers.base import SolveOptions, get_backend


def _ctx() -> RunContext:
    return RunContext(get_backend("highs"), SolveOptions(time_limit=30))


def _valid(inst: PipelineInstance, sigma: np.ndarray, period: float, offsets: int) -> bool:
    """The repetend fits its offsets, its steady-state memory fits, and it unrolls to a
    schedule the evaluator accepts."""
    cy = cyclic_blocks(inst, 1)
    if float((sigma + cy.dur).max()) > offsets * period + 1e-9 or sigma.min() < -1e-9:
        return False
    mem = steady_memory(cy, sigma, period)
    for d in range(inst.n_devices):
        on = cy.mask[:, d] & (cy.mem > 0)
        if on.any() and mem[on, d].max() > inst.capacity[d] + 1e-9:
            return False
    start = Repetend(sigma, float(period), None, False, offsets, 1, 0.0).unroll(inst)
    return evaluate(inst, make_plan(inst, start)).feasible


@pytest.mark.parametrize("shape,memory,offsets,refuted,period", [("nn", 5, 6, 8, 9), ("nn", 4, 5, 8, 9), ("m", 4, 5, 6, 7), ("nn", 6, 7, None, 8), ("x", 4, 3, None, 8)])
def test_residue_search_refutes_and_finds(shape: str, memory: float, offsets: int, refuted: int | None, period: int) -> None:
    inst = tessel_case(shape, memory, 8)
    cy = cyclic_blocks(inst, 1)
    if refuted is not None:
        assert residue_search(cy, inst, offsets, refuted, node_limit=200_000).status == "infeasible"
    found = residue_search(cy, inst, offsets, period, node_limit=200_000)
    assert found.status == "found" and found.sigma is not None
    assert _valid(inst, found.sigma, period, offsets)


def test_fractional_period_on_scaled_time() -> None:
    """A period of 8/3 (integral data, comm delay 2): the residue search works in thirds."""
    inst = make_pipeline("v", 2, 8, forward_time=1.0, backward_time=1.0, comm_delay=2.0, memory_capacity=3.0)
    cy = cyclic_blocks(inst, 1)
    found = residue_search(cy, inst, 6, Fraction(8, 3), node_limit=200_000)
    assert found.status == "found" and found.sigma is not None
    assert _valid(inst, found.sigma, 8 / 3, 6)
    assert residue_search(cy, inst, 6, Fraction(5, 2), node_limit=200_000).status == "infeasible"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    shape=st.sampled_from(["v", "x", "m", "k", "nn"]),
    f=st.integers(1, 2),
    b=st.integers(1, 3),
    w=st.sampled_from([None, 1]),
    cap=st.integers(1, 4),
    comm=st.sampled_from([0.0, 1.0]),
    extra=st.integers(0, 2),
    offsets=st.integers(2, 5),
)
def test_residue_search_agrees_with_the_milp_probe(shape: str, f: int, b: int, w: int | None, cap: int, comm: float, extra: int, offsets: int) -> None:
    """Whenever the residue search decides, the fixed-period MILP agrees (a refutation is
    never a repetend the MILP finds, a repetend is valid)."""
    kw = {"weight_time": float(w), "forward_memory": 2.0} if w is not None else {}
    inst = make_pipeline(shape, 2 if shape != "nn" else 3, 4, forward_time=float(f), backward_time=float(b), comm_delay=comm, memory_capacity=float(cap) * (2 if w else 1), **kw)
    cy = cyclic_blocks(inst, 1)
    period = int(np.ceil((cy.dur @ cy.mask).max())) + extra
    res = residue_search(cy, inst, offsets, period, node_limit=50_000)
    if res.status == "undecided":
        return
    sigma, refuted = probe_period(inst, _ctx(), {**DEFAULTS, "offsets": offsets}, float(period))
    if res.status == "found":
        assert res.sigma is not None and _valid(inst, res.sigma, period, offsets)
        assert not refuted
    else:
        assert sigma is None


@pytest.mark.parametrize("shape,memory,offsets,period", [("m", 5, 6, 6), ("k", 4, 3, 6), ("x", 4, 3, 8), ("m", 4, 5, 7)])
def test_least_flat_length_matches_the_milp(shape: str, memory: float, offsets: int, period: int) -> None:
    inst = tessel_case(shape, memory, 8)
    cy = cyclic_blocks(inst, 1)
    res = residue_search(cy, inst, offsets, period, minimize_length=True, node_limit=500_000)
    assert res.status == "found" and res.least_length and res.length is not None
    model, _ = REPETEND.build(inst, {**DEFAULTS, "offsets": offsets, "_t": float(period)}, name="flat")
    out = _ctx().solve_model(model)
    assert out.termination.value == "optimal"
    assert res.length == pytest.approx(out.objective * period, abs=1e-6)


def test_rotated_greedy_variants_are_valid_and_never_refute() -> None:
    """The variants `tessel._pick_repetend` draws (rotated delay orders, greedy memory
    pruning) are valid repetends; the greedy search claims no refutation."""
    inst = tessel_case("nn", 5, 8)
    cy = cyclic_blocks(inst, 1)
    rng = np.random.default_rng(3)
    keys = set()
    for _ in range(8):
        rot = rng.integers(0, 9, cy.n).tolist()
        res = residue_search(cy, inst, 6, 9, rotate=rot, greedy=True, node_limit=2_000)
        assert res.status in ("found", "undecided")
        if res.sigma is not None:
            sigma = res.sigma - res.sigma.min()
            assert _valid(inst, sigma, 9, 6)
            keys.add(tuple(sigma.tolist()))
    assert len(keys) >= 2  # the rotations reach different repetends
    assert residue_search(cy, inst, 6, 8, greedy=True, node_limit=200_000).status == "undecided"
