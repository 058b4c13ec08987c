"""`tap.plan_of_choice` names every op of a strategy index per skeleton node: the same plan
as naming node by node (each node's member ops with its label's strategy of that index), on
random choices over every strategy index of every node; a node without a strategy (-1) is
refused by name rather than read as another code (review rev6a: -1 collided with the
previous label's last index). The fold's parameters are checked by name."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.sharding.costgraph import CostTables
from distplan.formulations.sharding.tap import DEFAULTS, fold_instance, plan_of_choice
from distplan.instances.transformer import transformer
from distplan.models.sharding_costs import strategy_name

INSTANCES = [
    transformer(2, 256, 4, 128, 8, 1000, mesh=4, device="V100", memory=1e15, name="names-4"),
    transformer(2, 256, 4, 128, 8, 1000, mesh=(2, 4), device="V100", memory=1e15, name="names-2x4"),
]


def _node_by_node(sk, tables, choice):  # type: ignore[no-untyped-def]
    names = list(sk.instance.index)
    out = {}
    for i, k in enumerate(choice.tolist()):
        for op, st_ in zip(sk.node_ops[i], tables.node(sk, i).strategies[k]):
            out[names[op]] = strategy_name(st_)
    return out


@settings(max_examples=40, deadline=None, derandomize=True)
@given(which=st.integers(0, len(INSTANCES) - 1), seed=st.integers(0, 2**31))
def test_plan_of_choice_equals_naming_node_by_node(which: int, seed: int) -> None:
    inst = INSTANCES[which]
    sk, _ = fold_instance(inst, DEFAULTS)
    tables = CostTables(inst)
    counts = np.array([len(tables.node(sk, i).strategies) for i in range(sk.num_nodes)])
    assert which == 0 or counts.max() > 8  # on the 2-D mesh, indices beyond the few a solver picks
    choice = np.random.default_rng(seed).integers(0, counts)
    got = plan_of_choice(sk, tables, choice).strategies
    want = _node_by_node(sk, tables, choice)
    assert got == want and list(got) == sorted(want, key=list(want).index)


def test_a_node_without_a_strategy_is_refused() -> None:
    inst = INSTANCES[0]
    sk, _ = fold_instance(inst, DEFAULTS)
    tables = CostTables(inst)
    choice = np.zeros(sk.num_nodes, dtype=np.int64)
    choice[min(3, sk.num_nodes - 1)] = -1
    with pytest.raises(ValueError, match="has no strategy"):
        plan_of_choice(sk, tables, choice)


@pytest.mark.parametrize("params", [{"min_copies": 1}, {"min_copies": 0}, {"min_copies": 2.5}, {"min_copies": True}, {"wl_iterations": -1}, {"min_copies": 1, "exact": False}, {"max_states": 0}, {"dp_max_rows": 0}, {"dp_max_rows": -5.0}])
def test_fold_parameters_are_checked_by_name(params: dict) -> None:
    """A fold parameter out of range is an input error naming it (min_copies below 2 made
    the chain finder fail with an IndexError, review fold6; max_states and dp_max_rows
    below 1 were taken, and gave up on every chain or table)."""
    import distplan
    from distplan.errors import InputError

    with pytest.raises(InputError, match=f"params.{next(iter(params))}"):
        distplan.solve(INSTANCES[0], "tap", **params)
