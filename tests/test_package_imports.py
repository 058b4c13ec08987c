"""Every subpackage can be imported in the ``import a.b.c as d`` form after ``import
distplan``, and ``distplan.formulations(kind)`` still lists formulations (the package is
callable; a function of that name used to hide ``distplan.formulations``' subpackages)."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import distplan


def _modules() -> list[str]:
    return sorted(m.name for m in pkgutil.walk_packages(distplan.__path__, "distplan.") if not m.name.startswith("distplan.torch"))


def test_dotted_import_as_after_import_distplan() -> None:
    names = [n for n in _modules() if n.startswith("distplan.formulations.")]
    assert "distplan.formulations.sharding.tap" in names
    lines = ["import distplan"] + [f"import {n} as m{i}" for i, n in enumerate(names)]
    done = subprocess.run([sys.executable, "-c", "\n".join(lines)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_formulations_is_callable_and_the_package() -> None:
    import distplan.formulations.sharding.tap as tap
    from distplan.formulations.registry import formulations

    assert distplan.formulations.sharding.tap is tap
    assert [f.name for f in distplan.formulations("placement")] == [f.name for f in formulations("placement")]
    assert {f.kind for f in distplan.formulations()} == {"placement", "sharding", "compression", "pipeline", "bandwidth"}


def test_formulations_pickles_and_copies_as_itself() -> None:
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(distplan.formulations)) is distplan.formulations
    assert copy.deepcopy(distplan.formulations) is distplan.formulations
    assert copy.copy(distplan.formulations) is distplan.formulations
