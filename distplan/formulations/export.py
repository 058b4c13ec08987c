"""Export assembled models to MPS and CPLEX-LP files (for debugging and outside solvers)."""

from __future__ import annotations

import numpy as np

from distplan.formulations.model import ModelArrays

_INF = 1e30


def _num(v: float) -> str:
    return repr(float(v))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_[]." else "_" for ch in name)


def _names(arrays: ModelArrays) -> tuple[list[str], list[str]]:
    cols = [_safe(n) for n in arrays.col_names] or [f"x{j}" for j in range(arrays.num_vars)]
    rows = [_safe(n) for n in arrays.row_names] or [f"r{i}" for i in range(arrays.num_rows)]
    return cols, rows


def write_mps(arrays: ModelArrays, path: str) -> None:
    """Free-format MPS; ranged rows use RANGES; the objective sense is written in OBJSENSE."""
    cols, rows = _names(arrays)
    A = arrays.A.tocsc()
    lines = [f"NAME {_safe(arrays.name)}", "OBJSENSE", "    MAX" if arrays.sense == "max" else "    MIN", "ROWS", " N obj"]
    kinds: list[str] = []
    for i in range(arrays.num_rows):
        lo, hi = arrays.row_lo[i], arrays.row_hi[i]
        if lo == hi:
            k = "E"
        elif np.isfinite(hi) and np.isfinite(lo):
            k = "L"  # with a range
        elif np.isfinite(hi):
            k = "L"
        elif np.isfinite(lo):
            k = "G"
        else:
            k = "N"
        kinds.append(k)
        lines.append(f" {k} {rows[i]}")
    lines.append("COLUMNS")
    in_int = False
    for j in range(arrays.num_vars):
        integer = bool(arrays.integrality[j])
        if integer and not in_int:
            lines.append("    MARKER INTORG 'MARKER' 'INTORG'")
            in_int = True
        if not integer and in_int:
            lines.append("    MARKER INTEND 'MARKER' 'INTEND'")
            in_int = False
        if arrays.c[j] != 0:
            lines.append(f"    {cols[j]} obj {_num(arrays.c[j])}")
        for p in range(A.indptr[j], A.indptr[j + 1]):
            lines.append(f"    {cols[j]} {rows[A.indices[p]]} {_num(A.data[p])}")
        if arrays.c[j] == 0 and A.indptr[j] == A.indptr[j + 1]:
            lines.append(f"    {cols[j]} obj 0")
    if in_int:
        lines.append("    MARKER INTEND 'MARKER' 'INTEND'")
    lines.append("RHS")
    if arrays.offset:
        lines.append(f"    rhs obj {_num(-arrays.offset)}")
    ranges = []
    for i, k in enumerate(kinds):
        lo, hi = arrays.row_lo[i], arrays.row_hi[i]
        if k in ("E", "G"):
            rhs = lo
        elif k == "L":
            rhs = hi
        else:
            continue
        if rhs != 0:
            lines.append(f"    rhs {rows[i]} {_num(rhs)}")
        if k == "L" and np.isfinite(lo):
            ranges.append(f"    rng {rows[i]} {_num(hi - lo)}")
    if ranges:
        lines.append("RANGES")
        lines.extend(ranges)
    lines.append("BOUNDS")
    for j in range(arrays.num_vars):
        lo, hi = arrays.col_lo[j], arrays.col_hi[j]
        if arrays.integrality[j] and lo == 0 and hi == 1:
            lines.append(f" BV bnd {cols[j]}")
            continue
        if lo == hi:
            lines.append(f" FX bnd {cols[j]} {_num(lo)}")
            continue
        if not np.isfinite(lo) and not np.isfinite(hi):
            lines.append(f" FR bnd {cols[j]}")
            continue
        if not np.isfinite(lo):
            lines.append(f" MI bnd {cols[j]}")
        elif lo != 0:
            lines.append(f" LO bnd {cols[j]} {_num(lo)}")
        if np.isfinite(hi):
            lines.append(f" UP bnd {cols[j]} {_num(hi)}")
        elif arrays.integrality[j]:
            lines.append(f" PL bnd {cols[j]}")
    lines.append("ENDATA")
    with open(path, "w") as fh:
        fh.write("\n".join(lines) + "\n")


def write_lp(arrays: ModelArrays, path: str) -> None:
    """CPLEX LP format; two-sided rows are written as two rows."""
    cols, rows = _names(arrays)
    cols = [c.replace("[", "_").replace("]", "") for c in cols]
    rows = [r.replace("[", "_").replace("]", "") for r in rows]
    A = arrays.A.tocsr()

    def terms(idx: np.ndarray, vals: np.ndarray) -> str:
        if idx.size == 0:
            return "0 " + cols[0] if cols else "0"
        return " ".join(f"{'+' if v >= 0 else '-'} {_num(abs(v))} {cols[j]}" for j, v in zip(idx, vals))

    nz = np.flatnonzero(arrays.c)
    out = ["\\ " + arrays.name, "Maximize" if arrays.sense == "max" else "Minimize", " obj: " + terms(nz, arrays.c[nz])]
    out.append("Subject To")
    for i in range(arrays.num_rows):
        idx = A.indices[A.indptr[i] : A.indptr[i + 1]]
        vals = A.data[A.indptr[i] : A.indptr[i + 1]]
        lo, hi = arrays.row_lo[i], arrays.row_hi[i]
        body = terms(idx, vals)
        if lo == hi:
            out.append(f" {rows[i]}: {body} = {_num(lo)}")
            continue
        if np.isfinite(lo):
            out.append(f" {rows[i]}_lo: {body} >= {_num(lo)}")
        if np.isfinite(hi):
            out.append(f" {rows[i]}_hi: {body} <= {_num(hi)}")
    out.append("Bounds")
    for j in range(arrays.num_vars):
        lo, hi = arrays.col_lo[j], arrays.col_hi[j]
        lo_s = "-inf" if not np.isfinite(lo) else repr(float(lo))
        hi_s = "+inf" if not np.isfinite(hi) else repr(float(hi))
        out.append(f" {lo_s} <= {cols[j]} <= {hi_s}")
    ints = [cols[j] for j in np.flatnonzero(arrays.integrality)]
    if ints:
        out.append("General")
        out.extend(" " + n for n in ints)
    out.append("End")
    with open(path, "w") as fh:
        fh.write("\n".join(out) + "\n")
