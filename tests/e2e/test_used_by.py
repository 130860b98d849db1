"""The two used-by cases, end to end: Prometheus -> adapter -> (aggregation) -> controller -> /scale."""

from __future__ import annotations

import httpx
import pytest

from promscaler.quantity import parse_quantity

from .conftest import NS, controller, eventually, syncs

pytestmark = pytest.mark.e2e


def deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels},
                                  "spec": {"containers": [{"name": "app", "image": "app:1"}]}}}}


def autoscaler(name: str, metric: dict, max_replicas: int = 10) -> dict:
    return {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                     "minReplicas": 1, "maxReplicas": max_replicas, "metrics": [metric],
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5}}}}


def replicas(sim, name: str) -> int:
    return sim.get("apps/v1", "Deployment", NS, name)["spec"]["replicas"]


def current_average(sim, name: str) -> float | None:
    status = (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, name) or {}).get("status") or {}
    for m in status.get("currentMetrics") or []:
        current = (m.get("pods") or m.get("external") or {}).get("current") or {}
        if "averageValue" in current:
            return float(parse_quantity(current["averageValue"]))
    return None


async def test_web_scaled_on_per_pod_request_rate_until_near_target(world):
    sim, exporter = world
    sim.apply(deployment("web", 1))
    exporter.load["web"] = 4.0  # 4 req/s in total, spread over the ready pods
    metric = {"type": "Pods",
              "pods": {"metric": {"name": "http_requests"}, "target": {"type": "AverageValue", "averageValue": "1"}}}
    sim.apply(autoscaler("web", metric))
    async with controller(sim) as c:
        await eventually(lambda: replicas(sim, "web") >= 4)

        def settled() -> bool:
            avg = current_average(sim, "web")
            return replicas(sim, "web") == 4 and avg is not None and abs(avg - 1.0) <= 0.1

        await eventually(settled)
        synced = syncs(c)
        await eventually(lambda: syncs(c) >= synced + 3)  # several more syncs: it stays at the size that
        assert replicas(sim, "web") == 4                  # puts each pod at its target

        def prometheus_agrees() -> list[float] | None:  # asked of Prometheus directly, once the window has filled
            rates = _per_pod_rates(world, "web")
            return rates if len(rates) == 4 and abs(sum(rates) / 4 - 1.0) <= 0.1 else None

        await eventually(prometheus_agrees, timeout=15)
        assert replicas(sim, "web") == 4
    reasons = [e["reason"] for e in sim.list("v1", "Event", NS) if e["involvedObject"]["name"] == "web"]
    assert "SuccessfulRescale" in reasons


def _per_pod_rates(world, app: str) -> list[float]:
    """Each ready pod's request rate, asked of Prometheus directly (the independent check)."""
    _, exporter = world
    pods = "|".join(exporter.ready_pods(app))
    query = f'rate(http_requests_total{{pod=~"{pods}"}}[10s])'
    body = httpx.get(f"{exporter.prometheus_url}/api/v1/query", params={"query": query}, timeout=10).json()
    return [float(r["value"][1]) for r in body["data"]["result"]]


async def test_worker_scaled_on_queue_backlog_through_external_metrics(world):
    sim, exporter = world
    sim.apply(deployment("worker", 1))
    exporter.queues["worker_tasks"] = 150  # 30 messages per worker wanted -> 5 workers
    metric = {"type": "External", "external": {
        "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "worker_tasks"}}},
        "target": {"type": "AverageValue", "averageValue": "30"}}}
    sim.apply(autoscaler("worker", metric))
    async with controller(sim):
        await eventually(lambda: replicas(sim, "worker") == 5)
        await eventually(lambda: current_average(sim, "worker") == 30.0)
        exporter.queues["worker_tasks"] = 20  # the backlog drains: one worker is enough
        await eventually(lambda: replicas(sim, "worker") == 1)
    sizes = [e["message"].split(";")[0] for e in sim.list("v1", "Event", NS)
             if e["involvedObject"]["name"] == "worker" and e["reason"] == "SuccessfulRescale"]
    assert sorted(sizes) == ["New size: 1", "New size: 5"]  # up to 5, then down to 1
