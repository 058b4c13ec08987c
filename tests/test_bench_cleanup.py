"""Campaigns clean up after themselves on every exit path, SIGKILL of the driver's whole
process group included (issue 17): no run process and no temp folder may survive."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from distplan.bench.reaper import Reaper, live_sessions
from distplan.solvers.base import get_backend

psutil = pytest.importorskip("psutil")
ROOT = Path(__file__).resolve().parents[1]

# one CBC solve that runs far longer than the test waits (30 ops on 4 devices, 120 s limit)
SLOW_CAMPAIGN = """
name = "killed"
time_limit = 120.0
grace = 5.0
threads = 1
formulations = ["placement_milp"]
backends = ["pulp-cbc"]
instances = [{generator = "random_layered_dag", n_ops = 30, seed = 3, n_devices = 4}]
"""


def _leftovers(tmp: Path) -> list[str]:
    return sorted(str(p.relative_to(tmp)) for p in tmp.rglob("distplan-*"))


def _wait_for(cond: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.1)
    return bool(cond())


@pytest.mark.skipif(not get_backend("pulp-cbc").available(), reason="PuLP's CBC binary is not installed")
def test_sigkill_of_the_campaign_group_leaves_no_process_and_no_temp_folder(tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    (tmp_path / "c.toml").write_text(SLOW_CAMPAIGN)
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(
        [sys.executable, "-m", "distplan", "bench", "run", str(tmp_path / "c.toml"), "--db", str(tmp_path / "r.db"), "--quiet"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the campaign's own process group, killed as a whole below
    )
    try:
        driver = psutil.Process(proc.pid)

        def solving() -> bool:
            try:
                kids = driver.children(recursive=True)
                return any("cbc" in k.name() for k in kids) and any(tmp.rglob("distplan-cbc-*"))
            except psutil.Error:
                return False

        assert _wait_for(solving, 90), "CBC never started"
        descendants = driver.children(recursive=True)
        assert any(p.pid != proc.pid and os.getsid(p.pid) != proc.pid for p in descendants)  # runs lead sessions of their own
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        _, alive = psutil.wait_procs(descendants, timeout=15)
        assert not alive, [f"{p.pid} {p.name()}" for p in alive]
        assert _wait_for(lambda: not _leftovers(tmp), 10), _leftovers(tmp)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_reaper_kills_ledger_sessions_and_removes_folders_when_its_driver_closes(tmp_path: Path) -> None:
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "f").write_text("x")
    ledger = scratch / "ledger"
    # two "runs" leading sessions of their own; the second was reaped already (-PID)
    runs = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True) for _ in range(2)]
    ledger.write_text(f"+{runs[0].pid}\n+{runs[1].pid}\n-{runs[1].pid}\n")
    assert live_sessions(str(ledger)) == [runs[0].pid]
    reaper = Reaper()
    try:
        reaper.watch_ledger(ledger)
        reaper.watch_dir(scratch)
        reaper.close()  # EOF: the driver is gone as far as the reaper can tell
        assert runs[0].wait(timeout=10) == -signal.SIGKILL
        assert runs[1].poll() is None  # not in the ledger any more: left alone
        assert not scratch.exists()
    finally:
        for r in runs:
            if r.poll() is None:
                r.kill()
                r.wait()
