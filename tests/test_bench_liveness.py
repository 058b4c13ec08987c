"""A campaign started again after its driver was killed outright takes the dead driver's
runs over at once (`distplan.bench.liveness`), instead of waiting for the leases to
expire; a driver that is alive, or that cannot be known dead, keeps its runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from distplan.bench.campaign import parse_campaign
from distplan.bench.liveness import _start_time, driver_name, is_dead
from distplan.bench.runner import run_campaign
from distplan.bench.store import Store


def _name_of_a_finished_process() -> str:
    done = subprocess.run([sys.executable, "-c", "from distplan.bench.liveness import driver_name; print(driver_name())"], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_a_finished_process_is_dead_and_this_one_is_not() -> None:
    own = driver_name()
    assert not is_dead(own)
    gone = _name_of_a_finished_process()
    assert gone.split(":")[1] != str(os.getpid())
    assert is_dead(gone)


def test_what_cannot_be_known_is_not_called_dead() -> None:
    own = driver_name()
    name, _, where = own.rpartition("@")
    machine, _, start = where.rpartition("/")
    gone = _name_of_a_finished_process()
    assert not is_dead(gone.split("@")[0])  # no machine suffix (an older driver, not Linux)
    boot, _, ns = machine.rpartition("/")
    other_boot = "0" * len(boot)
    assert not is_dead(gone.replace(boot, other_boot))  # another machine
    assert not is_dead(gone.rpartition("/")[0].rpartition("/")[0] + "/1/" + gone.rpartition("/")[2])  # another PID namespace
    # this process's PID with another start time: the PID was reused, the driver is gone
    assert _start_time(os.getpid()) == start
    assert is_dead(f"{name}@{machine}/{int(start) + 1}")


def test_store_claim_takes_a_dead_drivers_live_lease(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        gone, alive = _name_of_a_finished_process(), driver_name()
        assert store.claim("a", gone, 3600) == "claimed" and store.claim("b", alive, 3600) == "claimed"
        me = driver_name()
        assert store.claim("a", me, 60) == "busy"  # without a liveness test: wait for the lease
        assert store.claim("a", me, 60, is_dead) == "claimed"
        assert store.claim("b", me, 60, is_dead) == "busy"  # its driver lives


def test_a_campaign_run_again_takes_over_a_killed_drivers_runs_at_once(tmp_path: Path) -> None:
    data = {
        "name": "again",
        "time_limit": 20.0,
        "formulations": ["baechi_etf"],
        "instances": [{"generator": "random_layered_dag", "n_ops": [5, 6], "seed": 0, "n_devices": 2}],
    }
    specs = parse_campaign(data, base=tmp_path).runs()
    db = tmp_path / "r.db"
    gone = _name_of_a_finished_process()
    with Store(db) as store:  # the killed driver's leases, live for another minute
        for spec in specs:
            assert store.claim(spec["run_key"], gone, 60) == "claimed"
    counts = run_campaign(parse_campaign(data, base=tmp_path), db, progress=False)
    assert counts["stored"] == len(specs) == 2
    assert any("took over the runs of 1 driver(s)" in n and gone.split("@")[0] in n for n in counts["notes"]), counts["notes"]
    assert not any("other drivers worked on this database" in n for n in counts["notes"]), counts["notes"]
    with Store(db) as store:
        assert store.count() == 2 and store.leases() == []


def test_a_process_whose_proc_entry_cannot_be_read_is_not_called_dead(monkeypatch: pytest.MonkeyPatch) -> None:
    """/proc mounted hidepid (another user's driver): the entry is unreadable but the
    process exists (kill(pid, 0) says EPERM or succeeds), so its leases are not taken."""
    from distplan.bench import liveness

    own = driver_name()
    real_read = Path.read_bytes

    def hidden(self: Path) -> bytes:
        if self.name == "stat" and self.parent.name == str(os.getpid()):
            raise PermissionError(13, "hidden", str(self))
        return real_read(self)

    monkeypatch.setattr(Path, "read_bytes", hidden)
    assert liveness._start_time(os.getpid()) == liveness.UNREADABLE
    assert not is_dead(own)
    assert is_dead(_name_of_a_finished_process())  # (no process: kill says so)


def test_a_pid_too_large_for_the_system_is_not_known_dead() -> None:
    """A hand-edited lease row with an absurd pid: no OverflowError from kill(), and the
    cautious answer (its lease expires as before)."""
    own = driver_name()
    machine = own.rpartition("@")[2].rpartition("/")[0]
    assert not is_dead(f"host:{10**30}:token@{machine}/1")
