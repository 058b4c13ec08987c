"""Regenerate the bundled placement zoo: distplan/instances/data/placement/<name>.json.gz and
distplan/instances/data/index-placement-zoo.json.

Usage: python scripts/build_zoo.py [--check]   (--check: rebuild in memory and report
whether the bundled files differ, ignoring the build date)

Each instance is `distplan.instances.zoo.make_placement(model, cluster, memory_limit)`;
memory-constrained cases cap every device so that the whole training graph does not fit on
one device but fits the cluster with ~30% slack (limit = max(largest colocation group,
1.3 x total / devices), rounded up to 1/4 GiB).
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distplan.instances.zoo import make_placement  # noqa: E402
from distplan.models.catalogue import GiB, cluster  # noqa: E402
from distplan.models.common import read_json  # noqa: E402

DATA = ROOT / "distplan" / "instances" / "data"
INDEX = DATA / "index-placement-zoo.json"

#: (bundled name, model, cluster, memory limit: None | "tight", extra make_placement options)
CASES: list[tuple[str, str, str, str | None, dict[str, Any]]] = [
    ("gpt2-small-dgx1-4", "gpt2-small", "dgx1:4", None, {}),
    ("gpt2-small-dgx1-4-tight", "gpt2-small", "dgx1:4", "tight", {}),
    ("gpt2-small-infer-pcie-t4x4", "gpt2-small", "pcie-t4x4", None, {"backward": False}),
    ("gpt2-medium-dgx1", "gpt2-medium", "dgx1", None, {}),
    ("gpt2-medium-dgx1-4-tight", "gpt2-medium", "dgx1:4", "tight", {}),
    ("gpt2-large-dgx1", "gpt2-large", "dgx1", None, {}),
    ("gpt2-xl-dgx1", "gpt2-xl", "dgx1", None, {}),
    ("gpt2-xl-dgx-a100", "gpt2-xl", "dgx-a100", None, {}),
    ("gpt2-xl-infer-pcie-t4x4-tight", "gpt2-xl", "pcie-t4x4", "tight", {"backward": False}),
    ("bert-base-pcie-v100x4", "bert-base", "pcie-v100x4", None, {}),
    ("bert-base-pcie-v100x4-tight", "bert-base", "pcie-v100x4", "tight", {}),
    ("bert-large-dgx1-4-tight", "bert-large", "dgx1:4", "tight", {}),
    ("bert-large-tag-mix", "bert-large", "tag-mix", None, {}),
    ("resnet-50-dgx1-4", "resnet-50", "dgx1:4", None, {}),
    ("resnet-50-tag-mix", "resnet-50", "tag-mix", None, {}),
    ("inception-v3-dgx1-4", "inception-v3", "dgx1:4", None, {}),
    ("inception-v3-dgx1-2-tight", "inception-v3", "dgx1:2", "tight", {"batch": 64}),
    ("inception-v3-tag-mix-slow", "inception-v3", "tag-mix-slow", None, {}),
]


def tight_limit(doc: dict[str, Any]) -> float:
    """Bytes per device: the largest colocation group or 1.3 x an even share, up to 1/4 GiB."""
    ops = doc["graph"]["ops"]
    total = sum(op["memory"] for op in ops)
    groups: dict[str, float] = {}
    for op in ops:
        key = op.get("colocate") or op["name"]
        groups[key] = groups.get(key, 0.0) + op["memory"]
    n = len(doc["cluster"]["devices"])
    raw = max(max(groups.values()), 1.3 * total / n)
    return math.ceil(raw / (GiB / 4)) * (GiB / 4)


def build() -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    docs: dict[str, dict[str, Any]] = {}
    index: dict[str, dict[str, Any]] = {}
    for name, model, cl, limit, opts in CASES:
        doc = make_placement(model, cl, None, name=name, **opts)
        total = sum(op["memory"] for op in doc["graph"]["ops"])
        if limit == "tight":
            cap = tight_limit(doc)
            doc = make_placement(model, cl, cap, name=name, **opts)
        spec = cluster(cl)
        devices = doc["cluster"]["devices"]
        largest = max(d["memory"] for d in devices)
        fits_one = total <= largest
        kind = "training" if opts.get("backward", True) else "inference"
        mem_note = f"{total / 1e9:.1f} GB held, {largest / GiB:.2f} GiB per device" + ("" if fits_one else ", does not fit one device")
        docs[name] = doc
        index[name] = {
            "kind": "placement",
            "file": f"placement/{name}.json.gz",
            "description": f"{model} {kind} on {spec.description.split(':')[0]}; {mem_note}",
            "size": f"{len(doc['graph']['ops'])} ops, {len(doc['graph']['edges'])} edges, {len(devices)} devices",
        }
    return docs, index


def write_gzip_json(doc: dict[str, Any], path: Path) -> None:
    """Compact JSON, gzip with a zero timestamp so rebuilding the same content gives the same bytes."""
    raw = (json.dumps(doc, separators=(",", ":")) + "\n").encode()
    with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0, compresslevel=9) as gz:
        gz.write(raw)


def _strip_date(doc: dict[str, Any]) -> dict[str, Any]:
    out = json.loads(json.dumps(doc))
    out.get("meta", {}).pop("date", None)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the bundled files instead of writing")
    args = ap.parse_args()
    docs, index = build()
    if args.check:
        stale = [n for n, d in docs.items() if not (DATA / index[n]["file"]).is_file() or _strip_date(read_json(DATA / index[n]["file"])) != _strip_date(d)]
        print("up to date" if not stale else f"stale: {', '.join(stale)}")
        return 1 if stale else 0
    (DATA / "placement").mkdir(parents=True, exist_ok=True)
    for name, doc in docs.items():
        path = DATA / index[name]["file"]
        write_gzip_json(doc, path)
        print(f"{name:<34} {index[name]['size']:<36} {path.stat().st_size / 1024:7.1f} KiB  {index[name]['description']}")
    INDEX.write_text(json.dumps(index, indent=1) + "\n")
    print(f"wrote {INDEX.relative_to(ROOT)} ({len(index)} instances)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
