"""A real VictoriaMetrics (Debian's `victoria-metrics`) as the backend: discovery in both modes
(`--metrics-max-age` with it: tests/adapter/test_discovery_max_age.py), custom and external values
as VictoriaMetrics answers the same PromQL, a broken rule found at start-up and on reload without
`/api/v1/format_query`, its limits refusing aggregated discovery (said once), and an outage: no
query text to clients in any error, and recovery."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from kubesim.victoriametrics import VictoriaMetricsServer
from promscaler.quantity import parse_quantity
from tests.support import wait_for

from .conftest import AdapterProcess, direct, prometheus_text

C = "/apis/custom.metrics.k8s.io/v1beta2"
E = "/apis/external.metrics.k8s.io/v1beta1"


def _sees(url: str, expr: str) -> bool:
    body = httpx.get(f"{url}/api/v1/query", params={"query": expr, "nocache": "1"}, timeout=10).json()
    return body["status"] == "success" and bool(body["data"]["result"])


def start_vm(text: str, *args: str, probe: str = "app_errors_total") -> VictoriaMetricsServer:
    """A started VictoriaMetrics holding `text` (Prometheus text, millisecond timestamps), once
    `probe` (a one-series selector) answers."""
    vm = VictoriaMetricsServer(extra_args=args).start()
    try:
        vm.import_prometheus(text)
        assert wait_for(lambda: _sees(vm.url, probe)), vm.log()[-2000:]
        return vm
    except BaseException:
        vm.close()
        raise


@pytest.fixture(scope="module")
def vm() -> Iterator[VictoriaMetricsServer]:
    server = start_vm(prometheus_text())
    yield server
    server.close()


def _lines(log: str, *parts: str) -> list[str]:
    return [line for line in log.splitlines() if all(p in line for p in parts)]


def _documents(a: AdapterProcess) -> tuple[dict, dict]:
    return (a.get("/apis/custom.metrics.k8s.io/v1beta1").json(), a.get("/apis/external.metrics.k8s.io/v1beta1").json())


def test_discovery_in_both_modes_lists_what_prometheus_lists(vm, prometheus, rules_file):
    with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                        "--metrics-max-age", "1h").wait_ready() as a:
        expected = _documents(a)
    assert len(expected[0]["resources"]) >= 8 and expected[1]["resources"]
    for mode in ("aggregate", "series"):
        with AdapterProcess("--prometheus-url", vm.url, "--config", str(rules_file), "--metrics-discovery", mode,
                            "--metrics-max-age", "1h").wait_ready() as a:
            assert _documents(a) == expected, mode


def _value(item: dict) -> float:
    return float(parse_quantity(item["value"]))


def test_custom_and_external_values_as_victoriametrics_answers(vm, rules_file):
    with AdapterProcess("--prometheus-url", vm.url, "--config", str(rules_file),
                        "--query-cache-ttl", "0").wait_ready() as a:
        one = a.get(f"{C}/namespaces/web/pods/web-3/requests")
        assert one.status_code == 200, one.text
        expected = direct(vm.url, 'sum(rate(app_requests_total{namespace="web",pod="web-3"}[1m])) by (pod)')
        assert abs(_value(one.json()["items"][0]) - expected["web-3"]) < 0.0011

        every = a.get(f"{C}/namespaces/web/pods/*/requests").json()["items"]
        expected = direct(vm.url, 'sum(rate(app_requests_total{namespace="web"}[1m])) by (pod)')
        assert len(expected) == 6
        assert {i["describedObject"]["name"]: round(_value(i), 3) for i in every} == {
            pod: round(v, 3) for pod, v in expected.items()}

        ns = a.get(f"{C}/namespaces/web/metrics/requests").json()["items"]
        [(_, total)] = direct(vm.url, 'sum(rate(app_requests_total{namespace="web"}[1m]))').items()
        assert len(ns) == 1 and abs(_value(ns[0]) - total) < 0.0011

        queue = a.get(f"{E}/namespaces/web/queue_depth").json()["items"]
        [(_, depth)] = direct(vm.url, 'sum(queue_depth{namespace="web"})').items()
        assert [_value(i) for i in queue] == [depth] == [5.0]


GOOD = {"seriesQuery": 'app_requests_total{namespace!="",pod!=""}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, "pod": {"resource": "pod"}}},
        "name": {"as": "requests"},
        "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)"}
BROKEN = {**GOOD, "name": {"as": "broken"},  # ")" misplaced
          "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m]) by (<<.GroupBy>>)"}


def _rules(path: Path, *rules: dict) -> str:
    path.write_text(yaml.safe_dump({"rules": list(rules)}))
    return str(path)


def test_a_broken_rule_is_named_at_start_up_and_on_reload(vm, tmp_path):
    path = tmp_path / "rules.yaml"
    with AdapterProcess("--prometheus-url", vm.url, "--config", _rules(path, GOOD, BROKEN),
                        "--config-check-interval", "200ms").wait_ready() as a:
        log = a.stderr()  # known before the first request
        assert _lines(log, "INFO", "metricsQuery check", "/api/v1/query", "no /api/v1/format_query")
        [broken] = _lines(log, "ERROR", "rules[1].metricsQuery does not parse")
        assert "app_requests_total" in broken  # the operator sees the query
        assert not _lines(log, "ERROR", "rules[0]")

        resp = a.get(f"{C}/namespaces/web/pods/web-1/broken")
        body = resp.json()
        assert resp.status_code == 500 and body["kind"] == "Status" and "rules[1]" in body["message"]
        assert "app_requests_total" not in body["message"] and "query=" not in body["message"]
        assert a.get(f"{C}/namespaces/web/pods/web-1/requests").status_code == 200

        _rules(path, BROKEN, GOOD)  # a reload is checked the same way
        assert wait_for(lambda: _lines(a.stderr(), "ERROR", "rules[0].metricsQuery does not parse")), a.stderr()


ONE_QUERY_RULES = """
rules:
- seriesQuery: '{__name__=~"app_.*_total",namespace!=""}'
  resources: {template: "<<.Resource>>"}
  name: {matches: "^app_(.*)_total$", as: "${1}"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
"""


def test_refused_aggregation_is_said_once_and_falls_back_to_the_series_listing(tmp_path):
    # at most 5 series per query: the freshness query over every app_*_total series is refused
    rules = tmp_path / "rules.yaml"
    rules.write_text(ONE_QUERY_RULES)
    with start_vm(prometheus_text(), "-search.maxUniqueTimeseries=5") as vm, \
            AdapterProcess("--prometheus-url", vm.url, "--config", str(rules), "--metrics-relist-interval", "1s",
                           "--metrics-max-age", "1h").wait_ready() as a:
        assert wait_for(lambda: a.metric("promscaler_adapter_relist_duration_seconds_count") >= 4)
        warned = _lines(a.stderr(), "WARNING", "refused aggregated discovery")
        assert len(warned) == 1 and "/api/v1/series" in warned[0] and "exceeds 5" in warned[0]  # VM's reason
        names = {r["name"] for r in a.get("/apis/custom.metrics.k8s.io/v1beta1").json()["resources"]}
        assert {"pods/requests", "namespaces/requests", "pods/errors", "jobs.batch/jobs"} <= names


def test_outage_and_refusals_carry_no_query_text_then_recover(tmp_path, rules_file):
    vm = start_vm(prometheus_text(), "-search.maxUniqueTimeseries=5")
    one = f"{C}/namespaces/web/pods/web-3/requests"
    try:
        with AdapterProcess("--prometheus-url", vm.url, "--config", str(rules_file), "--query-cache-ttl", "0",
                            "--metrics-max-age", "1h").wait_ready() as a:
            assert a.get(one).status_code == 200
            # VictoriaMetrics refuses a query over 7 series, quoting it ('error when executing query="sum(rate(...')
            refused = a.get(f"{C}/namespaces/web/pods/*/requests")
            body = refused.json()
            assert refused.status_code == 500 and body["kind"] == "Status", refused.text
            assert "rules[0]" in body["message"] and "pods/requests" in body["message"]
            assert "app_requests_total" not in body["message"] and "query=" not in body["message"]
            assert wait_for(lambda: _lines(a.stderr(), "WARNING", "500 InternalError", "exceeds 5",
                                           "app_requests_total"))  # the detail, for the operator

            vm.stop()  # down: 503 Status, no query text, not ready
            down = a.get(one)
            assert down.status_code == 503 and down.json()["reason"] == "ServiceUnavailable"
            assert "app_requests_total" not in down.text and "rules[0]" in down.json()["message"]
            external = a.get(f"{E}/namespaces/web/queue_depth")
            assert external.status_code == 503 and "externalRules[0]" in external.json()["message"]
            assert "queue_depth{" not in external.text
            assert wait_for(lambda: a.get("/readyz").status_code == 503)

            vm.start()  # back on the same port with its data: values and readiness recover
            assert wait_for(lambda: a.get(one).status_code == 200)
            expected = direct(vm.url, 'sum(rate(app_requests_total{namespace="web",pod="web-3"}[1m])) by (pod)')
            assert abs(_value(a.get(one).json()["items"][0]) - expected["web-3"]) < 0.0011
            assert wait_for(lambda: a.get("/readyz").status_code == 200)
    finally:
        vm.close()


LATE_RULES = """
externalRules:
- seriesQuery: 'late_gauge{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (queue)'
"""


def test_latency_offset_delays_values_unless_nocache(tmp_path):
    """VictoriaMetrics evaluates an instant query at now - `-search.latencyOffset` unless the request
    says `nocache=1` (docs/adapter.md#backends). 5 minutes here: the value changed 1 minute ago."""
    now = int(time.time())
    text = "".join(f'late_gauge{{queue="q"}} {1 if t < now - 60 else 2} {t * 1000}\n'
                   for t in range(now - 1800, now + 600, 5))
    rules = tmp_path / "rules.yaml"
    rules.write_text(LATE_RULES)
    path = f"{E}/namespaces/default/late_gauge"
    with start_vm(text, "-search.latencyOffset=5m", probe="late_gauge") as vm:
        values = {}
        for extra in ((), ("--prometheus-query-param", "nocache=1")):
            with AdapterProcess("--prometheus-url", vm.url, "--config", str(rules), "--metrics-max-age", "1h",
                                *extra).wait_ready() as a:
                values[extra] = [_value(i) for i in a.get(path).json()["items"]]
        assert time.time() < now + 240, "too slow to tell the two apart"  # T - 5m still before the change
    assert values[()] == [1.0]  # as of 5 minutes ago
    assert values[("--prometheus-query-param", "nocache=1")] == [2.0]  # now
