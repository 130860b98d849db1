"""Kubernetes API objects (camelCase dicts, as the API returns JSON) -> the decision model.

Pure converters shared by the live controller and `simulate`, so both read pods and the three
metrics APIs the same way. They follow the Kubernetes HPA metrics client
(`pkg/controller/podautoscaler/metrics`): a pod whose containers lack the resource has no sample;
so has a pod whose metrics lack the named container (since 1.36: logged at V(2), never an error); custom
metrics without a window get one minute; an empty answer is an error ("no metrics returned from ... API").
Bad input raises `ObjectError` (a `SpecError`: the fields are checked by decision/fields.py's
validators) with the field path relative to the object given.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from promscaler.logs import vlog
from promscaler.quantity import to_milli
from promscaler.selectors import Selector, SelectorError, from_label_selector, parse_selector
from promscaler.times import DurationError, parse_time

from .decision.fields import SpecError, duration, items, obj, quantity
from .decision.model import ExternalReading, MetricFailure, ObjectReading, PodInfo, PodReading, PodSample

__all__ = [
    "DEFAULT_CUSTOM_WINDOW",
    "ObjectError",
    "custom_value",
    "external_metric_reading",
    "object_metric_reading",
    "pod_info",
    "pod_labels",
    "pod_metrics_reading",
    "pods_metric_reading",
    "sample_time",
    "scale_selector",
]

log = logging.getLogger(__name__)

DEFAULT_CUSTOM_WINDOW = 60.0  # metricServerDefaultMetricWindow
_MAX_INT64 = 2**63 - 1
_EPOCH = parse_time("1970-01-01T00:00:00Z")
_T = TypeVar("_T")


class ObjectError(SpecError):
    """A field of an API object that cannot be read; `path` is relative to that object."""


def _read(check: Callable[..., _T], value: Any, path: str, *options: Any) -> _T:
    """A field checked by decision/fields.py's validator; its SpecError raised as an ObjectError."""
    try:
        return check(value, path, *options)
    except SpecError as exc:
        raise ObjectError(exc.path, exc.reason) from None


def _map(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:  # the common case, without the validator's calls: pods are read by the thousand
        return {}
    return _read(obj, value, path) or {}


def _list(value: Any, path: str) -> Sequence[Any]:
    return _read(items, value, path)


def _time(value: Any, path: str) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_time(value)
    except (DurationError, ValueError, OverflowError):
        raise ObjectError(path, f"not an RFC 3339 time: {value!r}") from None


def sample_time(value: Any, path: str) -> datetime | None:
    """A metric sample's timestamp: from 1970 on (a metrics API that answers year 1 is broken)."""
    ts = _time(value, path)
    if ts is not None and ts < _EPOCH:
        raise ObjectError(path, f"out of range: {value!r} (before 1970)")
    return ts


def _milli(value: Any, path: str) -> int:
    """A quantity's milli-value (negative too); beyond int64 (what Kubernetes' MilliValue holds) it is an error."""
    milli = to_milli(_read(quantity, value, path))
    if not -_MAX_INT64 - 1 <= milli <= _MAX_INT64:
        raise ObjectError(path, f"out of range: {value!r}")
    return milli


def _requests(container: Mapping[str, Any], path: str) -> dict[str, int]:
    resources = _map(container.get("resources"), f"{path}.resources")
    reqs = _map(resources.get("requests"), f"{path}.resources.requests")
    return {str(k): _milli(v, f"{path}.resources.requests.{k}") for k, v in reqs.items()}


def pod_labels(pod: Mapping[str, Any]) -> Mapping[str, str]:
    labels = _map(_map(pod.get("metadata"), "metadata").get("labels"), "metadata.labels")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items()):
        raise ObjectError("metadata.labels", "must map strings to strings")
    return labels


def pod_info(pod: Mapping[str, Any], share: Callable[[Mapping[str, Any]], Mapping[str, Any]] | None = None) -> PodInfo:
    """A core/v1 Pod -> PodInfo. A missing `status.phase` is read as Running. `share` is applied
    to the request mappings (the pod informer keeps equal ones once, see informers.shared)."""
    meta = _map(pod.get("metadata"), "metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError("metadata.name", "required")
    spec = _map(pod.get("spec"), "spec")
    status = _map(pod.get("status"), "status")
    requests: dict[str, dict[str, int]] = {}
    for i, c in enumerate(_list(spec.get("containers"), "spec.containers")):
        c = _map(c, f"spec.containers[{i}]")
        requests[str(c.get("name", f"#{i}"))] = _requests(c, f"spec.containers[{i}]")
    for i, c in enumerate(_list(spec.get("initContainers"), "spec.initContainers")):
        c = _map(c, f"spec.initContainers[{i}]")
        if c.get("restartPolicy") == "Always":  # sidecars count, as in calculatePodRequestsFromContainers
            requests[str(c.get("name", f"init#{i}"))] = _requests(c, f"spec.initContainers[{i}]")
    pod_level = None
    if spec.get("resources") is not None:
        pod_level = _requests(spec, "spec") or None
    ready_status: str | None = None
    transition = None
    for i, cond in enumerate(_list(status.get("conditions"), "status.conditions")):
        cond = _map(cond, f"status.conditions[{i}]")
        if cond.get("type") == "Ready":
            ready_status = str(cond.get("status", "Unknown"))
            transition = _time(cond.get("lastTransitionTime"), f"status.conditions[{i}].lastTransitionTime")
            break
    return PodInfo(
        name=name,
        phase=sys.intern(str(status.get("phase") or "Running")),
        deleted=meta.get("deletionTimestamp") is not None,
        ready=ready_status == "True",
        ready_transition=transition,
        start_time=_time(status.get("startTime"), "status.startTime"),
        requests=share(requests) if share is not None else requests,
        ready_condition=ready_status,
        pod_requests=share(pod_level) if share is not None and pod_level is not None else pod_level,
    )


def scale_selector(scale: Mapping[str, Any]) -> tuple[Selector | None, str | None]:
    """The scale subresource's `status.selector`, or the controller's error when unusable."""
    text = _map(scale.get("status"), "status").get("selector")
    if not text:
        return None, "the HPA target's scale is missing a selector"
    try:
        return parse_selector(str(text)), None
    except SelectorError as exc:
        return None, f"couldn't convert selector into a corresponding internal selector object: {exc}"


# --- metrics.k8s.io ------------------------------------------------------------------------------


def pod_metrics_reading(
    items: Iterable[Any], resource: str, container: str | None = None
) -> PodReading | MetricFailure:
    """metrics.k8s.io PodMetrics items -> one sample per pod (containers summed, or one container).

    As the Kubernetes metrics client reads them (1.37, and 1.36 alike): a pod absent from the answer, or present with
    no container metrics at all, has no sample (the replica calculator's missing-pod rules apply); a
    pod whose containers lack the resource has none either; with a named container, neither has a
    pod that reports other containers but not that one (`getContainerMetrics` logs it at V(2) and
    counts the pod as missing; before 1.36 it failed the whole metric)."""
    items = list(items)
    if not items:
        return MetricFailure("no metrics returned from resource metrics API")
    samples: dict[str, PodSample] = {}
    for i, raw in enumerate(items):
        item = _map(raw, f"[{i}]")
        meta = _map(item.get("metadata"), f"[{i}].metadata")
        name = str(meta.get("name", ""))
        path = f"[{i}].containers"
        containers = [(f"{path}[{j}]", _map(c, f"{path}[{j}]"))
                      for j, c in enumerate(_list(item.get("containers"), path))]
        if not containers:
            continue  # no metrics for this pod: a missing pod
        if container:
            containers = [(p, c) for p, c in containers if c.get("name") == container][:1]
            if not containers:
                vlog(log, 2, "Missing container metric container=%s pod=%s/%s", container, meta.get("namespace", ""),
                     name)
                continue
        usages = [(p, _map(c.get("usage"), f"{p}.usage")) for p, c in containers]
        if all(resource in usage for _, usage in usages):
            total = sum(_milli(usage[resource], f"{p}.usage.{resource}") for p, usage in usages)
            ts = sample_time(item.get("timestamp"), f"[{i}].timestamp") or _EPOCH
            samples[name] = PodSample(total, ts, _window(item.get("window"), f"[{i}].window"))
    return PodReading(samples)




def _window(value: Any, path: str, default: float = 0.0) -> float:
    return default if value is None else _read(duration, value, path)


# --- custom.metrics.k8s.io -----------------------------------------------------------------------


def custom_value(item: Mapping[str, Any],
                 path: str = "") -> tuple[Mapping[str, Any], str, Selector, int, datetime, float]:
    """One MetricValue (v1beta1 or v1beta2): (describedObject, metric name, selector, milli, timestamp, window)."""
    described = _map(item.get("describedObject"), f"{path}.describedObject")
    if "metric" in item:
        ident = _map(item.get("metric"), f"{path}.metric")
        name, raw_sel, window_raw = ident.get("name"), ident.get("selector"), item.get("windowSeconds")
        sel_path = f"{path}.metric.selector"
    else:
        name, raw_sel, window_raw = item.get("metricName"), item.get("selector"), item.get("window")
        sel_path = f"{path}.selector"
    try:
        selector = from_label_selector(raw_sel)
    except SelectorError as exc:
        raise ObjectError(sel_path, str(exc)) from None
    if "value" not in item:
        raise ObjectError(f"{path}.value", "required")
    milli = _milli(item["value"], f"{path}.value")
    ts = sample_time(item.get("timestamp"), f"{path}.timestamp") or _EPOCH
    window = _window(window_raw, f"{path}.window", DEFAULT_CUSTOM_WINDOW)
    return described, str(name or ""), selector, milli, ts, window


def pods_metric_reading(
    items: Iterable[Mapping[str, Any]], metric_name: str, pod_names: Iterable[str] | None = None
) -> PodReading | MetricFailure:
    """The answer to `pods/*/<metric>` (custom.metrics.k8s.io, either version) as per-pod samples.

    Like the Kubernetes metrics client, it takes what the API answered: the API already applied
    the label and metric selectors. Samples of pods outside `pod_names` are dropped, as the
    replica calculator only looks at the target's pods."""
    allowed = None if pod_names is None else set(pod_names)
    samples: dict[str, PodSample] = {}
    for i, item in enumerate(items):
        described, name, _, milli, ts, window = custom_value(item, f"[{i}]")
        if described.get("kind") != "Pod" or name != metric_name:
            continue
        pod = str(described.get("name", ""))
        if allowed is not None and pod not in allowed:
            continue
        samples[pod] = PodSample(milli, ts, window)
    if not samples:
        return MetricFailure("no metrics returned from custom metrics API")
    return PodReading(samples)


def object_metric_reading(items: Iterable[Mapping[str, Any]], metric_name: str, kind: str,
                          name: str) -> ObjectReading | MetricFailure:
    """The answer to `<resource>/<name>/<metric>`: the one value of the described object."""
    for i, item in enumerate(items):
        _, metric, _, milli, ts, _ = custom_value(item, f"[{i}]")
        if metric == metric_name:
            return ObjectReading(milli, ts)
    return MetricFailure(f"the server could not find the metric {metric_name} for {kind.lower()} {name}")


def external_metric_reading(items: Iterable[Mapping[str, Any]]) -> ExternalReading | MetricFailure:
    """The answer to an external metric request: every returned series counts, and the calculator
    sums them (the API already applied the label selector, as in Kubernetes)."""
    values: list[int] = []
    latest = None
    for i, item in enumerate(items):
        if "value" not in item:
            raise ObjectError(f"[{i}].value", "required")
        values.append(_milli(item["value"], f"[{i}].value"))
        ts = sample_time(item.get("timestamp"), f"[{i}].timestamp")
        if ts is not None and (latest is None or ts > latest):
            latest = ts
    if not values:
        return MetricFailure("no metrics returned from external metrics API")
    return ExternalReading(tuple(values), latest or _EPOCH)
