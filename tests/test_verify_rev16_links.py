"""Review rev16 (second round): an honest ``tap --param exact=false`` result failed verify:
its LP bound carried no record of the call that proved it, so it was tied to the call with
the largest bound and held to that call's units. tap's and alpa_ilp's bounds now name the
call that proved them, and the one plan of an instance whose every op has a single
strategy (no solver call) is its own proof, not an unlinked solver bound."""

from __future__ import annotations

import json

import pytest

import distplan
from distplan.instances import load_document
from distplan.models.common import canonical_json, instance_from_dict
from distplan.verify import check_result


def _verified(result: object, inst: object) -> tuple[dict, list[tuple[str, str]], list[str]]:
    doc = json.loads(canonical_json(result.to_dict()))  # type: ignore[attr-defined]
    notes: list[str] = []
    return doc, check_result(doc, inst, notes), notes


@pytest.mark.parametrize("name", ["gpt-4layer-memtight", "gpt-24layer-2x4"])
def test_taps_lp_bound_is_linked_to_its_own_call(name: str) -> None:
    inst = distplan.load_instance(name)
    doc, problems, _ = _verified(distplan.solve(inst, "tap", exact=False), inst)
    assert problems == []
    linked = [b for b in doc["bounds"] if b.get("solver_call") is not None]
    assert linked
    for b in linked:  # the call's own bound, in model units: a power of ten per second
        call = doc["solver_results"][b["solver_call"]]
        assert b["value"] <= call["bound"] * 1e-6 and b["value"] >= call["bound"] * 1e-6 * (1 - 1e-9)


def test_alpa_ilps_bound_is_linked_to_the_call_that_proved_it() -> None:
    inst = distplan.load_instance("gpt-4layer-memtight")
    doc, problems, notes = _verified(distplan.solve(inst, "alpa_ilp"), inst)
    assert problems == [] and not any("without their link" in n for n in notes)
    (b,) = [b for b in doc["bounds"] if b["source"].startswith("alpa_ilp dual bound")]
    call = doc["solver_results"][b["solver_call"]]
    assert b["value"] <= call["bound"] * 1e-6 and b["value"] >= call["bound"] * 1e-6 * (1 - 1e-9)


def test_a_single_plan_is_its_own_proof() -> None:
    doc = load_document("gpt-2layer-2x2")  # every dimension of size 1: nothing splits
    doc["graph"]["dims"] = dict.fromkeys(doc["graph"]["dims"], 1)
    inst = instance_from_dict(doc)
    doc, problems, notes = _verified(distplan.solve(inst, "alpa_ilp"), inst)
    assert problems == [] and not doc["solver_results"]
    assert any(b["source"].startswith("alpa_ilp: the one plan's cost") and b["kind"] == "proof" for b in doc["bounds"])
    assert not any("without their link" in n for n in notes)
