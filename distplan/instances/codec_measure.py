"""Measure lossless codecs on gradient-like tensors and record them in an instance.

For every tensor profile of an instance's gradients (element type and row density), a
tensor is generated with numpy: random-normal values (scale 1e-3, like gradients) in
float16/float32, and for sparse profiles (embedding gradients) only a ``density`` fraction of
the rows nonzero. Each codec compresses it, the output is decompressed and compared bit for
bit (a codec that does not round-trip is an error), and the size ratio (compressed /
original) and the encode / decode throughputs (uncompressed bytes per second, best of
``repeat`` runs) are recorded. Codecs: zstandard (levels 1 and 3), lz4 (frame), and
sparse-index (nonzero rows + int32 row indices, numpy). They run on this host's CPU, so the
same throughput is recorded for every device type of the instance (``measured.host`` says
where).
"""

from __future__ import annotations

import math
import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from distplan.errors import InputError
from distplan.models.compression_records import DTYPE_BYTES, INDEX_BYTES, profile_key

NUMPY_DTYPES = {"float16": np.float16, "float32": np.float32}


@dataclass(frozen=True)
class CodecSpec:
    """A codec to measure: its name in the instance, method, library and level."""

    name: str
    method: str  # "entropy" or "sparse_index"
    library: str
    level: int | None


DEFAULT_CODECS = (
    CodecSpec("zstd-1", "entropy", "zstandard", 1),
    CodecSpec("zstd-3", "entropy", "zstandard", 3),
    CodecSpec("lz4", "entropy", "lz4", 0),
    CodecSpec("sparse-index", "sparse_index", "numpy", None),
)


def gradient_tensor(elements: int, dtype: str, density: float, row_length: int, seed: int = 0) -> np.ndarray:
    """A gradient-like 2-D tensor [rows, row_length]: normal(0, 1e-3) values; when
    density < 1, only round(density * rows) rows (at least one) are nonzero."""
    if dtype not in NUMPY_DTYPES:
        raise InputError("dtype", f"cannot generate {dtype!r} tensors", f"use one of: {', '.join(NUMPY_DTYPES)}")
    rng = np.random.default_rng(seed)
    rows = max(1, elements // row_length)
    out = np.zeros((rows, row_length), dtype=NUMPY_DTYPES[dtype])
    if density >= 1.0:
        out[:] = rng.normal(0.0, 1e-3, size=out.shape)
    else:
        nnz = max(1, int(round(density * rows)))
        chosen = rng.choice(rows, size=nnz, replace=False)
        out[chosen] = rng.normal(0.0, 1e-3, size=(nnz, row_length))
    return out


def _entropy_functions(spec: CodecSpec) -> tuple[Callable[[bytes], bytes], Callable[[bytes], bytes]]:
    if spec.library == "zstandard":
        import zstandard

        cctx = zstandard.ZstdCompressor(level=int(spec.level or 3))
        dctx = zstandard.ZstdDecompressor()
        return cctx.compress, dctx.decompress
    if spec.library == "lz4":
        import lz4.frame

        level = int(spec.level or 0)
        return (lambda b: lz4.frame.compress(b, compression_level=level)), lz4.frame.decompress
    raise InputError("codec", f"unknown entropy library {spec.library!r}", "use zstandard or lz4")


def _sparse_encode(t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    nz = np.flatnonzero(np.any(t != 0, axis=1)).astype(np.int32)
    return nz, t[nz]


def _sparse_decode(idx: np.ndarray, rows: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    out = np.zeros(shape, dtype=rows.dtype)
    out[idx] = rows
    return out


def measure_one(spec: CodecSpec, tensor: np.ndarray, repeat: int = 3) -> dict[str, float]:
    """Ratio and throughputs (uncompressed bytes/second, best of ``repeat``) of one codec on
    one tensor; raises `InputError` when the codec does not round-trip exactly."""
    if not isinstance(repeat, int) or repeat < 1:
        raise InputError("repeat", f"{repeat!r} must be an integer >= 1")
    raw = tensor.tobytes()
    nbytes = len(raw)
    enc_best = dec_best = math.inf
    if spec.method == "sparse_index":
        for _ in range(repeat):
            t0 = time.perf_counter()
            idx, rows = _sparse_encode(tensor)
            t1 = time.perf_counter()
            back = _sparse_decode(idx, rows, tensor.shape)
            t2 = time.perf_counter()
            enc_best, dec_best = min(enc_best, t1 - t0), min(dec_best, t2 - t1)
        size = idx.size * INDEX_BYTES + rows.nbytes
        ok = back.tobytes() == raw
    elif spec.method == "entropy":
        compress, decompress = _entropy_functions(spec)
        for _ in range(repeat):
            t0 = time.perf_counter()
            packed = compress(raw)
            t1 = time.perf_counter()
            unpacked = decompress(packed)
            t2 = time.perf_counter()
            enc_best, dec_best = min(enc_best, t1 - t0), min(dec_best, t2 - t1)
        size = len(packed)
        ok = unpacked == raw
    else:
        raise InputError("codec.method", f"unknown method {spec.method!r}", "use entropy or sparse_index")
    if not ok:
        raise InputError("codec", f"codec {spec.name!r} did not reproduce the tensor exactly", "it is not lossless; do not use it")
    return {
        "ratio": size / nbytes,
        "encode_bytes_per_second": nbytes / max(enc_best, 1e-9),
        "decode_bytes_per_second": nbytes / max(dec_best, 1e-9),
    }


def available_codecs(specs: Iterable[CodecSpec] = DEFAULT_CODECS) -> list[CodecSpec]:
    """The codecs whose library is installed here."""
    out = []
    for s in specs:
        if s.library == "zstandard":
            try:
                import zstandard  # noqa: F401
            except ImportError:
                continue
        if s.library == "lz4":
            try:
                import lz4.frame  # noqa: F401
            except ImportError:
                continue
        out.append(s)
    return out


def measure_codecs(
    profiles: Iterable[tuple[str, float, int]],
    device_types: Iterable[str],
    specs: Iterable[CodecSpec] | None = None,
    elements: int = 1 << 20,
    repeat: int = 3,
    seed: int = 0,
) -> list[dict[str, Any]]:
    """The ``codecs`` section: every codec measured on every profile (dtype, density, row
    length). Sparse-index is measured on sparse profiles only. Throughputs are the minimum
    over profiles (a conservative single rate per codec)."""
    for key, value, least in (("elements", elements, 1), ("repeat", repeat, 1), ("seed", seed, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise InputError(key, f"{value!r} must be an integer >= {least}")
    specs = available_codecs(specs if specs is not None else DEFAULT_CODECS)
    profiles = sorted(set(profiles))
    types = sorted(set(device_types))
    section = []
    for spec in specs:
        ratio: dict[str, float] = {}
        enc = dec = math.inf
        per_profile: dict[str, dict[str, float]] = {}
        for dtype, density, row_length in profiles:
            if spec.method == "sparse_index" and density >= 1.0:
                continue
            tensor = gradient_tensor(elements, dtype, density, row_length, seed)
            m = measure_one(spec, tensor, repeat)
            key = profile_key(dtype, density)
            ratio[key] = m["ratio"]
            per_profile[key] = m
            enc = min(enc, m["encode_bytes_per_second"])
            dec = min(dec, m["decode_bytes_per_second"])
        if not ratio:
            continue
        section.append(
            {
                "name": spec.name,
                "method": spec.method,
                "lossless": True,
                "library": spec.library,
                "level": spec.level,
                "ratio": ratio,
                "encode_bytes_per_second": {t: enc for t in types},
                "decode_bytes_per_second": {t: dec for t in types},
                "measured": {
                    "host": f"{platform.machine()} {platform.processor() or platform.platform()}".strip(),
                    "cpu_count": os.cpu_count(),
                    "elements": elements,
                    "repeat": repeat,
                    "seed": seed,
                    "per_profile": per_profile,
                    "note": "measured on the host CPU; the same rate is recorded for every device type",
                },
            }
        )
    return section


def instance_profiles(doc: Mapping[str, Any]) -> list[tuple[str, float, int]]:
    """(dtype, density, row length) of the gradients of an instance document."""
    out = set()
    for k, g in enumerate(doc.get("graph", {}).get("gradients", [])):
        dtype = g.get("dtype", "float32")
        if dtype not in DTYPE_BYTES:
            raise InputError(f"graph.gradients[{k}].dtype", f"unknown dtype {dtype!r}")
        density = float(g.get("density", 1.0))
        shape = g.get("shape")
        row_length = int(shape[1]) if isinstance(shape, list) and len(shape) == 2 else 1024
        out.add((dtype, density, row_length if density < 1.0 else 1024))
    return sorted(out)


def measure_instance(doc: Mapping[str, Any], specs: Iterable[CodecSpec] | None = None, elements: int = 1 << 20, repeat: int = 3, seed: int = 0) -> dict[str, Any]:
    """A copy of an instance document whose ``codecs`` section is freshly measured."""
    types = [d["type"] for d in doc["cluster"]["devices"]]
    out = dict(doc)
    out["codecs"] = measure_codecs(instance_profiles(doc), types, specs, elements, repeat, seed)
    return out
