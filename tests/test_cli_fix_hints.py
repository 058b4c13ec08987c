"""An error's fix names what a command-line user types (the flag or the command), with the
Python form beside it: the hints named only ``fold=True`` and ``make_pipeline(...)``
(review rev24b)."""

from __future__ import annotations

import pytest

from distplan import cli


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["solve", "gpt-1layer-tp8", "-f", "megatron", "--fold"], "solve without --fold (Python: without fold=True"),
        (["solve", "pipeline-tessel-kshape", "-f", "zb_v"], "`distplan make pipeline --shape v2` (Python: make_pipeline('v2', ...))"),
        (["solve", "pipeline-tessel-kshape", "-f", "zb_h1"], "`distplan make pipeline --weight-time W` (Python: make_pipeline(..., weight_time=W))"),
    ],
)
def test_fix_names_the_flag(argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(argv) == 2
    captured = capsys.readouterr()
    assert hint in captured.err and captured.out == ""
