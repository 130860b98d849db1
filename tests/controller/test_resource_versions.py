"""Which metrics.k8s.io version the controller's resource metrics client asks (issue 36): v1 when
the group serves it, whatever version the group prefers, else v1beta1 (a 1.36 cluster, an adapter
registering only v1beta1) -- the cases of Kubernetes' versioned resource metrics client
(pkg/controller/podautoscaler/metrics/resource_client_test.go), here through kubesim routing the
registered versions as APIServices to a real HTTP upstream."""

from __future__ import annotations

import pytest
import yaml

from kubesim.apiserver import KubeSim

from .conftest import NS, ROOT, autoscaler, deployment, eventually, pods_matching, replicas, running, settings, status
from .fakemetrics import FakeMetrics

CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}


@pytest.mark.parametrize(("registered", "asked"), [
    (("v1", "v1beta1"), "v1"),  # prefers v1 when both are served
    (("v1beta1", "v1"), "v1"),  # prefers v1 even when the group prefers v1beta1
    (("v1",), "v1"),  # v1 the only version served
    (("v1beta1",), "v1beta1"),  # falls back to v1beta1 when v1 is not served
])
async def test_resource_metrics_version(sim: KubeSim, registered: tuple[str, ...], asked: str) -> None:
    upstream = FakeMetrics(lambda ns, sel: pods_matching(sim, ns, sel)).start()
    try:
        sim.set_aggregated_api("metrics.k8s.io", upstream.url, versions=registered)
        sim.apply(deployment("web", 2))  # each pod requests 500m cpu
        await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 2)
        for pod in sim.list("v1", "Pod", NS):  # 100% of the request, target 50%: 2 -> 4
            upstream.usage[NS, pod["metadata"]["name"]] = {"app": {"cpu": "500m", "memory": "100Mi"}}
        sim.apply(autoscaler("web", "web", [CPU]))
        async with running(sim, settings()):
            await eventually(lambda: replicas(sim, "web") == 4)
        assert upstream.resource_versions_asked == {asked}
    finally:
        sim.set_aggregated_api("metrics.k8s.io", None)
        upstream.stop()


async def test_a_version_no_longer_registered_is_chosen_again(sim: KubeSim) -> None:
    """The adapter rolled back to one registering only v1beta1: the read of v1 is a 404 (not an
    outage), and the next sync chooses again, well within the 60 s the choice is otherwise kept."""
    upstream = FakeMetrics(lambda ns, sel: pods_matching(sim, ns, sel)).start()

    def use(cpu: str) -> None:
        for pod in sim.list("v1", "Pod", NS):
            upstream.usage[NS, pod["metadata"]["name"]] = {"app": {"cpu": cpu, "memory": "100Mi"}}

    try:
        sim.set_aggregated_api("metrics.k8s.io", upstream.url)  # v1 and v1beta1
        sim.apply(deployment("web", 1))
        await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 1)
        use("500m")  # 100% of the request, target 50%: 1 -> 2
        sim.apply(autoscaler("web", "web", [CPU]))
        async with running(sim, settings()):
            await eventually(lambda: replicas(sim, "web") == 2)
            assert upstream.resource_versions_asked == {"v1"}
            sim.set_aggregated_api("metrics.k8s.io", upstream.url, versions=("v1beta1",))
            await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 2)
            use("1")  # 200%: up again (8 wanted, as fast as the scale-up policies allow)
            await eventually(lambda: replicas(sim, "web") > 2)
        assert upstream.resource_versions_asked == {"v1", "v1beta1"}
    finally:
        sim.set_aggregated_api("metrics.k8s.io", None)
        upstream.stop()


async def test_no_resource_metrics_api_says_so() -> None:
    """A cluster without metrics.k8s.io (no metrics-server, no adapter serving resourceRules): the
    condition says what the HPA's does, `unable to fetch metrics from resource metrics API: no
    resource metrics API (metrics.k8s.io) registered`."""
    with KubeSim(ready_delay=0.0, metrics_api=False) as sim:
        sim.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        sim.apply(deployment("web", 2))
        sim.apply(autoscaler("web", "web", [CPU]))

        def failed() -> str | None:
            conditions = {c["type"]: c for c in status(sim, "web").get("conditions") or []}
            active = conditions.get("ScalingActive")
            return active["message"] if active and active["status"] == "False" else None

        async with running(sim, settings()):
            message = await eventually(failed)
        assert message.endswith(
            "unable to fetch metrics from resource metrics API: no resource metrics API (metrics.k8s.io) registered"
        ), message
        assert replicas(sim, "web") == 2


async def test_a_kept_choice_waits_for_no_other_groups_discovery() -> None:
    """A fresh choice is answered at once: a custom metrics discovery that hangs (an adapter
    down) does not hold up every resource metrics read behind it, nor the other way round."""
    import asyncio

    from autoscaler.controller.metrics import MetricsClient

    hang = asyncio.Event()

    class Kube:
        calls: list[str] = []  # noqa: RUF012

        async def get(self, path: str) -> dict:
            self.calls.append(path)
            if path == "/apis/custom.metrics.k8s.io":
                await hang.wait()
            return {"versions": [{"version": "v1"}, {"version": "v1beta1"}]}

    kube = Kube()
    client = MetricsClient(kube, None)  # type: ignore[arg-type]
    assert await client.resource_version() == "v1"
    stuck = asyncio.create_task(client.custom_version())
    await asyncio.sleep(0)
    assert await asyncio.wait_for(client.resource_version(), 1) == "v1"
    assert kube.calls == ["/apis/metrics.k8s.io", "/apis/custom.metrics.k8s.io"]
    hang.set()
    assert await stuck == "v1beta1"
