"""Export assembled models to MPS and CPLEX-LP files (for debugging and outside solvers)."""

from __future__ import annotations

import numpy as np

from distplan.modeling.model import ModelArrays, ModelError


def _num(v: float) -> str:
    return repr(float(v))


def _safe(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "_[]." else "_" for ch in name)


#: the objective's name in a file (MPS ``OBJ``, LP ``obj``: no column or row may take it)
OBJECTIVE_NAME = "obj"


def _one_to_one(names: list[str], prefix: str, *, lp: bool = False) -> list[str]:
    """File names a reader maps back one to one: the block names made safe (`_safe`; for
    LP without brackets), or generic names (`generic_name`) for all of them when two would
    be one name (``x_1`` and ``x[1]``, ``a-b`` and ``a_b``; case aside), one would be empty
    or `OBJECTIVE_NAME`, or (LP) one starts with a digit or a dot, which LP readers do not
    take as a name."""
    safe = [_safe(n) for n in names]
    if lp:
        safe = [s.replace("[", "_").replace("]", "") for s in safe]
    lowered = {s.lower() for s in safe}
    unique = len(lowered) == len(safe) and OBJECTIVE_NAME not in lowered
    readable = all(s and not (lp and (s[0].isdigit() or s[0] == ".")) for s in safe)
    return safe if unique and readable else [generic_name(prefix, k) for k in range(len(names))]


def _names(arrays: ModelArrays, *, lp: bool = False) -> tuple[list[str], list[str]]:
    """Column and row names for a file (`_one_to_one`); an LP's two-sided rows are written
    as ``<row>_lo`` and ``<row>_hi``, so its row names are checked with those too."""
    cols = _one_to_one(arrays.col_names, "C", lp=lp)
    rows = _one_to_one(arrays.row_names, "R", lp=lp)
    if lp:
        labels = rows + [f"{r}_{side}" for r in rows for side in ("lo", "hi")]
        if len({x.lower() for x in labels}) != len(labels):
            rows = [generic_name("R", k) for k in range(len(rows))]
    return cols, rows


def generic_name(prefix: str, k: int) -> str:
    """Solver-neutral column/row name, at least two digits (CBC's MPS reader rejects some
    two-character names such as ``C0``)."""
    return f"{prefix}{k:02d}"


def mps_number_strings(values: np.ndarray) -> list[str]:
    """Shortest round-trip decimal strings of the values."""
    return [repr(v) for v in np.asarray(values, dtype=float).tolist()]


def write_mps(arrays: ModelArrays, path: str, *, generic_names: bool = False, minimize: bool = False) -> None:
    """Free-format MPS, built with whole-array string formatting.

    ``minimize``: write ``min sign * c @ x`` without the offset (what backends hand to a
    solver); otherwise the model's sense in OBJSENSE and its offset as the objective's RHS.
    ``generic_names``: columns C<j> and rows R<i> (see `generic_name`) instead of the block
    names. Free rows are left out; ranged rows use RANGES; integer columns sit between
    MARKER lines and always carry explicit bounds (readers differ on integer defaults).
    """
    n = arrays.num_vars
    sign = -1.0 if (minimize and arrays.sense == "max") else 1.0
    c = sign * arrays.c
    if generic_names:
        cols = [generic_name("C", j) for j in range(n)]
    else:
        cols, all_rows = _names(arrays)
    lo_r, hi_r = arrays.row_lo, arrays.row_hi
    keep = np.flatnonzero(np.isfinite(lo_r) | np.isfinite(hi_r))
    A = arrays.A[keep].tocsc() if keep.size < arrays.num_rows else arrays.A.tocsc()
    A.sort_indices()
    lo_k, hi_k = lo_r[keep], hi_r[keep]
    eq = lo_k == hi_k
    has_hi = np.isfinite(hi_k)
    kinds = np.where(eq, "E", np.where(has_hi, "L", "G"))
    if generic_names:
        row_names = [generic_name("R", i) for i in keep.tolist()]
    else:
        row_names = [all_rows[i] for i in keep.tolist()]
    out: list[str] = [f"NAME {_safe(arrays.name) or 'distplan'}"]
    if not minimize and arrays.sense == "max":
        out += ["OBJSENSE", "    MAX"]
    out += ["ROWS", f" N {OBJECTIVE_NAME.upper()}"]
    out.extend(f" {k} {r}" for k, r in zip(kinds.tolist(), row_names))
    out.append("COLUMNS")
    # entries: objective first within each column, then rows in order
    counts = np.diff(A.indptr)
    obj_cols = np.flatnonzero((c != 0) | (counts == 0))
    ent_col = np.concatenate([obj_cols, np.repeat(np.arange(n), counts)])
    ent_row = np.concatenate([np.full(obj_cols.size, -1), A.indices.astype(np.int64)])
    ent_val = np.concatenate([c[obj_cols], A.data])
    order = np.argsort(ent_col, kind="stable")
    ent_col, ent_row, ent_val = ent_col[order], ent_row[order], ent_val[order]
    names_by_pos = [OBJECTIVE_NAME.upper(), *row_names]
    lines = [f"    {cols[j]} {names_by_pos[r + 1]} {v}" for j, r, v in zip(ent_col.tolist(), ent_row.tolist(), mps_number_strings(ent_val))]
    integ = arrays.integrality.astype(bool)
    if integ.any():
        run_starts = np.concatenate([[0], np.flatnonzero(np.diff(integ.astype(np.int8))) + 1, [n]])
        bounds_at = np.searchsorted(ent_col, run_starts)
        for k in range(run_starts.size - 1):
            chunk = lines[bounds_at[k] : bounds_at[k + 1]]
            if integ[run_starts[k]]:
                out.append(f"    M{k} 'MARKER' 'INTORG'")
                out.extend(chunk)
                out.append(f"    M{k} 'MARKER' 'INTEND'")
            else:
                out.extend(chunk)
    else:
        out.extend(lines)
    out.append("RHS")
    if not minimize and arrays.offset:
        out.append(f"    RHS {OBJECTIVE_NAME.upper()} {-arrays.offset!r}")
    rhs = np.where(eq | ~has_hi, lo_k, hi_k)
    nz = np.flatnonzero(rhs != 0)
    out.extend(f"    RHS {row_names[i]} {v}" for i, v in zip(nz.tolist(), mps_number_strings(rhs[nz])))
    ranged = np.flatnonzero(~eq & has_hi & np.isfinite(lo_k))
    if ranged.size:
        out.append("RANGES")
        out.extend(f"    RNG {row_names[i]} {v}" for i, v in zip(ranged.tolist(), mps_number_strings(hi_k[ranged] - lo_k[ranged])))
    out.append("BOUNDS")
    lo, hi = arrays.col_lo, arrays.col_hi
    fin_lo, fin_hi = np.isfinite(lo), np.isfinite(hi)
    binary = integ & (lo == 0) & (hi == 1)
    fixed = ~binary & (lo == hi)
    free = ~fin_lo & ~fin_hi
    rest = ~binary & ~fixed & ~free
    out.extend(f" BV BND {cols[j]}" for j in np.flatnonzero(binary).tolist())
    fx = np.flatnonzero(fixed)
    out.extend(f" FX BND {cols[j]} {v}" for j, v in zip(fx.tolist(), mps_number_strings(lo[fx])))
    out.extend(f" FR BND {cols[j]}" for j in np.flatnonzero(free).tolist())
    mi = np.flatnonzero(rest & ~fin_lo)
    out.extend(f" MI BND {cols[j]}" for j in mi.tolist())
    lo_set = np.flatnonzero(rest & fin_lo & ((lo != 0) | integ))
    out.extend(f" LO BND {cols[j]} {v}" for j, v in zip(lo_set.tolist(), mps_number_strings(lo[lo_set])))
    up = np.flatnonzero(rest & fin_hi)
    out.extend(f" UP BND {cols[j]} {v}" for j, v in zip(up.tolist(), mps_number_strings(hi[up])))
    pl = np.flatnonzero(rest & fin_lo & ~fin_hi & integ)
    out.extend(f" PL BND {cols[j]}" for j in pl.tolist())
    out.append("ENDATA")
    with open(path, "w") as fh:
        fh.write("\n".join(out))
        fh.write("\n")


def write_lp(arrays: ModelArrays, path: str) -> None:
    """CPLEX LP format; two-sided rows are written as two rows."""
    cols, rows = _names(arrays, lp=True)
    A = arrays.A.tocsr()

    def terms(idx: np.ndarray, vals: np.ndarray) -> str:
        if idx.size == 0:
            return "0 " + cols[0] if cols else "0"
        return " ".join(f"{'+' if v >= 0 else '-'} {_num(abs(v))} {cols[j]}" for j, v in zip(idx, vals))

    nz = np.flatnonzero(arrays.c)
    obj = f" {OBJECTIVE_NAME}: " + terms(nz, arrays.c[nz])
    if arrays.offset:
        obj += f" {'+' if arrays.offset > 0 else '-'} {_num(abs(arrays.offset))}"
    out = ["\\ " + arrays.name, "Maximize" if arrays.sense == "max" else "Minimize", obj]
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


#: the file suffixes `write_model` writes (in any case: ``.MPS`` is MPS too)
MODEL_SUFFIXES = (".mps", ".lp")


def write_model(arrays: ModelArrays, path: str) -> None:
    """Export to an MPS (``.mps``) or CPLEX LP (``.lp``) file, for debugging and outside
    solvers (``Model.to_arrays()`` gives the arrays). The suffix is read in any case."""
    low = str(path).lower()
    if low.endswith(".mps"):
        write_mps(arrays, path)
    elif low.endswith(".lp"):
        write_lp(arrays, path)
    else:
        raise ModelError(f"export path {path!r}: use a .mps or .lp file name")
