"""The one block contract of model-based formulations.

After Pyomo's declared blocks and PyPSA's one-signature constraint functions, every
mathematical program in distplan is declared as a `ModelSpec` of four parts:

1. ``prepare(instance, params) -> Index``: everything the blocks share, computed once and
   before any variable exists, as a **frozen dataclass** with typed fields (index arrays,
   horizons in the instance's time unit, big-M values, the parameters the blocks read).
   Nothing passes between blocks in any other way, so the data a block depends on is visible
   in the index's type.
2. ``blocks``: pure functions ``block(model, instance, index) -> None``. Each adds named
   variable and constraint blocks (and may name an expression with `Model.define`); it takes
   what an earlier block created by name (``model["start"]``, ``model.expression("tau")``).
   A block that runs before the block it needs fails with a `ModelError` naming the missing
   name, so the order blocks must run in is checked, not hidden.
3. ``decode(instance, result, index)``: the plan, or (plan, the program's objective for it).
4. a `Policy`: what the formulation asks of a solve when the caller says nothing (a default
   time limit, the LP method), declared as data on the formulation.

A disjunction ("a before b, or b before a") is stated through
`distplan.modeling.scheduling.disjunctive_pairs`, which keeps its meaning apart from the
big-M encoding.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from distplan.formulations.deadline import check
from distplan.modeling.model import Model
from distplan.solvers.options import SolveOptions
from distplan.solvers.result import SolverResult

IndexT = TypeVar("IndexT")

#: block(model, instance, index): adds named blocks; takes earlier ones by name
Block = Callable[[Model, Any, Any], None]
#: decode(instance, result, index) -> plan | (plan, objective claimed for it)
Decoder = Callable[[Any, SolverResult, Any], Any]


class ContractError(TypeError):
    """A formulation broke the block contract (a programming error, not a user's)."""


def time_limit_parameter(instance: Any, params: Mapping[str, Any]) -> float | None:
    """`Policy.default_time_limit` of a formulation that declares a ``default_time_limit``
    parameter (seconds; the run's parameters include the formulation's defaults)."""
    value = params.get("default_time_limit")
    return None if value is None else float(value)


@dataclass(frozen=True)
class Policy:
    """What a formulation asks of a solve when the caller does not say.

    ``default_time_limit`` (seconds) applies when the caller gives no limit (a MILP that would
    otherwise search for hours returns its incumbent and bound instead). ``lp_method`` is the
    LP algorithm hint ("auto", "simplex", "barrier") used when the caller leaves "auto".
    Either may be a function of (instance, the run's parameters): large degenerate LPs solve
    faster by barrier, and a parameter may set the default limit.
    """

    default_time_limit: float | Callable[[Any, Mapping[str, Any]], float | None] | None = None
    lp_method: str | Callable[[Any, Mapping[str, Any]], str] = "auto"

    def options_for(self, options: SolveOptions, instance: Any, params: Mapping[str, Any] | None = None) -> SolveOptions:
        """``options`` completed by this policy for ``instance`` (what the caller set wins)."""
        params = params or {}
        changes: dict[str, Any] = {}
        if options.time_limit is None and self.default_time_limit is not None:
            limit = self.default_time_limit(instance, params) if callable(self.default_time_limit) else self.default_time_limit
            if limit is not None:
                changes["time_limit"] = float(limit)
        if options.lp_method == "auto":
            method = self.lp_method(instance, params) if callable(self.lp_method) else self.lp_method
            if method != "auto":
                changes["lp_method"] = method
        return options.with_(**changes) if changes else options


@dataclass(frozen=True)
class ModelSpec(Generic[IndexT]):
    """A program declared by the block contract: ``prepare`` → index, ``blocks``, ``decode``."""

    name: str
    prepare: Callable[[Any, Mapping[str, Any]], IndexT]
    blocks: tuple[Block, ...]
    decode: Decoder | None = None

    def index(self, instance: Any, params: Mapping[str, Any] | None = None) -> IndexT:
        """Run ``prepare`` (params are read-only) and check that it kept the contract."""
        index = self.prepare(instance, MappingProxyType(dict(params or {})))
        if not (dataclasses.is_dataclass(index) and type(index).__dataclass_params__.frozen):  # type: ignore[attr-defined]
            raise ContractError(f"{self.name}: prepare must return a frozen dataclass, got {type(index).__name__}")
        return index

    def build(self, instance: Any, params: Mapping[str, Any] | None = None, *, name: str | None = None) -> tuple[Model, IndexT]:
        """The model for ``instance`` and its index."""
        return self.build_from(instance, self.index(instance, params), name=name)

    def build_from(self, instance: Any, index: IndexT, *, name: str | None = None) -> tuple[Model, IndexT]:
        """The model from an index already prepared (a search that builds many models from
        one index prepares it once). An index with a ``deadline`` (a ``time.perf_counter()``
        value) stops the build past it before each block (`DeadlineReached`); a block
        that takes long checks it inside too."""
        model = Model(name or self.name)
        deadline = getattr(index, "deadline", None)
        for block in self.blocks:
            check(deadline, f"the {self.name} model's build")
            block(model, instance, index)
        return model, index

    def without(self, *blocks: Block, name: str | None = None) -> ModelSpec[IndexT]:
        """The same program without some of its blocks (a relaxation, or a variant)."""
        missing = [b for b in blocks if b not in self.blocks]
        if missing:
            raise ContractError(f"{self.name}: no block {getattr(missing[0], '__name__', missing[0])!r} to leave out")
        return dataclasses.replace(self, name=name or self.name, blocks=tuple(b for b in self.blocks if b not in blocks))

    def with_blocks(self, *blocks: Block, name: str | None = None) -> ModelSpec[IndexT]:
        """The same program with more blocks after its own (extra rows, a new objective)."""
        return dataclasses.replace(self, name=name or self.name, blocks=(*self.blocks, *blocks))

    def decode_result(self, instance: Any, result: SolverResult, index: IndexT) -> tuple[Any, float | None]:
        """(plan, claimed objective or None) from a solve of this spec's model."""
        if self.decode is None:
            raise ContractError(f"{self.name}: no decoder declared")
        decoded = self.decode(instance, result, index)
        return decoded if isinstance(decoded, tuple) else (decoded, None)
