"""Named formulations, declared as data.

A formulation is its problem kind, a one-line description, the paper it comes from, the
kind of program it solves (``lp``, ``milp``, ``convex`` or ``algorithm``), a `Policy` and a
``run`` function. Model-based formulations are *declared* with `from_blocks` from a
`ModelSpec` (`distplan.formulations.contract`: ``prepare`` → frozen index, pure blocks,
decoder). Algorithms that solve programs along the way (searches, cut loops) register with
their own ``run`` and build every program they solve from a `ModelSpec` too.

    my_variant = register(from_blocks(
        "placement", "milp_no_memory", "placement MILP without memory rows",
        spec=ModelSpec("milp_no_memory", prepare_placement,
                       (assignment, start_times, precedence, no_overlap, makespan),
                       decode_placement),
        program="milp", exact=True, policy=Policy(default_time_limit=60.0)))
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import json
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

import numpy as np

from distplan.errors import InputError
from distplan.formulations.contract import ModelSpec, Policy
from distplan.formulations.deadline import past
from distplan.kinds import KINDS
from distplan.modeling.model import Model, ModelArrays
from distplan.solvers.base import Backend, SolveOptions
from distplan.solvers.result import LIMIT_TERMINATIONS, RECORD_VERSION, SolutionStatus, SolverResult, Termination, options_record

Program = Literal["lp", "milp", "convex", "algorithm"]


#: how safe a bound is (`Bound.grade`)
BOUND_GRADES = ("safe", "solver")


@dataclass
class Bound:
    """A proven lower bound (minimization) on the instance's optimum, and where it comes from.

    ``grade`` says how safe it is: ``"safe"`` is valid in exact arithmetic (computed with
    outward rounding, or from a dual point repaired to exact feasibility); ``"solver"`` is
    valid within the tolerances of the solver that proved it.
    """

    value: float
    source: str
    grade: str = "solver"
    #: the index in the result's ``solver_results`` of the solver call whose dual bound this
    #: is (None: not a solver call's bound; `distplan.solve` sets it from ``solver_record``);
    #: `distplan verify` checks the value and grade against that call's record
    solver_call: int | None = None
    #: the record of the solver call that proved this bound, when one did
    solver_record: SolverResult | None = field(default=None, repr=False, compare=False)
    #: what proves it (`BOUND_KINDS`): ``"solver_free"`` (recomputed from the instance by
    #: `distplan verify`), ``"solver"`` (a solver call's dual bound, linked by
    #: ``solver_call``), ``"proof"`` (the formulation's own proof: a search, a DP, a
    #: Lagrangian dual; `BOUND_SOURCES` says which formulation may claim it, at what grade);
    #: None until `distplan.solve` classifies it (`classify_bound`)
    kind: str | None = None
    #: what proves it again from the instance (JSON data), for a proof whose source names
    #: a ``recheck`` (`BoundSource`): libra's Lagrangian multipliers, say
    certificate: dict[str, Any] | None = field(default=None, repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"value": self.value, "source": self.source, "grade": self.grade}
        if self.kind is not None:
            out["kind"] = self.kind
        if self.solver_call is not None:
            out["solver_call"] = self.solver_call
        if self.certificate is not None:
            out["certificate"] = self.certificate
        return out


#: what proves a bound (`Bound.kind`)
BOUND_KINDS = ("solver_free", "solver", "proof")


#: a solver call's bound in the result's units as its formulation states it:
#: ``conversion(call_bound, instance, model)``, the largest value the call's bound allows,
#: where ``model`` is the call's model record (``extra.model``: the model's name and sizes,
#: and what its builder noted of it in `Model.notes`, such as the objective's scale),
#: an empty mapping when the call records none. The formulation applies the function to its
#: call's record as `distplan verify` applies it to the stored one
Conversion = Callable[[float, Any, Mapping[str, Any]], float]


class Unchecked(Exception):
    """A premise's answer (`Premise`) when what it could check holds but a part could not
    be checked (a result written before its calls' records kept what that part reads):
    ``why`` says what was not checked. `distplan verify` accepts the bound and notes it."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


class Unrecorded(Exception):
    """A conversion's answer to a model record without a field it reads (a result written
    before its calls' records kept it): ``loosest`` is the most the call's bound can prove
    without the field (the largest value any record the instance allows would give; None:
    nothing), ``why`` says what could not be checked. `distplan verify` checks the bound
    against ``loosest`` and notes the rest; the formulation, which records the field, never
    meets it."""

    def __init__(self, field: str, loosest: float | None, why: str):
        super().__init__(f"the call's model record has no {field}: {why}")
        self.field = field
        self.loosest = loosest
        self.why = why


def same_units(call_bound: float, instance: Any, model: Mapping[str, Any]) -> float:
    """The conversion of a call whose model counts the result's units: its own bound."""
    return call_bound


#: a premise check (`BoundSource.premise`): ``premise(instance, entry, calls)``, what the
#: bound ``entry`` (its stored record: value, source, ...) rests on re-checked on the
#: instance and the run's solver call records ``calls`` (``solver_results`` as stored):
#: None when it holds, else why not (text)
Premise = Callable[[Any, Mapping[str, Any], Sequence[Any]], "str | None"]

#: a proof's re-check (`BoundSource.recheck`): ``recheck(instance, entry)``, None when the
#: instance (and the bound's stored ``certificate``) proves again that no plan is better
#: than the bound ``entry``'s value, else why not (text); `Unchecked` when the entry keeps
#: no certificate (a result written before bounds kept them)
Recheck = Callable[[Any, Mapping[str, Any]], "str | None"]


@dataclass(frozen=True)
class RecordedModelField:
    """A field of the model record (``extra.model``) that a formulation's solver calls
    always write, declared by the formulation (`Formulation.recorded_model_fields`) beside
    the code that writes it: in a result that records its format version
    (`solvers.result.RECORD_VERSION`), a call whose model name matches ``models``
    (``re.search``) and that ended with one of ``terminations`` has it, and `distplan
    verify` reports one without it as dropped. For the fields a check reads only when
    present (it falls back to slower or weaker evidence without them, as for an older
    record), so that dropping one cannot pass for an older record. ``why``: what writes it
    and what reads it. ``since``: the first record version whose calls write it (a field
    declared after results of that format were stored raises `RECORD_VERSION` and names
    the new version here, so that the stored ones, which never wrote it, still verify)."""

    name: str
    models: str
    terminations: tuple[str, ...]
    why: str
    since: int = 1

    def __post_init__(self) -> None:
        if not 1 <= self.since <= RECORD_VERSION:
            raise ValueError(f"RecordedModelField {self.name!r}: since {self.since!r} is no record version (1 to {RECORD_VERSION}: raise RECORD_VERSION with the field)")

    def required(self, model_name: str, termination: Any, version: int) -> bool:
        """Whether a call of model ``model_name`` that ended ``termination``, in a result of
        record version ``version``, writes it."""
        return version >= self.since and termination in self.terminations and re.search(self.models, model_name) is not None


@dataclass(frozen=True)
class RunTermination:
    """A termination of the run itself that a formulation declares (`Formulation.run_terminations`):
    its own budget ended the run, whatever its last solver call ended. `distplan verify`
    accepts ``termination`` for the formulation's results whose ``info[key]`` records one
    of ``reasons``: a text that is one, or, with ``mapping`` (tessel's ``cut_by``: search
    -> budget), a non-empty mapping whose every value is one; no key of ``absent`` in
    ``info`` (what records another end: tessel's ``stopped`` when its deadline passed);
    and, with ``needs_call``, at least one solver call (libra's rounds always make one,
    tessel's residue searches none). ``why``: what ends the run so. The termination is a
    limit (`solvers.result.LIMIT_TERMINATIONS`) other than the run's time limit, which
    any run may end with: never one that claims what a solver proved (optimal,
    infeasible)."""

    termination: str
    key: str
    reasons: frozenset[str]
    why: str
    mapping: bool = False
    absent: frozenset[str] = frozenset()
    needs_call: bool = True

    def __post_init__(self) -> None:
        allowed = {t.value for t in LIMIT_TERMINATIONS} - {Termination.TIME_LIMIT.value}
        if self.termination not in allowed:
            raise ValueError(f"RunTermination: {self.termination!r} is not a limit of a run's own ({', '.join(sorted(allowed))})")

    def recorded(self, info: Mapping[str, Any], calls: int) -> bool:
        """Whether ``info`` (a result's) records one of the reasons, for a result with
        ``calls`` solver calls."""
        if (self.needs_call and calls < 1) or any(k in info for k in self.absent):
            return False
        value = info.get(self.key)
        if self.mapping:
            return isinstance(value, Mapping) and bool(value) and all(isinstance(v, str) and v in self.reasons for v in value.values())
        return isinstance(value, str) and value in self.reasons


@dataclass(frozen=True)
class BoundSource:
    """A kind of bound a formulation reports that is not solver-free: the formulations that
    may report it (None: any), a pattern its ``source`` text matches (``re.search``), what
    proves it (``"solver"``: a solver call's dual bound, which must be linked to the call;
    ``"proof"``: the formulation's own proof, which `distplan verify` cannot redo) and the
    best grade it can have (a solver call's bound: at most its call's grade too).

    A solver call's bound also names its ``conversion``: ``"module:function"``, the
    function ``(call_bound, instance, model) -> float`` (`Conversion`) with which the
    formulation turns the call's bound (model units) into the bound it reports (the
    instance's units): the largest value the call's bound allows, given the call's model
    record. None: the call counts the result's units (`same_units`). It is named, not
    imported, as `distplan.kinds` names modules: the function lives beside the formulation
    that uses it, and formulations import this registry (`convert` imports the function
    when a bound is checked).

    A solver call's bound names the ``models`` its call may have solved: a pattern
    (``re.search``) the linked call's ``extra.model.name`` matches (a bound linked to a
    call of another program of the run, whose value means something else, is rejected).

    A bound that holds only under a condition the formulation checks when it reports it
    (a precondition of the instance, an infeasible call of the run) names its ``premise``:
    ``"module:function"``, the function (`Premise`) ``(instance, entry, calls) -> str |
    None`` that re-checks it (None: it holds; else why not), which `distplan verify`
    applies to the instance and the stored record.

    A proof that can be checked again names its ``recheck``: ``"module:function"``, the
    function (`Recheck`) ``(instance, entry) -> str | None`` that proves again, from the
    instance and the bound's stored ``certificate``, that no plan is better than its value
    (None: proven; else why not), as a destructive bound re-tests the one trial makespan
    it reports and a Lagrangian bound re-evaluates its dual function at its multipliers.
    `distplan verify` applies it to every such bound; a proof without one is not re-proven,
    and verify notes it where the result's bound rests on it.

    ``formulations`` None: every formulation declared with `from_blocks`
    (`Formulation.declared`) that states no solver source of its own here; ``{formulation}``
    in ``pattern`` and ``models`` stands for the formulation's name (escaped)."""

    formulations: tuple[str, ...] | None
    pattern: str
    kind: str
    grade: str
    conversion: str | None = None
    models: str | None = None
    premise: str | None = None
    recheck: str | None = None

    def matches(self, formulation: str, source: str) -> bool:
        if self.formulations is None:
            if formulation not in declared_formulations():
                return False
        elif formulation not in self.formulations:
            return False
        return re.search(self._for(self.pattern, formulation), source) is not None

    def model_matches(self, formulation: str, model_name: str) -> bool:
        """Whether a call whose model is named ``model_name`` may have proved this bound."""
        return self.models is None or re.search(self._for(self.models, formulation), model_name) is not None

    @staticmethod
    def _for(pattern: str, formulation: str) -> str:
        return pattern.replace("{formulation}", re.escape(formulation))

    @property
    def convert(self) -> Conversion:
        """The stated conversion of a call's bound to the result's units (`same_units`
        when the source names none)."""
        return same_units if self.conversion is None else _named(self.conversion)

    def unmet(self, instance: Any, entry: Mapping[str, Any], calls: Sequence[Any]) -> str | None:
        """Why the bound ``entry`` does not rest on what its ``premise`` needs (None: it
        does, or the source names no premise)."""
        if self.premise is None:
            return None
        fn: Premise = _named(self.premise)
        return fn(instance, entry, calls)

    def unproven(self, instance: Any, entry: Mapping[str, Any]) -> str | None:
        """Why the bound ``entry`` is not proven again from ``instance`` by the source's
        ``recheck`` (None: it is; the source must name one)."""
        assert self.recheck is not None
        fn: Recheck = _named(self.recheck)
        return fn(instance, entry)


@functools.cache
def _named(name: str) -> Any:
    """The function a ``"module:function"`` name names (imported when first asked for)."""
    module, _, function = name.partition(":")
    return getattr(importlib.import_module(module), function)


#: the placement formulations that report each proof: all three the forced co-location bound;
#: placement_milp and placement_bounds the waist composition and the assignment relaxation;
#: placement_milp alone its cut-waist compositions and its own dual bound (a result relabelled
#: with another of them keeps bounds that formulation never reports: review rev29 D1)
_PLACEMENT_PROVERS = ("placement_milp", "placement_search", "placement_bounds")
_WAIST_PROVERS = ("placement_milp", "placement_bounds")
_LIBRA = ("libra_perf", "libra_perf_lp", "libra_perf_per_cost", "libra_discrete")
#: the conversions formulations state for their solver calls' bounds (`BoundSource.conversion`)
_PLACEMENT_SECONDS = "distplan.formulations.placement.relaxation:dual_bound_seconds"
_SHARDING_SECONDS = "distplan.formulations.sharding.alpa_ilp:dual_bound_seconds"
#: every bound source a formulation reports besides the solver-free ones (`BoundSource`);
#: first match wins (the proofs before the generic "dual bound (" of solver calls). A
#: bound whose source matches none of these and no solver-free bound is rejected by
#: `distplan verify` when the result's bound rests on it
BOUND_SOURCES: tuple[BoundSource, ...] = (
    BoundSource(("tessel",), r"^tessel: (exact )?whole-schedule state search", "proof", "safe"),
    BoundSource(("pipeline_milp",), r"^pipeline_milp: (exact )?state search", "proof", "safe"),
    # the time-indexed model below an integral incumbent, infeasible (a solver's verdict,
    # which the record must hold) or empty by construction (which verify rebuilds)
    BoundSource(("pipeline_milp",), r"^pipeline_milp: no schedule of value <= ", "proof", "solver", premise="distplan.formulations.pipeline.milp:below_incumbent_premise"),
    BoundSource(("libra_perf_per_cost",), r"^libra_perf_per_cost interval branch-and-bound over the cost budget", "proof", "safe"),
    BoundSource(_LIBRA, r"Lagrangian dual bound \(exact: rounding error bounded\)", "proof", "safe", recheck="distplan.formulations.bandwidth.safe:recheck"),
    # placement's combinatorial bounds, cut short by their share of the time limit: forced
    # co-location + one machine, series composition over waist ops (no solver), over cut
    # waists and the last stint over them. Those two rest on module windows' MILPs, whose
    # calls are not recorded (`placement.milp.child_dual_bound`): grade "solver" unless
    # their source says no window went to a solver (`placement.segments.module_bound`)
    BoundSource(_PLACEMENT_PROVERS, r"^forced co-location \+ one-machine bound", "proof", "safe", recheck="distplan.formulations.placement.forced:recheck"),
    BoundSource(_WAIST_PROVERS, r"^series composition over waist ops", "proof", "safe", recheck="distplan.formulations.placement.waist:recheck"),
    BoundSource(("placement_milp",), r"^series composition over cut waists with each module's optimum: \d+ waists, 0 of \d+ modules solved(?!, )", "proof", "safe"),
    BoundSource(("placement_milp",), r"^series composition over cut waists", "proof", "solver"),
    BoundSource(("placement_milp",), r"^last-stint bound over cut waists .*: \d+ waists, 0 windows solved, ", "proof", "safe"),
    BoundSource(("placement_milp",), r"^last-stint bound over cut waists", "proof", "solver"),
    BoundSource(("tap",), r"^tap: exhaustive Pareto dynamic program over the folded walk \(no solver\)", "proof", "solver"),
    # (the one plan: only where every op has a single strategy, which verify re-checks)
    BoundSource(("alpa_ilp", "tap"), r"^(alpa_ilp|tap): the one plan's cost \(every op has a single strategy\)", "proof", "safe", premise="distplan.formulations.sharding.alpa_ilp:single_plan_premise"),
    # solver calls' bounds, each with the conversion its formulation states and the models
    # (`extra.model.name` of the linked call) it comes from
    BoundSource(("placement_milp",), r"^placement_milp dual bound \(", "solver", "safe", _PLACEMENT_SECONDS, r"^placement_milp$"),
    BoundSource(_WAIST_PROVERS, r"^assignment relaxation.* dual bound \(", "solver", "safe", _PLACEMENT_SECONDS, r"-assignment-relaxation$"),
    BoundSource(("alpa_ilp",), r"^alpa_ilp dual bound \(", "solver", "safe", _SHARDING_SECONDS, r"^alpa_ilp(_lp)?$"),
    BoundSource(("tap",), r"^tap: LP of the folded problem", "solver", "safe", _SHARDING_SECONDS, r"^tap_bound$"),
    BoundSource(("tap",), r"^tap: dual bound of the folded walk program", "solver", "safe", _SHARDING_SECONDS, r"^tap(_lp)?$"),
    # the disjunctive model ("<instance>-milp") or the time-indexed one; never the retiming LP
    BoundSource(("pipeline_milp",), r"^pipeline_milp dual bound \(", "solver", "safe", "distplan.formulations.pipeline.milp:dual_bound_value", r"-milp(-time-indexed)?$"),
    BoundSource(("libra_discrete",), r"^libra_discrete MILP dual bound \(", "solver", "safe", "distplan.formulations.bandwidth.discrete:dual_bound_seconds", r"^libra_discrete$"),
    # (only under Hanen and Munier's small-communication precondition, which verify re-checks)
    BoundSource(("baechi_sct",), r"^SCT LP value", "solver", "safe", None, r"^baechi_sct$", premise="distplan.formulations.placement.sct:lp_bound_premise"),
    # codec_select's call's bound is in seconds already
    BoundSource(("codec_select",), r"^codec_select dual bound \(", "solver", "safe", None, r"^codec_select$"),
    # every formulation declared from blocks (`from_blocks`: "<name> dual bound (<backend>)",
    # its one call's own, on the model it names after itself)
    BoundSource(None, r"^{formulation} dual bound \(", "solver", "safe", None, r"^{formulation}$"),
)


def declared_formulations() -> frozenset[str]:
    """The names of the formulations declared with `from_blocks` (`Formulation.declared`)
    that state no solver source of their own in `BOUND_SOURCES`: the ones the generic
    ``"<name> dual bound ("`` source is for."""
    stated = {f for s in BOUND_SOURCES if s.kind == "solver" and s.formulations is not None for f in s.formulations}
    return frozenset(f.name for f in formulations() if f.declared and f.name not in stated)

#: what `distplan.formulations.placement.time_unit` appends to the source of a bound proven
#: on the instance with its times scaled
_TIME_UNIT_NOTE = re.compile(r" \(times scaled by 2\^-?\d+ in the model\)$")


def bound_source(formulation: str, source: str) -> BoundSource | None:
    """The `BOUND_SOURCES` entry a bound's ``source`` of ``formulation`` is, or None."""
    return next((s for s in BOUND_SOURCES if s.matches(formulation, source)), None)


def _base(source: str) -> str:
    return source.split(": ", 1)[0]


def solver_free_match(source: str, formulation: str, free: list[Bound]) -> float | None:
    """The value of the solver-free bound (of ``free``, recomputed from the instance) that a
    bound with ``source`` reported by ``formulation`` repeats, or None when it repeats
    none. A formulation may repeat one under its own name (``"pipeline_milp: <source>"``),
    with the time-unit note, or with another detail after ``": "`` (placement's forced and
    series bounds name their case): then the largest recomputed value of that family."""
    names = {source, _TIME_UNIT_NOTE.sub("", source)}
    names |= {n[len(formulation) + 2 :] for n in list(names) if n.startswith(formulation + ": ")}
    exact = [b.value for b in free if b.source in names]
    if exact:
        return max(exact)
    family = [b.value for b in free if ": " in b.source and _base(b.source) in {_base(n) for n in names if ": " in n}]
    return max(family) if family else None


@dataclass
class Outcome:
    """What a formulation's run returns: a plan (kind-specific), proven bounds, solver records."""

    plan: Any
    bounds: list[Bound] = field(default_factory=list)
    solver_results: list[SolverResult] = field(default_factory=list)
    #: the formulation's own objective for the plan (cross-checked against the evaluator)
    claimed_objective: float | None = None
    #: True when the formulation proved the plan optimal for the instance it was given
    proven_optimal: bool = False
    #: what the run reports beside the plan; ``info["no_plan"]`` says why a run without a
    #: plan has none (`distplan.solve` raises `NoSolutionError` with it)
    info: dict[str, Any] = field(default_factory=dict)
    #: the run's termination when it is not the last solver call's (e.g. that call proved
    #: a model restricted below the incumbent infeasible, so the run ended optimal)
    termination: Termination | None = None


class RunContext:
    """Everything a formulation needs to run: backend, options, and a way to solve models.

    ``solve_model`` assembles a `Model`, hands it to the chosen backend, and records build,
    hand-over and solve times; every solver call of a run is kept in ``solver_results``.
    """

    def __init__(self, backend: Backend, options: SolveOptions, params: dict[str, Any] | None = None, started: float | None = None):
        """``started`` (a ``time.perf_counter()`` value, default now) is when the time limit
        began: `distplan.solve` passes its own start, so loading and folding count too."""
        self.backend = backend
        self.options = options
        self.params: dict[str, Any] = dict(params or {})
        self.solver_results: list[SolverResult] = []
        start = time.perf_counter() if started is None else started
        self._deadline = None if options.time_limit is None else start + options.time_limit

    def child(
        self,
        params: dict[str, Any] | None = None,
        time_limit: float | None = None,
        *,
        share_records: bool = False,
        backend: Backend | None = None,
        at_least: float | None = None,
    ) -> RunContext:
        """A context for one phase of this run (its own parameters): at most ``time_limit``
        seconds, and never past this run's deadline, unless that leaves less than
        ``at_least`` seconds (a phase the run documents may overrun its limit by that
        grace). Its solver records are its own, or with ``share_records`` this run's list.
        On another ``backend`` the run's raw solver options (its backend's) are left out."""
        limits = [t for t in (time_limit, self.remaining_time()) if t is not None]
        if limits and at_least is not None:
            limits = [max(min(limits), at_least)]
        options = self.options.with_(time_limit=max(min(limits), 0.01)) if limits else self.options
        if backend is not None and backend is not self.backend:
            options = options.with_(raw={})
        sub = RunContext(backend or self.backend, options, dict(self.params if params is None else params))
        if share_records:
            sub.solver_results = self.solver_results
        return sub

    def param(self, key: str, default: Any) -> Any:
        return self.params.get(key, default)

    def record_call(self, result: SolverResult, time_limit: float | None, model: dict[str, Any] | None = None) -> SolverResult:
        """Append the record of a solver call the formulation made by itself (not by
        `solve_model`, `solve_arrays` or `solve_convex`: a direct Clarabel solver, say),
        with the run's options at the ``time_limit`` it gave the call (seconds; None: none),
        as those calls record theirs (a result that records its format keeps every call's
        options: `distplan verify`), and ``model``, the record of the model it solved (its
        name at least: `Formulation.solves`)."""
        result.options = options_record(self.options if time_limit is None else self.options.with_(time_limit=time_limit))
        if model is not None:
            result.extra.setdefault("model", model)
        self.solver_results.append(result)
        return result

    @property
    def seed(self) -> int:
        """The run's random seed for a formulation's own searches: `distplan.solve`'s
        ``seed`` (which the solver gets too), 0 when none was given."""
        return 0 if self.options.seed is None else int(self.options.seed)

    @property
    def deadline(self) -> float | None:
        """When the run's time limit ends (a ``time.perf_counter()`` value; None: no limit),
        for phases that check it (`distplan.formulations.deadline`)."""
        return self._deadline

    def remaining_time(self) -> float | None:
        if self._deadline is None:
            return None
        return max(0.0, self._deadline - time.perf_counter())

    def not_started(self, build_seconds: float = 0.0, backend: tuple[str, str] | None = None, model: dict[str, Any] | None = None) -> SolverResult | None:
        """The record of a solver call made after the run's deadline, appended to the run's
        solver results: the solver is not started (it would only be stopped, or killed a
        grace later); None while time is left. ``backend``: (name, version) of a solver the
        formulation calls by itself (a direct Clarabel solver, whose calls `record_call`
        records), the run's backend when None. ``model``: the record of the model it would
        have solved (``extra.model``, its name at least: `Formulation.solves`)."""
        if not past(self._deadline):
            return None
        name, version = backend if backend is not None else (self.backend.name, self.backend.version())
        result = SolverResult(
            backend=name,
            backend_version=version,
            termination=Termination.TIME_LIMIT,
            status=SolutionStatus.NONE,
            build_seconds=build_seconds,
            raw_status="not started",
            message="the run's time limit had passed before this solve: the solver was not started",
            options=options_record(self.options),
        )
        if model is not None:
            result.extra["model"] = model
        self.solver_results.append(result)
        return result

    def solve_model(self, model: Model, warm_start: np.ndarray | None = None, build_seconds: float = 0.0) -> SolverResult:
        late = self.not_started(build_seconds, model=model.stats() if past(self._deadline) else None)
        if late is not None:
            return late
        t0 = time.perf_counter()
        arrays = model.to_arrays()
        assemble = time.perf_counter() - t0
        return self.solve_arrays(arrays, warm_start, build_seconds + assemble, model.values_by_block, model.stats())

    def solve_arrays(
        self,
        arrays: ModelArrays,
        warm_start: np.ndarray | None = None,
        build_seconds: float = 0.0,
        blocks: Callable[[np.ndarray], dict[str, np.ndarray]] | None = None,
        stats: dict[str, Any] | None = None,
    ) -> SolverResult:
        """One call of the run's backend on a model already in arrays (small programs built
        as arrays skip the modeling layer): the rest of the run's time as its limit;
        ``blocks`` names the values (``values_by_block``), ``stats`` describes the model."""
        late = self.not_started(build_seconds, model=stats)
        if late is not None:
            return late
        remaining = self.remaining_time()
        opts = self.options if remaining is None else self.options.with_(time_limit=max(remaining, 0.01))
        result = self.backend.solve(arrays, opts, warm_start)
        result.options = options_record(opts)
        result.build_seconds += build_seconds
        if result.values is not None and blocks is not None:
            result.values_by_block = blocks(result.values)
        if stats is not None:
            result.extra.setdefault("model", stats)
        self.solver_results.append(result)
        return result

    def solve_convex(self, problem: Any, name: str, build_seconds: float = 0.0) -> SolverResult:
        """One call of the run's (convex) backend on a cvxpy problem named ``name`` (its
        record's ``extra.model``: `convex_model_record`), with the rest of the run's time as
        its limit."""
        model = convex_model_record(name)
        late = self.not_started(build_seconds, model=model)
        if late is not None:
            return late
        remaining = self.remaining_time()
        opts = self.options if remaining is None else self.options.with_(time_limit=max(remaining, 0.01))
        result = self.backend.solve_convex(problem, opts)
        result.options = options_record(opts)
        result.build_seconds += build_seconds
        result.extra.setdefault("model", model)
        self.solver_results.append(result)
        return result


def convex_model_record(name: str) -> dict[str, Any]:
    """The model record (a solver call's ``extra.model``) of a convex program handed to a
    solver as a cvxpy problem or directly (`RunContext.solve_convex`, `RunContext.record_call`):
    its name (`Formulation.solves`). No sense: a conic solver's bound is its dual objective,
    which may pass the primal one by the solver's tolerance (no proof rests on it: libra's
    bounds are proven from its multipliers, `bandwidth.safe`), so `distplan verify` does not
    hold it to the side a MILP's bound, with its margin, keeps."""
    return {"name": name}


@dataclass(frozen=True)
class Formulation:
    kind: str
    name: str
    description: str
    program: Program
    run: Callable[[Any, RunContext], Outcome]
    #: an optimal solve of this program is an optimum of the instance (its bound is valid)
    exact: bool = False
    reference: str = ""
    #: backend used when the caller names none
    default_backend: str = "highs"
    #: the program it is declared from (None for algorithms that declare none)
    spec: ModelSpec[Any] | None = None
    #: what it asks of a solve when the caller does not say (default time limit, LP method)
    policy: Policy = field(default_factory=Policy)
    #: parameters it understands, with defaults: shown in `distplan list`
    params: dict[str, Any] = field(default_factory=dict)
    #: reports proven bounds only, no plan
    bound_only: bool = False
    #: for a formulation exact on some instances only: which (None: all, when ``exact``)
    exact_for: Callable[[Any], bool] | None = None
    #: parameters that also take None, with a meaning their documentation gives (e.g. "all
    #: the time left"); the others take a value of their default's type
    nullable: frozenset[str] = frozenset()
    #: the least value of numeric parameters that have one (e.g. 2 copies to fold a region)
    least: dict[str, float] = field(default_factory=dict)
    #: the largest value of numeric parameters that have one (e.g. 1 for a share of the time)
    most: dict[str, float] = field(default_factory=dict)
    #: a value numeric parameters must exceed, for those that take none equal to it (e.g. 0
    #: for a time limit in seconds)
    above: dict[str, float] = field(default_factory=dict)
    #: a value numeric parameters must stay under, for those that take none equal to it
    #: (e.g. 1 for a relative tolerance: at 1 every plan is within it)
    below: dict[str, float] = field(default_factory=dict)
    #: for a parameter whose default is None ("decide for me"), a value of the type it takes
    examples: dict[str, Any] = field(default_factory=dict)
    #: the values a text parameter takes, when it names one of a few (a model, an objective)
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: declared with `from_blocks` (its run solves its spec's model, named after it, and
    #: reports that call's bound as "<name> dual bound (<backend>)")
    declared: bool = False
    #: fields its solver calls' model records always keep (`RecordedModelField`), which
    #: `distplan verify` requires of a result that records its format version
    recorded_model_fields: tuple[RecordedModelField, ...] = ()
    #: terminations of its runs' own (a budget of its parameters), allowed whatever its
    #: last solver call ended when the result's ``info`` records why (`RunTermination`)
    run_terminations: tuple[RunTermination, ...] = ()
    #: the programs its solver calls solve: regular expressions, one of which each call's
    #: model name (``extra.model.name``) matches in full; () for a formulation that makes no
    #: solver call; None: not declared (nothing is held to it). `distplan.solve` holds each
    #: run to it (a `ContractError`: a programming error), and `distplan verify` each
    #: result, so that a result relabelled with a formulation that solves other programs
    #: (a MILP's plan credited to a heuristic, alpa_ilp's to tap) is caught
    solves: tuple[str, ...] | None = None
    #: parameters that choose the program a run solves, each with the values for which that
    #: program is ``spec``'s (what `build`, and so ``distplan export``, writes): another
    #: value is refused there rather than written as a program the run would not solve
    spec_params: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def undeclared_models(self, names: Sequence[str | None]) -> list[str | None]:
        """Of the model names of a run's solver calls (None: a call that records none), those
        `solves` does not declare (none when it declares nothing: None)."""
        if self.solves is None:
            return []
        return [n for n in names if n is None or not any(re.fullmatch(p, n) for p in self.solves)]

    def is_exact(self, instance: Any) -> bool:
        """Whether an optimal solve of this program is an optimum of ``instance``."""
        return self.exact and (self.exact_for is None or bool(self.exact_for(instance)))

    def check_params(self, params: Mapping[str, Any]) -> None:
        """An InputError naming the first parameter it does not declare, or whose value is
        not of its default's type: true/false for a flag, a whole number for an integer
        (an integral float too: JSON's 1e6), a real number for a float, text for text
        (bools are none of the numbers), for a tuple as many items of the tuple's types,
        for a list one or more items of its first item's type; a default of None takes None
        or a value of its ``examples`` type (anything when it has none); None is taken where
        ``nullable`` names the parameter; at least its ``least`` value, at most its ``most``
        value, more than its ``above`` value and less than its ``below`` value where those
        name it, and one of its ``choices`` where those name it."""
        for name, value in params.items():
            if name not in self.params:
                raise InputError(f"params.{name}", f"formulation {self.name!r} has no parameter {name!r}", f"its parameters: {', '.join(sorted(self.params)) or '(none)'}")
            typed = self.examples.get(name) if self.params[name] is None else self.params[name]
            takes_none = name in self.nullable or self.params[name] is None
            expected = None if value is None and takes_none else _param_type_error(typed, value)
            if not expected and value is not None:
                expected = self._range_error(name, typed, value)
            if not expected and name in self.choices and value not in self.choices[name]:
                expected = "one of " + ", ".join(map(repr, self.choices[name]))
            if expected:
                raise InputError(f"params.{name}", f"expected {expected}, got {value!r}", f"give e.g. {name}={json.dumps(typed)}")

    def _range_error(self, name: str, typed: Any, value: Any) -> str | None:
        """The bound of a numeric parameter's declared range (``above``, ``least``,
        ``most``, ``below``) that ``value`` breaks, in words; None when it is in range."""
        what = "a whole number" if isinstance(typed, int) and not isinstance(typed, bool) else "a number"
        if name in self.above and not value > self.above[name]:
            return f"{what} > {self.above[name]:g}"
        if name in self.least and value < self.least[name]:
            return f"{what} >= {self.least[name]:g}"
        if name in self.most and value > self.most[name]:
            return f"{what} <= {self.most[name]:g}"
        if name in self.below and not value < self.below[name]:
            return f"{what} < {self.below[name]:g}"
        return None

    def build(self, instance: Any, params: dict[str, Any] | None = None) -> tuple[Model, Any]:
        """Assemble the model of a declared formulation (for export and inspection)."""
        if self.spec is None:
            what = "is an algorithm, not a model" if self.program == "algorithm" else "builds its models as it runs: there is no one model to export"
            raise InputError("formulation", f"{self.name!r} {what}", "export a model-based formulation")
        for key, values in self.spec_params.items():
            value = (params or {}).get(key, self.params.get(key))
            if value not in values:
                raise InputError(f"params.{key}", f"{key}={value!r} makes {self.name} solve another program than the one export writes ({self.spec.name}, for {key} = {' or '.join(map(repr, values))})", "export without it, or solve with --result to see the programs the run solves")
        return self.spec.build(instance, params or {}, name=self.name)


def _param_type_error(default: Any, value: Any) -> str | None:
    """What a parameter whose default is ``default`` expects, when ``value`` is not that."""
    is_bool = isinstance(value, bool | np.bool_)
    is_real = not is_bool and isinstance(value, int | float | np.integer | np.floating)
    if isinstance(default, bool):
        return None if is_bool else "true or false"
    if isinstance(default, int):
        return None if is_real and float(value).is_integer() else "a whole number"
    if isinstance(default, float):
        return None if is_real and not math.isnan(value) else "a number"
    if isinstance(default, str):
        return None if isinstance(value, str) else "text"
    if isinstance(default, tuple):
        items = [_param_type_error(d, v) for d, v in zip(default, value)] if isinstance(value, list | tuple) and len(value) == len(default) else ["?"]
        return None if not any(items) else f"a list of {len(default)}: " + ", ".join(_param_type_error(d, object()) or "any" for d in default)
    if isinstance(default, list) and default:
        items = [_param_type_error(default[0], v) for v in value] if isinstance(value, list | tuple) and value else ["?"]
        return None if not any(items) else f"a list of one or more: {_param_type_error(default[0], object())}"
    return None


#: warm_start(instance, model, index, ctx) -> a full solution vector or None
WarmStart = Callable[[Any, Model, Any, "RunContext"], np.ndarray | None]
#: bounds(instance, result, index) -> the bounds a solve proves besides an exact dual bound
SolveBounds = Callable[[Any, SolverResult, Any], list[Bound]]
#: run(instance, ctx) of a declared program
Run = Callable[[Any, RunContext], Outcome]


def from_blocks(
    kind: str,
    name: str,
    description: str,
    *,
    program: Program,
    exact: bool | Callable[[Any], bool],
    spec: ModelSpec[Any],
    policy: Policy | None = None,
    reference: str = "",
    params: dict[str, Any] | None = None,
    warm_start: WarmStart | None = None,
    bounds: SolveBounds | None = None,
    driver: Callable[[Any, RunContext, Run], Outcome] | None = None,
    least: dict[str, float] | None = None,
    most: dict[str, float] | None = None,
    above: dict[str, float] | None = None,
    recorded_model_fields: tuple[RecordedModelField, ...] = (),
    solves: tuple[str, ...] | None = None,
) -> Formulation:
    """Declare a model-based formulation from its `ModelSpec`.

    The declared run builds the model (``prepare`` then the blocks), solves it on the run's
    backend (from ``warm_start`` when given) and decodes the plan. When ``exact`` is True
    (or true of the instance) the solver's proven bound is a bound of the instance;
    ``bounds`` adds what else the solve proves. ``driver(instance, ctx, run)`` wraps the
    declared run when a formulation needs a step around it (solving on a contracted graph,
    say) and calls ``run`` for the solve itself. ``least``, ``most`` and ``above`` are the
    parameters' ranges (`Formulation.check_params`); ``recorded_model_fields``, what its
    calls' model records always keep (`Formulation.recorded_model_fields`); ``solves``,
    the programs its calls solve (`Formulation.solves`): by default, without a ``driver``,
    its one model (named ``name``), and with one, not declared.
    """
    if spec.decode is None:
        raise ValueError(f"{name}: a formulation declared from blocks needs a decoder in its spec")
    defaults = dict(params or {})

    def run(instance: Any, ctx: RunContext) -> Outcome:
        t0 = time.perf_counter()
        merged = {**defaults, **ctx.params}
        model, index = spec.build(instance, merged, name=name)
        build = time.perf_counter() - t0
        start = warm_start(instance, model, index, ctx) if warm_start is not None else None
        result = ctx.solve_model(model, warm_start=start, build_seconds=build)
        is_exact = exact(instance) if callable(exact) else exact
        out_bounds: list[Bound] = []
        if is_exact and result.bound is not None:
            out_bounds.append(Bound(result.bound, f"{name} dual bound ({result.backend})", result.bound_grade or "solver", solver_record=result))
        if bounds is not None:
            out_bounds.extend(bounds(instance, result, index))
        if not result.has_solution:
            return Outcome(plan=None, bounds=out_bounds, solver_results=list(ctx.solver_results))
        plan, claimed = spec.decode_result(instance, result, index)
        return Outcome(
            plan=plan,
            bounds=out_bounds,
            solver_results=list(ctx.solver_results),
            claimed_objective=claimed if claimed is not None else (result.objective if is_exact else None),
            proven_optimal=is_exact and result.termination.value == "optimal",
        )

    def driven(instance: Any, ctx: RunContext) -> Outcome:
        assert driver is not None
        return driver(instance, ctx, run)

    return Formulation(
        kind=kind,
        name=name,
        description=description,
        program=program,
        run=run if driver is None else driven,
        exact=True if callable(exact) else bool(exact),
        exact_for=exact if callable(exact) else None,
        reference=reference,
        spec=spec,
        policy=policy or Policy(),
        params=defaults,
        least=dict(least or {}),
        most=dict(most or {}),
        above=dict(above or {}),
        declared=True,
        recorded_model_fields=recorded_model_fields,
        solves=solves if solves is not None or driver is not None else (re.escape(name),),
    )


_FORMULATIONS: dict[tuple[str, str], Formulation] = {}
_KIND_PACKAGES = {name: kind.formulations for name, kind in KINDS.items()}
_loaded: set[str] = set()


def register(formulation: Formulation) -> Formulation:
    key = (formulation.kind, formulation.name)
    if key in _FORMULATIONS:
        raise ValueError(f"formulation {formulation.name!r} of kind {formulation.kind!r} registered twice")
    _FORMULATIONS[key] = formulation
    return formulation


def _load(kind: str | None = None) -> None:
    for k, pkg in _KIND_PACKAGES.items():
        if (kind is None or k == kind) and k not in _loaded and importlib.util.find_spec(pkg) is not None:
            _loaded.add(k)
            importlib.import_module(pkg)


def formulations(kind: str | None = None) -> list[Formulation]:
    """Registered formulations (of one kind, or all)."""
    _load(kind)
    return [f for (k, _), f in _FORMULATIONS.items() if kind is None or k == kind]


def get_formulation(kind: str, name: str) -> Formulation:
    _load(kind)
    f = _FORMULATIONS.get((kind, name))
    if f is None:
        valid = ", ".join(sorted(n for (k, n) in _FORMULATIONS if k == kind)) or "(none)"
        _load()  # every kind: is it another kind's formulation?
        other_kinds = sorted(k for (k, n) in _FORMULATIONS if n == name)
        if other_kinds:
            raise InputError(
                "formulation",
                f"{name!r} is a {' and '.join(other_kinds)} formulation, and this is a {kind} instance",
                f"use a {kind} formulation: {valid}",
            )
        raise InputError("formulation", f"unknown {kind} formulation {name!r}", f"use one of: {valid}")
    return f


@dataclass
class Folding:
    """A folded (coarsened) instance and the way back.

    ``exact`` is True when the folded optimum equals the original optimum (so bounds proven
    on the folded instance hold for the original); coarsening that forces co-location is
    not exact.
    """

    instance: Any
    unfold: Callable[[Any], Any]
    exact: bool
    stats: dict[str, Any] = field(default_factory=dict)


_FOLDERS: dict[str, Callable[[Any, dict[str, Any]], Folding]] = {}
_EXACT_FOLDERS: set[str] = set()
_BOUNDS: dict[str, Callable[[Any, float | None], list[Bound]]] = {}
#: per kind, whether an instance's optimum is an integer (`register_bounds`)
_INTEGRAL: dict[str, Callable[[Any], bool]] = {}


def register_folder(kind: str, folder: Callable[[Any, dict[str, Any]], Folding], *, exact: bool = False) -> None:
    """Declare how instances of a kind are folded by ``solve(..., fold=True)``. ``exact``:
    every folding it makes is exact (`Folding.exact`), so that bounds proven on it hold for
    the instance; a folder that may restrict the problem declares False."""
    _FOLDERS[kind] = folder
    if exact:
        _EXACT_FOLDERS.add(kind)


def check_fold(formulation: Formulation, kind: str) -> None:
    """An `InputError` (path ``fold``) when ``formulation`` cannot run folded on ``kind``:
    no folding is defined for the kind, or the formulation proves bounds and the kind's
    folding is not declared exact (bounds proven on a restricted problem would not hold for
    the instance: review rev17 H2, 41.9 ms "proven" on inception-v3-dgx1-2-tight, which has
    a plan of 32.9 ms). Known before any folding runs: ``distplan solve --fold`` and
    campaigns with ``fold = true`` both ask it first."""
    get_folder(kind)
    if formulation.bound_only and kind not in _EXACT_FOLDERS:
        raise InputError("fold", f"{formulation.name} proves bounds, and the {kind} folding is not exact (it restricts the problem): its bounds would not hold for the instance", "solve without --fold")


def get_folder(kind: str) -> Callable[[Any, dict[str, Any]], Folding]:
    _load(kind)
    if kind not in _FOLDERS:
        raise InputError("fold", f"no folding is defined for {kind} instances", "solve without --fold (Python: without fold=True)")
    return _FOLDERS[kind]


def register_bounds(kind: str, fn: Callable[..., list[Bound]], *, takes_deadline: bool = False, integral: Callable[[Any], bool] | None = None) -> None:
    """Declare the solver-free bounds of a kind (combined into every result's bound).
    ``takes_deadline``: ``fn(instance, deadline)`` stops its costlier bounds at that
    ``time.perf_counter()`` value (None: no limit) and keeps what it has; otherwise
    ``fn(instance)``, which must be cheap (linear in the instance). ``integral``: true of
    an instance whose optimum is an integer (a pipeline's of integral durations and
    delays): its bounds, once rounded down to be safe, are rounded up to an integer
    (`solver_free_bounds`)."""
    _BOUNDS[kind] = fn if takes_deadline else (lambda instance, deadline: fn(instance))
    if integral is not None:
        _INTEGRAL[kind] = integral


#: Relative amount by which solver-free bounds are rounded down. They are sums, maxima and
#: path sums of at most ~10^7 floating-point terms of the instance's data, whose rounding
#: error is below 10^7 * 2^-53 ~ 1.1e-9 of the value at worst (1e-16 per term in practice);
#: the evaluator's objective carries the same kind of error the other way. Rounded down by
#: this much, a bound holds in exact arithmetic for the data as given: grade "safe".
SOLVER_FREE_ROUNDING = 4e-9


def round_down(value: float, relative: float = SOLVER_FREE_ROUNDING) -> float:
    """``value`` moved towards minus infinity by ``relative`` of its size (and one ulp)."""
    return math.nextafter(value - abs(value) * relative, -math.inf)


def solver_free_bounds(instance: Any, deadline: float | None = None) -> list[Bound]:
    """The kind's solver-free bounds (critical path, loads, ...), rounded down to be safe
    (then up to an integer where the kind declares the instance's optimum integral:
    `register_bounds`); the costlier ones only as far as ``deadline`` (a
    ``time.perf_counter()`` value) allows."""
    _load(instance.kind)
    fn = _BOUNDS.get(instance.kind)
    bounds = fn(instance, deadline) if fn is not None else []
    safe = [Bound(round_down(b.value), b.source, "safe", kind="solver_free") for b in bounds if math.isfinite(b.value)]
    integral = _INTEGRAL.get(instance.kind)
    if safe and integral is not None and integral(instance):
        # an integer optimum is at least the ceiling of any bound below it (pipeline_milp
        # proved 108 = the bound before rounding, and ended "optimal" beside a bound of
        # 107.9999996: status feasible at --mip-gap 0, review rev31 audit C)
        safe = [replace(b, value=float(math.ceil(b.value))) for b in safe]
    return safe
