"""Raw solver options distplan keeps to itself: the ones that change what a result means.

A run's time limit and gap tolerance are distplan's own (``time_limit=`` / ``--time-limit``,
``mip_gap=`` / ``--mip-gap``): the limit covers every phase of the run, both are recorded
with every solver call, and `distplan verify` re-checks "optimal" against the recorded gap.
Given again as a raw solver option (``solver_options`` / ``--solver-option``), the raw one
won: it could lift the hard limit, or end a search "optimal" at a gap the record does not
show. An objective cutoff, target or stop prunes or ends the search by objective value, so
the solver's bound, its "optimal" and its "infeasible" stop being proofs (review rev23:
HiGHS's ``objective_bound=0`` made pipeline_milp claim 109.5 s optimal, with a "proven"
bound of 109.5 s, beside a 105.5 s plan, and alpa_ilp call a feasible instance infeasible;
verify passed both). These options are refused before anything runs, with the argument to
use instead. (CBC's ``increment`` is not among them: the CBC backends read it and then
claim no completed search.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: why each kind of option is reserved, and what to do instead
TIME = ("the run's time limit is distplan's own: it covers every phase and is recorded with every call", "give time_limit= (--time-limit) instead")
GAP = ("the gap tolerance is distplan's own: it is recorded, and verify re-checks 'optimal' against it", "give mip_gap= (--mip-gap) instead")
CUT = ("it prunes or stops the search by objective value, so the solver's bound, its 'optimal' and its 'infeasible' would no longer be proofs", "leave it out")

#: HiGHS option names (highspy, and cvxpy's HiGHS adapter)
HIGHS: dict[str, tuple[str, str]] = {
    "time_limit": TIME,
    "mip_rel_gap": GAP,
    "mip_abs_gap": GAP,
    "objective_bound": CUT,
    "objective_target": CUT,
}
#: SCIP parameter names (PySCIPOpt, and cvxpy's ``scip_params``)
SCIP: dict[str, tuple[str, str]] = {
    "limits/time": TIME,
    "limits/softtime": TIME,
    "limits/gap": GAP,
    "limits/absgap": GAP,
    "limits/primal": CUT,
    "limits/dual": CUT,
}
#: CBC command-line names, lower case, with the shortest prefix CBC takes for each (it
#: matches any longer prefix, in any case: ``-sec``, ``-Seconds``; checked with CBC 2.10)
CBC: dict[str, tuple[int, tuple[str, str]]] = {
    "seconds": (3, TIME),
    "timemode": (5, TIME),
    "ratiogap": (5, GAP),
    "allowablegap": (5, GAP),
    "cutoff": (4, CUT),
}

#: cvxpy's CBC adapter's option names (it passes them to CyLP)
CVXPY_CBC: dict[str, tuple[str, str]] = {"maximumSeconds": TIME, "allowableGap": GAP, "allowableFractionGap": GAP, "allowablePercentageGap": GAP}
#: GLPK option names (through Pyomo)
GLPK: dict[str, tuple[str, str]] = {"tmlim": TIME, "mipgap": GAP}

#: a reserved option found among raw options: (its name, why, what to do instead)
Reserved = tuple[str, str, str]


def highs_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (HiGHS option name -> value) that distplan reserves."""
    return _first(raw, HIGHS.get)


def scip_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (SCIP parameter name -> value) that distplan reserves."""
    return _first(raw, SCIP.get)


def glpk_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (GLPK option name -> value) that distplan reserves."""
    return _first(raw, GLPK.get)


def cbc_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (CBC command-line name, with or without its ``-``, -> value)
    that distplan reserves, under any abbreviation CBC takes for it."""

    def reason(key: str) -> tuple[str, str] | None:
        typed = key.lstrip("-").lower()
        for name, (shortest, why) in CBC.items():
            if len(typed) >= shortest and name.startswith(typed):
                return why
        return None

    return _first(raw, reason)


def cvxpy_reserved(solver: str, time_limit_key: tuple[str, ...] | None, mip_gap_key: tuple[str, ...] | None, raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (cvxpy's solver options for ``solver``) that distplan reserves:
    the keys it sets the run's time limit and gap with (``time_limit_key``,
    ``mip_gap_key``, top level or nested), and HiGHS's and SCIP's own reserved names,
    nested ones named ``outer.inner``, and the time and gap names of its CBC adapter."""
    own = {key: why for key, why in ((time_limit_key, TIME), (mip_gap_key, GAP)) if key is not None}
    names = {"HIGHS": HIGHS, "SCIP": SCIP, "CBC": CVXPY_CBC}.get(solver, {})
    for key, value in raw.items():
        key = str(key)
        why = own.get((key,)) or names.get(key)
        if why is not None:
            return key, *why
        if isinstance(value, Mapping):
            for inner in value:
                why = own.get((key, str(inner))) or (names.get(str(inner)) if key in ("highs_options", "scip_params") else None)
                if why is not None:
                    return f"{key}.{inner}", *why
    return None


def _first(raw: Mapping[str, Any], reason: Callable[[str], tuple[str, str] | None]) -> Reserved | None:
    for key in raw:
        why = reason(str(key))
        if why is not None:
            return str(key), *why
    return None
