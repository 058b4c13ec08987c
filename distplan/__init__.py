"""distplan: planning distributed deep-learning execution with mathematical optimization.

    import distplan
    result = distplan.solve("gnmt-v2-4gpu", formulation="baechi_sct")
    print(result.objective, result.bound, result.gap)
"""

from __future__ import annotations

from distplan.api import Result, solve
from distplan.emit import emit
from distplan.errors import DistplanError, InfeasibleError, InputError, NoSolutionError, PlanCheckError
from distplan.formulations.registry import formulations
from distplan.instances import bundled, load_instance
from distplan.solvers.base import all_backends as backends

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
