"""Multi-dimensional networks (LIBRA) and tori (TPU v4) as placement clusters.

Units: bytes/second, seconds. Pairs of NPUs get the bandwidth of the slowest dimension they
cross and the latency of their hops. Re-exported by `distplan.models.catalogue`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.clusters import ClusterSpec, Link
from distplan.models.hardware import ALIASES, GB, LAT_ICI, TPU_V4_ICI_LINK

# -- multi-dimensional networks (LIBRA) and tori (TPU v4) ------------------------------------------

BLOCKS = ("ring", "fc", "switch")


@dataclass(frozen=True)
class Dimension:
    """One network dimension: ``size`` NPUs joined by a building block.

    ``bandwidth`` is the per-NPU bandwidth of the dimension (bytes/s, LIBRA's B_d): a ring
    splits it over 2 links (B/2 each), a fully connected block over n-1 links, a switch gives
    it all to one link (LIBRA cost model, Won et al. ISPASS 2024). ``latency`` is per hop (s).
    """

    block: str
    size: int
    bandwidth: float
    latency: float = 1e-6
    cost_class: str = ""

    def __post_init__(self) -> None:
        if self.block not in BLOCKS:
            raise InputError("dimension.block", f"unknown building block {self.block!r}", f"use one of {BLOCKS}")
        if self.size < 2:
            raise InputError("dimension.size", f"{self.size} must be >= 2")

    def point_to_point(self) -> float:
        """Bandwidth one pair of NPUs gets inside this dimension (bytes/s): both ring directions,
        one fully-connected link, or the switch port."""
        if self.block == "fc":
            return self.bandwidth / (self.size - 1)
        return self.bandwidth

    def hops(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Hops between coordinates a and b along this dimension."""
        if self.block == "ring":
            d = np.abs(a - b)
            return np.minimum(d, self.size - d)
        return (a != b).astype(np.int64)


def _coords(shape: Sequence[int], idx: np.ndarray) -> np.ndarray:
    """Coordinates (n, D) of linear NPU ids, dimension 0 varying fastest (LIBRA order)."""
    out = np.empty((idx.size, len(shape)), dtype=np.int64)
    rest = idx.copy()
    for d, n in enumerate(shape):
        out[:, d] = rest % n
        rest //= n
    return out


def _links_from_matrices(names: Sequence[str], bw: np.ndarray, lat: np.ndarray) -> tuple[float, float, tuple[Link, ...]]:
    """The most common off-diagonal (bandwidth, latency) as default and links for the rest
    (symmetric matrices expected; one undirected link per differing pair)."""
    n = len(names)
    if n == 1:
        return float(bw[0, 0]), float(lat[0, 0]), ()
    lat = np.round(lat, 12)  # drop float noise of hop sums (seconds)
    iu, ju = np.triu_indices(n, 1)
    pairs = np.stack([bw[iu, ju], lat[iu, ju]], axis=1)
    uniq, inv, counts = np.unique(pairs, axis=0, return_inverse=True, return_counts=True)
    best = int(np.argmax(counts))
    keep = np.flatnonzero(inv.ravel() != best)
    bw0, lat0 = float(uniq[best, 0]), float(uniq[best, 1])
    links = tuple(Link(names[a], names[b], float(x), float(y)) for a, b, x, y in zip(iu[keep].tolist(), ju[keep].tolist(), bw[iu[keep], ju[keep]].tolist(), lat[iu[keep], ju[keep]].tolist()))
    return bw0, lat0, links


@dataclass(frozen=True)
class MultiDimNetwork:
    """A LIBRA-style multi-dimensional network (Won et al., "LIBRA", ISPASS 2024): NPU k has
    coordinates along each dimension (dimension 0 innermost). A pair differing in several
    dimensions crosses each of them: its bandwidth is the smallest point-to-point bandwidth of
    those dimensions and its latency the sum of hops x per-hop latency."""

    name: str
    dims: tuple[Dimension, ...]
    device_type: str = "A100-80GB"
    description: str = ""
    source: str = "LIBRA (Won et al., ISPASS 2024, arXiv 2109.11762), github.com/astra-sim/libra inputs/network"

    @property
    def n_npus(self) -> int:
        return int(np.prod([d.size for d in self.dims]))

    def shape(self) -> tuple[int, ...]:
        return tuple(d.size for d in self.dims)

    def pair_matrices(self, npus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(bandwidth bytes/s, latency s) between the given NPU ids (vectorized)."""
        c = _coords(self.shape(), np.asarray(npus, dtype=np.int64))
        n = c.shape[0]
        bw = np.full((n, n), np.inf)
        lat = np.zeros((n, n))
        for d, dim in enumerate(self.dims):
            a, b = c[:, None, d], c[None, :, d]
            differs = a != b
            bw = np.where(differs, np.minimum(bw, dim.point_to_point()), bw)
            lat = lat + dim.hops(a, b) * dim.latency
        np.fill_diagonal(bw, np.nan)
        return bw, lat

    def cluster(self, n_devices: int | None = None, max_devices: int = 512) -> ClusterSpec:
        """The first ``n_devices`` NPUs (default: all) as a placement cluster. Above
        ``max_devices`` this refuses: N devices make N(N-1)/2 pairs, most of them links."""
        n = self.n_npus if n_devices is None else n_devices
        if not 1 <= n <= self.n_npus:
            raise InputError("n_devices", f"{n} is outside 1..{self.n_npus} for network {self.name!r}")
        if n > max_devices:
            raise InputError(
                "n_devices",
                f"{n} NPUs of {self.name!r} make {n * (n - 1) // 2} device pairs",
                f"take a slice with n_devices <= {max_devices}, or raise max_devices",
            )
        names = [f"npu{k}" for k in range(n)]
        bw, lat = self.pair_matrices(np.arange(n))
        np.fill_diagonal(bw, 1.0)
        bw0, lat0, links = _links_from_matrices(names, bw, lat)
        shape = " x ".join(f"{d.block} {d.size}" for d in self.dims)
        return ClusterSpec(
            self.name if n == self.n_npus else f"{self.name}:{n}",
            self.description or f"{len(self.dims)}D network [{shape}] of {self.device_type}",
            tuple(names),
            (ALIASES.get(self.device_type, self.device_type),) * n,
            bw0,
            lat0,
            links,
            self.source,
        )

    def dimensions(self) -> list[dict[str, Any]]:
        """The network description LIBRA uses: one entry per dimension (bandwidth in bytes/s)."""
        return [
            {"name": f"dim{k + 1}", "size": d.size, "block": d.block, "cost_class": d.cost_class, "bandwidth": d.bandwidth, "latency": d.latency}
            for k, d in enumerate(self.dims)
        ]


@dataclass(frozen=True)
class Torus:
    """A k-dimensional torus (TPU v4 slices are 3D tori): every chip has 2 links per
    dimension (``link_bandwidth`` bytes/s per direction); a pair is reached over
    shortest-path hops (``hop_latency`` s each) at one link's bandwidth."""

    name: str
    shape: tuple[int, ...]
    link_bandwidth: float
    hop_latency: float
    device_type: str = "TPU-v4"
    wraparound: bool = True
    source: str = "Google Cloud TPU v4 documentation; Jouppi et al., TPU v4, ISCA 2023 (3D torus ICI)"

    @property
    def n_chips(self) -> int:
        return int(np.prod(self.shape))

    def hop_matrix(self, chips: np.ndarray) -> np.ndarray:
        c = _coords(self.shape, np.asarray(chips, dtype=np.int64))
        hops = np.zeros((c.shape[0], c.shape[0]), dtype=np.int64)
        for d, n in enumerate(self.shape):
            diff = np.abs(c[:, None, d] - c[None, :, d])
            hops += np.minimum(diff, n - diff) if self.wraparound else diff
        return hops

    def cluster(self, n_devices: int | None = None, max_devices: int = 512) -> ClusterSpec:
        """The first ``n_devices`` chips (default: all) as a placement cluster."""
        n = self.n_chips if n_devices is None else n_devices
        if not 1 <= n <= self.n_chips:
            raise InputError("n_devices", f"{n} is outside 1..{self.n_chips} for torus {self.name!r}")
        if n > max_devices:
            raise InputError("n_devices", f"{n} chips make {n * (n - 1) // 2} device pairs", f"take a slice with n_devices <= {max_devices}")
        names = [f"chip{k}" for k in range(n)]
        lat = self.hop_matrix(np.arange(n)) * self.hop_latency
        bw = np.full((n, n), float(self.link_bandwidth))
        bw0, lat0, links = _links_from_matrices(names, bw, lat)
        dims = "x".join(map(str, self.shape))
        return ClusterSpec(
            self.name if n == self.n_chips else f"{self.name}:{n}",
            f"{dims} {'torus' if self.wraparound else 'mesh'} of {self.device_type}",
            tuple(names),
            (ALIASES.get(self.device_type, self.device_type),) * n,
            bw0,
            lat0,
            links,
            self.source,
        )


def libra_4d(total_bandwidth: float = 500 * GB) -> MultiDimNetwork:
    """LIBRA's 4D example [ring 4, fully-connected 8, ring 4, switch 32] = 4,096 NPUs, with the
    per-NPU bandwidth split equally over the dimensions (LIBRA's equal-bandwidth baseline under
    its 500 GB/s total constraint ``total_bw_500gbps``)."""
    b = total_bandwidth / 4
    return MultiDimNetwork(
        "libra-4d",
        (
            Dimension("ring", 4, b, 2e-7, "InterChiplet"),
            Dimension("fc", 8, b, 5e-7, "InterPackage"),
            Dimension("ring", 4, b, 1e-6, "InterNode"),
            Dimension("switch", 32, b, 2e-6, "InterPod"),
        ),
        description="LIBRA 4D [ring 4, FC 8, ring 4, switch 32] = 4096 NPUs, equal bandwidth per dimension",
    )


def libra_3d(total_bandwidth: float = 500 * GB) -> MultiDimNetwork:
    """LIBRA's 3D example [ring 16, fully-connected 8, switch 32] = 4,096 NPUs, equal split."""
    b = total_bandwidth / 3
    return MultiDimNetwork(
        "libra-3d",
        (
            Dimension("ring", 16, b, 5e-7, "InterPackage"),
            Dimension("fc", 8, b, 1e-6, "InterNode"),
            Dimension("switch", 32, b, 2e-6, "InterPod"),
        ),
        description="LIBRA 3D [ring 16, FC 8, switch 32] = 4096 NPUs, equal bandwidth per dimension",
    )


def tpu_v4_torus(shape: tuple[int, int, int] = (4, 4, 4)) -> Torus:
    """A TPU-v4-like 3D torus slice (4x4x4 = one 64-chip cube; a full pod is 16x16x16)."""
    return Torus(f"tpu-v4-{'x'.join(map(str, shape))}", tuple(shape), TPU_V4_ICI_LINK, LAT_ICI)
