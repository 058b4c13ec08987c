"""The bandwidth instance as solver data: aggregated traffic terms and named linear rows.

Units inside the formulations: bandwidth in GB/s (1e9 bytes/s), traffic in GB, time in
seconds, cost in USD. Converting back to bytes/s happens in `to_plan`.

Training time is ``T(B) = C + sum_k w_k max_d u_kd / B_d`` (LIBRA, no-overlap loop):
every collective contributes ``max_d m_d / B_d`` with ``m = S * f(type, npus)`` linear in
its size S, so collectives with the same (type, group) are one term of weight sum(S), and
terms whose per-dimension vectors are proportional (all-reduce is twice reduce-scatter)
merge too. On the bundled LIBRA cases this leaves 1-3 terms instead of up to 162. The
per-dimension factors f are derived here in closed form, independently of the evaluator's
chunk walk in `distplan.models.bandwidth_eval`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from distplan.errors import InputError
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_plan import BandwidthPlan
from distplan.models.bandwidth_records import GB

#: relative precision under which two normalized traffic vectors count as the same term
_MERGE_DIGITS = 12


def traffic_factors(ctype: str, npus: tuple[int, ...]) -> np.ndarray:
    """Bytes carried per dimension per byte of collective size (closed form of LIBRA's model)."""
    n = np.asarray(npus, dtype=float)
    frac = (n - 1.0) / n
    if ctype == "all_to_all":
        return frac
    if ctype in ("all_reduce", "reduce_scatter"):
        # chunk entering dimension d is S / prod(n_k, k < d)
        before = np.concatenate([[1.0], np.cumprod(n)[:-1]])
        return (2.0 if ctype == "all_reduce" else 1.0) * frac / before
    if ctype == "all_gather":
        # reverse walk: chunk entering dimension d is S * prod(n_k, k > d); carries (n_d - 1) of it
        after = np.concatenate([np.cumprod(n[::-1])[::-1][1:], [1.0]])
        return (n - 1.0) * after
    raise ValueError(f"unknown collective {ctype!r}")


@dataclass
class Row:
    """A named linear row ``coeffs @ B sense rhs`` (B in GB/s), scaled to max |coeff| = 1."""

    name: str
    coeffs: np.ndarray
    sense: str
    rhs: float
    #: the JSON path of the constraint in the instance (for messages)
    path: str
    #: the original row is ``scale * coeffs sense scale * rhs``
    scale: float = 1.0
    #: unit of the original row ("GB/s" or "USD")
    unit: str = "GB/s"


@dataclass
class Program:
    """An instance in solver units (GB, GB/s, s, USD), with aggregated time terms."""

    instance: BandwidthInstance
    dims: list[str]
    #: seconds of compute per iteration (constant term C)
    compute_seconds: float
    #: K x D traffic per unit weight (normalized rows, max entry 1), weights w (GB)
    terms: np.ndarray
    weights: np.ndarray
    #: dimensions some term uses
    used: np.ndarray
    #: USD per GB/s of each dimension
    cost_per_gbps: np.ndarray
    lb: np.ndarray
    ub: np.ndarray
    rows: list[Row]
    #: per dimension: allowed bandwidths (GB/s) or None
    options: list[np.ndarray | None]
    warnings: list[str] = field(default_factory=list)

    @property
    def num_dims(self) -> int:
        return len(self.dims)

    def comm_time(self, bandwidth_gbps: np.ndarray) -> float:
        """Communication seconds of an allocation (GB/s); inf when a used dimension has none."""
        b = np.asarray(bandwidth_gbps, dtype=float)
        if not self.terms.size:
            return 0.0
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(self.terms > 0, self.terms / np.where(b > 0, b, 0.0)[None, :], 0.0)
        ratio = np.where((self.terms > 0) & (b[None, :] <= 0), np.inf, ratio)
        return float(self.weights @ ratio.max(axis=1))

    def cost(self, bandwidth_gbps: np.ndarray) -> float:
        return float(self.cost_per_gbps @ np.asarray(bandwidth_gbps, dtype=float))

    def rows_matrix(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rows as (A, lo, hi) with -inf/inf for one-sided rows."""
        if not self.rows:
            return np.zeros((0, self.num_dims)), np.zeros(0), np.zeros(0)
        A = np.vstack([r.coeffs for r in self.rows])
        lo = np.array([r.rhs if r.sense in (">=", "==") else -np.inf for r in self.rows])
        hi = np.array([r.rhs if r.sense in ("<=", "==") else np.inf for r in self.rows])
        return A, lo, hi


    def row_groups(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(A, lo, hi) of the instance rows and the indices of its ==, <= and >= rows."""
        A, lo, hi = self.rows_matrix()
        eq = np.flatnonzero(lo == hi)
        le = np.flatnonzero(np.isfinite(hi) & (lo != hi))
        ge = np.flatnonzero(np.isfinite(lo) & (lo != hi))
        return A, lo, hi, eq, le, ge
    def to_plan(self, bandwidth_gbps: np.ndarray, objective: str = "time") -> BandwidthPlan:
        """A plan in bytes/s, clipped into the dimension bounds (solver noise only)."""
        b = np.clip(np.asarray(bandwidth_gbps, dtype=float), self.lb, self.ub)
        return BandwidthPlan(bandwidth={n: float(v) * GB for n, v in zip(self.dims, b, strict=True)}, objective=objective)


def _row(name: str, coeffs: np.ndarray, sense: str, rhs: float, path: str, unit: str = "GB/s") -> Row:
    scale = float(np.max(np.abs(coeffs)))
    return Row(name=name, coeffs=coeffs / scale, sense=sense, rhs=rhs / scale, path=path, scale=scale, unit=unit)


def prepare(inst: BandwidthInstance) -> Program:
    """Aggregate the workload into time terms and collect the constraints as named rows."""
    dims = [d.name for d in inst.dimensions]
    D = len(dims)
    groups: dict[tuple[str, tuple[int, ...]], float] = {}
    compute = 0.0
    for layer in inst.layers:
        compute += float(sum(layer.compute))
        for coll in layer.collectives:
            if coll.bytes <= 0 or all(n == 1 for n in coll.npus):
                continue
            group = (coll.type, coll.npus)
            groups[group] = groups.get(group, 0.0) + coll.bytes / GB
    vectors: list[np.ndarray] = []
    weights: list[float] = []
    index: dict[tuple[float, ...], int] = {}
    for (ctype, npus), size_gb in groups.items():
        f = traffic_factors(ctype, npus)
        top = float(f.max())
        unit = f / top
        key = tuple(np.round(unit, _MERGE_DIGITS))
        if key in index:
            weights[index[key]] += size_gb * top
        else:
            index[key] = len(vectors)
            vectors.append(unit)
            weights.append(size_gb * top)
    terms = np.vstack(vectors) if vectors else np.zeros((0, D))
    used: np.ndarray = np.asarray((terms > 0).any(axis=0)) if vectors else np.zeros(D, dtype=bool)
    n_total = math.prod(d.size for d in inst.dimensions)
    cost = np.array([n_total * (d.price_link + (d.price_switch + d.price_nic if d.block == "switch" else 0.0)) * GB for d in inst.dimensions])
    lb = np.array([d.min_bandwidth / GB for d in inst.dimensions])
    ub = np.array([d.max_bandwidth / GB for d in inst.dimensions])
    rows: list[Row] = []
    if inst.total_bandwidth is not None:
        sense, value = inst.total_bandwidth
        rows.append(_row(f"total_bandwidth {sense} {value / GB:g} GB/s", np.ones(D), sense, value / GB, "constraints.total_bandwidth"))
    if inst.cost_budget is not None:
        rows.append(_row(f"cost_budget <= {inst.cost_budget:g} USD", cost.copy(), "<=", inst.cost_budget, "constraints.cost_budget", "USD"))
    pos = {n: k for k, n in enumerate(dims)}
    for k, con in enumerate(inst.linear):
        coeffs = np.zeros(D)
        for n, c in con.coeffs:
            coeffs[pos[n]] += c
        rows.append(_row(con.name, coeffs, con.sense, con.rhs / GB, f"constraints.linear[{k}]"))
    options = [None if d.bandwidth_options is None else np.asarray(d.bandwidth_options, dtype=float) / GB for d in inst.dimensions]
    prog = Program(
        instance=inst, dims=dims, compute_seconds=compute, terms=terms, weights=np.asarray(weights, dtype=float), used=used,
        cost_per_gbps=cost, lb=lb, ub=ub, rows=rows, options=options,
    )
    for idle in np.flatnonzero(~used):
        k = int(idle)
        prog.warnings.append(
            f"dimension {dims[k]} carries no traffic: it gets the smallest bandwidth the constraints allow (min_bandwidth {lb[k]:g} GB/s when free)"
        )
    return prog


def implied_upper_bounds(prog: Program) -> np.ndarray:
    """The largest bandwidth (GB/s) each dimension can take under the rows with nonnegative
    coefficients and a ``<=`` or ``==`` sense (a total bandwidth, a cost budget), the other
    dimensions at their ``lb`` (>= 0): a max_bandwidth above it never binds (one of 1e9 GB/s
    beside a total of 500 GB/s set the scale, and the conic program lost 5% to a baseline)."""
    top = np.full(prog.num_dims, np.inf)
    for r in prog.rows:
        if r.sense in ("<=", "==") and np.all(r.coeffs >= 0):
            rest = float(r.coeffs @ prog.lb)
            for k in np.flatnonzero(r.coeffs > 0):
                top[k] = min(top[k], (r.rhs - rest + r.coeffs[k] * prog.lb[k]) / r.coeffs[k])
    return top


def bandwidth_scale(prog: Program) -> float:
    """A typical per-dimension bandwidth (GB/s): the largest bandwidth number of the instance over D."""
    values = [abs(r.rhs * r.scale) for r in prog.rows if r.unit == "GB/s" and r.rhs]
    values += [float(v) for v in np.minimum(prog.ub, implied_upper_bounds(prog)) if np.isfinite(v)]
    values += [float(v) for v in prog.lb if v > 0]
    if not values:
        # only USD rows (a cost budget): the bandwidths a nonnegative ``<=`` row allows each
        # dimension on its own (a budget of 4e-3 USD allows ~1e-3 GB/s, not 100 GB/s)
        for r in prog.rows:
            if r.sense in ("<=", "==") and r.rhs > 0 and np.all(r.coeffs >= 0):
                values += [float(r.rhs / a) for a in r.coeffs if a > 0]
    return max(values) / prog.num_dims if values else 100.0


def syntactically_bounded(prog: Program) -> np.ndarray:
    """Dimensions whose bandwidth is bounded above by a bound or a single nonnegative row.

    A row ``a @ B <= r`` (or ``==``) with a >= 0 bounds every B_d with a_d > 0 (B >= 0);
    a ``>=`` row with a <= 0 likewise. Other cases need an LP (`bounded_above` callers).
    """
    bounded = np.isfinite(prog.ub).copy()
    for row in prog.rows:
        a = row.coeffs
        if row.sense in ("<=", "==") and np.all(a >= 0):
            bounded |= a > 0
        if row.sense in (">=", "==") and np.all(a <= 0):
            bounded |= a < 0
    return bounded


def unbounded_error(prog: Program, dims: list[int]) -> InputError:
    names = ", ".join(prog.dims[k] for k in dims)
    return InputError(
        "constraints",
        f"the bandwidth of dimension(s) {names} is not bounded above, so training time has no minimum",
        "add constraints.total_bandwidth, a cost_budget, or max_bandwidth on those dimensions",
    )
