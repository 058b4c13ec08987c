"""Brute-force reference for tiny pipeline instances (shared by the pipeline tests)."""

from __future__ import annotations

import itertools
import math

import numpy as np

from distplan.formulations.pipeline.common import SequenceCycleError, asap
from distplan.models.pipeline import PipelineInstance, evaluate, make_plan


def brute_force_makespan(inst: PipelineInstance) -> float:
    """Least makespan (seconds) over all device orders with earliest starts, memory checked
    by the evaluator; inf when no order is feasible."""
    n = inst.micro_batches
    per_dev = [[b * n + m for b in np.flatnonzero(inst.device_mask[:, d]) for m in range(n)] for d in range(inst.n_devices)]
    best = math.inf
    for orders in itertools.product(*(itertools.permutations(ops) for ops in per_dev)):
        try:
            start = asap(inst, [list(o) for o in orders])
        except SequenceCycleError:
            continue
        chk = evaluate(inst, make_plan(inst, start))
        if chk.feasible:
            best = min(best, chk.objective)
    return best
