"""Options every backend understands."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any


def run_grace(time_limit: float) -> float:
    """Seconds a whole solve may run past its ``time_limit`` (seconds): max(2 s, 10 %).
    `SolveOptions.kill_grace` is half of it; `distplan verify` notes a recorded wall time
    beyond it, and ``benchmarks/bench_time_limits.py`` checks every formulation against it."""
    return max(2.0, 0.1 * float(time_limit))


@dataclass(frozen=True)
class SolveOptions:
    """Options every backend understands. Times in seconds; mip_gap relative."""

    time_limit: float | None = None
    mip_gap: float | None = None
    threads: int | None = None
    seed: int | None = None
    verbose: bool = False
    #: LP algorithm hint: "auto", "simplex" or "barrier" (interior point, then crossover);
    #: backends without the choice ignore it
    lp_method: str = "auto"
    #: extra seconds after time_limit before a solver process is killed; None: `kill_grace`
    grace: float | None = None
    #: backend-specific raw options passed through unchanged
    raw: dict[str, Any] = field(default_factory=dict)

    def with_(self, **kwargs: Any) -> SolveOptions:
        return replace(self, **kwargs)

    def kill_grace(self) -> float:
        """Seconds past ``time_limit`` after which a solver that has not stopped by itself is
        killed: ``grace`` if set, else max(1 s, 5% of the limit). Half of the `run_grace`
        that a whole `distplan.solve` may run past its limit, so reading the result,
        decoding and evaluating the plan fit in the other half."""
        if self.grace is not None:
            return float(self.grace)
        return max(1.0, 0.05 * float(self.time_limit or 0.0))
