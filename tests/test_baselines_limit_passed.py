"""The millisecond baselines give their plan when the run's limit passed before them (a
fresh ``distplan solve`` counts its own loading, 0.2-0.4 s): they get at least
`deadline.BASELINE_GRACE`, as the exact formulations give their baselines. Review rev23:
1f1b, gpipe, equal_bw and proportional_to_traffic exited 4 at ``--time-limit 0.3``."""

from __future__ import annotations

import time

import pytest

import distplan
from distplan.instances import load_instance
from distplan.verify import check_result


@pytest.mark.parametrize(("instance", "formulation"), [
    ("pipeline-vshape-p8", "1f1b"),
    ("pipeline-zb-p4-m12-comm0", "zb_h1"),
    ("pipeline-zb-p4-m12-comm1", "zb_h2"),
    ("libra-gpt3-4d-multi", "equal_bw"),  # (LPs: the multi-row constraints)
    ("libra-gpt3-4d-multi", "proportional_to_traffic"),
])
def test_a_baseline_with_its_limit_passed_still_gives_its_plan(instance: str, formulation: str) -> None:
    inst = load_instance(instance)
    free = distplan.solve(inst, formulation)
    t0 = time.perf_counter()
    res = distplan.solve(inst, formulation, time_limit=0.05, started=t0 - 1.0)
    assert res.objective == pytest.approx(free.objective, rel=1e-9)
    assert time.perf_counter() - t0 < 1.0
    assert check_result(res.to_dict(), inst, require_version=True) == []
