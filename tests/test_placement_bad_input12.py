"""Review rev12 (placement input handling).

D6: malformed placement instances ended in a traceback, exit 1 (``"model": "liveness"``:
AttributeError; ``"meta": "x"``: ValueError; an edge's or a link's ``src`` given as a list
or an object: unhashable TypeError) or were taken silently (a device type ``["x"]``, a
colocation group ``""``, a link from a device to itself, a time-map entry ``"x"`` for a
device type the cluster lacks, a latency of 1e300 s), and
``"ops": {"a": 1}`` was reported as "the op list is empty". Each is now an InputError
naming the field (exit 2), for ``solve`` and ``validate`` alike.

D7: out-of-range parameters ran (theta=-1 or 5 for m-SCT, thresholds=-1, shares of 2, a
default_time_limit of -3 s that skipped the MILP and reported time_limit): the declared
ranges of `Formulation` (``least``, ``most``, ``above``) now reject them.

D5: a total of op memory above the devices' total capacity is a proven infeasibility under
the simple memory model (and, for persistent memory and sink outputs, under liveness) and
is now reported as such (exit 3, by how much) by every formulation that makes plans
before it runs; the liveness model's freed memory is not counted. placement_search ended NoSolutionError "returned no plan" on
feasible tight instances where every Baechi heuristic fails; it now falls back to a
packing by memory, and says each source's reason when that fails too.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from conftest import assert_named_error, cli_run

import distplan
from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.registry import formulations, get_formulation
from distplan.models.placement_instance import PlacementInstance, check_total_memory

BASE: dict[str, Any] = {
    "format": "distplan/1",
    "kind": "placement",
    "name": "rev12",
    "graph": {
        "ops": [
            {"name": "a", "time": 0.001, "memory": 10},
            {"name": "b", "time": 0.002, "memory": 20},
            {"name": "c", "time": 0.001, "memory": 30},
        ],
        "edges": [{"src": "a", "dst": "b", "bytes": 1000}, {"src": "a", "dst": "c", "bytes": 2000}],
    },
    "cluster": {
        "devices": [{"name": "gpu0", "memory": 100, "type": "V100"}, {"name": "gpu1", "memory": 100, "type": "V100"}],
        "bandwidth": 1e9,
        "latency": 1e-5,
        "links": [],
    },
}


def _doc(change: Any) -> dict[str, Any]:
    doc = copy.deepcopy(BASE)
    change(doc)
    return doc


def _set(path: str, value: Any) -> Any:
    """A change setting the field at the dotted ``path`` (list indices as numbers)."""

    def change(doc: dict[str, Any]) -> None:
        *head, last = path.split(".")
        node: Any = doc
        for key in head:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return change


#: (id, change, the field the error names, a word of the problem)
MALFORMED = [
    ("model_str", _set("model", "liveness"), "model", "expected an object"),
    ("meta_str", _set("meta", "x"), "meta", "expected an object"),
    ("edge_src_list", _set("graph.edges.0.src", ["a"]), "graph.edges[0].src", "expected an op name"),
    ("edge_src_dict", _set("graph.edges.0.src", {"a": 1}), "graph.edges[0].src", "expected an op name"),
    ("edge_dst_list", _set("graph.edges.1.dst", ["c"]), "graph.edges[1].dst", "expected an op name"),
    ("link_src_list", _set("cluster.links", [{"src": ["gpu0"], "dst": "gpu1"}]), "cluster.links[0].src", "expected a device name"),
    ("link_dst_dict", _set("cluster.links", [{"src": "gpu0", "dst": {"x": 1}}]), "cluster.links[0].dst", "expected a device name"),
    ("links_str", _set("cluster.links", "x"), "cluster.links", "expected a list of links"),
    ("self_link", _set("cluster.links", [{"src": "gpu0", "dst": "gpu0", "bandwidth": 5}]), "cluster.links[0]", "to itself"),
    ("link_directed_str", _set("cluster.links", [{"src": "gpu0", "dst": "gpu1", "directed": "yes"}]), "cluster.links[0].directed", "true or false"),
    ("ops_dict", _set("graph.ops", {"a": 1}), "graph.ops", "expected a list of ops"),
    ("devices_dict", _set("cluster.devices", {"gpu0": 1}), "cluster.devices", "expected a list of devices"),
    ("type_list", _set("cluster.devices.0.type", ["x"]), "cluster.devices[0].type", "expected a device type name"),
    ("time_extra_str", _set("graph.ops.0.time", {"V100": 1, "extra": "x"}), "graph.ops[0].time.extra", "expected a number"),
    ("colocate_empty", _set("graph.ops.0.colocate", ""), "graph.ops[0].colocate", "empty group name"),
    ("huge_latency", _set("cluster.latency", 1e300), "cluster.latency", "beyond the largest value"),
    ("huge_link_latency", _set("cluster.links", [{"src": "gpu0", "dst": "gpu1", "latency": 1e300}]), "cluster.links[0].latency", "beyond the largest value"),
]


@pytest.mark.parametrize(("change", "field", "problem"), [pytest.param(c, f, p, id=i) for i, c, f, p in MALFORMED])
def test_a_malformed_placement_instance_is_a_named_input_error(change: Any, field: str, problem: str) -> None:
    with pytest.raises(InputError) as err:
        PlacementInstance.from_dict(_doc(change))
    assert err.value.path == field, str(err.value)
    assert problem in str(err.value)


@pytest.mark.parametrize("command", ["solve", "validate"])
@pytest.mark.parametrize(("change", "field"), [pytest.param(c, f, id=i) for i, c, f, _ in MALFORMED])
def test_the_cli_names_the_field_with_exit_2(command: str, change: Any, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(_doc(change)))
    argv = ["solve", str(path), "-f", "baechi_etf"] if command == "solve" else ["validate", str(path)]
    rc, out, err = cli_run(argv, capsys)
    assert_named_error(rc, out, err)
    # validate checks the schema first, which may name the enclosing field (a time map)
    named = err.removeprefix("error: ").split(": ")[0]
    assert named == field if command == "solve" else field.startswith(named) and named, err


def test_the_well_formed_base_and_its_accepted_variants_parse() -> None:
    """The checks reject only what they name: null model/meta/links, a time map with extra
    device types, a directed link, a named colocation group are all taken."""
    PlacementInstance.from_dict(BASE)
    for change in (
        _set("model", None),
        _set("meta", None),
        _set("cluster.links", None),
        _set("graph.ops.0.time", {"V100": 0.001, "A100": 0.0005}),
        _set("cluster.links", [{"src": "gpu0", "dst": "gpu1", "bandwidth": 1e8, "latency": 1e-3, "directed": True}]),
        _set("graph.ops.0.colocate", "g"),
    ):
        PlacementInstance.from_dict(_doc(change))


# -- D7: parameter ranges -------------------------------------------------------------------

OUT_OF_RANGE = [
    ("baechi_sct", "theta", -1.0, ">= 0"),
    ("baechi_sct", "theta", 5.0, "<= 1"),
    ("placement_milp", "thresholds", -1, ">= 0"),
    ("placement_milp", "relaxation_share", 2.0, "<= 1"),
    ("placement_milp", "relaxation_share", -0.5, ">= 0"),
    ("placement_milp", "search_share", 1.5, "<= 1"),
    ("placement_milp", "default_time_limit", -3.0, "> 0"),
    ("placement_milp", "default_time_limit", 0.0, "> 0"),
    ("placement_bounds", "relaxation_time_limit", -1.0, "> 0"),
    ("placement_bounds", "waist_share", 3.0, "<= 1"),
    ("placement_search", "default_time_limit", -1.0, "> 0"),
    ("placement_search", "cluster_share", 1.5, "<= 1"),
    ("placement_search", "forced_share", -0.1, ">= 0"),
    # caps and sizes that ran silently when negative
    ("baechi_sct", "lp_max_edges", -1, ">= 0"),
    ("baechi_sct", "barrier_above_edges", -3, ">= 0"),
    ("placement_milp", "joined_extra", -1.0, ">= 0"),
    *[("placement_milp", cap, -1, ">= 0") for cap in ("order_nonzeros", "milp_order_nonzeros", "wait_nonzeros", "window_nonzeros", "milp_wait_nonzeros", "milp_window_nonzeros")],
    *[("placement_bounds", cap, -2, ">= 0") for cap in ("order_nonzeros", "wait_nonzeros", "window_nonzeros")],
]


@pytest.mark.parametrize(("formulation", "name", "value", "expected"), OUT_OF_RANGE)
def test_an_out_of_range_parameter_is_an_input_error(formulation: str, name: str, value: Any, expected: str) -> None:
    with pytest.raises(InputError, match=rf"^params\.{name}: expected a (whole )?number {expected}, got "):
        get_formulation("placement", formulation).check_params({name: value})


@pytest.mark.parametrize(("formulation", "name", "value"), [
    ("baechi_sct", "theta", 0.0), ("baechi_sct", "theta", 1.0), ("baechi_sct", "theta", 0.3),
    ("placement_milp", "thresholds", 0), ("placement_milp", "relaxation_share", 0.0), ("placement_milp", "relaxation_share", 1.0),
    ("placement_milp", "default_time_limit", 0.5), ("placement_bounds", "relaxation_time_limit", 2),
    ("placement_search", "cluster_share", 1), ("placement_search", "default_time_limit", 1e-3),
    ("placement_milp", "order_nonzeros", 0), ("placement_milp", "joined_extra", 0.0), ("baechi_sct", "lp_max_edges", 0),
])
def test_a_parameter_in_range_passes(formulation: str, name: str, value: Any) -> None:
    get_formulation("placement", formulation).check_params({name: value})


def test_the_cli_rejects_a_negative_default_time_limit_before_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It had skipped the MILP and reported termination time_limit."""
    path = tmp_path / "ok.json"
    path.write_text(json.dumps(BASE))
    assert_named_error(*cli_run(["solve", str(path), "-f", "placement_milp", "--param", "default_time_limit=-3"], capsys), "params.default_time_limit:", "> 0")
    assert_named_error(*cli_run(["solve", str(path), "-f", "baechi_sct", "--param", "theta=5"], capsys), "params.theta:", "<= 1")


def test_a_theta_in_range_still_runs_m_sct() -> None:
    inst = PlacementInstance.from_dict(BASE)
    assert distplan.solve(inst, "baechi_sct", theta=1.0).plan is not None


# -- D5: total memory ---------------------------------------------------------------------------

#: every placement formulation: those that prove bounds only too (placement_bounds reported
#: status none with a finite bound, exit 0, audit of session 27)
ALL_PLACEMENT = sorted(f.name for f in formulations("placement"))


def test_every_placement_formulation_is_checked() -> None:
    assert {"single_device", "baechi_topo", "baechi_etf", "baechi_sct", "placement_search", "placement_milp", "placement_bounds"} <= set(ALL_PLACEMENT)


@pytest.mark.parametrize("formulation", ALL_PLACEMENT)
def test_total_memory_above_total_capacity_is_infeasible_under_the_simple_model(formulation: str) -> None:
    doc = _doc(_set("cluster.devices", [{"name": "gpu0", "memory": 35}, {"name": "gpu1", "memory": 20}]))  # 60 bytes of ops, 55 room
    inst = PlacementInstance.from_dict(doc)  # a well-formed document: infeasible, found when solved
    with pytest.raises(InfeasibleError, match=r"^graph\.ops: the ops' memory total 60 bytes but the 2 devices hold 55 together \(short by 5 bytes\): no plan exists") as err:
        distplan.solve(inst, formulation, time_limit=5.0)
    assert err.value.details["short_bytes"] == 5


def test_the_cli_reports_total_memory_with_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "total.json"
    path.write_text(json.dumps(_doc(_set("cluster.devices", [{"name": "gpu0", "memory": 35}, {"name": "gpu1", "memory": 20}]))))
    rc, out, err = cli_run(["solve", str(path), "-f", "baechi_etf"], capsys)
    assert rc == 3 and "Traceback" not in err and "graph.ops: the ops' memory total 60 bytes" in err and "short by 5 bytes" in err, (rc, err)


def test_exactly_full_devices_are_not_infeasible() -> None:
    inst = PlacementInstance.from_dict(_doc(_set("cluster.devices", [{"name": "gpu0", "memory": 30}, {"name": "gpu1", "memory": 30}])))
    check_total_memory(inst)
    assert distplan.solve(inst, "placement_search", time_limit=2.0).check.feasible


def _liveness_chain(temporary: float, memory: float, output: float, cap: float) -> dict[str, Any]:
    """Three ops in a chain on two devices of ``cap`` bytes, liveness model."""
    doc = copy.deepcopy(BASE)
    doc["model"] = {"memory": "liveness"}
    doc["graph"]["ops"] = [{"name": f"o{k}", "time": 1.0, "memory": memory, "temporary": temporary, "output": output} for k in range(3)]
    doc["graph"]["edges"] = [{"src": "o0", "dst": "o1", "bytes": 0}, {"src": "o1", "dst": "o2", "bytes": 0}]
    doc["cluster"]["devices"] = [{"name": "d0", "memory": cap}, {"name": "d1", "memory": cap}]
    return doc


def test_under_liveness_freed_memory_is_no_proof() -> None:
    """Each op needs 8 temporary bytes (24 in all, 20 room), but they are held one at a
    time: the total check must not call it infeasible, and a plan exists."""
    inst = PlacementInstance.from_dict(_liveness_chain(temporary=8, memory=0, output=0, cap=10))
    assert float(inst.memory_need().sum()) > float(inst.device_memory.sum())
    check_total_memory(inst)
    result = distplan.solve(inst, "baechi_etf")
    assert result.plan is not None and result.check.feasible


def test_under_liveness_persistent_memory_and_sink_outputs_are_a_proof() -> None:
    """Persistent memory (3 x 6) and the sink's output (4) are held to the end: 22 > 20."""
    inst = PlacementInstance.from_dict(_liveness_chain(temporary=0, memory=6, output=4, cap=10))
    with pytest.raises(InfeasibleError, match=r"liveness model.* total 22 bytes but the 2 devices hold 20 together \(short by 2 bytes\)"):
        distplan.solve(inst, "baechi_etf")
    # the outputs that are consumed are freed: 3 x 6 + 2 fits 20, no proof
    check_total_memory(PlacementInstance.from_dict(_liveness_chain(temporary=0, memory=6, output=2, cap=10)))


# -- D5: placement_search when every heuristic fails ---------------------------------------------

G3011: dict[str, Any] = {
    "format": "distplan/1",
    "kind": "placement",
    "name": "g3011",
    "graph": {
        "ops": [
            {"name": "o0", "time": 1.789087e-06, "memory": 622},
            {"name": "o1", "time": 0.0, "memory": 100},
            {"name": "o2", "time": 1.071257e-06, "memory": 74},
            {"name": "o3", "time": 6.42669e-07, "memory": 225},
            {"name": "o4", "time": 1e-06, "memory": 573},
            {"name": "o5", "time": 1.13497e-06, "memory": 100},
        ],
        "edges": [{"src": "o2", "dst": "o4", "bytes": 0}, {"src": "o3", "dst": "o4", "bytes": 0}, {"src": "o0", "dst": "o5", "bytes": 1.0}, {"src": "o4", "dst": "o5", "bytes": 2.224479942496477}],
    },
    "cluster": {"devices": [{"name": "d0", "memory": 847}, {"name": "d1", "memory": 847}], "bandwidth": 1e12, "latency": 1e-07},
}

G7048: dict[str, Any] = {
    "format": "distplan/1",
    "kind": "placement",
    "name": "g7048",
    "graph": {
        "ops": [
            {"name": "o0", "time": {"a": 1000.0, "b": 0.0}, "memory": 50},
            {"name": "o1", "time": {"a": 1853.928156, "b": 1546.481286}, "memory": 100},
            {"name": "o2", "time": {"a": 370.301438, "b": 1765.983014}, "memory": 498},
            {"name": "o3", "time": {"a": 258.60516, "b": 0.0}, "memory": 100},
            {"name": "o4", "time": {"a": 724.629537, "b": 0.0}, "memory": 654},
            {"name": "o5", "time": {"a": 1688.220631, "b": 397.806343}, "memory": 902},
        ],
        "edges": [
            {"src": "o0", "dst": "o2", "bytes": 617039.2798975308},
            {"src": "o1", "dst": "o3", "bytes": 1000000.0},
            {"src": "o3", "dst": "o4", "bytes": 1000000.0},
            {"src": "o0", "dst": "o5", "bytes": 1000000.0},
            {"src": "o1", "dst": "o5", "bytes": 0},
        ],
    },
    "cluster": {"devices": [{"name": "d0", "memory": 1152, "type": "b"}, {"name": "d1", "memory": 1152, "type": "a"}], "bandwidth": 1000.0, "latency": 100.0},
    "model": {"memory": "simple", "communication": "channels"},
}


@pytest.mark.parametrize("doc", [pytest.param(G3011, id="g3011"), pytest.param(G7048, id="g7048-channels")])
def test_placement_search_finds_a_plan_where_every_heuristic_fails(doc: dict[str, Any]) -> None:
    """The Baechi heuristics stop (exit 4: a plan exists, so they must not call the
    instance infeasible, as they did with exit 3), single_device's one plan does not fit
    (exit 3, proven for that plan), and placement_search finds a plan."""
    inst = PlacementInstance.from_dict(doc)
    for name in ("baechi_etf", "baechi_topo", "baechi_sct"):
        with pytest.raises(NoSolutionError, match="stops there, which does not prove that no plan exists") as err:
            distplan.solve(inst, name)
        assert err.value.exit_code == 4 and err.value.details["shortfall_bytes"] > 0
    with pytest.raises(InfeasibleError, match="no single device holds all"):
        distplan.solve(inst, "single_device")
    result = distplan.solve(inst, "placement_search", time_limit=2.0)
    assert result.plan is not None and result.check.feasible


def test_placement_search_says_why_each_source_failed() -> None:
    """Three ops of 6 bytes on two devices of 10 (18 <= 20: memory proves nothing): no plan
    exists, exit 4, and the message gives each heuristic's reason."""
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "three6",
        "graph": {"ops": [{"name": f"o{k}", "time": 1.0, "memory": 6} for k in range(3)], "edges": []},
        "cluster": {"devices": [{"name": "d0", "memory": 10}, {"name": "d1", "memory": 10}], "bandwidth": 1e9},
    }
    with pytest.raises(NoSolutionError) as err:
        distplan.solve(PlacementInstance.from_dict(doc), "placement_search", time_limit=2.0)
    message = str(err.value)
    assert err.value.exit_code == 4
    for part in ("m-ETF: op 'o2' needs 6 bytes", "m-TOPO cannot place", "single device: no single device holds all 18 bytes", "m-SCT", "packing by memory cannot place", "does not prove"):
        assert part in message, message
