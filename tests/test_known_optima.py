"""Every bundled instance with a known optimum x every exact formulation of its kind x every
backend that can take its program (not installed: skipped). The optimum is recorded in the
instance (``meta.optimum``), established independently of the formulation (enumeration)."""

from __future__ import annotations

import pytest
from conftest import TAKES, backend_names, skip_unless_available

import distplan
from distplan.instances import bundled


def _known() -> list[tuple[str, float]]:
    out = []
    for name in sorted(bundled()):
        meta = getattr(distplan.load_instance(name), "meta", None) or {}
        if "optimum" in meta:
            out.append((name, float(meta["optimum"])))
    return out


KNOWN = _known()
CASES = [
    pytest.param(name, optimum, f.name, backend, id=f"{name}-{f.name}-{backend}", marks=skip_unless_available(backend))
    for name, optimum in KNOWN
    for f in distplan.formulations(distplan.load_instance(name).kind)
    if f.is_exact(distplan.load_instance(name)) and f.program in TAKES
    for backend in backend_names(TAKES[f.program])
]


def _solver_runs(res: distplan.Result) -> list[tuple[str, str, str, float, str]]:
    """What each solver run of ``res`` ended with (termination, raw status, message, seconds
    and the last lines of its log): a run that ends short of optimal says why."""
    return [(s.termination.value, s.raw_status, s.message, round(s.solve_seconds, 3), "\n".join(s.log.splitlines()[-8:])) for s in res.solver_results]


def test_there_are_known_optima() -> None:
    assert len(KNOWN) >= 6 and len(CASES) >= 6


@pytest.mark.parametrize(("name", "optimum", "formulation", "backend"), CASES)
def test_exact_formulation_reaches_the_known_optimum(name: str, optimum: float, formulation: str, backend: str) -> None:
    res = distplan.solve(name, formulation, backend=backend, time_limit=60)
    assert res.status.value == "optimal", (res.status, res.objective, res.bound, res.gap, _solver_runs(res))
    assert res.objective == pytest.approx(optimum, rel=res.gap_tolerance)
    assert res.bound is not None and res.bound <= res.objective
    assert res.bound <= optimum * (1 + 1e-12), "a bound above the known optimum is no bound"


def test_exact_for_is_honoured() -> None:
    """placement_milp is exact only for the simple memory and independent-link models: on
    Baechi's channel model its optimum is not the instance's, so a run reports its
    termination as an algorithm's (finished), not the solver's."""
    form = distplan.formulations("placement")
    milp = next(f for f in form if f.name == "placement_milp")
    assert milp.is_exact(distplan.load_instance("placement-small-1"))
    channels = distplan.load_instance("gnmt-v2-4gpu-channels")
    assert not milp.is_exact(channels)
