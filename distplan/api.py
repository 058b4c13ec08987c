"""`solve()`: instance -> formulation -> backend -> plan -> independent evaluator -> Result."""

from __future__ import annotations

import math
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from distplan.errors import DistplanError, InfeasibleError, InputError, InternalError, NoSolutionError, PlanCheckError
from distplan.formulations.contract import ContractError
from distplan.formulations.deadline import DeadlineReached
from distplan.formulations.registry import (
    Bound,
    RunContext,
    bound_source,
    check_fold,
    get_folder,
    get_formulation,
    solver_free_match,
)
from distplan.models.common import Check, json_ready, kind_spec
from distplan.solvers.base import BackendError, SolveOptions, get_backend
from distplan.solvers.result import (
    INFEASIBLE_TERMINATIONS,
    LIMIT_TERMINATIONS,
    RECORD_VERSION,
    RECORD_VERSION_KEY,
    TIME_TERMINATIONS,
    SolutionStatus,
    SolverResult,
    Termination,
    options_record,
    relative_gap,
)

#: default relative gap under which a plan counts as optimal, passed to every backend as its
#: relative MIP gap (HiGHS's, CBC's and SCIP's own default); each Result records the one used
DEFAULT_GAP_TOLERANCE = 1e-4
#: the name this tolerance had before results recorded theirs (read by older verifiers)
OPTIMALITY_TOLERANCE = DEFAULT_GAP_TOLERANCE
#: the fields every result's record has (`Result.to_dict`): a result of
#: `solvers.result.RECORD_VERSION` that lacks one had it dropped (`distplan verify`)
RESULT_RECORD_FIELDS = (
    RECORD_VERSION_KEY,
    "instance",
    "kind",
    "formulation",
    "backend",
    "backend_version",
    "termination",
    "status",
    "objective",
    "objective_name",
    "objective_unit",
    "bound",
    "bound_source",
    "bound_grade",
    "gap",
    "gap_tolerance",
    "options",
    "bounds",
    "timings",
    "check",
    "solver_results",
    "plan",
    "info",
)


def gap_tolerance(mip_gap: float | None) -> float:
    """The relative gap under which a run solved with ``mip_gap`` counts as optimal, which
    its result records (``gap_tolerance``): that gap, or `DEFAULT_GAP_TOLERANCE`."""
    return float(DEFAULT_GAP_TOLERANCE if mip_gap is None else mip_gap)


#: seconds the costlier solver-free bounds get after a run that used its whole time limit
SOLVER_FREE_GRACE = 0.25


@dataclass
class Result:
    """The outcome of `solve()`: a checked plan, its objective, the best proven bound.

    ``objective`` is always the independent evaluator's value, never the formulation's own
    claim. ``bound`` is the best proven lower bound (minimization) on the instance optimum,
    or None; ``status`` is OPTIMAL only when the bound closes the gap or an exact program
    was solved to optimality and the evaluator agrees.

    ``status`` is OPTIMAL exactly when ``gap <= gap_tolerance`` (the gap between the
    evaluated objective and the best proven bound, relative to the objective); the
    tolerance is recorded so that anyone can re-check the claim.
    """

    instance: str
    kind: str
    formulation: str
    backend: str
    backend_version: str
    termination: Termination
    status: SolutionStatus
    objective: float | None
    bound: float | None
    bound_source: str | None
    plan: Any
    check: Check | None
    timings: dict[str, float]
    solver_results: list[SolverResult] = field(default_factory=list)
    bounds: list[Bound] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)
    objective_name: str = "objective"
    objective_unit: str = ""
    gap_tolerance: float = DEFAULT_GAP_TOLERANCE
    bound_grade: str | None = None
    #: the options the run was solved with (`solvers.result.options_record`), which
    #: `distplan verify` checks ``gap_tolerance`` against; None when not recorded
    options: dict[str, Any] | None = None

    @property
    def gap(self) -> float | None:
        return relative_gap(self.objective, self.bound)

    def to_dict(self) -> dict[str, Any]:
        """The result's record (JSON-ready: ``distplan solve --result`` and ``--json``, a
        benchmark run's ``result_json``), headed by its format's ``record_version``
        (`solvers.result.RECORD_VERSION`), which `distplan verify` reads. Strict JSON
        (RFC 8259): an infinite or NaN number outside the plan (a solver call's -inf bound,
        a search's missing bound) is None, as ``--json`` and ``--result`` write it."""
        record = {
            RECORD_VERSION_KEY: RECORD_VERSION,
            "instance": self.instance,
            "kind": self.kind,
            "formulation": self.formulation,
            "backend": self.backend,
            "backend_version": self.backend_version,
            "termination": self.termination.value,
            "status": self.status.value,
            "objective": self.objective,
            "objective_name": self.objective_name,
            "objective_unit": self.objective_unit,
            "bound": self.bound,
            "bound_source": self.bound_source,
            "bound_grade": self.bound_grade,
            "gap": self.gap,
            "gap_tolerance": self.gap_tolerance,
            "options": self.options,
            "bounds": [b.to_dict() for b in self.bounds],
            "timings": self.timings,
            "check": self.check.to_dict() if self.check else None,
            "solver_results": [r.to_dict() for r in self.solver_results],
            "plan": None,
            "info": self.info,
        }
        record = json_ready(record)  # (the plan's numbers are finite: evaluated)
        record["plan"] = self.plan.to_dict() if self.plan is not None else None
        return record


def _source(instance: Any) -> str | None:
    """The file or bundled name an instance was given as (``info["source"]``, where
    ``distplan verify`` finds it), None for an instance object."""
    return str(instance) if isinstance(instance, str | Path) else None


def _load(instance: Any) -> Any:
    if isinstance(instance, str | Path):
        from distplan.instances import load_instance

        return load_instance(instance)
    if not isinstance(getattr(instance, "kind", None), str):
        raise InputError("instance", f"a {type(instance).__name__} is not an instance", "pass an instance object, a file path or a bundled name")
    return instance


def solve(
    instance: Any,
    formulation: str,
    backend: str | None = None,
    time_limit: float | None = None,
    mip_gap: float | None = None,
    fold: bool = False,
    *,
    threads: int | None = None,
    seed: int | None = None,
    verbose: bool = False,
    solver_options: dict[str, Any] | None = None,
    started: float | None = None,
    **params: Any,
) -> Result:
    """Solve ``instance`` (an instance object, a file path or a bundled name) with a named
    formulation on a backend (default: the formulation's, HiGHS for LP/MILP).

    ``params`` go to the formulation (e.g. ``theta=0.1`` for ``baechi_sct``). The returned
    plan has been re-checked by the kind's independent evaluator; a plan that fails the
    check raises `PlanCheckError`. Times are seconds. Raises `InfeasibleError` when no plan
    exists and `NoSolutionError` when none was found within the limits; every exception
    that leaves it is a `DistplanError` (bad input: `InputError`).

    ``time_limit`` (seconds, > 0) holds for the whole run: building, hand-over, solving and
    the formulation's own phases; a solver that cannot be interrupted runs in a child
    process that is killed shortly after the limit. ``mip_gap`` (relative, default
    `DEFAULT_GAP_TOLERANCE`) is handed to every backend and recorded as the result's
    ``gap_tolerance``. ``started`` (a ``time.perf_counter()`` value) moves the start of the
    time limit earlier, e.g. to when a command began, so that loading counts too.
    """
    options = _options(time_limit, mip_gap, threads, seed, verbose, solver_options)
    if not isinstance(fold, bool):  # ("no" would fold)
        raise InputError("fold", f"must be True or False, got {fold!r}")
    if started is not None and (isinstance(started, bool) or not isinstance(started, int | float) or not math.isfinite(started)):
        raise InputError("started", f"expected a time.perf_counter() value (seconds), got {started!r}", "pass time.perf_counter() from when the run began, or leave it out")
    try:
        return _solve(instance, formulation, backend, options, fold, params, started)
    except DistplanError:
        raise
    except Exception as exc:  # a bug: still a DistplanError, with the original as its cause
        raise InternalError(f"{type(exc).__name__} in {formulation!r}: {exc}") from exc


#: the largest seed a solve takes (the solvers' seeds are 32-bit signed integers)
MAX_SEED = 2**31 - 1

#: the most solver threads a solve may ask for, at least: HiGHS makes its worker threads
#: before its time limit starts (3,000 took 10 s at a 1 s limit, 100,000 aborted the
#: process: review rev16)
MAX_THREADS = 256


def max_threads() -> int:
    """The most solver threads a solve may ask for: `MAX_THREADS`, or the machine's cores
    when it has more."""
    return max(MAX_THREADS, os.cpu_count() or 1)


def _options(
    time_limit: float | None,
    mip_gap: float | None,
    threads: int | None,
    seed: int | None,
    verbose: bool,
    solver_options: dict[str, Any] | None,
) -> SolveOptions:
    """Checked solve options (bad values are input errors, before anything runs)."""
    if time_limit is not None and (
        isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not math.isfinite(time_limit) or time_limit <= 0
    ):
        raise InputError("time_limit", f"must be a positive number of seconds, got {time_limit!r}", "give e.g. time_limit=30, or None for no limit")
    if mip_gap is None:
        mip_gap = DEFAULT_GAP_TOLERANCE
    if isinstance(mip_gap, bool) or not isinstance(mip_gap, int | float) or not math.isfinite(mip_gap) or not 0 <= mip_gap < 1:
        raise InputError("mip_gap", f"must be a relative gap in [0, 1), got {mip_gap!r}", f"give e.g. mip_gap={DEFAULT_GAP_TOLERANCE}")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or not 1 <= threads <= max_threads()):
        raise InputError("threads", f"must be a whole number from 1 to {max_threads()}, got {threads!r}", "give e.g. threads=1, or None for the solver's default")
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED):
        # (review rev23c: "x" and -1 ended as internal errors in a backend, 1.5 and True
        # were recorded as given)
        raise InputError("seed", f"must be a whole number from 0 to {MAX_SEED}, got {seed!r}", "give e.g. seed=1, or None for the solvers' own")
    if not isinstance(verbose, bool):
        raise InputError("verbose", f"must be True or False, got {verbose!r}")
    if solver_options is not None and not isinstance(solver_options, dict):
        raise InputError("solver_options", f"must be a dict of backend options, got {type(solver_options).__name__}")
    return SolveOptions(
        time_limit=None if time_limit is None else float(time_limit),
        mip_gap=float(mip_gap),
        threads=threads,
        seed=seed,
        verbose=verbose,
        raw=dict(solver_options or {}),
    )


def _solve(
    instance: Any, formulation: str, backend: str | None, options: SolveOptions, fold: bool, params: dict[str, Any], started: float | None
) -> Result:
    t_start = time.perf_counter() if started is None else min(started, time.perf_counter())
    inst = _load(instance)
    spec = kind_spec(inst.kind)
    form = get_formulation(inst.kind, formulation)
    form.check_params(params)
    if backend is not None and not str(backend).strip():  # ("" read as no backend: the default, silently)
        raise InputError("backend", "the backend's name is empty", "name one listed by `distplan list backends`, or leave it out for the formulation's default")
    be = get_backend(backend or form.default_backend)
    if form.program == "convex":
        be.check_can_take(None, convex=True)
    elif form.program == "milp" and not be.capabilities.milp:
        raise BackendError(f"formulation {form.name!r} is a MILP and backend {be.name!r} takes no integer variables")
    elif not be.available():
        be.check_can_take(None)
    be.check_options(options.raw)

    target = inst
    folding = None
    t_fold = time.perf_counter()
    if fold:
        check_fold(form, inst.kind)  # (a bound-only formulation on a folding not declared exact)
        folder = get_folder(inst.kind)
        try:
            folding = folder(inst, params)
        except InfeasibleError as exc:  # (a coarsening's merged op that fits no device, say)
            _not_proven_by_folding(inst, spec, form.name, exc)
        target = folding.instance
        if form.bound_only and not folding.exact:  # a folder declared exact that made an inexact folding
            raise ContractError(f"{inst.kind}: its folder is declared exact, but its folding of {inst.name} is not")
    fold_seconds = time.perf_counter() - t_fold

    run_params = {**form.params, **params}
    options = form.policy.options_for(options, target, run_params)
    ctx = RunContext(be, options, run_params, started=t_start)
    t_run = time.perf_counter()
    try:
        outcome = form.run(target, ctx)
    except DeadlineReached as exc:  # a phase gave up with nothing to return
        raise NoSolutionError(f"{inst.name}: {form.name} found no solution before the limit ({exc})") from None
    except InfeasibleError as exc:
        if folding is None or folding.exact:
            raise
        _not_proven_by_folding(inst, spec, form.name, exc)
    run_seconds = time.perf_counter() - t_run
    solver_results = outcome.solver_results or ctx.solver_results
    undeclared = form.undeclared_models([r.model_name for r in solver_results])
    if undeclared:  # (a programming error: verify would reject the result as another formulation's)
        raise ContractError(f"{form.name}: a solver call solved model {undeclared[0]!r}, which its declaration (Formulation.solves: {', '.join(form.solves or ())}) does not name")
    last = solver_results[-1] if solver_results else None
    if options.raw and not solver_results:
        # e.g. `--solver-option presolve=off` on m-ETF: said, not silently dropped
        warnings.warn(f"{form.name} made no solver call here, so solver_options {sorted(options.raw)} had no effect", UserWarning, stacklevel=3)
    # exact programs report their solver's termination; heuristics (even LP-based) and
    # programs not exact on this instance "finished", unless a solver call of theirs was
    # cut by time (its limit or the kill after it): then they did not run to completion. A
    # program solved on a folding that is not exact is no exact program of the instance: its
    # solver's "optimal" is the folded restriction's (review rev30 D10: alpa_ilp --fold
    # ended "optimal" 29.7 % above tap's plan)
    if last is not None and form.is_exact(target) and (folding is None or folding.exact):
        termination = last.termination
    elif any(r.termination in TIME_TERMINATIONS for r in solver_results):
        termination = Termination.TIME_LIMIT
    else:
        termination = Termination.FINISHED
    if outcome.termination is not None:
        termination = outcome.termination

    if form.bound_only:
        free_deadline = None if ctx.deadline is None else max(ctx.deadline, time.perf_counter() + SOLVER_FREE_GRACE)
        return _bound_only_result(
            inst, form.name, be.name, be.version(), outcome.bounds, spec, time.perf_counter() - t_start, solver_results, free_deadline, options, None if folding is None else folding.stats, termination,
            source=_source(instance), info=outcome.info,
        )

    if outcome.plan is None:
        if last is not None and last.termination in INFEASIBLE_TERMINATIONS:
            infeasible = InfeasibleError(f"{inst.name}: {form.name} found the problem infeasible ({last.raw_status})")
            if folding is not None and not folding.exact:
                _not_proven_by_folding(inst, spec, form.name, infeasible)
            raise infeasible
        limits = [t for t in (outcome.termination, last.termination if last is not None else None) if t in LIMIT_TERMINATIONS]
        if limits:
            raise NoSolutionError(f"{inst.name}: {form.name} found no solution before the limit ({limits[0].value})")
        if outcome.info.get("no_plan"):  # the formulation says why
            raise NoSolutionError(f"{inst.name}: {outcome.info['no_plan']}")
        detail = f" ({last.raw_status}: {last.message})" if last is not None else ""
        raise NoSolutionError(f"{inst.name}: {form.name} returned no plan{detail}")

    plan = folding.unfold(outcome.plan) if folding is not None else outcome.plan
    t_eval = time.perf_counter()
    check = spec.evaluate(inst, plan)
    eval_seconds = time.perf_counter() - t_eval
    if not check.feasible:
        raise PlanCheckError(
            f"{inst.name}: formulation {form.name!r} returned a plan the evaluator rejects: "
            + "; ".join(check.violations[:5])
        )
    if termination in INFEASIBLE_TERMINATIONS:
        # a plan the evaluator accepts refutes the solver's "infeasible" (SciPy's HiGHS on
        # pipeline_milp's disjunctive model with blocks of 1e9 s, review rev31): numerical
        # trouble, not a verdict on the instance
        outcome.info.setdefault("numerical", f"the last solver call ended {termination.value!r}, but the plan returned is feasible")
        termination = Termination.NUMERICAL

    bounds = list(outcome.bounds) if (folding is None or folding.exact) else []
    from distplan.formulations.registry import solver_free_bounds

    # the costlier solver-free bounds stop at the run's limit, with at least a small grace:
    # a formulation that used its whole limit would otherwise leave them none (placement's
    # path cuts, 0.11 s on gpt2-xl-infer-pcie-t4x4-tight, proved its time-limited plan optimal)
    free = solver_free_bounds(inst, None if ctx.deadline is None else max(ctx.deadline, time.perf_counter() + SOLVER_FREE_GRACE))
    bounds.extend(free)
    finite = [b for b in bounds if b.value is not None and math.isfinite(b.value)]
    link_bounds(form.name, finite, solver_results, free)
    best = max(finite, key=lambda b: b.value) if finite else None
    objective = check.objective
    gap = relative_gap(objective, best.value if best else None)
    if best is not None and best.value > objective:
        raise PlanCheckError(
            f"{inst.name}: bound {best.value!r} ({best.source}, grade {best.grade}) exceeds the evaluated objective "
            f"{objective!r}: a bound or the evaluator is wrong"
        )
    tolerance = gap_tolerance(options.mip_gap)
    optimal = gap is not None and gap <= tolerance
    timings = {
        "build_seconds": sum(r.build_seconds for r in solver_results),
        "handover_seconds": sum(r.handover_seconds for r in solver_results),
        "solve_seconds": sum(r.solve_seconds for r in solver_results),
        "fold_seconds": fold_seconds,
        "formulation_seconds": run_seconds,
        "evaluate_seconds": eval_seconds,
        "wall_seconds": time.perf_counter() - t_start,
    }
    info = dict(outcome.info)
    if _source(instance) is not None:
        info["source"] = _source(instance)
    if outcome.claimed_objective is not None and folding is None:
        info["claimed_objective"] = outcome.claimed_objective
    if folding is not None:
        info["folding"] = folding.stats
    return Result(
        instance=inst.name,
        kind=inst.kind,
        formulation=form.name,
        backend=be.name,
        backend_version=be.version(),
        termination=termination,
        status=SolutionStatus.OPTIMAL if optimal else SolutionStatus.FEASIBLE,
        objective=objective,
        bound=best.value if best else None,
        bound_source=best.source if best else None,
        plan=plan,
        check=check,
        timings=timings,
        solver_results=solver_results,
        bounds=finite,
        info=info,
        objective_name=check.objective_name or spec.objective_name,
        objective_unit=check.objective_unit or spec.objective_unit,
        gap_tolerance=tolerance,
        bound_grade=best.grade if best else None,
        options=options_record(options),
    )


def _not_proven_by_folding(inst: Any, spec: Any, formulation: str, exc: InfeasibleError) -> NoReturn:
    """The end of a run that found no plan on a folding that is not exact: the folding
    restricts the problem (placement's coarsening merges ops), so its infeasibility proves
    nothing of the instance (review rev24 D1: ``placement_milp --fold`` said "infeasible",
    exit 3, on an instance with a 21.7 ms plan). The kind's own check of the instance
    (`KindSpec.check_plan_exists`) still proves infeasibility where it can; else
    `NoSolutionError` (exit 4)."""
    if spec.check_plan_exists is not None:
        spec.check_plan_exists(inst)
    raise NoSolutionError(
        f"{inst.name}: {formulation} found no plan on the folded instance ({exc}); the folding restricts the problem "
        "(it is not exact), so this does not prove the instance infeasible (solve without --fold)",
        exc.details,
    ) from None


def _bound_only_result(
    inst: Any,
    formulation: str,
    backend: str,
    version: str,
    bounds: list[Bound],
    spec: Any,
    wall: float,
    solver_results: list[SolverResult] | None = None,
    deadline: float | None = None,
    options: SolveOptions | None = None,
    folding_stats: dict[str, Any] | None = None,
    termination: Termination = Termination.FINISHED,
    source: str | None = None,
    info: dict[str, Any] | None = None,
) -> Result:
    """The result of a formulation that proves bounds only (no plan): its bounds and the
    solver-free ones, linked to their calls, with the gap tolerance and options of the run
    (`distplan verify` checks them against the calls' records, as for any result), its
    ``termination`` (`time_limit` when time cut a solver call of it, or left one unsolved:
    it did not finish) and the run's ``info`` (why it stopped)."""
    from distplan.formulations.registry import solver_free_bounds

    # the costlier solver-free bounds stop at ``deadline``, as after a plan (review rev16 D3:
    # placement's path cuts took 1.8 s past a limit of 0.05 s on 27,083 ops)
    free = solver_free_bounds(inst, deadline)
    calls = list(solver_results or [])
    allb = [b for b in [*bounds, *free] if math.isfinite(b.value)]
    link_bounds(formulation, allb, calls, free)
    best = max(allb, key=lambda b: b.value) if allb else None
    return Result(
        instance=inst.name,
        kind=inst.kind,
        formulation=formulation,
        backend=backend,
        backend_version=version,
        termination=termination,
        status=SolutionStatus.NONE,
        objective=None,
        bound=best.value if best else None,
        bound_source=best.source if best else None,
        plan=None,
        check=None,
        timings={"build_seconds": 0.0, "handover_seconds": 0.0, "solve_seconds": 0.0, "wall_seconds": wall},
        bounds=allb,
        solver_results=calls,
        objective_name=spec.objective_name,
        objective_unit=spec.objective_unit,
        bound_grade=best.grade if best else None,
        info={**(info or {}), **({} if folding_stats is None else {"folding": folding_stats}), **({} if source is None else {"source": source})},
        gap_tolerance=DEFAULT_GAP_TOLERANCE if options is None or options.mip_gap is None else float(options.mip_gap),
        options=None if options is None else options_record(options),
    )


def link_bounds(formulation: str, bounds: list[Bound], calls: list[SolverResult], free: list[Bound]) -> None:
    """Say what proves each of ``bounds`` (`Bound.kind`) and tie every solver call's bound to
    its record, so that `distplan verify` can re-check it.

    A bound is ``"solver"`` when a call's record proved it (``solver_record``: it gets
    ``solver_call``, the index of that call in ``calls``), ``"solver_free"`` when it
    repeats one of ``free`` (recomputed by verify), else what its source is
    (`registry.BOUND_SOURCES`): a formulation's own ``"proof"``, or a solver call's bound
    reported without its record, which stays unlinked. That is a formulation's mistake (every
    formulation passes the record of the call that proved a solver bound, and a test solves
    each to check): no call is guessed for it, and verify rejects a result that rests on it.
    Verify holds a linked bound to its call's bound converted as the formulation states it
    (`registry.BoundSource.conversion`)."""
    for b in bounds:
        if b.solver_record is not None:
            b.kind = "solver"
            b.solver_call = next((k for k, r in enumerate(calls) if r is b.solver_record), None)
        elif b.kind == "solver_free" or solver_free_match(b.source, formulation, free) is not None:
            b.kind = "solver_free"
        else:
            known = bound_source(formulation, b.source)
            b.kind = known.kind if known is not None else "proof"
