"""The fast paths of the cost graph's skeleton and tables against their general forms:
sequence ids of long sequences of large codes (items renumbered, or folded position by
position), `first_appearance` against np.unique's definition, and the costs of a node of
one op against the general member-by-member computation, and `op_cost`'s path for one split
mesh axis against its general path. Exact equality throughout."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import distplan
from distplan.formulations.folding import first_appearance
from distplan.formulations.sharding.costgraph import CostTables, _sequence_ids, build_skeleton
from distplan.instances.transformer import transformer
from distplan.models.sharding_costs import _op_cost_general, _op_cost_one_axis, op_cost


def _reference_sequence_ids(owner: np.ndarray, codes: np.ndarray, count: int) -> np.ndarray:
    ids: dict[tuple[int, ...], int] = {}
    seqs = [tuple(codes[owner == i].tolist()) for i in range(count)]
    return np.array([ids.setdefault(q, len(ids)) for q in seqs], dtype=np.int64)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=10), seed=st.integers(0, 2**31), spread=st.sampled_from([3, 1000, 2**40]), repeat=st.booleans())
def test_long_sequences_of_large_codes_get_the_defined_ids(lengths: list[int], seed: int, spread: int, repeat: bool) -> None:
    """Up to 30 items of codes up to 2**40 apart: the matrix of items no longer fits one
    integer per row, so the items are renumbered (few distinct codes) or the sequences
    folded position by position (many); the ids are still the definition's (equal for
    equal sequences, in order of first appearance). ``repeat`` doubles every sequence so
    equal sequences occur."""
    rng = np.random.default_rng(seed)
    if repeat:
        lengths = lengths + lengths
    owner = np.repeat(np.arange(len(lengths)), lengths)
    codes = rng.integers(-spread, spread, owner.size)
    if repeat:
        half = int(sum(lengths) // 2)
        codes[half:] = codes[:half]
    got = _sequence_ids(owner, codes, len(lengths))
    assert got.dtype == np.int64 and np.array_equal(got, _reference_sequence_ids(owner, codes, len(lengths)))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(keys=st.lists(st.integers(-5, 9), max_size=40), unsigned=st.booleans())
def test_first_appearance_equals_the_unique_definition(keys: list[int], unsigned: bool) -> None:
    """Ids in order of first appearance and each id's first index, as np.unique's index and
    inverse renumbered by first index define them (empty keys included)."""
    x = np.array(keys, dtype=np.int64)
    if unsigned and x.size:
        x = (x - x.min()).astype(np.uint64)
    ids, first = first_appearance(x)
    _, first_sorted, inverse = np.unique(x, return_index=True, return_inverse=True)
    by_first = np.argsort(first_sorted, kind="stable")
    rank = np.empty(first_sorted.size, dtype=np.int64)
    rank[by_first] = np.arange(first_sorted.size)
    assert ids.dtype == np.int64 and first.dtype == np.int64
    assert np.array_equal(ids, rank[inverse.reshape(-1)]) and np.array_equal(first, first_sorted[by_first])


@pytest.mark.parametrize("name", ["gpt-2layer-2x2", "gpt-4layer-memtight", "gpt-24layer-2x4"])
def test_a_node_of_one_op_costs_what_the_member_computation_gives(name: str) -> None:
    """Nodes of one op take a short path; the general member-by-member computation (fresh
    tables, so nothing is shared) gives the same strategies, layouts and floats."""
    inst = distplan.load_instance(name)
    sk = build_skeleton(inst)
    single = [i for i in range(sk.num_nodes) if len(sk.members(i)) == 1]
    assert single and len(single) < sk.num_nodes  # both kinds of node occur
    fast, general = CostTables(inst), CostTables(inst)
    for i in single:
        (op,) = sk.members(i)
        a, b = fast._single_node_costs(op), general._member_costs((op,), ())
        assert a.strategies == b.strategies and a.out_specs == b.out_specs
        assert a.cost.tobytes() == b.cost.tobytes() and a.memory.tobytes() == b.memory.tobytes()


def _one_axis_cases(inst: distplan.models.sharding.ShardingInstance) -> list[tuple[Any, tuple[str | None, ...], int, str]]:
    """Every (semantics, strategy) of the instance's distinct ops that splits one mesh axis
    on one of the op's labels (valid for the op or not), with that axis and label."""
    ndim = len(inst.mesh.shape)
    seen: set[int] = set()
    cases = []
    for k in range(len(inst.ops)):
        sem = inst.semantics(k)
        if id(sem) in seen:
            continue
        seen.add(id(sem))
        labels = sorted({x for t in (sem.output, *sem.inputs, *sem.params, *sem.saved) for x in t.labels})
        for axis in range(ndim):
            for label in [*labels, "not-a-label"]:
                strategy = tuple(label if a == axis else None for a in range(ndim))
                cases.append((sem, strategy, axis, label))
    return cases


@pytest.mark.parametrize("mesh", [8, (2, 4), (2, 2, 2)], ids=str)
def test_the_one_axis_op_cost_equals_the_general_one(mesh: Any) -> None:
    """`op_cost`'s path for one split axis gives the general path's floats bit for bit, on
    every op and label of a GPT and of the bundled instances (1-D and 2-D meshes)."""
    insts = [transformer(2, 256, 4, 128, 8, 1000, mesh=mesh, device="V100", memory=1e15, name="gpt")]
    insts += [distplan.load_instance(n) for n in ("gpt-2layer-2x2", "gpt2-xl-8gpu")]
    checked = 0
    for inst in insts:
        ctx = inst.cost_context
        for sem, strategy, axis, label in _one_axis_cases(inst):
            fast = _op_cost_one_axis(sem, axis, label, ctx)
            general = _op_cost_general(sem, strategy, ctx, [(axis, label)], ctx.axis_sizes[axis])
            assert fast == general, (sem, strategy)
            assert op_cost(sem, strategy, ctx) == general
            checked += 1
    assert checked > 100
