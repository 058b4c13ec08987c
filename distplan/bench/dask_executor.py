"""Run a campaign on a Dask distributed cluster (``--executor dask --scheduler tcp://HOST:PORT``).

Every run is one Dask task calling `run_on_worker`, which does on the worker exactly what
the local executor does on the driver: the run goes to a fork server on that worker (one
per worker process, started on first use) and gets its own process, killed after
``time_limit + grace`` seconds. Records come back to the driver, which writes them to
SQLite as the futures complete (``as_completed``); workers never touch the database. The
instance document travels inside the run spec, so workers need distplan and the solver
packages installed but no instance files. A task that fails on the cluster rather than
in the solver (a worker lost, a task that cannot be deserialized because the worker's
environment lacks distplan) is *not* recorded, so rerunning the campaign retries it; the
count is reported. When the first tasks all fail that way the campaign stops with an
error naming the cause instead of burning through every run.

Needs ``dask[distributed]`` (``pip install 'distplan[dist]'``).
"""

from __future__ import annotations

import atexit
import contextlib
import threading
from collections.abc import Callable, Sequence
from typing import Any

from distplan.errors import InputError

from .forkserver import ForkServer, run_spec
from .record import Record, base_record, warm_set

_LOCK = threading.Lock()
_SERVER: ForkServer | None = None


def _worker_server(kinds: Sequence[str], backends: Sequence[str]) -> ForkServer:
    """This worker process's fork server, with its scratch folder and reaper (created on first use)."""
    global _SERVER
    with _LOCK:
        if _SERVER is None or _SERVER.closed:
            _SERVER = ForkServer(kinds, backends)
            atexit.register(close_worker_server)
        return _SERVER


def close_worker_server() -> bool:
    """Stop this worker's fork server (run on every worker when a campaign ends)."""
    global _SERVER
    with _LOCK:
        server, _SERVER = _SERVER, None
    if server is not None:
        server.close()
    return server is not None


def run_on_worker(spec: dict[str, Any], kinds: Sequence[str], backends: Sequence[str]) -> Record:
    """The Dask task: one run in its own process on this worker."""
    server = _worker_server(kinds, backends)
    rec = run_spec(spec, server, executor="dask")
    if rec is None:  # the worker's server was closed under the run: report, do not hide it
        rec = base_record(spec)
        rec.update(termination="crashed", error="the worker's fork server was shut down during the run", executor="dask")
    return rec


def _client(scheduler: str | None) -> Any:
    try:
        from distributed import Client
    except ImportError:
        raise InputError("--executor", "the dask executor needs dask.distributed", "pip install 'distplan[dist]'") from None
    if not scheduler:
        raise InputError("--scheduler", "the dask executor needs the scheduler's address", "give --scheduler tcp://HOST:PORT")
    try:
        return Client(scheduler, timeout=30)
    except OSError as exc:
        raise InputError("--scheduler", f"cannot reach the Dask scheduler at {scheduler}: {exc}", "start one with `dask scheduler` and workers with `dask worker ADDRESS`") from None
    except (ValueError, TypeError) as exc:  # (no port, a port that is no number, an unknown scheme: review rev31 audit E)
        raise InputError("--scheduler", f"{scheduler!r} is not a scheduler address: {exc}", "give --scheduler tcp://HOST:PORT") from None


#: this many cluster failures before any run came back stop the campaign
EARLY_FAILURES = 5


def run_dask(specs: Sequence[dict[str, Any]], on_record: Callable[[Record], None], *, scheduler: str | None = None, client: Any = None) -> list[tuple[str, str]]:
    """Submit every spec to the cluster; ``on_record`` gets each record (in the driver) as
    its future completes. ``client`` (a ``distributed.Client``) overrides ``scheduler``.
    Returns (run key, error) of the tasks that failed on the cluster (not recorded)."""
    from distributed import as_completed

    own = client is None
    client = client or _client(scheduler)
    kinds, backends = warm_set(specs)
    try:
        futures = {
            client.submit(run_on_worker, spec, kinds, backends, key=f"distplan-run-{spec['run_key']}", pure=False, retries=0): spec
            for spec in specs
        }
        not_run: list[tuple[str, str]] = []
        returned = 0
        try:
            for fut in as_completed(futures):
                spec = futures[fut]
                try:
                    rec = fut.result()
                except Exception as exc:  # the task failed on the cluster, not in the solver
                    not_run.append((spec["run_key"], f"{type(exc).__name__}: {exc}"))
                    if returned == 0 and len(not_run) >= min(EARLY_FAILURES, len(futures)):
                        raise InputError(
                            "--scheduler",
                            f"the cluster's workers cannot run distplan tasks ({not_run[0][1].strip()})",
                            "install distplan and the solver packages on every worker, in the same environment as this client",
                        ) from None
                    continue
                finally:
                    fut.release()
                returned += 1
                on_record(rec)
        except BaseException:
            client.cancel(list(futures))
            raise
    finally:
        with contextlib.suppress(Exception):  # workers that left the cluster have nothing to close
            client.run(close_worker_server)
        if own:
            client.close()
    return not_run
