"""The JSON Schema files in distplan/schema/ against the parsers, the bundled instances and
the `jsonschema` package (Draft 2020-12).

Every bundled instance must pass both the embedded validator (`validate_document`) and
`jsonschema`; mutated documents (a missing required field, a wrong type, a negative or
out-of-range number) must be rejected by the schema with an `InputError` naming the JSON
path *and* by the kind's parser; edge forms the parser accepts must pass the schema too (the
schema is not stricter than the parser).
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Callable
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from distplan.errors import InputError
from distplan.instances import bundled, load_document
from distplan.instances.pipelines import make_pipeline, tessel_case, zero_bubble_case
from distplan.models import bandwidth_records, compression_records, pipeline, sharding_costs
from distplan.models.common import MAX_BYTES, MAX_PRICE, MAX_RATE, MAX_SECONDS, MIN_RATE, instance_from_dict
from distplan.models.compression_parse import MAX_RATIO
from distplan.models.pipeline import MAX_MICRO_BATCHES
from distplan.models.schema import schema_errors, schema_for, validate_document
from distplan.models.sharding import MAX_AXIS, MAX_DIM, MAX_FACTOR
from distplan.models.sharding_semantics import MAX_FLOPS_PER_ELEMENT

jsonschema = pytest.importorskip("jsonschema")

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DIR = resources.files("distplan.schema")
KINDS = ("placement", "sharding", "compression", "pipeline", "bandwidth")
#: the smallest bundled instance of each kind with a bundled instance, the base of mutations
BASE_INSTANCE = {
    "placement": "placement-small-1",
    "sharding": "gpt-1layer-tp8",
    "compression": "compression-mlp-small",
    "bandwidth": "libra-dlrm-3d-total500",
}


def _schema_file(kind: str) -> dict[str, Any]:
    return dict(json.loads((SCHEMA_DIR / f"{kind}.json").read_text()))


@cache
def _validator(kind: str) -> Any:
    return jsonschema.Draft202012Validator(_schema_file(kind))


def _base_document(kind: str) -> dict[str, Any]:
    """A fresh copy of a valid document of ``kind`` (pipeline: the Zero Bubble case, as no
    pipeline instance is bundled)."""
    if kind == "pipeline":
        return zero_bubble_case(stages=4, micro_batches=6).to_dict()
    return copy.deepcopy(_bundled_document(BASE_INSTANCE[kind]))


@cache
def _bundled_document(name: str) -> dict[str, Any]:
    return dict(load_document(name))


def _assert_valid_everywhere(doc: dict[str, Any]) -> None:
    validate_document(doc)
    _validator("envelope").validate(doc)
    _validator(doc["kind"]).validate(doc)


def _json_path(parts: Any) -> str:
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


# -- the schema files -------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["envelope", *KINDS])
def test_schema_file_is_a_valid_draft_2020_12_schema(kind: str) -> None:
    schema = _schema_file(kind)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == ("distplan/1" if kind == "envelope" else f"distplan/1/{kind}")
    if kind != "envelope":
        assert schema_for(kind) == schema
        assert schema["properties"]["kind"] == {"const": kind}
        assert {"format", "kind", "name"} <= set(schema["required"])


def test_every_kind_has_a_schema_file() -> None:
    files = {p.name for p in SCHEMA_DIR.iterdir() if p.name.endswith(".json")}
    assert files >= {f"{k}.json" for k in KINDS} | {"envelope.json"}
    assert set(_schema_file("envelope")["properties"]["kind"]["enum"]) == set(KINDS)


def test_schema_enums_match_the_parsers_constants() -> None:
    """The enums written in the schema files are the parsers' own lists (no drift)."""
    sh = _schema_file("sharding")["properties"]["graph"]["properties"]
    assert sh["dtype"]["enum"] == list(sharding_costs.DTYPE_BYTES)
    assert sh["ops"]["items"]["properties"]["type"]["enum"] == list(sharding_costs.OP_TYPES)
    assert sh["ops"]["items"]["properties"]["dtype"]["enum"] == [*sharding_costs.DTYPE_BYTES, "", None]

    co = _schema_file("compression")["properties"]
    graph = co["graph"]["properties"]
    assert graph["ops"]["items"]["properties"]["role"]["enum"] == list(compression_records.ROLES)
    assert graph["gradients"]["items"]["properties"]["dtype"]["enum"] == list(compression_records.DTYPE_BYTES)
    codec = co["codecs"]["items"]["properties"]
    assert codec["method"]["enum"] == list(compression_records.CODEC_METHODS)
    assert codec["name"]["not"]["enum"] == list(compression_records.BUILTIN_METHODS)

    pi = _schema_file("pipeline")["properties"]
    assert pi["mode"]["enum"] == list(pipeline.MODES)
    assert pi["objective"]["enum"] == list(pipeline.OBJECTIVES)
    assert pi["blocks"]["items"]["properties"]["role"]["enum"] == list(pipeline.ROLES)

    bw = _schema_file("bandwidth")["properties"]
    dim = bw["network"]["properties"]["dimensions"]["items"]["properties"]
    assert dim["block"]["enum"] == list(bandwidth_records.BLOCKS)
    work = bw["workload"]["properties"]
    assert work["training_loop"]["enum"] == list(bandwidth_records.TRAINING_LOOPS)
    layer = work["layers"]["items"]["properties"]
    assert list(layer["compute"]["properties"]) == list(bandwidth_records.PHASES)
    coll = layer["collectives"]["items"]["properties"]
    assert coll["phase"]["enum"] == list(bandwidth_records.PHASES)
    assert coll["type"]["enum"] == list(bandwidth_records.COLLECTIVE_TYPES)
    cons = bw["constraints"]["properties"]
    assert cons["total_bandwidth"]["properties"]["sense"]["enum"] == list(bandwidth_records.SENSES)
    assert cons["linear"]["items"]["properties"]["sense"]["enum"] == list(bandwidth_records.SENSES)


# -- valid documents ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(bundled()))
def test_bundled_instance_matches_its_schema(name: str) -> None:
    doc = _bundled_document(name)
    assert doc["kind"] == bundled()[name]["kind"]
    _assert_valid_everywhere(doc)


def _generated_pipelines() -> list[tuple[str, Any]]:
    return [
        ("v", lambda: make_pipeline("v", 4, 8)),
        ("x", lambda: make_pipeline("x", 4, 4)),
        ("m", lambda: make_pipeline("m", 4, 4, memory_capacity={"d0": 6.0, "d3": 4.0})),
        ("k", lambda: make_pipeline("k", 4, 4, comm_delay=0.25)),
        ("nn", lambda: make_pipeline("nn", 4, 4)),
        ("interleaved", lambda: make_pipeline("interleaved", 4, 4, chunks=2)),
        ("zero-bubble", lambda: zero_bubble_case(stages=4, micro_batches=8, comm_delay=0.5)),
        ("tessel-inference", lambda: tessel_case("v", 4.0, 4, mode="inference")),
    ]


@pytest.mark.parametrize(("label", "build"), _generated_pipelines(), ids=[p[0] for p in _generated_pipelines()])
def test_generated_pipeline_instance_matches_the_schema(label: str, build: Callable[[], Any]) -> None:
    doc = build().to_dict()
    _assert_valid_everywhere(doc)
    assert instance_from_dict(doc).to_dict() == doc


@pytest.mark.parametrize("kind", sorted(BASE_INSTANCE))
def test_serialized_instance_matches_the_schema(kind: str) -> None:
    """What `to_dict` writes is a document of the schema too."""
    _assert_valid_everywhere(instance_from_dict(_base_document(kind)).to_dict())


def _edge_forms() -> list[tuple[str, str, Callable[[dict[str, Any]], None]]]:
    """Optional and alternative forms each parser accepts (the schema must accept them)."""

    def sharding_forms(d: dict[str, Any]) -> None:
        d["description"] = 42  # ignored by the parser
        d["mesh"]["shape"] = [8.0]  # an integral float is an integer
        d["mesh"]["memory"] = None
        d["mesh"]["all_to_all"] = False
        del d["training"]["optimizer_bytes_per_param"], d["training"]["backward_factor"], d["graph"]["dtype"]
        d["graph"]["ops"][0]["dtype"] = None
        d["graph"]["ops"][1]["dtype"] = ""

    def compression_forms(d: dict[str, Any]) -> None:
        d["batch_size"] = 32.0
        d["cluster"]["links"] = None
        for dev in d["cluster"]["devices"]:
            del dev["node"], dev["memory_bytes"], dev["reserved_bytes"]
        for op in d["graph"]["ops"]:
            if op["role"] != "update":
                del op["role"]
            del op["devices"], op["memory_bytes"], op["eligible"]
        g = d["graph"]["gradients"][0]
        g["shape"] = g["factor_rows"] = None
        del g["dtype"], g["density"]
        d["codecs"][0].update(level=None, measured=None, library=3)
        d["codecs"][1]["level"] = -1
        del d["codecs"][2]["ratio"]

    def pipeline_forms(d: dict[str, Any]) -> None:
        d["description"] = 7
        d["micro_batches"] = 6.0
        d["memory_capacity"] = {"d0": 8, "d2": 0}
        del d["mode"], d["objective"], d["comm_delay"]
        d["blocks"][0]["devices"] = "d0"
        del d["blocks"][0]["role"], d["blocks"][0]["memory"], d["blocks"][0]["deps"]
        d["blocks"][1]["deps"] = [{"block": "F0", "delay": 0.0}]
        d["blocks"][2]["memory"] = -3.5
        # (each device's blocks still sum to 0: F0 without memory, F2 freeing first)
        for k, memory in ((10, 0.0), (11, 0.0), (6, 1.75), (7, 1.75)):
            d["blocks"][k]["memory"] = memory

    def pipeline_unlimited(d: dict[str, Any]) -> None:
        d["memory_capacity"] = None

    def bandwidth_forms(d: dict[str, Any]) -> None:
        d["description"] = None
        d["constraints"] = None
        d["metadata"] = {"source": "test"}
        d["network"]["total_npus"] = None
        d["workload"]["npus"] = None
        d["workload"]["name"] = 5
        del d["workload"]["training_loop"]
        dim = d["network"]["dimensions"][0]
        dim.update(price_switch=None, price_nic=None, min_bandwidth=None, max_bandwidth=None, cost_class=None, bandwidth_options=None)
        d["network"]["dimensions"][1]["bandwidth_options"] = [5e10, 1e11]
        d["workload"]["layers"][1]["compute"] = {"fwd": 1e-5}
        del d["workload"]["layers"][2]["collectives"]

    def bandwidth_constraints(d: dict[str, Any]) -> None:
        d["constraints"] = {
            "total_bandwidth": None,
            "cost_budget": 1e6,
            "linear": [{"name": "share", "coeffs": {"dim1": 1, "dim2": -2.5}, "sense": ">=", "rhs": -1e9}],
        }

    return [
        ("sharding", "optional-and-null-fields", sharding_forms),
        ("compression", "optional-and-null-fields", compression_forms),
        ("pipeline", "string-devices-delay-deps-capacity-object", pipeline_forms),
        ("pipeline", "unlimited-memory", pipeline_unlimited),
        ("bandwidth", "optional-and-null-fields", bandwidth_forms),
        ("bandwidth", "linear-constraints", bandwidth_constraints),
    ]


@pytest.mark.parametrize(("kind", "label", "change"), _edge_forms(), ids=[f"{k}-{lab}" for k, lab, _ in _edge_forms()])
def test_forms_the_parser_accepts_pass_the_schema(kind: str, label: str, change: Callable[[dict[str, Any]], None]) -> None:
    doc = _base_document(kind)
    change(doc)
    instance_from_dict(doc)  # the parser accepts the form ...
    _assert_valid_everywhere(doc)  # ... and so does the schema


# -- rejected documents -------------------------------------------------------------------------


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


def _drop(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        del node[path[-1]]

    return change


#: (kind, what, mutation, JSON path the schema error starts with)
MUTATIONS: list[tuple[str, str, Callable[[dict[str, Any]], None], str]] = [
    ("sharding", "missing", _drop(["mesh", "device"]), "mesh.device"),
    ("sharding", "wrong-type", _set(["graph", "dims", "h"], "4096"), "graph.dims.h"),
    ("sharding", "negative", _set(["mesh", "latency", 0], -2e-6), "mesh.latency[0]"),
    ("sharding", "too-many-axes", _set(["mesh", "shape"], [2, 2, 2, 1]), "mesh.shape"),
    ("sharding", "bad-dim-name", _set(["graph", "dims", "not-a-name"], 4), "graph.dims.not-a-name"),
    ("sharding", "unknown-op-type", _set(["graph", "ops", 1, "type"], "conv"), "graph.ops[1].type"),
    ("compression", "missing", _drop(["graph", "gradients", 0, "update"]), "graph.gradients[0].update"),
    ("compression", "wrong-type", _set(["cluster", "devices", 0, "reserved_bytes"], "0"), "cluster.devices[0].reserved_bytes"),
    ("compression", "negative", _set(["graph", "edges", 0, "bytes"], -1.0), "graph.edges[0].bytes"),
    ("compression", "density-above-1", _set(["graph", "gradients", 0, "density"], 1.5), "graph.gradients[0].density"),
    ("compression", "builtin-codec-name", _set(["codecs", 0, "name"], "sfb"), "codecs[0].name"),
    ("compression", "lossless-1-not-true", _set(["codecs", 0, "lossless"], 1), "codecs[0].lossless"),
    ("compression", "device-twice", _set(["graph", "ops", 0, "devices"], ["v100-0.0", "v100-0.0"]), "graph.ops[0].devices"),
    ("pipeline", "missing", _drop(["blocks", 0, "duration"]), "blocks[0].duration"),
    ("pipeline", "wrong-type", _set(["micro_batches"], "6"), "micro_batches"),
    ("pipeline", "negative", _set(["comm_delay"], -0.5), "comm_delay"),
    ("pipeline", "zero-duration", _set(["blocks", 2, "duration"], 0), "blocks[2].duration"),
    ("pipeline", "fractional-micro-batches", _set(["micro_batches"], 2.5), "micro_batches"),
    ("pipeline", "device-twice", _set(["devices"], ["d0", "d1", "d1", "d3"]), "devices"),
    ("pipeline", "negative-capacity", _set(["memory_capacity"], {"d1": -1.0}), "memory_capacity.d1"),
    ("bandwidth", "missing", _drop(["network", "dimensions", 0, "price_link"]), "network.dimensions[0].price_link"),
    ("bandwidth", "wrong-type", _set(["workload", "layers", 0, "compute", "fwd"], "1e-3"), "workload.layers[0].compute.fwd"),
    ("bandwidth", "negative", _set(["workload", "layers", 0, "collectives", 0, "bytes"], -1), "workload.layers[0].collectives[0].bytes"),
    ("bandwidth", "size-1", _set(["network", "dimensions", 0, "size"], 1), "network.dimensions[0].size"),
    ("bandwidth", "unknown-block", _set(["network", "dimensions", 0, "block"], "torus"), "network.dimensions[0].block"),
    ("bandwidth", "unknown-constraint", _set(["constraints", "budget"], 5), "constraints.budget"),
    ("bandwidth", "unknown-phase", _set(["workload", "layers", 0, "compute", "bwd"], 1.0), "workload.layers[0].compute.bwd"),
]


@pytest.mark.parametrize(("kind", "what", "change", "path"), MUTATIONS, ids=[f"{k}-{w}" for k, w, _, _ in MUTATIONS])
def test_mutated_document_is_rejected_by_schema_and_parser(kind: str, what: str, change: Callable[[dict[str, Any]], None], path: str) -> None:
    doc = _base_document(kind)
    change(doc)
    with pytest.raises(InputError) as schema_exc:
        validate_document(doc)
    assert schema_exc.value.path == path
    assert str(schema_exc.value).startswith(f"{path}: ")
    # the jsonschema package agrees (its error sits at the field or at its parent object)
    errors = list(_validator(kind).iter_errors(doc))
    assert errors, f"jsonschema accepts the {what} mutation"
    assert any(path.startswith(_json_path(e.absolute_path)) for e in errors), [e.message for e in errors]
    # and the parser rejects the document too, at the same place
    with pytest.raises(InputError) as parser_exc:
        instance_from_dict(doc)
    assert parser_exc.value.path.startswith(path), (parser_exc.value.path, path)


#: the parsers' numeric ranges, each as (kind, JSON path of a field in the base document,
#: the schema keyword, the parser's constant, a value beyond it): the schema states the
#: parser's own limit, and a value beyond it is rejected by both at that path
LIMITS: list[tuple[str, list[Any], str, float, Any]] = [
    ("placement", ["graph", "ops", 0, "time"], "maximum", MAX_SECONDS, 2e9),
    ("placement", ["graph", "ops", 0, "memory"], "maximum", MAX_BYTES, 2e18),
    ("placement", ["graph", "ops", 0, "temporary"], "maximum", MAX_BYTES, 2e18),
    ("placement", ["graph", "ops", 0, "output"], "maximum", MAX_BYTES, 2e18),
    ("placement", ["graph", "edges", 0, "bytes"], "maximum", MAX_BYTES, 2e18),
    ("placement", ["cluster", "devices", 0, "memory"], "maximum", MAX_BYTES, 2e18),
    ("placement", ["cluster", "latency"], "maximum", MAX_SECONDS, 2e9),
    ("sharding", ["mesh", "shape", 0], "maximum", MAX_AXIS, 2**21),
    ("sharding", ["mesh", "bandwidth", 0], "minimum", MIN_RATE, 1e-300),
    ("sharding", ["mesh", "latency", 0], "maximum", MAX_SECONDS, 2e9),
    ("sharding", ["training", "optimizer_bytes_per_param"], "maximum", MAX_FACTOR, 2e6),
    ("sharding", ["training", "backward_factor"], "maximum", MAX_FACTOR, 2e6),
    ("sharding", ["graph", "dims", "h"], "maximum", MAX_DIM, 2**54),
    ("sharding", ["graph", "ops", 9, "attrs", "flops_per_element"], "maximum", MAX_FLOPS_PER_ELEMENT, 2e6),
    ("compression", ["cluster", "devices", 0, "memory_bytes"], "maximum", MAX_BYTES, 2e18),
    ("compression", ["cluster", "devices", 0, "reserved_bytes"], "maximum", MAX_BYTES, 2e18),
    ("compression", ["cluster", "intra_node_bandwidth"], "minimum", MIN_RATE, 0.5),
    ("compression", ["cluster", "inter_node_bandwidth"], "minimum", MIN_RATE, 0.5),
    ("compression", ["cluster", "links", 0, "bandwidth"], "minimum", MIN_RATE, 0.5),
    ("compression", ["graph", "ops", 0, "compute_seconds", "V100"], "maximum", MAX_SECONDS, 2e9),
    ("compression", ["graph", "ops", 0, "memory_bytes"], "maximum", MAX_BYTES, 2e18),
    ("compression", ["graph", "edges", 0, "bytes"], "maximum", MAX_BYTES, 2e18),
    ("compression", ["graph", "gradients", 0, "bytes"], "maximum", MAX_BYTES, 2e18),
    ("compression", ["graph", "gradients", 0, "shape", 0], "maximum", MAX_BYTES, 2 * 10**18),
    ("compression", ["graph", "gradients", 0, "factor_rows"], "maximum", MAX_BYTES, 2 * 10**18),
    ("compression", ["codecs", 0, "ratio", "float32"], "maximum", MAX_RATIO, 2e6),
    ("compression", ["codecs", 0, "encode_bytes_per_second", "V100"], "minimum", MIN_RATE, 0.5),
    ("compression", ["codecs", 0, "decode_bytes_per_second", "V100"], "minimum", MIN_RATE, 0.5),
    ("pipeline", ["micro_batches"], "maximum", MAX_MICRO_BATCHES, 2 * 10**6),
    ("pipeline", ["comm_delay"], "maximum", MAX_SECONDS, 2e9),
    ("pipeline", ["blocks", 0, "duration"], "maximum", MAX_SECONDS, 2e9),
    ("pipeline", ["blocks", 0, "memory"], "maximum", MAX_BYTES, 2e18),
    ("pipeline", ["blocks", 0, "memory"], "minimum", -MAX_BYTES, -2e18),
    ("bandwidth", ["network", "dimensions", 0, "min_bandwidth"], "maximum", MAX_RATE, 2e18),
    ("bandwidth", ["network", "dimensions", 0, "max_bandwidth"], "minimum", MIN_RATE, 1e-300),
    ("bandwidth", ["network", "dimensions", 0, "max_bandwidth"], "maximum", MAX_RATE, 1e300),
    ("bandwidth", ["workload", "layers", 0, "compute", "fwd"], "maximum", MAX_SECONDS, 2e9),
    ("bandwidth", ["workload", "layers", 0, "collectives", 0, "bytes"], "maximum", MAX_BYTES, 1e300),
    ("bandwidth", ["constraints", "total_bandwidth", "value"], "minimum", MIN_RATE, 1e-300),
    ("bandwidth", ["constraints", "total_bandwidth", "value"], "maximum", MAX_RATE, 1e300),
    ("bandwidth", ["network", "dimensions", 0, "price_link"], "maximum", MAX_PRICE, 1e300),
]


def _schema_node(schema: dict[str, Any], path: list[Any], keyword: str) -> dict[str, Any]:
    """The subschema of ``schema`` that holds the value at ``path`` (of a oneOf, the branch
    that states ``keyword``)."""
    node = schema
    for key in path:
        node = node["items"] if isinstance(key, int) else node.get("properties", {}).get(key, node.get("additionalProperties"))
    if "oneOf" in node:
        node = next(branch for branch in node["oneOf"] if keyword in branch)
    return node


@pytest.mark.parametrize(("kind", "path", "keyword", "limit", "beyond"), LIMITS, ids=[f"{k}-{_json_path(p)}" for k, p, _, _, _ in LIMITS])
def test_schema_states_the_parsers_range(kind: str, path: list[Any], keyword: str, limit: float, beyond: Any) -> None:
    assert _schema_node(_schema_file(kind), path, keyword)[keyword] == limit
    where = _json_path(path)
    at_limit = _base_document(kind)
    _set(path, limit)(at_limit)
    _assert_valid_everywhere(at_limit)  # the limit itself is in range
    doc = _base_document(kind)
    _set(path, beyond)(doc)
    with pytest.raises(InputError) as schema_exc:
        validate_document(doc)
    assert schema_exc.value.path == where
    assert any(_json_path(e.absolute_path) == where for e in _validator(kind).iter_errors(doc))
    with pytest.raises(InputError) as parser_exc:
        instance_from_dict(doc)
    assert parser_exc.value.path == where
    assert ("beyond the largest" if keyword == "maximum" else "below the least") in parser_exc.value.problem


def test_not_an_object_and_wrong_kind_are_rejected() -> None:
    with pytest.raises(InputError, match=r"^\(document\): expected object"):
        validate_document(["not", "an", "object"])
    doc = _base_document("sharding")
    doc["kind"] = "sharded"
    with pytest.raises(InputError) as exc:
        validate_document(doc)
    assert exc.value.path == "kind"


# -- the validator's keywords against jsonschema --------------------------------------------------

KEYWORD_CASES: list[tuple[dict[str, Any], Any]] = [
    ({"type": "integer"}, 8),
    ({"type": "integer"}, 8.0),
    ({"type": "integer"}, 8.5),
    ({"type": "integer"}, True),
    ({"type": "number"}, False),
    ({"const": True}, 1),
    ({"const": True}, True),
    ({"enum": [0, "", None]}, False),
    ({"enum": [1]}, 1.0),
    ({"maximum": 1}, 1),
    ({"maximum": 1}, 1.0000001),
    ({"exclusiveMinimum": 0}, 0),
    ({"minimum": 2}, 1.5),
    ({"maxItems": 2}, [1, 2, 3]),
    ({"maxItems": 2}, [1, 2]),
    ({"uniqueItems": True}, ["a", "b", "a"]),
    ({"uniqueItems": True}, [1, True]),
    ({"uniqueItems": True}, [1, 1.0]),
    ({"uniqueItems": True}, [{"a": [1]}, {"a": [1.0]}]),
    ({"minProperties": 1}, {}),
    ({"minProperties": 1}, {"a": 1}),
    ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1}),
    ({"additionalProperties": False, "properties": {"a": {}}}, {"a": 1, "b": 2}),
    ({"propertyNames": {"pattern": "^[a-z_]+$"}}, {"ok_name": 1}),
    ({"propertyNames": {"pattern": "^[a-z_]+$"}}, {"bad-name": 1}),
    ({"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "x1"),
    ({"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "1x"),
    ({"not": {"enum": ["sfb"]}}, "sfb"),
    ({"not": {"enum": ["sfb"]}}, "zstd"),
    ({"type": ["string", "array"], "minLength": 1, "minItems": 1}, ""),
    ({"type": ["string", "array"], "minLength": 1, "minItems": 1}, []),
    ({"type": ["string", "array"], "minLength": 1, "minItems": 1}, "d0"),
    ({"type": ["number", "object", "null"], "minimum": 0, "additionalProperties": {"minimum": 0}}, {"d": -1}),
    ({"type": ["number", "object", "null"], "minimum": 0, "additionalProperties": {"minimum": 0}}, None),
    ({"type": ["string", "object"], "required": ["block"]}, "F0"),
    ({"type": ["string", "object"], "required": ["block"]}, {"delay": 1}),
]


@pytest.mark.parametrize(("schema", "value"), KEYWORD_CASES, ids=[f"{json.dumps(s)}-{json.dumps(v)}" for s, v in KEYWORD_CASES])
def test_embedded_validator_agrees_with_jsonschema(schema: dict[str, Any], value: Any) -> None:
    expected_valid = jsonschema.Draft202012Validator(schema).is_valid(value)
    errs = schema_errors(value, schema, "x")
    assert (not errs) == expected_valid, errs
    assert all(e.startswith("x") and ": " in e for e in errs)


# -- the CLI ----------------------------------------------------------------------------------------


def _cli_targets(tmp_path: Path) -> dict[str, str]:
    """One bundled instance name per kind (pipeline: a generated file while none is bundled)."""
    targets = {kind: name for kind, name in BASE_INSTANCE.items()}
    targets["placement"] = "placement-small-1"
    pipelines = sorted(n for n, e in bundled().items() if e["kind"] == "pipeline")
    if pipelines:
        targets["pipeline"] = pipelines[0]
    else:
        path = tmp_path / "pipeline.json"
        zero_bubble_case(stages=4, micro_batches=6).to_json(path)
        targets["pipeline"] = str(path)
    assert set(targets) == set(KINDS)
    return targets


@pytest.mark.parametrize("kind", KINDS)
def test_cli_validate_exits_0_for_each_kind(kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`distplan validate` (the CLI's main, in this process) on one instance of each kind."""
    from distplan.cli import main

    target = _cli_targets(tmp_path)[kind]
    assert main(["validate", target]) == 0
    assert f"valid {kind} instance" in capsys.readouterr().out


def test_python_m_distplan_validate_exits_0() -> None:
    """The module entry point itself: `python -m distplan validate <bundled name>`."""
    name = BASE_INSTANCE["sharding"]
    proc = subprocess.run([sys.executable, "-m", "distplan", "validate", name], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)
    assert f"valid sharding instance {name!r}" in proc.stdout


def test_cli_validate_names_the_path_of_a_schema_violation(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from distplan.cli import main

    bad = _base_document("bandwidth")
    bad["network"]["dimensions"][0]["size"] = 1
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(bad))
    assert main(["validate", str(path)]) == 2
    assert "error: network.dimensions[0].size: 1 is below the minimum 2" in capsys.readouterr().err
