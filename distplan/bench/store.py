"""The results database: SQLite from the standard library, one row per finished run.

Tables:

* ``runs``: one row per run, written when the run finishes (never before), keyed by the
  run key (``UNIQUE``): a campaign that is interrupted and run again skips the runs already
  stored, and a run can never be counted twice.
* ``instances``: the instance documents (zlib-compressed canonical JSON) by content hash,
  so that `distplan verify DB` re-evaluates plans without the original files (generated
  instances included).
* ``campaigns``: the campaign files that wrote into the database, with their run counts.
* ``leases``: runs being executed right now: ``run_key``, ``claimed_by`` (the driver),
  ``expires_at`` and ``heartbeat_at`` (Unix seconds). A driver claims a run before it
  starts it and renews its leases while it runs; several drivers on one database thus
  never execute a run twice, and the runs of a dead driver become claimable once its
  leases expire, or at once when it is known to have died on the claiming driver's machine
  (`distplan.bench.liveness`). Storing a run deletes its lease.

The database is in WAL mode: a reader (``distplan bench report``) can open it while a
campaign is writing, and a killed writer loses at most the run it had not committed.
Times are seconds, memory bytes.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import json
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from distplan.errors import InputError
from distplan.models.common import canonical_json

SCHEMA_VERSION = 1

#: columns of the ``runs`` table, in order, with their SQL types
RUN_COLUMNS: tuple[tuple[str, str], ...] = (
    ("run_key", "TEXT NOT NULL UNIQUE"),
    ("campaign", "TEXT"),
    ("instance", "TEXT NOT NULL"),
    ("instance_hash", "TEXT NOT NULL"),
    ("kind", "TEXT NOT NULL"),
    ("formulation", "TEXT NOT NULL"),
    ("program", "TEXT"),
    ("exact", "INTEGER"),
    ("bound_only", "INTEGER"),
    ("params_json", "TEXT"),
    ("backend", "TEXT NOT NULL"),
    ("backend_version", "TEXT"),
    ("options_json", "TEXT"),
    ("time_limit", "REAL"),
    ("seed", "INTEGER"),
    ("repetition", "INTEGER"),
    ("termination", "TEXT NOT NULL"),
    ("status", "TEXT NOT NULL"),
    ("objective", "REAL"),
    ("bound", "REAL"),
    ("bound_source", "TEXT"),
    ("gap", "REAL"),
    ("build_seconds", "REAL"),
    ("handover_seconds", "REAL"),
    ("solve_seconds", "REAL"),
    ("wall_seconds", "REAL"),
    ("process_seconds", "REAL"),
    ("peak_memory_bytes", "INTEGER"),
    ("verdict", "TEXT"),
    ("plan_json", "TEXT"),
    ("result_json", "TEXT"),
    ("error", "TEXT"),
    ("host", "TEXT"),
    ("executor", "TEXT"),
    ("finished_at", "TEXT"),
    ("label", "TEXT"),
    ("bound_grade", "TEXT"),
    ("gap_tolerance", "REAL"),
)
#: columns added after a database's schema was first written: added (NULL) when missing
#: (runs stored before then keep NULL there; their ``result_json`` has what it recorded)
LATER_COLUMNS: tuple[str, ...] = ("label", "bound_grade", "gap_tolerance")
RUN_FIELDS: tuple[str, ...] = tuple(name for name, _ in RUN_COLUMNS)
#: columns written to CSV / Parquet exports (the plan and the full result stay in the DB)
EXPORT_FIELDS: tuple[str, ...] = tuple(f for f in RUN_FIELDS if f not in ("plan_json", "result_json"))
#: columns that hold a number (or NULL)
NUMERIC_FIELDS: tuple[str, ...] = tuple(name for name, sql in RUN_COLUMNS if sql.split()[0] in ("REAL", "INTEGER"))
#: what to do about a damaged database
DAMAGED_FIX = "the file is damaged: run the campaign again into a new database"


class Store:
    """A benchmark database. Use as a context manager or call `close`."""

    def __init__(self, path: str | Path, *, create: bool = True):
        self.path = Path(path)
        if not create and not self.path.is_file():
            raise InputError(str(self.path), "no such benchmark database", "run a campaign first: distplan bench run CAMPAIGN.toml --db FILE")
        try:
            self.conn = sqlite3.connect(str(self.path), timeout=30.0)
            self.conn.row_factory = sqlite3.Row
            self._check_is_benchmark(create)
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self._create()
        except sqlite3.DatabaseError as exc:
            raise InputError(str(self.path), f"not a benchmark database: {exc}", "give a database written by distplan bench run") from None

    def _check_is_benchmark(self, create: bool) -> None:
        """Refuse (before writing anything) a file that is not a benchmark database: to open
        an existing one (``create=False``: reports, exports, verification) it must hold the
        ``runs`` and ``meta`` tables; a new one may be written only into an empty database,
        never into another program's."""
        tables = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if {"runs", "meta"} <= tables or (create and not tables):
            return
        self.conn.close()
        what = "an empty file" if not tables else f"a SQLite database with tables {sorted(tables)}"
        lacking = " and ".join(t for t in ("runs", "meta") if t not in tables)
        raise InputError(str(self.path), f"not a benchmark database ({what}, without distplan's {lacking} table{'s' if ' and ' in lacking else ''}); nothing was written to it", "give a database written by distplan bench run")

    def _create(self) -> None:
        cols = ",\n  ".join(f"{name} {sql}" for name, sql in RUN_COLUMNS)
        with self.conn:
            self.conn.execute(f"CREATE TABLE IF NOT EXISTS runs (\n  {cols}\n)")
            self.conn.execute("CREATE INDEX IF NOT EXISTS runs_by_instance ON runs (instance_hash, formulation)")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS instances (instance_hash TEXT PRIMARY KEY, name TEXT, kind TEXT, document BLOB)"
            )
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS campaigns (name TEXT, source TEXT, text TEXT, planned INTEGER, started_at TEXT)"
            )
            self.conn.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            self.conn.execute(
                "CREATE TABLE IF NOT EXISTS leases (run_key TEXT PRIMARY KEY, claimed_by TEXT NOT NULL, expires_at REAL NOT NULL, heartbeat_at REAL NOT NULL)"
            )
            self.conn.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        found = {row["name"] for row in self.conn.execute("PRAGMA table_info(runs)")}
        for name, sql in RUN_COLUMNS:
            if name in LATER_COLUMNS and name not in found:
                with self.conn:
                    self.conn.execute(f"ALTER TABLE runs ADD COLUMN {name} {sql}")
                found.add(name)
        missing = [f for f in RUN_FIELDS if f not in found]
        if missing:
            raise InputError(str(self.path), f"the runs table lacks columns {missing}", "use a database written by this distplan version")

    # -- writing ---------------------------------------------------------------------------
    def add_campaign(self, name: str, source: str, text: str, planned: int) -> None:
        with self.conn:
            self.conn.execute(
                "INSERT INTO campaigns VALUES (?, ?, ?, ?, ?)",
                (name, source, text, planned, _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")),
            )

    def add_instance(self, instance_hash: str, name: str, kind: str, document: Mapping[str, Any]) -> None:
        blob = zlib.compress(canonical_json(document).encode(), 6)
        with self.conn:
            self.conn.execute("INSERT OR IGNORE INTO instances VALUES (?, ?, ?, ?)", (instance_hash, name, kind, blob))

    def insert_run(self, record: Mapping[str, Any]) -> bool:
        """Store a finished run; False (and nothing written) when its key is already stored."""
        row = [_sql_value(record.get(f)) for f in RUN_FIELDS]
        if row[RUN_FIELDS.index("finished_at")] is None:
            row[RUN_FIELDS.index("finished_at")] = _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds")
        marks = ", ".join("?" for _ in RUN_FIELDS)
        with self.conn:
            cur = self.conn.execute(f"INSERT OR IGNORE INTO runs ({', '.join(RUN_FIELDS)}) VALUES ({marks})", row)
            self.conn.execute("DELETE FROM leases WHERE run_key = ?", (record.get("run_key"),))
        return cur.rowcount == 1

    # -- leases (several drivers on one database) ---------------------------------------------
    def claim(self, run_key: str, driver: str, lease_seconds: float, dead: Callable[[str], bool] | None = None) -> str:
        """Try to take ``run_key`` for ``driver`` for ``lease_seconds`` seconds.

        Returns "claimed" (the run is this driver's to execute), "done" (already stored) or
        "busy" (another driver holds a lease that has not expired, and ``dead`` does not
        say that driver is gone: `distplan.bench.liveness.is_dead`). One write transaction
        (``BEGIN IMMEDIATE``), so two drivers never both get "claimed".
        """
        now = time.time()
        with self._immediate():
            if self.conn.execute("SELECT 1 FROM runs WHERE run_key = ?", (run_key,)).fetchone():
                return "done"
            row = self.conn.execute("SELECT claimed_by, expires_at FROM leases WHERE run_key = ?", (run_key,)).fetchone()
            if row is not None and row["claimed_by"] != driver and row["expires_at"] > now and not (dead is not None and dead(row["claimed_by"])):
                return "busy"
            self.conn.execute(
                "INSERT OR REPLACE INTO leases (run_key, claimed_by, expires_at, heartbeat_at) VALUES (?, ?, ?, ?)",
                (run_key, driver, now + lease_seconds, now),
            )
        return "claimed"

    def renew(self, driver: str, lease_seconds: float) -> int:
        """Heartbeat: extend every lease of ``driver`` by ``lease_seconds`` from now; returns how many."""
        now = time.time()
        with self.conn:
            cur = self.conn.execute("UPDATE leases SET expires_at = ?, heartbeat_at = ? WHERE claimed_by = ?", (now + lease_seconds, now, driver))
        return cur.rowcount

    def release(self, run_key: str, driver: str) -> None:
        """Give a claimed run back (it was not executed, e.g. on an interrupt)."""
        with self.conn:
            self.conn.execute("DELETE FROM leases WHERE run_key = ? AND claimed_by = ?", (run_key, driver))

    def leases(self) -> list[dict[str, Any]]:
        return [dict(row) for row in self.conn.execute("SELECT * FROM leases ORDER BY run_key")]

    @contextlib.contextmanager
    def _immediate(self) -> Iterator[None]:
        """A write transaction taken at its start (no other writer can slip in between)."""
        if self.conn.in_transaction:  # an implicit one left open: end it first
            self.conn.commit()
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self.conn.rollback()
            raise
        self.conn.commit()

    # -- reading ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def _reading(self) -> Iterator[None]:
        """SQLite's own errors on a damaged file, as the named error they are (exit 2)."""
        try:
            yield
        except sqlite3.DatabaseError as exc:
            raise InputError(str(self.path), f"the database is damaged: {exc}", DAMAGED_FIX) from None

    def done_keys(self) -> set[str]:
        with self._reading():
            return {row[0] for row in self.conn.execute("SELECT run_key FROM runs")}

    def runs(self, where: str = "", args: Iterable[Any] = ()) -> list[dict[str, Any]]:
        """The stored runs, each column of a numeric type holding a number or NULL."""
        sql = "SELECT rowid AS _row, * FROM runs" + (f" WHERE {where}" if where else "") + " ORDER BY rowid"
        with self._reading():
            rows = [dict(row) for row in self.conn.execute(sql, tuple(args))]
        for row in rows:
            at = row.pop("_row")
            for name in NUMERIC_FIELDS:
                value = row.get(name)
                if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
                    raise InputError(f"{self.path}: runs row {at}.{name}", f"{value!r} is not a number", DAMAGED_FIX)
        return rows

    def count(self) -> int:
        with self._reading():
            return int(self.conn.execute("SELECT COUNT(*) FROM runs").fetchone()[0])

    def instance_document(self, instance_hash: str) -> dict[str, Any] | None:
        with self._reading():
            row = self.conn.execute("SELECT document FROM instances WHERE instance_hash = ?", (instance_hash,)).fetchone()
        if row is None:
            return None
        try:
            return json.loads(zlib.decompress(row[0]).decode())
        except (zlib.error, UnicodeDecodeError, json.JSONDecodeError, TypeError) as exc:
            raise InputError(f"{self.path}: instances[{instance_hash}]", f"the stored instance cannot be read: {exc}", DAMAGED_FIX) from None

    def campaigns(self) -> list[dict[str, Any]]:
        with self._reading():
            return [dict(row) for row in self.conn.execute("SELECT * FROM campaigns ORDER BY rowid")]

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _sql_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if value is None or isinstance(value, str | int | float):
        return value
    return canonical_json(value)


def column_json(run: Mapping[str, Any], name: str, default: Any = None) -> Any:
    """A run's JSON column (``params_json``, ``plan_json``, ...) decoded, ``default`` when NULL;
    a damaged one is a named error."""
    text = run.get(name)
    if text is None:
        return default
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError) as exc:
        raise InputError(f"run {run.get('run_key')}.{name}", f"not JSON: {exc}", DAMAGED_FIX) from None


def open_existing(path: str | Path) -> Store:
    """Open a database that must exist (reports, exports, verification)."""
    return Store(path, create=False)
