"""Range data from Prometheus through prometheus-api-client, in chunks (Prometheus answers at
most 11,000 points per series per query), with a progress bar; each answer becomes a pandas
frame (`MetricRangeDataFrame`) and then arrays on the replay's step grid:
`per-pod` queries give the summed value and the number of series at each step, `total`
queries the summed value. A step without data is NaN."""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from prometheus_api_client import MetricRangeDataFrame, PrometheusConnect

from . import align

if TYPE_CHECKING:  # plan.py and before.py read this module's Grid and Series
    from .before import Before
    from .plan import Reading

__all__ = ["CHUNK_POINTS", "Fetcher", "Grid", "HistoryError", "Series"]

CHUNK_POINTS = 10_000  # below Prometheus' 11,000 points per series


class HistoryError(Exception):
    pass


@dataclass(frozen=True)
class Grid:
    start: datetime
    step: float          # seconds
    count: int

    @property
    def times(self) -> np.ndarray:
        """Unix seconds of every step."""
        return self.start.timestamp() + np.arange(self.count) * self.step

    def at(self, i: int) -> datetime:
        return self.start + timedelta(seconds=i * self.step)


@dataclass(frozen=True)
class Series:
    total: np.ndarray     # summed value per step (NaN: no data)
    count: np.ndarray     # number of series per step (0: no data)


class Fetcher:
    """One Prometheus; `progress(done, total)` is called as chunks arrive."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, disable_ssl: bool = False,
                 timeout: int = 120, workers: int = 2) -> None:
        self.prom = PrometheusConnect(url=url, headers=headers, disable_ssl=disable_ssl, timeout=timeout)
        self.url = url
        self.workers = workers

    def series_names(self, series_query: str) -> list[str]:
        """The metric names Prometheus has for a rule's seriesQuery (its `__name__` values)."""
        try:
            return list(self.prom.get_label_values("__name__", params={"match[]": series_query}))
        except Exception as exc:  # requests and API errors alike: one line
            raise HistoryError(f"Prometheus at {self.url}: series for {series_query!r}: {exc}") from None

    def _chunk(self, promql: str, grid: Grid, first: int, last: int) -> pd.DataFrame | None:
        """One chunk of a query over a grid, as sent (already framed: `align.frame`)."""
        start, end = grid.at(first), grid.at(last)
        try:
            result = self.prom.custom_query_range(promql, start_time=start, end_time=end, step=f"{grid.step:g}s")
        except Exception as exc:
            raise HistoryError(f"Prometheus at {self.url}: {promql}: {exc}") from None
        if not result:
            return None
        with warnings.catch_warnings():  # the library's own use of a pandas API pandas deprecates
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", DeprecationWarning)
            return MetricRangeDataFrame(result)

    def fetch(self, queries: Sequence[str], grid: Grid,
              progress: Callable[[int, int], None] = lambda done, total: None) -> dict[str, Series]:
        """Every query over the grid, chunked; identical queries are asked once, each on the
        history's own grid (`align.frame`: the same history gives the same series wherever it lies)."""
        unique = list(dict.fromkeys(queries))
        framed = {q: _framed(q, grid) for q in unique}
        chunks = [(q, first, min(first + CHUNK_POINTS, grid.count) - 1)
                  for q in unique for first in range(0, grid.count, CHUNK_POINTS)]
        frames: dict[str, list[pd.DataFrame]] = {q: [] for q in unique}
        done = 0
        progress(0, len(chunks))
        with ThreadPoolExecutor(max_workers=self.workers) as pool:
            for (q, _, _), frame in zip(chunks, pool.map(lambda c: self._chunk(*framed[c[0]], c[1], c[2]), chunks),
                                        strict=True):
                if frame is not None:
                    frames[q].append(frame)
                done += 1
                progress(done, len(chunks))
        return {q: _on_grid(frames[q], framed[q][1]) for q in unique}

    def read(self, reading: Reading, progress: Callable[[int, int], None] = lambda done, total: None
             ) -> tuple[dict[str, Series], list[tuple[Before, Grid, Series]]]:
        """A plan's history: first what its forecasts read before --from, which decides the season
        sets kept (`Reading.keep_covered`), then every query kept over the grid in one pass."""
        before = [(b, grid, self.fetch([b.base], grid)[b.base]) for b, grid in reading.before]
        reading.keep_covered(before)
        return self.fetch(reading.promql(), reading.grid, progress), before


def _framed(promql: str, grid: Grid) -> tuple[str, Grid]:
    """The query as sent and the grid it is evaluated on: `grid` moved back by `align.frame`'s delta."""
    sent, delta = align.frame(promql, grid.start, grid.step)
    return sent, Grid(grid.start - timedelta(seconds=delta), grid.step, grid.count)


def _on_grid(frames: list[pd.DataFrame], grid: Grid) -> Series:
    total = np.full(grid.count, math.nan)
    count = np.zeros(grid.count, dtype=np.int64)
    if not frames:
        return Series(total, count)
    frame = pd.concat(frames)
    seconds = frame.index.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e9 \
        if not np.issubdtype(frame.index.dtype, np.number) else frame.index.to_numpy(dtype=float)
    steps = np.rint((seconds - grid.start.timestamp()) / grid.step).astype(np.int64)
    values = pd.to_numeric(frame["value"], errors="coerce").to_numpy(dtype=float)
    keep = (steps >= 0) & (steps < grid.count) & np.isfinite(values)
    steps, values = steps[keep], values[keep]
    sums = np.bincount(steps, weights=values, minlength=grid.count)
    counts = np.bincount(steps, minlength=grid.count)
    has = counts > 0
    total[has] = sums[has]
    count[:] = counts
    return Series(total, count)
