"""Check documents against the JSON Schema files shipped in ``distplan/schema/``.

A small validator for the subset of JSON Schema (draft 2020-12) the files use: type,
const, enum, required, properties, additionalProperties (a schema or false),
propertyNames, minProperties, items, minItems, maxItems, uniqueItems, minLength, pattern,
minimum, exclusiveMinimum, maximum, not and oneOf. Errors name the JSON path. The test
suite cross-checks its verdicts with the `jsonschema` package. It is kept rather than that
package because it is measured 2.5-5x faster on the bundled documents (GNMT-v2: 0.20 s
vs 1.03 s per validation; `python benchmarks/bench_schema.py`).
"""

from __future__ import annotations

import difflib
import json
import math
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from typing import Any

from distplan.errors import InputError
from distplan.kinds import KINDS

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
    entry = KINDS.get(kind) if kind is not None else None
    path = base / (entry.schema if entry is not None else "envelope.json")
    return dict(json.loads(path.read_text()))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_type(value: Any, name: str) -> bool:
    if name == "number":
        return _is_number(value)
    if name == "integer":
        # JSON Schema: any number with a zero fractional part (8 and 8.0 alike)
        return _is_number(value) and (isinstance(value, int) or float(value).is_integer())
    return isinstance(value, _TYPES[name])


def _json_equal(a: Any, b: Any) -> bool:
    """Equality of JSON values as JSON Schema defines it (true is not 1; 1 equals 1.0)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return bool(a == b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and bool(a == b)


@cache
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _number_errors(value: float, schema: dict[str, Any], where: str) -> list[str]:
    errs: list[str] = []
    if "minimum" in schema and value < schema["minimum"]:
        errs.append(f"{where}: {value} is below the minimum {schema['minimum']}")
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        errs.append(f"{where}: {value} must be greater than {schema['exclusiveMinimum']}")
    if "maximum" in schema and value > schema["maximum"]:
        if isinstance(value, int) and abs(value) > 10**20:  # JSON allows 10**400: name it, do not print it
            errs.append(f"{where}: {long_integer_text(value)} is too large (above the maximum {schema['maximum']})")
        else:
            errs.append(f"{where}: {value} is above the maximum {schema['maximum']}")
    return errs


def _object_errors(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    errs: list[str] = []
    where = path or "(document)"
    for key in schema.get("required", []):
        if key not in value:
            errs.append(f"{path + '.' if path else ''}{key}: missing (required)")
    if len(value) < schema.get("minProperties", 0):
        errs.append(f"{where}: needs at least {schema['minProperties']} field(s)")
    props = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    names = schema.get("propertyNames")
    for key, sub in value.items():
        child = f"{path}.{key}" if path else key
        if isinstance(names, dict):
            errs.extend(f"{child}: the name {problem[len(child) + 2:]}" for problem in schema_errors(key, names, child))
        if key in props:
            errs.extend(schema_errors(sub, props[key], child))
        elif isinstance(extra, dict):
            errs.extend(schema_errors(sub, extra, child))
        elif extra is False:
            errs.append(f"{child}: {unknown_field_problem(key, props)}")
    return errs


def unknown_field_problem(key: str, known: Any) -> str:
    """The words for a field an object does not have: the closest known name (difflib), and
    the known ones ("unknown field, did you mean 'memory'? (known: name, time, ...)")."""
    names = [str(k) for k in known]
    close = difflib.get_close_matches(str(key), names, n=1, cutoff=0.6)
    guess = f", did you mean {close[0]!r}?" if close else ""
    return f"unknown field{guess} (known: {', '.join(names) or 'none'})"


def unknown_field_error(value: Any, schema: dict[str, Any], path: str = "") -> InputError | None:
    """A field of ``value`` that an object of ``schema`` closed by
    ``"additionalProperties": false`` does not list, as an `InputError` naming its path,
    or None: an object's first unknown key in the document's order, before anything
    nested in it; its children in the schema's order. A walk over the objects and arrays only (no other keyword is checked), cheap
    enough for every load: the loaders ignore fields they do not read, so without it a
    misspelled field (``memroy``) read as absent (review rev16 D4). Branches of ``oneOf``
    are not entered (the schemas close no object inside one). Only the containers whose
    schema can close an object are entered (`_closable`), and the unknown keys of an
    object are found by a set difference, so that the 10,907 ops of a Llama-3 8B
    placement take 40 ms, not 95."""
    found = _unknown_finder(schema)(value)
    if found is None:
        return None
    steps, key, known = found
    for step in steps:  # (the path is made only for the field it names)
        path = f"{path}[{step[1]}]" if step[0] else (f"{path}.{step[1]}" if path else str(step[1]))
    path = f"{path}.{key}" if path else str(key)
    return InputError(path, unknown_field_problem(key, known), "correct or remove the field; see distplan/schema/ for the format")


#: what `_unknown_finder`'s functions return: the steps to the object with an unknown field
#: ((True, index) into a list, (False, key) into an object), that field and the object's
#: known fields; None when every field is known
Found = tuple[tuple[tuple[bool, Any], ...], Any, Mapping[str, Any]] | None

#: `_unknown_finder` of each schema object met, by id (the schema is kept, so the id stays its own)
_FINDERS: dict[int, tuple[dict[str, Any], Callable[[Any], Found]]] = {}


def _unknown_finder(schema: dict[str, Any]) -> Callable[[Any], Found]:
    """`unknown_field_error`'s walk for values of ``schema``, made once per schema: what it
    looks up at each value (its properties, closable children, extra and items schemas)
    looked up once, and no path made on the way (a 360,000-layer bandwidth workload: 1.9 s
    with a path per object, 0.5 s this way)."""
    held = _FINDERS.get(id(schema))
    if held is not None and held[0] is schema:
        return held[1]
    props = schema.get("properties")
    extra = schema.get("additionalProperties")
    items = schema.get("items")
    opens = props is None and not isinstance(extra, dict)  # (no object of it is checked)
    known: Mapping[str, Any] = props or {}
    closed = extra is False
    children = tuple((k, _unknown_finder(sub)) for k, sub in _closable(schema))
    find_extra = _unknown_finder(extra) if isinstance(extra, dict) and _may_close(extra) else None
    find_item = _unknown_finder(items) if isinstance(items, dict) and _may_close(items) else None

    def find(value: Any) -> Found:
        if type(value) is dict or (type(value) is not list and isinstance(value, Mapping)):
            if opens:
                return None
            if closed and not value.keys() <= known.keys():
                key = next(k for k in value if k not in known)  # the first in the document's order
                return ((), key, known)
            for key, child in children:
                sub = value.get(key)
                if (type(sub) is dict or type(sub) is list or isinstance(sub, dict | list)) and (got := child(sub)) is not None:
                    return (((False, key), *got[0]), got[1], got[2])
            if find_extra is not None:
                for key, sub in value.items():
                    if key not in known and isinstance(sub, dict | list) and (got := find_extra(sub)) is not None:
                        return (((False, key), *got[0]), got[1], got[2])
            return None
        if find_item is not None and isinstance(value, list):
            for k, item in enumerate(value):
                if (type(item) is dict or type(item) is list or isinstance(item, dict | list)) and (got := find_item(item)) is not None:
                    return (((True, k), *got[0]), got[1], got[2])
        return None

    _FINDERS[id(schema)] = (schema, find)
    return find


def _may_close(schema: dict[str, Any]) -> bool:
    """Whether a value of ``schema`` can hold an object `unknown_field_error` checks: the
    schema lists properties, types extra ones, or has items."""
    return "properties" in schema or isinstance(schema.get("additionalProperties"), dict) or isinstance(schema.get("items"), dict)


#: `_closable` of each schema object met, by id (the schema is kept, so the id stays its own)
_CLOSABLE: dict[int, tuple[dict[str, Any], tuple[tuple[str, dict[str, Any]], ...]]] = {}


def _closable(schema: dict[str, Any]) -> tuple[tuple[str, dict[str, Any]], ...]:
    """The properties of ``schema`` (name, schema) whose values `unknown_field_error` enters."""
    held = _CLOSABLE.get(id(schema))
    if held is None or held[0] is not schema:
        props = schema.get("properties") or {}
        held = _CLOSABLE[id(schema)] = (schema, tuple((k, s) for k, s in props.items() if isinstance(s, dict) and _may_close(s)))
    return held[1]


def long_integer_text(value: int) -> str:
    """How an integer too long to print is named in messages ("an integer of 401 digits")."""
    return f"an integer of {int(abs(value).bit_length() * math.log10(2)) + 1} digits"


def check_known_fields(doc: Any) -> None:
    """Raise an `InputError` at a field the schema of the document's kind does not
    know (see `unknown_field_error`); a document of no known kind is left to the loader."""
    kind = doc.get("kind") if isinstance(doc, Mapping) else None
    if not isinstance(kind, str) or kind not in KINDS:
        return
    found = unknown_field_error(doc, schema_for(kind))
    if found is not None:
        raise found


def _array_errors(value: list[Any], schema: dict[str, Any], path: str) -> list[str]:
    errs: list[str] = []
    where = path or "(document)"
    if len(value) < schema.get("minItems", 0):
        errs.append(f"{where}: needs at least {schema['minItems']} item(s)")
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        errs.append(f"{where}: allows at most {schema['maxItems']} item(s), got {len(value)}")
    if schema.get("uniqueItems"):
        for k, item in enumerate(value):
            first = next(j for j, other in enumerate(value) if _json_equal(item, other))
            if first != k:
                errs.append(f"{where}: item [{k}] {item!r} repeats item [{first}] (items must be unique)")
                break
    if "items" in schema:
        for k, item in enumerate(value):
            errs.extend(schema_errors(item, schema["items"], f"{path}[{k}]"))
    return errs


def schema_errors(value: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """All violations of ``schema`` by ``value`` as "path: problem" strings."""
    errs: list[str] = []
    where = path or "(document)"
    if "const" in schema and not _json_equal(value, schema["const"]):
        errs.append(f"{where}: expected {schema['const']!r}, got {value!r}")
    if "enum" in schema and not any(_json_equal(value, option) for option in schema["enum"]):
        errs.append(f"{where}: {value!r} is not one of {schema['enum']}")
    if "type" in schema:
        types = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
        if not any(_is_type(value, t) for t in types):
            return errs + [f"{where}: expected {' or '.join(types)}, got {type(value).__name__}"]
    if "not" in schema and not schema_errors(value, schema["not"], path):
        errs.append(f"{where}: {value!r} is not allowed here")
    if "oneOf" in schema:
        matches = [s for s in schema["oneOf"] if not schema_errors(value, s, path)]
        if len(matches) != 1:
            errs.append(f"{where}: {value!r} matches {len(matches)} of the allowed forms (needs exactly one)")
    if _is_number(value):
        errs.extend(_number_errors(value, schema, where))
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            errs.append(f"{where}: the string is too short")
        if "pattern" in schema and not _regex(schema["pattern"]).search(value):
            errs.append(f"{where}: {value!r} does not match the pattern {schema['pattern']}")
    if isinstance(value, dict):
        errs.extend(_object_errors(value, schema, path))
    if isinstance(value, list):
        errs.extend(_array_errors(value, schema, path))
    return errs


def refuse_plan_or_result(data: Mapping[str, Any]) -> None:
    """A plan or result document given where an instance is expected is named as such,
    with the instance it names (it read as an unknown kind or a missing format)."""
    kind = data.get("kind")
    named = data.get("instance")
    fix = f"give the instance it was made for, {named!r}" if isinstance(named, str) and named else "give the instance it was made for"
    if isinstance(kind, str) and kind.endswith("-plan") and kind.removesuffix("-plan") in KINDS:
        raise InputError("kind", f"a {kind.removesuffix('-plan')} plan (written by `distplan solve --out`), not an instance", fix)
    if "format" not in data and "formulation" in data and ("plan" in data or "termination" in data):
        raise InputError("", "a result document (written by `distplan solve --result`), not an instance", fix)


def refuse_instance(data: Mapping[str, Any]) -> None:
    """An instance document given where a plan or result is expected is named as such (it
    has a ``format`` and an instance kind; plans and results have neither): the mirror of
    `refuse_plan_or_result`."""
    kind = data.get("kind")
    if "format" in data and isinstance(kind, str) and kind in KINDS:
        raise InputError("plan", f"a {kind} instance (format {data['format']!r}), not a plan", "solve it first (`distplan solve FILE -f FORMULATION --out PLAN.json`) and give the plan")


def validate_document(doc: Any) -> None:
    """Raise InputError with the first violations (JSON path first) if the document does
    not match its kind's schema."""
    if isinstance(doc, dict):
        refuse_plan_or_result(doc)
    kind = doc.get("kind") if isinstance(doc, dict) else None
    errs = schema_errors(doc, schema_for(None))
    if not errs and kind is not None:
        # an unknown field first, as the loaders report it: a misspelled required field
        # ("tiem") is named as such, not only as "time: missing"
        check_known_fields(doc)
        errs = schema_errors(doc, schema_for(kind))
    if errs:
        first = errs[0]
        path, _, problem = first.partition(": ")
        more = f" (and {len(errs) - 1} more)" if len(errs) > 1 else ""
        raise InputError(path, problem + more, "see distplan/schema/ for the format")
