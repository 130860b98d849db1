"""Valid scenario documents (full form) for the simulate tests, built in code so each test
can change one field."""

from __future__ import annotations

import copy
from typing import Any

NOW = "2026-01-01T00:10:00Z"


def pod(name: str, app: str = "web", phase: str = "Running", ready: str = "True", cpu: str = "500m",
        start: str = "2026-01-01T00:00:00Z") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default", "labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": cpu}}}]},
            "status": {"phase": phase, "startTime": start,
                       "conditions": [{"type": "Ready", "status": ready,
                                       "lastTransitionTime": "2026-01-01T00:00:20Z"}]}}


def usage(name: str, cpu: str, container: str = "app") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "timestamp": "2026-01-01T00:09:45Z", "window": "30s",
            "containers": [{"name": container, "usage": {"cpu": cpu}}]}


def hpa(metrics: list[dict[str, Any]], min_r: int = 1, max_r: int = 10, behavior: dict | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                            "minReplicas": min_r, "maxReplicas": max_r, "metrics": metrics}
    if behavior is not None:
        spec["behavior"] = behavior
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"}, "spec": spec}


def scenario(metrics: list[dict[str, Any]], replicas: int, pods: list[dict[str, Any]], readings: dict[str, Any],
             **extra: Any) -> dict[str, Any]:
    doc = {"now": NOW, "hpa": hpa(metrics), "scaleTarget": {"spec": {"replicas": replicas},
                                                            "status": {"replicas": replicas, "selector": "app=web"}},
           "pods": pods, "metrics": readings}
    doc.update(extra)
    return doc


CPU_50 = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
APP_CPU_50 = {"type": "ContainerResource", "containerResource": {
    "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 50}}}
RPS = {"type": "Pods", "pods": {"metric": {"name": "http_requests"},
                                 "target": {"type": "AverageValue", "averageValue": "500m"}}}
QUEUE = {"type": "External", "external": {"metric": {"name": "queue_messages_ready",
                                                     "selector": {"matchLabels": {"queue": "worker_tasks"}}},
                                          "target": {"type": "AverageValue", "averageValue": "30"}}}
HITS = {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "web"},
                                     "metric": {"name": "hits"}, "target": {"type": "Value", "value": "10"}}}


def rps(name: str, value: str) -> dict[str, Any]:
    return {"describedObject": {"kind": "Pod", "name": name, "namespace": "default", "apiVersion": "/v1"},
            "metricName": "http_requests", "timestamp": "2026-01-01T00:09:50Z", "value": value}


def valid_scenarios() -> list[dict[str, Any]]:
    """One scenario per metric type, each with an `expect:` block worked by hand in its comment."""
    three = [pod("web-1"), pod("web-2"), pod("web-3")]
    return copy.deepcopy([
        # CPU: 750m of 500m = 150% vs 50% -> ratio 3 -> ceil(3 x 3) = 9; legacy limit max(6, 4) = 6.
        scenario([CPU_50], 3, three, {"resource": [usage(f"web-{i}", "750m") for i in (1, 2, 3)]},
                 expect={"desiredReplicas": 6, "recommendation": 9}),
        # Pods: 1.5 per pod vs 500m -> ratio 3 -> 9; limit 6.
        scenario([RPS], 3, three, {"custom": [rps(f"web-{i}", "1500m") for i in (1, 2, 3)]},
                 expect={"desiredReplicas": 6, "recommendation": 9}),
        # External AverageValue: 120 / 30 = 4 (status.replicas 2: 120 / 60 = 2, outside tolerance).
        scenario([QUEUE], 2, [pod("web-1"), pod("web-2")], {"external": [
            {"metricName": "queue_messages_ready", "metricLabels": {"queue": "worker_tasks"},
             "timestamp": "2026-01-01T00:09:50Z", "value": "120"}]}, expect={"desiredReplicas": 4}),
        # Object Value: 20 vs 10 -> ratio 2 x 2 ready pods = 4.
        scenario([HITS], 2, [pod("web-1"), pod("web-2")], {"custom": [
            {"describedObject": {"kind": "Service", "name": "web", "namespace": "default", "apiVersion": "/v1"},
             "metricName": "hits", "timestamp": "2026-01-01T00:09:50Z", "value": "20"}]},
                 expect={"desiredReplicas": 4}),
    ])
