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


def _families(now: float | None = None) -> list[tuple[str, str, list[tuple[str, list[tuple[int, float]]]]]]:
    """The data set: (name, type, [(labels text, [(timestamp s, value)])]), half an hour either side of now."""
    now = int(now or time.time())
    start, end = now - 1800, now + 1800
    times = range(start, end + 1, STEP)
    out = []
    for name, series in COUNTERS.items():
        out.append((name, "counter", [(_labels(labels), [(t, rate_of(labels) * (t - start)) for t in times])
                                      for labels in series]))
    for name, series in GAUGES.items():
        out.append((name, "gauge", [(_labels(labels), [(t, float(k + 5)) for t in times])
                                    for k, labels in enumerate(series)]))
    return out


def _labels(labels: dict[str, str]) -> str:
    return ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))


def openmetrics(now: float | None = None) -> str:
    out: list[str] = []
    for name, kind, series in _families(now):
        out.append(f"# TYPE {name.removesuffix('_total') if kind == 'counter' else name} {kind}")
        out += [f"{name}{{{lbl}}} {v:g} {t}" for lbl, points in series for t, v in points]
    return "\n".join(out) + "\n# EOF\n"


def prometheus_text(now: float | None = None) -> str:
    """The same data set as Prometheus text with millisecond timestamps (VictoriaMetrics' import)."""
    return "".join(f"{name}{{{lbl}}} {v:g} {t * 1000}\n"
                   for name, _, series in _families(now) for lbl, points in series for t, v in points)


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
