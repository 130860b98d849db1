"""The adapter's own metrics, served on `/metrics` (one registry per app, so tests can build many)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["SelfMetrics", "CONTENT_TYPE_LATEST"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class SelfMetrics:
    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter("promscaler_adapter_requests_total", "API requests by route and status code",
                                ["path", "code"], registry=r)
        self.request_seconds = Histogram("promscaler_adapter_request_duration_seconds", "API request latency",
                                         ["path"], buckets=_LATENCY_BUCKETS, registry=r)
        self.prom_seconds = Histogram("promscaler_adapter_prometheus_query_duration_seconds",
                                      "Prometheus HTTP API call latency", ["endpoint", "outcome"],
                                      buckets=_LATENCY_BUCKETS, registry=r)
        self.relist_seconds = Histogram("promscaler_adapter_relist_duration_seconds", "Series discovery duration",
                                        buckets=_LATENCY_BUCKETS, registry=r)
        self.relist_failures = Counter("promscaler_adapter_relist_failures_total",
                                       "seriesQuery calls that failed during discovery", registry=r)
        self.series = Gauge("promscaler_adapter_discovered_series", "Series returned by the seriesQuery calls "
                            "(with aggregated discovery: one per metric name)",
                            registry=r)
        self.metrics = Gauge("promscaler_adapter_discovered_metrics", "Metrics served, by API",
                             ["api"], registry=r)
        self._request_children: dict[tuple[str, int], tuple] = {}
        self._query_children: dict[tuple[str, str], object] = {}
        self.config_reloads = Counter("promscaler_adapter_config_reloads_total", "Rules file reloads by result",
                                      ["result"], registry=r)

    def request(self, path: str, code: int, seconds: float) -> None:
        key = (path, code)
        children = self._request_children.get(key)
        if children is None:  # labels() takes a lock and validates: once per (path, code), not per request
            children = self._request_children[key] = (self.requests.labels(path, str(code)),
                                                       self.request_seconds.labels(path))
        children[0].inc()
        children[1].observe(seconds)

    def prometheus_query(self, endpoint: str, outcome: str, seconds: float) -> None:
        key = (endpoint, outcome)
        child = self._query_children.get(key)
        if child is None:
            child = self._query_children[key] = self.prom_seconds.labels(endpoint, outcome)
        child.observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)
