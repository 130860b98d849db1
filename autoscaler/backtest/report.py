"""What a replay means in numbers, and the three outputs: the terminal table, summary.json and
the PNG (matplotlib, imported only when a PNG is written).

- replica-hours: the simulated replicas integrated over the range;
- scale events: replica changes the engine made;
- time above target: steps where some metric's per-pod value (or value, for Value targets)
  exceeds target x (1 + scale-up tolerance), times the step;
- highest replicas;
- scale-up delay: from each load rise (a step where some metric goes above that band after
  being within it) to the next scale-up, first and longest.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .history import Grid
from .queries import MetricQuery
from .replay import LOAD_MODEL, Replay

__all__ = ["Outcome", "summarize", "table", "write_png", "write_summary"]


@dataclass
class Outcome:
    """One spec's replay, with what was asked and what the cluster actually did (when known)."""

    label: str
    queries: Sequence[MetricQuery]
    replay: Replay
    tolerance: float
    actual: np.ndarray | None = None   # the cluster's replicas per step (NaN where unknown)
    actual_source: str | None = None


def _fmt_time(grid: Grid, i: int) -> str:
    return grid.at(i).isoformat().replace("+00:00", "Z")


def summarize(o: Outcome) -> dict[str, Any]:
    r, grid = o.replay, o.replay.grid
    band = 1.0 + o.tolerance
    above = np.zeros(grid.count, dtype=bool)
    for k in range(r.ratios.shape[0]):
        with np.errstate(invalid="ignore"):
            above |= r.ratios[k] > band
    rises = [i for i in range(grid.count) if above[i] and (i == 0 or not above[i - 1])]
    ups = [e.index for e in r.events if e.after > e.before]
    delays = []
    for i in rises:
        nxt = next((u for u in ups if u >= i), None)
        if nxt is not None:
            delays.append((nxt - i) * grid.step)
    out: dict[str, Any] = {
        "spec": o.label,
        "from": _fmt_time(grid, 0),
        "to": _fmt_time(grid, grid.count - 1),
        "stepSeconds": grid.step,
        "decisions": grid.count,
        "replicaHours": round(float(r.replicas.sum()) * grid.step / 3600.0, 3),
        "scaleEvents": len(r.events),
        "scaleUps": len(ups),
        "scaleDowns": len(r.events) - len(ups),
        "secondsAboveTarget": float(above.sum()) * grid.step,
        "maxReplicas": int(r.replicas.max()) if grid.count else 0,
        "loadRises": len(rises),
        "scaleUpDelaySeconds": {"first": delays[0] if delays else None, "max": max(delays) if delays else None},
        "stepsWithoutData": r.failures,
        **({"stepsInFallback": r.fallback, "stepsWithScheduleFloor": r.scheduled} if r.controls else {}),
        "loadModel": LOAD_MODEL,
        "metrics": [{"type": q.metric.type, "name": q.metric.name, "promql": q.promql, "shape": q.shape,
                     "source": q.source} for q in o.queries],
        "events": [{"time": e.time.isoformat().replace("+00:00", "Z"), "from": e.before, "to": e.after}
                   for e in r.events],
    }
    if o.actual is not None:
        known = o.actual[np.isfinite(o.actual)]
        out["actual"] = {"source": o.actual_source,
                         "replicaHours": round(float(known.sum()) * grid.step / 3600.0, 3),
                         "maxReplicas": int(known.max()) if known.size else None}
    return out


def table(summaries: Sequence[dict[str, Any]], out: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table

    tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, highlight=False, markup=False, width=None if tty else 160)
    t = Table(box=None, pad_edge=False, padding=(0, 2))
    t.add_column("")
    for s in summaries:
        t.add_column(s["spec"], justify="right")

    def delay(s: dict[str, Any]) -> str:
        d = s["scaleUpDelaySeconds"]
        return "-" if d["first"] is None else f"{d['first']:g}s (max {d['max']:g}s)"

    def actual(s: dict[str, Any], key: str) -> str:
        a = s.get("actual")
        return "-" if not a or a.get(key) is None else f"{a[key]:g}"

    rows = [
        ("replica-hours", lambda s: f"{s['replicaHours']:g}"),
        ("  actual", lambda s: actual(s, "replicaHours")),
        ("scale events (up/down)", lambda s: f"{s['scaleEvents']} ({s['scaleUps']}/{s['scaleDowns']})"),
        ("time above target", lambda s: _duration(s["secondsAboveTarget"])),
        ("highest replicas", lambda s: str(s["maxReplicas"])),
        ("  actual", lambda s: actual(s, "maxReplicas")),
        ("load rise -> first scale-up", delay),
        ("steps without data", lambda s: str(s["stepsWithoutData"])),
    ]
    for name, fn in rows:
        t.add_row(name, *(fn(s) for s in summaries))
    first = summaries[0]
    console.print(f"backtest {first['from']} .. {first['to']}, step {first['stepSeconds']:g}s, "
                  f"{first['decisions']} decisions per spec")
    console.print(t)
    console.print(f"load model: {LOAD_MODEL}", style="dim")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def write_summary(summaries: Sequence[dict[str, Any]], path: Path) -> None:
    path.write_text(json.dumps({"specs": list(summaries)}, indent=2) + "\n")


PLOT_POINTS = 3000


def _peaks(values: np.ndarray, every: int) -> np.ndarray:
    """The highest value of each bucket of `every` steps (NaN when a bucket has none)."""
    if every == 1:
        return values
    padded = np.full(math.ceil(len(values) / every) * every, np.nan)
    padded[: len(values)] = values
    buckets = padded.reshape(-1, every)
    out = np.full(len(buckets), np.nan)
    has = np.isfinite(buckets).any(axis=1)
    out[has] = np.nanmax(buckets[has], axis=1)
    return out


def write_png(outcomes: Sequence[Outcome], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    cols = len(outcomes)
    fig, axes = plt.subplots(2, cols, figsize=(6.5 * cols, 6.5), sharex=True, squeeze=False)
    for c, o in enumerate(outcomes):
        r, grid = o.replay, o.replay.grid
        every = max(1, math.ceil(grid.count / PLOT_POINTS))  # a week at 15 s is 40,320 steps: plot bucket peaks
        times = (grid.times[::every] * 1000).astype("datetime64[ms]")
        ax = axes[0][c]
        ax.step(times, _peaks(r.replicas, every), where="post", label="simulated replicas", color="tab:blue")
        if o.actual is not None:
            ax.step(times, _peaks(o.actual, every), where="post", label="actual replicas", color="tab:gray",
                    linestyle="--")
        event_times = (grid.times[[e.index for e in r.events]] * 1000).astype("datetime64[ms]")
        ups = np.array([e.after > e.before for e in r.events], dtype=bool)
        after = np.array([e.after for e in r.events])
        if r.events:
            ax.scatter(event_times[ups], after[ups], marker="^", color="tab:green", zorder=3, s=18)
            ax.scatter(event_times[~ups], after[~ups], marker="v", color="tab:red", zorder=3, s=18)
        ax.set_title(o.label, fontsize=9)
        ax.set_ylabel("replicas")
        ax.legend(loc="upper left", fontsize=8)
        ax2 = axes[1][c]
        for k, q in enumerate(o.queries):
            target = q.metric.target
            milli = target.average_value_milli if target.average_value_milli is not None else target.value_milli
            ax2.plot(times, _peaks(r.values[k], every), label=f"{q.metric.type} {q.metric.name}",
                     drawstyle="steps-post")
            if milli is not None:
                value = milli / 1000.0
                ax2.axhline(value, color="black", linewidth=0.8)
                ax2.axhspan(value * (1 - o.tolerance), value * (1 + o.tolerance), color="tab:green", alpha=0.15)
        if r.events:
            ax2.vlines(event_times, 0, 1, transform=ax2.get_xaxis_transform(), color="tab:orange", alpha=0.3,
                       linewidth=0.8)
        ax2.set_ylabel("per pod (as the engine saw it)")
        ax2.legend(loc="upper left", fontsize=8)
        ax2.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
        for label in ax2.get_xticklabels():
            label.set_rotation(30)
            label.set_fontsize(8)
    fig.suptitle("backtest: replicas and metric vs. target (band: tolerance; markers: scale events)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
