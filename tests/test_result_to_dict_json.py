"""`Result.to_dict()` is JSON-ready as documented, for every kind (review rev26: a placement
result's ``check.details.start`` was a numpy array, so ``json.dumps(res.to_dict())`` raised
TypeError; the CLI's ``--json`` encoded it, a Python caller could not)."""

from __future__ import annotations

import enum
import json

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
    again = json.loads(json.dumps(record))
    assert again["objective"] == record["objective"] and again["formulation"] == formulation


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
