"""Wire shapes of the three metrics APIs and of API discovery, as plain dicts.

The adapter serves these, the sandbox API server serves metrics.k8s.io with them, and the
autoscaler's metrics client reads them: one definition of each field name.
Plain dicts (not models) because they sit on the hot path and go straight to orjson.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from promscaler.times import format_time

CUSTOM_GROUP = "custom.metrics.k8s.io"
EXTERNAL_GROUP = "external.metrics.k8s.io"
RESOURCE_GROUP = "metrics.k8s.io"
CUSTOM_VERSIONS = ("v1beta2", "v1beta1")  # preferred first
EXTERNAL_VERSIONS = ("v1beta1",)

Obj = dict[str, Any]


def object_reference(kind: str, name: str, namespace: str | None, api_version: str = "/v1") -> Obj:
    """`describedObject` (a core/v1 ObjectReference)."""
    ref: Obj = {"kind": kind, "name": name, "apiVersion": api_version}
    if namespace:
        ref["namespace"] = namespace
    return ref


def custom_metric_value(
    version: str,
    described: Obj,
    metric: str,
    value: str,
    timestamp: datetime | str,
    window_seconds: int | None = None,
    selector: Mapping[str, Any] | None = None,
) -> Obj:
    """One `MetricValue`, in the v1beta1 (`metricName`) or v1beta2 (`metric: {name, selector}`) shape."""
    ts = timestamp if isinstance(timestamp, str) else format_time(timestamp)
    if version == "v1beta1":
        item: Obj = {"describedObject": described, "metricName": metric, "timestamp": ts}
        if window_seconds is not None:
            item["window"] = window_seconds
        item["value"] = value
        if selector:
            item["selector"] = dict(selector)
        return item
    metric_id: Obj = {"name": metric}
    if selector:
        metric_id["selector"] = dict(selector)
    item = {"describedObject": described, "metric": metric_id, "timestamp": ts}
    if window_seconds is not None:
        item["windowSeconds"] = window_seconds
    item["value"] = value
    return item


def custom_metric_values(
    version: str,
    kind: str,
    api_version: str,
    metric: str,
    rows: Iterable[tuple[str, str | None, str, str]],
    window_seconds: int | None = None,
    selector: Mapping[str, Any] | None = None,
) -> list[Obj]:
    """Many `MetricValue`s of one metric and kind, from (name, namespace, value, timestamp) rows:
    the same objects as `custom_metric_value(version, object_reference(...), ...)` per row, built
    in one loop because a 1,000-pod answer is on the HPA's hot path. Items share their `metric`
    dict: build, serialize, discard."""
    out: list[Obj] = []
    append = out.append
    if version == "v1beta1":
        for name, namespace, value, ts in rows:
            ref: Obj = {"kind": kind, "name": name, "apiVersion": api_version}
            if namespace:
                ref["namespace"] = namespace
            item: Obj = {"describedObject": ref, "metricName": metric, "timestamp": ts}
            if window_seconds is not None:
                item["window"] = window_seconds
            item["value"] = value
            if selector:
                item["selector"] = dict(selector)
            append(item)
        return out
    metric_id: Obj = {"name": metric}
    if selector:
        metric_id["selector"] = dict(selector)
    for name, namespace, value, ts in rows:
        ref = {"kind": kind, "name": name, "apiVersion": api_version}
        if namespace:
            ref["namespace"] = namespace
        item = {"describedObject": ref, "metric": metric_id, "timestamp": ts}
        if window_seconds is not None:
            item["windowSeconds"] = window_seconds
        item["value"] = value
        append(item)
    return out


def metric_value_list(version: str, items: Iterable[Obj]) -> Obj:
    return {"kind": "MetricValueList", "apiVersion": f"{CUSTOM_GROUP}/{version}", "metadata": {}, "items": list(items)}


def external_metric_value(
    metric: str, labels: Mapping[str, str], value: str, timestamp: datetime | str, window_seconds: int | None = None
) -> Obj:
    item: Obj = {
        "metricName": metric,
        "metricLabels": dict(labels),
        "timestamp": timestamp if isinstance(timestamp, str) else format_time(timestamp),
    }
    if window_seconds is not None:
        item["window"] = window_seconds
    item["value"] = value
    return item


def external_metric_value_list(items: Iterable[Obj]) -> Obj:
    return {
        "kind": "ExternalMetricValueList",
        "apiVersion": f"{EXTERNAL_GROUP}/v1beta1",
        "metadata": {},
        "items": list(items),
    }


# Preferred first: v1 (Kubernetes 1.37, unchanged from v1beta1), as the aggregator orders two
# APIServices of equal versionPriority (GA before beta) and as Kubernetes' own fake metrics server
# (agnhost) lists them. v1beta1 stays for clients before 1.37.
RESOURCE_VERSIONS = ("v1", "v1beta1")
LEGACY_RESOURCE_VERSION = "v1beta1"  # what a cluster or metrics server before 1.37 serves


def pod_metrics(
    name: str,
    namespace: str,
    timestamp: datetime | str,
    window: str,
    containers: Mapping[str, Mapping[str, str]],
    labels: Mapping[str, str] | None = None,
    created: str | None = None,
    version: str = LEGACY_RESOURCE_VERSION,
) -> Obj:
    """metrics.k8s.io PodMetrics (the same in v1 and v1beta1; `version` names the one asked for);
    `containers` maps container name to usage quantities; `created` is metadata.creationTimestamp
    (metrics-server sets it to the time of the answer)."""
    meta: Obj = {"name": name, "namespace": namespace}
    if created:
        meta["creationTimestamp"] = created
    if labels:
        meta["labels"] = dict(labels)
    return {
        "kind": "PodMetrics",
        "apiVersion": f"{RESOURCE_GROUP}/{version}",
        "metadata": meta,
        "timestamp": timestamp if isinstance(timestamp, str) else format_time(timestamp),
        "window": window,
        "containers": [{"name": c, "usage": dict(u)} for c, u in containers.items()],
    }


def pod_metrics_list(items: Iterable[Obj], version: str = LEGACY_RESOURCE_VERSION) -> Obj:
    return {"kind": "PodMetricsList", "apiVersion": f"{RESOURCE_GROUP}/{version}", "metadata": {},
            "items": list(items)}


def node_metrics(
    name: str,
    timestamp: datetime | str,
    window: str,
    usage: Mapping[str, str],
    labels: Mapping[str, str] | None = None,
    created: str | None = None,
    version: str = LEGACY_RESOURCE_VERSION,
) -> Obj:
    """metrics.k8s.io NodeMetrics, of `version`."""
    meta: Obj = {"name": name}
    if created:
        meta["creationTimestamp"] = created
    if labels:
        meta["labels"] = dict(labels)
    return {
        "kind": "NodeMetrics",
        "apiVersion": f"{RESOURCE_GROUP}/{version}",
        "metadata": meta,
        "timestamp": timestamp if isinstance(timestamp, str) else format_time(timestamp),
        "window": window,
        "usage": dict(usage),
    }


def node_metrics_list(items: Iterable[Obj], version: str = LEGACY_RESOURCE_VERSION) -> Obj:
    return {"kind": "NodeMetricsList", "apiVersion": f"{RESOURCE_GROUP}/{version}", "metadata": {},
            "items": list(items)}


# --- discovery -------------------------------------------------------------------------------


def api_group(group: str, versions: Iterable[str]) -> Obj:
    """`APIGroup`; the first version is the preferred one."""
    vs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": vs, "preferredVersion": vs[0]}


def api_group_list(groups: Iterable[Obj]) -> Obj:
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": list(groups)}


def api_resource(name: str, kind: str, namespaced: bool, verbs: Iterable[str] = ("get",)) -> Obj:
    return {"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": list(verbs)}


def api_resource_list(group_version: str, resources: Iterable[Obj]) -> Obj:
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": list(resources)}
