"""Build the bundled small placement instances and prove their optima with placement_milp.

Each instance is a random DAG of 8-12 ops on 2-3 devices (seeded), some memory-
constrained (all ops fit only when split across devices), one heterogeneous (two device
types, per-type times and a faster link). The optimum proven by `placement_milp` on HiGHS
is stored in ``meta.optimum`` (seconds) and re-proven by the tests on every backend.

    python scripts/build_placement_small.py
"""

from __future__ import annotations

import datetime
import json
from pathlib import Path

import numpy as np

import distplan
from distplan.models.common import instance_from_dict

OUT = Path(__file__).resolve().parents[1] / "distplan" / "instances" / "data"


def random_document(seed: int, n_ops: int, n_dev: int, tight_memory: bool, hetero: bool) -> dict:
    rng = np.random.default_rng(seed)
    ops = []
    mem = rng.integers(1, 10, size=n_ops) * 1_000_000
    for k in range(n_ops):
        t = float(np.round(rng.uniform(1, 10), 1)) * 1e-3
        op: dict = {"name": f"op{k}", "memory": float(mem[k])}
        op["time"] = {"fast": t, "slow": round(t * 1.7, 6)} if hetero else t
        ops.append(op)
    edges = []
    for j in range(1, n_ops):
        preds = rng.choice(j, size=min(j, int(rng.integers(1, 3))), replace=False)
        for i in sorted(preds.tolist()):
            edges.append({"src": f"op{i}", "dst": f"op{j}", "bytes": float(rng.integers(1, 40)) * 1e6})
    total = float(mem.sum())
    cap = float(np.ceil((total / n_dev) * 1.25 / 1e6) * 1e6) if tight_memory else 1e12
    cap = max(cap, float(mem.max()))
    types = ["fast", "slow", "slow"] if hetero else ["gpu"] * n_dev
    devices = [{"name": f"d{k}", "memory": cap, "type": types[k]} for k in range(n_dev)]
    cluster: dict = {"devices": devices, "bandwidth": 1e10, "latency": 1e-4}
    if hetero:
        cluster["links"] = [{"src": "d0", "dst": "d1", "bandwidth": 4e10, "latency": 2e-5}]
    return {"format": "distplan/1", "kind": "placement", "name": f"placement-small-{seed}", "graph": {"ops": ops, "edges": edges}, "cluster": cluster}


SPECS = [
    # seed, ops, devices, tight memory, heterogeneous
    (1, 8, 2, False, False),
    (2, 10, 2, True, False),
    (3, 10, 3, False, False),
    (4, 12, 3, True, False),
    (5, 9, 3, False, True),
    (6, 11, 2, True, False),
]


def main() -> None:
    index = {}
    for seed, n, m, tight, hetero in SPECS:
        doc = random_document(seed, n, m, tight, hetero)
        inst = instance_from_dict(doc)
        res = distplan.solve(inst, "placement_milp", time_limit=120)
        assert res.status.value == "optimal", (doc["name"], res.status, res.gap)
        doc["meta"] = {
            "optimum": res.objective,
            "proven_by": f"placement_milp on {res.backend} {res.backend_version}",
            "generator": "scripts/build_placement_small.py",
            "generator_version": 1,
            "parameters": {"seed": seed, "ops": n, "devices": m, "tight_memory": tight, "heterogeneous": hetero},
            "date": datetime.date.today().isoformat(),
        }
        path = OUT / "placement" / f"{doc['name']}.json"
        path.write_text(json.dumps(doc, indent=1) + "\n")
        desc = f"random DAG, {n} ops, {m} devices" + (", memory-constrained" if tight else "") + (", heterogeneous" if hetero else "")
        index[doc["name"]] = {"kind": "placement", "file": f"placement/{doc['name']}.json", "description": desc + f"; optimum {res.objective * 1e3:.4f} ms", "size": f"{n} ops, {len(doc['graph']['edges'])} edges"}
        print(doc["name"], res.objective, res.timings["solve_seconds"])
    (OUT / "index-placement-small.json").write_text(json.dumps(index, indent=1) + "\n")


if __name__ == "__main__":
    main()
