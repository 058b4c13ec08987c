"""`distplan verify` notes a recorded wall time past the result's time limit, and whether
it stayed within the grace a solve may run past it (`options.run_grace`; review rev24b:
an overrun was silent). A note, not a problem: the plan and bounds are checked alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

import distplan
from distplan.verify import VerifyReport, verify_result


@pytest.fixture(scope="module")
def limited() -> tuple[Any, dict[str, Any]]:
    inst = distplan.load_instance("pipeline-vshape-p8")
    return inst, distplan.solve(inst, "1f1b", time_limit=30).to_dict()


def _notes(inst: Any, doc: dict[str, Any]) -> tuple[bool, list[str]]:
    report = VerifyReport()
    verify_result(doc, inst, report)
    return report.ok, [n for n in report.notes if "past its time limit" in n]


@pytest.mark.parametrize(("wall", "where"), [(None, None), (29.0, None), (31.5, "within the 3 s"), (33.5, "beyond the 3 s")])
def test_overrun_is_noted(limited: tuple[Any, dict[str, Any]], wall: float | None, where: str | None) -> None:
    inst, doc = limited
    doc = copy.deepcopy(doc)
    if wall is not None:
        doc["timings"]["wall_seconds"] = wall
    ok, notes = _notes(inst, doc)
    assert ok
    if where is None:
        assert notes == []
    else:
        assert len(notes) == 1 and f"{wall - 30:.3f} s past its time limit of 30 s ({where}" in notes[0], notes


def test_no_limit_no_note(limited: tuple[Any, dict[str, Any]]) -> None:
    inst, doc = limited
    doc = copy.deepcopy(doc)
    doc["options"]["time_limit"] = None
    doc["timings"]["wall_seconds"] = 1e6
    assert _notes(inst, doc) == (True, [])
