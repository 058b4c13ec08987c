"""A small vectorized model for linear and mixed-integer programs.

Variables are added in whole blocks, expressions are sparse row blocks (one CSR matrix
plus a constant per row), and constraints are added as whole blocks with names. The model
is assembled once into arrays (`Model.to_arrays`) that every backend in `distplan.solvers`
consumes: nothing here knows about a solver.

    m = Model("example")
    x = m.add_vars("x", (3, 2), lb=0, ub=1, vtype="binary")
    m.add_constraints("one-device", x.sum(axis=1) == 1)
    m.minimize((cost * x).sum())
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import scipy.sparse as sp

VarType = Literal["continuous", "integer", "binary"]
Sense = Literal["<=", ">=", "=="]
ArrayLike = float | int | np.ndarray | Sequence[float]


class ModelError(ValueError):
    """A model was built inconsistently (shape mismatch, duplicate name, ...)."""


class InfeasibleByConstruction(ModelError):
    """A constraint row without variables whose bounds exclude 0, or one that asks for an
    infinite side (``expr >= inf``): no solution exists."""


#: solvers read a magnitude of 1e20 or more as infinite (HiGHS's default
#: ``infinite_bound`` and ``infinite_cost``; CBC's and SCIP's infinity too), so such a
#: coefficient or right-hand side would silently drop or change a row: the model refuses it
HUGE = 1e20
#: HiGHS ignores constraint coefficients of this magnitude or more (its
#: ``large_matrix_value``: ``1e15 * y <= 3e15`` solved as if the row were absent), so the
#: model refuses them
LARGEST_COEFFICIENT = 1e15


def _first_bad(values: np.ndarray, limit: float = HUGE) -> int | None:
    """The first entry that is no finite number below ``limit`` in magnitude (None: none)."""
    bad = ~(np.abs(values) < limit)  # (NaN compares False: bad too)
    return int(np.flatnonzero(bad)[0]) if bad.any() else None


def _check_bounds(what: str, lo: np.ndarray, hi: np.ndarray) -> None:
    """Variable bounds: no NaN, lb <= ub, no lb of +inf and no ub of -inf."""
    if np.any(np.isnan(lo)) or np.any(np.isnan(hi)) or np.any(lo > hi):
        raise ModelError(f"{what}: bounds are NaN or lb > ub")
    if np.any(lo == np.inf) or np.any(hi == -np.inf):
        raise ModelError(f"{what}: a lower bound of +inf or an upper bound of -inf leaves the variable no value")


def _csr(matrix: sp.spmatrix | sp.sparray) -> sp.csr_matrix:
    """The matrix as CSR, without a copy or a format check when it already is one."""
    return matrix if type(matrix) is sp.csr_matrix else sp.csr_matrix(matrix)


def _as_rows(matrix: sp.spmatrix | sp.sparray, ncols: int) -> sp.csr_matrix:
    m = _csr(matrix)
    if m.shape[1] < ncols:
        m = sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], ncols))
    return m


class LinExpr:
    """An array of affine expressions: ``A @ x + const`` reshaped to ``shape``.

    `A` is a CSR matrix with one row per element (row-major order of ``shape``) and one
    column per model variable known when the expression was made. ``owner``: the model
    whose variables it holds (None for a constant or one built from column numbers,
    `linear_sum`); an expression that mixes two models' variables is a `ModelError`, and a
    model takes no expression of another's (`Model.add_constraints`).
    """

    __array_ufunc__ = None  # numpy defers `ndarray * LinExpr` to us

    def __init__(self, A: sp.spmatrix | sp.sparray, const: np.ndarray, shape: tuple[int, ...], owner: Model | None = None):
        self.owner = owner
        self.A = _csr(A)
        self.const = np.asarray(const, dtype=float).reshape(-1)
        self.shape = tuple(int(s) for s in shape)
        if self.A.shape[0] != self.const.size or self.const.size != math.prod(self.shape):
            raise ModelError(
                f"expression rows {self.A.shape[0]} / constants {self.const.size} "
                f"do not match shape {self.shape}"
            )

    # -- construction helpers -------------------------------------------------------------
    @staticmethod
    def constant(values: ArrayLike, ncols: int = 0) -> LinExpr:
        arr = np.asarray(values, dtype=float)
        n = arr.size
        return LinExpr(sp.csr_matrix((n, ncols)), arr.reshape(-1), arr.shape)

    @property
    def size(self) -> int:
        return self.const.size

    @property
    def ncols(self) -> int:
        return self.A.shape[1]

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def __repr__(self) -> str:
        return f"LinExpr(shape={self.shape}, nnz={self.A.nnz})"

    # -- arithmetic -----------------------------------------------------------------------
    def _broadcast_to(self, shape: tuple[int, ...]) -> LinExpr:
        if shape == self.shape:
            return self
        rows = np.broadcast_to(np.arange(self.size).reshape(self.shape), shape).reshape(-1)
        return LinExpr(self.A[rows], self.const[rows], shape, self.owner)

    def __add__(self, other: object) -> LinExpr:
        if isinstance(other, Variable):
            other = other.expr()
        if isinstance(other, LinExpr):
            shape = np.broadcast_shapes(self.shape, other.shape)
            a, b = self._broadcast_to(shape), other._broadcast_to(shape)
            n = max(a.ncols, b.ncols)
            return LinExpr(_as_rows(a.A, n) + _as_rows(b.A, n), a.const + b.const, shape, _owner(self.owner, other.owner))
        arr = np.asarray(other, dtype=float)
        shape = np.broadcast_shapes(self.shape, arr.shape)
        a = self._broadcast_to(shape)
        return LinExpr(a.A, a.const + np.broadcast_to(arr, shape).reshape(-1), shape, self.owner)

    __radd__ = __add__

    def __neg__(self) -> LinExpr:
        return LinExpr(-self.A, -self.const, self.shape, self.owner)

    def __sub__(self, other: object) -> LinExpr:
        return self + (-_to_expr(other) if isinstance(other, LinExpr | Variable) else -np.asarray(other, dtype=float))

    def __rsub__(self, other: object) -> LinExpr:
        return (-self) + other

    def __mul__(self, other: object) -> LinExpr:
        if isinstance(other, LinExpr | Variable):
            raise ModelError("products of variables are not linear; linearize them in a block")
        arr = np.asarray(other, dtype=float)
        shape = np.broadcast_shapes(self.shape, arr.shape)
        a = self._broadcast_to(shape)
        scale = np.broadcast_to(arr, shape).reshape(-1)
        return LinExpr(sp.diags(scale) @ a.A, a.const * scale, shape, self.owner)

    __rmul__ = __mul__

    def __truediv__(self, other: object) -> LinExpr:
        return self * (1.0 / np.asarray(other, dtype=float))

    # -- indexing and reductions ----------------------------------------------------------
    def __getitem__(self, index: Any) -> LinExpr:
        rows = np.arange(self.size).reshape(self.shape)[index]
        rows = np.asarray(rows)
        flat = rows.reshape(-1)
        return LinExpr(self.A[flat], self.const[flat], rows.shape, self.owner)

    def reshape(self, *shape: int) -> LinExpr:
        new = np.empty(self.shape).reshape(shape).shape
        return LinExpr(self.A, self.const, new, self.owner)

    def sum(self, axis: int | None = None) -> LinExpr:
        """Sum all elements (axis None) or along one axis."""
        if axis is None:
            ones = sp.csr_matrix(np.ones((1, self.size)))
            return LinExpr(ones @ self.A, np.array([self.const.sum()]), (), self.owner)
        ax = axis % len(self.shape)
        out_shape = self.shape[:ax] + self.shape[ax + 1 :]
        keep = np.delete(np.indices(self.shape).reshape(len(self.shape), -1), ax, axis=0)
        groups = np.asarray(np.ravel_multi_index(tuple(keep), out_shape)) if out_shape else np.zeros(self.size, np.int64)
        return self.group_sum(groups, math.prod(out_shape)).reshape(*out_shape)

    def group_sum(self, groups: np.ndarray, ngroups: int | None = None) -> LinExpr:
        """Sum elements that share a group id: result[g] = sum of elements with groups == g."""
        groups = np.asarray(groups, dtype=np.int64).reshape(-1)
        if groups.size != self.size:
            raise ModelError(f"group_sum: {groups.size} group ids for {self.size} elements")
        n = int(ngroups if ngroups is not None else (groups.max() + 1 if groups.size else 0))
        G = sp.csr_matrix((np.ones(self.size), (groups, np.arange(self.size))), shape=(n, self.size))
        return LinExpr(G @ self.A, G @ self.const, (n,), self.owner)

    # -- constraints ----------------------------------------------------------------------
    def __le__(self, other: object) -> ConstraintSpec:  # type: ignore[override]
        return ConstraintSpec.make(self, "<=", other)

    def __ge__(self, other: object) -> ConstraintSpec:  # type: ignore[override]
        return ConstraintSpec.make(self, ">=", other)

    def __eq__(self, other: object) -> ConstraintSpec:  # type: ignore[override]
        return ConstraintSpec.make(self, "==", other)

    __hash__ = None  # type: ignore[assignment]


def _owner(a: Model | None, b: Model | None) -> Model | None:
    """The model whose variables an expression combining two of them holds; a `ModelError`
    when they hold variables of two models (their columns would be read as one's)."""
    if a is None or a is b:
        return b
    if b is None:
        return a
    raise ModelError(f"an expression mixes variables of model {a.name!r} and model {b.name!r}: a model takes its own variables only")


def _to_expr(obj: object) -> LinExpr:
    if isinstance(obj, LinExpr):
        return obj
    if isinstance(obj, Variable):
        return obj.expr()
    return LinExpr.constant(np.asarray(obj, dtype=float))


def concat(exprs: Iterable[LinExpr | Variable]) -> LinExpr:
    """Stack expressions into one flat 1-D expression."""
    parts = [_to_expr(e) for e in exprs]
    if not parts:
        return LinExpr.constant(np.zeros(0))
    n = max(p.ncols for p in parts)
    A = sp.vstack([_as_rows(p.A, n) for p in parts], format="csr")
    const = np.concatenate([p.const for p in parts])
    owner = None
    for p in parts:
        owner = _owner(owner, p.owner)
    return LinExpr(A, const, (const.size,), owner)


def linear_sum(cols: np.ndarray, coeffs: np.ndarray, rows: np.ndarray, nrows: int, ncols: int) -> LinExpr:
    """An expression from triplets: row r holds sum of coeffs[k] * var[cols[k]] for rows[k] == r."""
    A = sp.csr_matrix((np.asarray(coeffs, float), (np.asarray(rows), np.asarray(cols))), shape=(nrows, ncols))
    return LinExpr(A, np.zeros(nrows), (nrows,))


class Variable:
    """A named block of model variables; `index` holds their column numbers."""

    __array_ufunc__ = None

    def __init__(self, model: Model, name: str, index: np.ndarray):
        self.model = model
        self.name = name
        self.index = index

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.index.shape)

    @property
    def size(self) -> int:
        return int(self.index.size)

    def expr(self) -> LinExpr:
        cols = self.index.reshape(-1)
        n = cols.size
        A = sp.csr_matrix((np.ones(n), cols, np.arange(n + 1)), shape=(n, self.model.num_vars))
        return LinExpr(A, np.zeros(n), self.shape, self.model)

    def __getitem__(self, index: Any) -> Variable:
        sub = np.asarray(self.index[index])
        return Variable(self.model, self.name, sub)

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, shape={self.shape})"

    # everything else behaves like the expression
    def __add__(self, o: object) -> LinExpr:
        return self.expr() + o

    __radd__ = __add__

    def __sub__(self, o: object) -> LinExpr:
        return self.expr() - o

    def __rsub__(self, o: object) -> LinExpr:
        return o - self.expr()  # type: ignore[operator]

    def __neg__(self) -> LinExpr:
        return -self.expr()

    def __mul__(self, o: object) -> LinExpr:
        return self.expr() * o

    __rmul__ = __mul__

    def __truediv__(self, o: object) -> LinExpr:
        return self.expr() / o

    def sum(self, axis: int | None = None) -> LinExpr:
        return self.expr().sum(axis)

    def group_sum(self, groups: np.ndarray, ngroups: int | None = None) -> LinExpr:
        return self.expr().group_sum(groups, ngroups)

    def __le__(self, o: object) -> ConstraintSpec:  # type: ignore[override]
        return self.expr() <= o

    def __ge__(self, o: object) -> ConstraintSpec:  # type: ignore[override]
        return self.expr() >= o

    def __eq__(self, o: object) -> ConstraintSpec:  # type: ignore[override]
        return self.expr() == o

    __hash__ = None  # type: ignore[assignment]


@dataclass
class ConstraintSpec:
    """``lo <= A x <= hi`` rows not yet added to a model."""

    A: sp.csr_matrix
    lo: np.ndarray
    hi: np.ndarray
    #: the model whose variables its rows hold (`LinExpr.owner`)
    owner: Model | None = None

    @staticmethod
    def make(lhs: LinExpr, sense: Sense, rhs: object) -> ConstraintSpec:
        if isinstance(rhs, LinExpr | Variable):
            diff = lhs - rhs
            bound = np.zeros(diff.size)
        else:
            arr = np.asarray(rhs, dtype=float)
            shape = np.broadcast_shapes(lhs.shape, arr.shape)
            diff = lhs._broadcast_to(shape)
            bound = np.broadcast_to(arr, shape).reshape(-1).astype(float)
        b = bound - diff.const
        if sense == "<=":
            lo, hi = np.full(b.size, -np.inf), b
        elif sense == ">=":
            lo, hi = b, np.full(b.size, np.inf)
        else:
            lo, hi = b, b.copy()
        return ConstraintSpec(diff.A, lo, hi, diff.owner)


@dataclass
class VarBlockInfo:
    name: str
    start: int
    shape: tuple[int, ...]
    vtype: VarType

    @property
    def stop(self) -> int:
        return self.start + math.prod(self.shape)


@dataclass
class ConBlockInfo:
    name: str
    start: int
    stop: int
    nnz: int


@dataclass
class ModelArrays:
    """A model as arrays: minimize/maximize c @ x + offset s.t. row_lo <= A x <= row_hi,
    col_lo <= x <= col_hi, x[integrality == 1] integer. This is what backends consume."""

    name: str
    c: np.ndarray
    offset: float
    A: sp.csr_matrix
    row_lo: np.ndarray
    row_hi: np.ndarray
    col_lo: np.ndarray
    col_hi: np.ndarray
    integrality: np.ndarray  # 0 continuous, 1 integer
    sense: Literal["min", "max"]
    #: (name, size) of the variable and constraint blocks, in order: names are made lazily
    var_blocks: list[tuple[str, int, bool]] = field(default_factory=list)
    con_blocks: list[tuple[str, int]] = field(default_factory=list)

    @property
    def col_names(self) -> list[str]:
        names: list[str] = []
        for name, size, scalar in self.var_blocks:
            names.extend([name] if scalar else (f"{name}[{k}]" for k in range(size)))
        return names

    @property
    def row_names(self) -> list[str]:
        names: list[str] = []
        for name, size in self.con_blocks:
            names.extend(f"{name}[{k}]" for k in range(size))
        return names

    @property
    def num_vars(self) -> int:
        return int(self.c.size)

    @property
    def num_rows(self) -> int:
        return int(self.A.shape[0])

    @property
    def is_mip(self) -> bool:
        return bool(np.any(self.integrality))


class Model:
    """Vectorized LP/MILP builder. Blocks of variables and constraints have unique names."""

    def __init__(self, name: str = "model"):
        self.name = name
        #: facts of the model its builder knows and a solver call's record keeps (JSON
        #: values, `stats`), such as the units its objective counts in
        self.notes: dict[str, Any] = {}
        self._lb: list[np.ndarray] = []
        self._ub: list[np.ndarray] = []
        self._int: list[np.ndarray] = []
        self.var_blocks: dict[str, VarBlockInfo] = {}
        self.variables: dict[str, Variable] = {}
        self.con_blocks: dict[str, ConBlockInfo] = {}
        self._con_specs: list[ConstraintSpec] = []
        self.num_vars = 0
        self.num_rows = 0
        self.objective: LinExpr = LinExpr.constant(0.0)
        self.sense: Literal["min", "max"] = "min"
        #: named expressions one block defines for the blocks after it (`define`, `expression`)
        self.expressions: dict[str, LinExpr] = {}

    # -- variables ------------------------------------------------------------------------
    def add_vars(
        self,
        name: str,
        shape: int | tuple[int, ...] = (),
        lb: ArrayLike = 0.0,
        ub: ArrayLike = np.inf,
        vtype: VarType = "continuous",
    ) -> Variable:
        """Add a block of variables of the given shape (bounds broadcast to it)."""
        if name in self.var_blocks:
            raise ModelError(f"variable block {name!r} already exists")
        if not isinstance(name, str) or not name:
            raise ModelError(f"variable block name {name!r}: give a non-empty name (solution values and exports are by name)")
        shp = (shape,) if isinstance(shape, int) else tuple(shape)
        n = math.prod(shp)
        lo = np.broadcast_to(np.asarray(lb, dtype=float), shp).reshape(-1).copy()
        hi = np.broadcast_to(np.asarray(ub, dtype=float), shp).reshape(-1).copy()
        if vtype == "binary":
            lo = np.maximum(lo, 0.0)
            hi = np.minimum(hi, 1.0)
        _check_bounds(f"variable block {name!r}", lo, hi)
        self._lb.append(lo)
        self._ub.append(hi)
        self._int.append(np.full(n, 0 if vtype == "continuous" else 1, dtype=np.int8))
        index = np.arange(self.num_vars, self.num_vars + n).reshape(shp)
        self.var_blocks[name] = VarBlockInfo(name, self.num_vars, shp, vtype)
        self.num_vars += n
        var = Variable(self, name, index)
        self.variables[name] = var
        return var

    def __getitem__(self, name: str) -> Variable:
        """The variable block ``name``; a `ModelError` naming the blocks that exist when no
        block has added it (yet): the blocks of a formulation run in their declared order."""
        var = self.variables.get(name)
        if var is None:
            raise ModelError(f"model {self.name!r} has no variable block {name!r} (it has: {', '.join(self.variables) or 'none'})")
        return var

    # -- named expressions ----------------------------------------------------------------
    def define(self, name: str, expr: LinExpr | Variable) -> LinExpr:
        """Name an expression (a duration, a load) so that later blocks use it by name."""
        if name in self.expressions:
            raise ModelError(f"expression {name!r} already exists")
        e = _to_expr(expr)
        self._check_own(f"expression {name!r}", e.owner, e.ncols)
        self.expressions[name] = e
        return e

    def expression(self, name: str) -> LinExpr:
        """The expression ``name`` defined by an earlier block."""
        e = self.expressions.get(name)
        if e is None:
            raise ModelError(f"model {self.name!r} has no expression {name!r} (it has: {', '.join(self.expressions) or 'none'})")
        return e

    def set_bounds(self, var: Variable, lb: ArrayLike | None = None, ub: ArrayLike | None = None) -> None:
        """Tighten or fix bounds of (a slice of) a variable block, held to what `add_vars`
        holds them to (a binary block's within [0, 1])."""
        if var.model is not self:
            raise ModelError(f"set_bounds: variable block {var.name!r} belongs to model {var.model.name!r}, not {self.name!r}")
        lo, hi = self.col_bounds()
        cols = var.index.reshape(-1)
        new_lo, new_hi = lo[cols].copy(), hi[cols].copy()
        if lb is not None:
            new_lo = np.broadcast_to(np.asarray(lb, float), var.shape).reshape(-1)
        if ub is not None:
            new_hi = np.broadcast_to(np.asarray(ub, float), var.shape).reshape(-1)
        _check_bounds(f"set_bounds of variable block {var.name!r}", new_lo, new_hi)
        if self.var_blocks[var.name].vtype == "binary" and (np.any(new_lo < 0) or np.any(new_hi > 1)):
            raise ModelError(f"set_bounds of variable block {var.name!r}: a binary variable's bounds lie within [0, 1]")
        lo[cols], hi[cols] = new_lo, new_hi
        self._lb, self._ub = [lo], [hi]

    def col_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        lo = np.concatenate(self._lb) if self._lb else np.zeros(0)
        hi = np.concatenate(self._ub) if self._ub else np.zeros(0)
        return lo, hi

    # -- constraints ----------------------------------------------------------------------
    def add_constraints(self, name: str, spec: ConstraintSpec) -> ConBlockInfo:
        """Add a named block of rows. Explicit zeros are dropped here, once."""
        if name in self.con_blocks:
            raise ModelError(f"constraint block {name!r} already exists")
        if not isinstance(spec, ConstraintSpec):
            raise ModelError(f"constraint block {name!r}: expected `expr <= / >= / == rhs`")
        self._check_own(f"constraint block {name!r}", spec.owner, spec.A.shape[1])
        A = _csr(spec.A)
        A.sum_duplicates()
        A.eliminate_zeros()
        n = A.shape[0]
        lo, hi = np.asarray(spec.lo, float), np.asarray(spec.hi, float)
        self._check_numbers(name, A, lo, hi)
        # a side past HUGE in the row's open direction is open, as every solver reads it
        # (and cvxpy's solvers fail on 1e300 rather than read it so)
        lo, hi = np.where(lo <= -HUGE, -np.inf, lo), np.where(hi >= HUGE, np.inf, hi)
        empty = np.diff(A.indptr) == 0
        if np.any(empty & ((spec.lo > 1e-9) | (spec.hi < -1e-9))):
            bad = int(np.flatnonzero(empty & ((spec.lo > 1e-9) | (spec.hi < -1e-9)))[0])
            raise InfeasibleByConstruction(
                f"constraint block {name!r} row {bad}: no variables but needs "
                f"{spec.lo[bad]} <= 0 <= {spec.hi[bad]}: the model is infeasible by construction"
            )
        info = ConBlockInfo(name, self.num_rows, self.num_rows + n, int(A.nnz))
        self.con_blocks[name] = info
        self._con_specs.append(ConstraintSpec(A, lo, hi))
        self.num_rows += n
        return info

    # -- objective ------------------------------------------------------------------------
    def minimize(self, expr: LinExpr | Variable | float) -> None:
        self._set_objective(expr, "min")

    def maximize(self, expr: LinExpr | Variable | float) -> None:
        self._set_objective(expr, "max")

    def _set_objective(self, expr: LinExpr | Variable | float, sense: Literal["min", "max"]) -> None:
        e = _to_expr(expr)
        if e.size != 1:
            e = e.sum()
        self._check_own("the objective", e.owner, e.ncols)
        A = _csr(e.A)
        bad = _first_bad(A.data)
        if bad is not None:
            raise ModelError(f"the objective: coefficient {float(A.data[bad]):g} of column {int(A.indices[bad])} is no finite number below {HUGE:g} in magnitude (solvers read 1e20 and more as infinite; NaN has no order)")
        if _first_bad(e.const) is not None:
            raise ModelError(f"the objective: constant {float(e.const.sum())!r} is no finite number below {HUGE:g} in magnitude")
        self.objective = e
        self.sense = sense

    # -- checks -----------------------------------------------------------------------------
    def _check_own(self, what: str, owner: Model | None, ncols: int) -> None:
        """An expression of this model's variables: none of another model's (`LinExpr.owner`)
        and no column beyond the ones it has."""
        if owner is not None and owner is not self:
            raise ModelError(f"{what} of model {self.name!r} holds variables of model {owner.name!r}: a model takes its own variables only")
        if ncols > self.num_vars:
            raise ModelError(f"{what} of model {self.name!r} refers to column {ncols - 1}, but the model has {self.num_vars} variables (an expression of another model's variables?)")

    def _check_numbers(self, name: str, A: sp.csr_matrix, lo: np.ndarray, hi: np.ndarray) -> None:
        """Rows a solver reads as written: finite coefficients below `LARGEST_COEFFICIENT`, no NaN side, no
        lower side of `HUGE` or more and no upper side of -`HUGE` or less (solvers would drop
        the row); a side of the wrong infinity (``expr >= inf``) is infeasible by
        construction."""
        bad = _first_bad(A.data, LARGEST_COEFFICIENT)
        if bad is not None:
            row = int(np.searchsorted(A.indptr, bad, side="right") - 1)
            raise ModelError(f"constraint block {name!r} row {row}: coefficient {float(A.data[bad]):g} of column {int(A.indices[bad])} is no finite number below {LARGEST_COEFFICIENT:g} in magnitude (HiGHS ignores larger ones, and solvers read 1e20 as infinite; rescale the row)")
        if np.any(np.isnan(lo)) or np.any(np.isnan(hi)):
            row = int(np.flatnonzero(np.isnan(lo) | np.isnan(hi))[0])
            raise ModelError(f"constraint block {name!r} row {row}: a NaN side has no meaning")
        wrong = (lo == np.inf) | (hi == -np.inf)
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise InfeasibleByConstruction(f"constraint block {name!r} row {row}: needs {float(lo[row])!r} <= expression <= {float(hi[row])!r}, which no finite value meets: the model is infeasible by construction")
        # a side past HUGE in the row's open direction (expr <= 1e300: a budget that never
        # binds) is read as open, as every solver reads it; one past it in the other
        # direction (expr >= 1e20) would be read as open too, which is the opposite
        huge = (lo >= HUGE) | (hi <= -HUGE)
        if huge.any():
            row = int(np.flatnonzero(huge)[0])
            raise ModelError(f"constraint block {name!r} row {row}: needs {float(lo[row])!r} <= expression <= {float(hi[row])!r}, a side of {HUGE:g} or more in magnitude that solvers read as infinite, dropping the row (rescale the row)")

    # -- assembly -------------------------------------------------------------------------
    def to_arrays(self) -> ModelArrays:
        """Assemble the model once into sparse arrays."""
        n = self.num_vars
        c = np.zeros(n)
        obj = _as_rows(self.objective.A, n)
        c[: obj.shape[1]] = np.asarray(obj.sum(axis=0)).reshape(-1)[:n]
        if self._con_specs:
            A = sp.vstack([_as_rows(s.A, n) for s in self._con_specs], format="csr")
            row_lo = np.concatenate([s.lo for s in self._con_specs])
            row_hi = np.concatenate([s.hi for s in self._con_specs])
        else:
            A = sp.csr_matrix((0, n))
            row_lo = row_hi = np.zeros(0)
        lo, hi = self.col_bounds()
        integ = np.concatenate(self._int) if self._int else np.zeros(0, dtype=np.int8)
        return ModelArrays(
            name=self.name,
            c=c,
            offset=float(self.objective.const.sum()),
            A=A,
            row_lo=row_lo,
            row_hi=row_hi,
            col_lo=lo,
            col_hi=hi,
            integrality=integ,
            sense=self.sense,
            var_blocks=[(b.name, math.prod(b.shape), not b.shape) for b in self.var_blocks.values()],
            con_blocks=[(b.name, b.stop - b.start) for b in self.con_blocks.values()],
        )

    def values_by_block(self, x: np.ndarray) -> dict[str, np.ndarray]:
        """Split a solution vector into arrays shaped like the variable blocks."""
        return {b.name: np.asarray(x[b.start : b.stop]).reshape(b.shape) for b in self.var_blocks.values()}

    def vector(self, values: dict[str, ArrayLike]) -> np.ndarray:
        """A full solution vector from values per variable block (others at their lower
        bound, or 0 when unbounded below); used for warm starts."""
        lo, hi = self.col_bounds()
        x = np.where(np.isfinite(lo), lo, np.minimum(0.0, hi))
        for name, vals in values.items():
            b = self.var_blocks.get(name)
            if b is None:
                raise ModelError(f"model {self.name!r} has no variable block {name!r} to give values (it has: {', '.join(self.var_blocks) or 'none'}): a warm start for blocks the model leaves out?")
            x[b.start : b.stop] = np.broadcast_to(np.asarray(vals, dtype=float), b.shape).reshape(-1)
        return x

    def stats(self) -> dict[str, object]:
        """Sizes per block: variables, binaries, integers, rows and nonzeros; and the
        builder's `notes` (the record a solver call keeps of the model)."""
        integ = np.concatenate(self._int) if self._int else np.zeros(0)
        lo, hi = self.col_bounds()
        binary = (integ == 1) & (lo >= 0) & (hi <= 1)
        return {
            "name": self.name,
            "sense": self.sense,
            "variables": self.num_vars,
            "binaries": int(binary.sum()),
            "integers": int(((integ == 1) & ~binary).sum()),
            "rows": self.num_rows,
            "nonzeros": int(sum(b.nnz for b in self.con_blocks.values())),
            "variable_blocks": {b.name: {"shape": list(b.shape), "type": b.vtype} for b in self.var_blocks.values()},
            "constraint_blocks": {b.name: {"rows": b.stop - b.start, "nonzeros": b.nnz} for b in self.con_blocks.values()},
            **self.notes,
        }
