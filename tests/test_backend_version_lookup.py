"""A solve whose time limit has passed before its solver call records the backend's
version without importing the modelling library: `import pyomo` (which pulls in
scipy.stats) had taken 2-5 s on a loaded machine after the deadline, so tag_sfb with
pyomo-cbc and a 0.05 s limit returned after 3-7 s (review rev13 D7). Versions of the Python
packages come from their installed metadata (`importlib.metadata`)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import backend_params

#: the modelling library each backend imports to build its model (PuLP is imported anyway:
#: the CBC binary it bundles is found through it, `pulp_backend.cbc_path`, for pyomo-cbc too)
LIBRARY = {"pyomo-cbc": "pyomo", "pyomo-highs": "pyomo", "pyomo-glpk": "pyomo", "pulp-cbc": "pulp", "pulp-highs": "pulp"}

SCRIPT = """
import json, sys
import distplan
inst = distplan.load_instance("compression-vgg16")
res = distplan.solve(inst, "tag_sfb", backend=sys.argv[1], time_limit=1e-9)
print(json.dumps({"loaded": sys.argv[2] in sys.modules, "version": res.backend_version, "raw": [r.raw_status for r in res.solver_results]}))
"""


@pytest.mark.parametrize("backend", backend_params(lambda b: b.name in LIBRARY))
def test_a_solver_call_past_the_deadline_does_not_import_the_library(backend: str) -> None:
    out = subprocess.run([sys.executable, "-c", SCRIPT, backend, LIBRARY[backend]], capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(out.stdout)
    assert got["raw"] and set(got["raw"]) == {"not started"}
    if LIBRARY[backend] == "pyomo":
        assert not got["loaded"], "pyomo was imported by a call that never started a solver"
    assert LIBRARY[backend].lower() in got["version"].lower() and "unknown" not in got["version"]
