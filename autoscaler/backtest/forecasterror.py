"""Each forecast metric beside the load it forecast, and its error.

A forecast served at t is the adapter's guess of its query's value at t + horizon (`adapter.forecast`:
the forecast of `base`). So it is judged against `base` as observed `horizon` later, not against the
present: for every step t with both, the forecast made at t and the load that came at t + horizon
(between two steps, when the horizon is not a whole number of steps, the straight line between
them; the last `horizon` of the range has no load that came yet and is left out). Both are totals:
a Pods forecast is the forecast of the pods' total, compared with the pods' observed total.

- bias: the mean of forecast - load that came (positive: it ran high, scaling ahead of load that
  did not come; negative: low, leaving the present metric to meet the rise);
- relative bias: that mean over the mean load that came;
- below: the share of the steps where the forecast was below the load that came.
Pure functions over arrays; backtest supplies the fetched series.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from promscaler.times import format_duration

from .history import Series
from .queries import MetricQuery

__all__ = ["ForecastCheck", "ForecastError", "came", "checks", "forecast_error"]


def came(load: np.ndarray, shift: float) -> np.ndarray:
    """At each step i, `load` at step i + `shift` (linear between two steps; NaN past the end or
    where either step has no data)."""
    n = len(load)
    out = np.full(n, math.nan)
    shift = round(shift, 9)   # 300 s / 15 s is 20 steps, not 19.999...
    whole = math.floor(shift)
    frac = shift - whole
    last = n - whole - (1 if frac > 0 else 0)   # steps i < last have i + shift within the range
    if last <= 0:
        return out
    lo = load[whole:whole + last]
    out[:last] = lo if frac == 0 else lo * (1 - frac) + load[whole + 1:whole + 1 + last] * frac
    return out


@dataclass(frozen=True)
class ForecastError:
    steps: int                     # steps with a forecast and the load that came
    bias: float | None             # mean(forecast - load that came)
    relative_bias: float | None    # bias / mean(load that came)
    below: float | None            # share of those steps with forecast < load that came

    def row(self) -> dict[str, Any]:
        return {"steps": self.steps, "bias": self.bias, "relativeBias": self.relative_bias, "belowShare": self.below}


def forecast_error(forecast: np.ndarray, came_: np.ndarray) -> ForecastError:
    both = np.isfinite(forecast) & np.isfinite(came_)
    f, a = forecast[both], came_[both]
    if not f.size:
        return ForecastError(0, None, None, None)
    bias = float(np.mean(f - a))
    mean = float(np.mean(a))
    return ForecastError(int(f.size), bias, bias / mean if mean else None, float(np.mean(f < a)))


@dataclass(frozen=True)
class ForecastCheck:
    """One forecast metric of a spec, beside the load it forecast."""

    metric: str            # "Pods http_requests_forecast"
    horizon: float         # seconds
    forecast: np.ndarray   # its value (a total) at each step
    came: np.ndarray       # the load it forecast, as observed `horizon` after each step

    @cached_property
    def error(self) -> ForecastError:  # read by row, text and the HTML page
        return forecast_error(self.forecast, self.came)

    def row(self) -> dict[str, Any]:
        return {"metric": self.metric, "horizonSeconds": self.horizon, **self.error.row()}

    def text(self) -> str:
        e, ahead = self.error, format_duration(self.horizon)
        if e.bias is None:
            return f"{self.metric} ({ahead} ahead): no step with both a forecast and the load that came"
        rel = "" if e.relative_bias is None else f" ({e.relative_bias:+.1%})"
        assert e.below is not None
        return (f"{self.metric} ({ahead} ahead) against the load that came: bias {e.bias:+.4g}{rel}, below it "
                f"{e.below:.1%} of {e.steps} steps")


def checks(queries: Sequence[MetricQuery], data: Mapping[str, Series], step: float) -> list[ForecastCheck]:
    """The spec's forecast metrics, each beside its `base` as observed (`data` holds both)."""
    out = []
    for q in queries:
        if q.forecast is None or q.promql not in data or q.base not in data:
            continue
        out.append(ForecastCheck(f"{q.metric.type} {q.metric.name}", q.forecast.horizon, data[q.promql].total,
                                 came(data[q.base].total, q.forecast.horizon / step)))
    return out
