"""Which raw solver options distplan takes: only those that cannot change what a result
proves.

A run's time limit and gap tolerance are distplan's own (``time_limit=`` / ``--time-limit``,
``mip_gap=`` / ``--mip-gap``): the limit covers every phase of the run, both are recorded
with every solver call, and `distplan verify` re-checks "optimal" against the recorded gap.
Given again as a raw solver option (``solver_options`` / ``--solver-option``), the raw one
won: it could lift the hard limit, or end a search "optimal" at a gap the record does not
show. An objective cutoff, target or stop prunes or ends the search by objective value, so
the solver's bound, its "optimal" and its "infeasible" stop being proofs (review rev23:
HiGHS's ``objective_bound=0`` made pipeline_milp claim 109.5 s optimal, with a "proven"
bound of 109.5 s, beside a 105.5 s plan, and alpa_ilp call a feasible instance infeasible;
verify passed both). Those are refused with the argument to use instead (`HIGHS`, `SCIP`,
`CBC`, ...); every other option must be on its backend's accepted list (`HIGHS_ACCEPTED`,
...), since a list of what breaks a proof is never complete (review rev23b). CBC's
``increment`` is refused with its cutoff: CBC ends "optimal" after skipping solutions
better by less than it (review rev23c).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

#: why each kind of option is refused, and what to do instead
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
    "increment": (3, CUT),
}
#: cvxpy's CBC adapter's option names (it passes them to CyLP)
CVXPY_CBC: dict[str, tuple[str, str]] = {"maximumSeconds": TIME, "allowableGap": GAP, "allowableFractionGap": GAP, "allowablePercentageGap": GAP}
#: GLPK option names (through Pyomo)
GLPK: dict[str, tuple[str, str]] = {"tmlim": TIME, "mipgap": GAP}

# -- what is accepted -------------------------------------------------------------------
# A list of what may break a proof is never complete (review rev23b: CBC's ``max`` solved
# the maximisation and reported it as a proven minimum, HiGHS's dual_feasibility_tolerance
# "proved" 117.5 s beside a 105.5 s plan, ``doH=-cutoff=0`` smuggled a cutoff in as a
# value): every other raw option is refused unless listed below, as one that cannot change
# what a bound, an "optimal" or an "infeasible" proves: search effort, node and solution
# limits (their terminations are limits, never "optimal"), presolve, heuristics, cuts,
# branching, randomness and output. Tolerances are not among them.
NOT_VETTED = ("distplan accepts only raw options that cannot change what a bound, 'optimal' or 'infeasible' proves", "use one of: {allowed}")

HIGHS_ACCEPTED = frozenset({
    "mip_max_nodes", "mip_max_leaves", "mip_max_stall_nodes", "mip_max_improving_sols", "mip_heuristic_effort",
    "mip_detection_symmetry", "presolve", "parallel", "random_seed", "simplex_strategy", "simplex_scale_strategy",
    "output_flag", "log_to_console",
})
#: HiGHS's node and solution limits: taken on the backends whose record maps them
#: (`highs.node_limit`: ``highs``, ``pulp-highs``); through Pyomo and cvxpy a stop on them
#: was recorded as a time or iteration limit, once with a "feasible" objective of 0 and
#: no solution (review rev23c)
HIGHS_LIMITS = frozenset({"mip_max_nodes", "mip_max_leaves", "mip_max_stall_nodes", "mip_max_improving_sols"})
HIGHS_ADAPTER_ACCEPTED = HIGHS_ACCEPTED - HIGHS_LIMITS
#: SCIP parameter families (a name equal to one, or under one ending in "/")
SCIP_ACCEPTED = ("limits/nodes", "limits/totalnodes", "limits/stallnodes", "limits/solutions", "limits/bestsol",
                 "presolving/", "heuristics/", "separating/", "branching/", "randomization/", "display/")
#: CBC command-line names, lower case, with the shortest prefix CBC takes for each
#: (``increment`` is refused with the cutoff: it skips solutions better by less than it,
#: and CBC still ends "optimal", review rev23c)
CBC_ACCEPTED: dict[str, int] = {"cutsonoff": 4, "heuristicsonoff": 4, "preprocess": 6, "maxnodes": 4, "maxsolutions": 5,
                                "presolve": 5, "randomseed": 7, "loglevel": 3}
GLPK_ACCEPTED: frozenset[str] = frozenset()
#: per cvxpy solver: the top-level keys it accepts, and per nested key the ones under it
CVXPY_ACCEPTED: dict[str, tuple[frozenset[str], dict[str, frozenset[str] | tuple[str, ...]]]] = {
    "HIGHS": (HIGHS_ADAPTER_ACCEPTED, {"highs_options": HIGHS_ADAPTER_ACCEPTED}),
    "SCIP": (frozenset(), {"scip_params": SCIP_ACCEPTED}),
    "SCIPY": (frozenset(), {"scipy_options": frozenset({"presolve", "node_limit", "disp"})}),
    "CBC": (frozenset({"maximumNodes", "maximumSolutions"}), {}),
    "GLPK_MI": (frozenset(), {}),
    "CLARABEL": (frozenset({"max_iter", "verbose"}), {}),
    "SCS": (frozenset({"max_iters", "verbose", "acceleration_lookback"}), {}),
    "OSQP": (frozenset({"max_iter", "verbose", "polish"}), {}),
    "ECOS": (frozenset({"max_iters", "verbose"}), {}),
}

#: a refused option found among raw options: (its name, why, what to do instead)
Reserved = tuple[str, str, str]


def _not_vetted(key: str, allowed: str) -> Reserved:
    why, instead = NOT_VETTED
    return key, why, instead.format(allowed=allowed or "none (this backend takes no raw options)")


def _scip_accepted(key: str) -> bool:
    return any(key == fam or (fam.endswith("/") and key.startswith(fam)) for fam in SCIP_ACCEPTED)


def highs_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (HiGHS option name -> value) that distplan refuses: its own
    time limit and gap, objective cutoffs, and every option not in `HIGHS_ACCEPTED`."""
    return _first(raw, HIGHS.get) or _first_unlisted(raw, HIGHS_ACCEPTED.__contains__, ", ".join(sorted(HIGHS_ACCEPTED)))


def highs_adapter_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """`highs_reserved` for HiGHS through Pyomo: its limits are refused too
    (`HIGHS_LIMITS`)."""
    return _first(raw, HIGHS.get) or _first_unlisted(raw, HIGHS_ADAPTER_ACCEPTED.__contains__, ", ".join(sorted(HIGHS_ADAPTER_ACCEPTED)))


def scip_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (SCIP parameter name -> value) that distplan refuses."""
    return _first(raw, SCIP.get) or _first_unlisted(raw, _scip_accepted, ", ".join(SCIP_ACCEPTED))


def glpk_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (GLPK option name -> value) that distplan refuses."""
    return _first(raw, GLPK.get) or _first_unlisted(raw, GLPK_ACCEPTED.__contains__, "")


def cbc_reserved(raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (CBC command-line name, with or without its ``-``, -> value)
    that distplan refuses, under any abbreviation CBC takes for it: its own time limit and
    gap, the cutoff, every name not in `CBC_ACCEPTED`, a name that is not a plain word
    (``cutoff=0``: CBC reads ``-name=value`` too) and a value CBC would read as a command
    (``-cutoff=0`` after an action that takes none)."""

    def reason(key: str) -> tuple[str, str] | None:
        return next((why for name, (shortest, why) in CBC.items() if _cbc_names(key, name, shortest)), None)

    def accepted(key: str) -> bool:
        return key.lstrip("-").isalpha() and any(_cbc_names(key, name, shortest) for name, shortest in CBC_ACCEPTED.items())

    found = _first(raw, reason) or _first_unlisted(raw, accepted, ", ".join(sorted(CBC_ACCEPTED)))
    if found is not None:
        return found
    for key, value in raw.items():
        text = "" if value is None else str(value)
        if text.split() != [text] and text != "" or (text.startswith("-") and not _is_number(text)):
            return str(key), f"its value {text!r} is no plain number or word: CBC would read it as more of its command line", "give a plain value"
    return None


def cvxpy_reserved(solver: str, time_limit_key: tuple[str, ...] | None, mip_gap_key: tuple[str, ...] | None, raw: Mapping[str, Any]) -> Reserved | None:
    """The first of ``raw`` (cvxpy's solver options for ``solver``) that distplan refuses:
    the keys it sets the run's time limit and gap with (``time_limit_key``,
    ``mip_gap_key``, top level or nested), HiGHS's and SCIP's own refused names, nested
    ones named ``outer.inner``, the time and gap names of its CBC adapter, and every key not
    in `CVXPY_ACCEPTED`."""
    own = {key: why for key, why in ((time_limit_key, TIME), (mip_gap_key, GAP)) if key is not None}
    names = {"HIGHS": HIGHS, "SCIP": SCIP, "CBC": CVXPY_CBC}.get(solver, {})
    top, nested = CVXPY_ACCEPTED.get(solver, (frozenset(), {}))
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
                listed = nested.get(key)
                if listed is not None and not (_scip_accepted(str(inner)) if listed is SCIP_ACCEPTED else str(inner) in listed):
                    return _not_vetted(f"{key}.{inner}", ", ".join(sorted(listed)))
        if key not in top and key not in nested:
            return _not_vetted(key, ", ".join(sorted(top | set(nested))))
    return None


def cbc_sets(raw: Mapping[str, Any], name: str) -> bool:
    """Whether ``raw`` sets CBC's parameter ``name`` (one of `CBC_ACCEPTED`), under any
    abbreviation CBC takes for it."""
    return any(_cbc_names(str(key), name, CBC_ACCEPTED[name]) for key in raw)


def _cbc_names(key: str, name: str, shortest: int) -> bool:
    """Whether CBC reads ``key`` (with or without its ``-``, any case) as its parameter
    ``name`` (lower case), which it takes from its first ``shortest`` letters on."""
    typed = key.lstrip("-").lower()
    return len(typed) >= shortest and name.startswith(typed)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _first_unlisted(raw: Mapping[str, Any], accepted: Callable[[str], bool], allowed: str) -> Reserved | None:
    for key in raw:
        if not accepted(str(key)):
            return _not_vetted(str(key), allowed)
    return None


def _first(raw: Mapping[str, Any], reason: Callable[[str], tuple[str, str] | None]) -> Reserved | None:
    for key in raw:
        why = reason(str(key))
        if why is not None:
            return str(key), *why
    return None
