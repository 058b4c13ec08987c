"""Device catalogue: public spec-sheet numbers of accelerators.

Units: FLOP/s, bytes, bytes/second. Sources (vendor datasheets):
V100: NVIDIA Tesla V100 datasheet (SXM2: 125 TFLOPS tensor fp16, 15.7 TFLOPS fp32, 900 GB/s HBM2);
A100: NVIDIA A100 datasheet (312 TFLOPS fp16 tensor dense, 19.5 TFLOPS fp32, 1,555 GB/s for
40 GB, 2,039 GB/s for 80 GB SXM); H100: NVIDIA H100 datasheet (SXM5: 989 TFLOPS fp16/bf16
dense, 67 TFLOPS fp32, 3.35 TB/s); T4: NVIDIA T4 datasheet (65 TFLOPS fp16, 8.1 TFLOPS fp32,
320 GB/s); P100: Tesla P100 datasheet (SXM2: 21.2 TFLOPS fp16, 10.6 TFLOPS fp32, 732 GB/s);
GTX 1080 Ti: NVIDIA product page (11.3 TFLOPS fp32, fp16 at 1/64 rate, 484 GB/s, 11 GB).
"""

from __future__ import annotations

from dataclasses import dataclass

from distplan.errors import InputError

GB = 1e9
GiB = 1024**3


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
        return self.peak_fp16_flops if dtype in ("fp16", "bf16", "float16", "bfloat16") else self.peak_fp32_flops

    def roofline_seconds(self, flops: float, bytes_moved: float, dtype: str = "fp16") -> float:
        """max(FLOPs / (peak x eff), bytes / (bandwidth x eff)) + launch floor, in seconds."""
        compute = flops / (self.peak_flops(dtype) * self.efficiency)
        memory = bytes_moved / (self.memory_bandwidth * self.efficiency)
        return max(compute, memory) + self.launch_floor


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
    ]
}
#: short aliases
ALIASES = {"V100": "V100-16GB", "A100": "A100-40GB", "H100": "H100-80GB", "GTX1080Ti": "1080Ti"}


def device(name: str) -> DeviceSpec:
    """A device by name or alias (e.g. "V100", "A100-80GB")."""
    key = ALIASES.get(name, name)
    if key not in DEVICES:
        raise InputError("device", f"unknown device {name!r}", f"use one of: {', '.join(sorted(DEVICES) + sorted(ALIASES))}")
    return DEVICES[key]
