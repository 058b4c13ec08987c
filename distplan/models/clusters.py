"""Clusters of catalogue devices: pairs with their bandwidth and latency, and builders of
the standard node and multi-node layouts (DGX-1 cube-mesh, NVSwitch nodes, H100 SXM / NVL
nodes, InfiniBand and Ethernet between nodes, TAG's mixed cluster).

Units: bytes, bytes/second, seconds. Bandwidths are per direction. The numbers come from
`distplan.models.hardware` (with their sources).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.hardware import (
    ALIASES,
    ETH_10G,
    ETH_25G,
    H100_SOURCE,
    IB_NDR,
    LAT_ETH,
    LAT_IB,
    LAT_NVLINK,
    LAT_PCIE,
    NVLINK2_LINK,
    NVLINK_BRIDGE_H100_NVL,
    NVSWITCH_H100,
    PCIE3_X16,
    PCIE5_X16,
    DeviceSpec,
    GiB,
    device,
)


@dataclass(frozen=True)
class Link:
    """A device pair whose bandwidth (bytes/s) and latency (s) differ from the cluster default."""

    src: str
    dst: str
    bandwidth: float
    latency: float
    directed: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"src": self.src, "dst": self.dst, "bandwidth": self.bandwidth, "latency": self.latency}
        if self.directed:
            out["directed"] = True
        return out


@dataclass(frozen=True)
class ClusterSpec:
    """A set of devices with a pairwise network: default bandwidth/latency plus per-pair links.

    ``device_types`` name catalogue devices; ``device_memory`` (bytes) defaults to each
    device's memory size. `placement_section()` gives the ``cluster`` section of a placement
    instance.
    """

    name: str
    description: str
    device_names: tuple[str, ...]
    device_types: tuple[str, ...]
    bandwidth: float
    latency: float
    links: tuple[Link, ...] = ()
    source: str = ""
    device_memory: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if len(self.device_names) != len(self.device_types):
            raise InputError("cluster.devices", "device_names and device_types differ in length")
        if not self.device_names:
            raise InputError("cluster.devices", "a cluster needs at least one device")
        for t in self.device_types:
            device(t)

    @property
    def n_devices(self) -> int:
        return len(self.device_names)

    def specs(self) -> list[DeviceSpec]:
        return [device(t) for t in self.device_types]

    def type_names(self) -> list[str]:
        """Distinct device types in device order (the keys of per-type op times)."""
        return list(dict.fromkeys(self.device_types))

    def memory(self) -> list[float]:
        """Memory capacity per device, bytes."""
        if self.device_memory is not None:
            return list(self.device_memory)
        return [float(device(t).memory_bytes) for t in self.device_types]

    def with_memory_limit(self, limit: float | None) -> ClusterSpec:
        """A copy whose devices hold at most ``limit`` bytes each (None: unchanged)."""
        if limit is None:
            return self
        if limit <= 0:
            raise InputError("memory_limit", f"{limit!r} must be > 0 bytes")
        return replace(self, device_memory=tuple(min(m, float(limit)) for m in self.memory()), name=f"{self.name}-mem{_short_bytes(limit)}")

    def subset(self, n_devices: int) -> ClusterSpec:
        """The first ``n_devices`` devices with the links among them."""
        if not 1 <= n_devices <= self.n_devices:
            raise InputError("n_devices", f"{n_devices} is outside 1..{self.n_devices} for cluster {self.name!r}")
        if n_devices == self.n_devices:
            return self
        keep = set(self.device_names[:n_devices])
        mem = None if self.device_memory is None else self.device_memory[:n_devices]
        return replace(
            self,
            name=f"{self.name}:{n_devices}",
            description=f"first {n_devices} devices of {self.description}",
            device_names=self.device_names[:n_devices],
            device_types=self.device_types[:n_devices],
            links=tuple(lk for lk in self.links if lk.src in keep and lk.dst in keep),
            device_memory=mem,
        )

    def pair_matrices(self) -> tuple[np.ndarray, np.ndarray]:
        """(bandwidth bytes/s, latency s) per ordered device pair; the diagonal is unused."""
        n = self.n_devices
        bw = np.full((n, n), float(self.bandwidth))
        lat = np.full((n, n), float(self.latency))
        ix = {nm: k for k, nm in enumerate(self.device_names)}
        for lk in self.links:
            a, b = ix[lk.src], ix[lk.dst]
            bw[a, b], lat[a, b] = lk.bandwidth, lk.latency
            if not lk.directed:
                bw[b, a], lat[b, a] = lk.bandwidth, lk.latency
        return bw, lat

    def placement_section(self) -> dict[str, Any]:
        """The ``cluster`` section of a placement instance (bytes, bytes/s, seconds)."""
        return {
            "devices": [{"name": n, "memory": m, "type": t} for n, m, t in zip(self.device_names, self.memory(), self.device_types)],
            "bandwidth": float(self.bandwidth),
            "latency": float(self.latency),
            "links": [lk.to_dict() for lk in self.links],
        }

    def summary(self) -> dict[str, Any]:
        bw, _ = self.pair_matrices()
        off = ~np.eye(self.n_devices, dtype=bool)
        return {
            "name": self.name,
            "devices": self.n_devices,
            "types": ", ".join(f"{t} x{self.device_types.count(t)}" for t in self.type_names()),
            "links": len(self.links),
            "bandwidth min/max (bytes/s)": (float(bw[off].min()), float(bw[off].max())) if self.n_devices > 1 else None,
            "source": self.source,
        }


def _short_bytes(x: float) -> str:
    for unit, size in (("G", GiB), ("M", 1024**2), ("K", 1024)):
        if x >= size:
            v = x / size
            return f"{v:.0f}{unit}" if abs(v - round(v)) < 1e-9 else f"{v:.2f}{unit}"
    return f"{x:.0f}B"


def uniform_cluster(name: str, description: str, gpu: str, n: int, bandwidth: float, latency: float, source: str = "", prefix: str = "gpu") -> ClusterSpec:
    """``n`` identical devices, every pair with the same bandwidth (NVSwitch, one PCIe switch)."""
    device(gpu)
    return ClusterSpec(name, description, tuple(f"{prefix}{k}" for k in range(n)), (ALIASES.get(gpu, gpu),) * n, bandwidth, latency, (), source)


#: DGX-1 (V100) hybrid cube-mesh: pairs joined by NVLink 2.0 and how many links each pair has
#: (``nvidia-smi topo -m`` on a DGX-1V: NV1 / NV2); the other 12 pairs go over PCIe + QPI.
DGX1_NVLINKS: tuple[tuple[int, int, int], ...] = (
    (0, 1, 1), (0, 2, 1), (0, 3, 2), (0, 4, 2),
    (1, 2, 2), (1, 3, 1), (1, 5, 2),
    (2, 3, 2), (2, 6, 1),
    (3, 7, 1),
    (4, 5, 1), (4, 6, 1), (4, 7, 2),
    (5, 6, 2), (5, 7, 1),
    (6, 7, 2),
)  # fmt: skip


def dgx1(gpu: str = "V100-16GB") -> ClusterSpec:
    """NVIDIA DGX-1 with 8 V100: hybrid cube-mesh NVLink (6 links per GPU, 25 GB/s each per
    direction; doubled pairs get 50 GB/s); pairs without NVLink use PCIe 3.0 x16 through the
    host (15.75 GB/s) (DGX-1 with Tesla V100 system architecture whitepaper)."""
    names = tuple(f"gpu{k}" for k in range(8))
    links = tuple(Link(names[a], names[b], n_links * NVLINK2_LINK, LAT_NVLINK) for a, b, n_links in DGX1_NVLINKS)
    return ClusterSpec(
        "dgx1",
        "DGX-1: 8x V100, hybrid cube-mesh NVLink 2.0, PCIe 3.0 between non-neighbours",
        names,
        (ALIASES.get(gpu, gpu),) * 8,
        PCIE3_X16,
        LAT_PCIE,
        links,
        "NVIDIA DGX-1 with Tesla V100 system architecture whitepaper; V100 datasheet (NVLink 2.0, 25 GB/s per link per direction)",
    )


def combine_nodes(name: str, description: str, nodes: Sequence[ClusterSpec], inter_bandwidth: float, inter_latency: float, source: str = "") -> ClusterSpec:
    """Nodes joined by a network: pairs on different nodes get ``inter_bandwidth`` (bytes/s per
    GPU pair, e.g. one NIC per GPU) and ``inter_latency`` (s); pairs inside a node keep the
    node's own network. Device names are ``n<node>.<device>``."""
    names: list[str] = []
    types: list[str] = []
    mems: list[float] = []
    links: list[Link] = []
    for j, node in enumerate(nodes):
        local = [f"n{j}.{d}" for d in node.device_names]
        names += local
        types += node.device_types
        mems += node.memory()
        bw, lat = node.pair_matrices()
        for a in range(node.n_devices):
            for b in range(a + 1, node.n_devices):
                if bw[a, b] == bw[b, a] and lat[a, b] == lat[b, a]:
                    links.append(Link(local[a], local[b], float(bw[a, b]), float(lat[a, b])))
                else:
                    links.append(Link(local[a], local[b], float(bw[a, b]), float(lat[a, b]), True))
                    links.append(Link(local[b], local[a], float(bw[b, a]), float(lat[b, a]), True))
    same_memory = all(node.device_memory is None for node in nodes)
    return ClusterSpec(name, description, tuple(names), tuple(types), inter_bandwidth, inter_latency, tuple(links), source, None if same_memory else tuple(mems))


def multi_node(node: ClusterSpec, n_nodes: int, inter_bandwidth: float, inter_latency: float, name: str | None = None, fabric: str = "") -> ClusterSpec:
    """``n_nodes`` copies of ``node`` joined by InfiniBand or Ethernet (bytes/s per GPU pair)."""
    if n_nodes < 1:
        raise InputError("n_nodes", f"{n_nodes} must be >= 1")
    return combine_nodes(
        name or f"{n_nodes}x{node.name}",
        f"{n_nodes} nodes of {node.description}; {fabric} between nodes",
        [node] * n_nodes,
        inter_bandwidth,
        inter_latency,
        f"{node.source}; {fabric}",
    )


def h100_sxm_node(name: str = "h100-sxm") -> ClusterSpec:
    """An HGX/DGX H100 node: 8 H100 SXM5 80 GB on NVSwitch, every pair at 450 GB/s per
    direction (NVLink 4, 900 GB/s bidirectional per GPU; H100 datasheet, DGX H100 user guide)."""
    return uniform_cluster(name, "8x H100 SXM5 80GB, NVSwitch (NVLink 4, 450 GB/s per direction)", "H100-80GB", 8, NVSWITCH_H100, LAT_NVLINK, H100_SOURCE)


def h100_nvl_node(n_gpus: int = 8, name: str = "h100-nvl") -> ClusterSpec:
    """A PCIe server of ``n_gpus`` (even) H100 NVL 94 GB cards: NVLink bridges join cards
    (0, 1), (2, 3), ... at 300 GB/s per direction (600 GB/s bidirectional, H100 datasheet);
    other pairs talk over PCIe Gen5 x16 at 63 GB/s per direction through the host's switches
    (PCI-SIG; a server that puts every card on its own x16 Gen5 link is assumed)."""
    if n_gpus < 2 or n_gpus % 2:
        raise InputError("n_gpus", f"{n_gpus} H100 NVL cards: they come in NVLink-bridged pairs", "use an even count >= 2")
    names = tuple(f"gpu{k}" for k in range(n_gpus))
    links = tuple(Link(names[k], names[k + 1], NVLINK_BRIDGE_H100_NVL, LAT_NVLINK) for k in range(0, n_gpus, 2))
    return ClusterSpec(
        name,
        f"{n_gpus}x H100 NVL 94GB: NVLink-bridged pairs (300 GB/s per direction), PCIe Gen5 x16 between pairs",
        names,
        ("H100-NVL-94GB",) * n_gpus,
        PCIE5_X16,
        LAT_PCIE,
        links,
        H100_SOURCE + "; PCI-SIG PCIe 5.0 (63 GB/s per direction for x16)",
    )


def h100_cluster(n_nodes: int, node: str = "sxm") -> ClusterSpec:
    """``n_nodes`` H100 nodes on NDR InfiniBand. SXM nodes (DGX H100) have one 400 Gb/s
    ConnectX-7 port per GPU: 50 GB/s per direction for every GPU pair across nodes. NVL
    servers are assumed to carry one NDR port per NVLink pair (4 per 8 cards): 25 GB/s per
    GPU (an assumption: PCIe servers vary)."""
    if node == "sxm":
        return multi_node(h100_sxm_node(), n_nodes, IB_NDR, LAT_IB, f"{n_nodes}xh100-sxm-ib", "NDR InfiniBand 400 Gb/s per GPU (ConnectX-7)")
    if node == "nvl":
        return multi_node(h100_nvl_node(), n_nodes, IB_NDR / 2, LAT_IB, f"{n_nodes}xh100-nvl-ib", "NDR InfiniBand 400 Gb/s per GPU pair (ConnectX-7)")
    raise InputError("node", f"unknown H100 node {node!r}", "use sxm or nvl")


def tag_mix(slow: bool = False) -> ClusterSpec:
    """A TAG-like heterogeneous cluster (Zhang et al., arXiv 2302.06126, whose topologies mix
    V100, P100 and 1080Ti with intra-node links 2.5-7x faster than inter-node ones): a node of
    4 V100 with NVLink (a fully connected DGX-1 quad), a node of 4 P100 on PCIe 3.0, a node of
    4 1080Ti on PCIe 3.0, joined by 25 GbE (``slow``: 10 GbE)."""
    v100 = dgx1().subset(4)
    p100 = uniform_cluster("p100x4", "4x P100 on PCIe 3.0", "P100", 4, PCIE3_X16, LAT_PCIE)
    gtx = uniform_cluster("1080tix4", "4x 1080Ti on PCIe 3.0", "1080Ti", 4, PCIE3_X16, LAT_PCIE)
    inter, fabric = (ETH_10G, "10 GbE") if slow else (ETH_25G, "25 GbE")
    return combine_nodes(
        "tag-mix-slow" if slow else "tag-mix",
        f"TAG-like mix: 4x V100 (NVLink) + 4x P100 (PCIe) + 4x 1080Ti (PCIe), {fabric} between nodes",
        [v100, p100, gtx],
        inter,
        LAT_ETH,
        "TAG (arXiv 2302.06126) topology style; spec numbers as in this module's docstring",
    )
