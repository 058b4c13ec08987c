"""tap's label pass with an incumbent (distplan/formulations/sharding/chain_dp.py): the
sweeps with their paths (`_Walk.sweep`), the spliced incumbent (`_Walk.spliced`) and the
completions inside the pass (`_label_dp`) keep the pass exact, against brute force over
every plan of small random walks and against the pass without them on tight GPTs."""

from __future__ import annotations

import importlib
import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding.chain_dp import _label_dp, solve_walk_dp
from tests.test_tap_dp import RANDOM_WALK_CASES, _one_chain, _random_walk
from tests.test_tap_exact import tight


def _plans(walk: Any) -> list[tuple[float, float, int, tuple[int, ...], int]]:
    """Every plan of the walk: (cost, memory, start row, arcs, end row), summed as the
    dynamic program sums them."""
    a, fs, fe = walk.chain.arcs, walk.front_start, walk.front_end
    stages = len(walk.stage_arcs)
    out = []
    for seq in itertools.product(*[walk.stage_arcs[t % stages].tolist() for t in range(walk.steps)]):
        if any(a["cur"][x] != a["prev"][y] for x, y in zip(seq, seq[1:])):
            continue
        first, last = (int(a["prev"][seq[0]]), int(a["cur"][seq[-1]])) if seq else (None, None)
        for r0 in range(fs.cost.size):
            if first is not None and walk.key_start[r0] != first:
                continue
            for r1 in range(fe.cost.size):
                if walk.key_end[r1] != (last if last is not None else walk.key_start[r0]):
                    continue
                path = np.array(seq, dtype=np.int64)
                cost = float(fs.cost[r0] + a["cost"][path].sum() + fe.cost[r1])
                mem = float(fs.mem[r0] + a["memory"][path].sum() + fe.mem[r1])
                out.append((cost, mem, r0, seq, r1))
    return out


def _valid(walk: Any, path: np.ndarray) -> bool:
    a, stages = walk.chain.arcs, len(walk.stage_arcs)
    return path.size == walk.steps and all(a["cur"][x] == a["prev"][y] for x, y in zip(path.tolist(), path[1:].tolist())) and all(x in walk.stage_arcs[t % stages] for t, x in enumerate(path.tolist()))


def _small_walk(seed: int, W: int, stages: int, copies: int) -> Any:
    walk = _random_walk(np.random.default_rng(seed), W, stages, copies)
    sizes = [idx.size for idx in walk.stage_arcs]  # type: ignore[attr-defined]
    assume(float(np.prod(sizes, dtype=float)) ** copies <= 4000)
    return walk


def _budget_case(seed: int, W: int, stages: int, copies: int, where: float) -> tuple[Any, list[Any], float, float]:
    """A small random walk, all its plans (brute force), a budget at the fraction ``where``
    of its plans' memories, and the least cost within it (hypothesis assumes some plan)."""
    walk = _small_walk(seed, W, stages, copies)
    plans = _plans(walk)
    assume(plans)
    mems = sorted({m for _, m, *_ in plans})
    budget = mems[min(int(where * len(mems)), len(mems) - 1)]
    return walk, plans, budget, min(c for c, m, *_ in plans if m <= budget)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), W=st.integers(1, 3), stages=st.integers(1, 2), copies=st.integers(1, 3), lam=st.sampled_from([0.0, 0.5, 3.0]))
def test_sweeps_give_the_least_weight_and_the_paths_that_reach_it(seed: int, W: int, stages: int, copies: int, lam: float) -> None:
    """The backward sweep's values are `to_go`'s, bit for bit (the label pass prunes with
    them); each state's forward and backward values are the least weight of the walk's
    first t steps from the start front and of the rest to the end front (brute force), and
    the paths the sweeps record have those weights, their costs and memories."""
    walk = _small_walk(seed, W, stages, copies)
    a, fs, fe = walk.chain.arcs, walk.front_start, walk.front_end  # type: ignore[attr-defined]
    weight = a["cost"] + lam * a["memory"]
    back, fwd = walk.sweep(lam, False), walk.sweep(lam, True)  # type: ignore[attr-defined]
    assert np.array_equal(back.value, walk.to_go(weight, fe.cost + lam * fe.mem))  # type: ignore[attr-defined]
    plans = _plans(walk)
    if not plans:
        assert not np.isfinite(back.value[0][walk.key_start]).any()  # type: ignore[attr-defined]
        return
    # the least weight of all plans, from either sweep, equals brute force
    best = min(c + lam * m for c, m, *_ in plans)
    w_start = fs.cost + lam * fs.mem
    got_back = min(float(w_start[r] + back.value[0][walk.key_start[r]]) for r in range(fs.cost.size))  # type: ignore[attr-defined]
    assert got_back == pytest.approx(best, rel=1e-12, abs=1e-12)
    got_fwd = float(np.min(fwd.value[walk.steps][walk.key_end] + fe.cost + lam * fe.mem))  # type: ignore[attr-defined]
    assert got_fwd == pytest.approx(best, rel=1e-12, abs=1e-12)
    # every finite entry: the recorded path has the recorded weight, cost and memory
    for t in range(walk.steps + 1):  # type: ignore[attr-defined]
        for s in range(W):
            if np.isfinite(back.value[t][s]):
                cost, mem = fe.cost[back.row[s]], fe.mem[back.row[s]]
                x = s
                for u in range(t, walk.steps):  # type: ignore[attr-defined]
                    e = back.arc[u][x]
                    assert a["prev"][e] == x and e in walk.stage_arcs[u % stages]  # type: ignore[attr-defined]
                    cost, mem, x = cost + a["cost"][e], mem + a["memory"][e], int(a["cur"][e])
                assert back.row[x] >= 0 and walk.key_end[back.row[x]] == x  # type: ignore[attr-defined]
                assert back.cost[t][s] == pytest.approx(cost - fe.cost[back.row[s]] + fe.cost[back.row[x]], rel=1e-12, abs=1e-12)
                assert back.value[t][s] == pytest.approx(back.cost[t][s] + lam * back.mem[t][s], rel=1e-9, abs=1e-9)
            if np.isfinite(fwd.value[t][s]):
                x, cost, mem = s, 0.0, 0.0
                for u in range(t - 1, -1, -1):
                    e = fwd.arc[u][x]
                    assert a["cur"][e] == x and e in walk.stage_arcs[u % stages]  # type: ignore[attr-defined]
                    cost, mem, x = cost + a["cost"][e], mem + a["memory"][e], int(a["prev"][e])
                r0 = fwd.row[x]
                assert r0 >= 0 and walk.key_start[r0] == x  # type: ignore[attr-defined]
                assert fwd.cost[t][s] == pytest.approx(cost + fs.cost[r0], rel=1e-12, abs=1e-12)
                assert fwd.mem[t][s] == pytest.approx(mem + fs.mem[r0], rel=1e-12, abs=1e-12)
                assert fwd.value[t][s] == pytest.approx(fwd.cost[t][s] + lam * fwd.mem[t][s], rel=1e-9, abs=1e-9)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    **RANDOM_WALK_CASES,
    lam_c=st.sampled_from([0.0, 0.25, 3.0, 50.0]),
    where=st.floats(0.0, 1.0),
    start=st.sampled_from(["none", "worst", "spliced"]),
)
def test_label_pass_with_an_incumbent_and_completions_is_exact(seed: int, W: int, stages: int, copies: int, lam: float, lam_c: float, where: float, start: str) -> None:
    """With a budget where memory binds, the pass given an incumbent (none, the most
    expensive plan within budget, or the spliced one) and completing its labels along a
    backward sweep (at ``lam_c``: its completions are often within budget but not the
    cheapest, while the pass prunes by ``lam``) returns a cheapest plan within budget (brute force): a path of the
    walk's stages whose cost and memory are the ones returned, and a bound at most its
    cost; the pass without either returns the same cost. Any incumbent it starts from is a
    plan within budget, and the spliced one costs at least the optimum."""
    walk = _small_walk(seed, W, stages, copies)
    plans = _plans(walk)
    assume(plans)
    mems = sorted({m for _, m, *_ in plans})
    budget = mems[min(int(where * len(mems)), len(mems) - 1)]
    within = [p for p in plans if p[1] <= budget]
    opt = min(c for c, *_ in within)
    a, fs, fe = walk.chain.arcs, walk.front_start, walk.front_end  # type: ignore[attr-defined]
    mem_to_go = walk.to_go(a["memory"], fe.mem)  # type: ignore[attr-defined]
    lag_to_go = walk.sweep(lam, False).value  # type: ignore[attr-defined]
    completion = walk.sweep(lam_c, False)  # type: ignore[attr-defined]
    incumbent: tuple[float, Any] | None = None
    if start == "worst":
        c, m, r0, seq, r1 = max(within)
        incumbent = (c, (np.maximum(fs.asg[r0], fe.asg[r1]), np.array(seq, dtype=np.int64), m))
    elif start == "spliced":
        incumbent = walk.spliced((0.0, lam + 1.0), completion, budget)  # type: ignore[attr-defined]
        if incumbent is not None:
            path = incumbent[1][1]
            assert _valid(walk, path) and incumbent[1][2] <= budget and incumbent[0] >= opt * (1 - 1e-12)
    plain, _ = _label_dp(walk, budget, lam, np.inf, mem_to_go, lag_to_go, None, 1e9)  # type: ignore[arg-type]
    res, _ = _label_dp(walk, budget, lam, np.inf, mem_to_go, lag_to_go, None, 1e9, completion, incumbent)  # type: ignore[arg-type]
    assert plain is not None and res is not None
    assert plain.cost == pytest.approx(opt, rel=1e-12, abs=1e-12)
    assert res.cost == pytest.approx(opt, rel=1e-12, abs=1e-12)
    assert _valid(walk, res.path) and res.memory <= budget
    # the plan is what it says: its start and end rows give its explicit strategies
    first = int(a["prev"][res.path[0]]) if res.path.size else None
    costs = {(round(c, 12), round(m, 12)) for c, m, r0, seq, r1 in plans if tuple(res.path.tolist()) == seq and (first is None or walk.key_start[r0] == first)}  # type: ignore[attr-defined]
    assert (round(res.cost, 12), round(res.memory, 12)) in costs
    assert res.bound <= res.cost


@pytest.mark.parametrize(("layers", "mesh", "frac"), [(6, 8, 0.3), (8, 4, 0.3), (6, 4, 0.02), (6, 8, 0.02), (7, 8, 0.05)])
def test_spliced_incumbent_gives_the_same_optimum_in_fewer_passes(layers: int, mesh: int, frac: float) -> None:
    """On tight GPTs (heterogeneous links), the spliced incumbent and the completions give
    the same optimum and a bound below it as the caps from the Lagrangian bound alone
    (`SWEEP_STATES` 0 against 64), in no more label passes, and fewer where the caps
    take several."""
    chain_dp = importlib.import_module("distplan.formulations.sharding.chain_dp")
    chain, graph, start, end = _one_chain(tight(layers, mesh, frac, 2.5e10))
    runs: dict[int, tuple[Any, int]] = {}
    original = chain_dp._label_dp
    passes: list[int] = []

    def counted(*args: Any) -> Any:
        passes.append(1)
        return original(*args)

    for states in (0, 64):
        passes.clear()
        with pytest.MonkeyPatch.context() as m:
            m.setattr(chain_dp, "_label_dp", counted)
            m.setattr(chain_dp, "SWEEP_STATES", states)
            runs[states] = (solve_walk_dp(chain, graph, start, end), len(passes))
    (old, old_passes), (new, new_passes) = runs[0], runs[64]
    assert old is not None and new is not None
    assert new.cost == pytest.approx(old.cost, rel=1e-12)
    assert new.bound <= new.cost and new.memory <= graph.memory_budget
    assert new_passes <= old_passes
    if old_passes > 1:
        assert new_passes < old_passes
