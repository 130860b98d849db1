"""`kubectl describe horizontalautoscaler` (kubectl's generic describer for a custom resource)
reads like `kubectl describe hpa`: the real kubectl, against the sandbox, after a live controller
wrote the status and Events. The expected metric lines and conditions come from kubectl itself,
describing a native HPA with the same spec and status."""

from __future__ import annotations

import asyncio
import re

from ..support import kubectl_ok
from .conftest import (
    NS,
    autoscaler,
    deployment,
    events,
    eventually,
    external_metric,
    pods_metric,
    running,
    settings,
    status,
)

HITS = {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "web"},
                                     "metric": {"name": "hits"}, "target": {"type": "Value", "value": "10"}}}
HITS_AVG = {"type": "Object", "object": {"describedObject": {"apiVersion": "v1", "kind": "Service", "name": "web"},
                                         "metric": {"name": "hits"},
                                         "target": {"type": "AverageValue", "averageValue": "5"}}}
CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}
MEMORY = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue",
                                                                        "averageValue": "200Mi"}}}
APP_CPU = {"type": "ContainerResource", "containerResource": {
    "name": "cpu", "container": "app", "target": {"type": "Utilization", "averageUtilization": 50}}}
QUEUE_VALUE = {"type": "External", "external": {"metric": {"name": "queue"},
                                                "target": {"type": "Value", "value": "100"}}}


def describe(sim, *what: str) -> str:
    return kubectl_ok(sim.kubeconfig_path, "describe", *what, "-n", NS)


def section(text: str, start: str, end: str) -> list[str]:
    """The lines between a line starting with `start` and the next one starting with `end`."""
    lines = text.splitlines()
    i = next(n for n, line in enumerate(lines) if line.startswith(start))
    j = next(n for n in range(i + 1, len(lines)) if lines[n].startswith(end))
    return lines[i + 1:j]


def words(line: str) -> str:
    return re.sub(r"\s+", " ", line).strip()


async def test_describe_shows_metrics_conditions_and_only_its_events(sim, fake):
    sim.apply(deployment("web", 1))
    await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 1)
    for pod in sim.list("v1", "Pod", NS):
        sim.set_pod_usage(NS, pod["metadata"]["name"], {"app": {"cpu": "300m", "memory": "150Mi"}})
    fake.pods[(NS, "http_requests")] = lambda names: f"{1000 // len(names)}m"  # 1 req/s in all: 2 pods at 500m
    fake.external[(NS, "queue")] = [({"q": "a"}, "60")]
    fake.objects[(NS, "services", "web", "hits")] = "10"
    metrics = [pods_metric("http_requests", "500m"), external_metric("queue", "30", {"q": "a"}), QUEUE_VALUE, HITS,
               HITS_AVG, CPU, MEMORY, APP_CPU, external_metric("gone", "1")]  # `gone`: no such metric, <unknown>
    sim.apply(autoscaler("web", "web", metrics))
    sim.apply(deployment("api", 2))
    fake.pods[(NS, "rps")] = "1500m"
    sim.apply(autoscaler("api", "api", [pods_metric("rps", "500m")]))
    async with running(sim, settings()):
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 2
                         and any(e[1] == "SuccessfulRescale" for e in events(sim, "api")))
    ours = sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "web")
    # the same spec and status on a native HPA, which kubectl describes with its own HPA describer
    hpa_status = {k: v for k, v in ours["status"].items() if k not in ("reference", "targets", "metrics")}
    sim.apply({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
               "metadata": {"name": "web", "namespace": NS}, "spec": ours["spec"], "status": hpa_status})
    native = await asyncio.to_thread(describe, sim, "hpa", "web")
    text = await asyncio.to_thread(describe, sim, "horizontalautoscaler", "web")

    expected = [words(line) for line in section(native, "Metrics:", "Min replicas:")]
    assert len(expected) == len(metrics) and any("<unknown>" in line for line in expected)
    of_status = text[text.index("\nStatus:"):]
    assert [words(line) for line in section(of_status, "  Metrics:", "  Observed Generation:")] == expected

    table = section(native, "Conditions:", "Events:")[2:]  # under the Type Status Reason Message heading
    want = {tuple(words(row).split(" ")[:3]) for row in table}
    got = section(of_status, "  Conditions:", "  Current Metrics:")
    fields = {k: [words(line).split(": ", 1)[1] for line in got if words(line).startswith(f"{k}:")]
              for k in ("Type", "Status", "Reason")}
    assert set(zip(fields["Type"], fields["Status"], fields["Reason"], strict=True)) == want
    pods = words(next(line for line in native.splitlines() if line.startswith("Deployment pods:")))
    current, desired = re.findall(r"\d+", pods)
    assert f"Current Replicas: {current}" in words(text) and f"Desired Replicas: {desired}" in words(text)

    shown = section(text + "\n<end>", "Events:", "<end>")
    assert any("SuccessfulRescale" in line and "New size: 2" in line and "promscaler-autoscaler" in line
               for line in shown), text
    assert any("FailedGetExternalMetric" in line and "Warning" in line for line in shown)
    # the describer's field selector (involvedObject kind, name, namespace, uid) leaves api's out
    theirs = [e[2] for e in events(sim, "api")]
    assert theirs and not [line for line in shown if any(message in line for message in theirs)], shown
