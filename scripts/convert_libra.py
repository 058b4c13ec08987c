"""Convert the LIBRA cases (../shared/instances/libra/*.json) into bundled distplan instances.

Each source file holds one case of github.com/astra-sim/libra (workload, 3D or 4D network,
cost model, communicator, constraint set) in LIBRA's units (ns, bytes, GB/s, $ per GB/s)
together with the per-dimension traffic and cost coefficients the reference model
computes (`dim_traffic_bytes`, `network_cost_coeff_per_dim`). The conversion:

* compute times ns -> seconds (/1e9); bandwidths GB/s -> bytes/s (*1e9); prices
  $ per GB/s -> USD per byte/s (/1e9), switch and NIC prices kept on switch dimensions only
  (LIBRA's cost model ignores them elsewhere);
* communicator entries -1 (dimension not involved) -> 1 (a group of one NPU along that
  dimension carries no traffic in every collective formula, exactly like skipping it);
* the all-ones constraint row becomes ``total_bandwidth``, the others named linear rows;
* the reference's `model_notes`, source, units and workload notes go to ``metadata``.

Faithfulness is checked, not assumed: the converted instance's traffic per collective
(distplan's evaluator) must equal the file's `dim_traffic_bytes`, and its cost per GB/s
must equal `network_cost_coeff_per_dim`, both to 1e-12 relative; the script stops otherwise.

    python scripts/convert_libra.py [SOURCE_DIR] [--out distplan/instances/data]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from distplan.models.bandwidth_eval import collective_traffic, network_cost  # noqa: E402
from distplan.models.bandwidth_instance import BandwidthInstance  # noqa: E402
from distplan.models.bandwidth_records import GB  # noqa: E402
from distplan.models.common import write_json  # noqa: E402

BLOCK = {"ring": "ring", "fc": "fully_connected", "switch": "switch"}
PHASES = ("fwd", "ig", "wg")
WORKLOAD_LABEL = {"GPT_3": "GPT-3", "MSFT_1T": "MSFT-1T", "Turing_NLG": "Turing-NLG", "ResNet_50": "ResNet-50", "DLRM": "DLRM"}


def _expr(coeffs: list[float], names: list[str]) -> str:
    parts: list[str] = []
    for c, n in zip(coeffs, names, strict=True):
        if c == 0:
            continue
        sign = "-" if c < 0 else "+"
        mag = "" if abs(c) == 1 else f"{abs(c):g} "
        parts.append(f"{sign} {mag}{n}")
    text = " ".join(parts)
    return text[2:] if text.startswith("+ ") else text


def _constraints(src: dict[str, Any], names: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"linear": []}
    # LIBRA writes "B_1 >= B_2" as bw[0] >= bw[1]; the file stores it as [1, -1] >= 0.
    for row in src["constraint_linear"]:
        coeffs = [float(c) for c in row["coeffs"]]
        rhs = float(row["rhs"])
        if all(c == 1 for c in coeffs) and "total_bandwidth" not in out:
            out["total_bandwidth"] = {"sense": row["sense"], "value": rhs * GB}
            continue
        nonzero = [(n, c) for n, c in zip(names, coeffs, strict=True) if c != 0]
        # a two-term difference with rhs 0 reads best as "a >= b"
        if len(nonzero) == 2 and rhs == 0 and nonzero[0][1] == 1 and nonzero[1][1] == -1:
            label = f"{nonzero[0][0]} {row['sense']} {nonzero[1][0]}"
        else:
            label = f"{_expr(coeffs, names)} {row['sense']} {rhs:g} GB/s"
        out["linear"].append({"name": label, "coeffs": dict(nonzero), "sense": row["sense"], "rhs": rhs * GB})
    return out


def convert(src: dict[str, Any], name: str) -> dict[str, Any]:
    classes = src["cost_per_gbps"]
    dims = []
    for d in src["network"]:
        prices = classes[d["cost_class"]]
        item: dict[str, Any] = {
            "name": d["name"],
            "size": int(d["size"]),
            "block": BLOCK[d["block"]],
            "cost_class": d["cost_class"],
            "price_link": prices["link"] / GB,
        }
        if d["block"] == "switch":
            item["price_switch"] = prices["switch"] / GB
            item["price_nic"] = prices["nic"] / GB
        item["min_bandwidth"] = 0.0
        item["max_bandwidth"] = None
        dims.append(item)
    names = [d["name"] for d in dims]
    layers = []
    for layer in src["workload"]["layers"]:
        colls = []
        for phase in PHASES:
            c = layer["comm"].get(phase)
            if c is None:
                continue
            colls.append({"phase": phase, "type": c["type"], "bytes": c["bytes"], "npus": [1 if n < 0 else int(n) for n in c["npus"]]})
        layers.append({"name": layer["name"], "compute": {p: layer["compute_ns"][p] / 1e9 for p in PHASES}, "collectives": colls})
    w = src["workload"]
    label = WORKLOAD_LABEL.get(w["name"], w["name"])
    net = " x ".join(f"{d['block']} {d['size']}" for d in dims)
    notes = [w.get("parallelism_comment", "")]
    if w.get("note"):
        notes.append(w["note"])
    doc: dict[str, Any] = {
        "format": "distplan/1",
        "kind": "bandwidth",
        "name": name,
        "description": f"LIBRA {label} on the {len(dims)}D network [{net}] ({src['total_npus']} NPUs), constraints: {src['constraint']}",
        "network": {"dimensions": dims, "total_npus": int(src["total_npus"])},
        "workload": {"name": w["name"], "training_loop": "no_overlap", "npus": int(src["total_npus"]), "layers": layers},
        "constraints": _constraints(src, names),
        "metadata": {
            "source": src["source"],
            "reference_units": src["units"],
            "reference_constraint": src["constraint"],
            "reference_objectives": src["objectives"],
            "model_notes": src["model_notes"],
            "workload_notes": [n for n in notes if n],
            "conversion": "scripts/convert_libra.py: ns->s, GB/s->bytes/s, $/(GB/s)->USD/(byte/s), communicator -1 -> 1",
        },
    }
    return doc


def verify(src: dict[str, Any], inst: BandwidthInstance) -> None:
    """Stop unless traffic and cost of the converted instance equal the reference's."""
    for layer_src, layer in zip(src["workload"]["layers"], inst.layers, strict=True):
        by_phase = {c.phase: c for c in layer.collectives}
        for phase, c in layer_src["comm"].items():
            got = collective_traffic(by_phase[phase].type, by_phase[phase].bytes, by_phase[phase].npus)
            want = c["dim_traffic_bytes"]
            for g, r in zip(got, want, strict=True):
                if not math.isclose(g, r, rel_tol=1e-12, abs_tol=1e-6):
                    raise SystemExit(f"{inst.name}: layer {layer.name} {phase}: traffic {got} != reference {want}")
    for k, dim in enumerate(inst.dimensions):
        unit = {d.name: (GB if d.name == dim.name else 0.0) for d in inst.dimensions}
        cost = network_cost(inst, unit)[0]
        ref = src["network_cost_coeff_per_dim"][k]
        if not math.isclose(cost, ref, rel_tol=1e-12):
            raise SystemExit(f"{inst.name}: cost per GB/s of {dim.name} {cost} != reference {ref}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("source", nargs="?", default=str(Path(__file__).resolve().parents[2] / "shared" / "instances" / "libra"))
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "distplan" / "instances" / "data"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    (out / "bandwidth").mkdir(parents=True, exist_ok=True)
    index: dict[str, Any] = {}
    for path in sorted(Path(args.source).glob("*.json")):
        src = json.loads(path.read_text())
        name = f"libra-{path.stem.replace('_', '-')}"
        doc = convert(src, name)
        inst = BandwidthInstance.from_dict(doc)
        if inst.to_dict() != doc:
            raise SystemExit(f"{name}: the converted document does not round-trip")
        verify(src, inst)
        rel = f"bandwidth/{name}.json"
        write_json(doc, out / rel)
        n_coll = sum(1 for layer in inst.layers for c in layer.collectives if any(n > 1 for n in c.npus))
        index[name] = {
            "kind": "bandwidth",
            "file": rel,
            "description": doc["description"],
            "size": f"{len(inst.dimensions)} dims, {len(inst.layers)} layers, {n_coll} collectives",
        }
        print(f"{name:<34} {index[name]['size']}")
    write_json(index, out / "index-bandwidth.json")
    print(f"wrote {len(index)} instances and index-bandwidth.json to {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
