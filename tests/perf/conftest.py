"""Real parts for the performance-behaviour tests: a real Prometheus (plain, or behind a path
prefix and basic auth) backfilled with a small known data set, and the adapter as a subprocess."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from kubesim import processes
from kubesim.prometheus import PrometheusServer, start_backfilled

STEP = 15


class Clock:
    """A monotonic clock the test moves by hand (cache freshness without sleeping)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


# name -> list of (labels, per-second rate); counters grow linearly so rates are known
COUNTERS: dict[str, list[dict[str, str]]] = {
    "app_requests_total": [{"namespace": "web", "pod": f"web-{i}", "code": "200"} for i in range(6)]
    + [{"namespace": "web", "pod": "web-0", "code": "500"}],
    "app_errors_total": [{"namespace": "web", "pod": "web-1"}],
    "app_jobs_total": [{"namespace": "batch", "job": "nightly"}],  # no pod label: only namespaces and jobs
    "app_seconds_total": [{"namespace": "web", "pod": "web-2"}],
    "other_total": [{"node": "n1"}, {"node": "n2", "namespace": "kube-system"}],
}
GAUGES: dict[str, list[dict[str, str]]] = {
    "queue_depth": [{"namespace": "web", "queue": "a"}, {"namespace": "shop", "queue": "b"}],
    "kube_apps_deployment_replicas_wanted": [{"namespace": "web", "kube_apps_deployment": "front"}],
}


def rate_of(labels: dict[str, str]) -> float:
    return 1.0 + len(labels.get("pod", "")) / 4


def openmetrics(now: float | None = None) -> str:
    now = int(now or time.time())
    start, end = now - 1800, now + 1800
    out: list[str] = []
    for name, series in COUNTERS.items():
        out.append(f"# TYPE {name.removesuffix('_total')} counter")
        for labels in series:
            lbl = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            out += [f"{name}{{{lbl}}} {rate_of(labels) * (t - start):g} {t}" for t in range(start, end + 1, STEP)]
    for name, series in GAUGES.items():
        out.append(f"# TYPE {name} gauge")
        for k, labels in enumerate(series):
            lbl = ",".join(f'{key}="{v}"' for key, v in sorted(labels.items()))
            out += [f"{name}{{{lbl}}} {k + 5} {t}" for t in range(start, end + 1, STEP)]
    return "\n".join(out) + "\n# EOF\n"


def start_prometheus(**kwargs) -> PrometheusServer:
    return start_backfilled(openmetrics(), **kwargs)


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    prom = start_prometheus()
    yield prom
    prom.close()


RULES = """\
rules:
- seriesQuery: '{__name__=~"app_.*_total",namespace!=""}'
  seriesFilters:
  - isNot: "_seconds_total$"
  resources:
    template: "<<.Resource>>"
  name:
    matches: "^app_(.*)_total$"
    as: "${1}"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
- seriesQuery: 'app_requests_total{pod!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
      pod: {resource: pod}
  name:
    as: "requests_by_code"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'other_total'
  resources:
    template: "<<.Resource>>"
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'
- seriesQuery: '{__name__=~"kube_.*_replicas_wanted"}'
  resources:
    template: "kube_<<.Group>>_<<.Resource>>"
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
externalRules:
- seriesQuery: 'queue_depth{queue!=""}'
  resources:
    overrides:
      namespace: {resource: namespace}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


@pytest.fixture(scope="session")
def rules_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("rules") / "rules.yaml"
    path.write_text(RULES)
    return path


class AdapterProcess(processes.AdapterProcess):
    """The shared adapter child process, plus a reader of its own /metrics."""

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the adapter's own samples `name` whose labels include `labels`."""
        total = 0.0
        for fam in text_string_to_metric_families(self.get("/metrics").text):
            for s in fam.samples:
                if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                    total += s.value
        return total


def direct(url: str, expr: str, **kw) -> dict[str, float]:
    """Prometheus asked directly: {pod or '': value}."""
    body = httpx.get(f"{url}/api/v1/query", params={"query": expr}, timeout=10, **kw).json()
    assert body["status"] == "success", body
    return {r["metric"].get("pod", ""): float(r["value"][1]) for r in body["data"]["result"]}
