"""Forecast metrics: a rule's rendered `metricsQuery` turned into the PromQL of its forecast.

Everything is computed by Prometheus from history (subqueries, `offset`, `predict_linear`), so
any Prometheus-compatible backend answers it and no model is trained. The adapter serves it, and
`backtest` fetches the very same text as range data: one function, `forecast_query`, for both.

Pod names change between seasons, so a Pods forecast is made on the total of the workload's pods
(`workload_pattern` selects them in history by name) and divided by the caller over the pods that
exist now. Other objects (services, deployments, namespaces) and external series keep their labels
across seasons and are forecast series by series.

Missing history gives no value (the PromQL answers nothing), never a zero: an HPA listing the
metric and its forecast then follows the present metric alone.
"""

from __future__ import annotations

from adapter.podnames import workload_pattern
from adapter.rules import Forecast

__all__ = ["forecast_query", "promql_duration", "workload_pattern"]


def promql_duration(seconds: float) -> str:
    """`300s`, or `1500ms` when not whole seconds: valid in PromQL and MetricsQL alike."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def forecast_query(forecast: Forecast, query: str) -> str:
    """The forecast of `query` (an instant-vector PromQL expression), `forecast.horizon` ahead.

    seasonal, with P the season, H the horizon, W the level window and r the resolution:
        last_over_time((Q)[r:r] offset (P - H))             the value one season ago, H ahead
      * ( avg_over_time((Q)[W:r])                           times the recent level...
        / (avg_over_time((Q)[W:r] offset P) > 0) )          ...over the level one season ago
    A series whose level one season ago is zero or missing gets no forecast; with
    `maxLevelRatio` the ratio is `clamp_max(..., maxLevelRatio)`.

    linear: clamp_min(predict_linear((Q)[W:r], H), 0), for series that already had a value one
    window ago (a trend over a few minutes of a new workload is no forecast).

    With `fallback: present`, a series without a forecast is answered its present value (`or Q`).
    """
    q, r = f"({query})", promql_duration(forecast.resolution)
    if forecast.method == "seasonal":
        ahead = promql_duration(forecast.season - forecast.horizon)
        season, level = promql_duration(forecast.season), promql_duration(forecast.level_window)
        ratio = f"avg_over_time({q}[{level}:{r}]) / (avg_over_time({q}[{level}:{r}] offset {season}) > 0)"
        if forecast.max_level_ratio is not None:
            ratio = f"clamp_max({ratio}, {forecast.max_level_ratio:g})"
        expr = f"(last_over_time({q}[{r}:{r}] offset {ahead}) * ({ratio}))"
    else:
        window = promql_duration(forecast.window)
        expr = (f"(clamp_min(predict_linear({q}[{window}:{r}], {forecast.horizon:g}), 0)"
                f" and last_over_time({q}[{r}:{r}] offset {window}))")
    return f"({expr} or {q})" if forecast.fallback else expr
