"""Gantt chart of a placement plan (PNG through matplotlib, imported lazily).

One lane per device with its ops; under each lane a thin band shows the transfers the
device receives (from the producer's end to the arrival), so communication is visible.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from distplan.models.placement_evaluate import evaluate
from distplan.models.placement_instance import PlacementInstance
from distplan.models.placement_plan import PlacementPlan


def gantt(inst: PlacementInstance, plan: PlacementPlan, path: str | Path, title: str | None = None) -> Path:
    """Write the chart to ``path`` (PNG); times in milliseconds on the x axis."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    check = evaluate(inst, plan)
    start = np.asarray(check.details["start"], dtype=float)
    device = np.asarray(plan.device)
    dur = inst.time[np.arange(inst.n_ops), device]
    nd = inst.n_devices
    fig, ax = plt.subplots(figsize=(12, 1.2 + 0.9 * nd))
    cmap = plt.get_cmap("tab20")
    scale = 1e3
    for d in range(nd):
        ops = np.flatnonzero(device == d)
        y = nd - 1 - d
        bars = [(start[v] * scale, max(dur[v] * scale, 1e-9)) for v in ops]
        colors = [cmap(int(v) % 20) for v in ops]
        ax.broken_barh(bars, (y + 0.25, 0.6), facecolors=colors, edgecolor="black", linewidth=0.2)
        # incoming transfers on a thin band under the lane
        edges = np.flatnonzero((device[inst.dst] == d) & (device[inst.src] != d))
        if edges.size:
            a = device[inst.src[edges]]
            end_u = start[inst.src[edges]] + dur[inst.src[edges]]
            delay = inst.latency[a, d] + inst.edge_bytes[edges] / inst.bandwidth[a, d]
            ax.broken_barh([(s * scale, c * scale) for s, c in zip(end_u, delay)], (y + 0.05, 0.15), facecolors="tab:red", alpha=0.4)
    ax.set_yticks([nd - 1 - d + 0.5 for d in range(nd)])
    ax.set_yticklabels(inst.device_names)
    ax.set_xlabel("time (ms)   bars: ops; red band: incoming transfers")
    feasible = "feasible" if check.feasible else "INFEASIBLE"
    ax.set_title(title or f"{inst.name}: makespan {check.objective * scale:.3f} ms ({feasible})")
    ax.set_ylim(0, nd)
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
