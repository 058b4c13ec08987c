"""Gantt chart of a pipeline plan: one lane per device, blocks coloured by micro-batch.

Forward (F) blocks are filled solid, backward (B) blocks hatched ``//``, weight-gradient
(W) blocks hatched ``..`` and lighter; a block on several devices is drawn on each of its
lanes. matplotlib is imported only when a chart is drawn (``pip install 'distplan[plot]'``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from distplan.models.pipeline import PipelineInstance, PipelinePlan, evaluate

_HATCH = {"F": "", "B": "//", "W": ".."}
_ALPHA = {"F": 0.95, "B": 0.85, "W": 0.55}


def plot_gantt(inst: PipelineInstance, plan: PipelinePlan, path: str | Path, title: str | None = None, dpi: int = 120) -> Path:
    """Draw the plan and save it as a PNG (or any format matplotlib infers from the
    suffix). Times on the x axis in seconds. Returns the path written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    n = inst.micro_batches
    cmap = plt.get_cmap("tab20" if n <= 20 else "viridis")
    colours = [cmap(m % 20) if n <= 20 else cmap(m / max(1, n - 1)) for m in range(n)]
    start = plan.start
    t0 = float(start.min())
    t1 = float((start + inst.duration[:, None]).max())
    per_lane = int(inst.device_mask.sum(axis=0).max()) * n
    width = min(40.0, max(8.0, 0.15 * per_lane))
    fig, ax = plt.subplots(figsize=(width, 0.6 * inst.n_devices + 1.6))
    min_label = 0.018 * (t1 - t0)
    for b, blk in enumerate(inst.blocks):
        for dev in blk.devices:
            lane = inst.device_index[dev]
            for m in range(n):
                s = float(start[b, m])
                ax.barh(
                    lane,
                    blk.duration,
                    left=s,
                    height=0.8,
                    color=colours[m],
                    alpha=_ALPHA[blk.role],
                    hatch=_HATCH[blk.role],
                    edgecolor="black",
                    linewidth=0.4,
                )
                if blk.duration >= min_label:
                    ax.text(s + blk.duration / 2, lane, f"{blk.role}{m}", ha="center", va="center", fontsize=6)
    ax.set_yticks(range(inst.n_devices))
    ax.set_yticklabels(inst.devices)
    ax.invert_yaxis()
    ax.set_xlabel("time (s)")
    ax.set_xlim(t0, t1)
    check = evaluate(inst, plan)
    det: dict[str, Any] = check.details
    heading = title or f"{inst.name}: {plan.info.get('schedule', 'plan')}"
    ax.set_title(f"{heading}   makespan {det.get('makespan', float('nan')):.6g} s, bubble ratio {det.get('bubble_ratio', float('nan')):.3f}")
    roles = sorted({blk.role for blk in inst.blocks}, key="FBW".index)
    ax.legend(
        handles=[Patch(facecolor="white", edgecolor="black", hatch=_HATCH[r], label={"F": "forward", "B": "backward", "W": "weight gradient"}[r]) for r in roles],
        loc="upper center",
        bbox_to_anchor=(0.5, -0.18),
        ncol=len(roles),
        fontsize=7,
    )
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return out


#: the name `distplan plot` looks up (distplan.cli.plot.PLOTTERS)
gantt = plot_gantt
