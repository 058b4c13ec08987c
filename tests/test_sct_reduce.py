"""m-SCT's reduced LP (`sct.implied_precedence`, makespan rows at sinks, implied x fixed to
1) has the optimum of Hanen & Munier's full LP, and its solution is feasible for the full
LP; the implied rows match a brute-force longest-path search; m-SCT stays deterministic."""

from __future__ import annotations

import numpy as np
import pytest
from test_placement_heuristics import random_instance

import distplan
from distplan.formulations.placement import sct
from distplan.formulations.placement.coarsen import coarsen
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict
from distplan.models.placement_instance import PlacementInstance
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions

#: tolerances well below HiGHS's defaults (1e-7), so that two LPs with the same optimum
#: report it to ~1e-12 relative (at the defaults the full LP of fused GNMT alone comes out
#: 9e-10 apart depending on the row order)
TIGHT = SolveOptions(raw={"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10})


def brute_implied(inst: PlacementInstance, p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Per edge (i, j): the longest path k -> ... -> j over the other successors k of i (time
    of k and every op before j), compared with c_ij, by a plain all-pairs DP."""
    n = inst.n_ops
    succ: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        succ[a].append(b)
    longest = np.full((n, n), -np.inf)  # [k, t]: ops k .. before t
    for k in inst.topo_order().tolist()[::-1]:
        for s in succ[k]:
            longest[k, s] = max(longest[k, s], p[k])
            longest[k] = np.maximum(longest[k], p[k] + longest[s])
    out = np.zeros(inst.n_edges, dtype=bool)
    for e, (i, j) in enumerate(zip(inst.src.tolist(), inst.dst.tolist())):
        best = max((longest[k, j] for k in succ[i] if k != j), default=-np.inf)
        out[e] = best >= c[e] * (1 + 1e-9)
    return out


def test_implied_rows_match_brute_force() -> None:
    found = 0
    for seed in range(60):
        inst = random_instance(seed)
        p, c = inst.time.min(axis=1), inst.max_delay()
        want = brute_implied(inst, p, c)
        assert np.array_equal(sct.implied_precedence(inst, p, c), want), seed
        assert np.array_equal(sct.implied_precedence(inst, p, c, block_cells=3 * inst.n_ops), want), seed  # column blocks
        found += int(want.sum())
    assert found > 50  # the random instances do have implied rows
    inst = random_instance(3)
    assert not sct.implied_precedence(inst, inst.time.min(axis=1), inst.max_delay(), max_cells=1).any()  # over budget: none


def test_implied_rows_skipped_beyond_the_level_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    inst = coarsen(distplan.load_instance("gnmt-v2-4gpu-channels")).instance
    p, c = inst.time.min(axis=1), inst.max_delay()
    assert sct.implied_precedence(inst, p, c).sum() > 1000
    monkeypatch.setattr(sct, "MAX_LEVEL_STEPS", 10)
    assert not sct.implied_precedence(inst, p, c).any()


def lp_pair(inst: PlacementInstance) -> tuple[float, float, int]:
    """(full LP optimum, reduced LP optimum, implied rows), the reduced solution checked
    against every row and bound of the full LP."""
    highs = get_backend("highs")
    full_model, _ = sct.SCT_LP.build(inst, {"lp_reduce": False})
    red_model, index = sct.SCT_LP.build(inst, {"lp_reduce": True})
    full = full_model.to_arrays()
    a, b = highs.solve(full, TIGHT), highs.solve(red_model.to_arrays(), TIGHT)
    assert a.termination.value == b.termination.value == "optimal"
    assert a.objective is not None and b.objective is not None and b.values is not None
    v = b.values  # the same columns in the same order
    assert v.size == full.num_vars
    act = full.A @ v
    tol = 1e-9 * max(1.0, float(np.abs(v).max()))
    assert np.all(act >= full.row_lo - tol) and np.all(act <= full.row_hi + tol)
    assert np.all(v >= full.col_lo - tol) and np.all(v <= full.col_hi + tol)
    assert np.all(v[: inst.n_edges][index.implied] == 1.0)
    return a.objective, b.objective, int(index.implied.sum())


@pytest.mark.parametrize("which", ["gnmt-fused", "gnmt-raw", "gpt2-small", "random"])
def test_reduced_lp_has_the_full_lp_optimum(which: str) -> None:
    if which == "gnmt-fused":
        insts = [coarsen(distplan.load_instance("gnmt-v2-4gpu-channels")).instance]
    elif which == "gnmt-raw":
        insts = [distplan.load_instance("gnmt-v2-4gpu")]
    elif which == "gpt2-small":
        insts = [distplan.load_instance("gpt2-small-dgx1-4")]
    else:
        insts = [random_instance(s) for s in range(20)] + [instance_from_dict(random_layered_dag(200, n_devices=3, seed=1))]
    reduced = 0
    for inst in insts:
        full, red, k = lp_pair(inst)
        assert red == pytest.approx(full, rel=1e-9, abs=1e-12), inst.name
        reduced += k
    assert reduced > 0
    if which == "gnmt-fused":
        assert reduced > 1000  # of 2,209 edges


def test_reduced_sct_is_deterministic_and_smaller() -> None:
    inst = distplan.load_instance("gnmt-v2-4gpu-channels")
    a = distplan.solve(inst, "baechi_sct", fold=True, theta=0.1)
    b = distplan.solve(inst, "baechi_sct", fold=True, theta=0.1)
    assert a.objective == b.objective
    assert np.array_equal(a.solver_results[0].values_by_block["sct-x"], b.solver_results[0].values_by_block["sct-x"])
    rows = a.solver_results[0].extra["model"]
    coarse = coarsen(inst).instance
    full_rows = sct.SCT_LP.build(coarse, {"lp_reduce": False})[0].to_arrays().num_rows
    assert rows["rows"] < 0.5 * full_rows
