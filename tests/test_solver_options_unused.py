"""Raw solver options given to a run that makes no solver call (a heuristic such as m-ETF)
are said to have had no effect, not silently dropped; the CLI prints the warning as a
``warning:`` line on stderr."""

from __future__ import annotations

import warnings

import pytest

import distplan
from tests.conftest import backend_params, cli_run


def test_heuristic_warns_that_the_options_had_no_effect() -> None:
    with pytest.warns(UserWarning, match=r"baechi_etf made no solver call here, so solver_options \['presolve'\] had no effect"):
        res = distplan.solve("placement-small-2", "baechi_etf", solver_options={"presolve": "off"})
    assert res.options["solver_options"] == {"presolve": "off"}


@pytest.mark.parametrize("backend", backend_params(lambda b: b.name == "highs"))
def test_a_run_with_solver_calls_does_not_warn(backend: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = distplan.solve("placement-small-2", "placement_milp", backend=backend, solver_options={"presolve": "off"}, time_limit=30)
    assert res.solver_results


def test_no_options_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        distplan.solve("placement-small-2", "baechi_etf")


def test_cli_prints_a_warning_line(capsys: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        rc, out, err = cli_run(["solve", "placement-small-2", "-f", "baechi_etf", "--solver-option", "presolve=off", "--json"], capsys)
    assert rc == 0, err
    assert err.splitlines() == ["warning: baechi_etf made no solver call here, so solver_options ['presolve'] had no effect"], err
    assert out.count("\n") <= 1 and out.startswith("{")
