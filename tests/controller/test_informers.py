"""Informers against KubeSim: list+watch, resume after a broken stream without missing an update,
relist after 410 Gone, and the pod index."""

from __future__ import annotations

import asyncio
import contextlib

import aiohttp

from autoscaler.controller.informers import CachedPod, Informer, PodIndex, cached_pod
from promscaler.kubeapi import Kube, load_configuration
from promscaler.selectors import parse_selector

from .conftest import NS, autoscaler, deployment, eventually, pods_metric

PATH = f"/apis/promscaler.io/v1alpha1/namespaces/{NS}/horizontalautoscalers"
API = ("promscaler.io/v1alpha1", "HorizontalAutoscaler")


class BreakableWatch:
    """Wraps Kube.watch: `arm()` makes the current stream break (as a dropped connection does)
    after its next event, and holds the reconnect until `release()`."""

    def __init__(self, kube: Kube) -> None:
        self.original = kube.watch
        self.armed = False
        self.broken = asyncio.Event()
        self.resume = asyncio.Event()
        self.resume.set()
        self.resume_versions: list[str] = []
        kube.watch = self.watch  # type: ignore[method-assign]

    def arm(self) -> None:
        self.armed, self.resume = True, asyncio.Event()

    def release(self) -> None:
        self.resume.set()

    async def watch(self, path, query, timeout):
        await self.resume.wait()
        self.resume_versions.append(dict(query).get("resourceVersion", ""))
        async for event in self.original(path, query, timeout):
            yield event
            if self.armed:
                self.armed = False
                self.broken.set()
                raise aiohttp.ClientPayloadError("Response payload is not completed (test)")


@contextlib.asynccontextmanager
async def informer(sim, path=PATH, **kwargs):
    kube = Kube(await load_configuration(sim.kubeconfig_path))
    breaker = BreakableWatch(kube)
    inf = Informer(kube, path, name="test", **kwargs)
    stop = asyncio.Event()
    task = asyncio.create_task(inf.run(stop))
    try:
        await asyncio.wait_for(inf.synced.wait(), 10)
        yield inf, breaker
    finally:
        stop.set()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await kube.close()


def max_replicas(inf: Informer, name: str) -> int | None:
    obj = inf.get((NS, name))
    return obj["spec"]["maxReplicas"] if obj else None


async def test_lists_then_follows_adds_updates_deletes(sim):
    sim.apply(autoscaler("a", "web", [pods_metric("m", "1")]))
    seen: list[tuple[str, str]] = []
    async with informer(sim) as (inf, _):
        inf.add_handler(lambda kind, old, new: seen.append((kind, (new or old)["metadata"]["name"])))
        assert max_replicas(inf, "a") == 10
        sim.apply(autoscaler("b", "web", [pods_metric("m", "1")]))
        sim.apply(autoscaler("a", "web", [pods_metric("m", "1")], max_replicas=7))
        sim.delete(*API, NS, "b")
        await eventually(lambda: ("DELETED", "b") in seen)
        assert max_replicas(inf, "a") == 7 and inf.get((NS, "b")) is None
        assert seen == [("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]
        assert inf.relists == 1


async def test_broken_stream_resumes_from_resource_version_without_missing_an_update(sim):
    sim.apply(autoscaler("a", "web", [pods_metric("m", "1")]))
    async with informer(sim) as (inf, breaker):
        breaker.arm()
        sim.apply(autoscaler("a", "web", [pods_metric("m", "1")], max_replicas=5))  # delivered, then the stream breaks
        await asyncio.wait_for(breaker.broken.wait(), 10)
        last_seen = inf.resource_version
        sim.apply(autoscaler("a", "web", [pods_metric("m", "1")], max_replicas=3))  # while disconnected
        assert max_replicas(inf, "a") == 5
        breaker.release()
        await eventually(lambda: max_replicas(inf, "a") == 3)
        assert inf.relists == 1  # resumed, not relisted
        assert breaker.resume_versions[-1] == last_seen


async def test_expired_resource_version_relists(sim):
    sim.apply(autoscaler("a", "web", [pods_metric("m", "1")]))
    sim.apply(autoscaler("gone-soon", "web", [pods_metric("m", "1")]))
    async with informer(sim) as (inf, breaker):
        breaker.arm()
        sim.apply(autoscaler("a", "web", [pods_metric("m", "1")], max_replicas=5))
        await asyncio.wait_for(breaker.broken.wait(), 10)
        sim.apply(autoscaler("a", "web", [pods_metric("m", "1")], max_replicas=4))
        sim.delete(*API, NS, "gone-soon")
        sim.compact()  # the history is gone: resuming gets 410 Gone
        breaker.release()
        await eventually(lambda: max_replicas(inf, "a") == 4 and inf.get((NS, "gone-soon")) is None)
        assert inf.relists == 2


async def test_a_quiet_pod_watch_resumes_from_its_bookmarks_instead_of_relisting(sim):
    """No pod changes while other objects do: the watch's BOOKMARKs (allowWatchBookmarks, as
    Kubernetes' reflector asks for them) carry the newer resourceVersion, so once the history
    before it is compacted the informer still resumes instead of relisting."""
    sim.bookmark_interval = 0.1
    sim.apply(deployment("web", 2))
    async with informer(sim, path=f"/api/v1/namespaces/{NS}/pods", project=cached_pod, watch_timeout=1.0) as (inf, _):
        await eventually(lambda: len(inf.store) == 2 and all(p.info.ready for p in inf.store.values()))
        listed = int(inf.resource_version)
        for i in range(3):  # other kinds move the resourceVersion on
            rv = int(sim.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"c{i}", "namespace": NS},
                                "data": {"i": str(i)}})["metadata"]["resourceVersion"])
        assert rv > listed
        watches = inf.rewatches
        await eventually(lambda: inf.rewatches >= watches + 2)  # a whole watch begun after the changes
        assert int(inf.resource_version) >= rv  # from a bookmark: no pod event carried it
        sim.compact()  # the history up to now is gone: resuming from `listed` would be 410 Gone
        watches = inf.rewatches
        await eventually(lambda: inf.rewatches >= watches + 2)
        assert inf.relists == 1


async def test_pod_index_selects_by_labels_within_namespace(sim):
    sim.apply(deployment("web", 3))
    sim.apply(deployment("api", 2))
    sim.apply(deployment("web", 1, ns="other"))
    async with informer(sim, path="/api/v1/pods", project=cached_pod) as (inf, _):
        index = PodIndex(inf)
        for obj in list(inf.store.values()):  # the index subscribes after the initial list here
            index._on_event("ADDED", None, obj)
        await eventually(lambda: len(index.select(NS, parse_selector("app=web"))) == 3)
        assert len(index.select(NS, parse_selector("app in (web,api)"))) == 5
        assert len(index.select("other", parse_selector("app=web"))) == 1
        sim.apply(deployment("web", 1))
        await eventually(lambda: len(index.select(NS, parse_selector("app=web"))) == 1)


async def test_lists_page_by_page_and_keeps_projections(sim):
    """LIST with `limit`/`continue` (client-go's reflector pages of 500; 2 here), every page's pods
    kept as CachedPods, and the watch resumed from the list's resourceVersion."""
    sim.apply(deployment("web", 3))
    sim.apply(deployment("api", 2))
    await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 5)
    pages: list[dict] = []
    async with informer(sim, path="/api/v1/pods", project=cached_pod, page_size=2) as (inf, _):
        get = inf.kube.get
        # count the pages of a relist: the first list happened before this wrapper, so relist again
        async def counted(path, query=None):
            body = await get(path, query)
            if path == "/api/v1/pods":
                pages.append({"query": dict(query or ()), "items": len(body.get("items") or ())})
            return body
        inf.kube.get = counted  # type: ignore[method-assign]
        await inf._list()
        assert [p["items"] for p in pages] == [2, 2, 1]
        assert all(p["query"]["limit"] == 2 for p in pages) and "continue" in pages[1]["query"]
        assert len(inf.store) == 5 and all(isinstance(p, CachedPod) for p in inf.store.values())
        sim.apply(deployment("web", 1))
        await eventually(lambda: len(inf.store) == 3)


async def test_the_controllers_caches_hold_projections_listed_page_by_page(sim):
    """The controller's pod cache holds what decisions read, not pod objects; its autoscaler cache
    drops the metadata nothing reads (labels, kubectl's last-applied annotation); its LISTs carry
    `limit` (a 20,000-pod LIST is never one body)."""
    from autoscaler.controller.controller import Controller, Settings

    sim.apply(deployment("web", 2))
    obj = autoscaler("a", "web", [pods_metric("m", "1")])
    obj["metadata"]["labels"] = {"team": "shop"}
    obj["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}" * 500}
    sim.apply(obj)
    await eventually(lambda: len(sim.list("v1", "Pod", NS)) == 2)
    kube = Kube(await load_configuration(sim.kubeconfig_path))
    try:
        controller = Controller(kube, Settings(leader_elect=False, http_port=None))
        queries: list[dict] = []
        get = kube.get

        async def recorded(path, query=None):
            queries.append(dict(query or ()))
            return await get(path, query)

        kube.get = recorded  # type: ignore[method-assign]
        await controller.pod_informer._list()
        await controller.informers["HorizontalAutoscaler"]._list()
        assert queries and all("limit" in q for q in queries)
        pods = list(controller.pod_informer.store.values())
        assert len(pods) == 2 and not any(isinstance(p, dict) for p in pods)
        assert [p.info.name for p in pods] == sorted(p["metadata"]["name"] for p in sim.list("v1", "Pod", NS))
        cached = controller.informers["HorizontalAutoscaler"].get((NS, "a"))
        assert not isinstance(cached, dict)
        kept = cached.object()
        assert "labels" not in kept["metadata"] and "annotations" not in kept["metadata"]
        assert kept["spec"]["maxReplicas"] == 10 and kept["metadata"]["name"] == "a"
    finally:
        await kube.close()
