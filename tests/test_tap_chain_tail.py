"""chainfold.find_chains scores a chain's alignments with the positions of the edges that
leave its LAST copy (``tail = out_edges[r_out == K - 1]``), not the first copy's.

Why it matters: when `alignments` shifts a chain's boundary by a set T of positions, the
new last copy keeps the old last copy's T nodes, so an edge leaving the old last copy from
a position in T leaves the new last copy too, and that position is one more out position
(more boundary states). Edges leaving the FIRST copy never do: its T nodes become explicit
and its other nodes stay in the new first copy, which is explicit in the walk anyway. So
only the last copy's out positions may count.

Every real instance in tests/ has either no edge leaving a family's first copy, or one that
does not change the winning alignment, so the mutant that scores with the first copy's
out positions (``tail = out_edges[r_out == 0]``, "M24") or with both copies'
(``tail = out_edges``) passed every test. Here a skeleton chain has an edge out of its
first copy and one out of its last copy, from different positions, with a different
strategy count per position, so that the two scorings pick different alignments. The
plan's objective does not depend on the alignment (each is exact), so the test checks
what does: the chosen copies, their out positions, tail edges and boundary states, which
must be the fewest over every alignment as `_chain_of` computes them.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from distplan.formulations.folding import FoldMap
from distplan.formulations.sharding.chainfold import Chain, _chain_of, find_chains

#: blocks in the skeleton (copies of the family before realignment)
K = 5
#: strategies of a block's positions a, b, c
DOM = (3, 2, 5)
#: the outside nodes: the first block's side output x, the last block's output y
X, Y = 3 * K, 3 * K + 1


def _skeleton(first_out: int, last_out: int) -> tuple[SimpleNamespace, list[tuple[int, int]], FoldMap, SimpleNamespace]:
    """K blocks a -> b -> c (nodes 3k, 3k + 1, 3k + 2), each c -> the next block's a; the
    first block's position ``first_out`` -> X and the last block's ``last_out`` -> Y.
    One family of the K blocks, given out of chain order (its copy 0 is block 2); DOM
    strategies per position. Returns the skeleton, its edges, the fold and the tables."""
    edges = [(3 * k, 3 * k + 1) for k in range(K)] + [(3 * k + 1, 3 * k + 2) for k in range(K)]
    edges += [(3 * k + 2, 3 * k + 3) for k in range(K - 1)]
    edges += [(first_out, X), (3 * (K - 1) + last_out, Y)]
    e = np.array(edges, dtype=np.int64)
    labels = np.array([j % 3 for j in range(3 * K)] + [7, 8], dtype=np.int64)
    sk = SimpleNamespace(edge_u=e[:, 0], edge_v=e[:, 1], edge_label_id=np.zeros(len(edges), dtype=np.int64), node_label_id=labels, num_nodes=3 * K + 2)
    tables = SimpleNamespace(node=lambda sk, i: SimpleNamespace(strategies=list(range(DOM[i % 3]))))
    blocks = [2, 0, 4, 1, 3]
    fold = FoldMap(list(range(3 * K + 2)), [np.array([[3 * b, 3 * b + 1, 3 * b + 2] for b in blocks], dtype=np.int64)])
    return sk, edges, fold, tables


def _shifted(shift: set[int]) -> np.ndarray:
    """The blocks realigned by ``shift`` (`alignments`: new[k, j] = block k + (j in shift))."""
    return np.array([[3 * (k + (j in shift)) + j for j in range(3)] for k in range(K - int(bool(shift)))], dtype=np.int64)


# (first block's out position, last block's out position, shift of the right alignment,
#  its out positions, boundary states, tail edges)
CASES = [
    # the last block's c -> Y leaves from an explicit node once realigned; cutting after b
    # (T = {a, b}) crosses 2 states. Scored with the first block's a -> X, T = {a} (3
    # states) would look best: {a, b} would count a as well (2 x 3)
    (0, 2, {0, 1}, [1], 2, [(13, 14)]),
    # the last block's a -> Y: T = {a} keeps a_4 in the last copy, a alone is out (3
    # states), while {a, b} has a and b out (6). Scored with the first block's c -> X,
    # {a, b} (2 "states") would look best and cross 6
    (2, 0, {0}, [0], 3, [(12, 13), (12, Y)]),
]


@pytest.mark.parametrize(("first_out", "last_out", "shift", "out_pos", "states", "tail"), CASES)
def test_alignment_is_scored_by_the_last_copys_out_edges(first_out: int, last_out: int, shift: set[int], out_pos: list[int], states: int, tail: list[tuple[int, int]]) -> None:
    """The chain found is the alignment of fewest boundary states counting the edges that
    leave the last copy (exact copies, out positions, tail edges and states), and no other
    alignment has fewer states (checked with `_chain_of` on every candidate)."""
    sk, edges, fold, tables = _skeleton(first_out, last_out)
    chains, info = find_chains(sk, fold, tables)  # type: ignore[arg-type]
    assert "unfolded_families" not in info
    (chain,) = chains
    assert chain.nodes.tolist() == _shifted(shift).tolist()
    assert chain.out_pos.tolist() == out_pos and chain.num_states == states
    assert sorted(edges[e] for e in chain.tail_edges.tolist()) == tail
    assert info["chains"] == [{"family": 0, "copies": K - int(bool(shift)), "positions": 3, "states": states}]
    # the candidates' real boundary states: the closures of single positions ({a}, {a, b})
    # and the blocks as folded; the one found has the fewest, and it is the only one
    dom = np.array(DOM, dtype=np.int64)
    real = {}
    for cand in ({0}, {0, 1}, set()):
        made = _chain_of(0, _shifted(cand), sk, dom)  # type: ignore[arg-type]
        assert isinstance(made, Chain)
        real[frozenset(cand)] = made.num_states
    assert real[frozenset(shift)] == states == min(real.values())
    assert sorted(real.values()).count(states) == 1
