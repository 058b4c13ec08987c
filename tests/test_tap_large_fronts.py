"""A chain whose Pareto arcs would be too large stays unfolded instead of exhausting memory.

A 3-layer GPT of hidden 16 on a 2x2x2 mesh with sequence splits: making a copy's Pareto
arcs joined 18.5 million rows, tap grew past 10 GB and was OOM-killed (alpa_ilp solves it
in seconds). `segment_fronts` now stops at `chain_fronts.MAX_ARC_ROWS`, and tap solves the
copies unfolded, exactly."""

from __future__ import annotations

import json
import resource
import subprocess
import sys

import pytest

import distplan
from distplan.formulations.sharding.alpa_ilp import memory_shortfall
from distplan.formulations.sharding.costgraph import build_cost_graph
from distplan.instances.transformer import transformer

CODE = """
import json, distplan
from distplan.instances.transformer import transformer
inst = transformer(3, 16, 2, 64, 8, 1000, mesh=(2, 2, 2), device="V100", name="g22", sequence_split=True, memory=1e15)
r = distplan.solve(inst, "tap", time_limit=60)
a = distplan.solve(inst, "alpa_ilp", time_limit=60)
print(json.dumps([r.objective, r.bound, r.status.value, r.info["chains_left_unfolded"], a.objective]))
"""


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


def test_a_chain_with_too_many_pareto_rows_is_left_unfolded() -> None:
    done = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, preexec_fn=_limit_memory)
    assert done.returncode == 0, done.stderr[-2000:]
    objective, bound, status, unfolded, alpa = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == "optimal" and unfolded == 1
    assert abs(objective - alpa) <= 1e-9 * alpa and bound <= objective


def _tight(frac: float) -> distplan.models.sharding.ShardingInstance:
    """A 4-layer GPT on 4 devices, its budget ``frac`` of the way from its least memory to
    its unconstrained optimum's (as bench_sharding's exact table makes them)."""
    base = transformer(4, 256, 4, 128, 8, 1000, mesh=4, device="V100", memory=1e15, name=f"gpt-l4-mem{frac:g}")
    least = memory_shortfall(build_cost_graph(base))[0]
    free = distplan.solve(base, "alpa_ilp", mip_gap=1e-9).check
    assert free is not None
    return base.with_memory(least + frac * (free.details["memory_bytes"] - least))


@pytest.mark.parametrize("frac", [0.05, 1.0])
def test_the_dynamic_program_gives_way_when_the_arcs_exceed_its_rows(frac: float) -> None:
    """Past ``dp_max_rows`` the dynamic program gives the chain back (the memory-free plan
    when it fits) and the walk MILP solves it: the same optimum as alpa_ilp."""
    inst = _tight(frac)
    free = distplan.solve(inst, "tap")
    small = distplan.solve(inst, "tap", dp_max_rows=20)
    alpa = distplan.solve(inst, "alpa_ilp", mip_gap=1e-9)
    assert free.info["method"] == "dp" and small.info["method"] == "milp"
    for r in (free, small):
        assert abs(r.objective - alpa.objective) <= 1e-6 * alpa.objective


def test_arcs_found_too_large_are_not_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dynamic program found the arcs too large at the walk MILP's own limit: tap leaves
    the chain unfolded without making them a second time (0.12-0.16 s each, past a limit)."""
    from distplan.formulations.sharding import chain_dp, tap

    calls: list[float] = []
    real = chain_dp.segment_fronts

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(1.0)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(chain_dp, "segment_fronts", counted)
    monkeypatch.setattr(tap, "segment_fronts", counted)
    inst = transformer(3, 16, 2, 64, 8, 1000, mesh=(2, 2, 2), device="V100", name="g22", sequence_split=True, memory=1e15)
    result = distplan.solve(inst, "tap", time_limit=60)
    assert result.info["chains_left_unfolded"] == 1 and len(calls) == 1
