"""Approximation guarantees of known heuristics, checked on stored runs.

A guarantee ``objective <= RHS`` usually involves an unknown optimum, so the check works
with an interval for the RHS built from proven quantities only:

* ``rhs_upper``: an upper estimate of the RHS (the unknown optimum replaced by a proven
  *upper* bound on it, such as a feasible schedule). ``objective > rhs_upper`` is a
  **certain** violation: the heuristic broke its guarantee on this instance.
* ``rhs_lower``: a lower estimate (the optimum replaced by a proven lower bound).
  ``rhs_upper >= objective > rhs_lower`` is only a *possible* violation: reported, never
  counted as a wrong answer.

Placement (units: seconds):

* **ETF** (Hwang, Chow, Anger & Lee, SIAM J. Comput. 18(2), 1989): on identical devices
  with communication delays, ETF's makespan <= (2 - 1/m) * OPT_nocomm + C_max, where
  OPT_nocomm is the optimum of the same graph without communication (P|prec|Cmax) and
  C_max the largest total communication along any chain, each edge charged its worst
  delay over device pairs. Baechi's m-ETF is ETF when memory never binds, so the
  precondition is: op times equal on every device, no colocation groups, the independent
  communication model, and every device able to hold all ops at once. OPT_nocomm is
  bracketed by max(critical path, work / m) below and, above, by the best of a
  no-communication list schedule and every verified plan of the instance (a plan that is
  feasible with communication and memory limits stays feasible without them).
* **Hanen–Munier** (Discrete Applied Math. 108, 2001): for small communication times
  (rho = max c / min p <= 1, identical devices, one delay per edge), scheduling on m
  processors from the rounded LP solution has ratio 1 + (1 - 1/m) * alpha with
  alpha = (2 + 2 rho) / (2 + rho) for the unbounded-processor schedule; for unit tasks with
  unit delays this is 7/3 - 4/(3m). The guarantee is proven for Hanen and Munier's own
  m-processor algorithm; Baechi's m-SCT (favourite-aware ETF) is close but not identical,
  so an exceedance is reported for m-SCT as a finding about the heuristic, not as a
  wrong answer. Precondition in addition to ETF's: homogeneous links and theta = 0.5 (the
  paper's rounding). OPT is bracketed by the best certified bound and the best verified
  objective of the instance.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.bench.store import column_json
from distplan.models.graphs import topological_order


@dataclass
class GuaranteeCheck:
    """One heuristic run measured against a guarantee (seconds for placement)."""

    run_key: str
    instance: str
    formulation: str
    backend: str
    guarantee: str
    applies: bool
    precondition: str
    objective: float
    rhs_lower: float | None = None
    rhs_upper: float | None = None
    #: a certain violation is a wrong answer only when the guarantee is proven for this very algorithm
    binding: bool = True

    @property
    def verdict(self) -> str:
        if not self.applies:
            return "not applicable"
        if self.rhs_upper is not None and self.objective > self.rhs_upper * (1 + 1e-9) + 1e-12:
            return "violated"
        if self.rhs_lower is not None and self.objective > self.rhs_lower * (1 + 1e-9) + 1e-12:
            return "possibly violated"
        return "holds"


@dataclass
class InstanceFacts:
    """Proven facts about one instance, gathered from all verified runs."""

    best_objective: float | None  # smallest verified objective (an upper bound on OPT)
    best_bound: float | None  # largest certified lower bound on OPT


Checker = Callable[[Any, dict[str, Any], InstanceFacts], GuaranteeCheck]
_CHECKERS: dict[tuple[str, str], list[Checker]] = {}


def register_guarantee(kind: str, formulation: str, checker: Checker) -> None:
    _CHECKERS.setdefault((kind, formulation), []).append(checker)


def checks_for(kind: str, formulation: str) -> list[Checker]:
    return list(_CHECKERS.get((kind, formulation), []))


# -- placement ----------------------------------------------------------------------------------


def longest_chain(n: int, src: np.ndarray, dst: np.ndarray, node_weight: np.ndarray, edge_weight: np.ndarray) -> float:
    """Largest total weight of a path (node weights plus edge weights along it)."""
    order = topological_order(n, src, dst).tolist()
    out: list[list[int]] = [[] for _ in range(n)]
    for e, a in enumerate(src.tolist()):
        out[a].append(e)
    head = np.zeros(n)
    for v in order:
        f = head[v] + node_weight[v]
        for e in out[v]:
            w = int(dst[e])
            head[w] = max(head[w], f + edge_weight[e])
    return float(np.max(head + node_weight)) if n else 0.0


def no_comm_schedule_makespan(n: int, m: int, p: np.ndarray, src: np.ndarray, dst: np.ndarray) -> float:
    """Makespan (seconds) of a feasible schedule on m identical devices without
    communication: ops in topological order, each on the device free first."""
    order = topological_order(n, src, dst).tolist()
    preds: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(src.tolist(), dst.tolist()):
        preds[b].append(a)
    free = np.zeros(m)
    end = np.zeros(n)
    for v in order:
        d = int(np.argmin(free))
        s = max(free[d], max((end[u] for u in preds[v]), default=0.0))
        end[v] = s + p[v]
        free[d] = end[v]
    return float(end.max()) if n else 0.0


def _placement_precondition(inst: Any) -> tuple[bool, str]:
    t = inst.time
    if not np.all(t == t[:, :1]):
        return False, "op times differ between devices (ETF assumes identical devices)"
    if any(g is not None for g in inst.colocate):
        return False, "colocation groups restrict devices"
    if inst.communication != "independent":
        return False, f"communication model {inst.communication!r} (transfers contend)"
    total = float(inst.memory_need().sum())
    if np.any(inst.device_memory < total):
        return False, "memory may bind (some device cannot hold every op at once)"
    return True, "identical devices, no colocation, independent transfers, memory never binds"


def _max_edge_delay(inst: Any) -> np.ndarray:
    m = inst.n_devices
    if m == 1 or inst.n_edges == 0:
        return np.zeros(inst.n_edges)
    off = ~np.eye(m, dtype=bool)
    lat = inst.latency[off]
    inv_bw = 1.0 / inst.bandwidth[off]
    return np.max(lat[None, :] + inst.edge_bytes[:, None] * inv_bw[None, :], axis=1)


def etf_guarantee(inst: Any, run: dict[str, Any], facts: InstanceFacts) -> GuaranteeCheck:
    """Hwang et al.'s ETF bound (2 - 1/m) OPT_nocomm + C_max (see the module docstring)."""
    check = GuaranteeCheck(run["run_key"], run["instance"], run["formulation"], run["backend"], "ETF: (2 - 1/m) OPT_nocomm + C_max", False, "", float(run["objective"]))
    ok, why = _placement_precondition(inst)
    check.precondition = why
    if not ok:
        return check
    n, m = inst.n_ops, inst.n_devices
    p = inst.time[:, 0].astype(float)
    c_max = longest_chain(n, inst.src, inst.dst, np.zeros(n), _max_edge_delay(inst))
    lb_nocomm = max(longest_chain(n, inst.src, inst.dst, p, np.zeros(inst.n_edges)), float(p.sum()) / m)
    ub_nocomm = no_comm_schedule_makespan(n, m, p, inst.src, inst.dst)
    if facts.best_objective is not None:
        ub_nocomm = min(ub_nocomm, facts.best_objective)
    factor = 2.0 - 1.0 / m
    check.applies = True
    check.rhs_lower = factor * lb_nocomm + c_max
    check.rhs_upper = factor * ub_nocomm + c_max
    return check


def hanen_munier_guarantee(inst: Any, run: dict[str, Any], facts: InstanceFacts) -> GuaranteeCheck:
    """Hanen–Munier's 1 + (1 - 1/m)(2 + 2 rho)/(2 + rho) ratio (see the module docstring)."""
    check = GuaranteeCheck(
        run["run_key"], run["instance"], run["formulation"], run["backend"], "Hanen-Munier: 1 + (1 - 1/m)(2 + 2 rho)/(2 + rho) OPT", False, "", float(run["objective"]), binding=False
    )
    ok, why = _placement_precondition(inst)
    if not ok:
        check.precondition = why
        return check
    m = inst.n_devices
    if m > 1:
        off = ~np.eye(m, dtype=bool)
        if np.ptp(inst.bandwidth[off]) != 0 or np.ptp(inst.latency[off]) != 0:
            check.precondition = "links differ between device pairs"
            return check
    theta = (column_json(run, "params_json", {}) or {}).get("theta", 0.5)
    if theta != 0.5:
        check.precondition = f"theta = {theta} (the paper rounds at 0.5)"
        return check
    p = inst.time[:, 0].astype(float)
    c = _max_edge_delay(inst)
    if inst.n_edges and float(p.min()) <= 0:
        check.precondition = "an op takes no time (rho is unbounded)"
        return check
    rho = float(c.max()) / float(p.min()) if inst.n_edges else 0.0
    if rho > 1:
        check.precondition = f"communication is not small: rho = max c / min p = {rho:.3g} > 1"
        return check
    ratio = 1.0 + (1.0 - 1.0 / m) * (2.0 + 2.0 * rho) / (2.0 + rho)
    check.applies = True
    check.precondition = f"small communication (rho = {rho:.3g}), ratio {ratio:.4g}"
    if facts.best_objective is not None:
        check.rhs_upper = ratio * facts.best_objective
    if facts.best_bound is not None and math.isfinite(facts.best_bound):
        check.rhs_lower = ratio * facts.best_bound
    return check


register_guarantee("placement", "baechi_etf", etf_guarantee)
register_guarantee("placement", "baechi_sct", hanen_munier_guarantee)
