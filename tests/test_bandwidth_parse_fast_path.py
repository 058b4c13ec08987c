"""Reading a bandwidth document: a workload whose layers are all plain is read column by
column (`bandwidth_parse._plain_layers`), any other layer by layer with every field checked
(`_parse_layer`), review rev30 D6 (a 360,000-layer workload took 9 s to read, most of a
2 s limit's run). Both paths give the same instance, a bad field anywhere is still named
by its path, and the unknown-field walk made once per schema (`schema._unknown_finder`)
names the field the former path-building walk named (`reference_unknown_field`)."""

from __future__ import annotations

import copy
import gc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan.models.bandwidth_parse as bp
from distplan.errors import InputError
from distplan.errors import InputError as _InputError
from distplan.instances import bundled, load_document
from distplan.kinds import KINDS
from distplan.models.common import gc_paused, instance_from_dict, name_list
from distplan.models.schema import _closable, _may_close, schema_for, unknown_field_error, unknown_field_problem

BANDWIDTH = sorted(n for n, e in bundled().items() if e.get("kind") == "bandwidth")


def read(doc: dict[str, Any], *, plain: bool) -> Any:
    """The instance of ``doc``, or (path, problem) of its error, by either path."""
    saved = bp._plain_layers
    if not plain:
        bp._plain_layers = lambda *a: None
    try:
        return instance_from_dict(copy.deepcopy(doc))
    except InputError as exc:
        return (exc.path, exc.problem)
    finally:
        bp._plain_layers = saved


@pytest.mark.parametrize("name", BANDWIDTH)
def test_both_paths_read_every_bundled_bandwidth_instance_alike(name: str) -> None:
    doc = dict(load_document(name))
    assert bp._plain_layers(doc["workload"]["layers"], read(doc, plain=False).dimensions) is not None  # the fast path is taken
    fast, checked = read(doc, plain=True), read(doc, plain=False)
    assert fast.layers == checked.layers
    assert [tuple(map(type, layer.compute)) for layer in fast.layers] == [tuple(map(type, layer.compute)) for layer in checked.layers]
    assert [type(c.bytes) for layer in fast.layers for c in layer.collectives] == [type(c.bytes) for layer in checked.layers for c in layer.collectives]


#: values a field may wrongly hold: negative, not finite, not a number, a bool, out of
#: range, unhashable (a list or an object: the fast path keys its collectives by value)
BAD = [-1, -0.5, float("nan"), float("inf"), True, False, None, "1", 10**19, 2e18, 10**400, [1], {"a": 1}, 1.5, 3, 0, 8, 2.0]
WHERE = ["compute.fwd", "compute.wg", "compute", "compute.extra", "collectives", "collective", "phase", "type", "bytes", "npus", "npus[0]", "npus[1]", "none"]


def _document(values: list[float], npus: list[int]) -> dict[str, Any]:
    layers = [
        {"name": f"L{k}", "compute": {"fwd": values[3 * k], "ig": values[3 * k + 1], "wg": values[3 * k + 2]},
         "collectives": [{"phase": "wg", "type": "all_reduce", "bytes": values[9 + k], "npus": list(npus)}, {"phase": "ig", "type": "all_gather", "bytes": 1e6, "npus": [1, 2]}]}
        for k in range(3)
    ]
    return {
        "format": "distplan/1", "kind": "bandwidth", "name": "b",
        "network": {"dimensions": [{"name": "d0", "size": 4, "block": "ring", "price_link": 1e-9}, {"name": "d1", "size": 2, "block": "ring", "price_link": 1e-9}]},
        "workload": {"name": "w", "layers": layers},
    }


def read_fields(doc: dict[str, Any], *, plain: bool) -> Any:
    """`parse_fields` of ``doc`` (without the unknown-field walk before it), or (path,
    problem) of its error, by either path."""
    saved = bp._plain_layers
    if not plain:
        bp._plain_layers = lambda *a: None
    try:
        return bp.parse_fields(copy.deepcopy(doc))["layers"]
    except InputError as exc:
        return (exc.path, exc.problem)
    finally:
        bp._plain_layers = saved


@pytest.mark.parametrize("where", WHERE)
@settings(max_examples=6, deadline=None)
@given(
    values=st.lists(st.one_of(st.integers(0, 10**6), st.floats(0.0, 1e3)), min_size=12, max_size=12),
    npus=st.sampled_from([[1, 1], [2, 1], [4, 2], [1, 2]]),
    layer=st.integers(0, 2),
)
def test_both_paths_agree_or_name_the_same_field(where: str, values: list[Any], npus: list[int], layer: int) -> None:
    """A valid workload with one bad field, each of `BAD` in turn: the same instance, or
    the same error (path and problem), whichever path reads it, through `distplan`'s
    loader and through `parse_fields` alone (which the unknown-field walk does not
    precede). The bad value comes after a valid collective of equal value (True == 1 ==
    1.0 as dict keys), so a fast path that reused the first would let it through."""
    for value in BAD:
        doc = _document(values, npus)
        item = doc["workload"]["layers"][layer]
        coll = item["collectives"][0]
        if where.startswith("compute."):
            item["compute"][where.split(".")[1]] = value
        elif where == "compute":
            item["compute"] = value
        elif where == "collectives":
            item["collectives"] = value
        elif where == "collective":
            item["collectives"][0] = value
        elif where in ("phase", "type", "bytes", "npus"):
            coll[where] = value
        elif where.startswith("npus["):
            coll["npus"][int(where[5])] = value
        for reader in (read, read_fields):
            fast, checked = reader(doc, plain=True), reader(doc, plain=False)
            if isinstance(checked, tuple):
                assert fast == checked, (where, value)
            else:
                assert not isinstance(fast, tuple), (where, value, fast)
                layers = (fast, checked) if reader is read_fields else (fast.layers, checked.layers)
                assert layers[0] == layers[1], (where, value)


def test_a_bool_is_refused_after_an_equal_plain_collective() -> None:
    """``[True, 1]`` equals ``[1, 1]``, and True equals 1: refused at its own path all the same."""
    doc = _document([0.1] * 12, [1, 1])
    doc["workload"]["layers"][2]["collectives"][0]["npus"] = [True, 1]
    with pytest.raises(InputError) as exc:
        instance_from_dict(doc)
    assert exc.value.path == "workload.layers[2].collectives[0].npus[0]"
    doc = _document([0.1] * 12, [1, 1])
    doc["workload"]["layers"][1]["collectives"][0]["bytes"] = True
    with pytest.raises(InputError) as exc:
        instance_from_dict(doc)
    assert exc.value.path == "workload.layers[1].collectives[0].bytes"


def test_equal_collectives_are_one_object() -> None:
    """(what makes a 220,000-collective workload cheap to hold; they are frozen values)"""
    inst = read(_document([0.1] * 12, [2, 1]), plain=True)
    firsts = [layer.collectives[0] for layer in inst.layers]
    assert firsts[0] == firsts[1] and firsts[0] is firsts[1]


# -- the unknown-field walk made once per schema --------------------------------------------

CLOSED: dict[str, Any] = {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "array", "items": {"type": "integer"}}}, "additionalProperties": False}
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"ops": {"type": "array", "items": CLOSED}, "devices": {"type": "object", "additionalProperties": CLOSED}, "free": {"type": "object"}},
    "additionalProperties": False,
}

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from(["a", "b", "c", "ops"]))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(["a", "b", "c", "ops", "devices", "free", "x"]), inner, max_size=3)), max_leaves=12)


def reference_unknown_field(value: Any, schema: dict[str, Any], path: str = "") -> _InputError | None:
    """`unknown_field_error` as it was: a walk that made a path for every object."""
    if isinstance(value, dict):
        props = schema.get("properties")
        extra = schema.get("additionalProperties")
        if props is None and not isinstance(extra, dict):
            return None
        props = props or {}
        if extra is False and not value.keys() <= props.keys():
            key = next(k for k in value if k not in props)
            return _InputError(f"{path}.{key}" if path else str(key), unknown_field_problem(key, props), "correct or remove the field; see distplan/schema/ for the format")
        for key, sub_schema in _closable(schema):
            sub = value.get(key)
            if isinstance(sub, dict | list) and (found := reference_unknown_field(sub, sub_schema, f"{path}.{key}" if path else str(key))) is not None:
                return found
        if isinstance(extra, dict) and _may_close(extra):
            for key, sub in value.items():
                if key not in props and isinstance(sub, dict | list) and (found := reference_unknown_field(sub, extra, f"{path}.{key}" if path else str(key))) is not None:
                    return found
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        items = schema["items"]
        if not _may_close(items):
            return None
        for k, item in enumerate(value):
            if isinstance(item, dict | list) and (found := reference_unknown_field(item, items, f"{path}[{k}]")) is not None:
                return found
    return None


def _same_error(value: Any, schema: dict[str, Any]) -> bool:
    new, old = unknown_field_error(value, schema), reference_unknown_field(value, schema)
    return (new is None and old is None) or (new is not None and old is not None and (new.path, new.problem) == (old.path, old.problem))


@settings(max_examples=300, deadline=None)
@given(doc=json_value)
def test_the_walk_without_paths_agrees_with_the_one_that_names_the_field(doc: Any) -> None:
    assert _same_error(doc, SCHEMA)


@pytest.mark.parametrize("name", sorted(bundled()))
def test_the_walk_without_paths_agrees_on_every_bundled_document_and_a_misspelling(name: str) -> None:
    """Every bundled document passes both walks; with a field added to its deepest first
    object (a misspelling, as "memroy"; that object's schema may leave it open) both
    walks agree, and with one added to the document itself, both fail."""
    doc = copy.deepcopy(dict(load_document(name)))
    schema = schema_for(doc["kind"])
    assert doc["kind"] in KINDS and unknown_field_error(doc, schema) is None and _same_error(doc, schema)
    # the deepest first object in document order: a misspelt field there must be found
    target, node = None, doc
    while isinstance(node, dict | list) and node:
        if isinstance(node, dict):
            target = node
            node = next((v for v in node.values() if isinstance(v, dict | list) and v), None)
        else:
            node = node[-1]
    assert target is not None
    target["zz_misspelt"] = 1
    assert _same_error(doc, schema)
    doc["zz_misspelt"] = 1
    assert _same_error(doc, schema)
    assert unknown_field_error(doc, schema) is not None


# -- the garbage collector paused while reading, and names checked at once -------------------

def test_gc_paused_restores_the_collector_as_it_was() -> None:
    was = gc.isenabled()
    try:
        gc.enable()
        with gc_paused():
            assert not gc.isenabled()
            with gc_paused():
                assert not gc.isenabled()
            assert not gc.isenabled()  # (nested: still off until the outer one ends)
        assert gc.isenabled()
        gc.disable()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # (it was off: it stays off)
        gc.enable()
        with pytest.raises(KeyError), gc_paused():
            raise KeyError("x")
        assert gc.isenabled()
    finally:
        (gc.enable if was else gc.disable)()


@pytest.mark.parametrize(
    "items, path, problem",
    [
        ([{"name": "a"}, {"name": "a"}], "w[1].name", "duplicate name 'a' (also w[0])"),
        ([{"name": "a"}, {"name": ""}], "w[1].name", "expected a non-empty string, got ''"),
        ([{"name": "a"}, {"name": 7}], "w[1].name", "expected a non-empty string, got 7"),
        ([{"name": "a"}, {"name": ["a"]}], "w[1].name", "expected a non-empty string, got ['a']"),
        ([{"name": "a"}, {"nam": "b"}], "w[1].name", "missing"),
        ([{"name": "a"}, "b"], "w[1]", "expected an object"),
    ],
)
def test_names_checked_at_once_still_name_the_first_bad_one(items: list[Any], path: str, problem: str) -> None:
    with pytest.raises(InputError) as exc:
        name_list(items, "w", "things")
    assert (exc.value.path, exc.value.problem) == (path, problem)


def test_plain_names_are_returned_in_order() -> None:
    assert name_list([{"name": "b"}, {"name": "a"}], "w", "things") == ["b", "a"]


def test_gc_paused_promotes_what_a_large_read_left_alive() -> None:
    """More than `PROMOTE_AFTER` objects made in the pause and alive after it go to the
    oldest generation, so that no young collection walks them all at once; a small pause
    (the list scheduler's) leaves the generations as they are."""
    from distplan.models.common import PROMOTE_AFTER

    was = gc.isenabled()
    try:
        gc.enable()
        gc.collect()
        oldest = len(gc.get_objects(2))
        with gc_paused():
            kept = [[k] for k in range(2 * PROMOTE_AFTER)]
        assert len(gc.get_objects(2)) - oldest >= 2 * PROMOTE_AFTER
        del kept
        gc.collect()
        oldest = len(gc.get_objects(2))
        with gc_paused():
            small = [[k] for k in range(100)]
        assert len(gc.get_objects(2)) - oldest < 100  # (still young)
        del small
    finally:
        (gc.enable if was else gc.disable)()
