"""Compression selection (TAG): the records of an instance and the constants of the format.

Units: seconds, bytes, bytes/second. A device, an op replicated on devices, an edge (a
tensor between ops), a gradient to synchronize and a lossless codec; the element sizes of
the gradient types and the method names the ``distplan/1`` document of kind
``compression`` allows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}
ROLES = ("forward", "backward", "update")
CODEC_METHODS = ("entropy", "sparse_index")
BUILTIN_METHODS = ("allreduce", "sfb")
#: bytes of one row index in the sparse-index encoding (int32)
INDEX_BYTES = 4
TOL = 1e-9


def profile_key(dtype: str, density: float) -> str:
    """The key of a gradient's tensor profile in a codec's ``ratio`` table.

    ``"float32"`` for a dense float32 gradient, ``"float32/density=0.008"`` for a sparse one.
    """
    return dtype if density >= 1.0 else f"{dtype}/density={density:.6g}"


@dataclass(frozen=True)
class Device:
    """A GPU: catalogue type, node (for the link bandwidth), memory capacity and the bytes
    already reserved by weights, optimizer state and framework."""

    name: str
    type: str
    node: str
    memory_bytes: float
    reserved_bytes: float


@dataclass(frozen=True)
class Op:
    """An op replicated on ``devices``; ``compute_seconds`` per device type for one replica's
    shard of the batch; ``memory_bytes`` per replica (activations/workspace)."""

    name: str
    compute_seconds: dict[str, float]
    devices: tuple[str, ...]
    memory_bytes: float
    eligible: bool
    role: str


@dataclass(frozen=True)
class Edge:
    """A tensor from ``src`` to ``dst``: ``bytes`` of one replica's shard."""

    src: str
    dst: str
    bytes: float


@dataclass(frozen=True)
class Gradient:
    """A gradient produced by ``op`` and applied by ``update``: ``bytes``, element type,
    row density (fraction of nonzero rows, < 1 for embedding gradients), weight ``shape``
    [rows, cols] and the rows of its sufficient factors per replica (``factor_rows``)."""

    name: str
    op: str
    update: str
    bytes: float
    dtype: str
    density: float
    shape: tuple[int, int] | None
    factor_rows: int | None

    @property
    def profile(self) -> str:
        return profile_key(self.dtype, self.density)


@dataclass(frozen=True)
class Codec:
    """A lossless codec: size ``ratio`` per tensor profile (compressed / original) and
    throughputs per device type in uncompressed bytes per second."""

    name: str
    method: str
    library: str
    level: int | None
    ratio: dict[str, float]
    encode_bytes_per_second: dict[str, float]
    decode_bytes_per_second: dict[str, float]
    measured: dict[str, Any] | None = None
