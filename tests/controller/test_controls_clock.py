"""The controller's clock is injectable: a schedule window across the spring-forward gap in
Europe/Berlin, driven through the live controller (kubesim, the fake metrics API, real HTTP)
without waiting for 2026-03-29.

By hand: 02:30 does not exist on 2026-03-29 (02:00 CET -> 03:00 CEST at 01:00 UTC), so the
window "30 2 * * *" with 1h opens at 03:00 CEST = 01:00 UTC and closes at 02:00 UTC. The queue
holds 10 messages, 10 per replica wanted: the metric alone asks 1; the window's floor is 3."""

from __future__ import annotations

from datetime import UTC, datetime

from .conftest import NS, autoscaler, deployment, eventually, external_metric, replicas, running, settings


async def test_schedule_window_on_an_injected_clock_across_spring_forward(sim, fake) -> None:
    sim.apply(deployment("worker", 1))
    fake.external[(NS, "queue_messages_ready")] = [({}, "10")]
    obj = autoscaler("worker", "worker", [external_metric("queue_messages_ready", "10")],
                     behavior={"scaleDown": {"stabilizationWindowSeconds": 0}})
    obj["spec"]["schedules"] = [{"name": "gap", "start": "30 2 * * *", "duration": "1h",
                                 "timeZone": "Europe/Berlin", "minReplicas": 3}]
    sim.apply(obj)
    now = [datetime(2026, 3, 29, 0, 59, 0, tzinfo=UTC)]  # 01:59 CET: not yet

    def status() -> dict:
        return (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, "worker") or {}).get("status") or {}

    async with running(sim, settings()) as controller:
        controller.reconciler.clock = lambda: now[0]
        await eventually(lambda: status().get("currentMetrics") and "control" not in status())
        assert replicas(sim, "worker") == 1
        now[0] = datetime(2026, 3, 29, 1, 0, 30, tzinfo=UTC)  # 03:00:30 CEST: open
        await eventually(lambda: replicas(sim, "worker") == 3)
        await eventually(lambda: status().get("control") == "Schedule(gap)")
        now[0] = datetime(2026, 3, 29, 1, 59, 59, tzinfo=UTC)  # 03:59:59 CEST: still open
        await eventually(lambda: controller.reconciler.histories.get(("HorizontalAutoscaler", NS, "worker"))
                         is not None and controller.reconciler.histories[("HorizontalAutoscaler", NS, "worker")]
                         .recommendations[-1].timestamp == now[0])
        assert replicas(sim, "worker") == 3
        now[0] = datetime(2026, 3, 29, 2, 0, 0, tzinfo=UTC)  # 04:00 CEST: closed, the metric's 1
        await eventually(lambda: replicas(sim, "worker") == 1)
        await eventually(lambda: "control" not in status())
