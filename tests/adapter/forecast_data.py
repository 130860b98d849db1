"""A short, known history for the forecast tests: one season (`1d`) ago and today, as gauges
backfilled into a real Prometheus, with values hand-chosen so each forecast is worked out by hand.

Times are relative to T0 (the test's start, on a whole minute); every value is constant (or exactly
linear) for at least 15 minutes around the instants a forecast reads, so an answer within 15 minutes
of T0 is known whatever the exact moment of the request. Samples every 30 s, on multiples of 30 s,
so a query at a whole minute reads a sample taken at that very second.

Yesterday ("before" until T0 - 1d + 20m, "after" from then) and today (T0 - 2h .. T0 + 2h):
- seasonal forecasts (season 1d, horizon 30m, levelWindow 30m) read yesterday's "after" value
  (one season ago, 30m ahead), today's level and yesterday's "before" level (the 30 minutes up
  to one season ago): forecast = after * today / before.
- linear forecasts (window 30m, horizon 10m) read today's exact lines: the forecast is the line
  10 minutes after the request.

Seasons (`visits`, seasons [7d, 1d]): some sites also hold one week ago (T0 - 7d - 2h ..
T0 - 7d + 2h, "before" then "after" like yesterday); the weekly season answers them, the daily one
the sites with yesterday only.

Young counters (`requests_total`, 1 request/s, `rate(...[2m])`): series that begin inside or just
before the level window one season ago, read at the fixed instant AT_YOUNG (not at the request's).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterator

import httpx
import yaml

from adapter.forecast import forecast_query, workload_pattern
from adapter.naming import NAMESPACES, CompiledRule, CompiledRules, compile_rules
from adapter.promql import external_query, resource_query, workload_query
from adapter.rules import Forecast, parse_rules
from kubesim.prometheus import PrometheusServer, start_backfilled
from promscaler.selectors import parse_selector

DAY = 86400
STEP = 30
CHANGE = 20 * 60  # yesterday's change, seconds after T0 - 1d
HORIZON_SEASONAL = 30 * 60
HORIZON_LINEAR = 10 * 60

WEB_NOW = ("web-5b9d8c7f4-x2x7z", "web-5b9d8c7f4-q4l9n")  # Deployment web's pods today
WEB_BEFORE = {"web-6c8f7d5b9-kk2wz": 4.0, "web-6c8f7d5b9-m5t8s": 6.0}  # yesterday, other pod names
WEB_AFTER = {"web-6c8f7d5b9-kk2wz": 8.0, "web-6c8f7d5b9-m5t8s": 10.0, "web-6c8f7d5b9-p2r4v": 12.0}
WEB_TODAY = {WEB_NOW[0]: 6.0, WEB_NOW[1]: 9.0}
CANARY = "web-canary-5b9d8c7f4-x2x7z"  # Deployment web-canary, same namespace: never part of web
FRESH = "fresh-7c9d6b5f8-z4x2w"  # a new workload: today's last 5 minutes only

# seasonal, by hand: after * today / before
POD_SEASONAL = sum(WEB_AFTER.values()) * sum(WEB_TODAY.values()) / sum(WEB_BEFORE.values()) / len(WEB_NOW)
SERVICE = {"before": 20.0, "after": 50.0, "today": 30.0}  # service_load{service="api"}
SERVICE_SEASONAL = 50.0 * 30.0 / 20.0
QUEUE = {"before": 10.0, "after": 30.0, "today": 15.0}  # queue_depth{queue="orders"}
QUEUE_SEASONAL = 30.0 * 15.0 / 10.0
QUEUE_CAPPED = 30.0 * 1.2  # the level ratio 15 / 10 capped at maxLevelRatio 1.2

WEEK = 7 * DAY
# visits{site}: (one week ago before/after, yesterday before/after, today); None: no history then
VISITS: dict[str, tuple[tuple[float, float] | None, tuple[float, float] | None, float]] = {
    "weekly": ((10.0, 40.0), (10.0, 20.0), 15.0),  # a week of history: the weekly season, 40 * 15 / 10
    "monday": (None, (10.0, 10.0), 15.0),  # two days old, its first Monday: the daily season, 10 * 15 / 10
    "holiday": ((10.0, 40.0), (10.0, 10.0), 5.0),  # quiet today: last week's rise, at today's level
}
VISITS_FORECAST = {"weekly": 40.0 * 15.0 / 10.0, "monday": 10.0 * 15.0 / 10.0, "holiday": 40.0 * 5.0 / 10.0}
VISITS_DAILY = {"weekly": 20.0 * 15.0 / 10.0, "monday": 10.0 * 15.0 / 10.0, "holiday": 10.0 * 5.0 / 10.0}

# requests_total{service, pod}: a counter at 1 request/s from (seconds before AT_YOUNG - 1d) on
AT_YOUNG = -60  # seconds after T0: inside VictoriaMetrics' visible range too
YOUNG = {
    "steady": 2 * 3600,  # long before the window one season ago: the steady load, 1 * 1 / 1
    "young": 60,  # one minute before: a level window one season ago of rate()'s ramp only
    "ramped": 31 * 60,  # the level window one season ago (30m) starts in rate()'s first 2 minutes
}
YOUNG_POD = {service: f"{service}-5b9d8c7f4-x2x7z" for service in YOUNG}
RECENT = 31 * 60  # requests_total{service="recent"} began this long before AT_YOUNG (today): a linear
# window of 30m that starts in rate()'s first 2 minutes


# linear, by hand: the line at (seconds after T0)
def backlog(pod: str) -> Callable[[float], float]:
    base = {WEB_NOW[0]: 100.0, WEB_NOW[1]: 50.0, CANARY: 1000.0}[pod]
    return lambda s: base + 0.05 * s


def service_rps(s: float) -> float:
    return 10.0 + 0.02 * s


def lag_up(s: float) -> float:
    return 200.0 + 0.1 * s


def lag_down(s: float) -> float:  # falls below zero within the horizon: the forecast is clamped at 0
    return 5.0 - 0.01 * s


SEASONAL = {"method": "seasonal", "season": "1d", "horizon": "30m", "levelWindow": "30m"}
LINEAR = {"method": "linear", "window": "30m", "horizon": "10m"}
SEASONS = {"method": "seasonal", "seasons": ["1d", "7d"], "horizon": "30m", "levelWindow": "30m"}  # any order


def _rule(series: str, label: str, forecast: dict, by: str = "<<.GroupBy>>", rate: str = "") -> dict:
    """A rule for gauge `series` (a counter's `rate` over that range) whose `label` names the
    object; `namespace` alone: an external rule."""
    overrides = {"namespace": {"resource": "namespace"}}
    if label != "namespace":
        overrides[label] = {"resource": label}
    selector = f'namespace!="",{label}!=""' if label != "namespace" else f'{by}!=""'
    value = f"rate(<<.Series>>{{<<.LabelMatchers>>}}[{rate}])" if rate else "<<.Series>>{<<.LabelMatchers>>}"
    return {"seriesQuery": f"{series}{{{selector}}}", "resources": {"overrides": overrides},
            "metricsQuery": f"sum({value}) by ({by})", "forecast": dict(forecast)}


RULES = yaml.safe_dump({
    "rules": [
        _rule("inflight", "pod", SEASONAL),
        _rule("inflight", "pod", {**SEASONAL, "name": "inflight_or_now", "fallback": "present"}),
        _rule("backlog", "pod", {**LINEAR, "name": "backlog_trend"}),
        _rule("service_load", "service", SEASONAL),
        _rule("service_rps", "service", LINEAR),
        _rule("requests_total", "service", {**SEASONAL, "name": "requests_forecast"}, rate="2m"),
        _rule("requests_total", "service", {**SEASONAL, "name": "requests_or_now", "fallback": "present"}, rate="2m"),
        _rule("requests_total", "pod", {**SEASONAL, "name": "requests_forecast"}, rate="2m"),
        _rule("requests_total", "service", {**LINEAR, "name": "requests_trend"}, rate="2m"),
    ],
    "externalRules": [
        _rule("queue_depth", "namespace", {**SEASONAL, "name": "queue_depth_seasonal"}, by="queue"),
        _rule("queue_depth", "namespace", {**SEASONAL, "name": "queue_depth_capped", "maxLevelRatio": 1.2}, by="queue"),
        _rule("queue_depth", "namespace", {**LINEAR, "name": "queue_depth_or_now", "fallback": "present"}, by="queue"),
        _rule("stream_lag", "namespace", LINEAR, by="stream"),
        _rule("visits", "namespace", SEASONS, by="site"),
        _rule("visits", "namespace", {**SEASONAL, "name": "visits_daily"}, by="site"),
        _rule("visits", "namespace", {**SEASONS, "name": "visits_or_now", "fallback": "present"}, by="site"),
    ],
})


def start_time() -> int:
    """T0: now, on a whole minute."""
    return int(time.time()) // 60 * 60


def openmetrics(t0: int) -> str:
    series: dict[str, dict[str, list[tuple[int, float]]]] = {}  # name -> labels text -> points in time order

    def add(name: str, labels: dict[str, str], start: int, end: int, value: Callable[[int], float]) -> None:
        text = "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"
        series.setdefault(name, {}).setdefault(text, []).extend((t, value(t)) for t in range(start, end + 1, STEP))

    y0 = t0 - DAY  # one season ago
    before, after = (y0 - 2 * 3600, y0 + CHANGE - STEP), (y0 + CHANGE, y0 + 2 * 3600)
    today = (t0 - 2 * 3600, t0 + 2 * 3600)
    web = {"namespace": "web"}
    for pod, v in WEB_BEFORE.items():
        add("inflight", {**web, "pod": pod}, *before, lambda t, v=v: v)
    for pod, v in WEB_AFTER.items():
        add("inflight", {**web, "pod": pod}, *after, lambda t, v=v: v)
    for pod, v in WEB_TODAY.items():
        add("inflight", {**web, "pod": pod}, *today, lambda t, v=v: v)
    add("inflight", {**web, "pod": CANARY}, before[0], after[1], lambda t: 100.0)
    add("inflight", {**web, "pod": CANARY}, *today, lambda t: 100.0)
    add("inflight", {**web, "pod": FRESH}, t0 - 300, today[1], lambda t: 7.0)
    for pod in (*WEB_NOW, CANARY):
        line = backlog(pod)
        add("backlog", {**web, "pod": pod}, *today, lambda t, line=line: line(t - t0))
    add("backlog", {**web, "pod": FRESH}, t0 - 300, today[1], lambda t: 3.0 + 0.05 * (t - t0))
    api = {**web, "service": "api"}
    for name, values in (("service_load", SERVICE), ("queue_depth", QUEUE)):
        labels = api if name == "service_load" else {**web, "queue": "orders"}
        add(name, labels, *before, lambda t, v=values["before"]: v)
        add(name, labels, *after, lambda t, v=values["after"]: v)
        add(name, labels, *today, lambda t, v=values["today"]: v)
    add("service_load", {**web, "service": "fresh"}, t0 - 300, today[1], lambda t: 5.0)
    add("queue_depth", {**web, "queue": "new"}, t0 - 300, today[1], lambda t: 7.0)
    add("service_rps", api, *today, lambda t: service_rps(t - t0))
    add("stream_lag", {**web, "stream": "up"}, *today, lambda t: lag_up(t - t0))
    add("stream_lag", {**web, "stream": "down"}, *today, lambda t: lag_down(t - t0))
    add("stream_lag", {**web, "stream": "new"}, t0 - 300, today[1], lambda t: 1.0 + 0.1 * (t - t0))
    w0 = t0 - WEEK
    for site, (week, yesterday, now) in VISITS.items():
        for levels, z in ((week, w0), (yesterday, y0)):
            if levels is None:
                continue
            b, a = levels
            add("visits", {**web, "site": site}, z - 2 * 3600, z + CHANGE - STEP, lambda t, v=b: v)
            add("visits", {**web, "site": site}, z + CHANGE, z + 2 * 3600, lambda t, v=a: v)
        add("visits", {**web, "site": site}, *today, lambda t, v=now: v)
    add("visits", {**web, "site": "new"}, t0 - 300, today[1], lambda t: 7.0)
    for service, ago in YOUNG.items():
        began = t0 + AT_YOUNG - DAY - ago
        add("requests_total", {**web, "service": service, "pod": YOUNG_POD[service]}, began, today[1],
            lambda t, began=began: float(t - began))
    began = t0 + AT_YOUNG - RECENT
    add("requests_total", {**web, "service": "recent"}, began, today[1], lambda t: float(t - began))

    lines: list[str] = []
    for name, entries in series.items():
        lines.append(f"# TYPE {name} gauge")
        for text, points in entries.items():
            lines.extend(f"{name}{text} {v} {t}" for t, v in points)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


@contextlib.contextmanager
def backfilled(t0: int) -> Iterator[PrometheusServer]:
    """A real Prometheus holding this history around `t0`: one set-up for every test that reads it."""
    with start_backfilled(openmetrics(t0)) as prom:
        yield prom


# Asking a backend (Prometheus or VictoriaMetrics) directly for a forecast at a chosen instant.

@functools.cache
def _compiled() -> CompiledRules:
    """RULES compiled once (every query below looks its rule up here)."""
    return compile_rules(parse_rules(RULES))


def rule(metric: str, series: str, label: str = "") -> CompiledRule:
    """The rule of RULES that serves `series`' forecast as `metric` (as discovery names it), for
    objects named by `label` when given."""
    return next(r for r in _compiled().all if r.series_query.startswith(series + "{")
                and r.forecast_name(series) == metric and f'{label}!=""' in r.series_query)


def base(metric: str, series: str, label: str = "", names: list[str] | None = None) -> tuple[Forecast, str]:
    """(forecast block, the query it forecasts) of an external metric (no `label`) or an object
    metric (objects named by `label`: `names`) in namespace `web`."""
    r = rule(metric, series, label)
    assert r.rule.forecast is not None
    if label:
        return r.rule.forecast, resource_query(r, series, label, "namespace", "web", names or [], parse_selector(""))
    return r.rule.forecast, external_query(r, series, r.converter.label_for_resource(NAMESPACES), "web",
                                           parse_selector(""))


def external(metric: str, series: str) -> str:
    """The forecast PromQL of an external metric in namespace `web`."""
    return forecast_query(*base(metric, series))


def objects(metric: str, series: str, label: str, names: list[str]) -> str:
    """The forecast PromQL of an object metric (objects named by `label`) in namespace `web`."""
    return forecast_query(*base(metric, series, label, names))


def workload(metric: str, series: str, pods: list[str]) -> str:
    """The forecast PromQL of the total of the workload of `pods` (what the adapter divides)."""
    r = rule(metric, series, "pod")
    assert r.rule.forecast is not None
    total = workload_query(r, series, "pod", "namespace", "web", workload_pattern(pods), parse_selector(""))
    return forecast_query(r.rule.forecast, f"sum({total})")


def vector(url: str, query: str, at: float) -> dict[str, float]:
    """Each result's first label value (or '') -> its value, asked of the backend at `url`."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": query, "time": at}, timeout=30).json()
    assert body["status"] == "success", body
    return {next(iter(r["metric"].values()), ""): float(r["value"][1]) for r in body["data"]["result"]}
