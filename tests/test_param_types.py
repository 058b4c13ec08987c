"""Every formulation's parameters are checked by name against their defaults' types
before anything runs (`Formulation.check_params`): a flag given "no" used to count as true
(``bool("no")``), and ``dp_max_rows="abc"`` reached ``float()`` inside tap and came back as
an internal error."""

from __future__ import annotations

from typing import Any

import pytest

import distplan
from distplan.errors import InputError
from distplan.instances import bundled
from distplan.kinds import KINDS

#: a value of another type for each kind of default, and one of the same type
WRONG: dict[type, list[Any]] = {bool: ["no", 1, None], int: [2.5, True, "3"], float: ["x", True, float("nan")], str: [3, True]}
RIGHT: dict[type, list[Any]] = {bool: [True, False], int: [7, 1e6], float: [0.5, 2], str: ["text"]}


def _typed_params() -> list[Any]:
    out = []
    for kind in KINDS:
        for f in distplan.formulations(kind):
            for name, default in f.params.items():
                typed = f.examples.get(name) if default is None else default
                if type(typed) in WRONG:
                    out.append(pytest.param(kind, f.name, name, type(typed), id=f"{f.name}.{name}"))
    return out


def _sequence_params() -> list[Any]:
    return [
        pytest.param(kind, f.name, name, default, id=f"{f.name}.{name}")
        for kind in KINDS
        for f in distplan.formulations(kind)
        for name, default in f.params.items()
        if isinstance(default, tuple | list)
    ]


TYPED = _typed_params()


def test_every_kind_has_typed_parameters() -> None:
    assert {p.values[0] for p in TYPED} == set(KINDS) and len(TYPED) >= 40


@pytest.mark.parametrize(("kind", "formulation", "name", "typ"), TYPED)
def test_a_parameter_of_another_type_is_an_input_error_naming_it(kind: str, formulation: str, name: str, typ: type) -> None:
    instance = next(n for n, e in sorted(bundled().items()) if e["kind"] == kind)
    for value in WRONG[typ]:
        with pytest.raises(InputError, match=rf"^params\.{name}: expected "):
            distplan.solve(instance, formulation, **{name: value})


@pytest.mark.parametrize(("kind", "formulation", "name", "typ"), TYPED)
def test_a_parameter_of_its_type_passes_the_check(kind: str, formulation: str, name: str, typ: type) -> None:
    form = next(f for f in distplan.formulations(kind) if f.name == formulation)
    # the values of its type within its declared range (`least`, `most`, `above`), and its default
    values = form.choices.get(name) or [v for v in RIGHT[typ] if form._range_error(name, typ(), v) is None] + [form.params[name]]
    for value in values:
        if value is not None:
            form.check_params({name: value})


def test_an_unknown_parameter_is_named_with_the_known_ones() -> None:
    with pytest.raises(InputError, match=r"params\.nope: formulation 'tap' has no parameter 'nope' \(its parameters: certify, default_time_limit, dp, "):
        distplan.solve("gpt-1layer-tp8", "tap", nope=1)


def test_no_parameter_is_shadowed_by_a_keyword_of_solve() -> None:
    """A formulation parameter named like one of `distplan.solve`'s own keywords could never
    be set (``seed`` was one: the placement searches declared it, and ``seed=3`` went to
    the solver options); the searches now read the run's seed (`RunContext.seed`)."""
    import inspect

    own = set(inspect.signature(distplan.solve).parameters) - {"params"}
    shadowed = [f"{f.name}.{n}" for kind in KINDS for f in distplan.formulations(kind) for n in f.params if n in own]
    assert shadowed == []


def test_the_runs_seed_is_solves_seed() -> None:
    from distplan.formulations.registry import RunContext
    from distplan.solvers.base import SolveOptions, get_backend

    assert RunContext(get_backend("highs"), SolveOptions(seed=5)).seed == 5
    assert RunContext(get_backend("highs"), SolveOptions()).seed == 0


def test_a_nullable_parameter_takes_none() -> None:
    """tessel's proof_time_limit documents None ("all the time left"; review rev7: the type
    check had refused it); a parameter not declared nullable does not take None."""
    tessel = next(f for f in distplan.formulations("pipeline") if f.name == "tessel")
    tessel.check_params({"proof_time_limit": None})
    with pytest.raises(InputError, match=r"^params\.\w+: expected a number, got None"):
        tessel.check_params({next(n for n, v in tessel.params.items() if isinstance(v, float) and n not in tessel.nullable): None})
    r = distplan.solve("pipeline-tessel-kshape", "tessel", time_limit=20, proof_time_limit=None)
    assert r.plan is not None


@pytest.mark.parametrize(("kind", "formulation", "name", "default"), _sequence_params())
def test_a_sequence_parameter_takes_items_of_its_defaults_types(kind: str, formulation: str, name: str, default: Any) -> None:
    """A tuple default (placement_milp's relaxation_ops: a range) takes as many items of its
    items' types; a list default (tag_sfb_maxflow's prices) one or more of its first item's
    type. ``relaxation_ops="abc"`` had reached the run and come back as an internal error."""
    form = next(f for f in distplan.formulations(kind) if f.name == formulation)
    wrong: list[Any] = ["abc", 5, [], [None] * len(default), ["x"] * len(default)]
    if isinstance(default, tuple):
        wrong.append(list(default) + list(default))
    for value in wrong:
        with pytest.raises(InputError, match=rf"^params\.{name}: expected a list of "):
            form.check_params({name: value})
    form.check_params({name: list(default)})
    form.check_params({name: tuple(default)})
    if isinstance(default, list):
        form.check_params({name: default[:1]})


def test_a_parameter_whose_default_is_none_takes_none_or_its_examples_type() -> None:
    form = next(f for f in distplan.formulations("placement") if f.name == "placement_search")
    form.check_params({"max_evals": None, "cluster_share": None})
    form.check_params({"max_evals": 50, "cluster_share": 0.5})
    with pytest.raises(InputError, match=r"^params\.max_evals: expected a whole number, got 'foo'"):
        form.check_params({"max_evals": "foo"})
    with pytest.raises(InputError, match=r"^params\.cluster_share: expected a number >= 0, got -0.5"):
        form.check_params({"cluster_share": -0.5})


def _choice_params() -> list[Any]:
    return [pytest.param(kind, f.name, name, options, id=f"{f.name}.{name}") for kind in KINDS for f in distplan.formulations(kind) for name, options in f.choices.items()]


@pytest.mark.parametrize(("kind", "formulation", "name", "options"), _choice_params())
def test_a_text_parameter_with_choices_takes_only_those(kind: str, formulation: str, name: str, options: tuple[str, ...]) -> None:
    form = next(f for f in distplan.formulations(kind) if f.name == formulation)
    assert form.params[name] in options
    for value in options:
        form.check_params({name: value})
    with pytest.raises(InputError, match=rf"^params\.{name}: expected one of {options[0]!r}"):
        form.check_params({name: "no-such-choice"})


def test_tag_sfb_refuses_an_unknown_objective_before_running() -> None:
    with pytest.raises(InputError, match=r"^params\.objective: expected one of 'iteration', 'tag_cost', got 'nope'"):
        distplan.solve("compression-bert-large", "tag_sfb", objective="nope")


def test_every_parameter_is_checkable() -> None:
    """A default of None shows no type: each such parameter declares an example, so no value
    of a wrong type reaches a run (tessel's offsets=foo, codec_select's window=foo had)."""
    unchecked = [f"{f.name}.{n}" for kind in KINDS for f in distplan.formulations(kind) for n, d in f.params.items() if d is None and n not in f.examples]
    assert unchecked == []
