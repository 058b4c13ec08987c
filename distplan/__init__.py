"""distplan: planning distributed deep-learning execution with mathematical optimization.

    import distplan
    result = distplan.solve("gnmt-v2-4gpu", formulation="baechi_sct")
    print(result.objective, result.bound, result.gap)
"""

from __future__ import annotations

import time as _time

#: when distplan began to load (``time.perf_counter()``): the command line counts its time
#: limit from here, so importing and reading the instance are inside the limit too
LOADED_AT = _time.perf_counter()

import distplan.formulations as formulations  # noqa: E402  (the package is callable: formulations(kind))
from distplan.api import Result, solve  # noqa: E402
from distplan.emit import emit  # noqa: E402
from distplan.errors import DistplanError, InfeasibleError, InputError, NoSolutionError, PlanCheckError  # noqa: E402
from distplan.instances import bundled, load_instance  # noqa: E402
from distplan.solvers.base import all_backends as backends  # noqa: E402

__version__ = "0.1.0"

__all__ = [
    "DistplanError",
    "InfeasibleError",
    "InputError",
    "NoSolutionError",
    "PlanCheckError",
    "Result",
    "backends",
    "bundled",
    "emit",
    "formulations",
    "load_instance",
    "solve",
    "__version__",
]
