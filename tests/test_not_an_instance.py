"""Files given where an instance is expected: a plan or a result document is named as such
(with the instance it names), a broken symbolic link as one, and a pipe (bash's
``<(gunzip -c x.json.gz)``) is read like a file."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

import distplan
from distplan.errors import InputError
from distplan.instances import bundled_path
from tests.conftest import assert_named_error, cli_run


@pytest.fixture
def outputs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.chdir(tmp_path)
    assert cli_run(["solve", "placement-small-2", "-f", "baechi_etf", "--out", "plan.json", "--result", "result.json"], capsys)[0] == 0
    return tmp_path


@pytest.mark.parametrize(
    ("file", "named"),
    [
        ("plan.json", "kind: a placement plan (written by `distplan solve --out`), not an instance (give the instance it was made for, 'placement-small-2')"),
        ("result.json", "a result document (written by `distplan solve --result`), not an instance (give the instance it was made for, 'placement-small-2')"),
    ],
)
@pytest.mark.parametrize("command", [["solve", "{file}", "-f", "baechi_etf"], ["inspect", "{file}"], ["validate", "{file}"]])
def test_a_plan_or_result_is_named_where_an_instance_is_expected(
    outputs: Path, file: str, named: str, command: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    rc, out, err = cli_run([a.format(file=file) for a in command], capsys)
    assert_named_error(rc, out, err, named)


def test_api_names_a_plan_given_as_instance(outputs: Path) -> None:
    with pytest.raises(InputError, match=r"^kind: a placement plan .*not an instance"):
        distplan.solve(str(outputs / "plan.json"), "baechi_etf")


@pytest.mark.parametrize("command", [["solve", "link.json", "-f", "baechi_etf"], ["evaluate", "placement-small-2", "link.json"], ["verify", "link.json"]])
def test_a_broken_link_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "link.json").symlink_to(tmp_path / "gone.json")
    rc, out, err = cli_run(command, capsys)
    assert_named_error(rc, out, err, "link.json: is a broken symbolic link (to", "gone.json', which does not exist)")


def test_a_pipe_is_read_as_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    text = bundled_path("placement-small-2").read_bytes()
    assert not bundled_path("placement-small-2").name.endswith(".gz")
    read, write = os.pipe()

    def feed() -> None:
        with os.fdopen(write, "wb") as fh:
            fh.write(text)

    writer = threading.Thread(target=feed)
    writer.start()
    try:
        rc, out, err = cli_run(["solve", f"/dev/fd/{read}", "-f", "baechi_etf", "--json"], capsys)
    finally:
        writer.join()
        os.close(read)
    assert rc == 0, err
    assert '"instance": "placement-small-2"' in out
