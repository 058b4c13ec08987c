"""The embedded JSON Schema validator (distplan/models/schema.py) against the `jsonschema`
package, on the largest bundled document of each kind: same verdicts, time per document.

    python benchmarks/bench_schema.py

Issue 18 asks for well-kept libraries unless a custom routine is measured faster at the
sizes we run; this is that measurement (median of 5, both in this process).
"""

from __future__ import annotations

import statistics
import time

import jsonschema

from distplan.instances import load_document
from distplan.models.schema import schema_errors, schema_for

DOCUMENTS = ["gnmt-v2-4gpu", "compression-bert-large", "gpt3-175b-64gpu-nomem", "pipeline-vshape-p8", "libra-msft1t-4d-multi"]


def _median(fn: object, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    print(f"{'document':<26} {'embedded ms':>11} {'jsonschema ms':>13} {'jsonschema / embedded':>22}  same verdict")
    for name in DOCUMENTS:
        doc = load_document(name)
        schema = schema_for(doc["kind"])
        validator = jsonschema.Draft202012Validator(schema)
        embedded = _median(lambda d=doc, s=schema: schema_errors(d, s))
        package = _median(lambda d=doc, v=validator: list(v.iter_errors(d)))
        same = (not schema_errors(doc, schema)) == validator.is_valid(doc)
        print(f"{name:<26} {embedded * 1e3:>11.1f} {package * 1e3:>13.1f} {package / embedded:>22.2f}  {same}")


if __name__ == "__main__":
    main()
