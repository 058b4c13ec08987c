"""Bench drivers' names, and whether the driver a lease names has died on this machine.

A driver's name (`driver_name`) is ``host:pid:token``, followed on Linux by
``@boot/pidns/start``: the kernel's boot id, the inode of the driver's PID namespace and
the process's start time (clock ticks since boot, field 22 of ``/proc/<pid>/stat``).
A lease of a driver killed outright (SIGKILL, out of memory) stays live until it expires
(`distplan.bench.runner.LEASE_SECONDS`), so a campaign started again at once used to wait
that long for the dead driver's runs. `is_dead` says that a driver is gone for sure: same
boot and PID namespace as this process (so its PID means the same process here) and no
process with that PID and start time. Anything else (another machine or container, a
name without the suffix, not Linux) is "not known dead": its leases expire as before.
"""

from __future__ import annotations

import os
import socket
import uuid
from functools import cache
from pathlib import Path

from .reaper import stat_fields

#: `_start_time` of a process that exists but whose ``/proc`` entry this one cannot read
UNREADABLE = "unreadable"


def _start_time(pid: int) -> str | None:
    """The start time of process ``pid`` (clock ticks since boot, as text), None when no
    such process exists (or has exited and is waiting to be reaped), `UNREADABLE` when it
    may exist but its ``/proc`` entry cannot be read (``/proc`` mounted ``hidepid``, another
    user's process: review rev15b found a live driver judged dead that way)."""
    fields = stat_fields(pid)
    if fields is None:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except (OSError, OverflowError):  # (EPERM: it exists, and is another user's; a pid
            return UNREADABLE  # too large for the system, from a hand-edited lease: not known)
        return UNREADABLE
    if fields[0] in (b"Z", b"X"):  # (state: a zombie or dead task runs no more)
        return None
    return fields[19].decode()


@cache
def _machine() -> str | None:
    """``boot/pidns`` of this process: equal for two processes whose PIDs mean the same
    processes; None off Linux."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return None


def driver_name() -> str:
    """A new driver name for this process (see the module docstring)."""
    name = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    machine, start = _machine(), _start_time(os.getpid())
    return name if machine is None or start is None else f"{name}@{machine}/{start}"


def is_dead(driver: str) -> bool:
    """True when ``driver`` (a `driver_name`) ran on this machine, in this PID namespace,
    and its process no longer exists: no process has its PID, or the one that has it
    started at another time (the PID was reused). False when that cannot be known."""
    name, at, where = driver.rpartition("@")
    if not at or _machine() is None:
        return False
    machine, _, start = where.rpartition("/")
    parts = name.split(":")
    if machine != _machine() or len(parts) < 3 or not parts[-2].isdigit():
        return False
    now = _start_time(int(parts[-2]))
    return now is None or (now != UNREADABLE and now != start)
