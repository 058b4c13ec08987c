"""Several `bench run` drivers on one database: lease rows, so no run executes twice, and
the runs of a dead driver are taken over once its leases expire (issue 17)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

from distplan.bench.campaign import parse_campaign
from distplan.bench.runner import run_campaign
from distplan.bench.store import Store


def _campaign(exec_log: Path, hang: float) -> dict[str, object]:
    hooks = {"_test_hang_seconds": hang, "_test_exec_log": str(exec_log)}
    return {
        "name": "shared",
        "time_limit": 20.0,
        "formulations": [{"name": "baechi_etf", **hooks}, {"name": "baechi_topo", **hooks}],
        "instances": [{"generator": "random_layered_dag", "n_ops": [5, 6, 7], "seed": [0, 1], "n_devices": 2}],
    }


def test_two_drivers_on_one_database_execute_every_run_exactly_once(tmp_path: Path) -> None:
    # two drivers (each with its own database connection, lease identity, fork server and
    # reaper) started together on one database; threads of this process, to spare the test
    # two interpreter start-ups
    exec_log = tmp_path / "executed.txt"
    data = _campaign(exec_log, hang=0.25)
    n_runs = len(parse_campaign(data, base=tmp_path).runs())
    assert n_runs == 12
    db = tmp_path / "r.db"
    Store(db).close()  # the schema exists before both start
    counts: list[dict[str, object]] = []
    errors: list[BaseException] = []

    def drive() -> None:
        try:
            counts.append(run_campaign(parse_campaign(data, base=tmp_path), db, progress=False))
        except BaseException as exc:  # reported below
            errors.append(exc)

    drivers = [threading.Thread(target=drive) for _ in range(2)]
    for d in drivers:
        d.start()
    for d in drivers:
        d.join(timeout=240)
    assert not errors, errors
    executed = Counter(line.split()[0] for line in exec_log.read_text().splitlines())
    assert len(executed) == n_runs and set(executed.values()) == {1}, executed.most_common(3)
    stored = [int(c["stored"]) for c in counts]  # type: ignore[call-overload]
    assert sum(stored) == n_runs and min(stored) > 0, stored  # both took runs, neither twice
    assert all(c["duplicates"] == 0 for c in counts)
    assert any("other drivers worked on this database" in n for c in counts for n in c["notes"])  # type: ignore[attr-defined]
    with Store(db) as store:
        assert store.count() == n_runs
        assert store.leases() == []  # storing a run ends its lease


def test_claims_exclude_live_leases_and_reclaim_expired_ones(tmp_path: Path) -> None:
    with Store(tmp_path / "r.db") as store:
        assert store.claim("k1", "a", 60) == "claimed"
        assert store.claim("k1", "b", 60) == "busy"
        assert store.claim("k1", "a", 60) == "claimed"  # a driver may renew its own claim
        assert store.claim("k2", "a", -1) == "claimed"  # already expired: a dead driver's
        assert store.claim("k2", "b", 60) == "claimed"
        assert store.renew("a", 60) == 1  # k1 only: k2 is b's now
        store.insert_run({"run_key": "k1", "instance": "i", "instance_hash": "h", "kind": "placement", "formulation": "f", "backend": "x", "termination": "finished", "status": "feasible"})
        assert store.claim("k1", "b", 60) == "done"
        assert [row["run_key"] for row in store.leases()] == ["k2"]
        store.release("k2", "a")  # not a's lease: stays
        store.release("k2", "b")
        assert store.leases() == []


def test_a_dead_drivers_runs_are_taken_over_when_their_leases_expire(tmp_path: Path) -> None:
    exec_log = tmp_path / "executed.txt"
    data = _campaign(exec_log, hang=0.0)
    data["instances"] = [{"generator": "random_layered_dag", "n_ops": 5, "seed": [0, 1], "n_devices": 2}]
    campaign = parse_campaign(data, base=tmp_path)
    keys = [s["run_key"] for s in campaign.runs()]
    db = tmp_path / "r.db"
    with Store(db) as store:
        assert store.claim(keys[0], "dead-driver", -5.0) == "claimed"  # expired long ago
        assert store.claim(keys[1], "slow-driver", 2.0) == "claimed"  # expires in 2 s, never renewed
    expiry = time.time() + 2.0
    counts = run_campaign(campaign, db, progress=False, lease_seconds=30)
    assert counts["stored"] == len(keys) == 4
    started = {line.split()[0]: float(line.split()[1]) for line in exec_log.read_text().splitlines()}
    assert sorted(started) == sorted(keys) and len(exec_log.read_text().splitlines()) == 4
    assert started[keys[1]] >= expiry - 0.5  # it waited for the live lease to expire
    with Store(db) as store:
        assert store.count() == 4 and store.leases() == []
