"""Solver benchmarking campaigns and optimality-bound verification.

* `campaign`: TOML campaign files expanded into runs with stable keys;
* `runner`: each run in its own process (forked from a preloaded fork server) under a hard
  wall clock, the local executor and the progress bar;
* `dask_executor`: the same runs on a Dask distributed cluster;
* `store`: the SQLite results database (one row per finished run, WAL mode);
* `report`: solved counts, shifted geometric means, performance profiles, Markdown/CSV;
* `verify`: re-evaluation of every stored plan, the bound audit and heuristic quality;
* `guarantees`: approximation guarantees of known heuristics (ETF, Hanen–Munier).

Conventions follow Mittelmann's benchmarks and MIPLIB: times in seconds, shifted geometric
means with a 10 s shift, unsolved runs counted at the time limit, Dolan–Moré profiles.
"""

from __future__ import annotations
