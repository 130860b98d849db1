"""report.html for `backtest` and `tune`: one file that opens from disk with no network, the data
and the charting library (uPlot, from npm: web/package.json, installed by scripts/setup.sh) inline.

The page itself is web/report.js and web/report.css; this module only lays out the data: every
step of every series, the scale events with the engine's explanation, and each forecast metric
beside the load it forecast (its value at t, the load that came at t + horizon) with its error. The page decimates what
is in view where the screen cannot show the points: beyond `BUCKETS` steps in view, buckets of
ceil(steps / BUCKETS) steps (aligned on multiples of that size), each keeping its first step and
every series' lowest and highest, and every scale event's step always. Zoomed in to `BUCKETS`
steps or fewer, every step is drawn.
"""

from __future__ import annotations

import errno
import json
import math
from collections.abc import Sequence
from html import escape
from pathlib import Path
from typing import Any

import numpy as np

from promscaler.times import format_duration

from .report import Outcome, summary_rows

__all__ = ["BUCKETS", "backtest_page", "tune_page", "write_backtest_html", "write_tune_html"]

BUCKETS = 2000
WEB = Path(__file__).with_name("web")
UPLOT = WEB / "node_modules" / "uplot"


def _values(a: np.ndarray) -> list[float | None]:
    """JSON numbers, short: whole numbers without a fraction, NaN as null."""
    return [None if not math.isfinite(v) else (int(v) if v.is_integer() else round(v, 4)) for v in a.tolist()]


def _runs(mask: np.ndarray, times: np.ndarray, step: float) -> list[list[float]]:
    """[start, end) times of each run of True steps (a step counts until the next one)."""
    edges = np.diff(np.concatenate(([0], mask.astype(np.int8), [0])))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [[float(times[s]), float(times[e - 1] + step)] for s, e in zip(starts, ends, strict=True)]


def _spec_data(o: Outcome) -> dict[str, Any]:
    r, grid = o.replay, o.replay.grid
    times = grid.times
    columns: list[tuple[str, str, np.ndarray]] = []
    bands = []
    load = o.load
    if load is not None and o.reference is not None:
        columns.append((f"observed {o.reference.metric} per ready pod", "load", load))
    for k, q in enumerate(o.queries):
        columns.append((f"{q.metric.type} {q.metric.name} (as the engine saw it)", "load", r.values[k]))
        t = q.metric.target
        milli = t.average_value_milli if t.average_value_milli is not None else t.value_milli
        if milli is not None:
            v = milli / 1000.0
            bands.append({"label": f"{q.metric.name} target {v:g} ± {o.tolerance:g}",
                          "lo": v * (1 - o.tolerance), "hi": v * (1 + o.tolerance)})
    columns.append(("simulated replicas", "replicas", r.replicas.astype(float)))
    if o.actual is not None:
        columns.append(("actual replicas", "replicas", o.actual))
    out: dict[str, Any] = {
        "label": o.label,
        "start": float(times[0]),
        "step": grid.step,
        "series": [{"label": name, "scale": scale, "values": _values(col)} for name, scale, col in columns],
        "events": [{"i": e.index, "t": float(times[e.index]), "from": e.before, "to": e.after,
                    "lines": list(e.explanation)} for e in r.events],
        "bands": bands,
        "under": [],
        "reference": None,
        "forecasts": [{"label": f.metric, "start": float(times[0]), "step": grid.step, "events": [], "text": f.text(),
                       "error": f.error.row(),
                       "series": [{"label": f"{f.metric} made at t (a total)", "scale": "load",
                                   "values": _values(f.forecast)},
                                  {"label": f"the load it forecast, as it came at t + {format_duration(f.horizon)}",
                                   "scale": "load", "values": _values(f.came)}]}
                      for f in o.forecasts],
    }
    if o.exposed is not None and o.reference is not None and math.isfinite(o.reference.band):
        ref = o.reference
        out["under"] = _runs(o.exposed.above, times, grid.step)
        out["reference"] = {"label": f"reference {ref.target:g} x (1 + {ref.tolerance:g})", "value": ref.band}
    return out


def _asset(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        raise OSError(errno.ENOENT, f"report.html: no {path}: run scripts/setup.sh (npm ci in {WEB})") from None


def _page(title: str, data: dict[str, Any]) -> str:
    version = json.loads(_asset(UPLOT / "package.json"))["version"]
    license_text = _asset(UPLOT / "LICENSE").replace("*/", "* /")
    data = {**data, "title": title, "uplot": version}
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    return (_asset(WEB / "report.html")
            .replace("{{title}}", escape(title))
            .replace("{{css}}", _asset(UPLOT / "dist" / "uPlot.min.css") + _asset(WEB / "report.css"))
            .replace("{{uplot}}", f"/*! uPlot {version}, https://github.com/leeoniya/uPlot\n{license_text}*/\n"
                     + _asset(UPLOT / "dist" / "uPlot.iife.min.js"))
            .replace("{{script}}", _asset(WEB / "report.js"))
            .replace("{{data}}", payload))


def backtest_page(outcomes: Sequence[Outcome], summaries: Sequence[dict[str, Any]]) -> str:
    first = summaries[0]
    heads, rows = summary_rows(summaries)
    return _page(f"backtest {first['from']} .. {first['to']}", {
        "kind": "backtest",
        "buckets": BUCKETS,
        "subtitle": f"step {first['stepSeconds']:g}s, {first['decisions']} decisions per spec; "
                    f"load model: {first['loadModel']}",
        "reference": outcomes[0].reference.text() if outcomes and outcomes[0].reference else None,
        "specs": [_spec_data(o) for o in outcomes],
        "table": {"heads": heads, "rows": rows},
    })


def tune_page(summary: dict[str, Any], given_yaml: str, chosen_yaml: str) -> str:
    """`summary` as tune.json has it (finite numbers only)."""
    return _page(f"tune {summary['spec']}", {"kind": "tune", "summary": summary,
                                             "given": given_yaml, "chosen": chosen_yaml})


def write_backtest_html(outcomes: Sequence[Outcome], summaries: Sequence[dict[str, Any]], path: Path) -> None:
    path.write_text(backtest_page(outcomes, summaries))


def write_tune_html(summary: dict[str, Any], given_yaml: str, chosen_yaml: str, path: Path) -> None:
    path.write_text(tune_page(summary, given_yaml, chosen_yaml))
