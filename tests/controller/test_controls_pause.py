"""A pause annotation is acted on at once, not at the next periodic sync: annotations change no
generation, so the controller watches them itself (kubectl annotate against kubesim, the fake
metrics API). The sync period here is 10 minutes: only the annotation's own event can explain a
prompt scale."""

from __future__ import annotations

from ..support import kubectl_ok
from .conftest import NS, autoscaler, deployment, eventually, external_metric, replicas, running, settings


def annotate(sim, *args: str) -> None:
    kubectl_ok(sim.kubeconfig_path, "-n", NS, "annotate", "--overwrite", "has", "worker", *args)


async def test_pause_annotations_take_effect_without_waiting_for_the_sync_period(sim, fake) -> None:
    sim.apply(deployment("worker", 2))
    fake.external[(NS, "queue_messages_ready")] = [({}, "20")]  # 20 / 10 = 2: stays at 2
    sim.apply(autoscaler("worker", "worker", [external_metric("queue_messages_ready", "10")]))

    def status() -> dict:
        return (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "worker") or {}).get("status") or {}

    async with running(sim, settings(sync_period=600.0)):
        await eventually(lambda: status().get("currentMetrics"))
        annotate(sim, "promscaler.io/paused-replicas=4")
        await eventually(lambda: replicas(sim, "worker") == 4, timeout=30)
        await eventually(lambda: status().get("control") == "Paused(4)", timeout=30)
        annotate(sim, "promscaler.io/paused-replicas-")
        # resumed at once: the metrics decide again (a first sync, which records the current 4 as its
        # recommendation, as a restarted HPA controller does; the next periodic sync would go to 2)
        await eventually(lambda: "control" not in status() and status().get("currentMetrics"), timeout=30)
        assert {c["type"]: c["reason"] for c in status()["conditions"]}["ScalingActive"] == "ValidMetricFound"
