"""A backend that cannot take a model, or is unknown or not installed, is bad input: the
error is an `InputError` (and a ``ValueError``), so one ``except InputError`` catches every
bad input, with exit 2 and the message unprefixed; bench records still tell it apart."""

from __future__ import annotations

import json

import pytest

import distplan
from distplan.bench.record import execute_run
from distplan.cli import main
from distplan.errors import InputError
from distplan.solvers.base import BackendError, get_backend


def test_unknown_backend_is_an_input_error() -> None:
    with pytest.raises(InputError) as info:
        get_backend("no-such-solver")
    assert isinstance(info.value, BackendError) and isinstance(info.value, ValueError)
    assert info.value.path == "backend" and info.value.exit_code == 2
    assert str(info.value).startswith("unknown backend 'no-such-solver'; known backends: ")


def test_a_backend_that_cannot_take_the_model_is_an_input_error() -> None:
    with pytest.raises(InputError, match=r"is a MILP and backend 'cvxpy-CLARABEL' takes no integer variables"):
        distplan.solve("placement-small-2", "placement_milp", backend="cvxpy-CLARABEL", time_limit=5)


def test_cli_exit_2_and_one_json_document(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "placement-small-2", "-f", "placement_milp", "-b", "no-such-solver", "--json"]) == 2
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["message"].startswith("unknown backend 'no-such-solver'")
    assert error["path"] == "backend" and error["exit_code"] == 2


def test_bench_record_names_a_backend_error_as_such() -> None:
    inst = distplan.load_instance("placement-small-2")
    spec = {"run_key": "k", "instance": inst.name, "instance_hash": "h", "kind": inst.kind, "formulation": "placement_milp",
            "backend": "no-such-solver", "document": inst.to_dict(), "options": {}}
    rec = execute_run(spec)
    assert rec["termination"] == "backend_error", rec
    assert "unknown backend" in rec["error"]
