"""Plot of a bandwidth perf-per-cost result: the Pareto curve and the chosen allocations.

Left panel: training time (ms) against network cost (million USD) along the Pareto curve
T*(c) that `libra_perf_per_cost` evaluated, with the fastest allocation and the
time x cost optimum marked. Right panel: bandwidth per dimension (GB/s) of those marked
points as grouped bars. matplotlib is imported only when plotting.

    res = distplan.solve("libra-gpt3-4d-total500", formulation="libra_perf_per_cost")
    plot_pareto(res, "pareto.png")
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from distplan.errors import InputError

_GB = 1e9


def _curve_of(result_or_curve: Any) -> tuple[list[Mapping[str, Any]], dict[str, Mapping[str, Any]], str]:
    """(curve points, marked points by label, title) from a Result, an info dict or a list."""
    title = "bandwidth Pareto curve"
    info: Mapping[str, Any] | None = None
    if hasattr(result_or_curve, "info") and isinstance(result_or_curve.info, Mapping):
        info = result_or_curve.info
        title = f"{getattr(result_or_curve, 'instance', '')}: time vs network cost"
    elif isinstance(result_or_curve, Mapping):
        info = result_or_curve
    if info is not None:
        curve = info.get("pareto")
        if not curve:
            raise InputError("result.info.pareto", "no Pareto curve in this result", "solve with formulation libra_perf_per_cost")
        marks: dict[str, Mapping[str, Any]] = {}
        fastest = info.get("fastest")
        if fastest:
            marks["fastest (libra_perf)"] = fastest
        chosen = info.get("chosen")
        if chosen is not None:
            plan = getattr(result_or_curve, "plan", None)
            bw = plan.bandwidth if plan is not None else _nearest(curve, chosen).get("bandwidth", {})
            marks["min time x cost"] = {**chosen, "bandwidth": bw}
        return list(curve), marks, title
    if isinstance(result_or_curve, Sequence) and result_or_curve and isinstance(result_or_curve[0], Mapping):
        curve = list(result_or_curve)
        best = min(curve, key=lambda p: p["time_seconds"] * p["cost_usd"])
        fastest_point = min(curve, key=lambda p: p["time_seconds"])
        return curve, {"fastest": fastest_point, "min time x cost": best}, title
    raise InputError("result", "expected a solve() result, its info dict, or a list of curve points", "pass the libra_perf_per_cost result")


def _nearest(curve: Sequence[Mapping[str, Any]], point: Mapping[str, Any]) -> Mapping[str, Any]:
    return min(curve, key=lambda p: abs(p["cost_usd"] - point["cost_usd"]))


def plot_pareto(
    result_or_curve: Any,
    path: str | Path,
    *,
    extra: Mapping[str, Mapping[str, float]] | None = None,
    points: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Draw the Pareto curve with the marked points and their bandwidth bars into ``path``.

    ``extra`` adds allocations to the bar chart (label -> {dimension: bytes/s}), e.g. the
    ``equal_bw`` plan. ``points`` adds allocations marked on the curve as well as in the
    bars (label -> {"time_seconds": s, "cost_usd": USD, "bandwidth": {dimension: bytes/s}},
    as the bandwidth evaluator's details give them). Returns the path written (PNG, PDF or
    SVG by suffix).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    curve, marks, title = _curve_of(result_or_curve)
    marks = {**marks, **(points or {})}
    pts = sorted(curve, key=lambda p: p["cost_usd"])
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4.2))
    ax.plot([p["cost_usd"] / 1e6 for p in pts], [p["time_seconds"] * 1e3 for p in pts], "-o", ms=3, color="0.35", label="T*(cost)")
    colors = ["tab:blue", "tab:red", "tab:green", "tab:purple", "tab:orange"]
    for (label, p), color in zip(marks.items(), colors + ["tab:gray"] * len(marks), strict=False):
        ax.plot([p["cost_usd"] / 1e6], [p["time_seconds"] * 1e3], "*", ms=14, color=color, label=label)
    ax.set_xlabel("network cost (million USD)")
    ax.set_ylabel("training time per iteration (ms)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    bars: dict[str, Mapping[str, float]] = {label: p["bandwidth"] for label, p in marks.items() if p.get("bandwidth")}
    if extra:
        bars.update(extra)
    dims: list[str] = list(next(iter(bars.values())).keys()) if bars else []
    width = 0.8 / max(len(bars), 1)
    for j, ((label, bw), color) in enumerate(zip(bars.items(), colors + ["tab:gray"] * len(bars), strict=False)):
        xs = [i + (j - (len(bars) - 1) / 2) * width for i in range(len(dims))]
        bx.bar(xs, [bw[d] / _GB for d in dims], width=width, color=color, label=label)
    bx.set_xticks(range(len(dims)))
    bx.set_xticklabels(dims)
    bx.set_ylabel("bandwidth per NPU (GB/s)")
    bx.set_title("bandwidth per dimension", fontsize=10)
    bx.grid(axis="y", alpha=0.3)
    if bars:
        bx.legend(fontsize=8)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
