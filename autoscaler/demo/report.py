"""The demo's report: `summary.json` (numbers a test or a person can check) and `timeline.png`.

`summarize` is pure (timelines in, a JSON-able dict out); `plot` draws the same data.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from autoscaler.demo.monitor import ReplicaChange, Sample
from autoscaler.demo.scenario import Workload
from kubesim.workloads import LoadChange

SETTLED_SAMPLES = 3  # consecutive samples within tolerance that count as "back"


def settled(s: Sample, tolerance: float, w: Workload) -> bool:
    """The metric is where the autoscaler wants it, or the autoscaler can do no more (at min/max)."""
    if s.metric is None:
        return False
    ratio = s.metric / s.target
    if abs(ratio - 1.0) <= tolerance:
        return True
    replicas = s.replicas or 0
    return (ratio < 1.0 and replicas <= w.min_replicas) or (ratio > 1.0 and replicas >= w.max_replicas)


def settle_times(samples: Sequence[Sample], changes: Sequence[LoadChange], tolerance: float, w: Workload) -> list[dict]:
    """Per load change: when the metric left tolerance and when it was back (and stayed
    `SETTLED_SAMPLES` samples), until the next change; `seconds` counts from the change's start."""
    out = []
    for i, c in enumerate(changes):
        end = changes[i + 1].start if i + 1 < len(changes) else math.inf
        seg = [s for s in samples if c.start <= s.t < end and s.metric is not None]
        left = next((k for k, s in enumerate(seg) if not settled(s, tolerance, w)), None)
        back = None
        if left is not None:
            back = next((seg[k] for k in range(left + 1, len(seg))
                         if all(settled(x, tolerance, w) for x in seg[k:k + SETTLED_SAMPLES])), None)
        out.append({
            "start": round(c.start, 2), "end": round(c.end, 2), "load_before": c.before, "load_after": c.after,
            "left_tolerance_at": seg[left].t if left is not None else None,
            "back_within_tolerance_at": back.t if back else None,
            "seconds": (round(back.t - c.start, 2) if back else (0.0 if left is None and seg else None)),
        })
    return out


def summarize(workloads: Sequence[Workload], timelines: dict[str, list[Sample]],
              changes: dict[str, list[ReplicaChange]], load_changes: dict[str, list[LoadChange]],
              tolerance: float, meta: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = dict(meta)
    result["workloads"] = {}
    for w in workloads:
        samples = timelines[w.name]
        reps = [s.replicas for s in samples if s.replicas is not None]
        entry: dict[str, Any] = {
            "metric": w.metric, "type": w.metric_type, "target": w.target, "target_quantity": w.target_text,
            "load_unit": w.load_unit, "min_replicas": w.min_replicas, "max_replicas": w.max_replicas,
            "initial_replicas": reps[0] if reps else None,
            "peak_replicas": max(reps) if reps else None,
            "final_replicas": reps[-1] if reps else None,
            "replica_changes": [{"t": c.t, "from": c.before, "to": c.after,
                                 "reason": c.reason} for c in changes[w.name]],
            "load_changes": settle_times(samples, load_changes[w.name], tolerance, w),
            "timeline": [s.to_json() for s in samples],
        }
        if w.metric_type == "External":
            served = [s.served for s in samples if s.served is not None]
            entry["peak_queue"] = max(served) if served else None
            entry["final_queue"] = served[-1] if served else None
        result["workloads"][w.name] = entry
    return result


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=2, sort_keys=False) + "\n")


LOAD_BAND: dict[str, Any] = {"color": "#ffdd88", "alpha": 0.35, "lw": 0}
STARTUP_BAND: dict[str, Any] = {"color": "#eeeeee", "lw": 0}


def plot(path: Path, workloads: Sequence[Workload], timelines: dict[str, list[Sample]],
         changes: dict[str, list[ReplicaChange]], load_changes: dict[str, list[LoadChange]],
         tolerance: float, title: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(workloads, timelines, changes, load_changes, tolerance, title)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def figure(workloads: Sequence[Workload], timelines: dict[str, list[Sample]],
           changes: dict[str, list[ReplicaChange]], load_changes: dict[str, list[LoadChange]],
           tolerance: float, title: str):  # -> matplotlib.figure.Figure
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(3, len(workloads), figsize=(7 * len(workloads), 9), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [1, 1.2, 1.2]})
    for col, w in enumerate(workloads):
        samples = timelines[w.name]
        t = [s.t for s in samples]
        ax_load, ax_metric, ax_rep = axes[0][col], axes[1][col], axes[2][col]
        ax_load.set_title(w.title, fontsize=12, fontweight="bold", loc="left")

        # load, with the load changes shaded
        ax_load.plot(t, [s.load for s in samples], color="#1f77b4", lw=2, label=w.load_unit)
        ax_load.set_ylabel(w.load_unit)
        for c in load_changes[w.name]:
            for ax in (ax_load, ax_metric, ax_rep):
                ax.axvspan(c.start, max(c.end, c.start + 0.5), **LOAD_BAND)
        if w.metric_type == "External":
            twin = ax_load.twinx()
            twin.plot(t, [s.served if s.served is not None else math.nan for s in samples],
                      color="#9467bd", lw=1.6, label="queue_messages_ready (served)")
            twin.set_ylabel("messages in queue", color="#9467bd")
            twin.tick_params(axis="y", colors="#9467bd")
            twin.set_ylim(bottom=0)
            lines = ax_load.get_lines() + twin.get_lines()
            ax_load.legend(lines, [ln.get_label() for ln in lines], loc="upper right", fontsize=8)
        else:
            ax_load.legend(loc="upper right", fontsize=8)
        ax_load.set_ylim(bottom=0)

        # metric vs target, with the tolerance band
        metric = [s.metric if s.metric is not None else math.nan for s in samples]
        label = f"{w.metric} per pod (as served)" if w.metric_type == "Pods" else f"{w.metric} / replicas (as served)"
        ax_metric.axhspan(w.target * (1 - tolerance), w.target * (1 + tolerance), color="#2ca02c", alpha=0.12,
                          label=f"tolerance ±{tolerance:g}")
        ax_metric.axhline(w.target, color="#2ca02c", ls="--", lw=1.5, label=f"target {w.target_text}")
        ax_metric.plot(t, metric, color="#d62728", lw=2, label=label)
        ax_metric.set_ylabel(w.metric)
        ax_metric.set_ylim(bottom=0)
        ax_metric.legend(loc="upper right", fontsize=8)

        # replicas, with each scale event marked
        ax_rep.step(t, [s.replicas if s.replicas is not None else math.nan for s in samples], where="post",
                    color="#ff7f0e", lw=2.2, label="replicas (scale)")
        ax_rep.step(t, [s.ready if s.ready is not None else math.nan for s in samples], where="post",
                    color="#7f7f7f", lw=1.2, ls=":", label="ready")
        ax_rep.step(t, [s.desired if s.desired is not None else math.nan for s in samples], where="post",
                    color="#17becf", lw=1.2, ls="--", label="desired (status)")
        for rc in changes[w.name]:
            up = rc.after > rc.before
            ax_rep.plot([rc.t], [rc.after], marker="^" if up else "v", color="#2ca02c" if up else "#d62728",
                        ms=9, zorder=5, ls="none")
            ax_rep.annotate(f"{rc.before}→{rc.after}", (rc.t, rc.after), textcoords="offset points",
                            xytext=(0, 9 if up else -15), ha="center", fontsize=8)
            for ax in (ax_load, ax_metric):
                ax.axvline(rc.t, color="#999999", lw=0.8, ls=":")
        ax_rep.set_ylabel("replicas")
        ax_rep.set_ylim(0, w.max_replicas + 1.5)
        ax_rep.set_xlabel("seconds since start")
        ax_rep.legend(loc="upper right", fontsize=8)
        for ax in (ax_load, ax_metric, ax_rep):
            ax.grid(alpha=0.3)
        if t:  # from t=0: the first seconds are start-up (Prometheus, adapter, controller)
            ax_rep.set_xlim(0, max(t) + 1)
            for ax in (ax_load, ax_metric, ax_rep):
                ax.axvspan(0, t[0], **STARTUP_BAND)
            ax_rep.text(t[0] / 2, 0.5, "start-up", rotation=90, ha="center", fontsize=7, color="#888888")
    fig.suptitle(title, fontsize=13)
    # what the shading and the dotted lines mean, once for every panel
    fig.legend(handles=[Patch(**LOAD_BAND, label="load changing (the profile ramps)"),
                        Patch(**STARTUP_BAND, label="start-up (Prometheus, adapter, controller)"),
                        Line2D([], [], color="#999999", lw=0.8, ls=":", label="scale event")],
               loc="lower center", ncol=3, fontsize=9, frameon=False)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig
