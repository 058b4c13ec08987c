"""``distplan export`` writes the program a run of the formulation solves, or refuses (review
rev30 M1: ``--param model=time_indexed`` wrote pipeline_milp's disjunctive model, and
``objective=tag_cost`` tag_sfb's iteration MILP, each as if it were the one asked for); a
``--to`` that names a directory is a named error (``e.mps/`` ended in a traceback); the
summary counts general integers."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_named_error, cli_run


@pytest.mark.parametrize(
    ("instance", "formulation", "param", "named"),
    [
        ("pipeline-zb-p4-m12-comm1", "pipeline_milp", "model=time_indexed", "params.model"),
        ("compression-vgg16", "tag_sfb", "objective=tag_cost", "params.objective"),
    ],
)
def test_a_parameter_that_chooses_another_program_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], instance: str, formulation: str, param: str, named: str) -> None:
    out = tmp_path / "m.mps"
    rc, stdout, err = cli_run(["export", instance, "-f", formulation, "--param", param, "--to", str(out)], capsys)
    assert_named_error(rc, stdout, err, named, "another program")
    assert not out.exists()


def test_the_program_export_writes_is_written_with_its_integers_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "m.mps"
    rc, _, err = cli_run(["export", "pipeline-zb-p4-m12-comm1", "-f", "pipeline_milp", "--param", "model=disjunctive", "--to", str(out)], capsys)
    assert rc == 0 and out.exists()
    assert "binary, 1 general integer)" in err, err


def test_a_model_path_with_a_trailing_slash_is_a_named_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, stdout, err = cli_run(["export", "placement-small-1", "-f", "placement_milp", "--to", str(tmp_path / "e.mps") + "/"], capsys)
    assert_named_error(rc, stdout, err, "--to", "makes it a directory")
    (tmp_path / "d.mps").mkdir()
    rc, stdout, err = cli_run(["export", "placement-small-1", "-f", "placement_milp", "--to", str(tmp_path / "d.mps")], capsys)
    assert_named_error(rc, stdout, err, "--to", "d.mps/out.mps")
