"""A convex run on the direct Clarabel path (`bandwidth.convex.direct`) does not import
cvxpy (0.3-0.4 s, spent inside the run's time limit when its backend's availability and
version were asked), and the availability answered without cvxpy loaded is cvxpy's own."""

from __future__ import annotations

import json
import subprocess
import sys


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def test_a_direct_clarabel_run_does_not_import_cvxpy() -> None:
    out = _run(
        "import sys, distplan\n"
        "r = distplan.solve('libra-resnet50-3d-total500', 'libra_perf')\n"
        "print(r.status.value, r.backend, r.backend_version.startswith('cvxpy '), 'cvxpy' in sys.modules)"
    )
    assert out == "optimal cvxpy-CLARABEL True False"


def test_availability_without_cvxpy_loaded_is_cvxpys_own() -> None:
    code = (
        "import json, sys, distplan\n"
        "names = sorted(b.name for b in distplan.backends() if b.name.startswith('cvxpy-'))\n"
        "before = {n: distplan.solvers.base.get_backend(n).available() for n in names}\n"
        "assert 'cvxpy' not in sys.modules\n"
        "import cvxpy\n"
        "distplan.solvers.base._available.cache_clear()  # (answers are cached per process)\n"
        "after = {n: distplan.solvers.base.get_backend(n).available() for n in names}\n"
        "assert {n for n, ok in after.items() if ok} == {'cvxpy-' + s for s in cvxpy.installed_solvers() if 'cvxpy-' + s in after}\n"
        "print(json.dumps([before, after]))"
    )
    before, after = json.loads(_run(code))
    assert before == after and any(before.values())
