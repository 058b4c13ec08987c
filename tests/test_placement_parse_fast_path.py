"""Reading a placement document: ops and edges whose fields are all plain are read at once
(`_plain_ops`, `_plain_edges`), the others one by one with each field checked
(`_checked_ops`, `_checked_edges`), review rev29 D4 (loading a 200,000-op instance took most
of a 5 s limit). Both paths give the same instance, and a bad field anywhere is still named
by its path."""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan.models.placement_instance as pi
from distplan.errors import InputError
from distplan.instances import bundled, load_document
from distplan.models.common import instance_from_dict

PLACEMENT = sorted(n for n, e in bundled().items() if e.get("kind") == "placement")


def both_paths(doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fast = instance_from_dict(copy.deepcopy(doc))
    with monkeypatch.context() as m:
        m.setattr(pi, "_plain_ops", lambda *a: None)
        m.setattr(pi, "_plain_edges", lambda *a: None)
        checked = instance_from_dict(copy.deepcopy(doc))
    return fast, checked


def assert_same(a: Any, b: Any) -> None:
    for field in ("time", "memory", "temporary", "output", "src", "dst", "edge_bytes"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), field
    assert a.colocate == b.colocate and a.op_names == b.op_names


@pytest.mark.parametrize("name", PLACEMENT)
def test_both_paths_read_every_bundled_placement_alike(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fast, checked = both_paths(dict(load_document(name)), monkeypatch)
    assert_same(fast, checked)


def test_a_plain_document_takes_the_fast_path() -> None:
    doc = dict(load_document("gnmt-v2-4gpu"))
    ops = doc["graph"]["ops"]
    assert pi._plain_ops(ops, 4) is not None
    assert pi._plain_edges(doc["graph"]["edges"], {op["name"]: k for k, op in enumerate(ops)}) is not None


#: values a field may wrongly hold: negative, not finite, not a number, out of range
BAD = [-1, -0.5, float("nan"), float("inf"), True, None, "1", 10**19, 2e18, 10**400]
FIELDS = ["time", "memory", "temporary", "output", "colocate", "bytes", "src", "dst"]


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(st.one_of(st.integers(0, 10**6), st.floats(0.0, 1e3)), min_size=14, max_size=14),
    field=st.sampled_from([*FIELDS, "none"]),
    where=st.integers(0, 2),
    bad=st.integers(0, len(BAD) - 1),
)
def test_both_paths_agree_or_name_the_same_field(values: list[Any], field: str, where: int, bad: int) -> None:
    """A valid document with at most one bad field: the same instance, or the same error
    (path and problem), whichever path reads it."""
    ops = [{"name": nm, "time": values[3 * k], "memory": values[3 * k + 1], "temporary": values[3 * k + 2], "output": values[9 + k], "colocate": "g" if k else None} for k, nm in enumerate("abc")]
    edges = [{"src": "a", "dst": "b", "bytes": values[12]}, {"src": "b", "dst": "c", "bytes": values[13]}]
    if field in ("time", "memory", "temporary", "output"):
        ops[where][field] = BAD[bad]
    elif field == "colocate":
        ops[where]["colocate"] = ["", 1, 0.5][where]
    elif field == "bytes":
        edges[where % 2]["bytes"] = BAD[bad]
    elif field in ("src", "dst"):
        edges[where % 2][field] = ["x", 7, edges[where % 2]["dst" if field == "src" else "src"]][where]
    doc = {"format": "distplan/1", "kind": "placement", "name": "p", "cluster": {"devices": [{"name": "d0", "memory": 1e12}, {"name": "d1", "memory": 1e12}], "bandwidth": 1e10}, "graph": {"ops": ops, "edges": edges}}
    outcomes = []
    for plain in (True, False):
        saved = (pi._plain_ops, pi._plain_edges)
        if not plain:
            pi._plain_ops, pi._plain_edges = (lambda *a: None), (lambda *a: None)
        try:
            outcomes.append(instance_from_dict(copy.deepcopy(doc)))
        except InputError as exc:
            outcomes.append((exc.path, exc.problem))
        finally:
            pi._plain_ops, pi._plain_edges = saved
    fast, checked = outcomes
    if isinstance(checked, tuple):
        assert fast == checked
    else:
        assert not isinstance(fast, tuple), fast
        assert_same(fast, checked)
