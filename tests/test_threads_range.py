"""A solve asks for at most `api.max_threads` solver threads (review rev16: HiGHS makes its
workers before its time limit starts; 3,000 threads took 10 s at a 1 s limit, 100,000
aborted the process with SIGABRT)."""

from __future__ import annotations

import pytest

import distplan
from distplan.api import max_threads
from distplan.cli import main
from distplan.errors import InputError


@pytest.mark.parametrize("threads", [0, max_threads() + 1, 100_000])
def test_too_many_threads_is_bad_input(threads: int) -> None:
    with pytest.raises(InputError, match=rf"^threads: must be a whole number from 1 to {max_threads()}"):
        distplan.solve("placement-small-1", "baechi_etf", threads=threads)


def test_the_cli_says_so_with_exit_2(capfd: pytest.CaptureFixture[str]) -> None:
    assert main(["solve", "placement-small-1", "-f", "placement_milp", "--threads", "100000"]) == 2
    assert f"argument --threads: 100000 is more than the largest taken, {max_threads()}" in capfd.readouterr().err


def test_the_most_threads_are_allowed() -> None:
    assert distplan.solve("placement-small-1", "baechi_etf", threads=max_threads()).check.feasible
