"""What the controller keeps of pods and autoscalers: projections, not the API's objects, that
decide exactly as the full objects do (Kubernetes' groupPods semantics, replica_calculator.go)."""

from __future__ import annotations

from typing import Any

from autoscaler import objects
from autoscaler.controller.informers import CachedPod, cached_autoscaler, cached_pod, slim_autoscaler
from autoscaler.decision import ControllerConfig, DecisionInput, PodReading, PodSample, decide
from autoscaler.decision.replicas import group_pods
from promscaler.times import format_time
from tests.decision.decision_helpers import NOW, ago, cpu_util, pods_metric, spec

SAMPLED = ago(30)  # every sample is 30 s old, over a 60 s window


def pod(name: str, *, phase: str | None = "Running", ready: str | None = "True", started: float | None = 3600,
        transition: float = 3000, deleted: bool = False) -> dict[str, Any]:
    """A pod as the API server returns it, with the fields no decision reads (managedFields,
    ownerReferences, the container spec) filled in as a real one has them."""
    status: dict[str, Any] = {"hostIP": "10.0.0.1", "podIP": "10.1.0.7", "qosClass": "Burstable",
                              "containerStatuses": [{"name": "app", "ready": ready == "True", "restartCount": 0,
                                                     "image": "app:1", "imageID": "sha256:" + "0" * 64}]}
    if phase is not None:
        status["phase"] = phase
    if started is not None:
        status["startTime"] = format_time(ago(started))
    if ready is not None:
        status["conditions"] = [
            {"type": "Initialized", "status": "True", "lastTransitionTime": format_time(ago(started or 0))},
            {"type": "Ready", "status": ready, "lastTransitionTime": format_time(ago(transition))},
        ]
    meta: dict[str, Any] = {
        "name": name, "namespace": "shop", "uid": f"uid-{name}", "resourceVersion": "42",
        "labels": {"app": "web", "pod-template-hash": "5d8f"},
        "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d8f", "uid": "rs"}],
        "managedFields": [{"manager": "kubelet", "operation": "Update", "fieldsType": "FieldsV1",
                           "fieldsV1": {"f:status": {"f:conditions": {".": {}}, "f:phase": {}}}}],
    }
    if deleted:
        meta["deletionTimestamp"] = format_time(ago(5))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "status": status, "spec": {
        "nodeName": "node-1", "containers": [{"name": "app", "image": "app:1", "env": [{"name": "A", "value": "1"}],
                                              "resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}]}}


# name -> (pod, its sample in milli or None): each case of groupPods
TABLE: dict[str, tuple[dict[str, Any], int | None]] = {
    "ready": (pod("ready"), 400),
    "unready-new": (pod("unready-new", ready="False", started=60, transition=60), 100),  # in the CPU init period
    "deleted": (pod("deleted", deleted=True), 100),
    "failed": (pod("failed", phase="Failed", ready="False"), None),
    "pending": (pod("pending", phase="Pending", ready="False", started=None), None),
    "no-start": (pod("no-start", started=None), 100),
    "no-ready-condition": (pod("no-ready-condition", ready=None), 100),
    "missing": (pod("missing"), None),
}
SAMPLES = {name: PodSample(milli, SAMPLED, 60.0) for name, (_, milli) in TABLE.items() if milli is not None}


def projected() -> list[CachedPod]:
    return [cached_pod(p) for p, _ in TABLE.values()]


def test_the_pod_cache_keeps_projections_sharing_labels_and_requests():
    cached = projected()
    assert all(isinstance(c, CachedPod) for c in cached)
    assert {c.namespace for c in cached} == {"shop"}
    assert cached[0].labels == {"app": "web", "pod-template-hash": "5d8f"}
    # the pods of one template hold one labels dict and one requests dict between them
    assert len({id(c.labels) for c in cached}) == 1
    assert len({id(c.info.requests) for c in cached}) == 1
    assert cached[0].info.requests == {"app": {"cpu": 500, "memory": 64 * 2**20 * 1000}}


def test_pod_level_requests_are_shared_too():
    pods = [pod(n) for n in ("a", "b")]
    for p in pods:
        p["spec"]["resources"] = {"requests": {"cpu": "1"}}  # KEP-2837 pod-level requests
    a, b = (cached_pod(p).info for p in pods)
    assert a.pod_requests == {"cpu": 1000} and a.pod_requests is b.pod_requests


def test_projections_group_pods_as_kubernetes_does():
    """groupPods: deleted or Failed pods are ignored; Pending pods are unready; a pod without a
    sample is missing; for CPU, a pod without a Ready condition or a start time is unready, and
    so is one not ready within the CPU initialization period."""
    infos = [c.info for c in projected()]
    cpu = group_pods(infos, SAMPLES, "cpu", ControllerConfig(), NOW)
    assert cpu.metrics == {"ready": 400}
    assert sorted(cpu.unready) == ["no-ready-condition", "no-start", "pending", "unready-new"]
    assert cpu.missing == ["missing"]
    assert sorted(cpu.ignored) == ["deleted", "failed"]
    # any other metric: only Pending pods are unready
    other = group_pods(infos, SAMPLES, "", ControllerConfig(), NOW)
    assert other.metrics == {"ready": 400, "unready-new": 100, "no-start": 100, "no-ready-condition": 100}
    assert other.unready == ["pending"]


def test_decisions_from_projections_equal_decisions_from_the_full_objects():
    full = [objects.pod_info(p) for p, _ in TABLE.values()]
    infos = [c.info for c in projected()]
    assert infos == full
    for metrics in ([cpu_util(50)], [pods_metric("100m")]):
        inputs = {name: DecisionInput(spec=spec(metrics), current_replicas=6, status_replicas=6, pods=pods,
                                      readings=[PodReading(SAMPLES)], now=NOW)
                  for name, pods in (("projected", infos), ("full", full))}
        assert decide(inputs["projected"]) == decide(inputs["full"])
    # Pods metric, by hand (GetMetricReplicas): 4 ready pods average 700/4 = 175m against 100m (ratio
    # 1.75, up); the missing pod and the Pending one count as 0: 700/6 = 116m, ratio 1.16, ceil(1.16 * 6) = 7
    decision = decide(DecisionInput(spec=spec([pods_metric("100m")]), current_replicas=6, status_replicas=6,
                                    pods=infos, readings=[PodReading(SAMPLES)], now=NOW))
    assert decision.desired_replicas == 7


def test_an_autoscaler_is_kept_without_what_nothing_reads():
    obj = {
        "apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7", "generation": 3,
                     "creationTimestamp": "2026-01-01T00:00:00Z", "labels": {"team": "a"},
                     "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{...}" * 100,
                                     "promscaler.io/paused-replicas": "2"},
                     "managedFields": [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]},
        "spec": {"maxReplicas": 5}, "status": {"currentReplicas": 2},
    }
    assert cached_autoscaler(obj).object() == slim_autoscaler(obj) == {
        "apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
        "metadata": {"name": "web", "namespace": "shop", "uid": "u1", "resourceVersion": "7", "generation": 3,
                     "annotations": {"promscaler.io/paused-replicas": "2"}},
        "spec": {"maxReplicas": 5}, "status": {"currentReplicas": 2},
    }
