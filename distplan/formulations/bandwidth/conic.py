"""LIBRA's time program in Clarabel's standard form, handed to Clarabel directly.

The program of `convex.py` (LIBRA, Won et al., ISPASS 2024; minimum training time as a
second-order cone program) has at most a handful of variables, so compiling it through cvxpy
costs far more than solving it (cvxpy: ~0.5 s the first time per shape, ~20-80 ms per solve
after; Clarabel itself: ~1 ms). With ``backend="cvxpy-CLARABEL"`` (the default) the
formulations build the standard form here instead (Goulart & Chen, "Clarabel: An
interior-point solver for conic programs with quadratic objectives", 2024):

    minimize q @ z   s.t.   A z + s = b,  s in {0}^n_eq x R+^n_le x SOC(3)^U

with z = (x, s, t): x = B / sigma (sigma a typical bandwidth, GB/s), s_d >= 1 / x_d as the
cone (s_d + x_d, 2, s_d - x_d) in SOC(3), t_k >= u_kd s_d, and q on t in units of a typical
communication time, so every number the solver sees is O(1). The sparsity pattern and the
cones depend only on the program's shape (`Structure`, cached); per call only the values are
filled. A budget program keeps one Clarabel solver and updates its right-hand side for each
budget (``DefaultSolver.update(b=...)``), as cvxpy's parametrized program did.

The multipliers Clarabel returns are kept (`Solved.duals`) so that `safe` can evaluate the
Lagrangian at them exactly; the solver's own dual objective is reported as information only.
"""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from distplan.formulations.bandwidth.data import Program, bandwidth_scale
from distplan.formulations.registry import RunContext, convex_model_record
from distplan.solvers.capture import captured_output, echo_to_stderr
from distplan.solvers.result import SolutionStatus, SolverResult, Termination

#: Clarabel's statuses (by name) -> termination
STATUS = {
    "Solved": Termination.OPTIMAL,
    "AlmostSolved": Termination.NUMERICAL,
    "PrimalInfeasible": Termination.INFEASIBLE,
    "AlmostPrimalInfeasible": Termination.INFEASIBLE,
    "DualInfeasible": Termination.UNBOUNDED,
    "AlmostDualInfeasible": Termination.UNBOUNDED,
    "MaxIterations": Termination.ITERATION_LIMIT,
    "MaxTime": Termination.TIME_LIMIT,
    "NumericalError": Termination.NUMERICAL,
    "InsufficientProgress": Termination.NUMERICAL,
    "CallbackTerminated": Termination.INTERRUPTED,
    "Unsolved": Termination.UNKNOWN,
}


#: statuses whose point is kept (not proven optimal: status feasible, no bound)
USABLE = ("AlmostSolved", "InsufficientProgress", "MaxIterations", "MaxTime")


@dataclass
class Structure:
    """Index arrays of one program shape: rows of each block, the term pairs, the cones."""

    D: int
    used: np.ndarray
    pairs_k: np.ndarray  # (k, d) with u_kd > 0, d a used dimension
    pairs_d: np.ndarray
    eq: np.ndarray
    le: np.ndarray
    ge: np.ndarray
    finite_ub: np.ndarray
    K: int
    linear: bool  # objective c @ B (no cones) instead of the time
    budget: bool
    n_vars: int
    n_zero: int
    n_nonneg: int
    rows: np.ndarray  # COO pattern of A
    cols: np.ndarray
    kinds: np.ndarray  # what fills each entry (see `fill`)
    src: np.ndarray  # index into the source array of that kind
    csc_order: np.ndarray  # COO -> CSC permutation
    csc_indptr: np.ndarray
    csc_indices: np.ndarray


_STRUCTURES: OrderedDict[tuple[Any, ...], Structure] = OrderedDict()


# entry kinds of A
_ROW_COEF, _NEG_ROW_COEF, _MINUS_ONE, _PLUS_ONE, _TRAFFIC, _COST = range(6)


def structure(prog: Program, *, linear: bool = False, budget: bool = False) -> Structure:
    """The (cached) structure of ``prog``'s time program (or of a linear objective over its
    rows with ``linear``; with a cost budget row with ``budget``)."""
    A, _, _, eq, le, ge = prog.row_groups()
    D, K = prog.num_dims, prog.terms.shape[0]
    used = np.flatnonzero(prog.used) if not linear else np.zeros(0, np.int64)
    pk, pd = np.nonzero(prog.terms) if not linear else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    finite_ub = np.flatnonzero(np.isfinite(prog.ub))
    key = (D, tuple(used.tolist()), tuple(pk.tolist()), tuple(pd.tolist()), tuple(eq.tolist()), tuple(le.tolist()), tuple(ge.tolist()),
           tuple(finite_ub.tolist()), K, linear, budget, A.tobytes() if A.size else b"")
    hit = _STRUCTURES.get(key)
    if hit is not None:
        _STRUCTURES.move_to_end(key)
        return hit
    U = used.size
    Kt = 0 if linear else K
    n_vars = D + U + Kt
    s_col = np.full(D, -1, dtype=np.int64)
    s_col[used] = D + np.arange(U)
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    kinds: list[np.ndarray] = []
    srcs: list[np.ndarray] = []
    row = 0

    def add(r: np.ndarray, c: np.ndarray, kind: int, src: np.ndarray) -> None:
        rows.append(np.asarray(r, dtype=np.int64))
        cols.append(np.asarray(c, dtype=np.int64))
        kinds.append(np.full(np.asarray(r).size, kind, dtype=np.int64))
        srcs.append(np.asarray(src, dtype=np.int64))

    def row_block(idx: np.ndarray, kind: int) -> None:
        nonlocal row
        for i in idx.tolist():
            nz = np.flatnonzero(A[i])
            add(np.full(nz.size, row), nz, kind, i * D + nz)
            row += 1

    row_block(eq, _ROW_COEF)
    n_zero = row
    row_block(le, _ROW_COEF)
    row_block(ge, _NEG_ROW_COEF)
    add(row + np.arange(D), np.arange(D), _MINUS_ONE, np.zeros(D))  # -x <= -lb
    row += D
    add(row + np.arange(finite_ub.size), finite_ub, _PLUS_ONE, np.zeros(finite_ub.size))  # x <= ub
    row += finite_ub.size
    if Kt:
        n = pk.size
        add(row + np.arange(n), s_col[pd], _TRAFFIC, np.arange(n))  # u s_d - t_k <= 0
        add(row + np.arange(n), D + U + pk, _MINUS_ONE, np.zeros(n))
        row += n
    if budget:
        add(np.full(D, row), np.arange(D), _COST, np.arange(D))
        row += 1
    n_nonneg = row - n_zero
    for j, d in enumerate(used.tolist()):  # (s + x, 2, s - x) in SOC(3): -A z + b
        add(np.array([row, row]), np.array([D + j, d]), _MINUS_ONE, np.zeros(2))
        add(np.array([row + 2, row + 2]), np.array([D + j, d]), _MINUS_ONE, np.zeros(2))
        kinds[-1][1] = _PLUS_ONE
        row += 3
    r = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, np.int64)
    order = np.lexsort((r, c))
    indptr = np.searchsorted(c[order], np.arange(n_vars + 1))
    st = Structure(
        D=D, used=used, pairs_k=pk, pairs_d=pd, eq=eq, le=le, ge=ge, finite_ub=finite_ub, K=Kt, linear=linear, budget=budget,
        n_vars=n_vars, n_zero=n_zero, n_nonneg=n_nonneg, rows=r, cols=c,
        kinds=np.concatenate(kinds) if kinds else np.zeros(0, np.int64), src=np.concatenate(srcs) if srcs else np.zeros(0, np.int64),
        csc_order=order, csc_indptr=indptr.astype(np.int64), csc_indices=r[order],
    )
    _STRUCTURES[key] = st
    if len(_STRUCTURES) > 64:
        _STRUCTURES.popitem(last=False)
    return st


@dataclass
class Data:
    """The values of one program: A (CSC), b, q, cones, and the scales."""

    A: sp.csc_matrix
    b: np.ndarray
    q: np.ndarray
    cones: list[Any]
    sigma: float
    time_scale: float


def fill(st: Structure, prog: Program, *, time_scale: float, objective: np.ndarray | None = None,
         cost: np.ndarray | None = None, budget: float = 0.0) -> Data:
    """The numbers of ``prog`` in the structure (x = B / sigma; objective / time_scale)."""
    import clarabel

    A_rows, lo, hi, _, _, _ = prog.row_groups()
    sigma = bandwidth_scale(prog)
    D = st.D
    vals = np.empty(st.kinds.size)
    flat = A_rows.reshape(-1) if A_rows.size else np.zeros(0)
    vals[st.kinds == _MINUS_ONE] = -1.0
    vals[st.kinds == _PLUS_ONE] = 1.0
    m = st.kinds == _ROW_COEF
    vals[m] = flat[st.src[m]]
    m = st.kinds == _NEG_ROW_COEF
    vals[m] = -flat[st.src[m]]
    m = st.kinds == _TRAFFIC
    vals[m] = prog.terms[st.pairs_k, st.pairs_d][st.src[m]]
    m = st.kinds == _COST
    if m.any():
        assert cost is not None
        vals[m] = (np.asarray(cost, dtype=float) * sigma)[st.src[m]]
    n_rows = st.n_zero + st.n_nonneg + 3 * st.used.size
    A = sp.csc_matrix((vals[st.csc_order], st.csc_indices, st.csc_indptr), shape=(n_rows, st.n_vars))
    b = np.zeros(n_rows)
    r = 0
    for idx, rhs, sgn in ((st.eq, hi, 1.0), (st.le, hi, 1.0), (st.ge, lo, -1.0)):
        b[r : r + idx.size] = sgn * rhs[idx] / sigma
        r += idx.size
    b[r : r + D] = -prog.lb / sigma
    r += D
    b[r : r + st.finite_ub.size] = prog.ub[st.finite_ub] / sigma
    r += st.finite_ub.size + st.pairs_k.size
    if st.budget:
        b[r] = budget
        r += 1
    b[r + 1 : r + 3 * st.used.size : 3] = 2.0
    q = np.zeros(st.n_vars)
    if st.linear:
        assert objective is not None
        q[:D] = np.asarray(objective, dtype=float) * sigma / time_scale
    elif st.K:
        q[D + st.used.size :] = prog.weights / (time_scale * sigma)
    cones: list[Any] = []
    if st.n_zero:
        cones.append(clarabel.ZeroConeT(st.n_zero))
    if st.n_nonneg:
        cones.append(clarabel.NonnegativeConeT(st.n_nonneg))
    cones += [clarabel.SecondOrderConeT(3) for _ in range(st.used.size)]
    return Data(A, b, q, cones, sigma, time_scale)


@dataclass
class Solved:
    """A direct Clarabel solve: the record, B (GB/s) or None, and the duals in program units
    (lambda [K, D]; mu for the instance rows, then the budget row)."""

    result: SolverResult
    bandwidth: np.ndarray | None
    duals: list[tuple[np.ndarray, np.ndarray]]


#: the least time limit handed to Clarabel (seconds): a run's last moments still get a solve
LEAST_TIME_LIMIT = 1e-3


#: the backend name a direct Clarabel call records (`DirectSolver`), beside the library's version
BACKEND = "clarabel-direct"
#: the backend whose runs make direct Clarabel calls in place of cvxpy's (`convex.direct`)
STANDS_IN_FOR = "cvxpy-CLARABEL"


def backend_identity() -> tuple[str, str]:
    """(name, version) a direct Clarabel call records as its backend, solved or not started."""
    import clarabel

    return BACKEND, str(clarabel.__version__)


def clarabel_limit(limit: float) -> float:
    """The time limit (seconds) `DirectSolver.solve` hands Clarabel for a call given
    ``limit`` (the run's time left), which the call's record keeps (`RunContext.record_call`)."""
    return max(float(limit), LEAST_TIME_LIMIT)


class DirectSolver:
    """One Clarabel solver for a program shape; `solve` at a budget updates b only."""

    def __init__(self, prog: Program, *, name: str, time_scale: float, objective: np.ndarray | None = None,
                 cost: np.ndarray | None = None, verbose: bool = False) -> None:
        """``name``: the program's name in its calls' records (``extra.model.name``);
        ``verbose``: Clarabel's log also goes to stderr as it is written (it always goes
        to the result's log)."""
        t0 = time.perf_counter()
        self.name = name
        self.verbose = verbose
        self.prog = prog
        self.st = structure(prog, linear=objective is not None, budget=cost is not None)
        self.data = fill(self.st, prog, time_scale=time_scale, objective=objective, cost=cost)
        self.solver: Any = None
        self.build_seconds = time.perf_counter() - t0

    def solve_in_run(self, ctx: RunContext, budget: float | None = None) -> Solved:
        """`solve` within the run's time left, its record appended to the run's solver
        results with the limit Clarabel was given (`clarabel_limit`: `RunContext.record_call`);
        past the run's deadline Clarabel is not started, and the call is recorded so
        (`RunContext.not_started`), with no bandwidth."""
        late = ctx.not_started(self.build_seconds, backend_identity(), convex_model_record(self.name))
        if late is not None:  # (its build time is the record's, as `RunContext.solve_model` keeps it)
            self.build_seconds = 0.0
            return Solved(late, None, [])
        limit = ctx.remaining_time()
        solved = self.solve(budget=budget, time_limit=limit)
        ctx.record_call(solved.result, None if limit is None else clarabel_limit(limit), convex_model_record(self.name))
        return solved

    def solve(self, budget: float | None = None, time_limit: float | None = None) -> Solved:
        """One Clarabel solve at ``budget`` (the budget row's value; None: as built) within
        ``time_limit`` (seconds, at least `LEAST_TIME_LIMIT`; None: none), the solver reused
        from the last call when Clarabel allows a data update."""
        import clarabel

        t0 = time.perf_counter()
        st, data = self.st, self.data
        if budget is not None:
            data.b[st.n_zero + st.n_nonneg - 1] = budget
        with captured_output() as printed:  # Clarabel prints its log on stdout
            settings = clarabel.DefaultSettings()
            settings.verbose = True
            if time_limit is not None:
                settings.time_limit = clarabel_limit(time_limit)
            if self.solver is None or not self.solver.is_data_update_allowed():
                P = sp.csc_matrix((st.n_vars, st.n_vars))
                self.solver = clarabel.DefaultSolver(P, data.q, data.A, data.b, data.cones, settings)
            else:  # (this call's limit, not the first call's: the run has less time left now)
                self.solver.update(b=data.b, settings=settings)
            t1 = time.perf_counter()
            sol = self.solver.solve()
        t2 = time.perf_counter()
        if self.verbose:
            echo_to_stderr(printed.text)
        name = str(sol.status).split(".")[-1]
        backend, version = backend_identity()
        termination = STATUS.get(name, Termination.UNKNOWN)
        x = np.asarray(sol.x, dtype=float)
        finite = x.size == st.n_vars and bool(np.all(np.isfinite(x)))
        ok = termination is Termination.OPTIMAL and finite
        # AlmostSolved: solved to Clarabel's reduced accuracy; the point is kept as a
        # feasible candidate (the evaluator and the repair judge it), its dual bound is not
        usable = ok or (name in USABLE and finite)
        scale = data.time_scale
        result = SolverResult(
            backend=backend,
            backend_version=version,
            termination=termination,
            status=SolutionStatus.OPTIMAL if ok else (SolutionStatus.FEASIBLE if usable else SolutionStatus.NONE),
            objective=float(sol.obj_val) * scale if usable else None,
            bound=float(sol.obj_val_dual) * scale if ok and math.isfinite(sol.obj_val_dual) else None,
            build_seconds=self.build_seconds,
            handover_seconds=t1 - t0,
            solve_seconds=t2 - t1,
            iterations=int(sol.iterations),
            raw_status=name,
            log=printed.text,
            extra={"interface": "clarabel direct (standard form, no cvxpy)", "objective_scale_seconds": scale},
            bound_grade="solver" if ok else None,
        )
        self.build_seconds = 0.0
        if not usable:
            return Solved(result, None, [])
        B = x[: st.D] * data.sigma
        return Solved(result, B, self._duals(np.asarray(sol.z, dtype=float)))

    def _duals(self, z: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        st, prog = self.st, self.prog
        if st.linear:
            return []
        per_unit = self.data.time_scale / self.data.sigma
        n_rows = len(prog.rows)
        mu = np.zeros(n_rows + 1)
        r = 0
        for idx, sgn in ((st.eq, 1.0), (st.le, 1.0), (st.ge, -1.0)):
            mu[idx] = sgn * z[r : r + idx.size] * per_unit
            r += idx.size
        r += st.D + st.finite_ub.size
        lam = np.zeros(prog.terms.shape)
        lam[st.pairs_k, st.pairs_d] = np.maximum(z[r : r + st.pairs_k.size], 0.0)
        r += st.pairs_k.size
        if st.budget:
            mu[n_rows] = z[r] * self.data.time_scale
        # Clarabel's KKT: q + A^T z = 0 with z in the dual cone, so z multiplies (A x - b) in the
        # Lagrangian on every row (== rows included) with the convention of `safe`
        return [(lam, mu)]
