"""LIBRA bandwidth provisioning: the records of an instance and the constants of the format.

Units: bytes/s per NPU for bandwidths, USD per byte/s for prices, seconds for compute,
bytes for collectives. A network dimension, a collective, a layer of the workload and a
linear constraint on the bandwidths; `GB` converts LIBRA's GB/s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: bytes/s in one GB/s (LIBRA's bandwidth unit; 1 GB/s = 1 byte/ns)
GB = 1e9
PHASES = ("fwd", "ig", "wg")
COLLECTIVE_TYPES = ("all_reduce", "reduce_scatter", "all_gather", "all_to_all")
BLOCKS = ("ring", "fully_connected", "switch")
SENSES = ("<=", ">=", "==")
TRAINING_LOOPS = ("no_overlap",)
OBJECTIVES = ("time", "time_x_cost")
#: relative tolerance of the evaluator's constraint checks
TOLERANCE = 1e-6


@dataclass(frozen=True)
class Dimension:
    """One network dimension. Bandwidths in bytes/s per NPU; prices in USD per byte/s."""

    name: str
    size: int
    block: str
    price_link: float
    price_switch: float = 0.0
    price_nic: float = 0.0
    min_bandwidth: float = 0.0
    max_bandwidth: float = math.inf
    #: allowed bandwidths (bytes/s) when the dimension must use one of a menu of link speeds
    bandwidth_options: tuple[float, ...] | None = None
    cost_class: str | None = None


@dataclass(frozen=True)
class Collective:
    """A collective of ``bytes`` bytes in one phase; ``npus[d]`` NPUs take part along dimension d."""

    phase: str
    type: str
    bytes: float
    npus: tuple[int, ...]


@dataclass(frozen=True)
class Layer:
    """Compute times in seconds per phase (fwd, ig, wg) and the layer's collectives."""

    name: str
    compute: tuple[float, float, float]
    collectives: tuple[Collective, ...] = ()


@dataclass(frozen=True)
class LinearConstraint:
    """``sum_d coeffs[d] * B_d  sense  rhs`` with B in bytes/s (rhs in bytes/s)."""

    name: str
    coeffs: tuple[tuple[str, float], ...]
    sense: str
    rhs: float
