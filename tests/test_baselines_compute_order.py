"""The classic schedules a deadline cuts short: `baselines._collect` computes gpipe first
(the cheapest), then the ones usually shortest, so a run stopped early keeps the best it
could have had in that time; ties still name the first in `SCHEDULES` order."""

from __future__ import annotations

import time
from typing import Any

import pytest

from distplan.formulations.pipeline import baselines
from distplan.formulations.pipeline.baselines import baseline_incumbent
from distplan.instances.pipelines import make_pipeline


def _zb_case() -> Any:
    """4 stages, 8 micro-batches, B/W split: gpipe, 1f1b and interleaved 41, zb_h1 38,
    zb_h2 35 (the V schedules do not apply)."""
    return make_pipeline("v", 4, 8, forward_time=1.0, backward_time=2.0, weight_time=1.0)


def test_a_deadline_after_two_schedules_keeps_zb_h2_not_1f1b(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each evaluated schedule takes 0.25 s here and the deadline passes after 0.35 s:
    gpipe (41) and zb_h2 (35) are done. In `SCHEDULES` order the two done were gpipe and
    1f1b, both 41 (a 64-stage, 2000-micro-batch pipeline at a 10 s tessel limit kept
    gpipe, 10252, where zb_h2 gives 10126)."""
    inst = _zb_case()
    real = baselines.evaluate
    done: list[float] = []

    def slow_evaluate(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.25)
        done.append(time.perf_counter())
        return real(*args, **kwargs)

    monkeypatch.setattr(baselines, "evaluate", slow_evaluate)
    found = baseline_incumbent(inst, time.perf_counter() + 0.35)
    assert found is not None and len(done) == 2
    name, plan = found
    assert name == "zb_h2" and real(inst, plan).objective == pytest.approx(35.0)


def test_ties_name_the_first_schedule_in_schedules_order() -> None:
    """Within 1e-12 of the least objective, the name is the first in `SCHEDULES` order
    (1f1b before zb_h1 before zb_h2), whatever order they were computed in, as before the
    compute order changed; 1e-9 more is no tie."""
    plans = {name: baselines.baseline_plan(_zb_case(), name) for name in ("gpipe", "1f1b", "zb_h1", "zb_h2")}
    found = [(35.0, "zb_h2", plans["zb_h2"]), (35.0, "zb_h1", plans["zb_h1"]), (35.0 + 1e-13, "1f1b", plans["1f1b"]), (34.0, "gpipe", plans["gpipe"])]
    assert baselines._least(found[:3]) == ("1f1b", plans["1f1b"])
    assert baselines._least(found) == ("gpipe", plans["gpipe"])
    assert baselines._least([(35.0 + 1e-9, "1f1b", plans["1f1b"]), *found[:2]]) == ("zb_h1", plans["zb_h1"])
    assert baselines._least([]) is None
