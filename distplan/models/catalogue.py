"""Device and cluster catalogue: public spec-sheet numbers of accelerators and interconnects.

Units: FLOP/s, bytes, bytes/second, seconds. Bandwidths are per direction.

Device sources (vendor datasheets):
V100: NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor fp16, 15.7 TFLOPS fp32, 900 GB/s HBM2);
A100: NVIDIA A100 datasheet (312 TFLOPS fp16 tensor dense, 19.5 TFLOPS fp32, 1,555 GB/s for
40 GB, 2,039 GB/s for 80 GB SXM); H100: NVIDIA H100 datasheet (SXM5: 989 TFLOPS fp16/bf16
dense, 67 TFLOPS fp32, 3.35 TB/s); T4: NVIDIA T4 datasheet (65 TFLOPS fp16, 8.1 TFLOPS fp32,
320 GB/s); P100: Tesla P100 datasheet (SXM2: 21.2 TFLOPS fp16, 10.6 TFLOPS fp32, 732 GB/s);
GTX 1080 Ti: NVIDIA product page (11.3 TFLOPS fp32, fp16 at 1/64 rate, 484 GB/s, 11 GB);
TPU v4: Google Cloud TPU v4 documentation (275 TFLOPS bf16, 32 GiB HBM2 at 1,200 GB/s,
inter-chip interconnect 2,400 Gbps per chip over 6 links of a 3D torus).

Interconnect sources: NVLink 2.0 (V100 datasheet: 300 GB/s total over 6 links, i.e. 25 GB/s
per direction per link); DGX-1 with V100 whitepaper (hybrid cube-mesh, 4 EDR InfiniBand
100 Gb/s NICs); DGX A100 user guide (NVSwitch, 600 GB/s GPU-to-GPU bidirectional, 8 HDR
200 Gb/s NICs for compute); DGX H100 user guide (NVLink 4, 900 GB/s bidirectional per GPU,
8 NDR 400 Gb/s NICs); PCI Express 3.0 x16 = 15.75 GB/s and 4.0 x16 = 31.5 GB/s per direction
(PCI-SIG). Latencies are order-of-magnitude estimates of one point-to-point transfer
(software + wire), not spec numbers; override them where you have measurements.

H100 SXM and H100 NVL (NVIDIA H100 Tensor Core GPU datasheet, SXM / NVL columns; the
datasheet's tensor-core figures are with 2:4 sparsity, dense rates are half of them):
BF16/FP16 tensor 1,979 / 1,671 TFLOPS sparse, i.e. 989.5 / 835.5 TFLOPS dense; FP32 67 / 60
TFLOPS; HBM3 80 GB / 94 GB at 3.35 TB/s / 3.9 TB/s; NVLink 900 GB/s / 600 GB/s
(bidirectional: 450 / 300 GB/s per direction) and PCIe Gen5 128 GB/s (bidirectional;
PCI-SIG: 32 GT/s x 16 lanes x 128/130 = 63 GB/s per direction). An HGX/DGX H100 board joins
its 8 SXM GPUs through NVSwitch (every pair at the full 450 GB/s per direction); H100 NVL
cards are bridged in pairs by NVLink and reach other cards over PCIe Gen5. Between nodes,
DGX H100 has one ConnectX-7 NDR InfiniBand port (400 Gb/s = 50 GB/s per direction) per GPU
(DGX H100 user guide); the InfiniBand latency (15 us per transfer through NCCL, switch hops
included) is an estimate like the others, not a spec number. HBM sizes are counted in GiB
like the other devices here (an "80 GB" H100 reports 81,559 MiB).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from distplan.errors import InputError

GB = 1e9
GiB = 1024**3
Gbps = 1e9 / 8  # bytes/second of one gigabit per second


@dataclass(frozen=True)
class DeviceSpec:
    """One accelerator type. FLOP/s, bytes, bytes/second."""

    name: str
    peak_fp16_flops: float
    peak_fp32_flops: float
    memory_bytes: int
    memory_bandwidth: float
    #: fraction of peak a well-tuned kernel reaches (roofline efficiency)
    efficiency: float = 0.7
    #: minimum time of one kernel launch, seconds
    launch_floor: float = 7e-6

    def peak_flops(self, dtype: str = "fp16") -> float:
        """Peak FLOP/s for a dtype. A half-precision kernel on a chip whose fp16 rate is below
        its fp32 rate (Pascal consumer GPUs) computes in fp32 (cuBLAS pseudo-fp16), so the
        faster of the two rates is used."""
        if dtype in ("fp16", "bf16", "float16", "bfloat16"):
            return max(self.peak_fp16_flops, self.peak_fp32_flops)
        return self.peak_fp32_flops

    def roofline_seconds(self, flops: float, bytes_moved: float, dtype: str = "fp16") -> float:
        """max(FLOPs / (peak x eff), bytes / (bandwidth x eff)) + launch floor, in seconds."""
        compute = flops / (self.peak_flops(dtype) * self.efficiency)
        memory = bytes_moved / (self.memory_bandwidth * self.efficiency)
        return max(compute, memory) + self.launch_floor

    def roofline_array(self, flops: np.ndarray, bytes_moved: np.ndarray, dtype: str = "fp16") -> np.ndarray:
        """`roofline_seconds` for arrays of ops (seconds)."""
        compute = np.asarray(flops, dtype=float) / (self.peak_flops(dtype) * self.efficiency)
        memory = np.asarray(bytes_moved, dtype=float) / (self.memory_bandwidth * self.efficiency)
        return np.maximum(compute, memory) + self.launch_floor

    def with_(self, **changes: Any) -> DeviceSpec:
        """A copy with other constants (e.g. ``efficiency=0.5``, ``launch_floor=5e-6``)."""
        return replace(self, **changes)


DEVICES: dict[str, DeviceSpec] = {
    d.name: d
    for d in [
        DeviceSpec("V100-16GB", 125e12, 15.7e12, 16 * GiB, 900 * GB),
        DeviceSpec("V100-32GB", 125e12, 15.7e12, 32 * GiB, 900 * GB),
        DeviceSpec("A100-40GB", 312e12, 19.5e12, 40 * GiB, 1555 * GB),
        DeviceSpec("A100-80GB", 312e12, 19.5e12, 80 * GiB, 2039 * GB),
        DeviceSpec("H100-80GB", 989e12, 67e12, 80 * GiB, 3350 * GB),  # H100 SXM5
        DeviceSpec("H100-NVL-94GB", 835.5e12, 60e12, 94 * GiB, 3900 * GB),
        DeviceSpec("T4", 65e12, 8.1e12, 16 * GiB, 320 * GB),
        DeviceSpec("P100", 21.2e12, 10.6e12, 16 * GiB, 732 * GB),
        DeviceSpec("1080Ti", 11.3e12 / 64, 11.3e12, 11 * GiB, 484 * GB),
        # the spec sheet gives bf16 only; fp32 matmuls run as 3 bf16 passes on the MXU
        # (an assumption, not a spec number)
        DeviceSpec("TPU-v4", 275e12, 275e12 / 3, 32 * GiB, 1200 * GB),
    ]
}
#: short aliases
ALIASES = {
    "V100": "V100-16GB",
    "A100": "A100-40GB",
    "H100": "H100-80GB",
    "H100-SXM": "H100-80GB",
    "H100-SXM-80GB": "H100-80GB",
    "H100-NVL": "H100-NVL-94GB",
    "GTX1080Ti": "1080Ti",
    "TPUv4": "TPU-v4",
}


def device(name: str) -> DeviceSpec:
    """A device by name or alias (e.g. "V100", "A100-80GB")."""
    key = ALIASES.get(name, name)
    if key not in DEVICES:
        raise InputError("device", f"unknown device {name!r}", f"use one of: {', '.join(sorted(DEVICES) + sorted(ALIASES))}")
    return DEVICES[key]


# -- interconnect constants (bytes/second per direction, seconds) --------------------------------

NVLINK2_LINK = 25 * GB  # one NVLink 2.0 link (V100), per direction
NVSWITCH_A100 = 300 * GB  # 600 GB/s bidirectional per GPU (DGX A100)
NVSWITCH_H100 = 450 * GB  # 900 GB/s bidirectional per GPU (DGX H100)
NVLINK_BRIDGE_H100_NVL = 300 * GB  # 600 GB/s bidirectional between the two cards of a pair
PCIE3_X16 = 15.75 * GB
PCIE4_X16 = 31.5 * GB
PCIE5_X16 = 63.0 * GB
IB_EDR = 100 * Gbps
IB_HDR = 200 * Gbps
IB_NDR = 400 * Gbps
ETH_10G = 10 * Gbps
ETH_25G = 25 * Gbps
ETH_100G = 100 * Gbps
TPU_V4_ICI_LINK = 2400 * Gbps / 6  # 2,400 Gbps per chip over 6 torus links = 50 GB/s each
H100_SOURCE = "NVIDIA H100 Tensor Core GPU datasheet (SXM / NVL columns); DGX H100 user guide (NVSwitch, ConnectX-7 NDR 400 Gb/s per GPU)"
#: order-of-magnitude point-to-point latencies (seconds); estimates, not spec numbers
LAT_NVLINK = 5e-6
LAT_PCIE = 1e-5
LAT_IB = 1.5e-5
LAT_ETH = 5e-5
LAT_ICI = 5e-6


# -- clusters ------------------------------------------------------------------------------------


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


@dataclass(frozen=True)
class CatalogueEntry:
    """A named cluster: a description and a zero-argument builder."""

    name: str
    description: str
    build: Callable[[], ClusterSpec]


def _networks() -> Any:
    from distplan.models import networks

    return networks


#: names defined in `distplan.models.networks`, re-exported here (imported on first use)
_NETWORK_NAMES = frozenset({"BLOCKS", "Dimension", "MultiDimNetwork", "Torus", "libra_3d", "libra_4d", "tpu_v4_torus"})


def __getattr__(name: str) -> Any:
    if name in _NETWORK_NAMES:
        return getattr(_networks(), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _entries() -> list[CatalogueEntry]:
    nv = "NVIDIA DGX A100 / DGX H100 user guides (NVSwitch GPU-to-GPU bandwidth)"
    pcie = "PCI-SIG: PCIe 3.0 x16 15.75 GB/s, 4.0 x16 31.5 GB/s per direction"
    return [
        CatalogueEntry("dgx1", "DGX-1: 8x V100-16GB, hybrid cube-mesh NVLink", dgx1),
        CatalogueEntry("dgx1-32gb", "DGX-1: 8x V100-32GB, hybrid cube-mesh NVLink", lambda: replace(dgx1("V100-32GB"), name="dgx1-32gb")),
        CatalogueEntry("dgx-a100", "DGX A100: 8x A100-40GB on NVSwitch (300 GB/s per direction)", lambda: uniform_cluster("dgx-a100", "DGX A100: 8x A100-40GB, NVSwitch", "A100-40GB", 8, NVSWITCH_A100, LAT_NVLINK, nv)),
        CatalogueEntry("dgx-a100-80gb", "DGX A100: 8x A100-80GB on NVSwitch", lambda: uniform_cluster("dgx-a100-80gb", "DGX A100: 8x A100-80GB, NVSwitch", "A100-80GB", 8, NVSWITCH_A100, LAT_NVLINK, nv)),
        CatalogueEntry("dgx-h100", "DGX H100: 8x H100-80GB on NVSwitch (450 GB/s per direction)", lambda: uniform_cluster("dgx-h100", "DGX H100: 8x H100-80GB, NVSwitch", "H100-80GB", 8, NVSWITCH_H100, LAT_NVLINK, nv)),
        CatalogueEntry("pcie-v100x4", "4x V100-16GB on one PCIe 3.0 switch", lambda: uniform_cluster("pcie-v100x4", "4x V100 on PCIe 3.0", "V100-16GB", 4, PCIE3_X16, LAT_PCIE, pcie)),
        CatalogueEntry("pcie-t4x4", "4x T4 on PCIe 3.0", lambda: uniform_cluster("pcie-t4x4", "4x T4 on PCIe 3.0", "T4", 4, PCIE3_X16, LAT_PCIE, pcie)),
        CatalogueEntry("pcie-a100x8", "8x A100-40GB on PCIe 4.0 (no NVLink)", lambda: uniform_cluster("pcie-a100x8", "8x A100-40GB on PCIe 4.0", "A100-40GB", 8, PCIE4_X16, LAT_PCIE, pcie)),
        CatalogueEntry("2xdgx1-ib", "2 DGX-1 nodes, EDR InfiniBand (12.5 GB/s per GPU pair)", lambda: multi_node(dgx1(), 2, IB_EDR, LAT_IB, "2xdgx1-ib", "EDR InfiniBand 100 Gb/s")),
        CatalogueEntry("4xdgx1-ib", "4 DGX-1 nodes, EDR InfiniBand", lambda: multi_node(dgx1(), 4, IB_EDR, LAT_IB, "4xdgx1-ib", "EDR InfiniBand 100 Gb/s")),
        CatalogueEntry("2xdgx1-eth", "2 DGX-1 nodes, 25 GbE", lambda: multi_node(dgx1(), 2, ETH_25G, LAT_ETH, "2xdgx1-eth", "25 GbE")),
        CatalogueEntry(
            "4xdgx-a100-ib",
            "4 DGX A100 nodes, HDR InfiniBand (25 GB/s per GPU)",
            lambda: multi_node(uniform_cluster("dgx-a100", "DGX A100: 8x A100-40GB, NVSwitch", "A100-40GB", 8, NVSWITCH_A100, LAT_NVLINK, nv), 4, IB_HDR, LAT_IB, "4xdgx-a100-ib", "HDR InfiniBand 200 Gb/s"),
        ),
        CatalogueEntry(
            "2xdgx-h100-ib",
            "2 DGX H100 nodes, NDR InfiniBand (50 GB/s per GPU)",
            lambda: multi_node(uniform_cluster("dgx-h100", "DGX H100: 8x H100-80GB, NVSwitch", "H100-80GB", 8, NVSWITCH_H100, LAT_NVLINK, nv), 2, IB_NDR, LAT_IB, "2xdgx-h100-ib", "NDR InfiniBand 400 Gb/s"),
        ),
        CatalogueEntry("h100-sxm", "HGX/DGX H100 node: 8x H100 SXM5 80GB on NVSwitch (450 GB/s per direction)", h100_sxm_node),
        CatalogueEntry("h100-nvl", "8x H100 NVL 94GB: NVLink-bridged pairs (300 GB/s), PCIe Gen5 (63 GB/s) between pairs", h100_nvl_node),
        CatalogueEntry("2xh100-sxm-ib", "2 H100 SXM nodes (16 GPUs), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(2)),
        CatalogueEntry("4xh100-sxm-ib", "4 H100 SXM nodes (32 GPUs), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(4)),
        CatalogueEntry("8xh100-sxm-ib", "8 H100 SXM nodes (64 GPUs, an 8x8 mesh), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(8)),
        CatalogueEntry("2xh100-nvl-ib", "2 H100 NVL servers (16 GPUs), NDR InfiniBand 25 GB/s per GPU", lambda: h100_cluster(2, "nvl")),
        CatalogueEntry("tag-mix", "TAG-like: 4x V100 + 4x P100 + 4x 1080Ti, 25 GbE between nodes", tag_mix),
        CatalogueEntry("tag-mix-slow", "TAG-like: 4x V100 + 4x P100 + 4x 1080Ti, 10 GbE between nodes", lambda: tag_mix(slow=True)),
        CatalogueEntry("libra-4d:64", "first 64 NPUs of LIBRA's 4D [ring 4, FC 8, ring 4, switch 32] network", lambda: _networks().libra_4d().cluster(64)),
        CatalogueEntry("libra-3d:64", "first 64 NPUs of LIBRA's 3D [ring 16, FC 8, switch 32] network", lambda: _networks().libra_3d().cluster(64)),
        CatalogueEntry("tpu-v4-4x4x4", "TPU-v4-like 4x4x4 3D torus (64 chips, 50 GB/s ICI links)", lambda: _networks().tpu_v4_torus().cluster()),
        CatalogueEntry("tpu-v4-2x2x2", "TPU-v4-like 2x2x2 3D torus (8 chips)", lambda: _networks().tpu_v4_torus((2, 2, 2)).cluster()),
    ]


CLUSTERS: dict[str, CatalogueEntry] = {e.name: e for e in _entries()}


def cluster(name: str, n_devices: int | None = None) -> ClusterSpec:
    """A catalogue cluster by name; ``n_devices`` keeps its first devices (``"dgx1:4"`` too)."""
    base, sep, count = name.partition(":")
    if sep and name not in CLUSTERS:
        if not count.isdigit():
            raise InputError("cluster", f"{name!r}: the part after ':' must be a device count", "write e.g. dgx1:4")
        n_devices = int(count)
        name = base
    if name not in CLUSTERS:
        raise InputError("cluster", f"unknown cluster {name!r}", f"use one of: {', '.join(CLUSTERS)} (optionally NAME:DEVICES)")
    spec = CLUSTERS[name].build()
    return spec if n_devices is None else spec.subset(n_devices)


def clusters() -> list[CatalogueEntry]:
    """Every named cluster of the catalogue."""
    return list(CLUSTERS.values())


__all__ = [
    "ALIASES",
    "CLUSTERS",
    "DEVICES",
    "ClusterSpec",
    "DeviceSpec",
    "Link",
    "cluster",
    "clusters",
    "combine_nodes",
    "device",
    "dgx1",
    "h100_cluster",
    "h100_nvl_node",
    "h100_sxm_node",
    "multi_node",
    "tag_mix",
    "uniform_cluster",
]
