"""Forecast metrics: a rule's rendered `metricsQuery` turned into the PromQL of its forecast.

Everything is computed by Prometheus from history (subqueries, `offset`, `predict_linear`), so
any Prometheus-compatible backend answers it and no model is trained. The adapter serves it, and
`backtest` fetches the very same text as range data: one function, `forecast_query`, for both.

Pod names change between seasons, so a Pods forecast is made on the total of the workload's pods
(`workload_pattern` selects them in history by name) and divided by the caller over the pods that
exist now. Other objects (services, deployments, namespaces) and external series keep their labels
across seasons and are forecast series by series.

Missing history gives no value (the PromQL answers nothing), never a zero: an HPA listing the
metric and its forecast then follows the present metric alone. History is missing until the
window a forecast reads one season ago is whole, the query's own range included (`lookback`):
a level one season ago that holds a new counter's `rate()` ramp would make a phantom forecast.
"""

from __future__ import annotations

import re

from adapter.podnames import workload_pattern
from adapter.rules import Forecast
from promscaler.times import PROMQL_DURATION, parse_duration

__all__ = ["forecast_query", "history_needed", "lookback", "promql_duration", "workload_pattern"]


def promql_duration(seconds: float) -> str:
    """`300s`, or `1500ms` when not whole seconds: valid in PromQL and MetricsQL alike."""
    ms = round(seconds * 1000)
    return f"{ms // 1000}s" if ms % 1000 == 0 else f"{ms}ms"


def lookback(query: str) -> float:
    """Seconds of input before a moment that `query` reads: its longest range (`[2m]`, a
    subquery's `[1h:1m]`) plus its longest `offset`. Strings are skipped (a label regex's
    `[a-z0-9]` is no range). A series younger than that is a ramp in `query` (a `rate()` of a
    new counter rises from zero over its range), not a load."""
    text = _STRING.sub('""', query)
    ranges = [parse_duration(m) for m in _RANGE.findall(text)]
    offsets = [parse_duration(m) for m in _OFFSET.findall(text)]
    return max(ranges, default=0.0) + max(offsets, default=0.0)


def history_needed(forecast: Forecast, query: str, season: float | None = None) -> float:
    """Seconds of `query`'s history before a moment that its forecast needs to have a value there:
    `season` (default the longest) plus the level window plus the query's own lookback (the
    guard of `forecast_query`); for linear, the window plus the lookback."""
    if forecast.method != "seasonal":
        return forecast.window + lookback(query)
    return (forecast.season if season is None else season) + forecast.level_window + lookback(query)


def forecast_query(forecast: Forecast, query: str) -> str:
    """The forecast of `query` (an instant-vector PromQL expression), `forecast.horizon` ahead.

    seasonal, for each season P (longest first), with H the horizon, W the level window, r the
    resolution and L = `lookback(query)`:
        last_over_time((Q)[r:r] offset (P - H))             the value one season ago, H ahead
      * ( avg_over_time((Q)[W:r])                           times the recent level...
        / (avg_over_time((Q)[W:r] offset P) > 0) )          ...over the level one season ago
      and last_over_time((Q)[r:r] offset (P + W + L))       if that window was whole
    joined by `or`: a series is answered by the longest season it has whole history for, else
    the next shorter one. A series whose level one season ago is zero or missing gets no
    forecast from that season; with `maxLevelRatio` the ratio is `clamp_max(..., maxLevelRatio)`.

    linear: clamp_min(predict_linear((Q)[W:r], H), 0), for series that already had a whole
    value one window ago (`offset (W + L)`: a trend over a new workload is no forecast).

    Against noise, per season: `envelope` reads `<mean|max|quantile>_over_time((Q)[H:r] offset
    (P - H))`, what the horizon after that phase held, instead of its last instant; `pastSeasons: k`
    writes the term for P, 2P, ... kP, each labelled `promscaler_season`, and combines those a
    series has whole history for (`avg`/`quantile`/`max without (promscaler_season)`); `margin`
    multiplies the result. With their defaults the text is the single-season formula above.

    With `fallback: present`, a series without a forecast is answered its present value (`or Q`).
    """
    q, r = f"({query})", promql_duration(forecast.resolution)
    ramp = lookback(query)
    if forecast.method == "seasonal":
        expr = " or ".join(_combined(q, r, forecast, season, ramp) for season in forecast.seasons)
        if forecast.margin != 1:
            expr = f"({expr}) * {forecast.margin:g}"
    else:
        window = promql_duration(forecast.window)
        expr = (f"(clamp_min(predict_linear({q}[{window}:{r}], {forecast.horizon:g}), 0)"
                f" and last_over_time({q}[{r}:{r}] offset {promql_duration(forecast.window + ramp)}))")
    return f"({expr} or {q})" if forecast.fallback else expr


SEASON_LABEL = "promscaler_season"  # tells the past seasons apart while they are combined
_AGGREGATE = {"mean": "avg without ({label}) ({expr})", "max": "max without ({label}) ({expr})",
              "median": "quantile without ({label}) (0.5, {expr})",
              "quantile": "quantile without ({label}) ({q:g}, {expr})"}


def _combined(q: str, r: str, forecast: Forecast, season: float, ramp: float) -> str:
    """One season's term: the last `pastSeasons` seasons at the same phase, combined, series by
    series, over those with whole history (one alone: the single-season term as it is)."""
    if forecast.past_seasons == 1:
        return _seasonal(q, r, forecast, season, ramp)
    terms = " or ".join(f'label_replace({_seasonal(q, r, forecast, season * i, ramp)}, "{SEASON_LABEL}", "{i}", "", "")'
                        for i in range(1, forecast.past_seasons + 1))
    return "(" + _AGGREGATE[forecast.combine].format(label=SEASON_LABEL, expr=terms, q=forecast.quantile) + ")"


def _seasonal(q: str, r: str, forecast: Forecast, season: float, ramp: float) -> str:
    """One season's term of `forecast_query`: nothing for a series whose level window one
    season ago began before the series had `ramp` seconds of history."""
    ahead = promql_duration(season - forecast.horizon)
    ago, level = promql_duration(season), promql_duration(forecast.level_window)
    whole = promql_duration(season + forecast.level_window + ramp)
    ratio = f"avg_over_time({q}[{level}:{r}]) / (avg_over_time({q}[{level}:{r}] offset {ago}) > 0)"
    if forecast.max_level_ratio is not None:
        ratio = f"clamp_max({ratio}, {forecast.max_level_ratio:g})"
    return f"({_ahead(q, r, forecast, ahead)} * ({ratio}) and last_over_time({q}[{r}:{r}] offset {whole}))"


def _ahead(q: str, r: str, forecast: Forecast, offset: str) -> str:
    """The value one season ago, `horizon` ahead: its last instant, or the envelope of the horizon
    before it (from the same phase one season ago to `horizon` after it)."""
    if forecast.envelope == "last":
        return f"last_over_time({q}[{r}:{r}] offset {offset})"
    span = f"{q}[{promql_duration(forecast.horizon)}:{r}] offset {offset}"
    if forecast.envelope == "quantile":
        return f"quantile_over_time({forecast.quantile:g}, {span})"
    return f"{'avg' if forecast.envelope == 'mean' else 'max'}_over_time({span})"


_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_RANGE = re.compile(rf"\[\s*({PROMQL_DURATION})\s*(?::\s*(?:{PROMQL_DURATION})?\s*)?\]")
_OFFSET = re.compile(rf"\boffset\s+({PROMQL_DURATION})\b")
