"""The opt-in controls live (docs/controls.md): KubeSim + a real Prometheus scraping the test
exporter + the real adapter aggregated as the external metrics API + the controller, 1 s syncs.

Expected counts come from the rules as documented and the HPA's arithmetic by hand
(ceil(queue / 10 per replica)); the metric values are asked of Prometheus directly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from promscaler.times import parse_time

from ..support import kubectl_ok
from .conftest import NS, controller, eventually, syncs
from .test_used_by import deployment, replicas

pytestmark = pytest.mark.e2e

QUEUE = {"type": "External", "external": {
    "metric": {"name": "queue_messages_ready", "selector": {"matchLabels": {"queue": "jobs"}}},
    "target": {"type": "AverageValue", "averageValue": "10"}}}
FAST_DOWN = {"scaleDown": {"stabilizationWindowSeconds": 0}}


def autoscaler(name: str, metric: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    body = {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": 1, "maxReplicas": 10, "metrics": [metric or QUEUE], "behavior": FAST_DOWN}
    body.update(spec)
    return {"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
            "metadata": {"name": name, "namespace": NS}, "spec": body}


def status(sim: Any, name: str) -> dict[str, Any]:
    return (sim.get("promscaler.io/v1alpha1", "HorizontalAutoscaler", NS, name) or {}).get("status") or {}


def condition(sim: Any, name: str, ctype: str) -> dict[str, Any]:
    return next((c for c in status(sim, name).get("conditions") or () if c.get("type") == ctype), {})


def kubectl(sim: Any, *args: str) -> str:
    return kubectl_ok(sim.kubeconfig_path, "-n", NS, *args)


def prometheus_queue(exporter: Any) -> float | None:
    """The backlog as Prometheus has it (the independent source)."""
    body = httpx.get(f"{exporter.prometheus_url}/api/v1/query",
                     params={"query": 'sum(queue_messages_ready{queue="jobs"})'}, timeout=10).json()
    result = body["data"]["result"]
    return float(result[0]["value"][1]) if result else None


def events(sim: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in sim.list("v1", "Event", NS) if e["involvedObject"]["name"] == name]


def metric(c: Any, name: str) -> float:
    """A sample of the controller's /metrics registry."""
    value = c.telemetry.registry.get_sample_value(name)
    assert value is not None, name
    return value


async def settle_queue(exporter: Any, value: float) -> None:
    exporter.queues["jobs"] = value
    await eventually(lambda: prometheus_queue(exporter) == value)


async def test_fallback_when_prometheus_stops_then_recovery(world) -> None:
    sim, exporter = world
    exporter.queues["jobs"] = 20.0  # 20 / 10 per replica = 2 replicas
    sim.apply(deployment("worker", 2))
    sim.apply(autoscaler("worker", fallback={"failureThreshold": 3, "replicas": 5}))
    async with controller(sim) as c:
        await eventually(lambda: condition(sim, "worker", "Fallback").get("reason") == "MetricsAvailable")
        assert replicas(sim, "worker") == 2
        prom = exporter.prometheus
        assert prom is not None
        # the start-up syncs may already have fallen back (the adapter had not listed the metric yet)
        entered_before = metric(c, "promscaler_autoscaler_fallbacks_total")
        prom.stop()
        stopped_at = syncs(c)
        await eventually(lambda: replicas(sim, "worker") == 5)
        # at least the 3 failed syncs of the threshold ran meanwhile (the sync that scaled is counted
        # once it ends, after its status write), and the status says so: it is written after the
        # scale, in the same sync, as the HPA controller does
        await eventually(lambda: syncs(c) >= stopped_at + 3)
        await eventually(lambda: status(sim, "worker").get("control") == "Fallback")
        fallback = condition(sim, "worker", "Fallback")
        assert fallback["status"] == "True" and "queue_messages_ready" in fallback["message"]
        assert status(sim, "worker").get("metricFailures", 0) >= 3
        assert status(sim, "worker").get("control") == "Fallback"
        await eventually(lambda: any(e["reason"] == "FallbackActive" for e in events(sim, "worker")))
        warnings = [e for e in events(sim, "worker") if e["reason"] == "FallbackActive"]
        assert warnings and warnings[0]["type"] == "Warning" and "queue_messages_ready" in warnings[0]["message"]
        rescale = [e["message"] for e in events(sim, "worker") if e["reason"] == "SuccessfulRescale"]
        assert any("New size: 5; reason: fallback after 3 syncs without metrics" in m for m in rescale), rescale
        assert "Fallback" in kubectl(sim, "get", "has", "worker")
        assert metric(c, "promscaler_autoscaler_fallbacks_total") == entered_before + 1
        assert metric(c, "promscaler_autoscaler_in_fallback") == 1
        assert metric(c, "promscaler_autoscaler_fallback_syncs_total") >= 1
        # Prometheus back on the same port: the metrics decide again (2 replicas), the fallback clears
        prom.start()
        await eventually(lambda: replicas(sim, "worker") == 2, timeout=90)
        await eventually(lambda: condition(sim, "worker", "Fallback").get("reason") == "MetricsAvailable")
        assert "metricFailures" not in status(sim, "worker") and "control" not in status(sim, "worker")
        assert metric(c, "promscaler_autoscaler_in_fallback") == 0
        assert metric(c, "promscaler_autoscaler_fallbacks_total") == entered_before + 1


async def test_paused_autoscaler_holds_through_a_spike_and_resumes(world) -> None:
    sim, exporter = world
    exporter.queues["jobs"] = 20.0
    sim.apply(deployment("worker", 2))
    sim.apply(autoscaler("worker"))
    async with controller(sim) as c:
        await eventually(lambda: status(sim, "worker").get("currentMetrics") and replicas(sim, "worker") == 2)
        kubectl(sim, "annotate", "has", "worker", "promscaler.io/paused=true")
        await eventually(lambda: condition(sim, "worker", "Paused").get("status") == "True")
        await settle_queue(exporter, 80.0)  # the spike: 80 / 10 = 8 replicas if it were not paused
        synced = syncs(c)
        await eventually(lambda: syncs(c) >= synced + 5)
        assert replicas(sim, "worker") == 2
        assert "Paused" in kubectl(sim, "get", "has", "worker")
        assert metric(c, "promscaler_autoscaler_paused") == 1 and metric(c, "promscaler_autoscaler_pauses_total") == 1
        # paused-replicas: to 4, and held there through the spike
        kubectl(sim, "annotate", "has", "worker", "promscaler.io/paused-replicas=4")
        await eventually(lambda: replicas(sim, "worker") == 4)
        synced = syncs(c)
        await eventually(lambda: syncs(c) >= synced + 5)
        assert replicas(sim, "worker") == 4
        assert condition(sim, "worker", "Paused")["reason"] == "PausedAtReplicas"
        # resumed: the metrics decide, 8 replicas
        kubectl(sim, "annotate", "has", "worker", "promscaler.io/paused-", "promscaler.io/paused-replicas-")
        await eventually(lambda: replicas(sim, "worker") == 8)
        await eventually(lambda: not condition(sim, "worker", "Paused"))  # the status follows the scale
        assert metric(c, "promscaler_autoscaler_paused") == 0


async def test_a_schedule_window_raises_the_floor_on_time_and_releases_it(world) -> None:
    """A window of 20 s added once the autoscaler runs, opening 15 s later, written in
    Europe/Berlin's local time with a seconds field (6-field cron): the floor 3 holds while it is
    open, then the metric's 1 again."""
    sim, exporter = world
    exporter.queues["jobs"] = 10.0  # 10 / 10 = 1 replica
    sim.apply(deployment("worker", 1))
    sim.apply(autoscaler("worker"))
    async with controller(sim):
        await eventually(lambda: status(sim, "worker").get("currentMetrics"))
        assert replicas(sim, "worker") == 1
        opens = (datetime.now(UTC) + timedelta(seconds=15)).replace(microsecond=0)
        closes = opens + timedelta(seconds=20)
        local = opens.astimezone(ZoneInfo("Europe/Berlin"))
        start = f"{local.second} {local.minute} {local.hour} {local.day} {local.month} *"
        sim.apply(autoscaler("worker", schedules=[{"name": "burst", "start": start, "duration": "20s",
                                                   "timeZone": "Europe/Berlin", "minReplicas": 3}]))
        await eventually(lambda: replicas(sim, "worker") == 3, timeout=60)
        # the status is written after the scale, in the same sync
        await eventually(lambda: status(sim, "worker").get("control") == "Schedule(burst)")
        raised_at = parse_time(status(sim, "worker")["lastScaleTime"])
        assert raised_at >= opens  # not before the window opened
        await eventually(lambda: replicas(sim, "worker") == 1, timeout=60)
        await eventually(lambda: "control" not in status(sim, "worker"))
        released_at = parse_time(status(sim, "worker")["lastScaleTime"])
        assert released_at >= closes  # held until the window closed


async def test_queue_worker_at_zero_starts_only_above_the_activation_value(world) -> None:
    sim, exporter = world
    exporter.queues["jobs"] = 0.0
    sim.apply(deployment("worker", 1))
    metric = {**QUEUE, "activationThreshold": "5"}
    sim.apply(autoscaler("worker", metric, minReplicas=0))
    async with controller(sim) as c:
        await eventually(lambda: replicas(sim, "worker") == 0)  # an empty queue: scaled to zero
        await settle_queue(exporter, 3.0)  # the HPA alone would start ceil(3 / 10) = 1 replica
        synced = syncs(c)
        await eventually(lambda: syncs(c) >= synced + 5)
        assert replicas(sim, "worker") == 0
        assert condition(sim, "worker", "ScaledToZero").get("status") == "True"
        await settle_queue(exporter, 8.0)  # above the activation value 5: start
        await eventually(lambda: replicas(sim, "worker") == 1)
        await settle_queue(exporter, 35.0)  # above zero the target decides: ceil(35 / 10) = 4
        await eventually(lambda: replicas(sim, "worker") == 4)
        await settle_queue(exporter, 0.0)  # every metric at or below its activation value: back to zero
        await eventually(lambda: replicas(sim, "worker") == 0)


async def test_explain_shows_the_control_in_force(world, tmp_path) -> None:
    """`autoscaler explain` reads the live moment: a window open now (a start every minute, open for
    an hour) sets the floor 3 over the metric's 1; with the pause annotation the pause decides."""
    import asyncio
    import io
    import json

    from autoscaler.explain import cli
    from autoscaler.simulate import cli as simulate_cli

    sim, exporter = world
    await settle_queue(exporter, 10.0)  # 10 / 10 = 1 replica
    sim.apply(deployment("worker", 1))
    sim.apply(autoscaler("worker", schedules=[{"name": "always", "start": "* * * * *", "duration": "1h",
                                               "minReplicas": 3}]))

    async def explain(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        code = await asyncio.to_thread(cli.main, ["worker", "-n", NS, "--kubeconfig", sim.kubeconfig_path, *args],
                                       out, err)
        return code, out.getvalue(), err.getvalue()

    code, out, err = await explain("-o", "json")
    assert code == 0, err
    decision = json.loads(out)["decision"]
    assert decision["desiredReplicas"] == 3 and decision["controls"]["schedule"] == "always"
    code, out, _ = await explain()
    assert "schedule always is open" in out and "control in force: Schedule(always)" in out
    kubectl(sim, "annotate", "has", "worker", "promscaler.io/paused-replicas=2")
    capture = tmp_path / "paused.yaml"
    code, out, err = await explain("-o", "json", "--capture", str(capture))
    assert code == 0, err
    decision = json.loads(out)["decision"]
    assert decision["desiredReplicas"] == 2 and decision["controls"]["control"] == "Paused(2)"
    # the capture replays offline with the annotation
    replay = io.StringIO()
    assert simulate_cli.main(["--check", str(capture)], replay, io.StringIO()) == 0, replay.getvalue()
    kubectl(sim, "annotate", "--overwrite", "has", "worker", "promscaler.io/paused-replicas=lots")
    code, _, err = await explain()
    assert code == 1 and "promscaler.io/paused-replicas" in err and len(err.strip().splitlines()) == 1
