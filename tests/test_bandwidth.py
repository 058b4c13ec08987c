"""Bandwidth provisioning (LIBRA): instances, evaluator, formulations, cvxpy backends."""

from __future__ import annotations

import copy
import dataclasses
import math
import warnings
from typing import Any

import numpy as np
import pytest
from conftest import backend_params
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from distplan.api import solve
from distplan.errors import InfeasibleError, InputError, NoSolutionError
from distplan.formulations.bandwidth.data import prepare, traffic_factors
from distplan.instances import bundled, load_document, load_instance
from distplan.modeling.model import Model
from distplan.models.bandwidth_eval import collective_traffic, evaluate, network_cost
from distplan.models.bandwidth_instance import BandwidthInstance
from distplan.models.bandwidth_plan import BandwidthPlan, plan_from_dict
from distplan.models.bandwidth_records import GB
from distplan.solvers.base import BackendError, SolveOptions, all_backends, get_backend
from distplan.solvers.cvxpy_backend import SOLVERS, STATUS_MAP, solver_spec
from distplan.solvers.result import SolutionStatus, Termination

BUNDLED = sorted(n for n, e in bundled().items() if e["kind"] == "bandwidth")
RTOL = 1e-4  # libra_perf vs libra_perf_lp (the requirement)


def small_doc(total: float = 300.0, **constraints: Any) -> dict[str, Any]:
    """3 dimensions (ring 4, fully-connected 4, switch 2); one all-reduce over the first two."""
    cons: dict[str, Any] = {"total_bandwidth": {"sense": "==", "value": total * GB}, "linear": []}
    cons.update(constraints)
    return {
        "format": "distplan/1",
        "kind": "bandwidth",
        "name": "small",
        "network": {
            "dimensions": [
                {"name": "a", "size": 4, "block": "ring", "price_link": 2e-9},
                {"name": "b", "size": 4, "block": "fully_connected", "price_link": 4e-9},
                {"name": "c", "size": 2, "block": "switch", "price_link": 8e-9, "price_switch": 10e-9, "price_nic": 20e-9},
            ],
            "total_npus": 32,
        },
        "workload": {
            "name": "toy",
            "layers": [
                {
                    "name": "l0",
                    "compute": {"fwd": 0.001, "ig": 0.001, "wg": 0.002},
                    "collectives": [{"phase": "wg", "type": "all_reduce", "bytes": 1e9, "npus": [4, 4, 1]}],
                }
            ],
        },
        "constraints": cons,
    }


def obj(res: Any, attr: str = "objective") -> float:
    """A result's objective (or bound), asserted present."""
    value = getattr(res, attr)
    assert value is not None
    return float(value)


def details(err: Any) -> Any:
    return err.details


def available(pred: Any) -> list[str]:
    return [b.name for b in all_backends() if b.available() and pred(b)]


def conic(name: str) -> bool:
    spec = solver_spec(name)
    return spec is not None and spec.conic and "soc" in spec.cones


# -- instances ---------------------------------------------------------------------------------

def test_bundled_cases_listed_and_round_trip() -> None:
    assert len(BUNDLED) == 15
    for name in BUNDLED:
        doc = load_document(name)
        inst = BandwidthInstance.from_dict(doc)
        assert inst.to_dict() == doc
        assert BandwidthInstance.from_dict(inst.to_dict()).to_dict() == doc
        assert inst.npus == 4096 and inst.summary()["npus"] == 4096


@pytest.mark.parametrize(
    "mutate, path",
    [
        (lambda d: d["network"].__setitem__("total_npus", 64), "network.total_npus"),
        (lambda d: d["workload"].__setitem__("npus", 16), "workload.npus"),
        (lambda d: d["workload"]["layers"][0]["collectives"][0].__setitem__("npus", [3, 4, 1]), "npus[0]"),
        (lambda d: d["workload"]["layers"][0]["collectives"][0].__setitem__("npus", [4, 4]), "collectives[0].npus"),
        (lambda d: d["workload"]["layers"][0]["collectives"][0].__setitem__("type", "broadcast"), "collectives[0].type"),
        (lambda d: d["network"]["dimensions"][0].__setitem__("price_switch", 1e-9), "dimensions[0].price_switch"),
        (lambda d: d["network"]["dimensions"][1].__setitem__("block", "torus"), "dimensions[1].block"),
        (lambda d: d["constraints"]["linear"].append({"name": "x", "coeffs": {"zz": 1}, "sense": "<=", "rhs": 1}), "coeffs.zz"),
        (lambda d: d["network"]["dimensions"][2].update(min_bandwidth=5e9, max_bandwidth=1e9), "dimensions[2].max_bandwidth"),
        (lambda d: d["workload"].__setitem__("training_loop", "full_overlap"), "workload.training_loop"),
    ],
)
def test_bad_input_names_the_path(mutate: Any, path: str) -> None:
    doc = small_doc()
    mutate(doc)
    with pytest.raises(InputError) as err:
        BandwidthInstance.from_dict(doc)
    assert path in err.value.path


def test_plan_from_dict_validates() -> None:
    inst = BandwidthInstance.from_dict(small_doc())
    plan = plan_from_dict(inst, {"bandwidth": {"a": 1e11, "b": 1e11, "c": 1e11}, "objective": "time"})
    assert plan.bandwidth["c"] == 1e11
    with pytest.raises(InputError):
        plan_from_dict(inst, {"bandwidth": {"a": 1e11, "b": 1e11}})


# -- traffic model and evaluator ---------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(
    ctype=st.sampled_from(["all_reduce", "reduce_scatter", "all_gather", "all_to_all"]),
    npus=st.lists(st.sampled_from([1, 2, 4, 8, 16]), min_size=1, max_size=5),
    size=st.floats(1.0, 1e10),
)
def test_closed_form_traffic_matches_chunk_walk(ctype: str, npus: list[int], size: float) -> None:
    walk = collective_traffic(ctype, size, tuple(npus))
    closed = traffic_factors(ctype, tuple(npus)) * size
    np.testing.assert_allclose(closed, walk, rtol=1e-12, atol=1e-6)


def test_evaluator_by_hand() -> None:
    inst = BandwidthInstance.from_dict(small_doc())
    # all-reduce 1 GB over [4, 4, 1]: a carries 2*3/4 = 1.5 GB, b carries 2*(1/4)*3/4 = 0.375 GB
    plan = BandwidthPlan({"a": 150 * GB, "b": 75 * GB, "c": 75 * GB})
    check = evaluate(inst, plan)
    assert check.feasible, check.violations
    assert check.objective == pytest.approx(0.004 + 1.5 / 150, rel=1e-12)
    # cost: N=32 NPUs, each dimension costs N * B * (its prices)
    assert check.details["cost_usd"] == pytest.approx(32 * (150 * 2 + 75 * 4 + 75 * 38), rel=1e-12)
    assert "dimension c: no collective uses it" in check.details["warnings"]
    bad = evaluate(inst, BandwidthPlan({"a": 150 * GB, "b": 0.0, "c": 150 * GB}))
    assert not bad.feasible and any("no bandwidth" in v for v in bad.violations)
    over = evaluate(inst, BandwidthPlan({"a": 200 * GB, "b": 75 * GB, "c": 75 * GB}))
    assert not over.feasible and any("total_bandwidth" in v for v in over.violations)


def test_cost_model_matches_libra_coefficients() -> None:
    # the reference's network_cost_coeff_per_dim for the 4D network (kept in the metadata notes)
    inst = load_instance("libra-gpt3-4d-total500")
    per_gbps = [network_cost(inst, {d.name: (GB if d.name == e.name else 0.0) for d in inst.dimensions})[0] for e in inst.dimensions]
    np.testing.assert_allclose(per_gbps, [8192.04096, 16384.08192, 16384.12288, 235110.89152], rtol=1e-12)


def test_aggregation_keeps_time() -> None:
    for name in ("libra-gpt3-4d-total500", "libra-resnet50-3d-total500", "libra-dlrm-4d-multi"):
        inst = load_instance(name)
        prog = prepare(inst)
        rng = np.random.default_rng(0)
        for _ in range(5):
            b = rng.uniform(1, 400, inst.num_dims)
            check = evaluate(inst, prog.to_plan(b))
            assert prog.compute_seconds + prog.comm_time(b) == pytest.approx(check.details["time_seconds"], rel=1e-12)
            assert prog.cost(b) == pytest.approx(check.details["cost_usd"], rel=1e-12)


# -- formulations on the bundled cases ---------------------------------------------------------

@pytest.mark.parametrize("name", BUNDLED)
def test_conic_and_lp_agree_on_bundled(name: str) -> None:
    perf = solve(name, "libra_perf", time_limit=30)
    lp = solve(name, "libra_perf_lp", time_limit=30)
    assert perf.status is SolutionStatus.OPTIMAL and lp.status is SolutionStatus.OPTIMAL
    assert perf.objective == pytest.approx(lp.objective, rel=RTOL)
    # each bound is below the other's objective: both certify the same optimum
    assert lp.bound is not None and perf.bound is not None
    assert obj(lp, "bound") <= obj(perf) and obj(perf, "bound") <= obj(lp)  # safe bounds: no tolerance
    assert perf.bound_grade == "safe" and lp.bound_grade == "safe"
    assert perf.info["relative_gap"] < 1e-6
    eq = solve(name, "equal_bw")
    prop = solve(name, "proportional_to_traffic")
    assert obj(perf) <= obj(eq) * (1 + 1e-7)
    assert obj(perf) <= obj(prop) * (1 + 1e-7)


@pytest.mark.parametrize("name", ["libra-gpt3-4d-total500", "libra-msft1t-3d-total500"])
def test_equal_bw_is_equal_under_total(name: str) -> None:
    res = solve(name, "equal_bw")
    vals = np.array(list(res.plan.bandwidth.values()))
    np.testing.assert_allclose(vals, 500 * GB / vals.size, rtol=1e-9)


def test_equal_bw_respects_multi_constraints() -> None:
    res = solve("libra-gpt3-4d-multi", "equal_bw")
    b = [res.plan.bandwidth[d] / GB for d in ("dim1", "dim2", "dim3", "dim4")]
    np.testing.assert_allclose(b, [500, 300, 100, 100], rtol=1e-9)


def test_several_optimal_allocations_compare_objectives() -> None:
    # with B1 = 500 and B2 = 300 fixed, ResNet's all-reduce leaves B3/B4 partly free: compare values
    results = [solve("libra-resnet50-4d-multi", "libra_perf", backend=b) for b in available(lambda b: conic(b.name))[:2]]
    results.append(solve("libra-resnet50-4d-multi", "libra_perf_lp"))
    objs = [obj(r) for r in results]
    assert max(objs) == pytest.approx(min(objs), rel=1e-6)


# -- perf-per-cost ---------------------------------------------------------------------------

def brute_force_product(inst: BandwidthInstance, total: float, step: float) -> float:
    """min time x cost over a grid of the simplex sum B = total (3 dimensions)."""
    prog = prepare(inst)
    g = np.arange(step, total, step)
    b1, b2 = np.meshgrid(g, g, indexing="ij")
    b3 = total - b1 - b2
    ok = b3 > 0
    B = np.stack([b1[ok], b2[ok], b3[ok]], axis=1)
    ratio = np.where(prog.terms[None] > 0, prog.terms[None] / B[:, None, :], 0.0).max(axis=2)
    T = prog.compute_seconds + ratio @ prog.weights
    return float(np.min(T * (B @ prog.cost_per_gbps)))


def test_perf_per_cost_global_on_bundled_3d() -> None:
    name = "libra-gpt3-3d-total500"
    res = solve(name, "libra_perf_per_cost")
    assert res.status is SolutionStatus.OPTIMAL and res.info["certified"]
    assert res.bound is not None and obj(res, "bound") <= obj(res)
    grid = brute_force_product(load_instance(name), 500.0, 0.5)
    assert obj(res) <= grid * (1 + 1e-9)
    curve = res.info["pareto"]
    costs = [p["cost_usd"] for p in curve]
    times = [p["time_seconds"] for p in curve]
    assert costs == sorted(costs)
    assert all(t1 >= t2 * (1 - 1e-7) for t1, t2 in zip(times, times[1:], strict=False))
    perf = solve(name, "libra_perf")
    assert res.info["fastest"]["time_seconds"] == pytest.approx(perf.objective, rel=1e-6)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    sizes=st.lists(st.integers(1, 6).map(lambda e: 2**e), min_size=3, max_size=3),
    prices=st.lists(st.floats(0.5, 30.0), min_size=3, max_size=3),
    colls=st.lists(
        st.tuples(st.sampled_from(["all_reduce", "all_gather", "all_to_all", "reduce_scatter"]), st.floats(1e6, 1e9),
                  st.lists(st.booleans(), min_size=3, max_size=3)),
        min_size=1, max_size=3,
    ),
    compute=st.floats(0.0, 0.05),
)
def test_perf_per_cost_is_global_on_random_instances(sizes: list[int], prices: list[float], colls: Any, compute: float) -> None:
    doc = small_doc(total=100.0)
    for dim, n, p in zip(doc["network"]["dimensions"], sizes, prices, strict=True):
        dim.update(size=n, block="ring", price_link=p * 1e-9)
        dim.pop("price_switch", None)
        dim.pop("price_nic", None)
    doc["network"]["total_npus"] = math.prod(sizes)
    collectives = []
    for ctype, size, mask in colls:
        npus = [n if m else 1 for n, m in zip(sizes, mask, strict=True)]
        if all(m == 1 for m in npus):
            npus[0] = sizes[0]
        collectives.append({"phase": "wg", "type": ctype, "bytes": size, "npus": npus})
    doc["workload"]["layers"][0].update(collectives=collectives, compute={"fwd": compute, "ig": 0.0, "wg": 0.0})
    inst = BandwidthInstance.from_dict(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve(inst, "libra_perf_per_cost")
    grid = brute_force_product(inst, 100.0, 0.25)
    assert res.bound is not None and res.bound <= grid * (1 + 1e-6)
    assert obj(res) <= grid * (1 + 1e-6)


# -- infeasibility, unused dimensions, menus ----------------------------------------------------

@pytest.mark.parametrize("formulation", ["libra_perf", "libra_perf_lp", "libra_perf_per_cost", "equal_bw", "libra_discrete"])
def test_contradictory_constraints_are_named(formulation: str) -> None:
    doc = small_doc(linear=[
        {"name": "a at least 200", "coeffs": {"a": 1}, "sense": ">=", "rhs": 200 * GB},
        {"name": "b at least 150", "coeffs": {"b": 1}, "sense": ">=", "rhs": 150 * GB},
        {"name": "c below a", "coeffs": {"c": 1, "a": -1}, "sense": "<=", "rhs": 0},
    ])
    # (c carries no traffic: each formulation says so before it names the contradiction)
    with pytest.warns(UserWarning, match="dimension c carries no traffic"), pytest.raises(InfeasibleError) as err:
        solve(BandwidthInstance.from_dict(doc), formulation)
    paths = {c["path"] for c in details(err.value)["constraints"]}
    assert paths == {"constraints.total_bandwidth", "constraints.linear[0]", "constraints.linear[1]"}
    amounts = {r["path"]: r["amount"] for r in details(err.value)["relaxation"]}
    assert amounts["constraints.linear[0]"] == pytest.approx(50.0, rel=1e-6)
    assert "a at least 200" in str(err.value) and "50 GB/s" in str(err.value)


def test_used_dimension_forced_to_zero_is_named() -> None:
    doc = small_doc(linear=[{"name": "b off", "coeffs": {"b": 1}, "sense": "<=", "rhs": 0.0}])
    with pytest.raises(InfeasibleError) as err:
        solve(BandwidthInstance.from_dict(doc), "libra_perf")
    labels = " ".join(c["label"] for c in details(err.value)["constraints"])
    assert "b carries traffic" in labels and "b off" in labels


def test_unused_dimension_gets_lower_bound_and_warning() -> None:
    doc = small_doc()
    doc["network"]["dimensions"][2]["min_bandwidth"] = 7 * GB
    inst = BandwidthInstance.from_dict(doc)
    for formulation in ("libra_perf", "libra_perf_lp", "libra_perf_per_cost", "proportional_to_traffic"):
        with pytest.warns(UserWarning, match="dimension c carries no traffic"):
            res = solve(inst, formulation)
        assert res.plan.bandwidth["c"] == pytest.approx(7 * GB, rel=1e-6)
        assert math.isfinite(obj(res))
    # closed form: all traffic on a (1.5 GB) and b (0.375 GB) with a + b = 293: B ~ traffic
    with pytest.warns(UserWarning, match="dimension c carries no traffic"):
        res = solve(inst, "libra_perf")
    assert res.objective == pytest.approx(0.004 + 1.875 / 293, rel=1e-7)


def test_unbounded_bandwidth_is_an_input_error() -> None:
    doc = small_doc()
    del doc["constraints"]["total_bandwidth"]
    with pytest.raises(InputError, match="not bounded above"):
        solve(BandwidthInstance.from_dict(doc), "libra_perf")


def test_discrete_menu_is_exact_and_matches_enumeration() -> None:
    doc = small_doc(total=300.0)
    doc["constraints"]["total_bandwidth"]["sense"] = "<="
    menus = [[50, 100, 150, 200, 250], [25, 50, 75, 100], [10, 20]]
    for dim, menu in zip(doc["network"]["dimensions"], menus, strict=True):
        dim["bandwidth_options"] = [m * GB for m in menu]
    inst = BandwidthInstance.from_dict(doc)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = solve(inst, "libra_discrete")
        with pytest.raises(InputError, match="libra_discrete"):
            solve(inst, "libra_perf")
    best = math.inf
    for a in menus[0]:
        for b in menus[1]:
            for c in menus[2]:
                check = evaluate(inst, BandwidthPlan({"a": a * GB, "b": b * GB, "c": c * GB}))
                if check.feasible:
                    best = min(best, check.objective)
    assert res.objective == pytest.approx(best, rel=1e-9)
    assert res.status is SolutionStatus.OPTIMAL and res.bound is not None


def test_discrete_step_menu_is_no_better_than_continuous() -> None:
    disc = solve("libra-msft1t-3d-total500", "libra_discrete", step=25.0)
    cont = solve("libra-msft1t-3d-total500", "libra_perf")
    assert obj(disc) >= obj(cont) * (1 - 1e-7)
    assert all(v / GB % 25 == pytest.approx(0, abs=1e-6) for v in disc.plan.bandwidth.values())
    # the menu problem's MILP bound proves nothing about the instance; the continuous relaxation does
    assert disc.bound is not None and disc.bound_grade == "safe" and disc.bound <= cont.objective
    assert disc.info["menu_problem_bound_seconds"] >= cont.objective * (1 - 1e-7)


FORMULATIONS = ("libra_perf", "libra_perf_lp", "libra_perf_per_cost", "libra_discrete", "equal_bw", "proportional_to_traffic")


@pytest.mark.parametrize("name", BUNDLED)
def test_bounds_are_safe_on_bundled(name: str) -> None:
    """Every formulation: bound <= objective with zero tolerance (the api refuses otherwise),
    and every safe time bound is below every formulation's training time: no plan beats a
    bound, and "optimal" is said only within the recorded tolerance of a safe bound."""
    results = {f: solve(name, f, time_limit=30) for f in FORMULATIONS}
    time_results = {f: r for f, r in results.items() if f != "libra_perf_per_cost"}
    best_time = min(obj(r) for r in time_results.values())
    for f, r in results.items():
        assert r.bound is None or r.bound <= r.objective, f
        if r.status is SolutionStatus.OPTIMAL:
            assert r.gap is not None and r.gap <= r.gap_tolerance, f
    for f in ("libra_perf", "libra_perf_lp", "libra_discrete"):
        r = time_results[f]
        assert r.bound_grade == "safe" and r.bound <= best_time, f
        if r.status is SolutionStatus.OPTIMAL:  # nothing better than the tolerance allows
            assert obj(r) <= best_time * (1 + r.gap_tolerance), f
    pc = results["libra_perf_per_cost"]
    assert pc.bound_grade == "safe"
    for r in time_results.values():  # any plan's time x cost is at least the certified minimum
        assert pc.bound <= r.check.details["time_seconds"] * r.check.details["cost_usd"]


# -- backends -----------------------------------------------------------------------------------

@pytest.mark.parametrize("backend", backend_params(lambda b: conic(b.name)))
def test_libra_perf_on_every_conic_backend(backend: str) -> None:
    ref = solve("libra-gpt3-3d-total500", "libra_perf_lp")
    res = solve("libra-gpt3-3d-total500", "libra_perf", backend=backend, time_limit=30)
    rtol = 1e-6 if SOLVERS[backend.split("-", 1)[1]].accuracy == "high" else 1e-4
    assert res.objective == pytest.approx(ref.objective, rel=rtol)


@pytest.mark.parametrize("backend", backend_params(lambda b: b.capabilities.lp and b.name in {"highs", "cvxpy-HIGHS", "cvxpy-CLARABEL", "cvxpy-SCIPY", "pulp-highs", "scip"}))
def test_libra_perf_lp_on_lp_backends(backend: str) -> None:
    ref = solve("libra-dlrm-3d-total500", "libra_perf", time_limit=30)
    res = solve("libra-dlrm-3d-total500", "libra_perf_lp", backend=backend, time_limit=30)
    assert res.objective == pytest.approx(ref.objective, rel=RTOL)
    assert res.bound is not None and obj(res, "bound") <= obj(ref) * (1 + 1e-7)


def test_cvxpy_status_map_covers_cvxpy_statuses() -> None:
    import cvxpy.settings as s

    statuses = {s.OPTIMAL, s.OPTIMAL_INACCURATE, s.INFEASIBLE, s.INFEASIBLE_INACCURATE, s.UNBOUNDED,
                s.UNBOUNDED_INACCURATE, s.INFEASIBLE_OR_UNBOUNDED, s.USER_LIMIT, s.SOLVER_ERROR}
    statuses |= set(s.SOLUTION_PRESENT) | set(s.INF_OR_UNB) | set(s.ERROR) | set(s.INACCURATE)
    assert statuses <= set(STATUS_MAP)
    assert STATUS_MAP[s.OPTIMAL_INACCURATE] is not Termination.OPTIMAL


def knapsack() -> Model:
    m = Model("knapsack")
    x = m.add_vars("x", 5, vtype="binary")
    m.add_constraints("cap", (x * np.array([12, 2, 1, 1, 4.0])).sum() <= 15)
    m.maximize((x * np.array([4, 2, 1, 2, 10.0])).sum() + 1)
    return m


@pytest.mark.parametrize("backend", backend_params(lambda b: b.name.startswith("cvxpy-") and b.capabilities.lp))
def test_cvxpy_backends_known_optima(backend: str) -> None:
    be = get_backend(backend)
    spec = SOLVERS[backend.split("-", 1)[1]]
    rtol = 1e-7 if spec.accuracy == "high" else 1e-4
    arrays = knapsack().to_arrays()
    if be.capabilities.milp:
        r = be.solve(arrays, SolveOptions(time_limit=10))
        assert r.termination is Termination.OPTIMAL and r.objective == pytest.approx(16.0, rel=rtol)
        assert r.bound is None or obj(r, "bound") >= obj(r) - 1e-6  # maximization: bound above
    relaxed = copy.deepcopy(arrays)
    relaxed.integrality[:] = 0
    r = be.solve(relaxed, SolveOptions(time_limit=10))
    assert r.status is SolutionStatus.OPTIMAL and r.objective == pytest.approx(18.0 + 1 / 3, rel=rtol)
    assert r.values is not None and r.values.shape == (5,)
    if r.bound is not None:
        assert obj(r, "bound") >= obj(r) - rtol * 20
    m = Model("infeasible")
    y = m.add_vars("y", 2, lb=0, ub=1)
    m.add_constraints("too-much", y.sum() >= 3)
    m.minimize(y.sum())
    r = be.solve(m.to_arrays(), SolveOptions(time_limit=10))
    assert r.status is SolutionStatus.NONE
    assert r.termination in (Termination.INFEASIBLE, Termination.INFEASIBLE_OR_UNBOUNDED, Termination.NUMERICAL)
    assert r.handover_seconds > 0 and r.solve_seconds >= 0


def test_convex_bound_and_dpp_reuse() -> None:
    import cvxpy as cp

    be = get_backend("cvxpy-CLARABEL")
    x = cp.Variable(2, name="x")
    budget = cp.Parameter(nonneg=True)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.inv_pos(x))), [cp.sum(x) <= budget])
    for w in (2.0, 4.0, 8.0):
        budget.value = w
        r = be.solve_convex(prob)
        assert r.status is SolutionStatus.OPTIMAL
        assert r.objective == pytest.approx(4.0 / w, rel=1e-7)  # x = w/2 each
        assert r.bound is not None and obj(r, "bound") <= obj(r) + 1e-9 and (r.gap or 0.0) < 1e-7
        assert r.values_by_block["x"] == pytest.approx([w / 2, w / 2], rel=1e-6)
    assert r.extra["dpp_cached"]


def test_lp_only_backend_refuses_cones_clearly() -> None:
    import cvxpy as cp

    names = available(lambda b: b.name in ("cvxpy-HIGHS", "cvxpy-OSQP", "cvxpy-SCIPY"))
    if not names:
        pytest.skip("no LP/QP-only cvxpy backend installed")
    x = cp.Variable(2)
    prob = cp.Problem(cp.Minimize(cp.sum(cp.inv_pos(x))), [cp.sum(x) <= 2])
    # QP/LP-only solvers do not declare the convex (conic) capability: a named error before solving
    with pytest.raises(BackendError, match="cannot take a convex"):
        get_backend(names[0]).solve_convex(prob)
    for name in names:
        assert not get_backend(name).capabilities.convex
        with pytest.raises(BackendError, match=f"{name}.*cannot take a convex.*cvxpy-CLARABEL"):
            solve("libra-gpt3-3d-total500", "libra_perf", backend=name)


def test_plot_pareto(tmp_path: Any) -> None:
    pytest.importorskip("matplotlib")
    from distplan.models.bandwidth_plot import plot_pareto

    res = solve("libra-tnlg-3d-total500", "libra_perf_per_cost")
    out = plot_pareto(res, tmp_path / "pareto.png", extra={"equal_bw": solve("libra-tnlg-3d-total500", "equal_bw").plan.bandwidth})
    assert out.stat().st_size > 10_000
    with pytest.raises(InputError):
        plot_pareto(solve("libra-tnlg-3d-total500", "libra_perf"), tmp_path / "x.png")


# -- safe bounds and the direct conic path ------------------------------------------------------

@pytest.mark.parametrize("name", ["libra-gpt3-4d-multi", "libra-dlrm-3d-total500", "libra-tnlg-4d-total500"])
def test_lagrangian_bound_holds_for_any_multipliers(name: str) -> None:
    """Weak duality: random multipliers of any size (signs enforced by the bound) never give a
    bound above a feasible allocation's time, nor a budget line above T at a budget's plan."""
    from distplan.formulations.bandwidth.safe import lagrangian_bound, line_from_multipliers

    inst = load_instance(name)
    prog = prepare(inst)
    best = solve(inst, "libra_perf")
    plans = [best, solve(inst, "equal_bw"), solve(inst, "proportional_to_traffic")]
    times = [obj(r) for r in plans]
    rng = np.random.default_rng(1)
    K, D = prog.terms.shape
    for _ in range(200):
        lam = rng.exponential(size=(K, D)) * (rng.random((K, D)) < 0.7)
        mu = rng.normal(size=len(prog.rows)) * 10.0 ** rng.uniform(-9, -3)
        value = lagrangian_bound(prog, lam, mu)
        assert value <= min(times)
    # the solver's own multipliers give a bound within 1e-6 of the optimum
    assert best.bound_grade == "safe" and best.bound >= obj(best) * (1 - 1e-6)
    pc = solve(inst, "libra_perf_per_cost")
    scale = pc.info["fastest"]["cost_usd"]
    cost = prog.cost_per_gbps / scale
    for point in pc.info["pareto"]:
        c = point["cost_budget_usd"] / scale
        B = np.array([point["bandwidth"][d] / GB for d in prog.dims])
        for _ in range(20):
            lam = rng.exponential(size=(K, D))
            mu = np.append(rng.normal(size=len(prog.rows)) * 1e-6, rng.exponential() * 1e-3)
            line = line_from_multipliers(prog, lam, mu, cost, c)
            if line is not None:  # T*(c') >= G - nu c' at every budget c' >= cost(B): B is feasible there
                c_b = float(cost @ B)
                assert line[0] - line[1] * max(c, c_b) <= prog.compute_seconds + prog.comm_time(B)


def test_direct_conic_path_matches_cvxpy() -> None:
    """Clarabel in standard form (the default) and cvxpy's parametrized program reach the same optima."""
    from distplan.formulations.bandwidth import convex

    name = "libra-msft1t-4d-multi"
    direct = [solve(name, "libra_perf"), solve(name, "libra_perf_per_cost")]
    assert direct[0].solver_results[-1].backend == "clarabel-direct"
    convex.DIRECT = False
    try:
        via_cvxpy = [solve(name, "libra_perf"), solve(name, "libra_perf_per_cost")]
    finally:
        convex.DIRECT = True
    assert via_cvxpy[0].solver_results[-1].backend == "cvxpy-CLARABEL"
    for a, b in zip(direct, via_cvxpy, strict=True):
        assert a.objective == pytest.approx(b.objective, rel=1e-6)
        assert a.bound_grade == b.bound_grade == "safe" and a.bound <= b.objective and b.bound <= a.objective


@pytest.mark.parametrize("formulation", ["equal_bw", "proportional_to_traffic", "libra_perf"])
def test_a_conflict_below_the_solvers_tolerance_is_infeasible_for_baselines_too(formulation: str) -> None:
    """``dim1 <= -5`` bytes/s conflicts with dim1 carrying traffic, by less than the fill
    LPs' tolerance: the baselines' plans passed their LPs and were then rejected by the
    evaluator as a bug (PlanCheckError, exit 1); they now name the conflict as libra_perf
    does (InfeasibleError, exit 3)."""
    doc = load_instance("libra-gpt3-3d-total500").to_dict()
    doc["constraints"]["linear"] = [{"name": "x", "coeffs": {"dim1": 1.0}, "sense": "<=", "rhs": -5}]
    with pytest.raises(InfeasibleError, match=rf"{formulation}: no bandwidth allocation satisfies .*x \[constraints\.linear\[0\]\]"):
        solve(BandwidthInstance.from_dict(doc), formulation)


def test_the_direct_conic_solves_keep_clarabels_log(capfd: pytest.CaptureFixture[str]) -> None:
    """The default convex path (Clarabel's own interface, `conic.DirectSolver`) had turned
    Clarabel's log off: no log in the result, nothing on stderr with ``verbose``."""
    quiet = solve("libra-gpt3-3d-total500", "libra_perf")
    direct = [r for r in quiet.solver_results if r.backend == "clarabel-direct"]
    assert direct and all("Clarabel" in r.log for r in direct)
    assert capfd.readouterr() == ("", "")
    solve("libra-gpt3-3d-total500", "libra_perf", verbose=True)
    out, err = capfd.readouterr()
    assert out == "" and "Clarabel" in err


BANDWIDTH_BUNDLED = sorted(n for n, e in bundled().items() if e["kind"] == "bandwidth")


def _an_accepted_faster_plan_stays_above_the_bound(inst: BandwidthInstance) -> None:
    from distplan.models.bandwidth_records import TOLERANCE

    res = solve(inst, "libra_perf")
    assert res.bound is not None and res.bound_grade == "safe" and res.status is SolutionStatus.OPTIMAL
    plan = res.plan
    faster = None
    for grow in (1 - 1e-3) * TOLERANCE, 0.5 * TOLERANCE, 0.1 * TOLERANCE:
        trial = BandwidthPlan({d: b * (1 + grow) for d, b in plan.bandwidth.items()}, plan.objective)
        check = evaluate(inst, trial)
        if check.feasible:
            faster = check.objective
            break
    assert faster is not None, "no scaled-up plan is accepted (each instance bounds the total bandwidth)"
    assert faster < res.objective  # more bandwidth: less time
    assert res.bound <= faster


@pytest.mark.parametrize("name", BANDWIDTH_BUNDLED)
def test_the_safe_bound_holds_for_every_plan_the_evaluator_accepts(name: str) -> None:
    """The evaluator accepts a row exceeded by up to ``TOLERANCE`` of its magnitude: a plan
    with a little more bandwidth than the total allows (pulp-cbc's was 1.3e-8 over on
    libra-msft1t-3d-total500) is faster than the exact optimum, and had come in under
    libra_perf's "safe" bound. The bound now holds over the evaluator's feasible set: the
    optimal plan scaled up until the evaluator would refuse it stays above the bound."""
    _an_accepted_faster_plan_stays_above_the_bound(load_instance(name))


#: rows that bound the bandwidth other than by a <= row of nonnegative coefficients
BOUNDED_OTHERWISE: dict[str, list[dict[str, Any]]] = {
    "negated total": [{"name": "negsum", "coeffs": {f"dim{k}": -1.0 for k in range(1, 5)}, "sense": ">=", "rhs": -500e9}],
    "chain": [
        {"name": "d1<=d2", "coeffs": {"dim1": 1.0, "dim2": -1.0}, "sense": "<=", "rhs": 0.0},
        {"name": "rest", "coeffs": {"dim2": 1.0, "dim3": 1.0, "dim4": 1.0}, "sense": "<=", "rhs": 500e9},
    ],
}


@pytest.mark.parametrize("rows", list(BOUNDED_OTHERWISE.values()), ids=list(BOUNDED_OTHERWISE))
def test_a_bandwidth_bounded_through_other_rows_keeps_its_safe_bound(rows: list[dict[str, Any]]) -> None:
    """The accepted box bounds every dimension by propagation over all rows: bounded only
    through a >= row of negative coefficients, or through a mixed-sign row, a dimension had
    no upper bound, its rows' tolerance was unbounded and libra_perf lost its bound (review
    rev9; the bound before that change was below an accepted plan's time on the first)."""
    doc = load_instance("libra-gpt3-4d-total500").to_dict()
    doc["constraints"].pop("total_bandwidth", None)
    doc["constraints"]["linear"] = rows
    _an_accepted_faster_plan_stays_above_the_bound(BandwidthInstance.from_dict(doc))


def test_per_cost_takes_only_plans_the_evaluator_accepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """A low-accuracy conic solver's allocation (cvxpy-SCIP's, cvxpy-SCS's on a random
    instance) can miss a row by more than the evaluator's tolerance: libra_perf_per_cost had
    chosen it and `solve` raised PlanCheckError. Its points now carry whether the evaluator
    accepts their plan; the line of a refused one still bounds, its plan is not chosen.
    Here the evaluator is made to refuse the plan chosen at first."""
    from distplan.formulations.bandwidth import per_cost

    name = "libra-gpt3-3d-total500"
    first = solve(name, "libra_perf_per_cost")
    refused = first.plan.bandwidth
    real = per_cost.evaluate

    def refusing(inst: Any, plan: BandwidthPlan) -> Any:
        check = real(inst, plan)
        if plan.bandwidth == refused:
            check.feasible = False
        return check

    monkeypatch.setattr(per_cost, "evaluate", refusing)
    again = solve(name, "libra_perf_per_cost")
    assert again.plan.bandwidth != refused and again.objective >= first.objective
    assert all(p["bandwidth"] != refused for p in again.info["pareto"])
    assert again.bound is not None and again.bound <= again.objective
    monkeypatch.setattr(per_cost, "evaluate", lambda inst, plan: dataclasses.replace(real(inst, plan), feasible=False))
    with pytest.raises(NoSolutionError, match="no allocation the solver returned meets the constraints"):
        solve(name, "libra_perf_per_cost")


def test_per_cost_cut_by_its_time_limit_says_so() -> None:
    """The last sub-solve of a search stopped by the time limit had finished, and its
    "optimal" became the run's termination beside an open 23% gap (review rev_bd L1)."""
    res = solve("libra-msft1t-4d-multi", "libra_perf_per_cost", time_limit=0.05, mip_gap=1e-9)
    assert res.status is SolutionStatus.OPTIMAL or res.info["certified"] or res.termination is Termination.TIME_LIMIT
