"""chainfold's growth and choice among a chain's alignments (issue 16, tap's shared
pre-work): a copy joins under the same conditions as node by node, and grown copies are
checked as a chain only when they would win, with the choice of checking every
alignment's grown copies first."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from distplan.formulations.folding import FoldMap
from distplan.formulations.sharding.chainfold import _chain_of, _joins_cleanly, _widest_chain, find_chains


def _blocks(K: int) -> SimpleNamespace:
    """K blocks a -> b -> c, each c -> the next block's a (a chain of copies)."""
    edges = [(3 * k, 3 * k + 1) for k in range(K)] + [(3 * k + 1, 3 * k + 2) for k in range(K)]
    edges += [(3 * k + 2, 3 * k + 3) for k in range(K - 1)]
    e = np.array(edges)
    return SimpleNamespace(edge_u=e[:, 0], edge_v=e[:, 1], num_nodes=3 * K)


def _copies(blocks: list[int]) -> np.ndarray:
    return np.array([[3 * b, 3 * b + 1, 3 * b + 2] for b in blocks], dtype=np.int64)


def _eager(options: list[tuple[np.ndarray, np.ndarray | None]], sk: SimpleNamespace, dom: np.ndarray) -> tuple[np.ndarray, object]:
    """Every alignment's grown copies checked, the longest taken (the first of equals)."""
    kept = [grown if grown is not None and not isinstance(_chain_of(0, grown, sk, dom), str) else cand for cand, grown in options]  # type: ignore[arg-type]
    nodes = max(kept, key=lambda x: x.shape[0])
    return nodes, _chain_of(0, nodes, sk, dom)  # type: ignore[arg-type]


@st.composite
def _options(draw: st.DrawFn) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Alignments of runs of blocks; grown copies a longer run, or a scrambled one (not a chain)."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        lo = draw(st.integers(0, 5))
        cand = list(range(lo, lo + draw(st.integers(2, 4))))
        kind = draw(st.sampled_from(["none", "chain", "broken"]))
        grown = None
        if kind != "none":
            grown = list(range(max(lo - draw(st.integers(0, 2)), 0), cand[-1] + 1 + draw(st.integers(0, 2))))
            if kind == "broken":
                grown = grown[::-1]  # copies in reverse: edges run from a copy to the one before
        out.append((_copies(cand), None if grown is None else _copies(grown)))
    return out


def test_a_failed_check_puts_the_alignment_back_at_its_own_length() -> None:
    """The first alignment's grown copies are no chain: it keeps its own 3 copies and, tied
    with the second alignment's grown 3, wins as the first (not dropped, not grown)."""
    sk = _blocks(9)
    dom = np.ones(3, dtype=np.int64)
    options = [(_copies([2, 3, 4]), _copies([4, 3, 2, 1, 0])), (_copies([5, 6]), _copies([5, 6, 7]))]
    nodes, made = _widest_chain(0, list(options), sk, dom)  # type: ignore[arg-type]
    assert nodes.tolist() == _copies([2, 3, 4]).tolist() and not isinstance(made, str)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(options=_options())
def test_widest_chain_equals_checking_every_alignment(options: list[tuple[np.ndarray, np.ndarray | None]]) -> None:
    sk = _blocks(12)
    dom = np.ones(3, dtype=np.int64)
    want_nodes, want_made = _eager(options, sk, dom)
    nodes, made = _widest_chain(0, list(options), sk, dom)  # type: ignore[arg-type]
    assert np.array_equal(nodes, want_nodes)
    assert isinstance(made, str) == isinstance(want_made, str)
    if not isinstance(made, str):
        assert np.array_equal(made.nodes, want_made.nodes) and np.array_equal(made.out_pos, want_made.out_pos)  # type: ignore[attr-defined]


def _joins_node_by_node(end: list[int], inner: list[int], new: list[int], taken: set[int], before: bool, out_adj: list[list[tuple[int, int]]], in_adj: list[list[tuple[int, int]]]) -> bool:
    """`_joins_cleanly` as written before, node by node."""
    prior, after = (set(new), set(inner)) if before else (set(inner), set(new))
    mine = set(end)
    for x in end:
        if any(y not in mine and y not in after for _, y in out_adj[x]) or any(y not in mine and y not in prior for _, y in in_adj[x]):
            return False
    for x in new:
        if any(y in taken and (not before or y not in mine) for _, y in out_adj[x]):
            return False
        if any(y in taken if before else (y not in mine and y not in set(new)) for _, y in in_adj[x]):
            return False
    return True


@settings(max_examples=400, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**31), size=st.integers(1, 3), extra=st.integers(0, 4), before=st.booleans())
def test_joins_cleanly_equals_the_node_by_node_checks(seed: int, size: int, extra: int, before: bool) -> None:
    """Blocks new, end, inner, rest of the chain, and outside nodes, joined block to block
    plus a few random edges anywhere: the same verdict as the earlier node-by-node form."""
    rng = np.random.default_rng(seed)
    n = 5 * size
    new, end, inner, rest, outside = ([b * size + j for j in range(size)] for b in range(5))
    order = [new, end, inner, rest] if before else [rest, inner, end, new]
    edges = [(a[j], b[j]) for a, b in zip(order, order[1:]) for j in range(size)]
    edges += [tuple(int(x) for x in rng.integers(0, n, 2)) for _ in range(extra)]
    out_adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    in_adj: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    for a, b in edges:
        out_adj[a].append((0, b))
        in_adj[b].append((0, a))
    taken = set(end + inner + rest)
    got = _joins_cleanly(end, inner, new, taken, before, (out_adj, in_adj))
    assert got == _joins_node_by_node(end, inner, new, taken, before, out_adj, in_adj)


def _found(edges: list[tuple[int, int]], n: int, copies: list[list[int]]) -> tuple[list[np.ndarray], dict[str, object]]:
    """`find_chains` on a skeleton of ``n`` nodes (labels: position in a block of 3) and
    one family with the given copies; two strategies per node."""
    e = np.array(edges, dtype=np.int64)
    sk = SimpleNamespace(edge_u=e[:, 0], edge_v=e[:, 1], edge_label_id=np.zeros(len(edges), dtype=np.int64), node_label_id=np.arange(n) % 3, num_nodes=n)
    tables = SimpleNamespace(node=lambda sk, i: SimpleNamespace(strategies=[0, 1]))
    fold = FoldMap(list(range(n)), [np.array(copies, dtype=np.int64)])
    chains, info = find_chains(sk, fold, tables)  # type: ignore[arg-type]
    return [c.nodes for c in chains], info


def _stack(blocks: int) -> list[tuple[int, int]]:
    """Blocks a -> b -> c (nodes 3k, 3k + 1, 3k + 2), each c -> the next block's a."""
    return [(3 * k, 3 * k + 1) for k in range(blocks)] + [(3 * k + 1, 3 * k + 2) for k in range(blocks)] + [(3 * k + 2, 3 * k + 3) for k in range(blocks - 1)]


def block(k: int) -> list[int]:
    return [3 * k, 3 * k + 1, 3 * k + 2]


def _why(info: dict[str, object]) -> str:
    return info.get("unfolded_families", {}).get("0", "")  # type: ignore[attr-defined, no-any-return]


def test_find_chains_orders_the_copies_and_rejects_what_is_no_chain() -> None:
    """Copies given out of order come back in chain order; copies not joined one to the
    next (two runs, a cycle, a copy joined to two), joined by different links, or with an
    edge to or from outside a middle copy stay unfolded, each for its reason."""
    nodes, info = _found(_stack(6), 18, [block(k) for k in (3, 1, 4, 2)])
    assert [r[0] // 3 for r in nodes[0].tolist()] == [0, 1, 2, 3, 4, 5] and "unfolded_families" not in info  # ordered, then grown
    two_runs = [e for e in _stack(7) if e != (8, 9)]  # block 2 -> 3 cut: blocks 0-2 and 3-6
    assert _why(_found(two_runs, 21, [block(k) for k in (0, 1, 3, 4)])[1]) == "copies are not joined as one chain"
    cycle = _stack(4) + [(11, 0)]
    assert _why(_found(cycle, 12, [block(k) for k in range(4)])[1]) == "copies are not joined as one chain"
    fork = [e for e in _stack(4) if e != (5, 6)] + [(2, 6)]  # block 0 -> blocks 1 and 2, block 2 -> 3
    assert _why(_found(fork, 12, [block(k) for k in range(4)])[1]) == "copies are not joined as one chain"
    merge = [e for e in _stack(4) if e != (5, 6)] + [(5, 9)]  # block 0 -> 1, blocks 1 and 2 -> 3
    assert _why(_found(merge, 12, [block(k) for k in range(4)])[1]) == "copies are not joined as one chain"
    loop = [e for e in _stack(4) if e != (8, 9)] + [(8, 3)]  # blocks 1 and 2 joined both ways, block 3 apart
    assert _why(_found(loop, 12, [block(k) for k in range(4)])[1]) == "copies are not joined as one chain"
    back = _stack(4) + [(7, 5)]  # block 2 -> block 1 as well
    assert _why(_found(back, 12, [block(k) for k in range(4)])[1]) == "copies are not joined as one chain"
    differ = _stack(5) + [(4, 7)]  # block 1 -> 2 also b -> b
    assert _why(_found(differ, 15, [block(k) for k in range(5)])[1]) == "consecutive copies are joined differently"
    swapped = [e for e in _stack(5) if e != (5, 6)] + [(4, 7)]  # block 1 -> 2 by b -> b only
    assert _why(_found(swapped, 15, [block(k) for k in range(5)])[1]) == "consecutive copies are joined differently"
    out_of_middle = _stack(5) + [(7, 15)]  # block 2 (a middle copy) -> an outside node
    assert _why(_found(out_of_middle, 16, [block(k) for k in range(5)])[1]) == "copies inside the chain have edges to other nodes"
    into_middle = _stack(5) + [(15, 7)]  # an outside node -> block 2
    assert _why(_found(into_middle, 16, [block(k) for k in range(5)])[1]) == "copies inside the chain have edges to other nodes"
    out_of_last = _stack(5) + [(13, 15)]  # the last copy may have edges out
    assert "unfolded_families" not in _found(out_of_last, 16, [block(k) for k in range(5)])[1]
