"""Model-building speed: the m-SCT LP of a 20,000-op random DAG (about 43,000 edges).

Builds the same LP (variables x per edge, s per op, w; precedence, favorite-child and
makespan rows) with distplan's vectorized core and with cvxpy, PuLP and Pyomo, and hands
distplan's arrays to HiGHS. Times are build and hand-over separately, before any solving;
ratios are against distplan measured in the same run (median of --repeat runs).

    python benchmarks/bench_build.py [--ops 20000] [--repeat 3] [--skip pyomo,pulp]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

from distplan.formulations.placement.sct import SCT_LP
from distplan.instances.generators import random_layered_dag
from distplan.models.common import instance_from_dict
from distplan.models.placement_instance import PlacementInstance


def lp_data(inst: PlacementInstance) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    return inst.src, inst.dst, inst.time.min(axis=1), inst.max_delay()


def build_distplan(inst: PlacementInstance) -> tuple[float, float]:
    import highspy

    from distplan.solvers.highs import pass_arrays

    t0 = time.perf_counter()
    model, _ = SCT_LP.build(inst, name="sct")
    arrays = model.to_arrays()
    t1 = time.perf_counter()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    pass_arrays(h, arrays)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def build_cvxpy(inst: PlacementInstance) -> tuple[float, float]:
    import cvxpy as cp

    src, dst, p, c = lp_data(inst)
    n = inst.n_ops
    t0 = time.perf_counter()
    x = cp.Variable(src.size)
    s = cp.Variable(n)
    w = cp.Variable()
    outdeg = np.bincount(src, minlength=n)
    indeg = np.bincount(dst, minlength=n)
    import scipy.sparse as sp

    Gs = sp.csr_matrix((np.ones(src.size), (src, np.arange(src.size))), shape=(n, src.size))
    Gd = sp.csr_matrix((np.ones(src.size), (dst, np.arange(src.size))), shape=(n, src.size))
    ho, hi = np.flatnonzero(outdeg > 1), np.flatnonzero(indeg > 1)
    cons = [
        x >= 0,
        x <= 1,
        s >= 0,
        s[src] + p[src] + cp.multiply(c, x) <= s[dst],
        Gs[ho] @ x >= outdeg[ho] - 1,
        Gd[hi] @ x >= indeg[hi] - 1,
        s + p <= w,
    ]
    prob = cp.Problem(cp.Minimize(w), cons)
    t1 = time.perf_counter()
    prob.get_problem_data(cp.HIGHS)
    t2 = time.perf_counter()
    return t1 - t0, t2 - t1


def build_pulp(inst: PlacementInstance) -> tuple[float, float]:
    import pulp

    src, dst, p, c = lp_data(inst)
    n = inst.n_ops
    t0 = time.perf_counter()
    prob = pulp.LpProblem("sct", pulp.LpMinimize)
    x = [pulp.LpVariable(f"x{e}", 0, 1) for e in range(src.size)]
    s = [pulp.LpVariable(f"s{i}", 0) for i in range(n)]
    w = pulp.LpVariable("w")
    prob += w
    for e in range(src.size):
        prob += s[src[e]] + float(p[src[e]]) + float(c[e]) * x[e] <= s[dst[e]]
    out: list[list[int]] = [[] for _ in range(n)]
    inn: list[list[int]] = [[] for _ in range(n)]
    for e in range(src.size):
        out[src[e]].append(e)
        inn[dst[e]].append(e)
    for i in range(n):
        if len(out[i]) > 1:
            prob += pulp.lpSum(x[e] for e in out[i]) >= len(out[i]) - 1
        if len(inn[i]) > 1:
            prob += pulp.lpSum(x[e] for e in inn[i]) >= len(inn[i]) - 1
        prob += s[i] + float(p[i]) <= w
    t1 = time.perf_counter()
    return t1 - t0, 0.0


def build_pyomo(inst: PlacementInstance) -> tuple[float, float]:
    import pyomo.environ as pe

    src, dst, p, c = lp_data(inst)
    n = inst.n_ops
    t0 = time.perf_counter()
    m = pe.ConcreteModel()
    m.E = pe.RangeSet(0, src.size - 1)
    m.V = pe.RangeSet(0, n - 1)
    m.x = pe.Var(m.E, bounds=(0, 1))
    m.s = pe.Var(m.V, bounds=(0, None))
    m.w = pe.Var()
    srcl, dstl, pl, cl = src.tolist(), dst.tolist(), p.tolist(), c.tolist()
    m.prec = pe.Constraint(m.E, rule=lambda m, e: m.s[srcl[e]] + pl[srcl[e]] + cl[e] * m.x[e] <= m.s[dstl[e]])
    out: list[list[int]] = [[] for _ in range(n)]
    inn: list[list[int]] = [[] for _ in range(n)]
    for e in range(src.size):
        out[srcl[e]].append(e)
        inn[dstl[e]].append(e)
    m.fav_child = pe.Constraint([i for i in range(n) if len(out[i]) > 1], rule=lambda m, i: sum(m.x[e] for e in out[i]) >= len(out[i]) - 1)
    m.fav_parent = pe.Constraint([i for i in range(n) if len(inn[i]) > 1], rule=lambda m, i: sum(m.x[e] for e in inn[i]) >= len(inn[i]) - 1)
    m.span = pe.Constraint(m.V, rule=lambda m, i: m.s[i] + pl[i] <= m.w)
    m.obj = pe.Objective(expr=m.w)
    t1 = time.perf_counter()
    return t1 - t0, 0.0


BUILDERS: dict[str, Callable[[PlacementInstance], tuple[float, float]]] = {
    "distplan (arrays -> highspy)": build_distplan,
    "cvxpy (canonicalized for HIGHS)": build_cvxpy,
    "pulp": build_pulp,
    "pyomo": build_pyomo,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=20000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated builders to skip (cvxpy,pulp,pyomo)")
    args = ap.parse_args()
    inst = instance_from_dict(random_layered_dag(args.ops, n_devices=4, seed=0))
    print(f"m-SCT LP of a random layered DAG: {inst.n_ops} ops, {inst.n_edges} edges")
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    rows = []
    for name, fn in BUILDERS.items():
        if name.split()[0] in skip:
            continue
        runs = [fn(inst) for _ in range(args.repeat)]
        build = statistics.median(r[0] for r in runs)
        hand = statistics.median(r[1] for r in runs)
        rows.append((name, build, hand))
    base = rows[0][1] + rows[0][2]
    print(f"{'builder':<34} {'build s':>9} {'hand-over s':>12} {'total s':>9} {'x distplan':>11}")
    for name, build, hand in rows:
        print(f"{name:<34} {build:>9.3f} {hand:>12.3f} {build + hand:>9.3f} {(build + hand) / base:>10.1f}x")


if __name__ == "__main__":
    main()
