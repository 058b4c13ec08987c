"""pipeline_milp's stated conversion of a solver's dual bound (`milp.dual_bound_value`,
which `distplan verify` applies): rounded up to an integer only on exactly integral data.
Without the model it took the larger of the bound and its ceiling, so on fractional data
a bound raised to the next integer verified (review rev17 F20: 58.2 -> 59 passed)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import distplan
from distplan.formulations.pipeline.milp import dual_bound_value
from distplan.instances.pipelines import make_pipeline
from distplan.models.common import json_default
from distplan.verify import check_result

FRACTIONAL = Path(__file__).parent / "data" / "pipeline_rev17_fractional.json"


def test_the_conversion_rounds_up_on_integral_data_only() -> None:
    fractional = distplan.load_instance(FRACTIONAL)
    integral = make_pipeline("v", 4, 4, memory_capacity=4.0)
    assert dual_bound_value(58.2, fractional) == 58.2
    assert dual_bound_value(35.2, integral) == 36.0
    assert dual_bound_value(35.0000001, integral) == 35.0  # (within the solver's 1e-6)


def test_verify_refuses_a_fractional_bound_raised_to_the_next_integer() -> None:
    inst = distplan.load_instance(FRACTIONAL)
    # a node limit of 1 and a short limit leave the gap open: the root's dual bound
    r = distplan.solve(inst, "pipeline_milp", time_limit=3, warm_start="baselines", solver_options={"mip_max_nodes": 1})
    doc = json.loads(json.dumps(r.to_dict(), default=json_default))
    assert check_result(doc, inst) == []
    k, linked = next((k, b) for k, b in enumerate(doc["bounds"]) if b.get("solver_call") is not None)
    raised = float(math.ceil(linked["value"]))
    assert raised < doc["objective"]
    linked["value"] = doc["bound"] = raised
    doc["gap"] = (doc["objective"] - raised) / doc["objective"]
    assert (f"bounds[{k}].value", True) in [(field, "stated conversion" in message) for field, message in check_result(doc, inst)]
