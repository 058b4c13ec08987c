"""`schema.unknown_field_error`, the walk every load makes for unknown fields: it names an
object's first unknown key in the document's order (before anything nested), enters objects typed by
``additionalProperties`` and arrays, and leaves alone values whose schema closes nothing."""

from __future__ import annotations

from typing import Any

from distplan.models.schema import unknown_field_error

CLOSED: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "additionalProperties": False}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ops": {"type": "array", "items": CLOSED}, "devices": {"type": "object", "additionalProperties": CLOSED}, "free": {"type": "object"}},
    "additionalProperties": False,
}


def _path(doc: dict[str, Any]) -> str | None:
    found = unknown_field_error(doc, SCHEMA)
    return None if found is None else found.path


def test_the_first_unknown_field_in_document_order_is_named() -> None:
    assert _path({"zeta": 1, "ops": [], "alpha": 2}) == "zeta"
    assert _path({"ops": [{"a": 1}, {"b": 2, "c": 3, "aa": 4}]}) == "ops[1].c"


def test_objects_typed_by_additional_properties_are_entered() -> None:
    assert _path({"devices": {"gpu0": {"a": 1}, "gpu1": {"a": 1, "memroy": 2}}}) == "devices.gpu1.memroy"
    assert _path({"devices": {"gpu0": {"a": 1, "b": 2}}}) is None


def test_values_whose_schema_closes_nothing_are_left_alone() -> None:
    assert _path({"free": {"anything": {"nested": [1, {"x": 2}]}}, "ops": [{"a": 1}]}) is None
    found = unknown_field_error({"ops": [{"a": 1, "memroy": 2}]}, SCHEMA)
    assert found is not None and "did you mean" not in str(found) and "known: a, b" in str(found)
