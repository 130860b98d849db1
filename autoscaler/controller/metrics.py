"""The metrics client: the three metrics APIs, asked through the API server as the HPA asks them.

- Resource / ContainerResource: `metrics.k8s.io` PodMetrics of the target's pods, v1 when the
  group serves it (Kubernetes 1.37), else v1beta1, whatever version the group prefers: the
  order of Kubernetes' versioned resource metrics client (podautoscaler/metrics/resource_client.go).
- Pods / Object: `custom.metrics.k8s.io`, v1beta2 when the server offers it, else v1beta1.
- External: `external.metrics.k8s.io/v1beta1`.
Each answer becomes one of the decision model's readings (through `autoscaler.objects`); any
failure becomes a `MetricFailure` whose message says what was asked and what went wrong.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

from autoscaler import objects
from autoscaler.decision.model import MetricFailure, Reading
from autoscaler.decision.spec import MetricSpec
from promscaler import wire
from promscaler.kubeapi import ApiError, Kube, query

from .apihealth import is_outage
from .scale import Discovery, ScaleError

CUSTOM = "custom.metrics.k8s.io"
EXTERNAL = "external.metrics.k8s.io"


class MetricsError(Exception):
    pass


def _custom_version(served: set[str]) -> str:
    return "v1beta2" if "v1beta2" in served or not served else "v1beta1"


def _resource_version(served: set[str]) -> str:
    for version in wire.RESOURCE_VERSIONS:  # v1, then v1beta1
        if version in served:
            return version
    raise MetricsError("no known available resource metrics API versions found")


class MetricsClient:
    def __init__(self, kube: Kube, discovery: Discovery, version_ttl: float = 60.0) -> None:
        self.kube = kube
        self.discovery = discovery
        self.version_ttl = version_ttl
        self._versions: dict[str, tuple[float, str]] = {}  # group -> (when chosen, version)
        self._version_locks: dict[str, asyncio.Lock] = {}  # one per group: one discovery in flight each

    async def _version(self, group: str, choose: Callable[[set[str]], str]) -> str:
        """The version of `group` to ask, chosen from its group document's versions and kept
        `version_ttl` seconds (an adapter upgraded or rolled back is noticed within that); while
        discovery fails, the last choice. Failures are not kept: the next read asks again. A fresh
        choice is answered without waiting: only a read that must ask queues, behind its group's
        one discovery (not another group's)."""
        known = self._versions.get(group)
        if known is not None and time.monotonic() - known[0] <= self.version_ttl:
            return known[1]
        async with self._version_locks.setdefault(group, asyncio.Lock()):
            now, known = time.monotonic(), self._versions.get(group)
            if known is None or now - known[0] > self.version_ttl:
                try:
                    doc = await self.kube.get(f"/apis/{group}")
                except ApiError as exc:
                    if known is not None:
                        return known[1]
                    if group == wire.RESOURCE_GROUP and exc.status == 404:
                        raise MetricsError(f"no resource metrics API ({group}) registered") from None
                    raise MetricsError(f"unable to discover {group}: {exc.message or exc.reason}") from None
                known = self._versions[group] = (now, choose({v.get("version") for v in doc.get("versions") or []}))
            return known[1]

    def forget_version(self, group: str, version: str) -> None:
        """Drop the choice of `version` for `group`: the next read asks discovery again, instead of
        asking an unregistered version (a 404, not an outage) until the choice expires."""
        if self._versions.get(group, (0.0, ""))[1] == version:
            del self._versions[group]

    async def custom_version(self) -> str:
        """The custom metrics version to use: v1beta2 if served, else v1beta1 (cached)."""
        return await self._version(CUSTOM, _custom_version)

    async def resource_version(self) -> str:
        """The resource metrics version to use: v1 if served, else v1beta1 (cached)."""
        return await self._version(wire.RESOURCE_GROUP, _resource_version)

    async def read_all(self, namespace: str, metrics: Sequence[MetricSpec], pod_selector: str,
                       pod_names: Sequence[str]) -> list[Reading]:
        """One reading per spec metric, fetched concurrently, in spec order."""
        return list(await asyncio.gather(*(self.read(namespace, m, pod_selector, pod_names) for m in metrics)))

    async def read(self, namespace: str, metric: MetricSpec, pod_selector: str, pod_names: Sequence[str]) -> Reading:
        try:
            if metric.type == "Resource":
                return await self._resource(namespace, pod_selector, metric.name, None)
            if metric.type == "ContainerResource":
                return await self._resource(namespace, pod_selector, metric.name, metric.container)
            if metric.type == "Pods":
                return await self._pods(namespace, pod_selector, metric, pod_names)
            if metric.type == "Object":
                return await self._object(namespace, metric)
            if metric.type == "External":
                return await self._external(namespace, metric)
            return MetricFailure(f"unknown metric source type {metric.type!r}")
        except MetricsError as exc:
            return MetricFailure(str(exc))
        except ApiError as exc:
            return MetricFailure(f"{exc.reason}: {exc.message}")
        except (ScaleError, ValueError, KeyError, TypeError) as exc:  # ObjectError is a ValueError
            return MetricFailure(str(exc))
        except Exception as exc:  # network errors: the reading fails, the sync goes on
            if is_outage(exc):
                raise  # the API server itself is gone: the whole sync waits for it
            return MetricFailure(f"{type(exc).__name__}: {exc}")

    async def _resource(self, namespace: str, selector: str, resource: str, container: str | None) -> Reading:
        try:
            version = await self.resource_version()
        except MetricsError as exc:  # as Kubernetes' REST metrics client wraps its versioned getter's errors
            raise MetricsError(f"unable to fetch metrics from resource metrics API: {exc}") from None
        try:
            body = await self.kube.get(
                f"/apis/{wire.RESOURCE_GROUP}/{version}/namespaces/{namespace}/pods", query(labelSelector=selector)
            )
        except ApiError as exc:
            if exc.status == 404:  # the version is no longer registered (an adapter rolled back): choose again
                self.forget_version(wire.RESOURCE_GROUP, version)
            raise MetricsError(
                f"unable to fetch metrics from resource metrics API: {exc.message or exc.reason}"
            ) from None
        return objects.pod_metrics_reading(body.get("items") or [], resource, container)

    async def _pods(self, namespace: str, selector: str, metric: MetricSpec, pod_names: Sequence[str]) -> Reading:
        version = await self.custom_version()
        q = query(labelSelector=selector, metricLabelSelector=_selector_string(metric))
        try:
            body = await self.kube.get(f"/apis/{CUSTOM}/{version}/namespaces/{namespace}/pods/*/{metric.name}", q)
        except ApiError as exc:
            raise MetricsError(
                f"unable to fetch metrics from custom metrics API: {exc.message or exc.reason}"
            ) from None
        return objects.pods_metric_reading(body.get("items") or [], metric.name, pod_names)

    async def _object(self, namespace: str, metric: MetricSpec) -> Reading:
        described = metric.described_object
        assert described is not None
        version = await self.custom_version()
        ref = await self.discovery.resolve(described.api_version or "v1", described.kind)
        base = f"/apis/{CUSTOM}/{version}/namespaces/{namespace}" if ref.namespaced else f"/apis/{CUSTOM}/{version}"
        try:
            body = await self.kube.get(f"{base}/{ref.resource}/{described.name}/{metric.name}",
                                       query(metricLabelSelector=_selector_string(metric)))
        except ApiError as exc:
            raise MetricsError(
                f"{described.kind} on {namespace} {described.name}/unable to fetch metrics from custom metrics API: "
                f"{exc.message or exc.reason}"
            ) from None
        items = (body.get("items") or []) if "items" in body else [body]
        return objects.object_metric_reading(items, metric.name, described.kind, described.name)

    async def _external(self, namespace: str, metric: MetricSpec) -> Reading:
        q = query(labelSelector=_selector_string(metric))
        try:
            body = await self.kube.get(f"/apis/{EXTERNAL}/v1beta1/namespaces/{namespace}/{metric.name}", q)
        except ApiError as exc:
            raise MetricsError(
                f"unable to fetch metrics from external metrics API: {exc.message or exc.reason}"
            ) from None
        return objects.external_metric_reading(body.get("items") or [])


def _selector_string(metric: MetricSpec) -> str | None:
    """The metric's label selector in the query-string form the metrics APIs take."""
    if metric.selector is None or metric.selector.empty():
        return None
    return str(metric.selector)
