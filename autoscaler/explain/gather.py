"""One moment of a live autoscaler, read as the controller reads it: the object, its target's
`/scale`, the pods the scale's selector matches, and every metric through the metrics APIs
(the controller's `MetricsClient`). The raw API answers are kept so the moment can be
written as a `simulate` scenario."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from autoscaler import objects
from autoscaler.controller.metrics import MetricsClient
from autoscaler.controller.scale import Discovery, Scale, ScaleClient, ScaleError
from autoscaler.decision import HPASpec, MetricFailure, PodInfo, Reading, SpecError, parse_spec
from promscaler.kubeapi import ApiError, Kube, Obj, query

__all__ = ["KINDS", "GatherError", "Moment", "gather"]

# --kind value -> (kind, API path template, apiVersion)
KINDS: dict[str, tuple[str, str, str]] = {
    "horizontalautoscaler": ("HorizontalAutoscaler",
                             "/apis/promscaler.io/v1alpha1/namespaces/{ns}/horizontalautoscalers/{name}",
                             "promscaler.io/v1alpha1"),
    "hpa": ("HorizontalPodAutoscaler", "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers/{name}",
            "autoscaling/v2"),
}
METRICS_APIS = ("/apis/metrics.k8s.io/", "/apis/custom.metrics.k8s.io/", "/apis/external.metrics.k8s.io/")


class GatherError(Exception):
    """The moment cannot be read; one line naming the object and the API."""


@dataclass
class Moment:
    kind: str
    namespace: str
    name: str
    obj: Obj                                   # the autoscaler as read (apiVersion and kind set)
    spec: HPASpec
    scale: Scale
    pods_raw: list[Obj]                        # pods the scale's selector matches
    pods: list[PodInfo]
    readings: list[Reading]
    now: datetime
    # (path, labelSelector, body) of every metrics API answer
    answers: list[tuple[str, str | None, Obj]] = field(default_factory=list)
    owners: dict[str, tuple[str, int]] = field(default_factory=dict)  # shard group -> (replica, members)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


class _Recording:
    """The `Kube` the metrics client is given: the same requests, with the metrics APIs' answers kept."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.answers: list[tuple[str, str | None, Obj]] = []

    async def get(self, path: str, q: Sequence[tuple[str, Any]] | None = None) -> Obj:
        body = await self.kube.get(path, q)
        if path.startswith(METRICS_APIS):
            self.answers.append((path, dict(q or ()).get("labelSelector"), body))
        return body


def _api_error(what: str, api: str, exc: ApiError) -> GatherError:
    if exc.status == 403:
        cause = f"forbidden (RBAC): {exc.message}"
    elif exc.not_found:
        cause = f"not found: {exc.message}" if exc.message else "not found"
    else:
        cause = f"{exc.status} {exc.reason}: {exc.message}"
    return GatherError(f"{what}: {api}: {cause}")


async def gather(kube: Kube, kind_key: str, namespace: str, name: str, now: datetime) -> Moment:
    kind, path, api_version = KINDS[kind_key]
    label = f"{kind} {namespace}/{name}"
    try:
        obj = await kube.get(path.format(ns=namespace, name=name))
    except ApiError as exc:
        raise _api_error(label, api_version, exc) from None
    obj = {**obj, "apiVersion": api_version, "kind": kind}
    try:
        spec = parse_spec(obj.get("spec"), "spec")
    except SpecError as exc:
        raise GatherError(f"{label}: invalid spec: {exc}") from None
    target = (obj.get("spec") or {}).get("scaleTargetRef") or {}
    discovery = Discovery(kube)
    target_label = f"{target.get('kind')}/{target.get('name')}"
    try:
        scale = await ScaleClient(kube, discovery).get(namespace, target)
    except ScaleError as exc:
        raise GatherError(f"{label}: target {target_label} scale ({target.get('apiVersion')}): {exc}") from None
    selector, selector_error = objects.scale_selector(scale.raw)
    pods_raw: list[Obj] = []
    if selector is not None:
        try:
            body = await kube.get(f"/api/v1/namespaces/{namespace}/pods", query(labelSelector=scale.selector))
        except ApiError as exc:
            raise _api_error(f"{label}: pods of {target_label}", "v1 pods", exc) from None
        pods_raw = [p for p in body.get("items") or [] if isinstance(p, dict)]
    try:
        pods = [objects.pod_info(p) for p in pods_raw]
    except objects.ObjectError as exc:
        raise GatherError(f"{label}: a pod of {target_label}: {exc}") from None
    recording = _Recording(kube)
    metrics = MetricsClient(cast(Kube, recording), discovery)
    readings: list[Reading]
    if selector_error is None:
        readings = await metrics.read_all(namespace, spec.metrics, scale.selector, [p.name for p in pods])
    else:
        readings = [MetricFailure(selector_error) for _ in spec.metrics]
    return Moment(kind, namespace, name, obj, spec, scale, pods_raw, pods, readings, now, recording.answers)
