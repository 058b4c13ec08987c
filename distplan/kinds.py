"""The kind table: every planning problem distplan knows, and where each layer finds it.

A new kind is one entry here plus its own files: the models module (instance and plan
parsing, the independent evaluator: it calls `distplan.models.common.register_kind`), the
formulation package (it registers its formulations, folder and solver-free bounds), the
JSON Schema in ``distplan/schema/`` and, optionally, a plotter. Each layer reads only its
own column, by module name, so this table imports nothing and every layer may read it.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Kind:
    """One planning problem and the modules that serve it (importable module names)."""

    name: str
    #: instances, plans and the independent evaluator (the data layer)
    models: str
    #: the formulations of this kind (the math layer)
    formulations: str
    #: file name of its JSON Schema in ``distplan/schema/``
    schema: str
    #: ``"module:function"`` drawing ``(instance, plan, path)``, or None: no chart
    plotter: str | None = None


KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind("placement", "distplan.models.placement", "distplan.formulations.placement", "placement.json", "distplan.models.placement_plot:gantt"),
        Kind("sharding", "distplan.models.sharding", "distplan.formulations.sharding", "sharding.json"),
        Kind("compression", "distplan.models.compression", "distplan.formulations.compression", "compression.json"),
        Kind("pipeline", "distplan.models.pipeline", "distplan.formulations.pipeline", "pipeline.json", "distplan.models.pipeline_plot:gantt"),
        Kind("bandwidth", "distplan.models.bandwidth", "distplan.formulations.bandwidth", "bandwidth.json"),
    )
}
