"""The time unit of the placement programs, chosen from the instance's scale.

The placement MILP and the assignment relaxation count time in microseconds
(`relaxation.SCALE`), right for ops of microseconds to seconds. Ops of kiloseconds put
start times and big-Ms of 1e9 microseconds and more in the rows, beside the solvers'
absolute tolerances of 1e-7 to 1e-9; HiGHS then called models infeasible below a worse
incumbent, and the run reported that incumbent as optimal with its value as the bound
(review rev12 D1: 3180.26 s "optimal" where 3160.45 s is feasible).

`in_time_unit` runs a placement program on a copy of the instance whose times are
multiplied by a power of two so that the serial time (every op on its fastest device, one
after the other) is at most `MAX_SERIAL_SECONDS`: op times and latencies times ``k``,
bandwidths divided by ``k``. Scaling by a power of two is exact in binary floating point
(barring underflow), and so is every sum, product and quotient the evaluator forms from
those numbers: the scaled instance's makespans are exactly ``k`` times the original's, and
plans (start times divided by ``k``), bounds and claimed objectives are mapped back
exactly.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

from distplan.formulations.registry import Bound, Outcome, RunContext
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan

#: serial seconds above which the programs run on a scaled copy (bundled instances: < 1 s)
MAX_SERIAL_SECONDS = 10.0


def time_factor(inst: PlacementInstance) -> float:
    """A power of two ``k <= 1`` with ``k x serial time <= MAX_SERIAL_SECONDS``; 1 for
    instances within it."""
    serial = float(inst.time.min(axis=1).sum()) if inst.n_ops and inst.n_devices else 0.0
    if not (math.isfinite(serial) and serial > MAX_SERIAL_SECONDS):
        return 1.0
    return 2.0 ** -math.ceil(math.log2(serial / MAX_SERIAL_SECONDS))


def scaled(inst: PlacementInstance, k: float) -> PlacementInstance:
    """The instance with op times and latencies times ``k`` and bandwidths divided by
    ``k`` (so transfer times are times ``k`` too); memory and graph unchanged."""
    return dataclasses.replace(inst, time=inst.time * k, latency=inst.latency * k, bandwidth=inst.bandwidth / k)


#: the fields of the placement proofs' certificates that count seconds (`waist.waist_bound`'s
#: segment bounds); the others are unit-free (op names)
CERTIFICATE_SECONDS = ("segments",)


def certificate_in_seconds(certificate: dict[str, Any] | None, k: float) -> dict[str, Any] | None:
    """A bound's certificate from the scaled model mapped back to the instance's seconds
    (its `CERTIFICATE_SECONDS` fields divided by ``k``, exactly: a power of two)."""
    if certificate is None:
        return None
    return {key: [v / k for v in value] if key in CERTIFICATE_SECONDS else value for key, value in certificate.items()}


def in_time_unit(run: Callable[[PlacementInstance, RunContext], Outcome]) -> Callable[[PlacementInstance, RunContext], Outcome]:
    """``run`` on the instance scaled by `time_factor` (itself when the factor is 1), its
    plan, bounds and claimed objective mapped back to the instance's seconds;
    ``info["time_scale"]`` records the factor when it is not 1."""

    def run_in_unit(inst: PlacementInstance, ctx: RunContext) -> Outcome:
        k = time_factor(inst)
        if k == 1.0:
            return run(inst, ctx)
        out = run(scaled(inst, k), ctx)
        plan = out.plan
        if plan is not None:
            plan = make_plan(inst, plan.device, None if plan.start is None else plan.start / k)
        note = f" (times scaled by 2^{round(math.log2(k))} in the model)"
        # (a solver call's bound keeps its call: `relaxation.dual_bound_seconds` is this map)
        bounds = [
            Bound(b.value / k, b.source + note, b.grade, solver_record=b.solver_record, kind=b.kind, certificate=certificate_in_seconds(b.certificate, k))
            for b in out.bounds
        ]
        claimed = None if out.claimed_objective is None else out.claimed_objective / k
        return dataclasses.replace(out, plan=plan, bounds=bounds, claimed_objective=claimed, info={**out.info, "time_scale": k})

    run_in_unit.__doc__ = run.__doc__
    run_in_unit.__name__ = getattr(run, "__name__", "run")
    return run_in_unit
