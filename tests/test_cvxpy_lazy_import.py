"""A convex run on the direct Clarabel path (`bandwidth.convex.direct`) does not import
cvxpy (0.3-0.4 s, spent inside the run's time limit when its backend's availability and
version were asked), and the availability answered without cvxpy loaded is cvxpy's own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


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
    """Clarabel's answer needs no cvxpy (the direct path's backend); every other cvxpy
    backend's is cvxpy's own."""
    code = (
        "import json, sys, distplan\n"
        "names = sorted(b.name for b in distplan.backends() if b.name.startswith('cvxpy-'))\n"
        "clarabel = distplan.solvers.base.get_backend('cvxpy-CLARABEL').available()\n"
        "assert 'cvxpy' not in sys.modules\n"
        "before = {n: distplan.solvers.base.get_backend(n).available() for n in names}\n"
        "import cvxpy\n"
        "distplan.solvers.base._available.cache_clear()  # (answers are cached per process)\n"
        "after = {n: distplan.solvers.base.get_backend(n).available() for n in names}\n"
        "assert {n for n, ok in after.items() if ok} == {'cvxpy-' + s for s in cvxpy.installed_solvers() if 'cvxpy-' + s in after}\n"
        "print(json.dumps([clarabel, before, after]))"
    )
    clarabel, before, after = json.loads(_run(code))
    assert before == after and any(before.values()) and clarabel == after["cvxpy-CLARABEL"]


def test_a_solver_package_that_fails_to_import_is_not_available(tmp_path: Path) -> None:
    """Review rev15c: a cvxpy solver whose package is installed but fails to import (here
    a stand-in ``ecos`` that raises ImportError) was listed as available, since only its
    package was looked for; cvxpy does not load it. It is now listed as not installed, and
    a solve that asks for it stops with the named error before solving (exit 2)."""
    (tmp_path / "ecos").mkdir()
    (tmp_path / "ecos" / "__init__.py").write_text("raise ImportError('broken ecos build: libecos.so missing')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    listed = subprocess.run([sys.executable, "-m", "distplan", "list", "backends"], capture_output=True, text=True, env=env, check=True)
    line = next(x for x in listed.stdout.splitlines() if x.split()[:1] == ["cvxpy-ECOS"])
    assert "not installed" in line
    solved = subprocess.run(
        [sys.executable, "-m", "distplan", "solve", "libra-resnet50-3d-total500", "--formulation", "libra_perf", "--backend", "cvxpy-ECOS", "--json"],
        capture_output=True, text=True, env=env,
    )
    assert solved.returncode == 2 and "backend 'cvxpy-ECOS' is not available here" in solved.stderr
    assert json.loads(solved.stdout)["error"]["exit_code"] == 2
