"""Unknown and misspelled fields in instance documents are named errors (review rev16 D4).

The loaders read the fields they know and skipped every other one, so renaming each op's
``memory`` to ``memroy`` in placement-small-2 (a memory-constrained instance) gave "valid"
and a solve in which every op held 0 bytes. Every object of every kind's schema is now
closed (``additionalProperties: false``, descriptive fields listed), and
`instance_from_dict` (every load: the CLI, `distplan.load_instance`, campaigns) and
``distplan validate`` name the first unknown field and the closest known one.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distplan.errors import InputError
from distplan.instances import bundled, generators, load_document
from distplan.instances.pipelines import make_pipeline
from distplan.models.common import instance_from_dict
from distplan.models.schema import check_known_fields, schema_for, validate_document
from tests.conftest import assert_named_error, cli_run


def _doc(name: str) -> dict[str, Any]:
    return copy.deepcopy(dict(load_document(name)))


def _memroy() -> dict[str, Any]:
    doc = _doc("placement-small-2")
    for op in doc["graph"]["ops"]:
        op["memroy"] = op.pop("memory")
    return doc


def _rejects(doc: dict[str, Any], path: str, guess: str | None) -> None:
    for check in (instance_from_dict, validate_document):
        with pytest.raises(InputError) as info:
            check(doc)
        assert info.value.path == path, str(info.value)
        assert "unknown field" in info.value.problem
        if guess is not None:
            assert f"did you mean {guess!r}" in info.value.problem, str(info.value)


def test_misspelled_memory_is_named_with_the_known_field() -> None:
    _rejects(_memroy(), "graph.ops[0].memroy", "memory")


def test_misspelled_required_field_is_named_as_misspelled_not_only_missing() -> None:
    doc = _doc("placement-small-2")
    doc["graph"]["ops"][3]["tiem"] = doc["graph"]["ops"][3].pop("time")
    _rejects(doc, "graph.ops[3].tiem", "time")


def test_extra_top_level_field_is_named() -> None:
    doc = _doc("placement-small-2")
    doc["extra_field"] = 1
    _rejects(doc, "extra_field", None)


def _pipeline() -> dict[str, Any]:
    return make_pipeline("v", 2, 2).to_dict()


#: (kind's base document, a change adding an unknown field, its path, the closest known field)
CASES: list[tuple[str, Callable[[], dict[str, Any]], Callable[[dict[str, Any]], None], str, str | None]] = [
    ("placement edge", lambda: _doc("placement-small-1"), lambda d: d["graph"]["edges"][0].update(byte=1), "graph.edges[0].byte", "bytes"),
    ("placement device", lambda: _doc("placement-small-1"), lambda d: d["cluster"]["devices"][1].update(memmory=1), "cluster.devices[1].memmory", "memory"),
    ("placement cluster", lambda: _doc("placement-small-1"), lambda d: d["cluster"].update(bandwith=1e9), "cluster.bandwith", "bandwidth"),
    ("placement model", lambda: _doc("placement-small-1"), lambda d: d.update(model={"memory_model": "liveness"}), "model.memory_model", None),
    ("sharding mesh", lambda: _doc("gpt-1layer-tp8"), lambda d: d["mesh"].update(memroy=1e9), "mesh.memroy", "memory"),
    ("sharding op attrs", lambda: _doc("gpt-1layer-tp8"), lambda d: next(o for o in d["graph"]["ops"] if o["type"] == "attention").setdefault("attrs", {}).update(flsh=True), None, "flash"),
    ("sharding training", lambda: _doc("gpt-1layer-tp8"), lambda d: d["training"].update(optimiser_bytes_per_param=12), "training.optimiser_bytes_per_param", "optimizer_bytes_per_param"),
    ("compression gradient", lambda: _doc("compression-mlp-small"), lambda d: d["graph"]["gradients"][0].update(byts=1), "graph.gradients[0].byts", "bytes"),
    ("compression device", lambda: _doc("compression-mlp-small"), lambda d: d["cluster"]["devices"][0].update(memory=1e9), "cluster.devices[0].memory", "memory_bytes"),
    ("pipeline block", _pipeline, lambda d: d["blocks"][2].update(memroy=5), "blocks[2].memroy", "memory"),
    ("pipeline top", _pipeline, lambda d: d.update(micro_batch=3), "micro_batch", "micro_batches"),
    ("bandwidth dimension", lambda: _doc("libra-dlrm-3d-total500"), lambda d: d["network"]["dimensions"][0].update(max_bandwith=1e9), "network.dimensions[0].max_bandwith", "max_bandwidth"),
    ("bandwidth layer", lambda: _doc("libra-dlrm-3d-total500"), lambda d: d["workload"]["layers"][0].update(comput={}), "workload.layers[0].comput", "compute"),
]


@pytest.mark.parametrize(("label", "base", "change", "path", "guess"), CASES, ids=[c[0] for c in CASES])
def test_every_kind_names_an_unknown_field(label: str, base: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None], path: str | None, guess: str | None) -> None:
    doc = base()
    instance_from_dict(copy.deepcopy(doc))  # valid before the change
    change(doc)
    if path is None:  # the attention op's index: wherever the bundled graph has it
        k = next(k for k, o in enumerate(doc["graph"]["ops"]) if "flsh" in o.get("attrs", {}))
        path = f"graph.ops[{k}].attrs.flsh"
    _rejects(doc, path, guess)


def test_cli_validate_and_solve_name_the_misspelled_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "typo_memory.json"
    f.write_text(json.dumps(_memroy()))
    for argv in (["validate", str(f)], ["solve", str(f), "-f", "m_topo"], ["inspect", str(f), "--json"]):
        rc, out, err = cli_run(argv, capsys)
        assert_named_error(rc, out, err, "graph.ops[0].memroy: unknown field", "did you mean 'memory'")


def test_descriptive_fields_are_allowed() -> None:
    """The fields the zoo and import-torch write (an op's type, phase, flops, params,
    forward, module, shapes; an edge's gradient) and a top-level description and meta."""
    doc = _doc("placement-small-1")
    doc["description"] = "a note"
    doc["meta"] = {"source": "anything", "nested": {"free": [1, 2]}}
    doc["graph"]["ops"][0].update(type="linear", phase="forward", flops=1e9, params=4096.0, module="encoder.0", shapes=[[8, 16]])
    doc["graph"]["ops"][1].update(forward=doc["graph"]["ops"][0]["name"])
    doc["graph"]["edges"][0]["gradient"] = True
    validate_document(doc)
    instance_from_dict(doc)


def test_bundled_and_generated_documents_have_only_known_fields() -> None:
    for name in bundled():
        check_known_fields(load_document(name))
    for gen in generators.GENERATORS.values():
        check_known_fields(gen(12))
    for shape in ("v", "x", "interleaved", "v2"):
        check_known_fields(make_pipeline(shape, 4, 4).to_dict())


def test_every_object_of_every_schema_is_closed_or_a_map() -> None:
    """Every object with named fields is closed, but for the open ``meta`` records (and a
    codec's ``measured`` record), so a new field needs a schema entry."""
    open_ok = {"meta", "metadata", "measured"}

    def walk(schema: Any, where: str) -> list[str]:
        found: list[str] = []
        if isinstance(schema, dict):
            if "properties" in schema and schema.get("additionalProperties") is not False:
                found.append(where)
            for key, sub in schema.get("properties", {}).items():
                if key not in open_ok:
                    found += walk(sub, f"{where}.{key}")
            for key in ("items", "additionalProperties"):
                if isinstance(schema.get(key), dict):
                    found += walk(schema[key], f"{where}[{key}]")
            for k, sub in enumerate(schema.get("oneOf", [])):
                found += walk(sub, f"{where}.oneOf[{k}]")
        return found

    for kind in ("placement", "sharding", "compression", "pipeline", "bandwidth"):
        assert walk(schema_for(kind), kind) == [], kind
