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
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import yaml

from kubesim.prometheus import PrometheusServer, start_backfilled

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


def _rule(series: str, label: str, forecast: dict, by: str = "<<.GroupBy>>") -> dict:
    """A rule for gauge `series` whose `label` names the object; `namespace` alone: an external rule."""
    overrides = {"namespace": {"resource": "namespace"}}
    if label != "namespace":
        overrides[label] = {"resource": label}
    selector = f'namespace!="",{label}!=""' if label != "namespace" else f'{by}!=""'
    return {"seriesQuery": f"{series}{{{selector}}}", "resources": {"overrides": overrides},
            "metricsQuery": f"sum(<<.Series>>{{<<.LabelMatchers>>}}) by ({by})", "forecast": dict(forecast)}


RULES = yaml.safe_dump({
    "rules": [
        _rule("inflight", "pod", SEASONAL),
        _rule("inflight", "pod", {**SEASONAL, "name": "inflight_or_now", "fallback": "present"}),
        _rule("backlog", "pod", {**LINEAR, "name": "backlog_trend"}),
        _rule("service_load", "service", SEASONAL),
        _rule("service_rps", "service", LINEAR),
    ],
    "externalRules": [
        _rule("queue_depth", "namespace", {**SEASONAL, "name": "queue_depth_seasonal"}, by="queue"),
        _rule("queue_depth", "namespace", {**SEASONAL, "name": "queue_depth_capped", "maxLevelRatio": 1.2}, by="queue"),
        _rule("queue_depth", "namespace", {**LINEAR, "name": "queue_depth_or_now", "fallback": "present"}, by="queue"),
        _rule("stream_lag", "namespace", LINEAR, by="stream"),
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
