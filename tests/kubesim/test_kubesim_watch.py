"""Watch streams: events, resumption from a resourceVersion, 410 Expired, selector transitions,
bookmarks and timeouts, with the real sync and aio watch helpers and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import httpx
import pytest
from kubernetes import client, watch
from kubernetes.aio import client as aclient
from kubernetes.aio import watch as awatch
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver import KubeSim

from .kubesim_objects import pod


def cm(name: str, ns: str, labels: dict[str, str] | None = None, data: dict[str, str] | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
        "data": data or {},
    }


def later(fn, delay: float = 0.2) -> threading.Thread:
    def run() -> None:
        time.sleep(delay)
        fn()
    t = threading.Thread(target=run)
    t.start()
    return t


def live_events(writes, n: int, list_fn, *args, **kwargs) -> list:
    """The first `n` events of a watch opened while `writes` run (from a thread, shortly after), then
    the check that nothing more follows them. No short timeoutSeconds bounds the stream: a slow
    machine cannot end it before the writes land."""
    t = later(writes)
    w, events = watch.Watch(), []
    for e in w.stream(list_fn, *args, timeout_seconds=30, **kwargs):
        events.append(e)
        if len(events) == n:
            w.stop()
    t.join()
    after = list(watch.Watch().stream(list_fn, *args, **{**kwargs, "resource_version": w.resource_version},
                                      timeout_seconds=1))  # the writes are done: a replay of what follows
    assert after == [], after
    return events


def test_watch_streams_changes_from_a_resource_version(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    sim.apply(cm("before", ns))
    rv = core.list_namespaced_config_map(ns).metadata.resource_version

    def writes() -> None:
        sim.apply(cm("a", ns))
        core.patch_namespaced_config_map("a", ns, {"data": {"k": "v"}})
        core.delete_namespaced_config_map("a", ns)

    seen = [(e["type"], e["object"].metadata.name, e["object"].data)
            for e in live_events(writes, 3, core.list_namespaced_config_map, ns, resource_version=rv)]
    assert seen == [("ADDED", "a", {}), ("MODIFIED", "a", {"k": "v"}), ("DELETED", "a", {"k": "v"})]


def test_watch_without_resource_version_starts_with_current_state(
    sim: KubeSim, ns: str, core: client.CoreV1Api
) -> None:
    sim.apply(cm("x", ns))
    sim.apply(cm("y", ns))
    seen = [(e["type"], e["object"].metadata.name)
            for e in watch.Watch().stream(core.list_namespaced_config_map, ns, timeout_seconds=1)]
    assert seen == [("ADDED", "x"), ("ADDED", "y")]


def test_resume_replays_only_missed_events(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    first = sim.apply(cm("a", ns, data={"n": "1"}))
    sim.apply(cm("a", ns, data={"n": "2"}))
    sim.apply(cm("b", ns))
    seen = [(e["type"], e["object"].metadata.name, (e["object"].data or {}).get("n"))
            for e in watch.Watch().stream(core.list_namespaced_config_map, ns,
                                          resource_version=first["metadata"]["resourceVersion"], timeout_seconds=1)]
    assert seen == [("MODIFIED", "a", "2"), ("ADDED", "b", None)]


def test_too_old_resource_version_is_410_expired(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    old = sim.apply(cm("a", ns))["metadata"]["resourceVersion"]
    sim.apply(cm("a", ns, data={"n": "2"}))
    sim.compact()
    # raw: HTTP 200 and one ERROR event carrying a 410 Status (as the watch cache answers)
    r = httpx.get(f"{sim.url}/api/v1/namespaces/{ns}/configmaps", params={"watch": "1", "resourceVersion": old})
    event = json.loads(r.text.splitlines()[0])
    assert event["type"] == "ERROR"
    assert (event["object"]["kind"], event["object"]["code"], event["object"]["reason"]) == ("Status", 410, "Expired")
    # the client's watch turns it into ApiException(410), the signal to relist
    with pytest.raises(ApiException) as exc:
        for _ in watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=old, timeout_seconds=1):
            pass
    assert exc.value.status == 410
    # the current resourceVersion is still fine
    current = core.list_namespaced_config_map(ns).metadata.resource_version
    assert (
        list(watch.Watch().stream(core.list_namespaced_config_map, ns, resource_version=current, timeout_seconds=1))
        == []
    )


def test_bounded_history_expires_old_versions() -> None:
    with KubeSim(history=5) as small:
        start = small.apply(cm("a", "default"))["metadata"]["resourceVersion"]
        for i in range(10):
            small.apply(cm("a", "default", data={"n": str(i)}))
        r = httpx.get(
            f"{small.url}/api/v1/namespaces/default/configmaps", params={"watch": "1", "resourceVersion": start}
        )
        assert json.loads(r.text.splitlines()[0])["object"]["code"] == 410
        recent = str(small.resource_version - 3)
        r = httpx.get(f"{small.url}/api/v1/namespaces/default/configmaps",
                      params={"watch": "1", "resourceVersion": recent, "timeoutSeconds": "1"})
        events = [json.loads(line) for line in r.text.splitlines()]
        assert [e["object"]["data"]["n"] for e in events] == ["7", "8", "9"]


def test_selector_transitions_become_added_and_deleted(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    rv = str(sim.resource_version)

    def writes() -> None:
        sim.apply(cm("a", ns, labels={"app": "db"}))
        sim.apply(cm("a", ns, labels={"app": "web"}))  # enters the selection
        sim.apply(cm("a", ns, labels={"app": "web"}, data={"k": "v"}))
        sim.apply(cm("a", ns, labels={"app": "db"}))  # leaves it

    seen = [e["type"] for e in live_events(writes, 3, core.list_namespaced_config_map, ns, label_selector="app=web",
                                           resource_version=rv)]
    assert seen == ["ADDED", "MODIFIED", "DELETED"]


def test_field_selector_on_watch(sim: KubeSim, ns: str, core: client.CoreV1Api) -> None:
    rv = str(sim.resource_version)
    def writes() -> None:
        sim.apply(pod("p", phase="Pending", namespace=ns))
        sim.apply(pod("q", phase="Running", namespace=ns))

    seen = [e["object"].metadata.name for e in live_events(
        writes, 1, core.list_namespaced_pod, ns, field_selector="status.phase=Running", resource_version=rv)]
    assert seen == ["q"]


def test_bookmarks_carry_the_resource_version(sim: KubeSim, ns: str) -> None:
    sim.apply(cm("a", ns))
    rv = str(sim.resource_version)
    params = {"watch": "true", "resourceVersion": rv, "allowWatchBookmarks": "true", "timeoutSeconds": "1"}
    r = httpx.get(f"{sim.url}/api/v1/namespaces/{ns}/configmaps", params=params, timeout=5)
    events = [json.loads(line) for line in r.text.splitlines()]
    bookmarks = [e for e in events if e["type"] == "BOOKMARK"]
    assert bookmarks, events  # bookmark_interval is 0.2 s in these tests
    assert all(int(b["object"]["metadata"]["resourceVersion"]) >= int(rv) for b in bookmarks)
    assert bookmarks[0]["object"]["kind"] == "ConfigMap"
    r = httpx.get(f"{sim.url}/api/v1/namespaces/{ns}/configmaps", params={**params, "allowWatchBookmarks": "false"})
    assert r.text == ""


def test_timeout_seconds_ends_the_stream(sim: KubeSim, ns: str) -> None:
    start = time.monotonic()
    r = httpx.get(
        f"{sim.url}/api/v1/namespaces/{ns}/configmaps",
        params={"watch": "1", "resourceVersion": str(sim.resource_version), "timeoutSeconds": "1"},
        timeout=10,
    )
    assert r.status_code == 200 and r.text == ""
    assert time.monotonic() - start >= 0.9


async def test_aio_watch(sim: KubeSim, ns: str) -> None:
    async with aclient.ApiClient(sim.aio_client_configuration()) as api:
        core = aclient.CoreV1Api(api)
        rv = (await core.list_namespaced_config_map(ns)).metadata.resource_version

        async def writes() -> None:
            await asyncio.sleep(0.2)
            await core.create_namespaced_config_map(ns, {"metadata": {"name": "a"}})
            await core.delete_namespaced_config_map("a", ns)

        task = asyncio.create_task(writes())
        w, seen = awatch.Watch(), []
        async for e in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30):
            seen.append((e["type"], e["object"].metadata.name))
            if len(seen) == 2:  # no short timeoutSeconds: a slow machine cannot end the stream before the writes
                w.stop()
        await task
        assert seen == [("ADDED", "a"), ("DELETED", "a")]
        assert int(w.resource_version) > int(rv)
        after = [e async for e in awatch.Watch().stream(core.list_namespaced_config_map, ns,
                                                       resource_version=w.resource_version, timeout_seconds=1)]
        assert after == []  # nothing more followed


def test_broken_watch_resumes_without_missing_an_update(sim: KubeSim, ns: str) -> None:
    url = f"{sim.url}/api/v1/namespaces/{ns}/configmaps"
    with (
        httpx.Client(timeout=10) as c,
        c.stream("GET", url, params={"watch": "1", "resourceVersion": str(sim.resource_version)}) as r,
    ):
        lines = r.iter_lines()
        sim.apply(cm("a", ns))
        first = json.loads(next(lines))
        assert (first["type"], first["object"]["metadata"]["name"]) == ("ADDED", "a")
        sim.break_watches()
        sim.apply(cm("b", ns))  # happens while nobody watches
        assert list(lines) == []  # the stream ended cleanly
    last = first["object"]["metadata"]["resourceVersion"]
    r = httpx.get(url, params={"watch": "1", "resourceVersion": last, "timeoutSeconds": "1"}, timeout=10)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in map(json.loads, r.text.splitlines())] == [
        ("ADDED", "b")
    ]
    # in-process subscribers (the workload controller) are not affected
    sim.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": ns},
               "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "d"}},
                        "template": {"metadata": {"labels": {"app": "d"}}, "spec": {"containers": []}}}})
    deadline = time.monotonic() + 10
    while not sim.list("v1", "Pod", ns) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(sim.list("v1", "Pod", ns)) == 1


def test_client_going_away_releases_its_watch(sim: KubeSim, ns: str) -> None:
    before = sim.cluster.store.watcher_count()
    with httpx.Client(timeout=10) as c, c.stream("GET", f"{sim.url}/api/v1/namespaces/{ns}/configmaps",
                                                 params={"watch": "1"}) as r:
        assert r.status_code == 200
        deadline = time.monotonic() + 5
        while sim.cluster.store.watcher_count() == before and time.monotonic() < deadline:
            time.sleep(0.02)
        assert sim.cluster.store.watcher_count() == before + 1
    deadline = time.monotonic() + 5
    while sim.cluster.store.watcher_count() > before and time.monotonic() < deadline:
        time.sleep(0.02)
    assert sim.cluster.store.watcher_count() == before
