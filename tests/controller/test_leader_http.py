"""Leader election between two controllers, /healthz /readyz /metrics, and native HPAs in
shadow (dry-run) mode."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from autoscaler.controller.controller import Controller
from promscaler.kubeapi import Kube, load_configuration

from .conftest import NS, autoscaler, deployment, eventually, more_syncs, pods_metric, replicas, settings, status
from .test_reconcile import per_pod

LEASE = dict(leader_elect=True, lease_duration=2.0, renew_deadline=1.5, retry_period=0.2, lease_name="promscaler-test")


@dataclass
class Instances:
    """Two controllers contending for the test lease, each with its own API client."""

    kubes: list[Kube]
    controllers: list[Controller]
    stops: list[asyncio.Event]
    tasks: list[asyncio.Task] = field(default_factory=list)

    def start(self, i: int) -> None:
        """Run instance `i` until its stop event is set (tasks in the order started)."""
        self.tasks.append(asyncio.create_task(self.controllers[i].run(self.stops[i])))


@contextlib.asynccontextmanager
async def two_instances(sim, lease: dict[str, Any]) -> AsyncIterator[Instances]:
    """Two instances with `lease`'s election settings; on exit all stopped and their clients closed,
    whatever the test did to them."""
    kubes = [Kube(await load_configuration(sim.kubeconfig_path)) for _ in range(2)]
    two = Instances(kubes, [Controller(k, settings(identity=f"instance-{i}", **lease)) for i, k in enumerate(kubes)],
                    [asyncio.Event(), asyncio.Event()])
    try:
        yield two
    finally:
        for s in two.stops:
            s.set()
        await asyncio.gather(*two.tasks, return_exceptions=True)
        for k in kubes:
            await k.close()


async def test_two_instances_elect_one_leader_and_the_other_takes_over(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with two_instances(sim, LEASE) as two:
        controllers, stops, tasks = two.controllers, two.stops, two.tasks
        two.start(0)
        two.start(1)
        leader = await eventually(lambda: next((c for c in controllers if c.is_leader), None))
        await more_syncs(leader)  # a few sync periods (several retry periods): still one leader, only it syncs
        standby = next(c for c in controllers if c is not leader)
        assert leader.is_leader and not standby.is_leader
        assert leader.syncs > 0 and standby.syncs == 0
        await eventually(lambda: replicas(sim, "web") == 4)
        lease = sim.get("coordination.k8s.io/v1", "Lease", NS, "promscaler-test")
        assert lease["spec"]["holderIdentity"] == leader.settings.identity

        i = controllers.index(leader)
        stops[i].set()  # graceful stop: finishes in-flight syncs, releases the lease
        await asyncio.wait_for(tasks[i], 10)
        await eventually(lambda: standby.is_leader, timeout=10)
        lease = sim.get("coordination.k8s.io/v1", "Lease", NS, "promscaler-test")
        assert lease["spec"]["holderIdentity"] == standby.settings.identity
        assert lease["spec"]["leaseTransitions"] >= 1
        fake.pods[(NS, "http_requests")] = per_pod(4000)  # the new leader acts on new load
        await eventually(lambda: replicas(sim, "web") == 8)
        await eventually(lambda: standby.syncs > 0)


def lease_renewals(sim) -> Callable[[], set[str]]:
    """A poll that collects the distinct renewTimes of the test lease seen so far."""
    seen: set[str] = set()

    def poll() -> set[str]:
        lease = sim.get("coordination.k8s.io/v1", "Lease", NS, "promscaler-test") or {}
        seen.add(str((lease.get("spec") or {}).get("renewTime")))
        return seen

    return poll


async def test_a_partitioned_leader_steps_down_and_the_standby_takes_over_after_the_lease_expires(sim, fake):
    lease = {**LEASE, "lease_duration": 3.0, "renew_deadline": 2.0, "retry_period": 0.3}
    async with two_instances(sim, lease) as two:
        controllers = two.controllers
        two.start(0)
        await eventually(lambda: controllers[0].is_leader)
        two.start(1)
        renewed = lease_renewals(sim)
        # the leader renews twice (two retry periods of the standby's tries): the standby stays standby
        await eventually(lambda: len(renewed()) >= 3, timeout=10)
        assert not controllers[1].is_leader
        loop = asyncio.get_running_loop()
        cut = loop.time()
        await two.kubes[0].close()  # the leader loses the API server: it cannot renew, nor release
        await eventually(lambda: not controllers[0].is_leader, timeout=10)  # steps down after the renew deadline
        await eventually(lambda: controllers[1].is_leader, timeout=10)
        assert loop.time() - cut > 1.5  # the standby waited for the 3 s lease to run out


@contextlib.asynccontextmanager
async def serving(sim, **overrides):
    kube = Kube(await load_configuration(sim.kubeconfig_path))
    controller = Controller(kube, settings(http_port=0, http_host="127.0.0.1", **overrides))
    stop = asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        await eventually(lambda: controller.http_port)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{controller.http_port}") as client:
            yield controller, client
    finally:
        stop.set()
        await asyncio.wait_for(task, 20)
        await kube.close()


async def test_health_ready_and_metrics_endpoints(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "500m")]))
    async with serving(sim) as (_controller, client):
        assert (await client.get("/healthz")).text == "ok"
        assert (await client.get("/readyz")).status_code == 200
        await eventually(lambda: replicas(sim, "web") == 4)
        await eventually(lambda: status(sim, "web").get("currentReplicas") == 4)
        text = (await client.get("/metrics")).text
        assert ('promscaler_horizontalautoscaler_status_desired_replicas{horizontalautoscaler="web",'
                'kind="HorizontalAutoscaler",namespace="default"} 4.0') in text
        assert "promscaler_autoscaler_reconcile_duration_seconds_count" in text
        assert 'workqueue_depth{name="horizontalautoscalers"}' in text
        assert "promscaler_autoscaler_leader 1.0" in text


async def test_native_hpa_dry_run_writes_nothing_and_exports_both_decisions(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = per_pod(2000)
    hpa = autoscaler("web", "web", [pods_metric("http_requests", "500m")], kind="HorizontalPodAutoscaler")
    hpa["status"] = {"currentReplicas": 2, "desiredReplicas": 3}  # what "the cluster's HPA controller" decided
    sim.apply(hpa)
    before = sim.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "web")
    async with serving(sim, dry_run=True, reconcile_native_hpas=True) as (controller, client):
        async def exported() -> str:
            return (await client.get("/metrics")).text

        await eventually(lambda: controller.syncs >= 3)
        text = await exported()
        desired = 'promscaler_autoscaler_shadow_desired_replicas{name="web",namespace="default",source='
        assert desired + '"promscaler"} 4.0' in text
        assert desired + '"cluster"} 3.0' in text
        assert 'promscaler_autoscaler_shadow_disagreement{name="web",namespace="default"} 1.0' in text
    after = sim.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "web")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]  # not even status
    assert replicas(sim, "web") == 2
    assert not [e for e in sim.list("v1", "Event", NS) if e["involvedObject"]["name"] == "web"]
