"""The campaign's reaper: cleans up after a driver that cannot clean up after itself.

A driver killed with SIGKILL (alone or with its whole process group) runs no ``finally``
and no ``atexit``. Its run processes lead sessions of their own (so that a run's solver
binaries are killed as a whole), so they are not in the driver's process group and would
go on solving, and its scratch folders would stay in the temp directory. So the driver
starts this reaper first:

* it runs as a plain script (``python reaper.py``: the standard library only, no distplan,
  no numpy) in a **session of its own**, so a signal to the driver's process group does not
  reach it;
* its stdin is the read end of a pipe whose write end **only the driver holds** (the fd is
  not inherited: the fork server and the runs never get it), so it sees EOF exactly when
  the driver is gone, however it ended;
* the driver tells it, one line each, the folders to remove (``dir PATH``) and the ledger
  file (``ledger PATH``) in which the fork server writes ``+PID`` when it forks a run and
  ``-PID`` when it has reaped it (written by the fork server itself, so a run forked an
  instant before the kill is in it);
* on EOF it kills, with SIGKILL, every run session still in the ledger (the process group
  and every other member of the session, found in ``/proc``), waits until they are gone
  (at most `SETTLE_SECONDS`), removes the folders and exits.

Run processes also ask the kernel for SIGKILL when the fork server dies
(``PR_SET_PDEATHSIG``), and every temporary folder a run makes (``distplan-isolated-*``,
``distplan-cbc-*``, ...) lives inside the campaign's scratch folder (the run's ``TMPDIR``),
which the reaper removes. A normal exit closes the pipe too: the reaper then finds nothing
left to do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

#: how long (seconds) the reaper waits for killed sessions to disappear before removing folders
SETTLE_SECONDS = 5.0


def stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, ppid, pgrp,
    session, ...: field 3 onwards), None when the entry cannot be read (no such process,
    not Linux, or hidden from this user); shared with `distplan.bench.liveness` (this
    module stays standard library only)."""
    try:
        return Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def session_members(sid: int) -> list[int]:
    """Pids of the processes in session ``sid`` (Linux ``/proc``; empty elsewhere)."""
    members: list[int] = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return members
    for entry in entries:
        if not entry.isdigit():
            continue
        fields = stat_fields(entry)  # state, ppid, pgrp, session, ...
        if fields is not None and len(fields) > 3 and int(fields[3]) == sid and fields[0] not in (b"Z", b"X"):
            members.append(int(entry))
    return members


def kill_session(sid: int) -> int:
    """SIGKILL the process group ``sid`` and every other process of session ``sid``;
    returns how many processes besides the group leader were hit."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(sid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(sid, signal.SIGKILL)
    hit = 0
    for pid in session_members(sid):
        if pid in (sid, os.getpid()):
            continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            hit += 1
    return hit


def live_sessions(ledger: str) -> list[int]:
    """Sessions the fork server started (``+PID``) and has not reaped (``-PID``)."""
    live: dict[int, None] = {}
    try:
        text = Path(ledger).read_text()
    except OSError:
        return []
    for line in text.split():
        if len(line) > 1 and line[1:].isdigit():
            pid = int(line[1:])
            if line[0] == "+":
                live[pid] = None
            elif line[0] == "-":
                live.pop(pid, None)
    return list(live)


def clean(ledgers: list[str], dirs: list[str]) -> None:
    """Kill the live sessions of every ledger, wait for them, remove the folders."""
    sessions = [sid for ledger in ledgers for sid in live_sessions(ledger)]
    deadline = time.monotonic() + SETTLE_SECONDS
    while sessions:
        for sid in sessions:
            kill_session(sid)
        sessions = [sid for sid in sessions if session_members(sid)]
        if not sessions or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    for d in dirs:
        for _ in range(3):  # a dying process may still have created a file
            shutil.rmtree(d, ignore_errors=True)
            if not os.path.exists(d):
                break
            time.sleep(0.1)


def main() -> int:
    """The reaper's body: collect orders until EOF on stdin, then clean."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only EOF (the driver gone) ends the reaper
    ledgers: list[str] = []
    dirs: list[str] = []
    for raw in sys.stdin.buffer:
        line = raw.decode(errors="replace").rstrip("\n")
        what, _, arg = line.partition(" ")
        if what == "dir" and arg:
            dirs.append(arg)
        elif what == "ledger" and arg:
            ledgers.append(arg)
    clean(ledgers, dirs)
    return 0


class Reaper:
    """The driver's handle on its reaper process (see the module docstring)."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the driver's process group: survives its kill
            close_fds=True,
        )
        self.pid = self._proc.pid

    def _send(self, line: str) -> None:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return
        with contextlib.suppress(OSError, ValueError):
            stdin: IO[bytes] = proc.stdin
            stdin.write((line + "\n").encode())
            stdin.flush()

    def watch_dir(self, path: str | os.PathLike[str]) -> None:
        """Remove ``path`` (a folder) when the driver is gone."""
        self._send(f"dir {os.fspath(path)}")

    def watch_ledger(self, path: str | os.PathLike[str]) -> None:
        """Kill the live run sessions listed in the ledger file ``path`` when the driver is gone."""
        self._send(f"ledger {os.fspath(path)}")

    def close(self, timeout: float = 10.0) -> None:
        """Close the pipe (the reaper cleans what is left and exits) and wait for it (idempotent)."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError, ValueError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    sys.exit(main())
