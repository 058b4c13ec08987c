"""A folding that is not exact restricts the problem (placement's coarsening merges ops), so
a run that finds no plan on it proves nothing of the instance: `NoSolutionError` (exit 4),
never `InfeasibleError` (exit 3), unless the instance itself is proven to have none (review
rev24 D1: ``placement_milp --fold`` said "infeasible" on an instance with a 21.7 ms plan)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import distplan
from distplan.errors import InfeasibleError, NoSolutionError
from distplan.models.common import instance_from_dict
from tests.conftest import backend_params, cli_run

#: 6 ops on 3 devices of 6 bytes; coarsened, the merged ops fit no split (found by review rev24)
MERGED_TOO_BIG = {
    "format": "distplan/1", "kind": "placement", "name": "bf14",
    "graph": {
        "ops": [
            {"name": "o0", "memory": 5.0, "time": {"fast": 0.001, "slow": 0.0015}},
            {"name": "o1", "memory": 3.0, "time": {"fast": 0.003, "slow": 0.006}},
            {"name": "o2", "memory": 1.0, "time": {"fast": 0.007, "slow": 0.014}},
            {"name": "o3", "memory": 4.0, "time": {"fast": 0.003, "slow": 0.006}},
            {"name": "o4", "memory": 1.0, "time": {"fast": 0.004, "slow": 0.008}},
            {"name": "o5", "memory": 3.0, "time": {"fast": 0.002, "slow": 0.004}},
        ],
        "edges": [
            {"src": "o0", "dst": "o1", "bytes": 2e7}, {"src": "o0", "dst": "o2", "bytes": 2e7}, {"src": "o0", "dst": "o3", "bytes": 0.0},
            {"src": "o2", "dst": "o3", "bytes": 0.0}, {"src": "o0", "dst": "o4", "bytes": 5e6}, {"src": "o3", "dst": "o4", "bytes": 1e6},
            {"src": "o3", "dst": "o5", "bytes": 2e7}, {"src": "o4", "dst": "o5", "bytes": 0.0},
        ],
    },
    "cluster": {
        "devices": [{"name": "d0", "memory": 6.0, "type": "fast"}, {"name": "d1", "memory": 6.0, "type": "slow"}, {"name": "d2", "memory": 6.0, "type": "slow"}],
        "bandwidth": 1e10, "latency": 0.0001,
    },
}


@pytest.mark.parametrize("backend", backend_params(lambda b: b.capabilities.milp))
def test_folded_infeasibility_is_no_proof(backend: str) -> None:
    inst = instance_from_dict(MERGED_TOO_BIG)
    exact = distplan.solve(inst, "placement_milp", backend=backend, time_limit=60)
    assert exact.status.value == "optimal" and exact.objective == pytest.approx(0.0217, rel=1e-9)
    with pytest.raises(NoSolutionError, match=r"found no plan on the folded instance .*does not prove the instance infeasible"):
        distplan.solve(inst, "placement_milp", backend=backend, fold=True, time_limit=60)


def test_cli_exits_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bf14.json"
    path.write_text(json.dumps(MERGED_TOO_BIG))
    rc, out, err = cli_run(["solve", str(path), "-f", "placement_milp", "--fold", "--time-limit", "30", "--json"], capsys)
    assert rc == 4, err
    assert json.loads(out)["error"]["exit_code"] == 4


def test_an_instance_proven_infeasible_still_says_so() -> None:
    """Less memory in all than the ops need: proven on the instance itself (exit 3)."""
    doc = json.loads(json.dumps(MERGED_TOO_BIG))
    for device in doc["cluster"]["devices"]:
        device["memory"] = 5.0
    with pytest.raises(InfeasibleError, match=r"short by 2 bytes"):
        distplan.solve(instance_from_dict(doc), "placement_milp", fold=True, time_limit=30)
