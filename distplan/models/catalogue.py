"""Device and cluster catalogue: the named clusters, and the one place to look devices,
clusters and networks up.

Units: FLOP/s, bytes, bytes/second, seconds. Bandwidths are per direction. The pieces, one
module each, all re-exported here (this module's API, as before the split):

* `distplan.models.hardware`: spec-sheet numbers of accelerators (`DeviceSpec`, `device`)
  and interconnects, with their sources;
* `distplan.models.clusters`: `ClusterSpec`, `Link` and the node / multi-node builders;
* `distplan.models.networks`: LIBRA's multi-dimensional networks and TPU v4 tori.

`cluster(name)` builds a named cluster of `CLUSTERS` (``"dgx1:4"``: its first 4 devices).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from distplan.errors import InputError
from distplan.models.clusters import (
    DGX1_NVLINKS,
    ClusterSpec,
    Link,
    combine_nodes,
    dgx1,
    h100_cluster,
    h100_nvl_node,
    h100_sxm_node,
    multi_node,
    tag_mix,
    uniform_cluster,
)
from distplan.models.hardware import (
    ALIASES,
    DEVICES,
    ETH_10G,
    ETH_25G,
    ETH_100G,
    GB,
    H100_SOURCE,
    IB_EDR,
    IB_HDR,
    IB_NDR,
    LAT_ETH,
    LAT_IB,
    LAT_ICI,
    LAT_NVLINK,
    LAT_PCIE,
    NVLINK2_LINK,
    NVLINK_BRIDGE_H100_NVL,
    NVSWITCH_A100,
    NVSWITCH_H100,
    PCIE3_X16,
    PCIE4_X16,
    PCIE5_X16,
    TPU_V4_ICI_LINK,
    DeviceSpec,
    Gbps,
    GiB,
    device,
)
from distplan.models.networks import (
    BLOCKS,
    Dimension,
    MultiDimNetwork,
    Torus,
    libra_3d,
    libra_4d,
    tpu_v4_torus,
)


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
        CatalogueEntry("h100-sxm", "HGX/DGX H100 node: 8x H100 SXM5 80GB on NVSwitch (450 GB/s per direction)", h100_sxm_node),
        CatalogueEntry("h100-nvl", "8x H100 NVL 94GB: NVLink-bridged pairs (300 GB/s), PCIe Gen5 (63 GB/s) between pairs", h100_nvl_node),
        CatalogueEntry("2xh100-sxm-ib", "2 H100 SXM nodes (16 GPUs), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(2)),
        CatalogueEntry("4xh100-sxm-ib", "4 H100 SXM nodes (32 GPUs), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(4)),
        CatalogueEntry("8xh100-sxm-ib", "8 H100 SXM nodes (64 GPUs, an 8x8 mesh), NDR InfiniBand 50 GB/s per GPU", lambda: h100_cluster(8)),
        CatalogueEntry("2xh100-nvl-ib", "2 H100 NVL servers (16 GPUs), NDR InfiniBand 25 GB/s per GPU", lambda: h100_cluster(2, "nvl")),
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
    "BLOCKS",
    "CLUSTERS",
    "CatalogueEntry",
    "ClusterSpec",
    "DEVICES",
    "DGX1_NVLINKS",
    "DeviceSpec",
    "Dimension",
    "ETH_100G",
    "ETH_10G",
    "ETH_25G",
    "GB",
    "Gbps",
    "GiB",
    "H100_SOURCE",
    "IB_EDR",
    "IB_HDR",
    "IB_NDR",
    "LAT_ETH",
    "LAT_IB",
    "LAT_ICI",
    "LAT_NVLINK",
    "LAT_PCIE",
    "Link",
    "MultiDimNetwork",
    "NVLINK2_LINK",
    "NVLINK_BRIDGE_H100_NVL",
    "NVSWITCH_A100",
    "NVSWITCH_H100",
    "PCIE3_X16",
    "PCIE4_X16",
    "PCIE5_X16",
    "TPU_V4_ICI_LINK",
    "Torus",
    "cluster",
    "clusters",
    "combine_nodes",
    "device",
    "dgx1",
    "h100_cluster",
    "h100_nvl_node",
    "h100_sxm_node",
    "libra_3d",
    "libra_4d",
    "multi_node",
    "tag_mix",
    "tpu_v4_torus",
    "uniform_cluster",
]
