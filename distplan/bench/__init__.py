"""Solver benchmarking campaigns and optimality-bound verification.

* `campaign`: TOML campaign files expanded into runs with stable keys;
* `record`: one run in the current process and the flat record it stores;
* `forkserver`: each run in its own process (forked from a preloaded fork server) under a
  hard wall clock;
* `reaper`: a process in a session of its own that kills the runs and removes the scratch
  folder when the driver dies, even by SIGKILL of its process group;
* `runner`: the campaign driver (local executor, leases, progress bar);
* `dask_executor`: the same runs on a Dask distributed cluster;
* `store`: the SQLite results database (one row per finished run, WAL mode, lease rows
  so that several drivers share one database without running a run twice);
* `report`: solved counts, shifted geometric means, performance profiles, Markdown/CSV;
* `verify`: every stored column audited, every result re-checked under the one optimality
  rule, the bound audit and heuristic quality;
* `guarantees`: approximation guarantees of known heuristics (ETF, Hanen–Munier).

Conventions follow Mittelmann's benchmarks and MIPLIB: times in seconds, shifted geometric
means with a 10 s shift, unsolved runs counted at the time limit, Dolan–Moré profiles.
"""

from __future__ import annotations
