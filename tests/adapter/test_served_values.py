"""Served values are truncated to milli-units as prometheus-adapter serves them
(`resource.NewMilliQuantity(int64(v*1000))`), after floating-point noise is removed: checked
with values a real Prometheus computes, for custom and external metrics."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from kubesim.prometheus import PrometheusServer, start_backfilled

from .conftest import AdapterProcess, PromQL

RULES = """
rules:
- seriesQuery: 'in_flight{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>) / 7'
- seriesQuery: 'noisy_load{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'backlog{queue!=""}'
  resources: {namespaced: false}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (queue) / 7'
"""
GAUGES = {
    "in_flight": [({"namespace": "t", "pod": "p-1"}, "12"), ({"namespace": "t", "pod": "p-2"}, "0.0028")],
    "noisy_load": [({"namespace": "t", "pod": "p-1"}, "2.4999999999999996"),
                   ({"namespace": "t", "pod": "p-2"}, "-1.5")],
    "backlog": [({"queue": "a"}, "12"), ({"queue": "b"}, "0.0028")],
}


def _openmetrics() -> str:
    now = int(time.time())
    lines = []
    for name, series in GAUGES.items():
        lines.append(f"# TYPE {name} gauge")
        for labels, value in series:
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines += [f"{name}{{{text}}} {value} {t}" for t in range(now - 600, now + 1800, 15)]
    return "\n".join([*lines, "# EOF"]) + "\n"


@pytest.fixture(scope="module")
def prom() -> Iterator[PrometheusServer]:
    server = start_backfilled(_openmetrics())
    yield server
    server.close()


@pytest.fixture(scope="module")
def served(prom, tmp_path_factory) -> Iterator[AdapterProcess]:
    rules = tmp_path_factory.mktemp("rules") / "rules.yaml"
    rules.write_text(RULES)
    a = AdapterProcess("--prometheus-url", prom.url, "--config", str(rules)).wait_ready()
    yield a
    a.stop()


def _values(resp) -> dict[str, str]:
    assert resp.status_code == 200, resp.text
    return {(i.get("describedObject") or i["metricLabels"])["name" if "describedObject" in i else "queue"]: i["value"]
            for i in resp.json()["items"]}


def test_custom_values_truncate_like_prometheus_adapter(prom, served):
    raw = {m["pod"]: v for m, v in PromQL(prom.url).vector('sum(in_flight) by (pod) / 7')}
    assert raw["p-1"] == 12 / 7 and raw["p-2"] == 0.0004  # what the adapter is given
    got = _values(served.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/t/pods/*/in_flight"))
    assert got == {"p-1": "1714m", "p-2": "0"}  # rounding up served 1715m and 1m


def test_noise_is_removed_before_truncating(prom, served):
    body = PromQL(prom.url).vector('noisy_load{pod="p-1"}')
    assert body[0][1] == 2.4999999999999996
    got = _values(served.get("/apis/custom.metrics.k8s.io/v1beta1/namespaces/t/pods/*/noisy_load"))
    assert got == {"p-1": "2500m", "p-2": "-1500m"}


def test_external_values_truncate_like_prometheus_adapter(served):
    got = _values(served.get("/apis/external.metrics.k8s.io/v1beta1/namespaces/any/backlog"))
    assert got == {"a": "1714m", "b": "0"}
