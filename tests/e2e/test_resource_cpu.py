"""CPU autoscaling without metrics-server, end to end: cAdvisor-shaped CPU counters per pod
scraped by a real Prometheus -> the adapter's metrics.k8s.io (prometheus-adapter `resourceRules`)
-> kubesim's aggregation -> the controller's Resource metric (CPU Utilization) -> /scale."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from autoscaler.decision.model import ControllerConfig
from kubesim.apiserver import KubeSim
from kubesim.resourceseries import resource_rules

from .conftest import NS, Exporter, aggregated_world, controller, eventually, syncs

pytestmark = pytest.mark.e2e

# the chart's rules with a window short enough for a test that scales in seconds
RESOURCE_RULES = {"resourceRules": resource_rules("10s")}


class CpuExporter(Exporter):
    """cAdvisor's view of the pods: CPU seconds growing at (total load / ready pods) per pod, and
    a constant working set; `load` maps an app label to the cores it uses in total."""

    def render(self) -> str:
        with self.lock:
            now = time.monotonic()
            dt, self.last = now - self.last, now
            lines = ["# TYPE container_cpu_usage_seconds_total counter"]
            memory = ["# TYPE container_memory_working_set_bytes gauge"]
            for app, total in self.load.items():
                pods = self.ready_pods(app)
                for pod in pods:
                    self.counters[pod] = self.counters.get(pod, 0.0) + total / len(pods) * dt
                    labels = f'namespace="{NS}",pod="{pod}",container="app"'
                    lines.append(f"container_cpu_usage_seconds_total{{{labels}}} {self.counters[pod]:.6f}")
                    memory.append(f"container_memory_working_set_bytes{{{labels}}} {64 * 1024 * 1024}")
            return "\n".join(lines + memory) + "\n"


@pytest.fixture
def cpu_world() -> Iterator[tuple[KubeSim, CpuExporter]]:
    """The adapter aggregated as metrics.k8s.io (kubesim's own metrics.k8s.io is then out of the way)."""
    with aggregated_world(CpuExporter, RESOURCE_RULES, ("metrics.k8s.io",), "--query-cache-ttl", "0s") as w:
        yield w


def deployment(name: str, replicas: int) -> dict:
    labels = {"app": name}
    container = {"name": "app", "image": "app:1", "resources": {"requests": {"cpu": "100m"}}}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": NS},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}}}


def replicas(sim: KubeSim, name: str) -> int:
    deployment = sim.get("apps/v1", "Deployment", NS, name)
    assert deployment is not None, f"Deployment {NS}/{name} is gone"
    return deployment["spec"]["replicas"]


def utilization(sim: KubeSim, name: str, kind: str = "Resource") -> int | None:
    status = (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, name) or {}).get("status") or {}
    for m in status.get("currentMetrics") or []:
        if m.get("type") == kind:
            return m["resource" if kind == "Resource" else "containerResource"]["current"].get("averageUtilization")
    return None


async def test_cpu_utilization_scales_a_deployment_from_prometheus_numbers(cpu_world):
    sim, exporter = cpu_world
    sim.apply(deployment("cpu", 2))
    exporter.load["cpu"] = 0.3  # 300m in total; 100m requested per pod, target 50%: 6 pods
    target = {"type": "Utilization", "averageUtilization": 50}
    metrics = [{"type": "Resource", "resource": {"name": "cpu", "target": target}},  # the pod's containers summed
               {"type": "ContainerResource",
                "containerResource": {"name": "cpu", "container": "app", "target": target}}]
    sim.apply({"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
               "metadata": {"name": "cpu", "namespace": NS},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "cpu"},
                        "minReplicas": 1, "maxReplicas": 10, "metrics": metrics}})
    config = ControllerConfig(downscale_stabilization_window=5.0, cpu_initialization_period=300.0)
    async with controller(sim, config=config) as ctl:
        await eventually(lambda: replicas(sim, "cpu") >= 6, timeout=90)

        def settled() -> bool:
            u, c = utilization(sim, "cpu"), utilization(sim, "cpu", "ContainerResource")
            return replicas(sim, "cpu") == 6 and all(v is not None and abs(v - 50) <= 5 for v in (u, c))

        await eventually(settled, timeout=60)
        synced = syncs(ctl)
        await eventually(lambda: syncs(ctl) >= synced + 3)  # several more syncs: it stays where each pod
        assert replicas(sim, "cpu") == 6                    # is at its target

        def prometheus_agrees() -> bool:  # the per-pod rates, asked of Prometheus directly
            pods = exporter.ready_pods("cpu")
            query = f'rate(container_cpu_usage_seconds_total{{pod=~"{"|".join(pods)}"}}[10s])'
            body = httpx.get(f"{exporter.prometheus_url}/api/v1/query", params={"query": query}, timeout=10).json()
            rates = [float(r["value"][1]) for r in body["data"]["result"]]
            return len(rates) == 6 and abs(sum(rates) / 6 / 0.1 - 0.5) <= 0.05

        await eventually(prometheus_agrees, timeout=20)
        assert replicas(sim, "cpu") == 6
    reasons = [e["reason"] for e in sim.list("v1", "Event", NS) if e["involvedObject"]["name"] == "cpu"]
    assert "SuccessfulRescale" in reasons
