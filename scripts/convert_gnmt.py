"""Convert the shared GNMT-v2 Baechi profile into bundled distplan placement instances.

Source: ../shared/instances/gnmt_v2_forward_baechi.json (times in µs, memory in bytes;
from Baechi's artifact chiragcshetty/baechi_tf tmp/cost.pkl). Output (seconds, bytes):
distplan/instances/data/placement/gnmt-v2-4gpu*.json.gz and their index entries.

Baechi's communication cost per tensor is round(alpha * bytes + beta) µs with
alpha = 1.754e-4 µs/byte and beta = 134 µs, i.e. bandwidth 1 / 1.754e-10 s/byte
(about 5.7 GB/s) and latency 134 µs; control edges are costed as 4 bytes. Memory follows
Baechi's liveness model: persistent bytes (variables) stay, temporary bytes live while the
op runs, outputs until the last consumer ran.

    python scripts/convert_gnmt.py [path/to/gnmt_v2_forward_baechi.json]
"""

from __future__ import annotations

import datetime
import gzip
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "distplan" / "instances" / "data"
ALPHA_US_PER_BYTE = 1.754e-4
BETA_US = 134.0


def convert(src: Path, devices: int, memory: float, communication: str, name: str) -> dict:
    raw = json.loads(src.read_text())
    ops = []
    for op in raw["ops"]:
        entry = {
            "name": op["name"],
            "time": op["time_us"] * 1e-6,
            "memory": float(op["persistent_bytes"]),
            "temporary": float(op["temporary_bytes"]),
            "output": float(sum(op["output_bytes"])),
        }
        if op.get("colocation"):
            entry["colocate"] = op["colocation"]
        ops.append(entry)
    edges = [{"src": e["src"], "dst": e["dst"], "bytes": float(4 if e.get("control") else e["bytes"])} for e in raw["edges"]]
    return {
        "format": "distplan/1",
        "kind": "placement",
        "name": name,
        "graph": {"ops": ops, "edges": edges},
        "cluster": {
            "devices": [{"name": f"gpu{k}", "memory": memory, "type": "GPU"} for k in range(devices)],
            "bandwidth": 1.0 / (ALPHA_US_PER_BYTE * 1e-6),
            "latency": BETA_US * 1e-6,
        },
        "model": {"memory": "liveness", "communication": communication},
        "meta": {
            "source": raw["source"],
            "parameters": {"devices": devices, "device_memory_bytes": memory, "alpha_us_per_byte": ALPHA_US_PER_BYTE, "beta_us": BETA_US},
            "generator": "scripts/convert_gnmt.py",
            "generator_version": 1,
            "date": datetime.date.today().isoformat(),
        },
    }


def main() -> None:
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT.parent / "shared" / "instances" / "gnmt_v2_forward_baechi.json"
    index = {}
    for name, comm, desc in [
        ("gnmt-v2-4gpu", "independent", "GNMT-v2 forward (Baechi profile), 2,169 ops, 4 GPUs x 16 GB, alpha-beta links"),
        ("gnmt-v2-4gpu-channels", "channels", "GNMT-v2 forward, 4 GPUs x 16 GB, Baechi's serialized per-device channels"),
    ]:
        doc = convert(src, 4, 16e9, comm, name)
        path = OUT / "placement" / f"{name}.json.gz"
        with gzip.open(path, "wt") as fh:
            json.dump(doc, fh, separators=(",", ":"))
        index[name] = {"kind": "placement", "file": f"placement/{name}.json.gz", "description": desc, "size": f"{len(doc['graph']['ops'])} ops, {len(doc['graph']['edges'])} edges"}
    (OUT / "index-placement-gnmt.json").write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {', '.join(index)}")


if __name__ == "__main__":
    main()
