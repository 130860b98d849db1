"""Forecast metrics served by the adapter, from a real Prometheus holding a short known history
(`forecast_data`: yesterday and today, backfilled with promtool), read with the real `kubectl get
--raw` and an adapter connected to a KubeSim cluster that has today's pods. Every expected value is
worked out by hand in `forecast_data`, never asked of the code under test."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml

from adapter.discovery import build_catalogue
from adapter.forecast import forecast_query, history_needed, lookback, workload_pattern
from adapter.naming import compile_rules
from adapter.prometheus import PrometheusClient
from adapter.rulecheck import check_queries
from adapter.rules import Forecast, RuleError, parse_rules
from adapter.settings import parse_settings
from kubesim.apiserver import KubeSim
from kubesim.prometheus import PrometheusServer
from promscaler.quantity import parse_quantity

from . import forecast_data as fd
from .conftest import RULES, AdapterProcess
from .test_kube_labels import pod
from .test_kubectl import kubectl_raw

CUSTOM = "/apis/custom.metrics.k8s.io/v1beta2"
EXTERNAL = "/apis/external.metrics.k8s.io/v1beta1"


@pytest.fixture(scope="module")
def t0() -> int:
    return fd.start_time()


@pytest.fixture(scope="module")
def history(t0: int) -> Iterator[PrometheusServer]:
    with fd.backfilled(t0) as prom:
        yield prom


@pytest.fixture(scope="module")
def forecasting(history: PrometheusServer, tmp_path_factory) -> Iterator[AdapterProcess]:
    rules = tmp_path_factory.mktemp("forecast") / "rules.yaml"
    rules.write_text(fd.RULES)
    with KubeSim() as sim:
        for name in fd.WEB_NOW:
            sim.apply(pod("web", name, app="web"))
        sim.apply(pod("web", fd.CANARY, app="web-canary"))
        sim.apply(pod("web", fd.FRESH, app="fresh"))
        adapter = AdapterProcess("--prometheus-url", history.url, "--config", str(rules),
                                 "--kubeconfig", sim.kubeconfig_path, "--query-cache-ttl", "0").wait_ready()
        yield adapter
        adapter.stop()


def raw(adapter: AdapterProcess, path: str, tmp_path: Path) -> dict:
    out = kubectl_raw(adapter, path, tmp_path)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def values(body: dict) -> dict[str, tuple[float, float]]:
    """name (object name, or the external series' key label) -> (value, seconds after T0 of the answer)."""
    out = {}
    for item in body["items"]:
        key = item["describedObject"]["name"] if "describedObject" in item else \
            next(iter(item["metricLabels"].values()))
        ts = datetime.strptime(item["timestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
        out[key] = (float(parse_quantity(item["value"])), ts)
    return out


def near(got: float, expected: float) -> bool:
    return abs(got - expected) < 0.0011  # quantities are truncated to milli-units


def on_line(got: tuple[float, float], t0: int, line: Callable[[float], float], horizon: float) -> bool:
    """The value is the line `horizon` after the answer's time (RFC 3339 keeps whole seconds, so the
    query ran within the second after the timestamp)."""
    value, ts = got
    ends = sorted((line(ts - t0 + horizon), line(ts + 1 - t0 + horizon)))
    return ends[0] - 0.0011 <= value <= ends[1] + 0.0011


def test_discovery_lists_each_forecast_beside_its_metric(forecasting, tmp_path):
    custom = {r["name"] for r in raw(forecasting, CUSTOM, tmp_path)["resources"]}
    assert {"pods/inflight", "pods/inflight_forecast", "pods/backlog", "pods/backlog_trend",
            "services/service_load", "services/service_load_forecast", "services/service_rps_forecast"} <= custom
    external = {r["name"] for r in raw(forecasting, EXTERNAL, tmp_path)["resources"]}
    assert {"queue_depth", "queue_depth_seasonal", "queue_depth_or_now", "stream_lag",
            "stream_lag_forecast"} <= external


def test_pods_seasonal_forecast_is_yesterdays_workload_total_over_todays_pods(forecasting, tmp_path):
    """Yesterday's pods had other names (and were three, then two); the canary Deployment in the
    same namespace is not part of `web`: 30 * 15 / 10, shared by today's 2 pods."""
    body = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/inflight_forecast?labelSelector=app%3Dweb", tmp_path)
    got = values(body)
    assert set(got) == set(fd.WEB_NOW)
    assert all(near(v, fd.POD_SEASONAL) for v, _ in got.values()), got
    assert fd.POD_SEASONAL == 22.5
    one = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/{fd.WEB_NOW[0]}/inflight_forecast", tmp_path)
    assert near(float(parse_quantity(one["items"][0]["value"])), fd.POD_SEASONAL)


def test_object_and_external_seasonal_forecasts(forecasting, tmp_path):
    body = raw(forecasting, f"{CUSTOM}/namespaces/web/services/api/service_load_forecast", tmp_path)
    assert near(float(parse_quantity(body["items"][0]["value"])), fd.SERVICE_SEASONAL)  # 50 * 30 / 20
    body = raw(forecasting, f"{EXTERNAL}/namespaces/web/queue_depth_seasonal?labelSelector=queue%3Dorders", tmp_path)
    [(value, _)] = values(body).values()
    assert near(value, fd.QUEUE_SEASONAL)  # 30 * 15 / 10
    body = raw(forecasting, f"{EXTERNAL}/namespaces/web/queue_depth_capped?labelSelector=queue%3Dorders", tmp_path)
    [(value, _)] = values(body).values()
    assert near(value, fd.QUEUE_CAPPED)  # 30 * min(15 / 10, 1.2)


def test_linear_forecasts_follow_the_trend_horizon_ahead(forecasting, t0, tmp_path):
    got = values(raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/backlog_trend?labelSelector=app%3Dweb", tmp_path))
    assert set(got) == set(fd.WEB_NOW)

    def per_pod(s: float) -> float:  # today's workload total, over its 2 pods
        return (fd.backlog(fd.WEB_NOW[0])(s) + fd.backlog(fd.WEB_NOW[1])(s)) / 2

    assert all(on_line(v, t0, per_pod, fd.HORIZON_LINEAR) for v in got.values()), got
    body = raw(forecasting, f"{CUSTOM}/namespaces/web/services/api/service_rps_forecast", tmp_path)
    assert on_line(values(body)["api"], t0, fd.service_rps, fd.HORIZON_LINEAR)
    got = values(raw(forecasting, f"{EXTERNAL}/namespaces/web/stream_lag_forecast", tmp_path))
    assert on_line(got["up"], t0, fd.lag_up, fd.HORIZON_LINEAR)
    assert got["down"][0] == 0  # the trend goes below zero within the horizon: clamped


def test_missing_history_gives_no_forecast_never_a_zero(forecasting, tmp_path):
    """A workload that started 5 minutes ago has its present metric, and no forecast at all."""
    present = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/inflight?labelSelector=app%3Dfresh", tmp_path)
    assert [i["describedObject"]["name"] for i in present["items"]] == [fd.FRESH]
    for metric in ("inflight_forecast", "backlog_trend"):
        body = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/{metric}?labelSelector=app%3Dfresh", tmp_path)
        assert body["items"] == []
        out = kubectl_raw(forecasting, f"{CUSTOM}/namespaces/web/pods/{fd.FRESH}/{metric}", tmp_path)
        assert out.returncode != 0 and "NotFound" in out.stderr, out.stderr
    out = kubectl_raw(forecasting, f"{CUSTOM}/namespaces/web/services/fresh/service_load_forecast", tmp_path)
    assert out.returncode != 0 and "NotFound" in out.stderr, out.stderr
    assert "new" in values(raw(forecasting, f"{EXTERNAL}/namespaces/web/queue_depth", tmp_path))
    assert "new" not in values(raw(forecasting, f"{EXTERNAL}/namespaces/web/queue_depth_seasonal", tmp_path))
    assert "new" not in values(raw(forecasting, f"{EXTERNAL}/namespaces/web/stream_lag_forecast", tmp_path))


def test_fallback_present_answers_the_present_value_without_history(forecasting, tmp_path):
    body = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/inflight_or_now?labelSelector=app%3Dfresh", tmp_path)
    assert [v for v, _ in values(body).values()] == [pytest.approx(7.0, abs=0.0011)]  # its present value
    body = raw(forecasting, f"{CUSTOM}/namespaces/web/pods/*/inflight_or_now?labelSelector=app%3Dweb", tmp_path)
    assert all(near(v, fd.POD_SEASONAL) for v, _ in values(body).values())  # with history: the forecast
    got = values(raw(forecasting, f"{EXTERNAL}/namespaces/web/queue_depth_or_now", tmp_path))
    assert near(got["new"][0], 7.0) and near(got["orders"][0], fd.QUEUE["today"])  # flat line: today's value


def test_several_seasons_answer_each_series_by_the_longest_with_whole_history(forecasting, tmp_path):
    """seasons [7d, 1d]: a site with a week of history follows last week (40 * 15 / 10), a site two
    days old follows yesterday (its first Monday: yesterday had no rise, none is foreseen), and a
    holiday (quiet today) gets last week's rise at today's level (40 * 5 / 10). No history: none."""
    def got(metric: str) -> dict[str, float]:
        return {k: v for k, (v, _) in values(raw(forecasting, f"{EXTERNAL}/namespaces/web/{metric}", tmp_path)).items()}

    assert got("visits_forecast") == pytest.approx(fd.VISITS_FORECAST, abs=0.0011)
    assert fd.VISITS_FORECAST == {"weekly": 60.0, "monday": 15.0, "holiday": 20.0}
    assert got("visits_daily") == pytest.approx(fd.VISITS_DAILY, abs=0.0011)  # season: 1d, as before
    assert got("visits_or_now") == pytest.approx({**fd.VISITS_FORECAST, "new": 7.0}, abs=0.0011)


def test_no_phantom_forecast_while_the_window_one_season_ago_is_not_whole(history, t0):
    """A counter at a steady 1 request/s, `rate(...[2m])`: its forecast is that 1 request/s once the
    level window one season ago (30m) holds whole rates; before, no forecast (never the phantom of a
    level one season ago that is rate()'s ramp from zero), or with `fallback: present` the present."""
    at, services = t0 + fd.AT_YOUNG, list(fd.YOUNG)
    forecast = fd.objects("requests_forecast", "requests_total", "service", services)
    assert fd.vector(history.url, forecast, at) == {"steady": pytest.approx(1.0)}
    or_now = fd.objects("requests_or_now", "requests_total", "service", services)
    assert fd.vector(history.url, or_now, at) == pytest.approx(dict.fromkeys(services, 1.0))
    for service, name in fd.YOUNG_POD.items():  # a Pods forecast: the workload's total
        expected = {"": pytest.approx(1.0)} if service == "steady" else {}
        assert fd.vector(history.url, fd.workload("requests_forecast", "requests_total", [name]), at) == expected
    # 32 minutes on (30m level window + 2m rate range), the youngest one's window one season ago is whole
    assert fd.vector(history.url, forecast, at + 32 * 60) == pytest.approx(dict.fromkeys(services, 1.0))


def test_no_trend_from_a_young_series_ramp(history, t0):
    """A linear forecast of the same steady counter is the steady 1 request/s (a flat line); a
    series whose window (30m) starts within rate()'s first 2 minutes has none yet (its ramp would
    tilt the line up), and has the flat line once the window holds whole rates."""
    at, services = t0 + fd.AT_YOUNG, [*fd.YOUNG, "recent"]
    trend = fd.objects("requests_trend", "requests_total", "service", services)
    assert fd.vector(history.url, trend, at) == pytest.approx(dict.fromkeys(fd.YOUNG, 1.0))
    assert fd.vector(history.url, trend, at + 2 * 60) == pytest.approx(dict.fromkeys(services, 1.0))


def documented_seasonal(f: Forecast, query: str) -> str:
    """The single-season formula as docs/forecast-and-tune.md states it (before seasons existed)."""
    q, r, w = f"({query})", f"{f.resolution:g}s", f"{f.level_window:g}s"
    ratio = f"avg_over_time({q}[{w}:{r}]) / (avg_over_time({q}[{w}:{r}] offset {f.season:g}s) > 0)"
    if f.max_level_ratio is not None:
        ratio = f"clamp_max({ratio}, {f.max_level_ratio:g})"
    return f"last_over_time({q}[{r}:{r}] offset {f.season - f.horizon:g}s) * ({ratio})"


@pytest.mark.parametrize("metric,series,label,names", [
    ("queue_depth_seasonal", "queue_depth", "", []),
    ("queue_depth_capped", "queue_depth", "", []),
    ("visits_daily", "visits", "", []),
    ("service_load_forecast", "service_load", "service", ["api", "fresh"]),
    ("requests_forecast", "requests_total", "service", ["steady"]),
])
def test_a_single_season_serves_the_documented_answers(history, t0, metric, series, label, names):
    """A rules file of today (one `season`) answers what the documented formula answers, series
    with a whole history: the same values, and no value where it had none."""
    forecast, query = fd.base(metric, series, label, names)
    expected = fd.vector(history.url, documented_seasonal(forecast, query), t0)
    assert expected  # not vacuous
    assert fd.vector(history.url, forecast_query(forecast, query), t0) == pytest.approx(expected)


@pytest.mark.parametrize("query,seconds", [
    ('sum(rate(x{pod=~"web-[a-z0-9]+-[a-z0-9]+"}[2m])) by (pod)', 120),  # a label regex is no range
    ("sum(x) by (pod)", 0),  # a gauge: no ramp
    ("rate(x[1m30s]) + irate(y[30s])", 90),  # the longest range
    ("max_over_time(rate(x[1m])[1h:1m] offset 5m)", 3900),  # a subquery's range, and the offset
    ('x{a="[5m]"} offset 10m', 600),
    ("rate(x[300])", 300),  # seconds, as Prometheus 3 allows
])
def test_lookback_is_the_longest_range_and_offset(query, seconds):
    assert lookback(query) == seconds


SEASONAL = {"method": "seasonal", "horizon": "5m", "season": "1d"}


def forecast_error(block: object) -> str:
    rule = {"seriesQuery": "x_total", "resources": {"template": "<<.Resource>>"}, "metricsQuery": "sum(<<.Series>>)",
            "forecast": block}
    with pytest.raises(RuleError) as exc:
        compile_rules(parse_rules(yaml.safe_dump({"rules": [rule]})))
    return str(exc.value)


@pytest.mark.parametrize("block,message", [
    ({**SEASONAL, "seasn": "7d"}, "rules[0].forecast.seasn: unknown field"),
    ({**SEASONAL, "window": "30m"}, "rules[0].forecast.window: applies to method linear, not seasonal"),
    ({"method": "linear", "horizon": "5m", "window": "30m", "season": "1d"},
     "rules[0].forecast.season: applies to method seasonal, not linear"),
    ({**SEASONAL, "method": "arima"}, "rules[0].forecast.method: must be seasonal or linear, got 'arima'"),
    ({"horizon": "5m"}, "rules[0].forecast.method: required field is missing"),
    ({"method": "seasonal", "season": "1d"}, "rules[0].forecast.horizon: required field is missing"),
    ({**SEASONAL, "horizon": "soon"}, "rules[0].forecast.horizon: must be a positive duration"),
    ({**SEASONAL, "horizon": "0s"}, "rules[0].forecast.horizon: must be a positive duration"),
    ({**SEASONAL, "season": "5m"}, "rules[0].forecast.season: must be longer than the horizon"),
    ({"method": "linear", "horizon": "5m"}, "rules[0].forecast.window: required field is missing"),
    ({"method": "linear", "horizon": "5m", "window": "1m"}, "rules[0].forecast.window: must be at least twice"),
    ({**SEASONAL, "name": 3}, "rules[0].forecast.name: must be a string"),
    ({**SEASONAL, "maxLevelRatio": 0.5}, "rules[0].forecast.maxLevelRatio: must be a number of at least 1"),
    ({"method": "linear", "horizon": "5m", "window": "30m", "maxLevelRatio": 2},
     "rules[0].forecast.maxLevelRatio: applies to method seasonal, not linear"),
    ({**SEASONAL, "fallback": "zero"}, "rules[0].forecast.fallback: must be none or present, got 'zero'"),
    ({**SEASONAL, "seasons": ["7d"]}, "rules[0].forecast.seasons: give season or seasons, not both"),
    ({"method": "seasonal", "horizon": "5m", "seasons": []}, "rules[0].forecast.seasons: must be a non-empty list"),
    ({"method": "seasonal", "horizon": "5m", "seasons": "7d"}, "rules[0].forecast.seasons: must be a non-empty list"),
    ({"method": "seasonal", "horizon": "5m", "seasons": ["1d", "24h"]},
     "rules[0].forecast.seasons: lists a season twice"),
    ({"method": "seasonal", "horizon": "5m", "seasons": ["7d", "4m"]},
     "rules[0].forecast.seasons[1]: must be longer than the horizon"),
    ({"method": "seasonal", "horizon": "5m", "seasons": ["7d", "soon"]},
     "rules[0].forecast.seasons[1]: must be a positive duration"),
    ({"method": "linear", "horizon": "5m", "window": "30m", "seasons": ["1d"]},
     "rules[0].forecast.seasons: applies to method seasonal, not linear"),
    ("seasonal", "rules[0].forecast: must be a mapping"),
])
def test_invalid_forecast_block_names_its_field(block, message):
    assert message in forecast_error(block)


def test_forecast_block_fields_and_names():
    doc = {"rules": [{"seriesQuery": "http_requests_total", "resources": {"template": "<<.Resource>>"},
                      "name": {"matches": "^(.*)_total$"}, "metricsQuery": "sum(<<.Series>>)",
                      "forecast": {**SEASONAL, "levelWindow": "2h", "resolution": "30s", "name": "${1}_ahead"}}],
           "externalRules": [{"seriesQuery": "queue", "metricsQuery": "sum(<<.Series>>)",
                              "forecast": {"method": "linear", "horizon": "10m", "window": "1h"}}]}
    rules = compile_rules(parse_rules(yaml.safe_dump(doc)))
    seasonal, linear = rules.rules[0], rules.external_rules[0]
    assert seasonal.rule.forecast == Forecast("rules[0].forecast", "seasonal", 300, "${1}_ahead", seasons=(86400,),
                                              level_window=7200, resolution=30)
    assert seasonal.forecast_name("http_requests_total") == "http_requests_ahead"
    assert linear.rule.forecast == Forecast("externalRules[0].forecast", "linear", 600, window=3600)
    assert linear.forecast_name("queue") == "queue_forecast"  # the default name
    # the history a forecast reads: season + level window (or the window) + the query's own range
    q = "sum(rate(http_requests_total[2m]))"
    assert history_needed(seasonal.rule.forecast, q) == 86400 + 7200 + 120
    assert linear.rule.forecast is not None and history_needed(linear.rule.forecast, "sum(queue)") == 3600
    doc["rules"][0]["forecast"] = {"method": "seasonal", "horizon": "5m", "seasons": ["1d", "7d"]}
    f = compile_rules(parse_rules(yaml.safe_dump(doc))).rules[0].rule.forecast
    assert f is not None and f.seasons == (604800, 86400) and f.season == 604800  # longest first
    assert history_needed(f, "sum(x)") == 604800 + 3600 and history_needed(f, "sum(x)", 86400) == 86400 + 3600


def test_a_file_without_forecast_serves_what_it_did():
    rules = compile_rules(parse_rules(Path(RULES).read_text()))
    assert all(r.rule.forecast is None and r.forecast_name("http_requests_total") is None for r in rules.all)
    series = {r.series_query: [{"__name__": "http_requests_total", "namespace": "web", "pod": "web-1"}]
              for r in rules.all}
    catalogue = build_catalogue(rules, series)
    assert not any(m.forecast for m in [*catalogue.custom.values(), *catalogue.external.values()])
    assert not any(name.endswith("_forecast") for _, name in catalogue.custom)


@pytest.mark.parametrize("pods,pattern", [
    (["web-5b9d8c7f4-x2x7z", "web-5b9d8c7f4-q4l9n"], "web-[a-z0-9]+-[a-z0-9]+"),  # Deployment: any ReplicaSet
    (["db-0", "db-2"], "db-[0-9]+"),  # StatefulSet
    (["agent-x2x7z"], "agent-[a-z0-9]+"),  # DaemonSet, ReplicaSet, Job
    (["a.b", "web-canary-5b9d8c7f4-x2x7z"], r"a\.b|web-canary-[a-z0-9]+-[a-z0-9]+"),  # a bare pod is itself
    (["node-exporter"], "node-exporter"),  # 'exporter' is no generated suffix (it has vowels)
])
def test_workload_pattern_names_every_pod_of_the_controller(pods, pattern):
    assert workload_pattern(pods) == pattern


async def test_rule_check_parses_each_forecast_in_prometheus(history):
    """A metricsQuery that parses but gives a scalar cannot be forecast (a subquery needs a vector):
    the start-up check names the forecast; the sound rules pass."""
    scalar = {"seriesQuery": "queue_depth", "metricsQuery": "scalar(sum(<<.Series>>{<<.LabelMatchers>>}))",
              "forecast": {"method": "linear", "horizon": "5m", "window": "30m"}}
    doc = yaml.safe_load(fd.RULES)
    rules = compile_rules(parse_rules(yaml.safe_dump({**doc, "externalRules": [*doc["externalRules"], scalar]})))
    client = PrometheusClient(parse_settings(["--prometheus-url", history.url]))
    try:
        problems = await check_queries(rules, client)
    finally:
        await client.aclose()
    index = len(doc["externalRules"])
    assert [p.split(" does not parse")[0] for p in problems] == [f"externalRules[{index}].forecast"]


def test_the_documented_rules_example_serves_its_forecasts():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "forecast-and-tune.md").read_text()
    example = next(b for b in re.findall(r"```yaml\n(.*?)```", doc, re.DOTALL) if "forecast:" in b)
    rules = compile_rules(parse_rules(example))
    series = {r.series_query: [{"__name__": name, "namespace": "shop", "pod": "web-1", "queue": "q"}
                               for name in ("http_requests_total", "queue_messages_ready")] for r in rules.all}
    catalogue = build_catalogue(rules, series)
    assert ("pods", "http_requests_forecast") in catalogue.custom
    assert "queue_messages_ready_trend" in catalogue.external
