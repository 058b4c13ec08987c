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
        DeviceSpec("H100-80GB", 989e12, 67e12, 80 * GiB, 3350 * GB),
        DeviceSpec("T4", 65e12, 8.1e12, 16 * GiB, 320 * GB),
        DeviceSpec("P100", 21.2e12, 10.6e12, 16 * GiB, 732 * GB),
        DeviceSpec("1080Ti", 11.3e12 / 64, 11.3e12, 11 * GiB, 484 * GB),
        # the spec sheet gives bf16 only; fp32 matmuls run as 3 bf16 passes on the MXU
        # (an assumption, not a spec number)
        DeviceSpec("TPU-v4", 275e12, 275e12 / 3, 32 * GiB, 1200 * GB),
    ]
}
#: short aliases
ALIASES = {"V100": "V100-16GB", "A100": "A100-40GB", "H100": "H100-80GB", "GTX1080Ti": "1080Ti", "TPUv4": "TPU-v4"}


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
PCIE3_X16 = 15.75 * GB
PCIE4_X16 = 31.5 * GB
IB_EDR = 100 * Gbps
IB_HDR = 200 * Gbps
IB_NDR = 400 * Gbps
ETH_10G = 10 * Gbps
ETH_25G = 25 * Gbps
ETH_100G = 100 * Gbps
TPU_V4_ICI_LINK = 2400 * Gbps / 6  # 2,400 Gbps per chip over 6 torus links = 50 GB/s each
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


@dataclass(frozen=True)
class CatalogueEntry:
    """A named cluster: a description and a zero-argument builder."""

    name: str
    description: str
    build: Callable[[], ClusterSpec]


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
        CatalogueEntry("tag-mix", "TAG-like: 4x V100 + 4x P100 + 4x 1080Ti, 25 GbE between nodes", tag_mix),
        CatalogueEntry("tag-mix-slow", "TAG-like: 4x V100 + 4x P100 + 4x 1080Ti, 10 GbE between nodes", lambda: tag_mix(slow=True)),
        CatalogueEntry("libra-4d:64", "first 64 NPUs of LIBRA's 4D [ring 4, FC 8, ring 4, switch 32] network", lambda: libra_4d().cluster(64)),
        CatalogueEntry("libra-3d:64", "first 64 NPUs of LIBRA's 3D [ring 16, FC 8, switch 32] network", lambda: libra_3d().cluster(64)),
        CatalogueEntry("tpu-v4-4x4x4", "TPU-v4-like 4x4x4 3D torus (64 chips, 50 GB/s ICI links)", lambda: tpu_v4_torus().cluster()),
        CatalogueEntry("tpu-v4-2x2x2", "TPU-v4-like 2x2x2 3D torus (8 chips)", lambda: tpu_v4_torus((2, 2, 2)).cluster()),
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
    "Dimension",
    "Link",
    "MultiDimNetwork",
    "Torus",
    "cluster",
    "clusters",
    "combine_nodes",
    "device",
    "dgx1",
    "libra_3d",
    "libra_4d",
    "multi_node",
    "tag_mix",
    "tpu_v4_torus",
    "uniform_cluster",
]
