"""Raw solver options (``solver_options``, the CLI's ``--solver-option``) are tried on the
solver before anything is solved, on every backend that can check them: HiGHS used to drop
an unknown option silently (its refusal status was ignored), and SCIP's refusal came back
as an internal error after the heuristics had run."""

from __future__ import annotations

from typing import Any

import pytest
from conftest import backend_params

import distplan
from distplan.errors import InputError
from distplan.solvers.base import get_backend

CHECKED = backend_params(lambda b: b.options_check_fn is not None)
#: per backend: (an option it has, a valid value, a value of the wrong type)
#: (pulp-highs, pyomo-highs, pulp-cbc and pyomo-cbc passed an unknown option on unchecked,
#: and the solver ran without it: review rev16)
OPTIONS: dict[str, tuple[str, Any, Any]] = {
    # (options that change no proof: the gaps, limits and cutoffs are distplan's own,
    # `distplan.solvers.reserved`, test_solver_options_reserved.py)
    "highs": ("mip_heuristic_effort", 0.1, "abc"),
    "scip": ("presolving/maxrounds", -1, "abc"),
    "pulp-highs": ("mip_heuristic_effort", 0.1, "abc"),
    "pyomo-highs": ("mip_heuristic_effort", 0.1, "abc"),
    "pulp-cbc": ("cuts", "on", "abc"),
    "pyomo-cbc": ("cuts", "on", "abc"),
    # the cvxpy backends passed an unknown option on to an error in every call (SCIP,
    # Clarabel, SCS, OSQP; HiGHS too, whose MILP erred so that placement_milp returned
    # m-ETF's plan) or to nothing (SciPy): review rev16
    "cvxpy-HIGHS": ("mip_heuristic_effort", 0.1, "abc"),
    "cvxpy-SCIP": ("scip_params", {"presolving/maxrounds": -1}, {"presolving/maxrounds": "abc"}),
    "cvxpy-SCIPY": ("scipy_options", {"presolve": True}, {"no_such_option": 1}),
    "cvxpy-CLARABEL": ("max_iter", 100, "abc"),
    "cvxpy-SCS": ("max_iters", 100000, "abc"),
    "cvxpy-OSQP": ("max_iter", 100000, "abc"),
}
#: the formulation each backend can take (the LP/QP-only cvxpy backends solve m-SCT's LP)
FORMULATION = {"cvxpy-CLARABEL": "baechi_sct", "cvxpy-SCS": "baechi_sct", "cvxpy-OSQP": "baechi_sct"}


def test_the_embedded_default_checks_its_options() -> None:
    assert get_backend("highs").options_check_fn is not None
    installed = {p.values[0] for p in CHECKED if get_backend(p.values[0]).available()}  # type: ignore[attr-defined]
    assert installed <= set(OPTIONS)  # (every installed backend's check is tried below)


@pytest.mark.parametrize("backend", CHECKED)
def test_an_option_the_solver_refuses_is_an_input_error_naming_it(backend: str, capfd: pytest.CaptureFixture[str]) -> None:
    name, good, bad = OPTIONS[backend]
    formulation = FORMULATION.get(backend, "placement_milp")
    with pytest.raises(InputError, match=r"^solver_options\.no_such_option: "):
        distplan.solve("placement-small-1", formulation, backend=backend, solver_options={"no_such_option": 1})
    for wrong in (bad, [1, 2], {"a": 1}):  # a list reached highspy's binding as a TypeError (review rev9)
        # (refused by the solver, or first by distplan: a nested key or a CBC value that is
        # not on its accepted list, `distplan.solvers.reserved`)
        with pytest.raises(InputError, match=rf"^solver_options\.{name}(\.\S+)?: ({backend} refuses|\S+ is refused by distplan)"):
            distplan.solve("placement-small-1", formulation, backend=backend, solver_options={name: wrong})
    res = distplan.solve("placement-small-1", formulation, backend=backend, time_limit=30, solver_options={name: good})
    assert res.check is not None and res.check.feasible
    assert capfd.readouterr().out == ""  # the scratch solver object prints no banner


def test_the_cli_exits_2_naming_the_option(capfd: pytest.CaptureFixture[str]) -> None:
    from distplan.cli import main

    assert main(["solve", "placement-small-1", "-f", "baechi_etf", "--solver-option", "no_such_option=1"]) == 2
    captured = capfd.readouterr()
    assert "solver_options.no_such_option" in captured.err and captured.out == ""


@pytest.mark.parametrize("backend", [p for p in CHECKED if p.values[0] == "cvxpy-HIGHS"])  # type: ignore[attr-defined]
def test_cvxpy_highs_checks_the_options_under_highs_options_too(backend: str) -> None:
    with pytest.raises(InputError, match=r"^solver_options\.highs_options\.no_such_option: "):
        distplan.solve("placement-small-1", "placement_milp", backend=backend, solver_options={"highs_options": {"no_such_option": 1}})
    res = distplan.solve("placement-small-1", "placement_milp", backend=backend, time_limit=30, solver_options={"highs_options": {"mip_heuristic_effort": 0.1}})
    assert res.status.value == "optimal"


@pytest.mark.parametrize("backend", [p for p in CHECKED if p.values[0] == "cvxpy-SCIPY"])  # type: ignore[attr-defined]
def test_a_milp_only_option_is_taken_by_a_solver_that_takes_milps(backend: str) -> None:
    """cvxpy's SciPy adapter sends MILPs to ``scipy.optimize.milp``, whose ``node_limit``
    ``linprog`` does not know: the trial on an LP alone refused it (review rev17 read D1)."""
    res = distplan.solve("placement-small-1", "placement_milp", backend=backend, time_limit=30, solver_options={"scipy_options": {"node_limit": 100000}})
    assert res.status.value == "optimal"


@pytest.mark.parametrize("backend", backend_params(lambda b: b.name == "cvxpy-SCIP"))
def test_cli_writes_a_nested_table_as_its_help_shows(backend: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`--solver-option scip_params='{"limits/nodes": 100}'` (the help's example) reaches
    the solver as a table, and the record keeps it."""
    import json as json_module

    from tests.conftest import cli_run

    rc, out, err = cli_run(["solve", "placement-small-2", "-f", "placement_milp", "-b", backend, "--solver-option", 'scip_params={"limits/nodes": 100}', "--json"], capsys)
    assert rc == 0, err
    assert json_module.loads(out)["options"]["solver_options"] == {"scip_params": {"limits/nodes": 100}}
