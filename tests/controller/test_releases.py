"""The controller loop as the HPA controller of the cluster's Kubernetes release (kube-controller-manager
1.37 against 1.36): the release read from /version or named by --kubernetes-version; a new
autoscaler synced at once (1.37, kubernetes#138294) or after a sync period (1.36); the generations
a status write records (1.37, kubernetes#138228, #138653); a sync deferred until the informer has
seen the controller's own last status write (1.37, kubernetes#139025)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
import yaml
from kubernetes.aio.client.configuration import Configuration

from autoscaler.controller.apihealth import ApiHealth
from autoscaler.controller.cli import build_parser, settings_from_args
from autoscaler.controller.controller import Controller
from autoscaler.controller.reconcile import CR, HPA, _caught_up
from autoscaler.controller.releases import cluster_release, release_of
from autoscaler.decision.kubeversion import CURRENT, KubeVersion
from kubesim.apiserver import KubeSim
from kubesim.net import free_port
from promscaler.kubeapi import Kube, load_configuration

from .conftest import (
    CR_API,
    NS,
    ROOT,
    autoscaler,
    deployment,
    eventually,
    metrics_upstream,
    more_syncs,
    pods_metric,
    running,
    settings,
    status,
)


@pytest.fixture
def sim136():
    with KubeSim(ready_delay=0.0, kube_version="1.36") as s:
        s.apply(yaml.safe_load((ROOT / "apiservice/horizontalautoscaler-crd.yaml").read_text()))
        yield s


def test_release_of_a_version_answer():
    # kube-apiserver's version.Info as managed clusters report it: the minor may carry a "+"
    assert release_of({"major": "1", "minor": "37+", "gitVersion": "v1.37.2-gke.1100"}) == KubeVersion(1, 37)
    assert release_of({"major": "1", "minor": "36+", "gitVersion": ""}) == KubeVersion(1, 36)
    with pytest.raises(ValueError):
        release_of({"major": "", "minor": ""})


def test_a_cache_has_caught_up_with_a_write_at_or_after_its_resource_version():
    # client-go's isStoreReady: numbers compared as numbers (etcd revisions), other versions only equal
    assert _caught_up("10", "9") and _caught_up("10", "10") and not _caught_up("9", "10")
    assert not _caught_up("", "10")  # an informer that has not listed yet
    assert _caught_up("a1", "a1") and not _caught_up("a2", "a1")


def test_the_flag_names_a_release():
    parse = build_parser().parse_args
    assert settings_from_args(parse([])).kube_version is None  # the cluster's own
    assert settings_from_args(parse(["--kubernetes-version", "v1.36.3"])).kube_version == KubeVersion(1, 36)


async def test_the_controller_follows_the_clusters_release(sim, sim136, fake):
    async with running(sim136, settings()) as controller:
        await eventually(lambda: controller.ready())
        assert controller.release == KubeVersion(1, 36)
        assert controller.reconciler.config.kube_version == KubeVersion(1, 36)  # what every decision reads
    async with running(sim, settings()) as controller:
        await eventually(lambda: controller.ready())
        assert controller.release == KubeVersion(1, 37)
    async with running(sim136, settings(kube_version=KubeVersion(1, 37))) as controller:  # the flag wins
        await eventually(lambda: controller.ready())
        assert controller.reconciler.config.kube_version == KubeVersion(1, 37)


def _two_autoscalers(sim: KubeSim, fake) -> None:
    for name in ("a", "b"):
        sim.apply(deployment(name, 2))
        sim.apply(autoscaler(name, name, [pods_metric("http_requests", "1")]))
    fake.pods[(NS, "http_requests")] = "1"


def _pause(sim: KubeSim, name: str) -> None:
    obj = sim.get(*CR_API, NS, name)
    obj["metadata"].setdefault("annotations", {})["promscaler.io/paused"] = "true"
    sim.apply(obj)


async def test_1_37_syncs_a_new_autoscaler_at_once(sim, fake):
    _two_autoscalers(sim, fake)
    async with running(sim, settings(sync_period=3600.0, workers=1)):  # no resync within the test
        await eventually(lambda: status(sim, "a").get("currentReplicas") == 2)
        await eventually(lambda: status(sim, "b").get("currentReplicas") == 2)


async def test_1_36_syncs_a_new_autoscaler_after_a_sync_period(sim136, fake):
    _two_autoscalers(sim136, fake)
    async with running(sim136, settings(sync_period=3600.0, workers=1)) as controller:
        asked: list[tuple[Any, float]] = []
        add_after = controller.queue.add_after
        controller.queue.add_after = lambda key, delay: (asked.append((key, delay)), add_after(key, delay))[1]
        await eventually(lambda: controller.ready())
        # a pause is promscaler's own control and acts at once: b is synced; a, created (and seen by
        # the informer) before b was paused, is queued behind one worker yet still has no status
        _pause(sim136, "b")
        await eventually(lambda: status(sim136, "b").get("control") == "Paused")
        assert status(sim136, "a") == {}
        assert ((CR, NS, "a"), 3600.0) in asked  # its first sync: a sync period after it was seen


async def test_1_37_status_records_the_generation_it_observed(sim, fake):
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")], max_replicas=5))
    async with running(sim, settings()):
        st = await eventually(lambda: (s := status(sim, "web")).get("conditions") and s)
        assert st["observedGeneration"] == 1
        assert {c["type"]: c["observedGeneration"] for c in st["conditions"]} == \
            {"AbleToScale": 1, "ScalingActive": 1, "ScalingLimited": 1}
        sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")], max_replicas=6))
        assert sim.get(*CR_API, NS, "web")["metadata"]["generation"] == 2
        st = await eventually(lambda: (s := status(sim, "web")).get("observedGeneration") == 2 and s)
        assert {c["observedGeneration"] for c in st["conditions"]} == {2}


async def test_1_36_status_records_no_generation(sim136, fake):
    sim136.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    sim136.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")], max_replicas=5))
    async with running(sim136, settings()) as controller:
        st = await eventually(lambda: (s := status(sim136, "web")).get("conditions") and s)
        await more_syncs(controller)
    st = status(sim136, "web")
    assert sim136.get(*CR_API, NS, "web")["metadata"]["generation"] == 1  # there is one to record
    assert "observedGeneration" not in st
    assert not [c for c in st["conditions"] if "observedGeneration" in c]


class Gate:
    """The controller's Kube, with the watch events its informers receive held while `held`."""

    def __init__(self, kube) -> None:
        self.kube = kube
        self.held = False
        self.opened = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.kube, name)

    async def watch(self, path: str, query, timeout: float) -> AsyncIterator[Any]:
        async for event in self.kube.watch(path, query, timeout):
            while self.held:
                await self.opened.wait()
            yield event

    def open(self) -> None:
        self.held = False
        self.opened.set()


def _skips(controller) -> float:
    return controller.telemetry.stale_skips.labels(CR)._value.get()


WEB = (CR, NS, "web")


@contextlib.asynccontextmanager
async def _gated(sim: KubeSim, fake) -> AsyncIterator[tuple[Controller, Gate]]:
    """Autoscaler web on its deployment's 2 pods, on target (1 per pod), and a controller that syncs
    it only when asked (a sync period of an hour, one worker), its autoscalers' informer reading
    through a Gate."""
    sim.apply(deployment("web", 2))
    fake.pods[(NS, "http_requests")] = "1"
    sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")], max_replicas=5))
    async with running(sim, settings(sync_period=3600.0, workers=1)) as controller:
        gate = Gate(controller.kube)
        controller.informers[CR].kube = gate  # before the informer's first request (run() has not started)
        yield controller, gate


async def _resync(controller: Controller) -> None:
    """Queue autoscaler web and wait until a sync has run."""
    syncs = controller.syncs
    controller.queue.add(WEB)
    await eventually(lambda: controller.syncs > syncs)


async def test_1_37_defers_a_sync_until_the_cache_has_seen_its_status_write(sim, fake):
    async with _gated(sim, fake) as (controller, gate):
        informer = controller.informers[CR]
        await eventually(lambda: (cached := informer.get((NS, "web"))) and (cached.object().get("status") or {})
                         .get("currentMetrics"))
        gate.held = True
        fake.pods[(NS, "http_requests")] = "900m"  # the next sync writes another status (its currentMetrics)
        await _resync(controller)
        written = sim.get(*CR_API, NS, "web")
        assert controller.reconciler.written[WEB] == written["metadata"]["resourceVersion"]
        assert int(informer.resource_version) < int(written["metadata"]["resourceVersion"])  # not seen yet
        await _resync(controller)  # the next resync comes before the watch delivers our write: deferred
        assert _skips(controller) == 1
        assert sim.get(*CR_API, NS, "web")["metadata"]["resourceVersion"] == written["metadata"]["resourceVersion"]
        gate.open()
        await eventually(lambda: int(informer.resource_version) >= int(written["metadata"]["resourceVersion"]))
        await _resync(controller)
        assert _skips(controller) == 1 and WEB not in controller.reconciler.written  # synced, nothing new to write


async def test_1_36_does_not_wait_for_its_own_writes(sim136, fake):
    async with _gated(sim136, fake) as (controller, gate):
        informer = controller.informers[CR]
        await eventually(lambda: controller.ready())
        gate.held = True
        controller.queue.add(WEB)  # 1.36 queues a new autoscaler a period ahead: this is the resync
        await eventually(lambda: status(sim136, "web").get("currentMetrics"))
        written = sim136.get(*CR_API, NS, "web")["metadata"]["resourceVersion"]
        assert int(informer.resource_version) < int(written)
        await _resync(controller)
        assert _skips(controller) == 0
        gate.open()


@pytest.mark.parametrize("release", ["1.36", "1.37"])
async def test_shadow_mode_follows_the_clusters_own_hpa_controller(release):
    # the shadow compares with kube-controller-manager's decisions: on a 1.36 cluster a new HPA's
    # first sync is a sync period away, as the real controller's is; on 1.37 both sync it at once
    with KubeSim(ready_delay=0.0, kube_version=release) as sim, metrics_upstream(sim) as fake:
        sim.apply(deployment("web", 2))
        fake.pods[(NS, "http_requests")] = "1"
        s = settings(dry_run=True, reconcile_native_hpas=True, sync_period=3600.0, workers=1)
        async with running(sim, s) as controller:
            added: list[Any] = []
            asked: list[tuple[Any, float]] = []
            add, add_after = controller.queue.add, controller.queue.add_after
            controller.queue.add = lambda key: (added.append(key), add(key))[1]
            controller.queue.add_after = lambda key, delay: (asked.append((key, delay)), add_after(key, delay))[1]
            await eventually(lambda: controller.ready())
            assert str(controller.release) == release
            sim.apply(autoscaler("web", "web", [pods_metric("http_requests", "1")], kind="HorizontalPodAutoscaler"))
            key = (HPA, NS, "web")
            await eventually(lambda: controller.informers[HPA].get((NS, "web")) is not None)  # its handler ran
            if release == "1.37":
                assert added == [key]
                await eventually(lambda: controller.syncs >= 1)
            else:
                assert added == [] and asked == [(key, 3600.0)] and controller.syncs == 0
        assert "status" not in sim.get("autoscaling/v2", "HorizontalPodAutoscaler", NS, "web")  # nothing written


@contextlib.asynccontextmanager
async def _started_while_away(sim: KubeSim) -> AsyncIterator[Controller]:
    """A controller started while `sim`'s API server is stopped, once it has seen the outage. On exit
    it is stopped and must return within 20 s; then its client is closed."""
    kube = Kube(await load_configuration(sim.kubeconfig_path))
    await asyncio.to_thread(sim.stop)
    controller, stop = Controller(kube, settings()), asyncio.Event()
    task = asyncio.create_task(controller.run(stop))
    try:
        await eventually(lambda: controller.health.outages == 1)
        yield controller
    finally:
        stop.set()
        try:
            await asyncio.wait_for(task, 20)
        finally:
            await kube.close()


async def test_an_api_server_away_at_start_is_waited_for(sim136):
    # the release is read before anything else: a controller started during an outage follows the
    # cluster's release once the API server is back, not the default
    async with _started_while_away(sim136) as controller:
        await asyncio.to_thread(sim136.start)
        await eventually(lambda: controller.ready(), 30)
        assert controller.release == KubeVersion(1, 36)


async def test_stopped_while_the_api_server_is_away(sim136):
    async with _started_while_away(sim136):
        pass  # on leaving, stopped: it returns, without waiting for an API server that may never come


async def test_a_version_answer_naming_no_release_is_the_current_one(caplog):
    from aiohttp import web

    async def version(_request):
        return web.json_response({"major": "", "minor": "", "gitVersion": "devel"})

    app = web.Application()
    app.router.add_get("/version", version)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    kube = Kube(Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        assert await cluster_release(kube, ApiHealth(kube), asyncio.Event()) == CURRENT
    finally:
        await kube.close()
        await runner.cleanup()
    warned = [r.getMessage() for r in caplog.records if r.name == "autoscaler.controller.releases"]
    assert len(warned) == 1 and "cannot read the cluster's Kubernetes version from /version" in warned[0]
    assert "--kubernetes-version" in warned[0]
