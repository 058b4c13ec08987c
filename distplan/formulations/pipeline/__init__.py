"""Pipeline scheduling: Tessel's repetend MILP, the exact whole-schedule MILP (Zero Bubble
style) and the classic schedules (GPipe, 1F1B, interleaved 1F1B, ZB-H1, ZB-H2; on the V
placement ZB-V, V-Min, V-Half, V-ZB)."""

from __future__ import annotations

from distplan.formulations.contract import Policy, time_limit_parameter
from distplan.formulations.pipeline import baselines, milp, repetend, tessel
from distplan.formulations.pipeline.bounds import pipeline_bounds
from distplan.formulations.pipeline.common import integral_data
from distplan.formulations.registry import Formulation, register, register_bounds

TESSEL = "Lin et al., Tessel: Boosting Distributed Execution of Large DNN Models via Flexible Schedule Search, HPCA 2024 (arXiv 2311.15269)"
ZB = "Qi, Wan, Huang, Lin, Zero Bubble (Almost) Pipeline Parallelism, ICLR 2024 (arXiv 2401.10241)"
QI = "Qi, Sun, Wan, Huang, Lin, Pipeline Parallelism with Controllable Memory, NeurIPS 2024 (arXiv 2405.15362)"

_BASELINES = {
    "gpipe": ("GPipe: all forward passes, then all backward passes (Huang et al., NeurIPS 2019)", "Huang et al., GPipe, NeurIPS 2019"),
    "1f1b": ("1F1B: warm-up forwards, then one forward one backward (warm-up shrinks to fit memory)", "Narayanan et al., PipeDream-Flush, ICML 2021"),
    "interleaved_1f1b": ("interleaved 1F1B over v model chunks per device (Megatron virtual stages)", "Narayanan et al., SC'21"),
    "zb_h1": ("ZB-H1: 1F1B order with W passes deferred, same in-flight memory as 1F1B", ZB),
    "zb_h2": ("ZB-H2: up to 2p-1 micro-batches in flight, W passes fill the bubbles", ZB),
    "zb_v": ("ZB-V on the V placement (2 chunks per device): zero bubble at 1F1B memory when F = B = W", ZB + ", v2"),
    "v_min": ("V-Min building block on the V placement: about 1/3 of 1F1B's activation memory", QI),
    "v_half": ("V-Half building block on the V placement: about 1/2 of 1F1B's activation memory, half its bubble", QI),
    "v_zb": ("V-ZB on the V placement: B first, then forwards within 1F1B's memory, W filling the bubbles", QI),
}

#: the programs pipeline_milp and tessel solve (`Formulation.solves`; each warm-starts or
#: finishes with the other's): the whole schedule's operation MILP and its parts (warm-up,
#: cool-down), disjunctive or time-indexed (`opmodel`, `timeindexed`), a fixed order's
#: retiming LP (`common.retime`), and Tessel's repetend MILPs (`repetend`)
PIPELINE_MODELS = (".+-(milp|warmup|cooldown)(-time-indexed)?", ".+-retime", "tessel-(probe|flat|repetend)")

for _name, (_desc, _ref) in _BASELINES.items():
    register(Formulation(kind="pipeline", name=_name, description=_desc, program="algorithm", run=baselines.make_run(_name), reference=_ref, solves=()))

register(
    Formulation(
        kind="pipeline",
        name="pipeline_milp",
        solves=PIPELINE_MODELS,
        description="exact whole-schedule MILP: order binaries for unrelated same-device pairs, memory prefix sums, warm start",
        program="milp",
        run=milp.run_pipeline_milp,
        exact=True,
        reference=ZB,
        spec=milp.PIPELINE_MILP,
        policy=Policy(default_time_limit=time_limit_parameter),
        params={"model": "auto", "warm_start": "tessel", "energy_cuts": True, "below_incumbent": True, "default_time_limit": 60.0},
        above={"default_time_limit": 0.0},
        choices={"model": ("auto", "disjunctive", "time_indexed"), "warm_start": ("tessel", "baselines")},
        recorded_model_fields=(milp.VALUE_AT_MOST,),
        spec_params={"model": ("auto", "disjunctive")},
    )
)

register(
    Formulation(
        kind="pipeline",
        name="tessel",
        solves=PIPELINE_MODELS,
        description="repetend (modulo schedule) of least period by an exact residue search (MILP fallback), unrolled to N, warm-up/cool-down by local search (MILPs opt-in)",
        program="milp",
        run=tessel.run_tessel,
        exact=False,
        reference=TESSEL + "; Hanen & Munier, cyclic scheduling (1995)",
        spec=repetend.REPETEND,
        params=dict(repetend.DEFAULTS),
        nullable=frozenset({"proof_time_limit"}),
        examples={"offsets": 3, "search_time_limit": 5.0},
        least={
            "offsets": 1,
            "search_time_limit": 0.0,
            "unfold": 1,
            "residue_nodes": 0,
            "flat_residue_nodes": 1,
            "repetend_candidates": 1,
            "justify_all_ops": 0,
            "whole_search_states": 0,
            "whole_search_time_limit": 0.0,
            "flat_time_limit": 0.0,
            "probe_time_limit": 0.0,
            "candidate_probe_limit": 0.0,
            "phase_time_limit": 0.0,
            "proof_time_limit": 0.0,
        },
        choices={"phase_model": ("auto", "disjunctive", "time_indexed"), "period_proof": ("residue", "auto", "rate_milp")},
        run_terminations=(tessel.NODE_BUDGETS_CUT,),
    )
)

register_bounds("pipeline", pipeline_bounds, integral=lambda inst: integral_data(inst, exact=True))
