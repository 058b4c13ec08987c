"""`solve`'s flags take booleans only: ``fold="no"`` would fold and ``verbose="no"`` would
stream the solver log; both are named input errors before anything runs. The CLI refuses
bad numbers with argparse's message, naming the flag (not the Python keyword)."""

from __future__ import annotations

from typing import Any

import pytest

import distplan
from distplan.errors import InputError
from tests.conftest import assert_named_error, cli_run


@pytest.mark.parametrize("value", ["no", 1, 0, None, 1.0])
@pytest.mark.parametrize("flag", ["fold", "verbose"])
def test_flags_must_be_booleans(flag: str, value: Any) -> None:
    with pytest.raises(InputError, match=rf"^{flag}: must be True or False, got {value!r}$"):
        distplan.solve("placement-small-2", "baechi_etf", **{flag: value})


@pytest.mark.parametrize("value", ["x", True, float("nan"), float("inf"), [1.0]])
def test_started_must_be_a_clock_value(value: Any) -> None:
    """Review rev26: ``started="x"`` escaped as an InternalError (a TypeError comparing it)."""
    with pytest.raises(InputError, match=r"^started: expected a time.perf_counter\(\) value"):
        distplan.solve("placement-small-2", "baechi_etf", time_limit=1, started=value)


def test_started_takes_a_clock_value() -> None:
    import time

    assert distplan.solve("placement-small-2", "baechi_etf", time_limit=5, started=time.perf_counter()).plan is not None


@pytest.mark.parametrize("flag", ["fold", "verbose"])
def test_booleans_are_taken(flag: str) -> None:
    assert distplan.solve("placement-small-2", "baechi_etf", **{flag: False}).plan is not None


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["--time-limit", "0"], "argument --time-limit: 0 is not a number > 0"),
        (["--time-limit", "inf"], "argument --time-limit: inf is not a finite number"),
        (["--mip-gap", "1"], "argument --mip-gap: 1 is not a relative gap in [0, 1)"),
        (["--mip-gap", "-0.1"], "argument --mip-gap: -0.1 is not a number >= 0"),
        (["--threads", "0"], "argument --threads: 0 is not a whole number >= 1"),
        (["--threads", "1000000"], "argument --threads: 1000000 is more than the largest taken"),
    ],
)
def test_cli_names_the_flag(argv: list[str], named: str, capsys: pytest.CaptureFixture[str]) -> None:
    rc, out, err = cli_run(["solve", "placement-small-2", "-f", "baechi_etf", *argv], capsys)
    assert_named_error(rc, out, err, named)
    assert "time_limit=" not in err and "mip_gap=" not in err and "threads=" not in err
