"""The metrics providers: PromQL in, values out; nothing here knows URL paths or wire formats.

The seam of kubernetes-sigs/custom-metrics-apiserver: `CustomMetricsProvider`
(`list_all_metrics`, `get_metric_by_name`, `get_metric_by_selector`) and
`ExternalMetricsProvider` (`list_all_external_metrics`, `get_external_metric`). Errors are
`promscaler.status` exceptions, so the routes render them unchanged.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import NamedTuple, Protocol

from adapter.discovery import CustomMetric, Discovery, ExternalMetric
from adapter.forecast import forecast_query, workload_pattern
from adapter.naming import NAMESPACES, CompiledRule, Resource
from adapter.prometheus import PrometheusClient, PrometheusError, PrometheusQueryError, Sample
from adapter.promql import QueryBuildError, external_query, resource_query, workload_query
from adapter.rules import Forecast
from promscaler.logs import vlog
from promscaler.selectors import Selector
from promscaler.status import BadRequest, InternalError, NotFound, ServiceUnavailable, StatusError

__all__ = [
    "CachePolicy",
    "CustomMetricsProvider",
    "CustomValue",
    "ExternalMetricsProvider",
    "ExternalValue",
    "LabelLookup",
    "MetricInfo",
    "backend_failure",
]

log = logging.getLogger("adapter.queries")


@dataclass(frozen=True, slots=True)
class MetricInfo:
    resource: Resource
    metric: str


class CustomValue(NamedTuple):  # a tuple: a `pods/*` answer may build thousands
    resource: Resource
    namespace: str | None
    name: str
    metric: str
    value: float
    timestamp: float
    window_seconds: int | None
    fresh_until: float = 0.0  # monotonic deadline until which this value may be served again (0: not)


@dataclass(frozen=True, slots=True)
class ExternalValue:
    metric: str
    labels: Mapping[str, str]
    value: float
    timestamp: float
    window_seconds: int | None
    fresh_until: float = 0.0


class LabelLookup(Protocol):
    """Names of the objects of a resource that exist now and match a label selector."""

    async def names(self, resource: Resource, namespace: str | None, selector: Selector) -> set[str]: ...

    @property
    def version(self) -> int:
        """Changes whenever `names` could answer differently."""


def cache_ttl(setting: float | None, rule: CompiledRule) -> float:
    """How long an answer may be reused: the flag, else 1/30 of the rate range (<= 5s), else 1s."""
    if setting is not None:
        return setting
    if rule.window_seconds:
        return min(rule.window_seconds / 30.0, 5.0)
    return 1.0


def freshness_bound(setting: float | None, rule: CompiledRule) -> float:
    """The oldest a kept-warm answer may be: the flag, else a third of the rate range (<= 15s), else 5s.

    A third of the range changes a rate by at most a third of its own smoothing; a rule without a
    range reads a gauge whose samples are already up to a scrape interval old."""
    if setting is not None:
        return setting
    if rule.window_seconds:
        return min(rule.window_seconds / 3.0, 15.0)
    return 5.0


@dataclass(frozen=True)
class CachePolicy:
    """How long each rule's answers are reused, and whether they are kept warm (refresh-ahead)."""

    ttl: float | None = None  # --query-cache-ttl
    refresh_ahead: bool = False  # --query-refresh-ahead
    freshness: float | None = None  # --query-freshness

    def for_rule(self, rule: CompiledRule) -> tuple[float, bool]:
        if self.refresh_ahead and self.ttl != 0:
            return freshness_bound(self.freshness if self.freshness is not None else self.ttl, rule), True
        return cache_ttl(self.ttl, rule), False


def backend_failure(exc: PrometheusError, what: str, query: str, metric: str | None = None) -> StatusError:
    """The Status a client gets when the backend failed on `query` for `what` (a rule's query) and
    `metric`: the kind of failure and what it was for, never the backend's own text, which may
    quote the query (VictoriaMetrics: `error when executing query="..."`). That and the query go
    to the log, with the request (`log_failure`)."""
    detail = f"{exc}; query: {query}"
    of = f" (metric {metric})" if metric else ""
    if isinstance(exc, PrometheusQueryError):
        return InternalError(f"{what} failed in Prometheus{of}: {exc.brief}; the adapter's log has the detail",
                             log_detail=detail)
    return ServiceUnavailable(f"unable to fetch metrics from Prometheus for {what}{of}: {exc.brief}",
                              log_detail=detail)


async def _run(prometheus: PrometheusClient, query: str, policy: tuple[float, bool],
               rule: CompiledRule, metric: str) -> tuple[list[Sample], float]:
    started = time.perf_counter()
    try:
        samples, fresh_until = await prometheus.query_fresh(query, *policy)
        vlog(log, 6, "%s: %d series in %.1f ms: %s", rule.rule.path, len(samples),
             (time.perf_counter() - started) * 1000, query)
        return samples, fresh_until
    except PrometheusError as exc:  # the route logs it once, with the request
        raise backend_failure(exc, f"{rule.rule.path}.metricsQuery", query, metric) from None
    finally:
        if prometheus.metrics is not None:
            prometheus.metrics.rule_query(rule.rule.path, time.perf_counter() - started)


def _not_discovered_yet(discovery: Discovery) -> None:
    """Before the first successful discovery "unknown metric" is not known to be true: say so."""
    if not discovery.synced:
        # the detail (seriesQuery text, Prometheus' error) is in the log, not for clients
        why = "Prometheus did not answer every seriesQuery" if discovery.last_error else "in progress"
        raise ServiceUnavailable(f"metrics discovery has not completed yet: {why}")


class CustomMetricsProvider:
    def __init__(self, discovery: Discovery, prometheus: PrometheusClient, labels: LabelLookup | None = None,
                 cache: CachePolicy = CachePolicy()) -> None:
        self.discovery = discovery
        self.prometheus = prometheus
        self.labels = labels
        self.cache = cache
        self._queries: dict[tuple, tuple[CompiledRule, str]] = {}

    def list_all_metrics(self) -> list[MetricInfo]:
        return [MetricInfo(m.resource, m.metric) for m in self.discovery.catalogue.custom.values()]

    def objects_version(self) -> int:
        """Changes whenever the objects a labelSelector selects could: an answer to a selector
        request is reusable only while it stays the same."""
        return self.labels.version if self.labels is not None else 0

    def _lookup(self, resource_name: str, metric: str, namespace: str | None = None) -> CustomMetric:
        resource = self.discovery.rules.resources.by_api_name(resource_name)
        if resource is not None and namespace is not None and not resource.namespaced:
            raise NotFound(f"{resource.api_name} are not namespaced: ask /{resource.api_name}/{{name}}/{metric}",
                           {"name": metric, "group": "custom.metrics.k8s.io", "kind": resource.api_name})
        found = self.discovery.catalogue.custom.get((resource.api_name, metric)) if resource else None
        if found is None:
            _not_discovered_yet(self.discovery)
            raise NotFound(f"the server could not find the metric {metric} for {resource_name}",
                           {"name": metric, "group": "custom.metrics.k8s.io", "kind": resource_name})
        return found

    async def _query(self, found: CustomMetric, namespace: str | None, names: list[str],
                     metric_selector: Selector, by_name: bool = False) -> list[CustomValue]:
        rule, res = found.rule, found.resource
        label = rule.converter.label_for_resource(res)
        ns_label = rule.converter.label_for_resource(NAMESPACES)
        if label is None:
            raise InternalError(f"{rule.rule.path}: no label maps to resource {res.api_name}")
        if namespace is not None and res.namespaced and ns_label is None:
            raise BadRequest(f"{rule.rule.path} has no label for namespaces, so it cannot answer namespaced requests")
        ns = namespace if res.namespaced else None
        if found.forecast is not None and res.api_name == "pods":
            return await self._pods_forecast(found, found.forecast, label, ns_label, ns, names, metric_selector,
                                             by_name)
        try:
            query = self._resource_query(rule, found.series, label, ns_label, ns, names, metric_selector)
            if found.forecast is not None:
                query = forecast_query(found.forecast, query)
        except QueryBuildError as exc:
            raise BadRequest(str(exc)) from None
        samples, fresh_until = await _run(self.prometheus, query, self.cache.for_rule(rule), rule,
                                          f"{res.api_name}/{found.metric}")
        out = []
        metric, window = found.metric, rule.window_seconds
        for labels, ts, value in samples:
            name = labels.get(label)
            if name is None and len(names) == 1 and len(samples) == 1:
                name = names[0]  # the template aggregated the resource label away; the answer is still this object
            if not name:
                continue
            out.append(CustomValue(res, ns, name, metric, value, ts, window, fresh_until))
        return out

    def _resource_query(self, rule: CompiledRule, series: str, label: str, ns_label: str | None,
                        namespace: str | None, names: list[str], metric_selector: Selector) -> str:
        """`resource_query`, kept: the HPA asks the same objects' query every sync period, and
        rendering the rule's template was a twentieth of a one-pod request's CPU. Kept by the
        rule object itself (a rule compiled anew, on a reload, builds its own), at most 4,096."""
        key = (id(rule), series, label, ns_label, namespace, tuple(names), metric_selector)
        kept = self._queries.get(key)
        if kept is not None and kept[0] is rule:
            return kept[1]
        query = resource_query(rule, series, label, ns_label, namespace, names, metric_selector)
        if len(self._queries) >= 4096:
            self._queries.clear()
        self._queries[key] = (rule, query)
        return query

    async def _pods_forecast(self, found: CustomMetric, forecast: Forecast, label: str, ns_label: str | None,
                             namespace: str | None, names: list[str], metric_selector: Selector,
                             by_name: bool) -> list[CustomValue]:
        """A Pods forecast: the forecast of the workload's total (its pods had other names one season
        ago), divided evenly over the pods that exist now: the pods asked for, or for one pod asked
        by name, the workload's pods that report the metric now. No history, no value."""
        rule = found.rule
        present = replace(found, forecast=None)
        if not names:  # no cluster to list the pods: the ones reporting now
            names = sorted({v.name for v in await self._query(present, namespace, [], metric_selector)})
            if not names:
                return []
        try:
            pods = workload_query(rule, found.series, label, ns_label, namespace, workload_pattern(names),
                                  metric_selector)
            total = forecast_query(forecast, f"sum({pods})")
        except QueryBuildError as exc:
            raise BadRequest(str(exc)) from None
        policy = self.cache.for_rule(rule)
        if by_name:
            (samples, fresh_until), (now, _) = await asyncio.gather(
                _run(self.prometheus, total, policy, rule, f"pods/{found.metric}"),
                _run(self.prometheus, pods, policy, rule, f"pods/{found.metric}"))
            reporting = {s.labels.get(label) for s in now}
            count = len(reporting) if names[0] in reporting else 0
        else:
            samples, fresh_until = await _run(self.prometheus, total, policy, rule, f"pods/{found.metric}")
            count = len(names)
        if not samples or not count:
            return []
        _, ts, value = samples[0]
        return [CustomValue(found.resource, namespace, name, found.metric, value / count, ts, rule.window_seconds,
                            fresh_until) for name in names]

    async def get_metric_by_name(self, resource_name: str, namespace: str | None, name: str, metric: str,
                                 metric_selector: Selector) -> CustomValue:
        found = self._lookup(resource_name, metric, namespace)
        for v in await self._query(found, namespace, [name], metric_selector, by_name=True):
            if v.name == name:
                return v
        where = f"{namespace}/{name}" if namespace else name
        raise NotFound(f"the server could not find the metric {metric} for {found.resource.api_name} {where}",
                       {"name": name, "group": "custom.metrics.k8s.io", "kind": found.resource.api_name})

    async def get_metric_by_selector(self, resource_name: str, namespace: str | None, selector: Selector,
                                     metric: str, metric_selector: Selector) -> list[CustomValue]:
        found = self._lookup(resource_name, metric, namespace)
        if selector.empty():
            existing = await self._existing(found.resource, namespace)
            values = await self._query(found, namespace, [], metric_selector)
            if existing is not None:  # a deleted pod keeps fresh series for a while: not an object any more
                values = [v for v in values if v.name in existing]
        else:
            if self.labels is None:
                raise BadRequest("labelSelector with '*' needs the objects' labels from Kubernetes, but the adapter "
                                 "runs without a cluster (start it with --kubeconfig or --in-cluster)")
            existing = await self.labels.names(found.resource, namespace if found.resource.namespaced else None,
                                               selector)
            if not existing:
                return []
            values = await self._query(found, namespace, sorted(existing), metric_selector)
            # a deleted pod keeps its rate series for a while: answer only for objects that exist now
            values = [v for v in values if v.name in existing]
        return sorted(values, key=lambda v: v.name)


    async def _existing(self, resource: Resource, namespace: str | None) -> set[str] | None:
        """Every object of `resource` (in `namespace`) that exists now, as prometheus-adapter lists
        them before asking for their values; None without a cluster, or for a resource the watch
        cache cannot list (then the names come from Prometheus alone)."""
        if self.labels is None:
            return None
        try:
            return await self.labels.names(resource, namespace if resource.namespaced else None, Selector(()))
        except BadRequest:
            return None


class ExternalMetricsProvider:
    def __init__(self, discovery: Discovery, prometheus: PrometheusClient, cache: CachePolicy = CachePolicy()) -> None:
        self.discovery = discovery
        self.prometheus = prometheus
        self.cache = cache

    def list_all_external_metrics(self) -> list[str]:
        return list(self.discovery.catalogue.external)

    async def get_external_metric(self, namespace: str | None, metric: str, selector: Selector) -> list[ExternalValue]:
        found: ExternalMetric | None = self.discovery.catalogue.external.get(metric)
        if found is None:
            _not_discovered_yet(self.discovery)
            raise NotFound(
                f"the server could not find the external metric {metric}",
                {"name": metric, "group": "external.metrics.k8s.io"},
            )
        rule = found.rule
        ns_label = rule.converter.label_for_resource(NAMESPACES)
        if rule.namespaced and namespace is not None and ns_label is None:
            ns_label = "namespace"  # a namespaced external rule without a mapping: the conventional label
        try:
            query = external_query(rule, found.series, ns_label, namespace, selector)
            if found.forecast is not None:
                query = forecast_query(found.forecast, query)
        except QueryBuildError as exc:
            raise BadRequest(str(exc)) from None
        samples, fresh_until = await _run(self.prometheus, query, self.cache.for_rule(rule), rule, metric)
        return [
            ExternalValue(
                metric,
                {k: v for k, v in s.labels.items() if k != "__name__"},
                s.value,
                s.timestamp,
                rule.window_seconds,
                fresh_until,
            )
            for s in samples
        ]
