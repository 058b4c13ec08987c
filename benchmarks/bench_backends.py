"""Benchmarks of the exchangeable backends: hand-over paths and the same models on every backend.

Run: python benchmarks/bench_backends.py [--quick] [--time-limit S]

1. CBC hand-over: the vectorized MPS writer pulp-cbc uses, against distplan's generic
   exporter and against building a PuLP LpProblem and letting PuLP write the MPS (the
   baseline: what PULP_CBC_CMD would do). Seconds and speed ratio vs the baseline.
2. SCIP hand-over: writing MPS and letting SCIP read it (what the scip backend does)
   against adding one linear constraint per row from {Term: coefficient} dictionaries.
3. A transportation LP and a generalized-assignment MILP on every available backend that takes them:
   hand-over (build) seconds and solve seconds reported separately, total-time ratio vs
   the in-memory `highs` backend measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import scipy.sparse as sp

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distplan.modeling.export import write_mps  # noqa: E402
from distplan.modeling.model import Model, ModelArrays  # noqa: E402
from distplan.solvers.base import SolveOptions, all_backends, get_backend  # noqa: E402
from distplan.solvers.pulp_backend import build_pulp_problem, write_min_mps  # noqa: E402


def random_lp(n: int, seed: int = 0) -> ModelArrays:
    """min c x s.t. 2n rows sum_j a_ij x_j >= b_i (3 nonzeros per row), 0 <= x <= 10; feasible."""
    rng = np.random.default_rng(seed)
    m = 2 * n
    rows = np.repeat(np.arange(m), 3)
    cols = rng.integers(0, n, rows.size)
    A = sp.csr_matrix((rng.uniform(0.1, 1.0, rows.size), (rows, cols)), shape=(m, n))
    A.sum_duplicates()
    b = np.asarray(A.sum(axis=1)).ravel() * rng.uniform(0.5, 3.0, m)  # x = 3 is feasible for most rows; <= 10 holds
    return ModelArrays(
        name=f"random-lp-{n}",
        c=rng.uniform(1.0, 2.0, n),
        offset=0.0,
        A=A,
        row_lo=b,
        row_hi=np.full(m, np.inf),
        col_lo=np.zeros(n),
        col_hi=np.full(n, 10.0),
        integrality=np.zeros(n, dtype=np.int8),
        sense="min",
    )


def assignment_milp(n: int, seed: int = 1) -> ModelArrays:
    """A generalized assignment MILP: n jobs to n // 4 machines with capacities (min cost)."""
    rng = np.random.default_rng(seed)
    k = max(2, n // 4)
    cost = rng.uniform(1.0, 10.0, (n, k))
    size = rng.uniform(1.0, 3.0, (n, k))
    cap = size.mean(axis=0) * n / k * 1.3
    m = Model(f"gap-{n}")
    x = m.add_vars("x", (n, k), vtype="binary")
    m.add_constraints("assign", x.sum(axis=1) == 1)
    m.add_constraints("capacity", (size * x).sum(axis=0) <= cap)
    m.minimize((cost * x).sum())
    return m.to_arrays()


def transportation_lp(suppliers: int, customers: int, seed: int = 2) -> ModelArrays:
    """A balanced transportation LP (suppliers x customers shipments, min cost)."""
    rng = np.random.default_rng(seed)
    supply = rng.uniform(50.0, 150.0, suppliers)
    demand = rng.uniform(0.5, 1.5, customers)
    demand *= supply.sum() / demand.sum()
    m = Model(f"transport-{suppliers}x{customers}")
    x = m.add_vars("ship", (suppliers, customers))
    m.add_constraints("supply", x.sum(axis=1) <= supply)
    m.add_constraints("demand", x.sum(axis=0) >= demand * 0.999)
    m.minimize((rng.uniform(1.0, 20.0, (suppliers, customers)) * x).sum())
    return m.to_arrays()


def timed(fn: Callable[[], object], repeat: int = 1) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def section_cbc_handover(sizes: list[int]) -> None:
    print("\n1. CBC hand-over (file written for the CBC binary), seconds; ratio = baseline / method")
    print(f"{'vars':>7} {'rows':>7} {'nnz':>8} | {'vectorized MPS':>15} {'export.write_mps':>17} {'PuLP build+writeMPS':>20} | {'ratio':>6}")
    tmp = tempfile.mkdtemp(prefix="bench-backends-")
    for n in sizes:
        arrays = random_lp(n)
        t_vec = timed(lambda a=arrays: write_min_mps(a, os.path.join(tmp, "a.mps")))
        t_exp = timed(lambda a=arrays: write_mps(a, os.path.join(tmp, "b.mps")))

        def pulp_path(a: ModelArrays = arrays) -> None:
            prob, _ = build_pulp_problem(a)
            prob.writeMPS(os.path.join(tmp, "c.mps"), rename=1)

        t_pulp = timed(pulp_path)
        print(f"{n:>7} {arrays.num_rows:>7} {arrays.A.nnz:>8} | {t_vec:>15.3f} {t_exp:>17.3f} {t_pulp:>20.3f} | {t_pulp / t_vec:>5.1f}x")


def scip_rows_one_by_one(arrays: ModelArrays) -> object:
    """Baseline: variables and one `addCons` per CSR row through PySCIPOpt's expression API."""
    import math

    import pyscipopt
    from pyscipopt.scip import Expr, ExprCons, Term

    model = pyscipopt.Model()
    model.hideOutput()

    def fin(v: float) -> float | None:
        return v if math.isfinite(v) else None

    xs = [
        model.addVar(name=f"C{j}", lb=fin(lo), ub=fin(hi), obj=c)
        for j, (lo, hi, c) in enumerate(zip(arrays.col_lo.tolist(), arrays.col_hi.tolist(), arrays.c.tolist()))
    ]
    terms = [Term(x) for x in xs]
    A = arrays.A
    ip, ix, dv = A.indptr.tolist(), A.indices.tolist(), A.data.tolist()
    for i, (lo, hi) in enumerate(zip(arrays.row_lo.tolist(), arrays.row_hi.tolist())):
        expr = Expr({terms[j]: v for j, v in zip(ix[ip[i] : ip[i + 1]], dv[ip[i] : ip[i + 1]])})
        model.addCons(ExprCons(expr, lhs=fin(lo), rhs=fin(hi)))
    return model


def section_scip_handover(sizes: list[int]) -> None:
    if not get_backend("scip").available():
        print("\n2. SCIP hand-over: pyscipopt not installed, skipped")
        return
    from distplan.solvers.scip_backend import build_scip_model

    print("\n2. SCIP hand-over, seconds; ratio = one-by-one / MPS")
    print(f"{'vars':>7} {'rows':>7} | {'MPS write+read':>15} {'addCons per row':>16} | {'ratio':>6}")
    tmp = tempfile.mkdtemp(prefix="bench-backends-")
    for n in sizes:
        arrays = random_lp(n)
        t_mps = timed(lambda a=arrays: build_scip_model(a, tmp), 2)
        t_rows = timed(lambda a=arrays: scip_rows_one_by_one(a), 2)
        print(f"{n:>7} {arrays.num_rows:>7} | {t_mps:>15.3f} {t_rows:>16.3f} | {t_rows / t_mps:>5.2f}x")


def section_all_backends(arrays: ModelArrays, time_limit: float) -> None:
    kind = "MILP" if arrays.is_mip else "LP"
    print(f"\n3. {kind} {arrays.name}: {arrays.num_vars} vars, {arrays.num_rows} rows, {arrays.A.nnz} nonzeros; time limit {time_limit} s")
    print(f"{'backend':>15} | {'hand-over s':>11} {'solve s':>9} {'wall s':>8} | {'wall vs highs':>13} | {'termination':>17} {'objective':>14} {'bound':>14}")
    names = [b.name for b in all_backends() if b.available() and (b.capabilities.milp if arrays.is_mip else b.capabilities.lp)]
    warm_up = assignment_milp(8) if arrays.is_mip else random_lp(20)
    for name in names:  # imports and first-call costs stay out of the table
        get_backend(name).solve(warm_up, SolveOptions(time_limit=time_limit))
    rows = []
    for name in names:
        options = SolveOptions(time_limit=time_limit, mip_gap=0.0)
        t0 = time.perf_counter()
        res = get_backend(name).solve(arrays, options)
        wall = time.perf_counter() - t0
        rows.append((name, res, wall))
    base_wall = next(w for n, _, w in rows if n == "highs")
    for name, res, wall in rows:
        obj = "-" if res.objective is None else f"{res.objective:.6g}"
        bnd = "-" if res.bound is None else f"{res.bound:.6g}"
        print(
            f"{name:>15} | {res.handover_seconds:>11.3f} {res.solve_seconds:>9.3f} {wall:>8.3f} | {wall / base_wall:>12.1f}x | "
            f"{res.termination.value:>17} {obj:>14} {bnd:>14}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes only")
    parser.add_argument("--time-limit", type=float, default=20.0, help="per backend and model, seconds")
    args = parser.parse_args()
    sizes = [2000, 10000] if args.quick else [2000, 10000, 40000]
    section_cbc_handover(sizes)
    section_scip_handover(sizes)
    section_all_backends(transportation_lp(20, 50) if args.quick else transportation_lp(60, 100), args.time_limit)
    section_all_backends(assignment_milp(24 if args.quick else 40), args.time_limit)


if __name__ == "__main__":
    main()
