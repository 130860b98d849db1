"""The forecast PromQL is plain PromQL that MetricsQL answers too: a real VictoriaMetrics (Debian's
`victoria-metrics`) holding the forecast tests' known history gives the hand-worked values.

Asked at T0 - 1m: VictoriaMetrics hides the last 30 s by default (`-search.latencyOffset`), and
every hand-worked window holds from T0 - 8m on."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
from collections.abc import Iterator

import httpx
import pytest

from adapter.forecast import forecast_query, workload_pattern
from adapter.naming import NAMESPACES, CompiledRule, compile_rules, resource_by_api_name
from adapter.promql import external_query, resource_query, workload_query
from adapter.rules import parse_rules
from kubesim.net import free_port
from promscaler.selectors import parse_selector
from tests.support import eventually

from . import forecast_data as fd

AT = -60  # seconds after T0


@pytest.fixture(scope="module")
def victoria() -> Iterator[tuple[str, int]]:
    """(URL, T0) of a VictoriaMetrics loaded with the history (its import takes milliseconds)."""
    data = tempfile.mkdtemp(prefix="vm-")
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(["victoria-metrics", f"-httpListenAddr={url.removeprefix('http://')}",
                             f"-storageDataPath={data}", "-retentionPeriod=100y", "-search.disableCache"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        asyncio.run(eventually(lambda: _up(url), 30))
        t0 = fd.start_time()
        lines = [line.rsplit(" ", 1) for line in fd.openmetrics(t0).splitlines() if line and line[0] != "#"]
        body = "\n".join(f"{sample} {int(ts) * 1000}" for sample, ts in lines)  # milliseconds
        assert httpx.post(f"{url}/api/v1/import/prometheus", content=body, timeout=30).status_code == 204
        httpx.get(f"{url}/internal/force_flush", timeout=30)
        asyncio.run(eventually(lambda: _vector(url, "sum(queue_depth)", t0 + AT), 30))
        yield url, t0
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)


def _up(url: str) -> bool:
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _vector(url: str, query: str, at: float) -> dict[str, float]:
    """Each result's first label value (or '') -> its value."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": query, "time": at}, timeout=30).json()
    assert body["status"] == "success", body
    return {next(iter(r["metric"].values()), ""): float(r["value"][1]) for r in body["data"]["result"]}


RULES = compile_rules(parse_rules(fd.RULES))


def rule(metric: str, series: str) -> CompiledRule:
    """The rule that serves `series`' forecast as `metric` (as discovery names it)."""
    return next(r for r in RULES.all if r.series_query.startswith(series) and r.forecast_name(series) == metric)


def external(metric: str, series: str, selector: str = "") -> str:
    r = rule(metric, series)
    assert r.rule.forecast is not None
    query = external_query(r, series, r.converter.label_for_resource(NAMESPACES), "web", parse_selector(selector))
    return forecast_query(r.rule.forecast, query)


def test_seasonal_forecasts_on_victoriametrics(victoria):
    url, t0 = victoria
    assert _vector(url, external("queue_depth_seasonal", "queue_depth"), t0 + AT) == \
        {"orders": fd.QUEUE_SEASONAL}  # 30 * 15 / 10; queue "new" has no history: no value
    r, pods = rule("inflight_forecast", "inflight"), resource_by_api_name("pods")
    assert r.rule.forecast is not None and pods is not None
    total = workload_query(r, "inflight", "pod", "namespace", "web", workload_pattern(fd.WEB_NOW), parse_selector(""))
    [value] = _vector(url, forecast_query(r.rule.forecast, f"sum({total})"), t0 + AT).values()
    assert value == pytest.approx(fd.POD_SEASONAL * len(fd.WEB_NOW))  # the workload's total
    r = rule("service_load_forecast", "service_load")
    assert r.rule.forecast is not None
    query = resource_query(r, "service_load", "service", "namespace", "web", ["api", "fresh"], parse_selector(""))
    assert _vector(url, forecast_query(r.rule.forecast, query), t0 + AT) == {"api": fd.SERVICE_SEASONAL}


def test_linear_forecasts_on_victoriametrics(victoria):
    url, t0 = victoria
    got = _vector(url, external("stream_lag_forecast", "stream_lag"), t0 + AT)
    assert got == {"up": pytest.approx(fd.lag_up(AT + fd.HORIZON_LINEAR)), "down": 0.0}  # clamped; "new": too young
