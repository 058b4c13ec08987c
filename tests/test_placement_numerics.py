"""Placement at scales the MILP's microsecond rows could not take, the decoder's ties, and
liveness memory of zero-time ops (review rev12: D1 false optima from HiGHS on kilosecond
ops and 1e9-microsecond delays, D2 the decoder losing a found optimum, D3 the evaluator
dropping a zero-time op's memory). Optima come from a brute force written here."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest
from conftest import backend_params, cli_run, takes_milp
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.placement.time_unit import MAX_SERIAL_SECONDS, scaled, time_factor
from distplan.models.common import instance_from_dict
from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import make_plan

DATA = Path(__file__).parent / "data"
MILP_BACKENDS = backend_params(takes_milp)
#: ms ops beside a 1 kB/s link (delays of 1e9 microseconds); kilosecond ops; a zero-time
#: op tied at its start with a long one on its device
HARD = ["placement_rev12_slowlink9055", "placement_rev12_g1134", "placement_rev12_g4009s"]


def _load(name: str) -> PlacementInstance:
    return instance_from_dict(json.loads((DATA / f"{name}.json").read_text()))


def brute_optimum(inst: PlacementInstance) -> float:
    """Least makespan (seconds) over every device assignment that fits the memory (simple
    model) and every order of the ops consistent with the graph, each op started as early
    as its device and inputs allow (semi-active schedules hold an optimum)."""
    n, m = inst.n_ops, inst.n_devices
    preds = [[(int(inst.src[e]), e) for e in range(inst.n_edges) if inst.dst[e] == v] for v in range(n)]
    orders = [p for p in itertools.permutations(range(n)) if all(p.index(u) < p.index(v) for v in range(n) for u, _ in preds[v])]
    best = math.inf
    for device in itertools.product(range(m), repeat=n):
        dev = np.array(device)
        if np.any(np.bincount(dev, weights=inst.memory, minlength=m) > inst.device_memory):
            continue
        for order in orders:
            free = [0.0] * m
            end = [0.0] * n
            for v in order:
                t = free[device[v]]
                for u, e in preds[v]:
                    delay = 0.0 if device[u] == device[v] else float(inst.delay(np.array([e]), dev[[u]], dev[[v]])[0])
                    t = max(t, end[u] + delay)
                end[v] = t + float(inst.time[v, device[v]])
                free[device[v]] = end[v]
            best = min(best, max(end, default=0.0))
    return best


@pytest.fixture(scope="module")
def optima() -> dict[str, float]:
    return {name: brute_optimum(_load(name)) for name in HARD}


@pytest.mark.parametrize("backend", MILP_BACKENDS)
@pytest.mark.parametrize("name", HARD)
def test_milp_is_exact_at_hard_scales(optima: dict[str, float], name: str, backend: str) -> None:
    inst = _load(name)
    best = optima[name]
    res = distplan.solve(inst, "placement_milp", backend=backend, time_limit=30)
    assert res.bound is not None and res.bound <= best * (1 + 1e-12)  # a bound, not the incumbent's value
    assert res.objective >= best * (1 - 1e-12)
    assert res.status.value == "optimal", (res.objective, best, res.bound_source)
    assert res.objective <= best * (1 + res.gap_tolerance)


def test_time_unit_is_a_power_of_two_and_exact() -> None:
    assert time_factor(distplan.load_instance("gnmt-v2-4gpu")) == 1.0  # bundled: < 1 s serial
    inst = _load("placement_rev12_g1134")
    k = time_factor(inst)
    serial = float(inst.time.min(axis=1).sum())
    assert k < 1 and math.log2(k).is_integer() and serial * k <= MAX_SERIAL_SECONDS < 2 * serial * k
    res = distplan.solve(inst, "baechi_etf")
    assert res.plan is not None and res.plan.start is not None
    small = scaled(inst, k)
    check = evaluate(small, make_plan(small, res.plan.device, res.plan.start * k))
    assert check.feasible and check.objective == res.objective * k  # exactly


def test_scaled_run_reports_in_the_instance_seconds() -> None:
    inst = _load("placement_rev12_g1134")
    res = distplan.solve(inst, "placement_milp")
    assert res.info["time_scale"] == time_factor(inst)
    assert "scaled by 2^" in (res.bound_source or "")
    again = evaluate(inst, res.plan)
    assert again.feasible and again.objective == res.objective


def _zero_time(capacity: int, third: bool) -> PlacementInstance:
    """A (1 s, 60-byte output) feeds B (0 s, 50 temporary bytes); with ``third``, C (1 s,
    40 temporary bytes) starts on the same device at B's instant, after B."""
    ops = [{"name": "A", "time": 1.0, "memory": 0, "output": 60}, {"name": "B", "time": 0.0, "memory": 0, "temporary": 50}]
    if third:
        ops.append({"name": "C", "time": 1.0, "memory": 0, "temporary": 40})
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "zero-time-liveness",
        "graph": {"ops": ops, "edges": [{"src": "A", "dst": "B", "bytes": 60}]},
        "cluster": {"devices": [{"name": "d0", "memory": capacity}], "bandwidth": 1e9},
        "model": {"memory": "liveness"},
    }
    return instance_from_dict(doc)


def test_zero_time_op_holds_its_inputs_and_temporary_bytes() -> None:
    inst = _zero_time(100, third=False)
    check = evaluate(inst, make_plan(inst, np.zeros(2, dtype=np.int64), np.array([0.0, 1.0])))
    assert not check.feasible and any("110 bytes" in v for v in check.violations)


def test_zero_time_op_runs_before_the_op_that_starts_after_it() -> None:
    """B's bytes are freed before C, which starts at B's instant after it, allocates: the
    peak is A's output with B's temporary bytes (110), not with C's as well (150)."""
    inst = _zero_time(120, third=True)
    check = evaluate(inst, make_plan(inst, np.zeros(3, dtype=np.int64), np.array([0.0, 1.0, 1.0])))
    assert check.feasible, check.violations
    assert check.details["memory_peak_bytes"] == [110.0]
    tight = _zero_time(109, third=True)
    assert not evaluate(tight, make_plan(tight, np.zeros(3, dtype=np.int64), np.array([0.0, 1.0, 1.0]))).feasible


def test_milp_infeasible_memory_says_what_does_not_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Total memory fits (959 of 960 bytes) but no split does: exit 3, with the sizes."""
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "no-split",
        "graph": {"ops": [{"name": f"o{i}", "time": 1.0, "memory": mem} for i, mem in enumerate([100, 476, 383])], "edges": []},
        "cluster": {"devices": [{"name": "d0", "memory": 480}, {"name": "d1", "memory": 480}], "bandwidth": 1e9},
    }
    path = tmp_path / "no_split.json"
    path.write_text(json.dumps(doc))
    rc, out, err = cli_run(["solve", str(path), "-f", "placement_milp"], capsys)
    assert rc == 3 and not out, err
    assert "no placement fits the devices' memory" in err and "not split over them" in err
    assert "largest device 'd0' holds 480" in err and "Traceback" not in err


def test_liveness_milp_without_an_accepted_plan_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    """No heuristic places the ops and the MILP's placement (persistent memory only) is
    refused by the liveness evaluator: exit 4 naming why (it said "returned no plan
    (Optimal: )")."""
    rc, out, err = cli_run(["solve", str(DATA / "placement_rev12_g320_liveness.json"), "-f", "placement_milp"], capsys)
    assert rc == 4 and not out
    assert "found no plan the evaluator accepts" in err and "exceeds its capacity" in err and "Optimal: )" not in err


def test_a_solver_calling_the_incumbent_infeasible_is_not_believed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm start lies in the model, so "infeasible" from the solver is a numerical
    failure: termination "numerical", the plan kept, the solver's bound not used."""
    import dataclasses

    from distplan.formulations.registry import RunContext
    from distplan.solvers.result import Termination

    real = RunContext.solve_model

    def lying(self: RunContext, model: object, **kw: object) -> object:
        res = real(self, model, **kw)  # type: ignore[arg-type]
        return dataclasses.replace(res, termination=Termination.INFEASIBLE, raw_status="Infeasible", bound=res.objective)

    monkeypatch.setattr(RunContext, "solve_model", lying)
    inst = _load("placement_rev12_g4009s")
    res = distplan.solve(inst, "placement_milp", module_share=0, relaxation_share=0)
    assert res.termination.value == "numerical"
    assert "placement_milp dual bound" not in (res.bound_source or "")
    assert "solver_contradiction" in res.info and res.plan is not None


def test_bounds_formulation_runs_in_the_time_unit_too(optima: dict[str, float]) -> None:
    res = distplan.solve(_load("placement_rev12_g1134"), "placement_bounds")
    assert res.bound is not None and res.bound <= optima["placement_rev12_g1134"] * (1 + 1e-12)
    assert res.bound >= 0.999 * optima["placement_rev12_g1134"]  # the relaxation is tight here


def test_liveness_milp_charges_what_is_held_to_the_end() -> None:
    """No heuristic places the ops. The MILP charged only persistent memory under the
    liveness model, and its placement was refused; charging also the outputs no op
    consumes (never freed, `PlacementInstance.held_to_end`) gives a placement that fits."""
    inst = _load("placement_rev12_g391_liveness")
    res = distplan.solve(inst, "placement_milp")
    assert res.check is not None and res.check.feasible and res.info["plan_from"] == "placement_milp"


def test_milp_stopped_early_keeps_the_memory_packing() -> None:
    """m-ETF, m-TOPO and single device run out of room (two devices of 847 bytes for ops of
    622, 573, 225, 100, 100 and 74 bytes); stopped before its model, placement_milp returns
    the packing by memory as its plan (it had none: exit 4)."""
    sizes = [622, 573, 225, 100, 100, 74]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "tight-pack",
        "graph": {"ops": [{"name": f"o{i}", "time": 1.0, "memory": b} for i, b in enumerate(sizes)], "edges": [{"src": f"o{i}", "dst": f"o{i + 1}", "bytes": 1e6} for i in range(5)]},
        "cluster": {"devices": [{"name": "d0", "memory": 847}, {"name": "d1", "memory": 847}], "bandwidth": 1e9},
    }
    inst = instance_from_dict(doc)
    for heuristic in ("baechi_etf", "baechi_topo"):  # they stop: exit 4, a plan exists
        with pytest.raises(distplan.NoSolutionError):
            distplan.solve(inst, heuristic)
    res = distplan.solve(inst, "placement_milp", time_limit=1e-6)
    assert res.check is not None and res.check.feasible and res.info["plan_from"] == "memory packing"


def _sequential_peaks(inst: PlacementInstance, device: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Liveness peaks by running the ops one at a time in (start, end, graph) order, each
    allocation followed by a peak reading: an op frees its temporary bytes when it ends
    (at once when it takes no time); an output is freed once every consumer has run (a
    consumer on another device, or one that takes time, once it has ended by the time of
    the op being allocated; a zero-time consumer on its device, once it has run)."""
    n = inst.n_ops
    dur = inst.time[np.arange(n), device]
    end = start + dur
    pos = np.empty(n, dtype=np.int64)
    pos[inst.topo_order()] = np.arange(n)
    consumers: list[list[int]] = [[] for _ in range(n)]
    for a, b in zip(inst.src.tolist(), inst.dst.tolist()):
        consumers[a].append(b)
    held = np.zeros(inst.n_devices)
    peak = np.zeros(inst.n_devices)
    running: set[int] = set()
    outputs: set[int] = set()
    ran: set[int] = set()
    for v in sorted(range(n), key=lambda k: (start[k], end[k], pos[k])):
        t = start[v]
        for u in [u for u in running if end[u] <= t]:
            held[device[u]] -= inst.temporary[u]
            running.discard(u)
        for u in [u for u in outputs if all((b in ran) if dur[b] == 0 and device[b] == device[u] else (b in ran and end[b] <= t) for b in consumers[u])]:
            held[device[u]] -= inst.output[u]
            outputs.discard(u)
        held[device[v]] += inst.memory[v] + inst.temporary[v] + inst.output[v]
        peak[device[v]] = max(peak[device[v]], held[device[v]])
        if dur[v] > 0:
            running.add(v)
        else:
            held[device[v]] -= inst.temporary[v]
        if consumers[v]:
            outputs.add(v)
        ran.add(v)
    return peak


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.data())
def test_liveness_peaks_equal_a_sequential_count(data: st.DataObject) -> None:
    """Random DAGs (ids not in graph order, most ops taking no time), random devices, the
    evaluator's own earliest schedule: `memory_peaks` equals the count above."""
    from distplan.models.placement_evaluate import memory_peaks, schedule_fixed_placement

    n = data.draw(st.integers(2, 7))
    nd = data.draw(st.integers(1, 3))
    perm = data.draw(st.permutations(range(n)))
    edges = [(i, j) for j in range(n) for i in range(j) if data.draw(st.booleans())]
    ops: list[dict[str, object]] = [{}] * n
    for t in range(n):
        ops[perm[t]] = {
            "name": f"o{t}",
            "time": data.draw(st.sampled_from([0.0, 0.0, 1.0, 2.0])),
            "memory": data.draw(st.sampled_from([0, 1, 5])),
            "temporary": data.draw(st.sampled_from([0, 7, 30])),
            "output": data.draw(st.sampled_from([0, 10, 100, 1000])),
        }
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "live",
        "graph": {"ops": ops, "edges": [{"src": f"o{i}", "dst": f"o{j}", "bytes": 0.0} for i, j in edges]},
        "cluster": {"devices": [{"name": f"d{k}", "memory": 1e9} for k in range(nd)], "bandwidth": 1e9},
        "model": {"memory": "liveness"},
    }
    inst = instance_from_dict(doc)
    device = np.array(data.draw(st.lists(st.integers(0, nd - 1), min_size=n, max_size=n)))
    start = schedule_fixed_placement(inst, device)
    assert memory_peaks(inst, device, start).tolist() == _sequential_peaks(inst, device, start).tolist()


def test_a_zero_time_consumer_holds_its_input_however_listed_or_timed() -> None:
    """Z2 reads Z1's 100-byte output at one instant: 110 bytes held on a device of 105,
    whether Z2 is listed first (the instant's order had followed op ids: 10 bytes) or starts
    within the checks' tolerance before Z1 (5e-5 s on a 1000 s makespan: 10 bytes)."""

    def instance(listed_first: bool) -> PlacementInstance:
        z1 = {"name": "Z1", "time": 0.0, "memory": 0, "output": 100}
        z2 = {"name": "Z2", "time": 0.0, "memory": 0, "output": 10}
        doc = {
            "format": "distplan/1",
            "kind": "placement",
            "name": "zero-time-order",
            "graph": {
                "ops": [z2, z1, {"name": "P", "time": 1000.0, "memory": 0}] if listed_first else [z1, z2, {"name": "P", "time": 1000.0, "memory": 0}],
                "edges": [{"src": "Z1", "dst": "Z2", "bytes": 1}, {"src": "Z2", "dst": "P", "bytes": 1}],
            },
            "cluster": {"devices": [{"name": "d0", "memory": 105}], "bandwidth": 1e12},
            "model": {"memory": "liveness"},
        }
        return instance_from_dict(doc)

    device = np.zeros(3, dtype=np.int64)
    for inst, start in ((instance(True), [0.0, 0.0, 0.0]), (instance(False), [5e-5, 0.0, 5e-5])):
        check = evaluate(inst, make_plan(inst, device, np.array(start)))
        assert not check.feasible and any("110 bytes" in v for v in check.violations), (start, check.violations)
        assert not any("before its input" in v for v in check.violations)  # within tolerance
        with pytest.raises(distplan.NoSolutionError):
            distplan.solve(inst, "placement_milp")


def test_heuristic_plans_with_cross_device_zero_time_readers_are_accepted() -> None:
    """m-ETF's plan on an instance whose outputs are read at one instant by zero-time ops on
    the other device: the evaluator frees them as the list scheduler does (it had refused
    the plan by 2 bytes: PlanCheckError on baechi_etf and baechi_sct)."""
    inst = _load("placement_rev12_g721_liveness")
    for name in ("baechi_etf", "baechi_sct"):
        assert distplan.solve(inst, name).check.feasible


def test_liveness_infeasibility_counts_the_bytes_held_to_the_end() -> None:
    """Three ops each keep a 60-byte output no op reads: 180 bytes held to the end on two
    devices of 100 (it said "the ops need 0 persistent bytes")."""
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "sinks",
        "graph": {"ops": [{"name": k, "time": 1.0, "memory": 0, "output": 60} for k in "ABC"], "edges": []},
        "cluster": {"devices": [{"name": "d0", "memory": 100}, {"name": "d1", "memory": 100}], "bandwidth": 1e9},
        "model": {"memory": "liveness"},
    }
    with pytest.raises(distplan.InfeasibleError, match="need 180 bytes held to the end in all, the devices hold 200"):
        distplan.solve(instance_from_dict(doc), "placement_milp")


def test_a_start_within_tolerance_is_counted_where_it_is_written_too() -> None:
    """C (on d1, 100-byte output) reads A and starts 0.9 tolerance before A ends; X's
    100-byte output on d1 is freed when Y (on d2) ends, between C's written start and A's
    end. As written, d1 holds 200 bytes of its 150: refused (counting C only from A's end,
    the raised start, had found 100)."""
    ops = [
        {"name": "A", "time": 1.0, "memory": 0},
        {"name": "C", "time": 1.0, "memory": 0, "output": 100},
        {"name": "X", "time": 0.5, "memory": 0, "output": 100},
        {"name": "Y", "time": 0.1, "memory": 0},
    ]
    doc = {
        "format": "distplan/1",
        "kind": "placement",
        "name": "slack-memory",
        "graph": {"ops": ops, "edges": [{"src": "A", "dst": "C", "bytes": 0}, {"src": "X", "dst": "Y", "bytes": 0}]},
        "cluster": {"devices": [{"name": "d0", "memory": 1000}, {"name": "d1", "memory": 150}, {"name": "d2", "memory": 1000}], "bandwidth": 1e12},
        "model": {"memory": "liveness"},
    }
    inst = instance_from_dict(doc)
    slack = 0.9 * 1e-7 * 2.0  # within the checks' 1e-7 x makespan
    c = 1.0 - slack
    y_end = (c + 1.0) / 2
    check = evaluate(inst, make_plan(inst, np.array([0, 1, 1, 2]), np.array([0.0, c, 0.0, y_end - 0.1])))
    assert not any("before its input" in v for v in check.violations)
    assert not check.feasible and check.details["memory_peak_bytes"][1] == 200.0
