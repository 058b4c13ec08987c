"""Compression plans at the evaluator's memory tolerance (`compression_eval.memory_limit`):
Poseidon's rule called its own plan infeasible 0.5e-9 (relative) over a capacity, which the
evaluator accepts (review rev16); the formulations now fill what the evaluator accepts, and
a plan beyond that is still refused, naming the device."""

from __future__ import annotations

import copy

import pytest

import distplan
from distplan.errors import InfeasibleError
from distplan.instances import load_document
from distplan.models.common import instance_from_dict
from distplan.models.compression_eval import evaluate, memory_limit


def _tightened(relative_over: float) -> object:
    """compression-mlp-small with every device's capacity set so that Poseidon's plan holds
    ``relative_over`` more than it."""
    doc = load_document("compression-mlp-small")
    plan = distplan.solve(instance_from_dict(doc), "sfb_poseidon_rule").plan
    used = evaluate(instance_from_dict(doc), plan).details["memory_bytes"]
    doc = copy.deepcopy(doc)
    for dev in doc["cluster"]["devices"]:
        dev["memory_bytes"] = used[dev["name"]] / (1 + relative_over)
    return instance_from_dict(doc)


@pytest.mark.parametrize("formulation", ["sfb_poseidon_rule", "greedy_by_saving", "tag_sfb"])
def test_a_plan_the_evaluator_accepts_is_not_called_infeasible(formulation: str) -> None:
    res = distplan.solve(_tightened(0.5e-9), formulation)
    assert res.check is not None and res.check.feasible
    assert res.bound is not None and res.bound <= res.objective


def test_beyond_the_tolerance_the_rule_names_the_device() -> None:
    with pytest.raises(InfeasibleError, match=r"on device \S+, which holds .* \(over by"):
        distplan.solve(_tightened(5e-9), "sfb_poseidon_rule")


def test_the_limit_is_the_evaluators() -> None:
    assert memory_limit(1e9) > 1e9 and memory_limit(1e9) == pytest.approx(1e9 * (1 + 1e-9), abs=1e-6)
