"""A run's deadline inside its phases: heuristics, bounds and model builds that take long on
large instances check it and give up with `DeadlineReached`, which the formulation running
them catches to return what it has (its incumbent, its bounds) as a time-limited run.

A deadline is a ``time.perf_counter()`` value, or None for no limit (`RunContext.deadline`).
"""

from __future__ import annotations

import time


class DeadlineReached(RuntimeError):
    """A phase of a run ran out of the run's time (the message names the phase)."""


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (a ``time.perf_counter()`` value; None: never) has passed."""
    return deadline is not None and time.perf_counter() >= deadline


def check(deadline: float | None, phase: str) -> None:
    """Raise `DeadlineReached` naming ``phase`` when ``deadline`` has passed."""
    if past(deadline):
        raise DeadlineReached(f"{phase} ran out of time")
