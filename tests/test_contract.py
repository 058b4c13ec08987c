"""The one block contract (`distplan.formulations.contract`): prepare -> frozen index, blocks
that take earlier blocks' variables by name, decode, and a declared policy."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distplan.formulations.contract import ContractError, ModelSpec, Policy
from distplan.formulations.registry import formulations
from distplan.instances import bundled, load_instance
from distplan.modeling.model import Model, ModelError
from distplan.solvers.base import get_backend
from distplan.solvers.options import SolveOptions

FORMULATIONS = Path(__file__).resolve().parents[1] / "distplan" / "formulations"
#: a model built outside the contract
BUILDS_A_MODEL = re.compile(r"\bModel\(")


@dataclass(frozen=True)
class _Index:
    n: int
    cost: np.ndarray


def _prepare(inst: Any, params: Mapping[str, Any]) -> _Index:
    return _Index(int(params.get("n", 3)), np.arange(1.0, 1.0 + int(params.get("n", 3))))


def _vars(model: Model, inst: Any, index: _Index) -> None:
    model.add_vars("x", index.n, ub=1.0, vtype="binary")


def _rows(model: Model, inst: Any, index: _Index) -> None:
    x = model["x"]
    model.define("weight", (x * index.cost).sum())
    model.add_constraints("at-least-two", x.sum() >= 2.0)


def _objective(model: Model, inst: Any, index: _Index) -> None:
    model.minimize(model.expression("weight"))


def _decode(inst: Any, result: Any, index: _Index) -> list[int]:
    return [int(v) for v in np.flatnonzero(result.values_by_block["x"] > 0.5)]


SPEC = ModelSpec("two-cheapest", _prepare, (_vars, _rows, _objective), _decode)


def test_a_declared_program_builds_solves_and_decodes() -> None:
    model, index = SPEC.build(None, {"n": 4})
    res = get_backend("highs").solve(model.to_arrays())
    res.values_by_block = model.values_by_block(res.values)
    assert res.objective == pytest.approx(3.0)
    assert SPEC.decode_result(None, res, index) == ([0, 1], None)


def test_blocks_in_the_wrong_order_name_what_is_missing() -> None:
    wrong = ModelSpec("wrong", _prepare, (_rows, _vars), _decode)
    with pytest.raises(ModelError, match="no variable block 'x'"):
        wrong.build(None)
    later = ModelSpec("later", _prepare, (_vars, _objective, _rows), _decode)
    with pytest.raises(ModelError, match="no expression 'weight'"):
        later.build(None)


def test_variants_leave_out_or_add_blocks() -> None:
    def at_least_three(model: Model, inst: Any, index: _Index) -> None:
        model.add_constraints("at-least-three", model["x"].sum() >= 3.0)

    model, _ = SPEC.with_blocks(at_least_three, name="three").build(None, {"n": 4})
    assert model.name == "three" and "at-least-three" in model.con_blocks and "at-least-two" in model.con_blocks
    free, _ = SPEC.without(_rows, _objective).with_blocks(lambda m, i, x: m.minimize(m["x"].sum())).build(None)
    assert "at-least-two" not in free.con_blocks
    with pytest.raises(ContractError, match="no block"):
        SPEC.without(at_least_three)


def test_prepare_must_return_a_frozen_dataclass() -> None:
    @dataclass
    class Mutable:
        n: int

    loose = ModelSpec("loose", lambda inst, params: Mutable(3), (_vars,))
    with pytest.raises(ContractError, match="frozen dataclass"):
        loose.build(None)
    with pytest.raises(ContractError, match="frozen dataclass"):
        ModelSpec("dict", lambda inst, params: {"n": 3}, (_vars,)).build(None)


def test_params_are_read_only_in_prepare() -> None:
    def writes(inst: Any, params: Mapping[str, Any]) -> _Index:
        params["n"] = 5  # type: ignore[index]
        return _Index(5, np.ones(5))

    with pytest.raises(TypeError):
        ModelSpec("writes", writes, (_vars,)).build(None, {"n": 3})


def test_policy_fills_only_what_the_caller_left_open() -> None:
    policy = Policy(default_time_limit=60.0, lp_method=lambda inst, params: "barrier" if inst > params.get("above", 10) else "auto")
    assert policy.options_for(SolveOptions(), 20) == SolveOptions(time_limit=60.0, lp_method="barrier")
    assert policy.options_for(SolveOptions(), 20, {"above": 30}) == SolveOptions(time_limit=60.0)
    assert policy.options_for(SolveOptions(), 5) == SolveOptions(time_limit=60.0)
    given = SolveOptions(time_limit=5.0, lp_method="simplex")
    assert policy.options_for(given, 20) is given
    by_param = Policy(default_time_limit=lambda inst, params: params.get("limit"))
    assert by_param.options_for(SolveOptions(), None, {"limit": 7}) == SolveOptions(time_limit=7.0)
    assert by_param.options_for(SolveOptions(), None, {}) == SolveOptions()


def _smallest_instance(kind: str) -> Any:
    """The bundled instance of ``kind`` with the smallest file."""
    from distplan.instances import bundled_path

    names = [n for n, meta in bundled().items() if meta["kind"] == kind]
    return load_instance(min(names, key=lambda n: (bundled_path(n).stat().st_size, n)))


@pytest.mark.parametrize("form", [f for f in formulations() if f.spec is not None], ids=lambda f: f"{f.kind}-{f.name}")
def test_every_declared_formulation_builds_its_model(form: Any) -> None:
    """`distplan export` builds the model of each declared formulation from its spec."""
    inst = _smallest_instance(form.kind)
    model, index = form.build(inst, dict(form.params))
    assert model.num_vars > 0
    assert type(index).__dataclass_params__.frozen


def test_programs_are_built_only_through_a_model_spec() -> None:
    """No formulation module constructs a `Model` itself: every program goes through
    `ModelSpec.build` (contract.py is the one place that does)."""
    offenders = []
    for path in sorted(FORMULATIONS.rglob("*.py")):
        rel = path.relative_to(FORMULATIONS).as_posix()
        if rel != "contract.py" and BUILDS_A_MODEL.search(path.read_text()):
            offenders.append(rel)
    assert offenders == []


def test_build_stops_between_blocks_past_the_index_deadline() -> None:
    """`ModelSpec.build_from` checks an index's ``deadline`` before each block: a block
    that ran past it is the last one built (`DeadlineReached` names the model)."""
    import time

    from distplan.formulations.deadline import DeadlineReached

    @dataclass
    class Timed:
        deadline: float | None
        ran: list[str]

    def first(model: Any, instance: Any, index: Timed) -> None:
        index.ran.append("first")
        if index.deadline is not None:
            time.sleep(max(0.0, index.deadline - time.perf_counter()) + 0.01)  # a block that runs past it

    def second(model: Any, instance: Any, index: Timed) -> None:
        index.ran.append("second")

    spec = ModelSpec("timed", lambda inst, params: Timed(None, []), (first, second))
    index = Timed(time.perf_counter() + 0.05, [])
    with pytest.raises(DeadlineReached, match="the timed model's build"):
        spec.build_from(None, index)
    assert index.ran == ["first"]
    free = Timed(None, [])
    spec.build_from(None, free)
    assert free.ran == ["first", "second"]
