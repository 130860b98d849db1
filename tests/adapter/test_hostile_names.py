"""Names that are not UTF-8 text answer a 400 Status before any PromQL is built, and no message to
a client carries PromQL text (it goes to the log)."""

from __future__ import annotations

import pytest

from .conftest import AdapterProcess
from .test_errors import C, E, status


@pytest.mark.parametrize("path", [
    f"{C}/namespaces/%ff%fe/pods/web-1/http_requests",
    f"{C}/namespaces/web/pods/%ff%fe/http_requests",
    f"{C}/namespaces/web/pods/%ef%bf%bd/http_requests",   # U+FFFD itself: Prometheus rejects the rune
    f"{C}/namespaces/web/pods/web%0a1/http_requests",     # a control character
    f"{C}/namespaces/%c0%af/metrics/namespace_quota_used",  # overlong UTF-8 '/'
    f"{C}/nodes/node-%ff/node_load",
    f"{E}/namespaces/%ff/queue_messages_ready",
    f"{E}/namespaces/web/queue_%ffready",
])
def test_names_that_are_not_utf8_text_are_400(adapter, path):
    body = status(adapter.get(path), 400, "BadRequest")
    assert "UTF-8" in body["message"] and "namespace=" not in body["message"]


def test_a_utf8_name_is_looked_up(adapter):
    status(adapter.get(f"{C}/namespaces/web/pods/caf%c3%a9/http_requests"), 404, "NotFound")


BROKEN_RULES = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  name: {as: "broken"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>) / on(secret_label'
"""


def test_promql_text_goes_to_the_log_not_to_clients(prometheus, tmp_path):
    rules = tmp_path / "rules.yaml"
    rules.write_text(BROKEN_RULES)
    with AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules)).wait_ready() as a:
        body = status(a.get(f"{C}/namespaces/web/pods/web-1/broken"), 500, "InternalError")
        assert "metricsQuery failed in Prometheus" in body["message"]
        assert "secret_label" not in body["message"] and "http_requests_total" not in body["message"]
        assert "secret_label" in a.stderr()  # the operator still sees the query
