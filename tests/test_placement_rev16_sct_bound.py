"""Review rev16 D4: m-SCT's LP bound on CBC (pulp-cbc, pyomo-cbc) lay above the evaluated
makespan (sct_5166: 42579.159957 > 42579.159898, 1.4e-9 relative; sct_20153 and sct_20104
1e-8 to 2e-8) and the run crashed (PlanCheckError). An LP's bound is ``c @ x`` of the
solver's point when the solver reports no dual bound, and CBC's point is settled only to
its feasibility tolerances (1e-7 of its scaled values) and printed with 8 significant
digits (w = 42579.16); `solvers.common.solver_bound_margin` now also takes
`VALUE_PRECISION` x sum |c_j x_j| of the point off. Fixtures: three random instances whose
optimum brute force confirmed (the objectives below)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from conftest import backend_params, takes_lp

import distplan
from distplan.models.placement_instance import PlacementInstance
from distplan.solvers.common import VALUE_PRECISION, solver_bound_margin

DOCS: dict[str, dict[str, Any]] = {
    '5166': {"format":"distplan/1","kind":"placement","name":"r","graph":{"ops":[{"name":"o0","time":{"A":42579.159853978534,"B":21289.579926989267},"memory":0.0,"temporary":0.0,"output":1.0,"colocate":"g"},{"name":"o1","time":{"A":3.9115588397445737e-07,"B":3.9115588397445737e-07},"memory":0.0,"temporary":2.0,"output":1.0},{"name":"o2","time":{"A":1.8541552859339083e-08,"B":1.8541552859339083e-08},"memory":3.0,"temporary":0.0,"output":1.0},{"name":"o3","time":{"A":1.7472504022950947e-05,"B":8.736252011475474e-06},"memory":0.0,"temporary":0.0,"output":1.0},{"name":"o4","time":{"A":2.6525317556546418e-05,"B":2.6525317556546418e-05},"memory":2.0,"temporary":0.0,"output":1.0,"colocate":"g"}],"edges":[{"src":"o0","dst":"o1","bytes":4.07892596891672},{"src":"o0","dst":"o2","bytes":1411348564706.9739},{"src":"o1","dst":"o2","bytes":216079210385833.75},{"src":"o1","dst":"o3","bytes":7532706447130.207},{"src":"o2","dst":"o3","bytes":126.82770875981215},{"src":"o0","dst":"o4","bytes":181.12412089720152},{"src":"o1","dst":"o4","bytes":419.8846135538474},{"src":"o3","dst":"o4","bytes":33722196138141.055}]},"cluster":{"devices":[{"name":"d0","memory":10.0,"type":"A"}],"bandwidth":1000000000.0,"latency":0.25},"model":{"memory":"liveness","communication":"channels"}},
    '20153': {"format":"distplan/1","kind":"placement","name":"r","graph":{"ops":[{"name":"o0","time":32.412611157130414,"memory":2.0,"colocate":"g"},{"name":"o1","time":11.166967546810165,"memory":1.0},{"name":"o2","time":3.104382126063211,"memory":2.0},{"name":"o3","time":2.393347197996685e-06,"memory":1.0,"colocate":"g"}],"edges":[{"src":"o1","dst":"o2","bytes":1.1567482778535019},{"src":"o0","dst":"o3","bytes":2430.3754459336296},{"src":"o1","dst":"o3","bytes":869.6865912346508}]},"cluster":{"devices":[{"name":"d0","memory":12.0,"type":"A"},{"name":"d1","memory":12.0,"type":"A"}],"bandwidth":2000000000.0,"latency":1e-05,"links":[{"src":"d0","dst":"d1","bandwidth":10000000000.0,"latency":0.0}]},"model":{"memory":"simple","communication":"channels"}},
    '20104': {"format":"distplan/1","kind":"placement","name":"r","graph":{"ops":[{"name":"o0","time":0.3311810152553584,"memory":0.0,"colocate":"g"},{"name":"o1","time":1770.884664047129,"memory":1.0},{"name":"o2","time":9.82900805308507e-09,"memory":2.0},{"name":"o3","time":1.6992318884175444e-09,"memory":2.0,"colocate":"g"}],"edges":[]},"cluster":{"devices":[{"name":"d0","memory":3.0,"type":"A"},{"name":"d1","memory":3.0,"type":"A"}],"bandwidth":4000000000.0,"latency":0.0},"model":{"memory":"simple","communication":"channels"}}
}
#: brute-force optima (seconds)
OPTIMA = {"5166": 42579.15989838605, "20153": 32.41261355047761, "20104": 1770.884664056958}


@pytest.mark.parametrize("backend", backend_params(takes_lp))
def test_the_sct_lp_bound_stays_below_the_optimum(backend: str) -> None:
    for key, doc in DOCS.items():
        r = distplan.solve(PlacementInstance.from_dict(doc), "baechi_sct", backend=backend, time_limit=10)
        assert r.check.feasible and r.objective == pytest.approx(OPTIMA[key], rel=1e-12), key
        assert r.bound is not None and r.bound <= OPTIMA[key], (key, r.bound, r.bound_source)
        for call in r.solver_results:
            assert call.bound is None or call.bound <= OPTIMA[key], (key, call.bound)


def test_the_margin_covers_the_precision_of_the_point() -> None:
    """CBC's LP point for sct_5166 has w = 42579.16 (8 significant digits): 1e-7 of
    |c_j x_j| summed comes off, besides the tolerance on max |c_j| and 1e-9 of the bound."""
    from distplan.modeling.model import Model

    m = Model("w")
    w = m.add_vars("w", (), lb=0.0)
    m.add_vars("s", 2, lb=0.0)
    m.minimize(w)
    arrays = m.to_arrays()
    x = np.zeros(arrays.num_vars)
    x[0] = 42579.16
    plain = solver_bound_margin(arrays, 42579.16)
    assert plain == pytest.approx(1e-7 + 1e-9 * 42579.16)
    assert solver_bound_margin(arrays, 42579.16, x) == pytest.approx(plain + VALUE_PRECISION * 42579.16)
    assert 42579.16 - solver_bound_margin(arrays, 42579.16, x) <= OPTIMA["5166"]


def test_only_a_bound_read_from_the_point_loses_its_precision() -> None:
    """A solver's own dual bound (HiGHS's mip_dual_bound) is not c @ x of its point: it
    keeps the plain margin; the optimum taken as the bound, or a bound flagged as read from
    the point (CBC's completed search), also loses `VALUE_PRECISION` of the point."""
    from distplan.modeling.model import Model
    from distplan.solvers.common import finish_result
    from distplan.solvers.result import Termination

    model = Model("m")
    x = model.add_vars("x", 2)
    model.add_constraints("c", x[0] + x[1] >= 1.0)
    model.minimize(3.0 * x[0] + 5.0 * x[1])
    arrays = model.to_arrays()
    point = np.array([1.0, 0.0])
    common = dict(backend="t", version="v", arrays=arrays, termination=Termination.OPTIMAL, values=point, raw_status="", log="", handover_seconds=0.0, solve_seconds=0.0)
    dual = finish_result(bound_min=3.0, **common)
    flagged = finish_result(bound_min=3.0, bound_from_point=True, **common)
    taken = finish_result(bound_min=None, **common)
    plain = solver_bound_margin(arrays, 3.0)
    assert dual.extra["bound_margin"] == plain
    assert flagged.extra["bound_margin"] == taken.extra["bound_margin"] == plain + VALUE_PRECISION * 3.0
