"""The adapter's own metrics, served on `/metrics` (one registry per app, so tests can build many)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    generate_latest,
)
from prometheus_client.core import CounterMetricFamily
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

from promscaler.buildinfo import register_build_info

__all__ = ["CONTENT_TYPE_LATEST", "SelfMetrics"]

_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)


class _CacheCollector(Collector):
    """The query cache's own counters (hits, coalesced waiters, misses), read at scrape time so the
    hot path only bumps plain integers."""

    def __init__(self, stats: Callable[[], tuple[int, int, int]]) -> None:
        self.stats = stats

    def collect(self) -> Iterator[CounterMetricFamily]:
        hits, coalesced, misses = self.stats()
        yield CounterMetricFamily("promscaler_adapter_query_cache_hits", "Queries answered from the cache.", hits)
        yield CounterMetricFamily("promscaler_adapter_query_cache_coalesced",
                                  "Queries that waited on an identical query already in flight.", coalesced)
        yield CounterMetricFamily("promscaler_adapter_query_cache_misses", "Queries sent to Prometheus.", misses)


class SelfMetrics:
    def __init__(self, process: bool = False) -> None:
        """`process`: also the process' own metrics (`process_*`, `python_gc_*`, `python_info`), as
        Kubernetes components serve `process_*` and `go_*`: the adapter's process passes it; the many
        apps tests build in one process do not."""
        self.registry = r = CollectorRegistry()
        register_build_info(r, "adapter")
        if process:
            ProcessCollector(registry=r)
            PlatformCollector(registry=r)
            GCCollector(registry=r)
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
        self.prom_errors = Counter("promscaler_adapter_prometheus_errors_total",
                                   "Prometheus HTTP API calls that failed, by kind (timeout, unreachable, bad_query, "
                                   "bad_response, server_error)", ["kind"], registry=r)
        self.rule_seconds = Histogram("promscaler_adapter_rule_query_duration_seconds",
                                      "Time to answer a rule's metricsQuery (cached or from Prometheus), by rule",
                                      ["rule"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rule_discovery_seconds = Histogram("promscaler_adapter_rule_discovery_duration_seconds",
                                                "Time to list a rule's seriesQuery during discovery, by rule",
                                                ["rule"], buckets=_LATENCY_BUCKETS, registry=r)
        self.rule_metrics = Gauge("promscaler_adapter_rule_discovered_metrics",
                                  "Metrics served from each rule after the last discovery", ["rule"], registry=r)
        for kind in ("timeout", "unreachable", "bad_query", "bad_response", "server_error"):
            self.prom_errors.labels(kind)  # every kind present from the start: rate() sees the first error
        self._request_children: dict[tuple[str, int], tuple] = {}
        self._rule_children: dict[str, Histogram] = {}
        self._query_children: dict[tuple[str, str], Histogram] = {}
        self.config_reloads = Counter("promscaler_adapter_config_reloads_total", "Rules file reloads by result",
                                      ["result"], registry=r)
        for result in ("success", "invalid"):
            self.config_reloads.labels(result)

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
        if outcome != "success":
            self.prom_errors.labels(outcome).inc()

    def rule_query(self, rule: str, seconds: float) -> None:
        child = self._rule_children.get(rule)
        if child is None:
            child = self._rule_children[rule] = self.rule_seconds.labels(rule)
        child.observe(seconds)

    def watch_cache(self, stats: Callable[[], tuple[int, int, int]]) -> None:
        """Export a query cache's (hits, coalesced, misses)."""
        self.registry.register(_CacheCollector(stats))

    def render(self) -> bytes:
        return generate_latest(self.registry)
