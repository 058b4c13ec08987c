"""Public spec-sheet numbers of accelerators and interconnects (the catalogue's hardware).

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
