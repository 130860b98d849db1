"""A forecast in the loop: a queue whose backlog rises at the same moment of every (compressed,
60 s) season, scraped by a real Prometheus, served with its seasonal forecast by the adapter
(aggregated behind KubeSim), and a HorizontalAutoscaler listing the metric and its forecast with
the same target. The first rise has no history (no forecast): the controller only reacts. The
second rise was seen one season before: the controller has scaled up before it comes."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import httpx
import pytest

from kubesim.adapterrules import gauge_rule
from kubesim.apiserver import KubeSim

from .conftest import NS, Exporter, aggregated_world, controller, eventually
from .test_used_by import deployment, replicas

pytestmark = pytest.mark.e2e

SEASON, RISE, FALL = 60.0, 35.0, 50.0  # each season: 10 messages, 100 from RISE to FALL
HORIZON = 15.0  # the forecast rises HORIZON before the rise of one season before
LOW, HIGH = 10, 100  # 10 messages per replica wanted: 1 replica, then 10
RULES = {"externalRules": [{
    **gauge_rule('queue_messages_ready{queue!=""}', ("namespace",)),
    "forecast": {"method": "seasonal", "season": f"{SEASON:g}s", "horizon": f"{HORIZON:g}s", "levelWindow": "10s",
                 "resolution": "1s"},
}]}


@pytest.fixture
def world() -> Iterator[tuple[KubeSim, Exporter]]:
    with aggregated_world(Exporter, RULES, ("external.metrics.k8s.io",),
                          "--metrics-relist-interval", "1s", "--metrics-max-age", "30s") as w:
        yield w


def queue_metric(name: str) -> dict:
    return {"type": "External", "external": {
        "metric": {"name": name, "selector": {"matchLabels": {"queue": "jobs"}}},
        "target": {"type": "AverageValue", "averageValue": "10"}}}


async def test_controller_scales_ahead_of_a_rise_seen_one_season_before(world):
    sim, exporter = world
    sim.apply(deployment("jobs", 1))
    sim.apply({"apiVersion": "promscaler.io/v1alpha1", "kind": "HorizontalAutoscaler",
               "metadata": {"name": "jobs", "namespace": NS},
               "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "jobs"},
                        "minReplicas": 1, "maxReplicas": 10,
                        "metrics": [queue_metric("queue_messages_ready"),
                                    queue_metric("queue_messages_ready_forecast")],
                        "behavior": {"scaleDown": {"stabilizationWindowSeconds": 5},
                                     "scaleUp": {"policies": [{"type": "Pods", "value": 10, "periodSeconds": 15}]}}}})
    exporter.queues["jobs"] = LOW

    def scraped() -> bool:
        body = httpx.get(f"{exporter.prometheus_url}/api/v1/query", params={"query": "queue_messages_ready"}).json()
        return bool(body["data"]["result"])

    await eventually(scraped)
    start = time.monotonic()

    async def until(offset: float) -> None:
        await asyncio.sleep(max(0.0, start + offset - time.monotonic()))

    async with controller(sim):
        await until(RISE)
        first = replicas(sim, "jobs")  # no history yet: nothing foresees the rise
        exporter.queues["jobs"] = HIGH
        await eventually(lambda: replicas(sim, "jobs") == 10)  # the present metric: a reaction
        await until(FALL)
        exporter.queues["jobs"] = LOW
        # down once the forecast exists (the HPA holds scale-downs while a metric is missing) and is low
        await eventually(lambda: replicas(sim, "jobs") == 1, timeout=SEASON + RISE - HORIZON - FALL - 2)
        await until(SEASON + RISE)
        second = replicas(sim, "jobs")  # the same moment one season later
        exporter.queues["jobs"] = HIGH
    assert first == 1
    assert second == 10  # scaled before the rise, on the forecast alone
