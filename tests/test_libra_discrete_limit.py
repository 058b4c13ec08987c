"""libra_discrete under a time limit (review rev16): when the LP for a dimension's largest
bandwidth stopped without a solution, the dimension read as unbounded, and a bounded
instance (libra-gpt3-4d-multi, total 1000 GB/s) got the bad-input error "dimension dim1 has
no upper bandwidth (add max_bandwidth or a total_bandwidth constraint)", exit 2. It is now
"no solution before the limit", exit 4."""

from __future__ import annotations

from typing import Any

import pytest

import distplan
import distplan.formulations.bandwidth.discrete as discrete
from distplan.cli import main
from distplan.errors import InputError, NoSolutionError


def _stopped(ctx: Any, prog: Any, dims: Any) -> dict[int, float]:
    return {}  # (every "largest B_d" LP stopped at the limit without a solution)


def test_an_unfinished_top_is_no_solution_not_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(discrete, "max_bandwidths", _stopped)
    with pytest.raises(NoSolutionError, match=r"largest bandwidth of dimension \S+ was not found") as caught:
        distplan.solve("libra-gpt3-4d-multi", "libra_discrete")
    assert not isinstance(caught.value, InputError)


def test_the_cli_says_so_with_exit_4(monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(discrete, "max_bandwidths", _stopped)
    assert main(["solve", "libra-gpt3-4d-multi", "-f", "libra_discrete"]) == 4
    assert "no upper bandwidth" not in capfd.readouterr().err


def test_without_a_limit_it_solves() -> None:
    res = distplan.solve("libra-gpt3-4d-multi", "libra_discrete")
    assert res.check is not None and res.check.feasible and res.bound is not None and res.bound <= res.objective
