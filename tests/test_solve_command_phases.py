"""`distplan solve`'s phases (review rev29 D4, D9): the instance's digest is taken before the
solve, so that the time limit covers it as it covers loading (1 s on a 200,000-op instance,
after the solve had used the whole limit), and the command's progress covers loading and
writing as well as solving (both were silent)."""

from __future__ import annotations

from typing import Any

import pytest

import distplan.cli.core as core
from tests.conftest import cli_run


def test_the_digest_is_taken_before_the_solve_and_progress_covers_every_phase(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any) -> None:
    events: list[str] = []

    class Recorder:
        def __init__(self, label: str, **kwargs: Any) -> None:
            self.label = label

        def __enter__(self) -> Recorder:
            events.append("progress on")
            return self

        def __exit__(self, *exc: object) -> None:
            events.append("progress off")

    def wrap(name: str, fn: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            events.append(name)
            return fn(*args, **kwargs)

        return recorded

    monkeypatch.setattr(core, "Progress", Recorder)
    monkeypatch.setattr(core, "load_instance", wrap("load", core.load_instance))
    monkeypatch.setattr(core, "digest_of", wrap("digest", core.digest_of))
    monkeypatch.setattr(core, "_solve_args", wrap("solve", core._solve_args))
    monkeypatch.setattr(core, "write_json", wrap("write", core.write_json))
    rc, out, err = cli_run(["solve", "placement-small-1", "-f", "baechi_etf", "--result", str(tmp_path / "r.json"), "--json"], capsys)
    assert rc == 0, err
    assert events == ["progress on", "load", "digest", "solve", "write", "progress off"]
