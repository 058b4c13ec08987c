"""A run's deadline inside its phases: heuristics, bounds and model builds that take long on
large instances check it and give up with `DeadlineReached`, which the formulation running
them catches to return what it has (its incumbent, its bounds) as a time-limited run.

A deadline is a ``time.perf_counter()`` value, or None for no limit (`RunContext.deadline`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

#: seconds a run's classic schedules (its baselines, the incumbent it falls back on) get
#: when its time limit has passed, or nearly, before they are computed: a cold import can
#: use up a limit of 0.05-0.3 s before the formulation starts (a fresh ``distplan solve``
#: counts the command's own loading). They cost milliseconds: libra's two closed forms
#: 0.1 ms and <= 19 HiGHS LPs 25-50 ms on a bundled multi-row instance; tessel's classic
#: pipeline schedules 1.5-3.5 ms on its V, X, M and K cases of 4 and 8 stages and 8 to 32
#: micro-batches; but 1F1B's 0.26 s on an NN pipeline of 16 stages and 128 micro-batches
#: under a memory limit (review rev26: tessel, pipeline_milp and 1f1b exited 4 at limits
#: up to 0.3 s with 0.1 s here). Well within the grace a run may take past its limit
#: (`solvers.options.run_grace`, at least 2 s).
BASELINE_GRACE = 0.5


class DeadlineReached(RuntimeError):
    """A phase of a run ran out of the run's time (the message names the phase)."""


def baseline_deadline(deadline: float | None) -> float | None:
    """The deadline of a run's baselines (the plans it falls back on): the run's
    ``deadline``, or `BASELINE_GRACE` seconds from now when that is later (None: no
    limit)."""
    return None if deadline is None else max(deadline, time.perf_counter() + BASELINE_GRACE)


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()`` value; None: never) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


def check(deadline: float | None, phase: str) -> None:
    """Raise `DeadlineReached` naming ``phase`` when ``deadline`` has passed."""
    if past(deadline):
        raise DeadlineReached(f"{phase} ran out of time")


def made_in_time(deadline: float | None, makers: Iterable[tuple[str, Callable[[], T | None]]]) -> dict[str, T]:
    """The named results of ``makers`` (those that are not None), made in order; none is
    started once ``deadline`` has passed (a run's optional candidates: each of its
    heuristics takes seconds on a large instance, and the run keeps what it has)."""
    out: dict[str, T] = {}
    for name, make in makers:
        if past(deadline):
            break
        made = make()
        if made is not None:
            out[name] = made
    return out
