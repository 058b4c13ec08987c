"""Graph routines: distplan's own (`distplan.models.graphs`, the pipeline's closure) against
networkx / graphlib, at the sizes distplan runs them, with identical results checked.

    python benchmarks/bench_graphs.py                 # 1k, 10k, 100k-op random layered DAGs
    python benchmarks/bench_graphs.py --sizes 2000 --repeat 5

Per size: median seconds of each routine over ``--repeat`` runs and the ratio library / own
(> 1: the own routine is faster). distplan holds graphs as edge arrays, so the library's time
includes building its graph from them (the way distplan would call it); the column
"library s (graph given)" leaves that out. Topological order is Kahn's with the smallest id first
(networkx ``lexicographical_topological_sort`` gives the same order); cycle finding runs on
the DAG plus one back edge; the transitive closure (bit rows; the pipeline's and the
placement MILP's reachability, run on up to a few thousand nodes) against
``networkx.transitive_closure_dag``.
"""

from __future__ import annotations

import argparse
import graphlib
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import networkx as nx
import numpy as np

from distplan.instances.generators import random_layered_dag
from distplan.models.graphs import find_cycle, topological_order, transitive_closure
from distplan.models.placement_instance import PlacementInstance


def _median(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def _one_size(n: int, repeat: int, closure_max: int) -> None:
    """Time every routine on an ``n``-op random layered DAG and print one row each."""
    print(f"building a {n}-op DAG ...", file=sys.stderr, flush=True)
    inst = PlacementInstance.from_dict(random_layered_dag(n, seed=1))
    src, dst = inst.src.astype(np.int64), inst.dst.astype(np.int64)
    def nx_graph(s: np.ndarray = src, d: np.ndarray = dst) -> nx.DiGraph:
        out = nx.DiGraph()
        out.add_nodes_from(range(n))
        out.add_edges_from(zip(s.tolist(), d.tolist()))
        return out

    build_t, g = _median(nx_graph, repeat)

    def row(name: str, own_t: float, lib_t: float, lib: str, build: float = build_t) -> None:
        print(f"{n:>7} {name:<22} {own_t:>9.4f} {lib_t + build:>10.4f} {lib_t:>14.4f} {(lib_t + build) / own_t:>12.1f}  {lib}")

    own_t, own = _median(lambda: topological_order(n, src, dst), repeat)
    lib_t, lib = _median(lambda: np.array(list(nx.lexicographical_topological_sort(g)), dtype=np.int64), repeat)
    assert np.array_equal(own, lib), "orders differ"
    row("topological order", own_t, lib_t, "networkx.lexicographical_topological_sort")

    def preds_of() -> dict[int, list[int]]:
        preds: dict[int, list[int]] = {v: [] for v in range(n)}
        for a, b in zip(src.tolist(), dst.tolist()):
            preds[b].append(a)
        return preds

    pb_t, preds = _median(preds_of, repeat)
    gl_t, _ = _median(lambda: list(graphlib.TopologicalSorter(preds).static_order()), repeat)
    row("topological order", own_t, gl_t, "graphlib.TopologicalSorter (any order, not smallest id first)", pb_t)
    # a cycle: the DAG plus one edge from a sink back to a source upstream of it
    back_src, back_dst = int(own[-1]), int(own[0])
    g2 = g.copy()
    g2.add_edge(back_src, back_dst)
    if not nx.has_path(g, back_dst, back_src):
        back_dst = int(src[dst == back_src][0]) if (dst == back_src).any() else back_dst
        g2 = g.copy()
        g2.add_edge(back_src, back_dst)
    s2, d2 = np.append(src, back_src), np.append(dst, back_dst)
    own_t, own_c = _median(lambda: find_cycle(n, s2, d2), repeat)
    lib_t, lib_c = _median(lambda: nx.find_cycle(g2), repeat)
    assert own_c is not None and lib_c
    row("find a cycle", own_t, lib_t, "networkx.find_cycle")
    own_t, _ = _median(lambda: find_cycle(n, src, dst), repeat)

    def nx_acyclic() -> bool:
        return nx.is_directed_acyclic_graph(g)

    lib_t, _ = _median(nx_acyclic, repeat)
    row("prove acyclic", own_t, lib_t, "networkx.is_directed_acyclic_graph")
    if n <= closure_max:
        own_t, reach = _median(lambda: transitive_closure(n, src, dst), repeat)

        def nx_closure() -> np.ndarray:
            tc = nx.transitive_closure_dag(g)
            return nx.to_numpy_array(tc, nodelist=range(n), dtype=bool)

        lib_t, lib_r = _median(nx_closure, repeat)
        assert np.array_equal(reach, lib_r), "closures differ"
        row("transitive closure", own_t, lib_t, "networkx.transitive_closure_dag")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="comma-separated op counts")
    ap.add_argument("--closure-max", type=int, default=3000, help="largest size for the closure (dense n x n)")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args(argv)
    print(f"{'ops':>7} {'routine':<22} {'own s':>9} {'library s':>10} {'(graph given)':>14} {'library/own':>12}  library")
    for n in (int(s) for s in args.sizes.split(",")):
        _one_size(n, args.repeat, args.closure_max)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
