"""Baselines: equal bandwidth per dimension (``equal_bw``, LIBRA's comparison point), and
bandwidth proportional to the bytes each dimension carries (``proportional_to_traffic``):
weighted max-min fair allocations under the instance's constraints (`fill`), checked by the
evaluator and repaired onto the rows the solver held only to its tolerance (`finish`).
"""

from __future__ import annotations

from distplan.formulations.bandwidth.convex import emit_warnings, reject_menus
from distplan.formulations.bandwidth.data import prepare
from distplan.formulations.bandwidth.diagnose import raise_if_infeasible
from distplan.formulations.bandwidth.fill import baseline_weights, fair_allocation
from distplan.formulations.bandwidth.finish import accepted_or_repaired
from distplan.formulations.deadline import BASELINE_GRACE
from distplan.formulations.registry import Outcome, RunContext
from distplan.models.bandwidth_instance import BandwidthInstance


def _run(inst: BandwidthInstance, run_ctx: RunContext, proportional: bool) -> Outcome:
    # at least `BASELINE_GRACE` for its LPs, as the exact formulations give them (review
    # rev23: a limit used up while the command loaded left none, exit 4 at 0.3 s)
    ctx = run_ctx.child(None, at_least=BASELINE_GRACE, share_records=True)
    prog = prepare(inst)
    name = "proportional_to_traffic" if proportional else "equal_bw"
    reject_menus(prog, name)
    emit_warnings(prog)
    weights = baseline_weights(prog, proportional)
    B = fair_allocation(ctx, prog, weights)
    if B is None:
        return Outcome(plan=None, solver_results=list(ctx.solver_results))
    fixed = accepted_or_repaired(inst, prog, B, [])
    if fixed is None:
        # the fill LPs hold the rows only to the solver's tolerance: a conflict smaller
        # than it (dim <= -5 bytes/s) passes them; named as libra_perf names it
        raise_if_infeasible(ctx, prog, name)
        return Outcome(plan=None, solver_results=list(ctx.solver_results),
                       info={"no_plan": f"{name}: the fair allocation misses the constraints by more than the evaluator's tolerance and could not be repaired"})
    how, B, _ = fixed
    plan = prog.to_plan(B, "time")
    return Outcome(
        plan=plan,
        solver_results=list(ctx.solver_results),
        info={"weights": dict(zip(prog.dims, weights.tolist(), strict=True)), "warnings": list(prog.warnings),
              **({"repaired": how} if how else {})},
    )


def run_equal_bw(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """Equal bandwidth on every dimension (max-min fair under the constraints)."""
    return _run(inst, ctx, proportional=False)


def run_proportional(inst: BandwidthInstance, ctx: RunContext) -> Outcome:
    """Bandwidth proportional to the bytes each dimension carries (weighted max-min fair)."""
    return _run(inst, ctx, proportional=True)
