"""A solver call's bound never passes its own objective (review rev31 audit D, item 1).

CBC writes its solution file at 8 significant digits: on a placement MILP whose optimum is
5294535.44525662 (microseconds), c @ x of the point read back was 5294535.4, below the
bound CBC proved (5294535.445 less its margin), and `distplan verify` rejected the honest
result ("bound ... is above the call's own objective"). The bound is now put at the
point's objective when it passes it: below the proven bound, so a bound all the same."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import distplan
from distplan.modeling.model import Model
from distplan.models.common import instance_from_dict
from distplan.solvers.common import finish_result
from distplan.solvers.result import Termination
from distplan.verify import check_result
from tests.conftest import backend_params, takes_milp

#: the audit's instance: six ops of ~1e5 s on two devices (the MILP counts microseconds)
PLACEMENT: dict[str, Any] = {
    "format": "distplan/1", "kind": "placement", "name": "pl-chain-s0-d2-t1e5",
    "graph": {
        "ops": [{"name": f"b{b}.op{k}", "time": t, "memory": m} for b in range(2) for k, (t, m) in enumerate([(60568.112734743, 98945057.0), (103764.843518364, 36747676.0), (182649.718687231, 26234183.0)])],
        "edges": [{"src": s, "dst": d, "bytes": 0.0} for s, d in [("b0.op0", "b0.op1"), ("b0.op0", "b0.op2"), ("b0.op1", "b0.op2"), ("b0.op2", "b1.op0"), ("b1.op0", "b1.op1"), ("b1.op0", "b1.op2"), ("b1.op1", "b1.op2")]],
    },
    "cluster": {"devices": [{"name": "gpu0", "memory": 323853832.0}, {"name": "gpu1", "memory": 323853832.0}], "bandwidth": 15750000000.0, "latency": 1e-05},
}


def _arrays(sense: str) -> Any:
    model = Model("m")
    x = model.add_vars("x", 2)
    model.add_constraints("c", x[0] + x[1] >= 1.0)
    (model.maximize if sense == "max" else model.minimize)(3.0 * x[0] + 5.0 * x[1] if sense == "min" else -3.0 * x[0] - 5.0 * x[1])
    return model.to_arrays()


@pytest.mark.parametrize("sense", ["min", "max"])
def test_a_bound_past_the_points_objective_is_put_at_it(sense: str) -> None:
    arrays = _arrays(sense)
    point = np.array([1.0, 0.0])  # objective 3 (min) or -3 (max)
    common: dict[str, Any] = dict(backend="t", version="v", arrays=arrays, termination=Termination.OPTIMAL, values=point, raw_status="", log="", handover_seconds=0.0, solve_seconds=0.0)
    # (min form of the bound: the point's printed value was rounded below the optimum proven)
    res = finish_result(bound_min=3.0 + 1e-3, **common)
    assert res.objective == (3.0 if sense == "min" else -3.0)
    assert res.bound == res.objective
    assert res.extra["bound_lowered_to_objective"] == pytest.approx(res.objective + (1e-3 if sense == "min" else -1e-3), abs=1e-6)
    kept = finish_result(bound_min=3.0 - 1e-3, **common)  # below the objective: the margin only
    assert "bound_lowered_to_objective" not in kept.extra
    assert (kept.bound < kept.objective) if sense == "min" else (kept.bound > kept.objective)


@pytest.mark.parametrize("backend", backend_params(takes_milp))
def test_the_audits_placement_verifies_clean_on_every_milp_backend(backend: str, tmp_path: Path) -> None:
    inst = instance_from_dict(json.loads(json.dumps(PLACEMENT)))
    for formulation in ("placement_milp", "placement_bounds"):
        res = distplan.solve(inst, formulation, backend=backend, time_limit=20)
        for call in res.solver_results:
            if call.bound is not None and call.objective is not None:
                assert call.bound <= call.objective, (formulation, call.backend)
        assert check_result(res.to_dict(), inst) == [], formulation


def test_a_mip_bound_loses_the_absolute_gap_at_which_the_search_closes() -> None:
    """Review rev31: codec_select's MILP (its objective in units of the warm start, ~1)
    ended "optimal" with its dual bound at 1.0 beside a warm start of 0.999999; less a
    margin of 1.001e-6 the bound passed the plan's evaluated time, and `distplan.solve`
    raised PlanCheckError (random compression instance 2390)."""
    from distplan.solvers.common import MIP_ABSOLUTE_GAP, solver_bound_margin

    lp, mip = Model("lp"), Model("mip")
    lp.add_vars("x", 1)
    mip.add_vars("x", 1, vtype="integer")
    for m in (lp, mip):
        m.minimize(m["x"].sum())
    assert solver_bound_margin(mip.to_arrays(), 1.0) - solver_bound_margin(lp.to_arrays(), 1.0) >= MIP_ABSOLUTE_GAP


def test_random_compression_instance_2390_solves_with_its_bound_below_its_plan() -> None:
    from distplan.models.compression import CompressionInstance
    from tests.test_compression import random_doc

    inst = CompressionInstance.from_dict(random_doc(2390))
    res = distplan.solve(inst, "codec_select", time_limit=20, mip_gap=1e-9)
    assert res.bound is not None and res.bound <= res.objective
    assert check_result(res.to_dict(), inst) == []
