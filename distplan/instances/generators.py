"""Seeded generators of placement instances for scaling studies (10 to 100,000+ ops).

Every generator is numpy-vectorized and returns a ``distplan/1`` placement document with
provenance in ``meta``. Units: seconds, bytes, bytes/second.

* `random_layered_dag`: ops in layers, each op fed by random ops of the previous layer
  (about two inputs per op by default).
* `series_parallel`: two-terminal series-parallel DAGs grown by random series / parallel
  expansions of edges (Valdes, Tarjan & Lawler 1982 define the class).
* `chain_of_blocks`: one random block (a small DAG with one entry and one exit) repeated in a
  chain with identical costs: what transformer stacks look like to a folding pass.

Sizes are bounded (`MAX_OPS` ops, `MAX_EDGES` edges, `MAX_DEVICES` devices): beyond them a
generator raises an `InputError` before allocating. Op times are log-normal around
``mean_time`` seconds; edge bytes are scaled so that a
transfer over the cluster's bandwidth takes ``comm_scale`` x the mean op time on average.
``memory_fraction`` sets each device's capacity as a fraction of the total op memory
(< 1: no single device holds the whole graph; None: one device holds it all).
`cached` stores big documents on disk (``$DISTPLAN_CACHE`` or ``~/.cache/distplan``).
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.catalogue import LAT_PCIE, PCIE3_X16, ClusterSpec, uniform_cluster
from distplan.models.common import read_json, write_json

GENERATOR_VERSION = "1"
MiB = 1024**2
#: the most ops a generated document has (1,000,000: 27 s and 1.2 GB for `make random`;
#: 10**9 was taken and the process was killed for memory, review rev16 D6)
MAX_OPS = 1_000_000
#: the most edges a generated document has (about 2 per op by default)
MAX_EDGES = 10 * MAX_OPS
#: the most devices (a placement instance holds device x device bandwidth matrices)
MAX_DEVICES = 4096
#: the most ops of a `chain_of_blocks` block (its pairs are drawn from a block x block grid)
MAX_BLOCK_SIZE = 1024


def _check(n_ops: int, n_devices: int, comm_scale: float, memory_fraction: float | None, minimum: int = 1, seed: int = 0, what: str = "n_ops") -> None:
    if not isinstance(seed, int | np.integer) or isinstance(seed, bool) or seed < 0:
        raise InputError("seed", f"{seed!r} must be an integer >= 0", "give e.g. 0")
    if not isinstance(n_ops, int | np.integer) or isinstance(n_ops, bool) or n_ops < minimum:
        raise InputError(what, f"{n_ops!r} must be an integer >= {minimum}")
    if n_ops > MAX_OPS:
        raise InputError(what, f"{n_ops} is more than the largest taken, {MAX_OPS:,}", "generate fewer ops")
    if not isinstance(n_devices, int | np.integer) or isinstance(n_devices, bool) or n_devices < 1:
        raise InputError("n_devices", f"{n_devices!r} must be an integer >= 1")
    if n_devices > MAX_DEVICES:
        raise InputError("n_devices", f"{n_devices} is more than the largest taken, {MAX_DEVICES:,}", "use fewer devices")
    if not comm_scale >= 0:
        raise InputError("comm_scale", f"{comm_scale!r} must be >= 0")
    if memory_fraction is not None and not memory_fraction > 0:
        raise InputError("memory_fraction", f"{memory_fraction!r} must be > 0", "give e.g. 0.3 (each device holds 30% of the total op memory)")


def _cluster(n_devices: int) -> ClusterSpec:
    return uniform_cluster(f"v100x{n_devices}", f"{n_devices}x V100 on PCIe 3.0", "V100-16GB", n_devices, PCIE3_X16, LAT_PCIE, "catalogue: V100, PCIe 3.0 x16")


def _document(
    name: str,
    op_names: list[str],
    times: np.ndarray,
    memory: np.ndarray,
    src: np.ndarray,
    dst: np.ndarray,
    nbytes: np.ndarray,
    n_devices: int,
    memory_fraction: float | None,
    generator: str,
    params: dict[str, Any],
) -> dict[str, Any]:
    """Assemble the placement document from arrays (vectorized up to the final lists)."""
    cl = _cluster(n_devices)
    total = float(memory.sum())
    biggest = float(memory.max()) if memory.size else 0.0
    capacity = total if memory_fraction is None else max(memory_fraction * total, biggest)
    capacity = float(np.ceil(max(capacity, 1.0)))
    section = cl.placement_section()
    for d in section["devices"]:
        d["memory"] = capacity
    ops = [{"name": nm, "time": t, "memory": m} for nm, t, m in zip(op_names, times.tolist(), memory.tolist())]
    edges = [{"src": op_names[a], "dst": op_names[b], "bytes": x} for a, b, x in zip(src.tolist(), dst.tolist(), nbytes.tolist())]
    return {
        "format": "distplan/1",
        "kind": "placement",
        "name": name,
        "graph": {"ops": ops, "edges": edges},
        "cluster": section,
        "meta": {
            "source": "synthetic (seeded)",
            "parameters": params,
            "date": _dt.date.today().isoformat(),
            "generator": f"distplan.instances.generators.{generator}",
            "generator_version": GENERATOR_VERSION,
        },
    }


def _costs(rng: np.random.Generator, n_ops: int, n_edges: int, mean_time: float, comm_scale: float, mean_memory: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Op seconds, op bytes held, edge bytes (log-normal, rounded to microseconds / bytes)."""
    sigma = 0.6
    shift = -0.5 * sigma**2  # mean of the log-normal = the given mean
    times = np.round(mean_time * rng.lognormal(shift, sigma, n_ops), 9)
    times = np.maximum(times, 1e-9)
    memory = np.round(mean_memory * rng.lognormal(shift, sigma, n_ops))
    mean_bytes = comm_scale * mean_time * PCIE3_X16
    nbytes = np.round(mean_bytes * rng.lognormal(shift, sigma, n_edges))
    return times, memory, nbytes


def random_layered_dag(
    n_ops: int,
    n_devices: int = 4,
    seed: int = 0,
    width: int | None = None,
    edge_prob: float | None = None,
    comm_scale: float = 1.0,
    memory_fraction: float | None = None,
    mean_time: float = 1e-3,
    mean_memory: float = 64 * MiB,
) -> dict[str, Any]:
    """A random layered DAG of ``n_ops`` ops on ``n_devices`` V100s (PCIe 3.0).

    Layers hold about ``width`` ops (default sqrt(n_ops)); each op of a layer is fed by each
    op of the previous layer with probability ``edge_prob`` (default 2 / width: about two
    inputs per op) and by at least one. Times in seconds (mean ``mean_time``), memory in
    bytes (mean ``mean_memory``)."""
    _check(n_ops, n_devices, comm_scale, memory_fraction, seed=seed)
    rng = np.random.default_rng(seed)
    w = max(1, int(round(np.sqrt(n_ops)))) if width is None else int(width)
    if w < 1:
        raise InputError("width", f"{width!r} must be >= 1")
    if edge_prob is not None and not 0 <= edge_prob <= 1:
        raise InputError("edge_prob", f"{edge_prob!r} must be in [0, 1]")
    p = min(1.0, 2.0 / w) if edge_prob is None else float(edge_prob)
    # layer sizes uniform in [ceil(w/2), w + w/2], cut to n_ops in total
    lo, hi = max(1, (w + 1) // 2), max(1, w + w // 2)
    if n_ops * max(1.0, min(hi, n_ops) * p) > MAX_EDGES:  # an op takes about prev_size x p inputs
        raise InputError("edge_prob", f"{n_ops} ops in layers of up to {hi} with edge_prob {p:g} make about {n_ops * min(hi, n_ops) * p:.3g} edges, more than the largest taken, {MAX_EDGES:,}", "give a smaller width or edge_prob, or fewer ops")
    sizes = rng.integers(lo, hi + 1, size=n_ops // lo + 2)
    ends = np.cumsum(sizes)
    n_layers = int(np.searchsorted(ends, n_ops) + 1)
    sizes = sizes[:n_layers].copy()
    sizes[-1] -= int(ends[n_layers - 1] - n_ops)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    layer = np.repeat(np.arange(n_layers), sizes)
    # ops of layers >= 1 pick parents in the previous layer
    ops = np.flatnonzero(layer > 0)
    prev_size = sizes[layer[ops] - 1]
    prev_start = starts[layer[ops] - 1]
    degree = np.maximum(1, rng.binomial(prev_size, p))
    dst = np.repeat(ops, degree)
    src = np.repeat(prev_start, degree) + (rng.random(dst.size) * np.repeat(prev_size, degree)).astype(np.int64)
    pairs = np.unique(dst.astype(np.int64) * n_ops + src)
    dst, src = pairs // n_ops, pairs % n_ops
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    times, memory, nbytes = _costs(rng, n_ops, src.size, mean_time, comm_scale, mean_memory)
    params = {"n_ops": n_ops, "n_devices": n_devices, "seed": seed, "width": w, "edge_prob": p, "comm_scale": comm_scale, "memory_fraction": memory_fraction, "mean_time": mean_time, "mean_memory": mean_memory}
    return _document(f"layered-{n_ops}-s{seed}", [f"op{k}" for k in range(n_ops)], times, memory, src, dst, nbytes, n_devices, memory_fraction, "random_layered_dag", params)


def series_parallel(
    n_ops: int,
    n_devices: int = 4,
    seed: int = 0,
    parallel_prob: float = 0.5,
    comm_scale: float = 1.0,
    memory_fraction: float | None = None,
    mean_time: float = 1e-3,
    mean_memory: float = 64 * MiB,
) -> dict[str, Any]:
    """A random two-terminal series-parallel DAG with ``n_ops`` ops (>= 2).

    Starting from source -> sink, rounds expand up to half of the current edges at once: a
    series expansion puts a new op on the edge (u -> w -> v), a parallel one adds a branch
    u -> w -> v beside it (probability ``parallel_prob``). Expanding distinct edges in one
    round equals expanding them one after another, so the result is series-parallel."""
    _check(n_ops, n_devices, comm_scale, memory_fraction, minimum=2, seed=seed)
    if not 0 <= parallel_prob <= 1:
        raise InputError("parallel_prob", f"{parallel_prob!r} must be in [0, 1]")
    rng = np.random.default_rng(seed)
    cap = 2 * n_ops
    src = np.zeros(cap, dtype=np.int64)
    dst = np.zeros(cap, dtype=np.int64)
    dst[0] = 1
    n_edges, n = 1, 2
    while n < n_ops:
        k = min(n_ops - n, max(1, (n_edges + 1) // 2))
        chosen = rng.choice(n_edges, size=k, replace=False)
        new = np.arange(n, n + k)
        parallel = rng.random(k) < parallel_prob
        u, v = src[chosen], dst[chosen]
        ser = chosen[~parallel]
        dst[ser] = new[~parallel]  # u -> w replaces u -> v
        add_src = np.concatenate([new[~parallel], u[parallel], new[parallel]])
        add_dst = np.concatenate([v[~parallel], new[parallel], v[parallel]])
        m = add_src.size
        src[n_edges : n_edges + m] = add_src
        dst[n_edges : n_edges + m] = add_dst
        n_edges += m
        n += k
    src, dst = src[:n_edges], dst[:n_edges]
    # number ops in a topological order (longest distance from the source, then id)
    level = _levels(n_ops, src, dst)
    rank = np.empty(n_ops, dtype=np.int64)
    rank[np.lexsort((np.arange(n_ops), level))] = np.arange(n_ops)
    src, dst = rank[src], rank[dst]
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    times, memory, nbytes = _costs(rng, n_ops, n_edges, mean_time, comm_scale, mean_memory)
    params = {"n_ops": n_ops, "n_devices": n_devices, "seed": seed, "parallel_prob": parallel_prob, "comm_scale": comm_scale, "memory_fraction": memory_fraction, "mean_time": mean_time, "mean_memory": mean_memory}
    return _document(f"series-parallel-{n_ops}-s{seed}", [f"op{k}" for k in range(n_ops)], times, memory, src, dst, nbytes, n_devices, memory_fraction, "series_parallel", params)


def _levels(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Longest-path level of each node from the sources, by vectorized frontier sweeps."""
    indeg = np.bincount(dst, minlength=n)
    order = np.argsort(src, kind="stable")
    s_sorted, d_sorted = src[order], dst[order]
    starts = np.searchsorted(s_sorted, np.arange(n + 1))
    level = np.zeros(n, dtype=np.int64)
    frontier = np.flatnonzero(indeg == 0)
    remaining = indeg.copy()
    depth = 0
    seen = 0
    while frontier.size:
        level[frontier] = depth
        seen += frontier.size
        lens = starts[frontier + 1] - starts[frontier]
        idx = np.repeat(starts[frontier], lens) + (np.arange(lens.sum()) - np.repeat(np.cumsum(lens) - lens, lens))
        targets = d_sorted[idx]
        np.subtract.at(remaining, targets, 1)
        frontier = np.unique(targets[remaining[targets] == 0])
        depth += 1
    if seen != n:
        raise InputError("graph.edges", "generated graph has a cycle (a bug)")
    return level


def chain_of_blocks(
    n_blocks: int,
    block_size: int = 8,
    n_devices: int = 4,
    seed: int = 0,
    edge_prob: float = 0.3,
    comm_scale: float = 1.0,
    memory_fraction: float | None = None,
    mean_time: float = 1e-3,
    mean_memory: float = 64 * MiB,
) -> dict[str, Any]:
    """``n_blocks`` copies of one random block of ``block_size`` ops in a chain.

    The block is a random DAG over ops 0..k-1 (edge i -> j, i < j, with probability
    ``edge_prob``; every op but the first has an input and every op but the last an output),
    so op 0 is its entry and op k-1 its exit; block t's exit feeds block t+1's entry. All
    copies have the same times, memory and bytes."""
    _check(n_blocks, n_devices, comm_scale, memory_fraction, seed=seed, what="n_blocks")
    if not isinstance(block_size, int | np.integer) or isinstance(block_size, bool) or not 1 <= block_size <= MAX_BLOCK_SIZE:
        raise InputError("block_size", f"{block_size!r} must be an integer from 1 to {MAX_BLOCK_SIZE}")
    if n_blocks * block_size > MAX_OPS:
        raise InputError("n_blocks", f"{n_blocks} blocks of {block_size} ops are {n_blocks * block_size:,} ops, more than the largest taken, {MAX_OPS:,}", "generate fewer blocks")
    rng = np.random.default_rng(seed)
    k = int(block_size)
    iu, ju = np.triu_indices(k, 1)
    keep = rng.random(iu.size) < edge_prob
    bs, bd = iu[keep], ju[keep]
    # every op but the first gets an input, every op but the last an output
    no_in = np.setdiff1d(np.arange(1, k), bd)
    extra_src = (rng.random(no_in.size) * no_in).astype(np.int64)
    bs, bd = np.concatenate([bs, extra_src]), np.concatenate([bd, no_in])
    no_out = np.setdiff1d(np.arange(0, k - 1), bs)
    extra_dst = no_out + 1 + (rng.random(no_out.size) * (k - 1 - no_out)).astype(np.int64)
    bs, bd = np.concatenate([bs, no_out]), np.concatenate([bd, extra_dst])
    pairs = np.unique(bs * k + bd)
    bs, bd = pairs // k, pairs % k
    b_times, b_memory, b_bytes = _costs(rng, k, bs.size + 1, mean_time, comm_scale, mean_memory)
    offsets = np.arange(n_blocks) * k
    src = (offsets[:, None] + bs[None, :]).ravel()
    dst = (offsets[:, None] + bd[None, :]).ravel()
    nbytes = np.tile(b_bytes[:-1], n_blocks)
    if n_blocks > 1:
        src = np.concatenate([src, offsets[:-1] + k - 1])
        dst = np.concatenate([dst, offsets[1:]])
        nbytes = np.concatenate([nbytes, np.full(n_blocks - 1, b_bytes[-1])])
    order = np.lexsort((dst, src))
    names = [f"b{t}.op{i}" for t in range(n_blocks) for i in range(k)]
    params = {"n_blocks": n_blocks, "block_size": k, "n_devices": n_devices, "seed": seed, "edge_prob": edge_prob, "comm_scale": comm_scale, "memory_fraction": memory_fraction, "mean_time": mean_time, "mean_memory": mean_memory}
    return _document(
        f"chain-{n_blocks}x{k}-s{seed}", names, np.tile(b_times, n_blocks), np.tile(b_memory, n_blocks), src[order], dst[order], nbytes[order], n_devices, memory_fraction, "chain_of_blocks", params
    )


GENERATORS: dict[str, Callable[..., dict[str, Any]]] = {
    "random_layered_dag": random_layered_dag,
    "series_parallel": series_parallel,
    "chain_of_blocks": chain_of_blocks,
}


def cache_dir() -> Path:
    """Where generated documents are cached: ``$DISTPLAN_CACHE`` or ``~/.cache/distplan``."""
    return Path(os.environ.get("DISTPLAN_CACHE") or Path.home() / ".cache" / "distplan")


def cached(generator: str, **params: Any) -> dict[str, Any]:
    """A generated document, read from the cache when the same call ran before (gzip JSON)."""
    if generator not in GENERATORS:
        raise InputError("generator", f"unknown generator {generator!r}", f"use one of: {', '.join(GENERATORS)}")
    key = hashlib.sha256(json.dumps([generator, GENERATOR_VERSION, params], sort_keys=True, default=str).encode()).hexdigest()[:16]
    path = cache_dir() / f"{generator}-{key}.json.gz"
    if path.is_file():
        return read_json(path)
    doc = GENERATORS[generator](**params)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp.gz")
    write_json(doc, tmp)
    tmp.replace(path)
    return doc
