"""What a replay means in numbers, and the three outputs: the terminal table, summary.json and
the PNG (matplotlib, imported only when a PNG is written).

- replica-hours: the simulated replicas integrated over the range;
- scale events: replica changes the engine made;
- seconds under-provisioned (exposure) and time to capacity per rise: the observed load per
  ready pod against one reference for every spec of the run (`exposure.py`; the baseline's, the
  first spec's, unless the flags set it): what the pods went through, comparable between specs
  whatever metrics and targets each lists, and with `tune`'s figures;
- time above its own targets: steps where some metric's value as the engine saw it (per pod, or
  the value for Value targets) exceeds that metric's own target x (1 + scale-up tolerance), times
  the step: what the spec itself aimed at (a forecast metric or another target changes it);
- highest replicas;
- each forecast metric's error against the load it forecast (`forecasterror.py`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .exposure import Exposure, Reference, exposure
from .forecasterror import ForecastCheck
from .history import Grid
from .queries import MetricQuery
from .replay import LOAD_MODEL, Replay

__all__ = ["Outcome", "summarize", "summary_rows", "table", "write_png", "write_summary"]


@dataclass
class Outcome:
    """One spec's replay, with what was asked and what the cluster actually did (when known)."""

    label: str
    queries: Sequence[MetricQuery]
    replay: Replay
    tolerance: float
    actual: np.ndarray | None = None   # the cluster's replicas per step (NaN where unknown)
    actual_source: str | None = None
    reference: Reference | None = None  # what the exposure is measured against (one for every spec of a run)
    observed: np.ndarray | None = None  # the reference metric's observed total (or value) per step
    forecasts: list[ForecastCheck] = field(default_factory=list)  # each forecast metric beside the load it forecast

    @cached_property
    def load(self) -> np.ndarray | None:
        """The observed load per ready pod, as the reference reads it; None without a reference."""
        if self.reference is None or self.observed is None:
            return None
        return self.reference.load(self.observed, self.replay.ready)

    @cached_property
    def exposed(self) -> Exposure | None:
        """`load` against the reference (None without one), once: the summary, the page and the PNG read it."""
        if self.load is None or self.reference is None:
            return None
        return exposure(self.load, self.reference, self.replay.grid.step)


def _fmt_time(grid: Grid, i: int) -> str:
    return grid.at(i).isoformat().replace("+00:00", "Z")


def summarize(o: Outcome) -> dict[str, Any]:
    r, grid = o.replay, o.replay.grid
    band = 1.0 + o.tolerance
    above = np.zeros(grid.count, dtype=bool)
    for k in range(r.ratios.shape[0]):
        with np.errstate(invalid="ignore"):
            above |= r.ratios[k] > band
    ups = [e.index for e in r.events if e.after > e.before]
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
        "secondsAboveOwnTargets": float(above.sum()) * grid.step,
        "maxReplicas": int(r.replicas.max()) if grid.count else 0,
        "stepsWithoutData": r.failures,
        **({"stepsInFallback": r.fallback, "stepsWithScheduleFloor": r.scheduled} if r.controls else {}),
        "loadModel": LOAD_MODEL,
        "metrics": [{"type": q.metric.type, "name": q.metric.name, "promql": q.promql, "shape": q.shape,
                     "source": q.source} for q in o.queries],
        "events": [{"time": e.time.isoformat().replace("+00:00", "Z"), "from": e.before, "to": e.after}
                   for e in r.events],
    }
    if o.exposed is not None:
        out["exposure"] = o.exposed.summary()
    if o.forecasts:
        out["forecasts"] = [f.row() for f in o.forecasts]
    if o.actual is not None:
        known = o.actual[np.isfinite(o.actual)]
        out["actual"] = {"source": o.actual_source,
                         "replicaHours": round(float(known.sum()) * grid.step / 3600.0, 3),
                         "maxReplicas": int(known.max()) if known.size else None}
    return out


def summary_rows(summaries: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    """The comparison the terminal table and report.html show: the specs, then one row per figure."""

    def exposed(s: dict[str, Any]) -> str:
        e = s.get("exposure")
        return "-" if e is None else _duration(e["secondsUnderProvisioned"])

    def capacity(s: dict[str, Any]) -> str:
        e = s.get("exposure")
        if e is None or not e["timeToCapacitySeconds"]["rises"]:
            return "-"
        c = e["timeToCapacitySeconds"]
        text = "-" if c["median"] is None else f"{_duration(c['median'])} / {_duration(c['max'])}"
        return text + (f" ({c['open']} open)" if c["open"] else "")

    def reference(s: dict[str, Any]) -> str:
        e = s.get("exposure")
        return "-" if e is None else f"{e['referenceTarget']:g} x {1 + e['tolerance']:g}"

    def actual(s: dict[str, Any], key: str) -> str:
        a = s.get("actual")
        return "-" if not a or a.get(key) is None else f"{a[key]:g}"

    rows = [
        ("replica-hours", lambda s: f"{s['replicaHours']:g}"),
        ("  actual", lambda s: actual(s, "replicaHours")),
        ("scale events (up/down)", lambda s: f"{s['scaleEvents']} ({s['scaleUps']}/{s['scaleDowns']})"),
        ("under-provisioned (load per ready pod > reference)", exposed),
        ("  reference: target x (1 + tolerance)", reference),
        ("  time to capacity per rise (median / max)", capacity),
        ("time above its own targets (per metric)", lambda s: _duration(s["secondsAboveOwnTargets"])),
        ("highest replicas", lambda s: str(s["maxReplicas"])),
        ("  actual", lambda s: actual(s, "maxReplicas")),
        ("steps without data", lambda s: str(s["stepsWithoutData"])),
    ]
    return [s["spec"] for s in summaries], [[name, *(fn(s) for s in summaries)] for name, fn in rows]


def table(summaries: Sequence[dict[str, Any]], out: TextIO, reference: Reference | None = None,
          forecasts: Sequence[tuple[str, ForecastCheck]] = ()) -> None:
    from rich.console import Console
    from rich.table import Table

    tty = hasattr(out, "isatty") and out.isatty()
    console = Console(file=out, highlight=False, markup=False, width=None if tty else 160)
    t = Table(box=None, pad_edge=False, padding=(0, 2))
    heads, rows = summary_rows(summaries)
    t.add_column("")
    for head in heads:
        t.add_column(head, justify="right")
    for row in rows:
        t.add_row(*row)
    first = summaries[0]
    console.print(f"backtest {first['from']} .. {first['to']}, step {first['stepSeconds']:g}s, "
                  f"{first['decisions']} decisions per spec")
    console.print(t)
    if reference is not None:
        console.print(reference.text())
    for label, f in forecasts:
        console.print(f"{label}: {f.text()}")
    console.print(f"load model: {LOAD_MODEL}", style="dim")


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:g}s"
    if seconds < 7200:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"


def write_summary(summaries: Sequence[dict[str, Any]], path: Path, reference: Reference | None = None) -> None:
    head = {} if reference is None else {"reference": reference.row()}
    path.write_text(json.dumps({**head, "specs": list(summaries)}, indent=2) + "\n")


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
        load, exposed = o.load, o.exposed
        if load is not None and exposed is not None and o.reference is not None:
            ref = o.reference
            ax2.plot(times, _peaks(load, every), color="black", linewidth=0.7, drawstyle="steps-post",
                     label=f"observed {ref.metric} per ready pod")
            ax2.axhline(ref.band, color="tab:red", linewidth=0.8, linestyle=":",
                        label=f"reference {ref.target:g} x (1 + {ref.tolerance:g})")
            above = _peaks(exposed.above.astype(float), every) > 0
            above[1:] |= above[:-1]  # a step above the band spans to the next step (drawn steps-post)
            ax2.fill_between(times, 0, 1, where=above, transform=ax2.get_xaxis_transform(), color="tab:red",
                             alpha=0.25, step="post", linewidth=0, label="under-provisioned")
        if r.events:
            ax2.vlines(event_times, 0, 1, transform=ax2.get_xaxis_transform(), color="tab:orange", alpha=0.3,
                       linewidth=0.8)
        ax2.set_ylabel("per pod (as the engine saw it)")
        ax2.legend(loc="upper left", fontsize=8)
        ax2.xaxis.set_major_formatter(mdates.DateFormatter("%m-%d %H:%M"))
        for label in ax2.get_xticklabels():
            label.set_rotation(30)
            label.set_fontsize(8)
    fig.suptitle("backtest: replicas and metric vs. target (band: tolerance; markers: scale events; red: load per "
                 "ready pod above the reference)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
