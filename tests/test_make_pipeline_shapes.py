"""`make pipeline`'s help lists exactly the shapes it takes (review rev24b: it listed
``zb``, which it refused)."""

from __future__ import annotations

from pathlib import Path

import pytest

from distplan.cli.make import PIPELINE_SHAPES
from distplan.instances.pipelines import SHAPES
from tests.conftest import cli_run


def test_the_listed_shapes_are_the_shapes() -> None:
    assert PIPELINE_SHAPES.split(", ") == list(dict.fromkeys(SHAPES.values()))


@pytest.mark.parametrize("shape", PIPELINE_SHAPES.split(", "))
def test_every_listed_shape_is_taken(shape: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = cli_run(["make", "pipeline", "--shape", shape, "--stages", "2", "--micro-batches", "2", "-o", str(tmp_path / "p.json")], capsys)
    assert rc == 0, err
