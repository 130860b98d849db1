"""The history a forecast reads before the first scored step, and the steps it had none.

A forecast at a moment reads its season plus its level window plus its query's own range of
history before it (`adapter.forecast.history_needed`, the longest season's). Prometheus
evaluates the forecast's PromQL at each step of the replay and reads that history itself,
wherever it lies, so `--from` needs no widening; backtest and tune fetch the query the forecast
is made of over that span before `--from`, to say how much of it Prometheus has, and report the
steps at the start of the window where the forecast had no value (there a spec listing it
scales up on its other metrics but never down: a metric without a value blocks a scale-down, as
in Kubernetes).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np

from adapter.forecast import history_needed
from promscaler.times import format_duration

from .history import Grid, Series
from .queries import MetricQuery

__all__ = ["Before", "NoValue", "before_grid", "covers", "had_before", "needed", "no_value"]


@dataclass(frozen=True)
class Before:
    """One query a forecast is made of, over the history its forecasts need before `--from`."""

    base: str               # the PromQL the forecast is made of
    metrics: tuple[str, ...]  # the forecast metrics made of it
    seconds: float          # the longest history any of them needs (season + level window)

    def had(self, data: Series, grid: Grid) -> float:
        """Seconds of it Prometheus has: from its first value to `--from`."""
        have = np.flatnonzero(np.isfinite(data.total))
        return 0.0 if not have.size else grid.count * grid.step - float(have[0]) * grid.step


def needed(queries: Iterable[MetricQuery]) -> list[Before]:
    """What the forecasts among `queries` read before the window, one entry per query they are made of."""
    out: dict[str, tuple[tuple[str, ...], float]] = {}
    for q in queries:
        if q.forecast is None:
            continue
        metrics, seconds = out.get(q.base, ((), 0.0))
        name = q.metric.name
        seconds = max(seconds, history_needed(q.forecast, q.base))
        out[q.base] = ((*metrics, name) if name not in metrics else metrics, seconds)
    return [Before(base, metrics, seconds) for base, (metrics, seconds) in out.items()]


def had_before(before: Sequence[tuple[Before, Grid, Series]], base: str) -> float:
    """Seconds of history before --from Prometheus has for the query `base` (forecasts are made of it),
    from what was fetched before --from."""
    return max((b.had(series, grid) for b, grid, series in before if b.base == base), default=0.0)


def covers(queries: Iterable[MetricQuery | None], had: Callable[[str], float]) -> bool:
    """Whether every seasonal forecast among `queries` has a value from --from on: `had(base)`, the
    history before it, covers its shortest season plus its level window and lookback (a longer
    season falls back to a shorter one). The one test of which season sets `tune` fetches and tries."""
    return all(had(q.base) >= history_needed(q.forecast, q.base, min(q.forecast.seasons))
               for q in queries if q is not None and q.forecast is not None and q.forecast.method == "seasonal")


def before_grid(grid: Grid, seconds: float) -> Grid:
    """The steps of the `seconds` before the window, on the window's step (the last one before `--from`)."""
    count = max(1, math.ceil(seconds / grid.step))
    return Grid(grid.start - timedelta(seconds=count * grid.step), grid.step, count)


@dataclass(frozen=True)
class NoValue:
    """A forecast metric without a value over the first steps of the window."""

    metric: str
    needs: float            # seconds of history its forecast reads
    seconds: float          # from --from to its first value (the whole window: none at all)
    whole: bool             # no value in the whole window
    had: float              # seconds of that history Prometheus had before --from

    def text(self) -> str:
        which = "in the whole window" if self.whole else f"for the first {format_duration(self.seconds)} of the window"
        needs = format_duration(self.needs)
        why = (f"needs {needs} of history, Prometheus had {format_duration(self.had)} before --from"
               if self.had < self.needs else
               f"its {needs} of history were there: the level one season before was zero or missing")
        return f"{self.metric}: no value {which} ({why})"

    def row(self) -> dict[str, object]:
        return {"metric": self.metric, "needsSeconds": self.needs, "noValueSeconds": self.seconds,
                "noValueAtAll": self.whole, "hadSeconds": self.had}


def no_value(queries: Iterable[MetricQuery], data: Mapping[str, Series], grid: Grid,
             had: Callable[[str], float]) -> list[NoValue]:
    """The forecast metrics among `queries` without a value at the first steps of the window;
    `had(base)`: the seconds of history before --from Prometheus has for the query a forecast is made of."""
    out = []
    for q in queries:
        if q.forecast is None:
            continue
        values = data[q.promql].total
        have = np.flatnonzero(np.isfinite(values))
        first = int(have[0]) if have.size else len(values)
        if first:
            needs = history_needed(q.forecast, q.base)
            out.append(NoValue(q.metric.name, needs, first * grid.step, not have.size, min(had(q.base), needs)))
    return out
