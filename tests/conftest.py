"""Shared test parametrization: backends come from the registry, and a backend that is not
installed here is a skipped parameter, never a silently missing one."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from distplan.solvers.base import Backend, all_backends, get_backend


def backend_names(predicate: Callable[[Backend], bool] = lambda b: True) -> list[str]:
    """Names of every registered backend satisfying ``predicate`` (available or not)."""
    return [b.name for b in all_backends() if predicate(b)]


def backend_params(predicate: Callable[[Backend], bool] = lambda b: True) -> list[object]:
    """pytest params for those backends; the ones not installed here are skipped, not dropped."""
    out: list[object] = []
    for name in backend_names(predicate):
        out.append(pytest.param(name, id=name, marks=skip_unless_available(name)))
    return out


def skip_unless_available(name: str) -> list[pytest.MarkDecorator]:
    """The marks of a parameter that names backend ``name``: skipped where it is not installed."""
    return [] if get_backend(name).available() else [pytest.mark.skip(reason=f"{name} is not installed here")]


def takes_lp(b: Backend) -> bool:
    return b.capabilities.lp


def takes_milp(b: Backend) -> bool:
    return b.capabilities.milp


def takes_convex(b: Backend) -> bool:
    return b.capabilities.convex


#: which backends can take a formulation's program
TAKES = {"lp": takes_lp, "milp": takes_milp, "convex": takes_convex}


def closure_late_until(real: Callable[..., Any], until: float) -> Callable[..., Any]:
    """``real`` (`graphs.transitive_closure`, as a formulation imported it) whose checkpoint
    first waits until ``until`` (a ``time.perf_counter()`` value): a closure that runs past
    the run's deadline. It must be given a checkpoint (the run's deadline)."""

    def slowed(n: int, src: Any, dst: Any, order: Any = None, checkpoint: Any = None) -> Any:
        assert checkpoint is not None, "the closure was not given the run's deadline"

        def late() -> None:
            time.sleep(max(0.0, until - time.perf_counter()))
            checkpoint()

        return real(n, src, dst, order, late)

    return slowed


def cli_run(argv: list[str], capture: Any) -> tuple[int, str, str]:
    """``distplan ARGV`` in this process: exit code, stdout, stderr (``capture``: capsys or
    capfd)."""
    from distplan.cli import main

    capture.readouterr()
    rc = main(argv)
    captured = capture.readouterr()
    return rc, captured.out, captured.err


def assert_named_error(rc: int, out: str, err: str, *named: str) -> None:
    """Bad input's contract: exit 2, no traceback, nothing on stdout (with ``--json``, the
    one error document), ``named`` in the message."""
    assert rc == 2, (rc, out, err)
    assert "Traceback" not in err and (out == "" or json.loads(out)["error"]["exit_code"] == 2), (out, err)
    for text in named:
        assert text in err, err


def torch_model_file(tmp_path_factory: pytest.TempPathFactory, name: str, text: str) -> Path:
    """A module of torch models written to a fresh folder (``<name>_models.py``), for
    ``import-torch MODULE:FACTORY``; the test is skipped where torch is not installed."""
    pytest.importorskip("torch")
    path = tmp_path_factory.mktemp(name) / f"{name}_models.py"
    path.write_text(text)
    return path
