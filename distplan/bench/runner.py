"""The campaign driver: runs a campaign's runs and stores each record as it finishes.

`run_campaign` expands a campaign, skips the runs already stored, and executes the rest
with the local executor (`run_local`: ``jobs`` runs at a time through one fork server,
`distplan.bench.forkserver`) or on a Dask cluster (`distplan.bench.dask_executor`).
Several drivers may work on one database at once: each claims a run (a lease row in the
database, `distplan.bench.store.Store.claim`) right before it starts it and renews its
leases with a heartbeat thread, so no run executes twice; runs another driver holds are
taken up again when that driver stores them (then skipped) or its leases expire (it died),
or at once when it is known to have died on this machine (`distplan.bench.liveness`).
A run that crashes or is killed (see `distplan.bench.forkserver`) never stops the
campaign. `Progress` draws the progress bar on stderr. Times are seconds.
"""

from __future__ import annotations

import math
import sys
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import IO, Any

from distplan.errors import InputError

from .forkserver import ForkServer, run_spec
from .liveness import driver_name, is_dead
from .record import Record, is_solved, run_outcome, warm_set
from .store import Store

#: a lease lasts this long (seconds) without a heartbeat; heartbeats come every quarter of it
LEASE_SECONDS = 60.0


# -- progress -------------------------------------------------------------------------------------


class Progress:
    """A progress bar with ETA and live solved/limit/failed counts, on stderr.

    The counts are the report's (`distplan.bench.report`): *solved* by
    `distplan.bench.record.is_solved`, *limit* and *failed* by
    `distplan.bench.record.run_outcome` (a run killed after its time limit + grace counts
    under limit, ``killed`` saying how many of those, never under failed). On a terminal
    it redraws one line; otherwise it prints a line at most every ``interval`` seconds
    (and at the end).
    """

    def __init__(self, total: int, already: int = 0, stream: IO[str] | None = None, enabled: bool = True, interval: float = 5.0):
        self.total = total
        self.already = already
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.interval = interval
        self.done = 0
        self.solved = 0
        self.limit = 0
        self.failed = 0
        self.killed = 0
        self.t0 = time.perf_counter()
        self._last = 0.0
        self._last_line = ""
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())

    def add(self, rec: Record) -> None:
        self.done += 1
        self.solved += is_solved(rec)
        outcome = run_outcome(rec)
        if outcome == "limit":
            self.limit += 1
            self.killed += rec.get("termination") == "killed"
        elif outcome == "failed":
            self.failed += 1
        self._draw(final=False)

    def line(self) -> str:
        elapsed = time.perf_counter() - self.t0
        frac = self.done / self.total if self.total else 1.0
        width = 24
        filled = int(round(width * frac))
        eta = elapsed / self.done * (self.total - self.done) if self.done else math.nan
        eta_s = "--" if math.isnan(eta) else _clock(eta)
        prior = f" (+{self.already} stored before)" if self.already else ""
        return (
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total}{prior}  solved {self.solved}"
            f"  limit {self.limit} (killed {self.killed})  failed {self.failed}  elapsed {_clock(elapsed)}  ETA {eta_s}"
        )

    def _draw(self, final: bool) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        if self.tty:
            self.stream.write("\r" + self.line() + ("\n" if final else ""))
            self.stream.flush()
        elif final or now - self._last >= self.interval:
            text = self.line()
            if final and text.split("  elapsed")[0] == self._last_line.split("  elapsed")[0]:
                return  # the last line printed already says it all
            self.stream.write(text + "\n")
            self.stream.flush()
            self._last, self._last_line = now, text

    def finish(self) -> None:
        self._draw(final=True)


def _clock(seconds: float) -> str:
    s = int(round(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


# -- leases: several drivers on one database -----------------------------------------------------


class Leases:
    """This driver's claims on the runs of a database, renewed by a heartbeat thread.

    ``claim`` and ``release`` use the caller's `Store` (the driver thread's connection); the
    heartbeat thread has a connection of its own. Use as a context manager.
    """

    def __init__(self, store: Store, lease_seconds: float = LEASE_SECONDS):
        self.store = store
        self.lease_seconds = float(lease_seconds)
        self.driver = driver_name()
        #: the dead drivers (`liveness.is_dead`) whose live leases this driver took over
        self.taken_over: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="distplan-lease-heartbeat", daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        with Store(self.store.path) as own:
            while not self._stop.wait(self.lease_seconds / 4):
                own.renew(self.driver, self.lease_seconds)

    def claim(self, spec: dict[str, Any]) -> str:
        """"claimed", "done" (stored already) or "busy" (another driver's lease is live and
        that driver is not known to be dead: a dead one's runs are taken over at once)."""
        return self.store.claim(spec["run_key"], self.driver, self.lease_seconds, self._dead)

    def _dead(self, driver: str) -> bool:
        if is_dead(driver):
            self.taken_over.add(driver)
            return True
        return False

    def release(self, spec: dict[str, Any]) -> None:
        self.store.release(spec["run_key"], self.driver)

    def others(self) -> set[str]:
        """The other drivers holding live leases on this database now (not known dead)."""
        now = time.time()
        return {row["claimed_by"] for row in self.store.leases() if row["claimed_by"] != self.driver and row["expires_at"] > now and not is_dead(row["claimed_by"])}

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def __enter__(self) -> Leases:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Claim = Callable[[dict[str, Any]], str]


def _claim_all(spec: dict[str, Any]) -> str:
    return "claimed"


# -- the local executor and the campaign driver ---------------------------------------------------


def run_local(
    specs: Sequence[dict[str, Any]],
    on_record: Callable[[Record], None],
    jobs: int = 1,
    claim: Claim = _claim_all,
    release: Callable[[dict[str, Any]], None] | None = None,
    retry_seconds: float = 1.0,
) -> ForkServer:
    """Run specs with ``jobs`` run processes at a time; ``on_record`` gets each record in
    the calling thread as soon as its run finishes. ``claim(spec)`` is asked right before a
    run starts: "claimed" runs it, "done" drops it, "busy" puts it back, to be asked again
    every ``retry_seconds`` seconds once nothing else is left. ``release(spec)`` gives back
    a claimed run that was not executed (interrupt). Returns the (closed) fork server,
    whose ``baseline_rss`` is the memory every run process starts with (bytes)."""
    kinds, backends = warm_set(specs)
    server = ForkServer(kinds, backends)
    pool = ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="distplan-run")
    todo = list(specs)
    busy: list[dict[str, Any]] = []
    running: dict[Future[Record | None], dict[str, Any]] = {}
    try:
        while todo or busy or running:
            while len(running) < max(1, jobs) and todo:
                spec = todo.pop(0)
                verdict = claim(spec)
                if verdict == "claimed":
                    running[pool.submit(run_spec, spec, server, "local")] = spec
                elif verdict == "busy":
                    busy.append(spec)
            if not running:
                if busy and not todo:  # other drivers hold the rest: wait for them or their leases to expire
                    time.sleep(retry_seconds)
                    todo, busy = busy, []
                continue
            done, _ = wait(running, timeout=0.5, return_when=FIRST_COMPLETED)
            for fut in done:
                spec = running.pop(fut)
                rec = fut.result()
                if rec is not None:
                    on_record(rec)
                elif release is not None:
                    release(spec)
    finally:
        server.close()
        pool.shutdown(wait=True, cancel_futures=True)
        if release is not None:
            for spec in running.values():
                release(spec)
    return server


def run_campaign(
    campaign: Any,
    db: str | Path,
    *,
    executor: str = "local",
    jobs: int = 1,
    scheduler: str | None = None,
    client: Any = None,
    progress: bool = True,
    stream: IO[str] | None = None,
    lease_seconds: float = LEASE_SECONDS,
) -> dict[str, Any]:
    """Expand ``campaign``, skip the runs already in ``db``, run the rest and store each
    record as it finishes. Returns counts: planned, skipped (stored before), stored,
    by_others (stored meanwhile by another driver on the same database), duplicates (a
    record whose key was already there: never counted twice), notes. The executor's
    arguments are checked before ``db`` is touched (a dask run without its scheduler left
    a campaign recorded with no run, which `distplan verify` reported as interrupted)."""
    if executor not in ("local", "dask"):
        raise InputError("--executor", f"unknown executor {executor!r}", "use local or dask")
    if executor == "dask" and client is None and not scheduler:
        raise InputError("--scheduler", "the dask executor needs the scheduler's address", "give --scheduler tcp://HOST:PORT")
    if executor != "dask" and scheduler:
        raise InputError("--scheduler", "a scheduler's address is for --executor dask only", "add --executor dask, or drop --scheduler")
    specs = campaign.runs()
    with Store(db) as store:
        for inst in campaign.instances:
            store.add_instance(inst.instance_hash, inst.name, inst.kind, inst.document)
        store.add_campaign(campaign.name, campaign.source, campaign.text, len({s["run_key"] for s in specs}))  # distinct runs
        done = store.done_keys()
        todo = [s for s in specs if s["run_key"] not in done]
        bar = Progress(len(todo), already=len(specs) - len(todo), stream=stream, enabled=progress)
        counts: dict[str, Any] = {"planned": len(specs), "skipped": len(specs) - len(todo), "stored": 0, "by_others": 0, "duplicates": 0, "baseline_rss": None}

        def on_record(rec: Record) -> None:
            if store.insert_run(rec):
                counts["stored"] += 1
            else:
                counts["duplicates"] += 1
            bar.add(rec)

        with Leases(store, lease_seconds) as leases:

            def claim(spec: dict[str, Any]) -> str:
                verdict = leases.claim(spec)
                if verdict == "done":
                    counts["by_others"] += 1
                    bar.total -= 1
                return verdict

            others = leases.others()
            if todo:
                if executor == "local":
                    server = run_local(todo, on_record, jobs=jobs, claim=claim, release=leases.release)
                    counts["baseline_rss"] = server.baseline_rss
                elif executor == "dask":
                    from .dask_executor import run_dask

                    not_run = _run_dask_claimed(run_dask, todo, on_record, claim, leases.release, scheduler=scheduler, client=client)
                    if not_run:
                        campaign.notes.append(f"{len(not_run)} run(s) failed on the cluster and were not recorded (run the campaign again to retry them); first: {not_run[0][1]}")
            others |= leases.others()
            others -= leases.taken_over
        if leases.taken_over:
            campaign.notes.append(
                f"took over the runs of {len(leases.taken_over)} driver(s) on this machine that had died without giving them back "
                f"({', '.join(sorted(d.split('@')[0] for d in leases.taken_over))}), without waiting for their leases to expire"
            )
        if others or counts["by_others"]:
            hosts = sorted({d.split(":")[0] for d in others})
            campaign.notes.append(
                f"other drivers worked on this database meanwhile ({len(others)} seen live, on {', '.join(hosts) or 'unknown hosts'}; "
                f"{counts['by_others']} run(s) stored by them): no run was executed twice, but run times taken on a shared host include their load"
            )
        bar.finish()
    counts["notes"] = list(campaign.notes)
    return counts


def _run_dask_claimed(
    run_dask: Callable[..., list[tuple[str, str]]],
    specs: Sequence[dict[str, Any]],
    on_record: Callable[[Record], None],
    claim: Claim,
    release: Callable[[dict[str, Any]], None],
    retry_seconds: float = 1.0,
    **kwargs: Any,
) -> list[tuple[str, str]]:
    """The Dask executor under leases: submit every claimable run, then wait for the runs
    other drivers hold until they are stored or their leases expire."""
    not_run: list[tuple[str, str]] = []
    pending = list(specs)
    while pending:
        mine: list[dict[str, Any]] = []
        busy: list[dict[str, Any]] = []
        for spec in pending:
            verdict = claim(spec)
            (mine if verdict == "claimed" else busy if verdict == "busy" else []).append(spec)
        if mine:
            try:
                failed = run_dask(mine, on_record, **kwargs)
            except BaseException:
                for spec in mine:
                    release(spec)
                raise
            failed_keys = {key for key, _ in failed}
            for spec in mine:
                if spec["run_key"] in failed_keys:
                    release(spec)
            not_run.extend(failed)
        if busy:
            time.sleep(retry_seconds)
        pending = busy
    return not_run
