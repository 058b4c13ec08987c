"""`Result.to_dict()` is strict JSON as documented, for every kind (review rev26: a placement
result's ``check.details.start`` was a numpy array, so ``json.dumps(res.to_dict())`` raised
TypeError; the CLI's ``--json`` encoded it, a Python caller could not; audit of session 27:
libra_perf_lp stopped before its first LP round left ``info.lp_lower_bound_seconds`` at
-inf, which ``json.dumps(..., allow_nan=False)`` refuses and strict readers cannot parse)."""

from __future__ import annotations

import dataclasses
import enum
import json
import math

import numpy as np
import pytest

import distplan
from distplan.models.common import json_ready

CASES = [
    ("placement-small-1", "baechi_etf"),
    ("placement-small-1", "placement_milp"),
    ("placement-small-1", "placement_bounds"),
    ("gpt-4layer-memtight", "tap"),
    ("gpt3-4layer-8gpu", "megatron"),
    ("compression-bert-large", "tag_sfb"),
    ("pipeline-tessel-vshape", "tessel"),
    ("pipeline-tessel-vshape", "1f1b"),
    ("libra-dlrm-3d-total500", "libra_perf"),
    ("libra-dlrm-3d-total500", "equal_bw"),
]


@pytest.mark.parametrize(("instance", "formulation"), CASES)
def test_json_dumps_takes_the_record_as_it_is(instance: str, formulation: str) -> None:
    record = distplan.solve(instance, formulation, time_limit=30).to_dict()
    again = json.loads(json.dumps(record, allow_nan=False))
    assert again["objective"] == record["objective"] and again["formulation"] == formulation


def test_a_cut_loop_stopped_before_its_first_round_records_no_lp_bound() -> None:
    res = distplan.solve("libra-gpt3-4d-multi", "libra_perf_lp", time_limit=1e-6)
    assert res.info["stopped"] == "time_limit" and res.info["lp_lower_bound_seconds"] is None and res.info["lp_relative_gap"] is None
    record = json.loads(json.dumps(res.to_dict(), allow_nan=False))
    assert record["bound"] is not None and record["bound"] <= record["objective"]


def test_non_finite_numbers_outside_the_plan_are_null() -> None:
    res = distplan.solve("placement-small-1", "placement_milp", time_limit=30)
    call = dataclasses.replace(res.solver_results[0], bound=-math.inf, objective=math.nan)
    odd = dataclasses.replace(res, info={**res.info, "gap_seen": math.inf}, solver_results=[call])
    record = odd.to_dict()
    json.dumps(record, allow_nan=False)
    assert record["info"]["gap_seen"] is None
    assert record["solver_results"][0]["bound"] is None and record["solver_results"][0]["objective"] is None
    assert record["plan"] == res.plan.to_dict() and record["objective"] == res.objective


class Colour(enum.Enum):
    RED = "red"


def test_json_ready_replaces_numpy_inside_containers_only_where_needed() -> None:
    plain = {"a": [1, 2.5, "x", None, True], "b": {"c": (1, 2)}}
    assert json_ready(plain) is plain  # nothing to replace: the same object
    mixed = {"a": np.arange(3), "b": [np.float64(1.5), {"c": np.int32(2), "d": np.bool_(True)}], "e": Colour.RED}
    got = json_ready(mixed)
    assert got == {"a": [0, 1, 2], "b": [1.5, {"c": 2, "d": True}], "e": "red"}
    assert type(got["b"][0]) is float and type(got["b"][1]["c"]) is int and type(got["b"][1]["d"]) is bool
    json.dumps(got)


def test_json_ready_makes_non_finite_numbers_null_wherever_they_are() -> None:
    """One walker (`json_ready`) for numpy values and non-finite numbers: `Result.to_dict`,
    `Check.to_dict` and `strict_json` all use it."""
    got = json_ready({"a": math.inf, "b": np.float64(-math.inf), "c": np.array([1.0, math.nan]), "d": (math.nan, 2), "e": np.array([1.0, 2.0])})
    assert got == {"a": None, "b": None, "c": [1.0, None], "d": [None, 2], "e": [1.0, 2.0]}
    json.dumps(got, allow_nan=False)
    finite = {"a": 1.5, "b": [2, 3.0]}
    assert json_ready(finite) is finite
