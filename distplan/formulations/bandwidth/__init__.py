"""Bandwidth provisioning formulations (kind ``bandwidth``), after LIBRA (Won et al., ISPASS 2024).

| name | program | what |
|---|---|---|
| ``libra_perf`` | convex (SOC), cvxpy-CLARABEL | minimum training time |
| ``libra_perf_lp`` | LPs (tangent cuts), HiGHS | the same, certified by LP bounds: backend cross-check |
| ``libra_perf_per_cost`` | convex sweep, cvxpy-CLARABEL | global minimum of time x cost, plus the Pareto curve |
| ``libra_discrete`` | MILP, HiGHS | each dimension picks a link speed from a menu |
| ``equal_bw`` | LPs | equal bandwidth per dimension (max-min fair under constraints) |
| ``proportional_to_traffic`` | LPs | bandwidth proportional to per-dimension traffic |

Bounds of the time programs are safe (`safe`: the Lagrangian dual function at the solver's
or KKT-fitted multipliers, valid in exact arithmetic). With ``cvxpy-CLARABEL`` the conic
programs go to Clarabel directly in standard form (`conic`), not through cvxpy.

Every plan of ``libra_perf`` and ``libra_perf_lp`` goes through the evaluator before it is
returned (`finish`): a solver's point the evaluator rejects is repaired (scaled onto the rows
it exceeds, or moved toward a baseline), and the better of it and the baselines' plans is
returned (``info["plan_from"]``), so an exact formulation never loses to a baseline;
``libra_perf_per_cost`` likewise returns the baselines' plan when the evaluator finds its time
x cost lower than the search's (a conic solver's point at the optimum, to its tolerance). A used
dimension that a row holds at 0 (``d0 <= 0``) is infeasible by signs alone, on every backend
(`diagnose.starved`).
"""

from __future__ import annotations

from distplan.formulations.bandwidth.baselines import run_equal_bw, run_proportional
from distplan.formulations.bandwidth.convex import run_libra_perf
from distplan.formulations.bandwidth.discrete import OBJECTIVE_UNIT, run_libra_discrete
from distplan.formulations.bandwidth.outer import run_libra_perf_lp
from distplan.formulations.bandwidth.per_cost import run_libra_perf_per_cost
from distplan.formulations.bandwidth.stopping import POINTS_CUT, ROUNDS_CUT
from distplan.formulations.bandwidth.time_program import BUDGET_PROGRAM, TIME_PROGRAM
from distplan.formulations.registry import Formulation, register

#: the LPs every bandwidth formulation may solve (`Formulation.solves`): the baselines' fair
#: filling (`fill`), the largest bandwidth per dimension and the least unused one (`blocks`),
#: and the diagnosis of a program without a solution (`diagnose`)
AUXILIARY = ("fill-level", "fill-rest", "fill-room(-.+)?", "max-bandwidth-.+", "lowest-unused", "bandwidth-lp", "bandwidth-feasibility", "bandwidth-relax-one")

REFERENCE = "Won et al., LIBRA, ISPASS 2024 (arXiv 2109.11762); github.com/astra-sim/libra"

LIBRA_PERF = register(
    Formulation(
        kind="bandwidth",
        name="libra_perf",
        solves=AUXILIARY + (TIME_PROGRAM,),
        description="minimum training time: convex SOC program (epigraph of traffic * inv_pos(B))",
        program="convex",
        run=run_libra_perf,
        exact=True,
        reference=REFERENCE,
        default_backend="cvxpy-CLARABEL",
    )
)

LIBRA_PERF_LP = register(
    Formulation(
        kind="bandwidth",
        name="libra_perf_lp",
        solves=AUXILIARY + ("libra_perf_lp",),
        description="minimum training time by LPs with tangent cuts of 1/B until the certified gap <= tolerance",
        program="lp",
        run=run_libra_perf_lp,
        exact=True,
        reference=REFERENCE + "; Kelley's cutting planes (1960)",
        default_backend="highs",
        params={"tolerance": 1e-7, "max_rounds": 500},
        above={"tolerance": 0.0},
        below={"tolerance": 1.0},
        least={"max_rounds": 1},
        run_terminations=(ROUNDS_CUT,),
    )
)

LIBRA_PERF_PER_COST = register(
    Formulation(
        kind="bandwidth",
        name="libra_perf_per_cost",
        solves=AUXILIARY + (TIME_PROGRAM, BUDGET_PROGRAM, "min-cost"),
        description="global minimum of time x cost: certified branch-and-bound over the cost budget (convex per point), Pareto curve",
        program="convex",
        run=run_libra_perf_per_cost,
        exact=True,
        reference=REFERENCE,
        default_backend="cvxpy-CLARABEL",
        params={"tolerance": 1e-6, "curve_points": 8, "max_points": 400, "stall_points": 50},
        above={"tolerance": 0.0},
        below={"tolerance": 1.0},
        least={"curve_points": 1, "max_points": 1, "stall_points": 0},
        run_terminations=(POINTS_CUT,),
    )
)

LIBRA_DISCRETE = register(
    Formulation(
        kind="bandwidth",
        name="libra_discrete",
        solves=AUXILIARY + ("libra_discrete", "libra_perf_lp"),
        description="minimum training time when each dimension picks a link speed from a menu (exact MILP over the menus; bound from the instance's menus or the continuous relaxation)",
        program="milp",
        run=run_libra_discrete,
        exact=False,
        reference=REFERENCE,
        default_backend="highs",
        params={"step": 12.5, "max_options": 400},
        above={"step": 0.0},
        least={"max_options": 1},
        recorded_model_fields=(OBJECTIVE_UNIT,),
    )
)

EQUAL_BW = register(
    Formulation(
        kind="bandwidth",
        name="equal_bw",
        solves=AUXILIARY,
        description="baseline: equal bandwidth per dimension (max-min fair under the constraints)",
        program="algorithm",
        run=run_equal_bw,
        exact=False,
        reference=REFERENCE + " (its equal-bandwidth comparison point)",
        default_backend="highs",
    )
)

PROPORTIONAL = register(
    Formulation(
        kind="bandwidth",
        name="proportional_to_traffic",
        solves=AUXILIARY,
        description="baseline: bandwidth proportional to the bytes each dimension carries (weighted max-min fair)",
        program="algorithm",
        run=run_proportional,
        exact=False,
        reference=REFERENCE,
        default_backend="highs",
    )
)
