"""An adapter you can debug: a per-rule summary at start, a warning for empty rules or a rule
that matches nothing, a metricsQuery Prometheus cannot parse reported at start-up and on reload
naming its rule, every query at --v=6, every failed request at warning (a 404 at --v=4)."""

from __future__ import annotations

import time

import yaml

from kubesim.adapterrules import counter_rate_rule

from .conftest import AdapterProcess

GOOD = counter_rate_rule('http_requests_total{namespace!="",pod!=""}')
NOTHING = {**GOOD, "seriesQuery": 'no_such_series_total{namespace!=""}'}
BROKEN = {**GOOD, "seriesQuery": 'jobs_processed_total{namespace!="",pod!=""}',
          "metricsQuery": "sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m]) by (<<.GroupBy>>)"}  # ")" misplaced
POD = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests"


def _rules(path, *rules) -> str:
    path.write_text(yaml.safe_dump({"rules": list(rules)}))
    return str(path)


def _wait_for(adapter: AdapterProcess, text: str, timeout: float = 15.0) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = adapter.stderr()
        if text in log:
            return log
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not logged:\n{adapter.stderr()[-3000:]}")


def _lines(log: str, *parts: str) -> list[str]:
    return [line for line in log.splitlines() if all(p in line for p in parts)]


def test_startup_summary_broken_query_and_queries_at_v6(prometheus, tmp_path):
    rules = _rules(tmp_path / "rules.yaml", GOOD, NOTHING, BROKEN)
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", rules, "--v=6",
                             "--query-cache-ttl", "0").wait_ready()
    try:
        log = adapter.stderr()  # all of this is known before the first request
        summary = _lines(log, "INFO", "rules[0]", "series")
        assert summary and "pods/http_requests" in summary[0] and "namespaces/http_requests" in summary[0]
        assert _lines(log, "WARNING", "rules[1]", "matched no series")
        broken = _lines(log, "ERROR", "rules[2].metricsQuery does not parse")
        assert broken and "parse error" in broken[0]
        assert not _lines(log, "ERROR", "rules[0]") and not _lines(log, "ERROR", "rules[1]")

        assert adapter.get(POD).status_code == 200
        queries = _lines(_wait_for(adapter, "rules[0]: 1 series in"), "rules[0]: 1 series in", "ms:")
        assert 'http_requests_total{namespace="web",pod="web-1"}' in queries[0]

        assert adapter.get(POD.replace("http_requests", "no_such_metric")).status_code == 404
        _wait_for(adapter, "GET /apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/no_such_metric: 404")

        failed = adapter.get(POD.replace("web-1/http_requests", "worker-1/jobs_processed"))
        assert failed.status_code == 500  # the broken rule, as reported at start
        line = _lines(_wait_for(adapter, "pods/worker-1/jobs_processed: 500"), "WARNING", "500 InternalError")
        assert line and "parse error" in line[0]
    finally:
        adapter.stop()


def test_default_verbosity_is_quiet_about_404s_and_queries(prometheus, tmp_path):
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config",
                             _rules(tmp_path / "rules.yaml", GOOD)).wait_ready()
    try:
        assert adapter.get(POD.replace("http_requests", "no_such_metric")).status_code == 404
        assert adapter.get(POD).status_code == 200
        bad = adapter.get(POD + "?metricLabelSelector=a%20in%20(")
        assert bad.status_code == 400
        log = _wait_for(adapter, "400 BadRequest")
        assert _lines(log, "WARNING", "400 BadRequest", "metricLabelSelector")  # the request, with its query
        assert "no_such_metric" not in log and "series in" not in log
        assert _lines(log, "INFO", "rules[0]")
    finally:
        adapter.stop()


def test_empty_rules_warn(prometheus, tmp_path):
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config",
                             _rules(tmp_path / "rules.yaml")).wait_ready()
    try:
        assert _lines(adapter.stderr(), "WARNING", "no rules")
    finally:
        adapter.stop()


def test_a_reload_with_a_broken_query_names_the_rule(prometheus, tmp_path):
    path = tmp_path / "rules.yaml"
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", _rules(path, GOOD),
                             "--config-check-interval", "200ms").wait_ready()
    try:
        assert "does not parse" not in adapter.stderr()
        _rules(path, GOOD, GOOD, BROKEN)
        log = _wait_for(adapter, "rules[2].metricsQuery does not parse")
        assert _lines(log, "ERROR", "rules[2].metricsQuery does not parse", "parse error")
    finally:
        adapter.stop()
