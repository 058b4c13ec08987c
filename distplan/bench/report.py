"""Benchmark reports: tables, performance profiles, time-to-target plots, exports.

Conventions (Mittelmann's benchmarks, MIPLIB): a run of an exact formulation is *solved*
when it ends with a proven optimum (or a proof of infeasibility) and the audit found
nothing wrong with it; a heuristic run is solved when its plan passed the evaluator.
Times are ``wall_seconds`` of ``distplan.solve`` (from the run process's start: loading the
instance + build + solve + evaluation, what the run's time limit covers), seconds;
unsolved runs count at the time limit. Per instance, runs over seeds and repetitions are
averaged; the shifted geometric mean over instances uses a shift of 10 s:
``exp(mean(log(t + 10))) - 10``. The mean open gap is over every run of an exact formulation
that ended without proving optimality or infeasibility, whatever stopped it (a limit, a
folded model whose bound does not carry over, a failure): its stored gap, 100 % for a run
without both a plan and a bound or one the audit flags. *Limit* and *failed* (the table's
columns, the "Failed runs" section, and the progress line of ``bench run``) are
`distplan.bench.record.run_outcome`'s: a run a limit stopped (its time limit, or killed
after its time limit + grace), with an accepted plan or without one, counts under "limit",
never under "failed"; a failed run errored or ended without an answer. Wrong answers are
the runs the audit flags (`distplan.bench.verify`).

Backends are compared on the same instances (Mittelmann, Gleixner et al.): the SGM of a
formulation run on several backends is over the instances every one of them has runs for
(an interrupted campaign may hold some backends' runs and not others'), unsolved runs
there at the time limit; "SGM all solved" is over those every backend solved. The report
says how many runs each campaign planned and names the missing ones, and which instances
were left out of a comparison. A per-instance cell over several runs (seeds, repetitions)
gives each figure as its range over the runs.

Reports and exports never write over the database: an export path that is the database
(under any name), one of its SQLite side files or another SQLite file is refused, and the
database is checked before the report folder is made.

Displayed numbers never claim more than was proven: bounds are rounded down (toward
-inf), objectives and gaps up.

Dolan–Moré performance profiles (Math. Programming 91, 2002): for each formulation run on
several backends, rho_s(tau) = share of instances on which backend s is within a factor
tau of the fastest backend. Time-to-target plots: share of instances on which a
(formulation, backend) reaches the best verified objective known for the instance, by
time. matplotlib is imported only when figures are drawn.
"""

from __future__ import annotations

import csv
import datetime as _dt
import json
import math
import os
import platform
import statistics
from collections import defaultdict
from collections.abc import Sequence
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal
from pathlib import Path
from typing import Any

from distplan.errors import InputError

from .record import is_solved, run_outcome
from .store import EXPORT_FIELDS, Store, open_existing
from .verify import QUALITY_PER_INSTANCE, Audit, audit_database, label_of

SHIFT_SECONDS = 10.0


def shifted_geometric_mean(values: Sequence[float], shift: float = SHIFT_SECONDS) -> float:
    """exp(mean(log(v + shift))) - shift (seconds); NaN for no values."""
    if not values:
        return math.nan
    return math.exp(sum(math.log(v + shift) for v in values) / len(values)) - shift


def run_time(run: dict[str, Any], wrong: set[str]) -> float:
    """The run's time for statistics: wall seconds if solved, else the time limit."""
    limit = run.get("time_limit")
    if is_solved(run, wrong) and run.get("wall_seconds") is not None:
        t = float(run["wall_seconds"])
        return min(t, float(limit)) if limit else t
    if limit:
        return float(limit)
    return float(run.get("process_seconds") or run.get("wall_seconds") or 0.0)


def combos(runs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(formulation label, backend) pairs: exact formulations first, then in first-seen order."""
    seen: dict[tuple[str, str], tuple[int, int, int]] = {}
    first_label: dict[str, int] = {}
    first_backend: dict[str, int] = {}
    for r in runs:
        label = label_of(r)
        first_label.setdefault(label, len(first_label))
        first_backend.setdefault(r["backend"], len(first_backend))
        seen.setdefault((label, r["backend"]), (0 if r.get("exact") else 1, first_label[label], first_backend[r["backend"]]))
    return sorted(seen, key=lambda k: seen[k])


def recorded(run: dict[str, Any], key: str) -> Any:
    """A run's ``bound_grade`` or ``gap_tolerance``: its column, or for a run stored before the
    column existed (NULL there) its ``result_json``'s."""
    if run.get(key) is not None:
        return run[key]
    try:
        doc = json.loads(run.get("result_json") or "{}")
    except ValueError:
        return None
    return doc.get(key) if isinstance(doc, dict) else None


def compared_instances(runs: list[dict[str, Any]], wrong: set[str]) -> dict[str, dict[str, Any]]:
    """Per formulation label, the instance sets its backends are compared on.

    ``common``: the instances every backend of the label has runs for (an interrupted
    campaign stores some backends' runs and not others'); ``all_solved``: those of them
    on which every run of every backend is solved (Gleixner et al.'s "all optimal" subset:
    a comparison of speed alone); ``union``: the instances any backend has runs for."""
    by_label: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    unsolved: dict[str, set[str]] = defaultdict(set)
    for r in runs:
        label = label_of(r)
        by_label[label][r["backend"]].add(r["instance_hash"])
        if not is_solved(r, wrong):
            unsolved[label].add(r["instance_hash"])
    out = {}
    for label, sets in by_label.items():
        common = set.intersection(*sets.values())
        out[label] = {"backends": sorted(sets), "union": set.union(*sets.values()), "common": common, "all_solved": common - unsolved[label]}
    return out


def summary_rows(runs: list[dict[str, Any]], audit: Audit) -> list[dict[str, Any]]:
    """One row per (formulation label, backend): counts, SGM time, gaps, memory.

    The SGM of a formulation run on several backends is over the instances every one of
    them has runs for (`compared_instances`), so that backends are compared on the same
    instances; ``sgm_seconds_own`` is over the row's own instances, ``sgm_seconds_all_solved``
    over the common instances every backend solved (None when it ran on one backend)."""
    wrong = audit.wrong_runs()
    compared = compared_instances(runs, wrong)
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        groups[(label_of(r), r["backend"])].append(r)
    rows = []
    for key in combos(runs):
        group = groups[key]
        sets = compared[key[0]]
        per_instance: dict[str, list[float]] = defaultdict(list)
        for r in group:
            per_instance[r["instance_hash"]].append(run_time(r, wrong))
        times = [statistics.fmean(v) for h, v in per_instance.items() if h in sets["common"]]
        own_times = [statistics.fmean(v) for v in per_instance.values()]
        solved_times = [statistics.fmean(v) for h, v in per_instance.items() if h in sets["all_solved"]]
        several = len(sets["backends"]) > 1
        exact = bool(group[0].get("exact"))
        bound_only = bool(group[0].get("bound_only"))
        limited = [r for r in group if exact and not bound_only and not is_solved(r, wrong) and r["termination"] != "infeasible"]
        gaps = [1.0 if r.get("gap") is None or r["run_key"] in wrong else float(r["gap"]) for r in limited]
        builds = [float(r["build_seconds"]) for r in group if r.get("build_seconds") is not None]
        solves = [float(r["solve_seconds"]) for r in group if r.get("solve_seconds") is not None]
        peaks = [int(r["peak_memory_bytes"]) for r in group if r.get("peak_memory_bytes")]
        versions = sorted({str(r.get("backend_version") or "") for r in group})
        rows.append(
            {
                "formulation": key[0],
                "backend": key[1],
                "version": ", ".join(v for v in versions if v),
                "program": group[0].get("program") or "",
                "exact": exact,
                "bound_only": bound_only,
                "runs": len(group),
                "instances": len(per_instance),
                "compared_instances": len(sets["common"]),
                "all_solved_instances": len(sets["all_solved"]) if several else None,
                "solved": sum(1 for r in group if is_solved(r, wrong)),
                "feasible": sum(1 for r in group if r.get("verdict") == "accepted"),
                "limit": sum(1 for r in group if run_outcome(r) == "limit"),
                "failed": sum(1 for r in group if run_outcome(r) == "failed"),
                "wrong": sum(1 for r in group if r["run_key"] in wrong),
                "gap_tolerances": sorted({float(t) for r in group if isinstance(t := recorded(r, "gap_tolerance"), int | float)}),
                "bound_grades": {g: sum(1 for r in group if recorded(r, "bound_grade") == g) for g in ("safe", "solver") if any(recorded(r, "bound_grade") == g for r in group)},
                "sgm_seconds": shifted_geometric_mean(times),
                "sgm_seconds_own": shifted_geometric_mean(own_times),
                "sgm_seconds_all_solved": shifted_geometric_mean(solved_times) if several else None,
                "mean_gap_at_limit": statistics.fmean(gaps) if gaps else None,
                "limit_runs": len(limited),
                "mean_build_seconds": statistics.fmean(builds) if builds else None,
                "mean_solve_seconds": statistics.fmean(solves) if solves else None,
                "max_peak_memory_bytes": max(peaks) if peaks else None,
            }
        )
    return rows


def planned_runs(campaigns: list[dict[str, Any]], runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per campaign name (its latest text in the database), the runs it planned and how many
    are stored: ``planned``, ``stored`` and ``missing`` (the missing runs' instance, label,
    backend, seed and repetition; None when the campaign text no longer expands here, e.g. a
    moved instance file: then only the stored ``planned`` count is known). As
    `distplan.bench.verify.missing_runs`, from the run keys the text expands to."""
    from .campaign import latest_campaigns, stored_runs

    stored_keys = {r["run_key"] for r in runs}
    out = []
    for name, c in sorted(latest_campaigns(campaigns).items()):
        specs = stored_runs(c)
        if specs is not None:
            planned = {s["run_key"]: s for s in specs}
            missing: list[dict[str, Any]] | None = [
                {"instance": s["instance"], "label": s.get("label") or s["formulation"], "backend": s["backend"], "seed": s.get("seed"), "repetition": s.get("repetition")}
                for k, s in planned.items()
                if k not in stored_keys
            ]
            out.append({"campaign": name, "planned": len(planned), "stored": len(planned) - len(missing or []), "missing": missing})
        elif isinstance(c.get("planned"), int):
            stored = sum(1 for r in runs if str(r.get("campaign")) == name)
            out.append({"campaign": name, "planned": c["planned"], "stored": stored, "missing": None})
    return out


def _are(n: int) -> str:
    return f"{n} {'is' if n == 1 else 'are'}"


def _planned_lines(plans: list[dict[str, Any]]) -> list[str]:
    """The report's sentences on planned and stored runs (missing runs counted and named)."""
    lines = []
    for p in plans:
        missing = p["missing"]
        n_missing = p["planned"] - p["stored"] if missing is None else len(missing)
        if n_missing <= 0:
            lines.append(f"Campaign `{p['campaign']}` planned {p['planned']} runs; all are stored.")
            continue
        text = (
            f"**Incomplete:** campaign `{p['campaign']}` planned {p['planned']} runs; {_are(p['planned'] - n_missing)} stored and **{_are(n_missing)} missing** "
            "(the campaign was interrupted, or runs were deleted; `distplan bench run CAMPAIGN --db DB` runs them)"
        )
        if missing is None:
            lines.append(text + "; its text no longer expands here, so the missing runs cannot be named.")
            continue
        by: dict[tuple[str, str], list[str]] = defaultdict(list)
        for m in missing:
            by[(m["label"], m["backend"])].append(m["instance"])
        parts = []
        for (label, backend), names in sorted(by.items()):
            shown = sorted(set(names))
            listed = ", ".join(shown[:6]) + (", ..." if len(shown) > 6 else "")
            parts.append(f"{label} / {backend}: {len(names)} ({listed})")
        lines.append(text + ": " + "; ".join(parts) + ".")
    return lines


def profile_ratios(runs: list[dict[str, Any]], label: str, wrong: set[str]) -> dict[str, list[float]]:
    """Dolan–Moré ratios t(p, s) / min_s t(p, s) per backend s over instances p (inf: unsolved)."""
    times: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    solved: dict[tuple[str, str], bool] = {}
    for r in runs:
        if label_of(r) != label:
            continue
        b, h = r["backend"], r["instance_hash"]
        times[b][h].append(float(r.get("wall_seconds") or 0.0))
        solved[(b, h)] = solved.get((b, h), True) and is_solved(r, wrong)
    backends = sorted(times)
    instances = sorted({h for b in backends for h in times[b]})
    best: dict[str, float] = {}
    for h in instances:
        ok = [statistics.fmean(times[b][h]) for b in backends if h in times[b] and solved[(b, h)]]
        if ok:
            best[h] = max(min(ok), 1e-6)
    out: dict[str, list[float]] = {}
    for b in backends:
        ratios = []
        for h in instances:
            if h in times[b] and solved[(b, h)] and h in best:
                ratios.append(max(statistics.fmean(times[b][h]), 1e-6) / best[h])
            else:
                ratios.append(math.inf)
        out[b] = ratios
    return out


def time_to_target(runs: list[dict[str, Any]], audit: Audit) -> dict[tuple[str, str], tuple[list[float], int]]:
    """Per (label, backend): sorted times of runs that reached the instance's best verified
    objective (relative 1e-6), and the number of runs."""
    wrong = audit.wrong_runs()
    out: dict[tuple[str, str], tuple[list[float], int]] = {}
    for key in combos(runs):
        group = [r for r in runs if (label_of(r), r["backend"]) == key and not r.get("bound_only")]
        if not group:
            continue
        hits = []
        for r in group:
            target = audit.best_objective.get(r["instance_hash"])
            obj = r.get("objective")
            if target is None or obj is None or r["run_key"] in wrong or r.get("verdict") != "accepted":
                continue
            if obj <= target * (1 + 1e-6) + 1e-12 and r.get("wall_seconds") is not None:
                hits.append(float(r["wall_seconds"]))
        out[key] = (sorted(hits), len(group))
    return out


# -- figures -------------------------------------------------------------------------------------


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_profile(ratios: dict[str, list[float]], title: str, path: Path) -> None:
    plt = _pyplot()
    finite = [x for v in ratios.values() for x in v if math.isfinite(x)]
    tau_max = max(2.0, max(finite) * 1.25) if finite else 2.0
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for backend, rs in sorted(ratios.items()):
        n = len(rs)
        xs = sorted(x for x in rs if math.isfinite(x))
        steps_x = [1.0] + xs + [tau_max]
        steps_y = [0.0] + [(k + 1) / n for k in range(len(xs))] + [len(xs) / n]
        ax.step(steps_x, steps_y, where="post", label=backend)
    ax.set_xscale("log", base=2)
    ax.set_xlim(1.0, tau_max)
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("tau (time within a factor tau of the fastest backend)")
    ax.set_ylabel("share of instances")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_time_to_target(data: dict[tuple[str, str], tuple[list[float], int]], path: Path, exact: dict[tuple[str, str], bool] | None = None) -> None:
    """Exact formulations drawn solid, heuristics dashed."""
    plt = _pyplot()
    exact = exact or {}
    fig, ax = plt.subplots(figsize=(7.0, 4.4))
    t_max = max((t for hits, _ in data.values() for t in hits), default=1.0)
    t_min = min((t for hits, _ in data.values() for t in hits if t > 0), default=1e-3)
    for (label, backend), (hits, n) in data.items():
        xs = [max(t, t_min) for t in hits]
        ys = [(j + 1) / n for j in range(len(xs))]
        style = "-" if exact.get((label, backend), False) else "--"
        ax.step([t_min] + xs + [t_max * 1.5], [0.0] + ys + [ys[-1] if ys else 0.0], style, where="post", label=f"{label} / {backend}")
    ax.set_xscale("log")
    ax.set_ylim(0.0, 1.02)
    ax.set_xlabel("wall time (s)")
    ax.set_ylabel("share of runs at the best known objective")
    ax.set_title("time to target (target: best verified objective per instance)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_quality(audit: Audit, path: Path) -> None:
    plt = _pyplot()
    # one point per instance (`Audit.quality_per_instance`), not per run: repetitions of
    # an instance are not more instances
    groups: dict[str, list[float]] = {f"{label} / {backend}": list(by.values()) for (label, backend), by in audit.quality_per_instance().items()}
    names = sorted(groups)
    fig, ax = plt.subplots(figsize=(7.0, 0.6 * len(names) + 1.6))
    data = [groups[n] for n in names]
    try:
        ax.boxplot(data, orientation="horizontal", whis=(0, 100))
    except TypeError:  # matplotlib < 3.10
        ax.boxplot(data, vert=False, whis=(0, 100))
    for k, n in enumerate(names):
        ax.plot(groups[n], [k + 1] * len(groups[n]), "o", alpha=0.4, markersize=3)
    ax.set_yticks(range(1, len(names) + 1), names, fontsize=8)
    ax.axvline(1.0, color="grey", lw=0.8)
    ax.set_xlabel("objective / best certified lower bound")
    ax.set_title("heuristic quality per instance")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


# -- the Markdown report -----------------------------------------------------------------------------


def _f(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _rounded(v: Any, digits: int, rounding: str) -> str:
    """``v`` with ``digits`` decimals, rounded in the direction ``rounding`` (a `decimal`
    rounding mode) from its exact binary value: a bound shown is never above the proven one."""
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return _f(v, digits)
    return str(Decimal(float(v)).quantize(Decimal(1).scaleb(-digits), rounding=rounding))


def _down(v: Any, digits: int = 6) -> str:
    """A bound for display: rounded toward -inf."""
    return _rounded(v, digits, ROUND_FLOOR)


def _up(v: Any, digits: int = 6) -> str:
    """An objective or a gap for display: rounded toward +inf."""
    return _rounded(v, digits, ROUND_CEILING)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out.extend("| " + " | ".join(r) + " |" for r in rows)
    return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "-" for ch in text).strip("-")


def _into(out: Path, name: str, db: str | Path) -> Path:
    """``out / name``, refused when that file is the database (e.g. a database named report.md)."""
    path = out / name
    if path.exists() and _same_file(db, path):
        raise InputError("--out", f"{path} is the benchmark database {db} itself; the report would overwrite it", "name another output directory")
    return path


def write_report(db: str | Path, out_dir: str | Path | None = None, figures: bool = True) -> Path:
    """Write ``report.md`` (and PNG figures) for a database; returns the Markdown path."""
    out = Path(out_dir) if out_dir is not None else Path(db).with_name(Path(db).stem + "-report")
    with open_existing(db) as store:
        runs = store.runs()
        campaigns = store.campaigns()
        audit = audit_database(store)
    if not runs:
        raise InputError(str(db), "the database holds no runs", "run a campaign first")
    _into(out, "report.md", db)  # before any figure is drawn
    out.mkdir(parents=True, exist_ok=True)  # only for a database there is something to report on
    wrong = audit.wrong_runs()
    rows = summary_rows(runs, audit)
    lines: list[str] = []
    names = sorted({c["name"] for c in campaigns}) or ["(unnamed)"]
    lines.append(f"# Benchmark report: {', '.join(names)}")
    lines.append("")
    limits = sorted({float(r["time_limit"]) for r in runs if r.get("time_limit")})
    hosts = sorted({str(r.get("host")) for r in runs if r.get("host")})
    instances = {r["instance_hash"]: r["instance"] for r in runs}
    lines.append(
        f"{len(runs)} runs on {len(instances)} instances; time limit {', '.join(f'{t:g}' for t in limits) or '-'} s per run; "
        f"written {_dt.date.today().isoformat()} by `distplan bench report` from `{Path(db).name}`."
    )
    sources = sorted({str(c["source"]) for c in campaigns if c.get("source")})
    if sources:
        lines.append(f"Campaign file{'s' if len(sources) > 1 else ''}: {', '.join(f'`{s}`' for s in sources)}; reproduce with `distplan bench run FILE --db DB --jobs 2`, then `distplan bench report DB --out DIR` and `distplan verify DB`.")
    lines.append(f"Machine: {platform.platform()}, {os.cpu_count()} CPUs, Python {platform.python_version()}; runs executed on {', '.join(hosts) or '-'}.")
    finished = [str(r["finished_at"]) for r in runs if r.get("finished_at")]
    if finished:
        lines.append(f"Runs finished between {min(finished)} and {max(finished)} (UTC).")
    plans = planned_runs(campaigns, runs)
    lines.extend(_planned_lines(plans))
    lines.append("")
    lines.append("Times are seconds of `distplan.solve` (model build + solve + evaluation) in a fresh process per run; an unsolved run counts at the time limit; "
                 "SGM = shifted geometric mean over instances with a 10 s shift; a formulation run on several backends is compared on the instances every one of those backends has runs for "
                 "(an instance some backend has no run for is left out of all its SGMs, and the table says on how many of a row's instances its SGM is), "
                 "and *SGM all solved* is over the compared instances every backend solved. *Solved*: proven optimal (exact formulations) or an accepted plan (heuristics), "
                 "and nothing flagged by the audit. Peak memory is the run process's resident peak, including the preloaded interpreter and solver libraries.")
    lines.append("")
    lines.append("## Results per formulation and backend")
    lines.append("")
    header = ["formulation", "backend", "version", "runs", "solved", "feasible", "limit", "failed", "wrong", "SGM time (s)", "SGM all solved (s)", "mean open gap (runs)", "build (s)", "solve (s)", "peak MB"]
    body = []
    for row in rows:
        gap = "-" if row["mean_gap_at_limit"] is None else f"{_up(100 * row['mean_gap_at_limit'], 2)} % ({row['limit_runs']})"
        sgm = _f(row["sgm_seconds"])
        if row["compared_instances"] < row["instances"]:
            sgm = f"{sgm} on {row['compared_instances']} of {row['instances']} instances"
        solved_sgm = "-" if row["all_solved_instances"] is None else f"{_f(row['sgm_seconds_all_solved'])} ({row['all_solved_instances']})"
        peak = "-" if row["max_peak_memory_bytes"] is None else f"{row['max_peak_memory_bytes'] / 1e6:.0f}"
        body.append(
            [
                row["formulation"] + ("" if row["exact"] else " (bounds)" if row["bound_only"] else " (heuristic)"),
                row["backend"],
                row["version"] or "-",
                str(row["runs"]),
                str(row["solved"]),
                str(row["feasible"]),
                str(row["limit"]),
                str(row["failed"]),
                str(row["wrong"]),
                sgm,
                solved_sgm,
                gap,
                _f(row["mean_build_seconds"]),
                _f(row["mean_solve_seconds"]),
                peak,
            ]
        )
    lines.extend(_table(header, body))
    lines.append("")
    names_of = {r["instance_hash"]: r["instance"] for r in runs}
    for label, sets in sorted(compared_instances(runs, wrong).items()):
        left_out = sorted(sets["union"] - sets["common"], key=lambda h: names_of[h])
        if len(sets["backends"]) < 2 or not left_out:
            continue
        lacking = []
        for h in left_out[:6]:
            have = sorted({r["backend"] for r in runs if r["instance_hash"] == h and label_of(r) == label})
            lacking.append(f"{names_of[h]} (runs on {', '.join(have)} only)")
        lines.append(
            f"**Not compared:** {label} is compared on the {len(sets['common'])} instances that all of {', '.join(sets['backends'])} have runs for; "
            f"{len(left_out)} instance{'s' if len(left_out) > 1 else ''} left out of its SGMs: {'; '.join(lacking)}{'; ...' if len(left_out) > 6 else ''}. "
            "Its performance profile counts a missing run as unsolved."
        )
        lines.append("")

    # per instance: best bound, best objective, per combo the outcome
    keys = combos(runs)
    lines.append("## Per instance")
    lines.append("")
    lines.append("Each cell: wall time in seconds and the outcome (`opt` proven optimal, `ok` accepted plan, `lim` limit with gap, `open` an exact run that ended otherwise with its gap open, or the termination); the objective ratio to the best known objective follows `x` when above 1. "
                 "A cell of several runs (seeds, repetitions) gives each figure as its range over the runs, best–worst, counts the outcomes when they differ (`opt×1 lim×1`), and ends in `(N runs)`.")
    lines.append("")
    by: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for r in runs:
        by[(r["instance_hash"], label_of(r), r["backend"])].append(r)
    inst_rows = []
    for h, name in sorted(instances.items(), key=lambda kv: kv[1]):
        cells = [name, _down(audit.best_bound.get(h)), _up(audit.best_objective.get(h))]
        for key in keys:
            rs = by.get((h, *key), [])
            cells.append(_cell(rs, audit.best_objective.get(h), wrong))
        inst_rows.append(cells)
    lines.extend(_table(["instance", "best bound", "best objective", *[f"{a} / {b}" for a, b in keys]], inst_rows))
    lines.append("")

    figures_made: list[tuple[str, str]] = []
    figure_note = ""
    if figures:
        try:
            _pyplot()
        except ImportError:
            figure_note = "Figures need matplotlib: pip install 'distplan[plot]'."
    if figures and not figure_note:
        labels = sorted({label_of(r) for r in runs if not r.get("bound_only")})
        for label in labels:
            ratios = profile_ratios(runs, label, wrong)
            if len(ratios) < 2:
                continue
            fname = f"profile-{_slug(label)}.png"
            plot_profile(ratios, f"performance profile: {label}", _into(out, fname, db))
            figures_made.append((f"Performance profile of {label}", fname))
        ttt = time_to_target(runs, audit)
        if ttt:
            plot_time_to_target(ttt, _into(out, "time-to-target.png", db), {(label_of(r), r["backend"]): bool(r.get("exact")) for r in runs})
            figures_made.append(("Time to target", "time-to-target.png"))
        if audit.quality:
            plot_quality(audit, _into(out, "heuristic-quality.png", db))
            figures_made.append(("Heuristic quality", "heuristic-quality.png"))
    lines.append("## Performance profiles and time to target")
    lines.append("")
    if figure_note:
        lines.append(figure_note)
    profile_figs = [f for f in figures_made if f[1].startswith("profile-")]
    if not figures:
        lines.append("Figures not drawn (`--no-figures`).")
    elif not profile_figs and not figure_note:
        lines.append("No formulation ran on two or more backends: no performance profile.")
    for title, fname in figures_made:
        if fname != "heuristic-quality.png":
            lines.append(f"![{title}]({fname})")
            lines.append("")
    lines.append("")

    lines.append("## Verification")
    lines.append("")
    lines.append(
        f"{audit.reevaluated} stored plans re-evaluated with the independent evaluator; bound audit over {len(instances)} instances "
        "(no proven bound may exceed a verified objective of the same instance). "
        f"Wrong answers: **{len(wrong)}**."
    )
    lines.append("")
    if audit.findings:
        lines.extend(_table(["category", "run", "finding"], [[f.category, f.run_key, f.message.replace("|", "/")] for f in audit.findings]))
    else:
        lines.append("No problem found: every plan passed the evaluator with its stored objective, no optimality claim has a gap above tolerance, and no bound exceeds a feasible objective.")
    lines.append("")

    lines.append("## Heuristic quality")
    lines.append("")
    qs = audit.quality_summary()
    if qs:
        lines.append(
            f"Objective / best certified lower bound of the instance, rounded up (1 = the bound meets the plan; a plan proven optimal within its gap "
            f"tolerance, 1e-4 by default, may read 1.0001 or 1.0002: bounds are rounded down for safety); an instance run several times (seeds, repetitions) "
            f"counts once, its ratio the {QUALITY_PER_INSTANCE}; min, median and max are over instances."
        )
        lines.append("")
        lines.extend(
            _table(
                ["heuristic", "backend", "instances", "runs", "min", "median", "max"],
                [[q["formulation"], q["backend"], str(q["instances"]), str(q["runs"]), _up(q["min"], 4), _up(q["median"], 4), _up(q["max"], 4)] for q in qs],
            )
        )
        lines.append("")
        if any(f[1] == "heuristic-quality.png" for f in figures_made):
            lines.append("![Heuristic quality](heuristic-quality.png)")
            lines.append("")
    else:
        lines.append("No heuristic run with a certified bound.")
        lines.append("")
    lines.extend(_guarantee_section(audit))

    lines.extend(_failed_section(runs))
    path = _into(out, "report.md", db)
    path.write_text("\n".join(lines) + "\n")
    return path


def _failed_section(runs: list[dict[str, Any]]) -> list[str]:
    """The runs counted under *failed* (`run_outcome`), with the first line of their error;
    then, when there are any, the runs a limit stopped without a plan (counted under
    *limit*: a solver or run process killed after its time limit + grace, ...), whose error
    says why."""

    def rows(rs: list[dict[str, Any]]) -> list[list[str]]:
        return [[r["instance"], label_of(r), r["backend"], r["termination"], (r.get("error") or "").splitlines()[0][:160].replace("|", "/") if r.get("error") else "-"] for r in rs]

    header = ["instance", "formulation", "backend", "termination", "error (first line)"]
    failures = [r for r in runs if run_outcome(r) == "failed"]
    lines = ["## Failed runs", ""]
    lines.extend(_table(header, rows(failures)) if failures else ["None."])
    lines.append("")
    stopped = [r for r in runs if run_outcome(r) == "limit" and not r.get("bound_only") and r.get("verdict") != "accepted"]
    if stopped:
        lines.append("Stopped by a limit without a plan (counted under *limit*, not failed):")
        lines.append("")
        lines.extend(_table(header, rows(stopped)))
        lines.append("")
    return lines


def _outcome(r: dict[str, Any], wrong: set[str]) -> tuple[str, float | None]:
    """A run's outcome word for the per-instance table and its open gap (for `lim`/`open`)."""
    if r["run_key"] in wrong:
        return "WRONG", None
    if r.get("exact") and r["status"] == "optimal":
        return "opt", None
    if r.get("bound_only"):
        return "bound", None
    if r.get("verdict") == "accepted" and run_outcome(r) == "limit":
        return "lim", r.get("gap")
    if r.get("verdict") == "accepted" and r.get("exact") and r["status"] != "optimal":
        return "open", r.get("gap")
    if r.get("verdict") == "accepted":
        return "ok", None
    return str(r["termination"]), None


def _span(values: list[float], show: Any) -> str:
    """``a–b`` for several different values (best–worst: smaller first), ``a`` for one."""
    lo, hi = show(min(values)), show(max(values))
    return lo if lo == hi else f"{lo}–{hi}"


def _cell(rs: list[dict[str, Any]], best: float | None, wrong: set[str]) -> str:
    """One per-instance cell: wall time, outcome, objective ratio. Over several runs (seeds,
    repetitions) every figure is its range over the runs and differing outcomes are
    counted, so the cell never shows one run as if it summarized all of them."""
    if not rs:
        return ""
    times = [float(r["wall_seconds"]) for r in rs if r.get("wall_seconds") is not None]
    t = _span(times, lambda v: _f(v, 2)) if times else "-"
    outcomes: dict[str, list[float | None]] = {}
    for r in rs:
        word, gap = _outcome(r, wrong)
        outcomes.setdefault(word, []).append(gap)
    parts = []
    for word, gaps in outcomes.items():
        text = word + (f"×{len(gaps)}" if len(outcomes) > 1 else "")
        if word in ("lim", "open"):
            known = [float(g) for g in gaps if g is not None]
            shown = _span(known, lambda v: _up(100 * v, 1)) + "%" if known else "-"
            if known and len(known) < len(gaps):
                shown += ", -"
            text += " " + shown
        parts.append(text)
    ratio = ""
    ratios = [float(r["objective"]) / best for r in rs if best and r.get("objective") is not None and r.get("verdict") == "accepted"]
    if ratios and max(ratios) > 1 + 1e-6:
        ratio = f" x{_span(ratios, lambda v: _up(v, 3))}"
    suffix = f" ({len(rs)} runs)" if len(rs) > 1 else ""
    return f"{t} {' '.join(parts)}{ratio}{suffix}"


def _guarantee_section(audit: Audit) -> list[str]:
    lines = ["## Approximation guarantees", ""]
    by: dict[str, list[Any]] = defaultdict(list)
    for g in audit.guarantees:
        by[g.guarantee].append(g)
    if not by:
        lines.append("No heuristic with a known guarantee ran.")
        lines.append("")
        return lines
    lines.append(
        "A guarantee is checked where its precondition holds. *Violated* means the objective exceeds an upper estimate of the guarantee's "
        "right-hand side (certain); *possibly violated* means it exceeds only the lower estimate (the optimum is not known precisely)."
    )
    lines.append("")
    rows = []
    for name, checks in sorted(by.items()):
        applies = [g for g in checks if g.applies]
        why: dict[str, int] = defaultdict(int)
        for g in checks:
            if not g.applies:
                why[g.precondition.split(":")[0].split(" (")[0]] += 1
        reasons = [f"{text} ({n})" for text, n in sorted(why.items())]
        rows.append(
            [
                name,
                str(len(checks)),
                str(len(applies)),
                str(sum(1 for g in applies if g.verdict == "holds")),
                str(sum(1 for g in applies if g.verdict == "possibly violated")),
                str(sum(1 for g in applies if g.verdict == "violated")),
                "; ".join(reasons) or "-",
            ]
        )
    lines.extend(_table(["guarantee", "runs", "precondition holds", "holds", "possibly violated", "violated", "why not applicable"], rows))
    lines.append("")
    exceed = [g for g in audit.guarantees if g.verdict in ("violated", "possibly violated")]
    if exceed:
        lines.extend(
            _table(
                ["instance", "formulation", "backend", "guarantee", "verdict", "objective", "RHS lower", "RHS upper"],
                [[g.instance, g.formulation, g.backend, g.guarantee, g.verdict + ("" if g.binding else " (not proven for this algorithm)"), f"{g.objective:.6g}", _f(g.rhs_lower, 6), _f(g.rhs_upper, 6)] for g in exceed],
            )
        )
        lines.append("")
    return lines


# -- exports -------------------------------------------------------------------------------------------


def export_rows(store: Store) -> list[dict[str, Any]]:
    rows = []
    for r in store.runs():
        row = {f: r.get(f) for f in EXPORT_FIELDS}
        for key in ("bound_grade", "gap_tolerance"):
            row[key] = recorded(r, key)
        row["label"] = label_of(r)
        rows.append(row)
    return rows


#: the files SQLite keeps beside a database (WAL mode, rollback journal)
SQLITE_SIDECARS = ("-wal", "-shm", "-journal")
SQLITE_HEADER = b"SQLite format 3\x00"


def _same_file(a: str | Path, b: str | Path) -> bool:
    """``os.path.samefile`` when both exist (hard links, symlinks), resolved paths otherwise."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return Path(a).resolve() == Path(b).resolve()


def check_export_path(db: str | Path, path: str | Path, option: str) -> None:
    """Refuse an export ``path`` that would overwrite a database: the benchmark database
    itself (also through another path or a symlink) or one of its SQLite side files, or
    any other existing SQLite file. Called before anything is written."""
    out = Path(path)
    if _same_file(db, out):
        raise InputError(option, f"{path} is the benchmark database {db} itself; exporting would overwrite it with the export", "name another file, e.g. " + str(Path(db).with_suffix(".csv" if option == "--csv" else ".parquet")))
    for tail in SQLITE_SIDECARS:
        if _same_file(str(db) + tail, out):
            raise InputError(option, f"{path} is the {tail[1:]} file of the benchmark database {db}; exporting would damage the database", "name another file")
    try:
        with open(out, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
    except OSError:  # missing (to be created) or unreadable: the write reports a problem
        return
    if head == SQLITE_HEADER:
        raise InputError(option, f"{path} is a SQLite database; the export would overwrite it", "name another file, or delete that one first")


def export_csv(db: str | Path, path: str | Path) -> int:
    """Write one CSV row per run (the plan and full result stay in the DB); returns the count.
    An output path that is a database (`check_export_path`) is refused, nothing written."""
    with open_existing(db) as store:
        rows = export_rows(store)
    check_export_path(db, path, "--csv")
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(EXPORT_FIELDS))
        writer.writeheader()
        writer.writerows(rows)
    return len(rows)


def export_parquet(db: str | Path, path: str | Path) -> int:
    """Write the runs as Parquet (needs pyarrow, or pandas with a Parquet engine); an output
    path that is a database (`check_export_path`) is refused, nothing written."""
    with open_existing(db) as store:
        rows = export_rows(store)
    check_export_path(db, path, "--parquet")
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        pa = None
    if pa is not None:
        pq.write_table(pa.Table.from_pylist(rows), str(path))
        return len(rows)
    try:
        import pandas as pd

        pd.DataFrame(rows).to_parquet(path)
    except ImportError:
        raise InputError("--parquet", "Parquet export needs pyarrow (or pandas with a Parquet engine), which is not installed", "pip install pyarrow, or export CSV with --csv") from None
    return len(rows)


def summary_json(db: str | Path) -> dict[str, Any]:
    """The report's tables as data (for scripts)."""
    with open_existing(db) as store:
        runs = store.runs()
        campaigns = store.campaigns()
        audit = audit_database(store)
    return {
        "planned_runs": planned_runs(campaigns, runs),
        "summary": summary_rows(runs, audit),
        "wrong_answers": [f.__dict__ for f in audit.findings],
        "heuristic_quality": audit.quality_summary(),
        "guarantees": [{**g.__dict__, "verdict": g.verdict} for g in audit.guarantees if g.applies],
    }
