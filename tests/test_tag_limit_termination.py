"""tag_sfb ends with the limit that stopped its MILP (review rev23: a MILP cut by its time
or node limit left the run "finished", though its plan was only the warm start: vgg16 at
0.05 s, 0.21963 s against the full run's 0.21874 s). Runs whose MILP ends by itself stay
"finished": tag_sfb is exact over TAG's plans, not over the instance."""

from __future__ import annotations

import time

import pytest

import distplan
from distplan.instances import load_instance
from distplan.solvers.result import Termination
from distplan.verify import check_result


@pytest.fixture(scope="module")
def vgg16():
    return load_instance("compression-vgg16")


@pytest.mark.parametrize(("kwargs", "expected"), [
    ({"time_limit": 0.05, "started": -1.0}, Termination.TIME_LIMIT),  # (the limit passed before the run: `started` moved back 1 s)
    ({"solver_options": {"mip_max_nodes": 0}}, Termination.NODE_LIMIT),
    ({}, Termination.FINISHED),
])
def test_the_run_ends_as_its_milp_did(vgg16, kwargs, expected) -> None:
    if "started" in kwargs:
        kwargs = {**kwargs, "started": time.perf_counter() + kwargs["started"]}
    res = distplan.solve(vgg16, "tag_sfb", **kwargs)
    assert res.termination is expected
    assert check_result(res.to_dict(), vgg16, require_version=True) == []
    if expected is Termination.FINISHED:
        assert res.solver_results[-1].termination is Termination.OPTIMAL
        assert res.objective == pytest.approx(0.21873971959870972, rel=1e-9)
