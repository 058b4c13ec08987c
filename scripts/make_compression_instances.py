"""Generate the bundled compression instances (BERT-large, GPT-2 medium, VGG-16, a small MLP)
on the TAG-like cluster, measure the codecs on this host, and write them with their index.

    python scripts/make_compression_instances.py [--elements N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from distplan.instances import compression_models as cm  # noqa: E402
from distplan.instances.codec_measure import measure_instance  # noqa: E402
from distplan.models.common import instance_from_dict, write_json  # noqa: E402

DATA = ROOT / "distplan" / "instances" / "data"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--elements", type=int, default=1 << 20)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    builds = {
        "compression-bert-large": (cm.bert_large(), "BERT-large pre-training, batch 2x128 per replica, 6 GPUs (2 V100 + 2 P100 + 2 1080Ti)"),
        "compression-gpt2-medium": (cm.gpt2_medium(), "GPT-2 medium, batch 1x256 per replica, 6 GPUs (2 V100 + 2 P100 + 2 1080Ti)"),
        "compression-vgg16": (cm.vgg16(), "VGG-16, batch 16 per replica, 6 GPUs (2 V100 + 2 P100 + 2 1080Ti)"),
        "compression-mlp-small": (cm.mlp([784, 2048, 2048, 10], 32, name="mlp-784x2048x2048x10-b32"), "3-layer MLP, batch 32 per replica, 6 GPUs"),
    }
    index = {}
    (DATA / "compression").mkdir(parents=True, exist_ok=True)
    for name, (doc, description) in builds.items():
        doc = measure_instance(doc, elements=args.elements, repeat=args.repeat)
        doc["name"] = name
        inst = instance_from_dict(doc)
        rel = f"compression/{name}.json.gz"
        write_json(inst.to_dict(), DATA / rel)
        index[name] = {
            "kind": "compression",
            "file": rel,
            "description": description,
            "size": f"{inst.n_ops} ops, {inst.n_gradients} gradients",
        }
        print(f"wrote {rel}: {inst.n_ops} ops, {inst.n_edges} edges, {inst.n_gradients} gradients, {len(inst.codecs)} codecs")
    (DATA / "index-compression.json").write_text(json.dumps(index, indent=1) + "\n")
    print("wrote index-compression.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
