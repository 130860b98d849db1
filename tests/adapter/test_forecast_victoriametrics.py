"""The forecast PromQL is plain PromQL that MetricsQL answers too: a real VictoriaMetrics (Debian's
`victoria-metrics`) holding the forecast tests' known history gives the hand-worked values.

Asked at T0 - 1m: VictoriaMetrics hides the last 30 s by default (`-search.latencyOffset`), and
every hand-worked window holds from T0 - 8m on."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace

import pytest

from adapter.forecast import forecast_query
from kubesim.victoriametrics import VictoriaMetricsServer
from tests.support import eventually

from . import forecast_data as fd

AT = -60  # seconds after T0


@pytest.fixture(scope="module")
def victoria() -> Iterator[tuple[str, int]]:
    """(URL, T0) of a VictoriaMetrics loaded with the history (its import takes milliseconds)."""
    with VictoriaMetricsServer(["-search.disableCache"]) as vm:
        t0 = fd.start_time()
        lines = [line.rsplit(" ", 1) for line in fd.openmetrics(t0).splitlines() if line and line[0] != "#"]
        vm.import_prometheus("\n".join(f"{sample} {int(ts) * 1000}" for sample, ts in lines))  # milliseconds
        asyncio.run(eventually(lambda: fd.vector(vm.url, "sum(queue_depth)", t0 + AT), 30))
        yield vm.url, t0


def test_seasonal_forecasts_on_victoriametrics(victoria):
    url, t0 = victoria
    assert fd.vector(url, fd.external("queue_depth_seasonal", "queue_depth"), t0 + AT) == \
        {"orders": fd.QUEUE_SEASONAL}  # 30 * 15 / 10; queue "new" has no history: no value
    [value] = fd.vector(url, fd.workload("inflight_forecast", "inflight", list(fd.WEB_NOW)), t0 + AT).values()
    assert value == pytest.approx(fd.POD_SEASONAL * len(fd.WEB_NOW))  # the workload's total
    query = fd.objects("service_load_forecast", "service_load", "service", ["api", "fresh"])
    assert fd.vector(url, query, t0 + AT) == {"api": fd.SERVICE_SEASONAL}


def test_several_seasons_on_victoriametrics(victoria):
    url, t0 = victoria
    got = fd.vector(url, fd.external("visits_forecast", "visits"), t0 + AT)
    assert got == pytest.approx(fd.VISITS_FORECAST)  # weekly where a week is whole, else daily; "new": none


def test_no_forecast_from_a_young_series_ramp_on_victoriametrics(victoria):
    url, t0 = victoria
    at = t0 + fd.AT_YOUNG
    assert fd.vector(url, fd.objects("requests_forecast", "requests_total", "service", list(fd.YOUNG)), at) == \
        {"steady": pytest.approx(1.0)}  # 1 request/s; the others' window one season ago is not whole
    got = fd.vector(url, fd.objects("requests_or_now", "requests_total", "service", list(fd.YOUNG)), at)
    assert got == pytest.approx(dict.fromkeys(fd.YOUNG, 1.0))  # fallback: the present load


def test_linear_forecasts_on_victoriametrics(victoria):
    url, t0 = victoria
    got = fd.vector(url, fd.external("stream_lag_forecast", "stream_lag"), t0 + AT)
    assert got == {"up": pytest.approx(fd.lag_up(AT + fd.HORIZON_LINEAR)), "down": 0.0}  # clamped; "new": too young


@pytest.mark.parametrize("options,want", [
    # yesterday's 20 (weekly), 10 (monday), 10 (holiday) and last week's 40 (none for monday), at today's level
    ({"past_seasons": 7, "combine": "max", "envelope": "max", "margin": 1.5},
     {"weekly": 40 * 15 / 10 * 1.5, "monday": 10 * 15 / 10 * 1.5, "holiday": 40 * 5 / 10 * 1.5}),
    ({"past_seasons": 7, "combine": "median"},
     {"weekly": (20 + 40) * 15 / 10 / 2, "monday": 10 * 15 / 10, "holiday": (10 + 40) * 5 / 10 / 2}),
    # quantile_over_time: the window holds more than 2 "after" samples, so its 0.99-quantile is "after"
    ({"envelope": "quantile", "quantile": 0.99},
     {"weekly": 20 * 15 / 10, "monday": 10 * 15 / 10, "holiday": 10 * 5 / 10}),
])
def test_robust_options_on_victoriametrics(victoria, options, want):
    """`pastSeasons` (label_replace, `quantile`/`max without`), an envelope (`max_over_time`) and a
    margin, in MetricsQL: the last seven days at the same phase, of which yesterday and a week ago
    hold history; the horizon's window one day ago holds yesterday's "after" value."""
    url, t0 = victoria
    forecast, query = fd.base("visits_daily", "visits")
    got = fd.vector(url, forecast_query(replace(forecast, **options), query), t0 + AT)
    assert got == pytest.approx(want)
