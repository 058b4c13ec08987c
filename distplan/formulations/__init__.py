"""The formulations of the five planning problems, their registry and shared blocks.

The package is callable: ``distplan.formulations(kind)`` lists the registered formulations
(of one kind, or all), as `distplan.formulations.registry.formulations` does. It is the
package object itself, not a function of the same name bound over it, so that
``import distplan.formulations.sharding.tap as tap`` works after ``import distplan`` (a
function bound to the attribute ``distplan.formulations`` hid the subpackages from the
``import a.b.c as d`` form). A callable module is the documented way to customize a module
(Python Language Reference, 3.3.2.1, "Customizing module attribute access").
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any


class _CallablePackage(types.ModuleType):
    """This package, callable as `distplan.formulations.registry.formulations`."""

    def __call__(self, kind: str | None = None) -> list[Any]:
        from distplan.formulations.registry import formulations

        return formulations(kind)

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        # pickled and copied by name, as the function it replaces was (review rev15: a
        # module object is neither picklable nor copyable)
        return importlib.import_module, (self.__name__,)


sys.modules[__name__].__class__ = _CallablePackage
