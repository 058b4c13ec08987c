"""Check documents against the JSON Schema files shipped in ``distplan/schema/``.

A small validator for the subset of JSON Schema the files use (type, const, enum,
required, properties, additionalProperties, items, minItems, minLength, minimum,
exclusiveMinimum, oneOf), so that `distplan validate` needs no extra package. Errors name
the JSON path. The test suite cross-checks the files with the `jsonschema` package.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from distplan.errors import InputError

_TYPES: dict[str, Any] = {
    "object": dict,
    "array": list,
    "string": str,
    "boolean": bool,
    "null": type(None),
}


@cache
def schema_for(kind: str | None) -> dict[str, Any]:
    """The schema of a kind (or the envelope shared by all kinds)."""
    base = resources.files("distplan.schema")
    path = base / f"{kind}.json"
    if kind is None or not path.is_file():
        path = base / "envelope.json"
    return dict(json.loads(path.read_text()))


def _is_type(value: Any, name: str) -> bool:
    if name == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, _TYPES[name])


def schema_errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """All violations of ``schema`` by ``value`` as "path: problem" strings."""
    errs: list[str] = []
    where = path or "(document)"
    if "const" in schema and value != schema["const"]:
        errs.append(f"{where}: expected {schema['const']!r}, got {value!r}")
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return errs + [f"{where}: expected {' or '.join(types)}, got {type(value).__name__}"]
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not schema_errors(value, s, path)]
        if len(matches) != 1:
            errs.append(f"{where}: {value!r} matches {len(matches)} of the allowed forms (needs exactly one)")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{where}: {value} is below the minimum {schema['minimum']}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            errs.append(f"{where}: {value} must be greater than {schema['exclusiveMinimum']}")
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        errs.append(f"{where}: the string is too short")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            if key not in value:
                errs.append(f"{path + '.' if path else ''}{key}: missing (required)")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, sub in value.items():
            child = f"{path}.{key}" if path else key
            if key in props:
                errs.extend(schema_errors(sub, props[key], child))
            elif isinstance(extra, dict):
                errs.extend(schema_errors(sub, extra, child))
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            errs.append(f"{where}: needs at least {schema['minItems']} item(s)")
        if "items" in schema:
            for k, item in enumerate(value):
                errs.extend(schema_errors(item, schema["items"], f"{path}[{k}]"))
    return errs


def validate_document(doc: Any) -> None:
    """Raise InputError with the first violations (JSON path first) if the document does
    not match its kind's schema."""
    kind = doc.get("kind") if isinstance(doc, dict) else None
    errs = schema_errors(doc, schema_for(None))
    if not errs and kind is not None:
        errs = schema_errors(doc, schema_for(kind))
    if errs:
        first = errs[0]
        path, _, problem = first.partition(": ")
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise InputError(path, problem + more, "see distplan/schema/ for the format")
