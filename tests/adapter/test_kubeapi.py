"""The shared Kubernetes client (promscaler.kubeapi) as the adapter uses it: lists, watches the
server streams and ends (an ERROR event raising `ApiError` with its code), and refusals decoded
from their metav1.Status, in the words the adapter's messages are made of.

Real parts: KubeSim over HTTP, the official client's configuration and aiohttp session."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from adapter.kube import KubeRequestError, LabelCache, client
from adapter.naming import resource_by_api_name
from adapter.security.authn import ReviewUnavailable, TokenReviewer
from kubesim.apiserver import KubeSim
from promscaler.kubeapi import ApiError, Kube, load_configuration, query
from promscaler.selectors import parse_selector
from tests.support import eventually


def configmap(ns: str, name: str, data: dict[str, str] | None = None, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "data": data or {}}


def configmaps(ns: str) -> str:
    return f"/api/v1/namespaces/{ns}/configmaps"


def names(doc: dict[str, Any]) -> list[str]:
    return sorted(o["metadata"]["name"] for o in doc["items"])


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim() as s:
        s.apply(configmap("listed", "a", app="web"))
        s.apply(configmap("listed", "b", app="web"))
        s.apply(configmap("listed", "c", app="batch"))
        s.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "listed"},
                 "spec": {"containers": [{"name": "app", "image": "app"}]}})
        yield s


@pytest.fixture
async def kube(sim: KubeSim) -> AsyncIterator[Kube]:
    k = client(sim.aio_client_configuration())
    yield k
    await k.close()


async def test_a_list_answers_its_items_and_where_a_watch_resumes(sim: KubeSim, kube: Kube) -> None:
    doc = await kube.request("GET", configmaps("listed"))
    assert names(doc) == ["a", "b", "c"]
    assert int(doc["metadata"]["resourceVersion"]) == sim.resource_version
    selected = await kube.request("GET", configmaps("listed"), query(labelSelector="app=web", fieldSelector=None))
    assert names(selected) == ["a", "b"]


async def test_a_watch_streams_the_changes_after_its_resource_version(sim: KubeSim, kube: Kube) -> None:
    rv = (await kube.request("GET", configmaps("watched")))["metadata"]["resourceVersion"]
    sim.apply(configmap("watched", "x"))
    sim.apply(configmap("watched", "x", {"n": "2"}))
    sim.delete("v1", "ConfigMap", "watched", "x")
    seen = []
    async with asyncio.timeout(15):
        async for event in kube.watch(configmaps("watched"), [("resourceVersion", rv)], timeout=30):
            if event["type"] != "BOOKMARK":
                seen.append((event["type"], event["object"]["metadata"]["name"]))
            if event["type"] == "DELETED":
                break
    assert seen == [("ADDED", "x"), ("MODIFIED", "x"), ("DELETED", "x")]


async def test_a_watch_from_a_compacted_version_ends_with_a_410_error(sim: KubeSim, kube: Kube) -> None:
    old = sim.apply(configmap("expired", "y"))["metadata"]["resourceVersion"]
    sim.apply(configmap("expired", "y", {"n": "2"}))
    sim.compact()
    with pytest.raises(ApiError) as raised:
        async with asyncio.timeout(15):
            async for _ in kube.watch(configmaps("expired"), [("resourceVersion", old)], timeout=30):
                pass
    exc = raised.value
    assert (exc.status, exc.reason, exc.gone) == (410, "Expired", True)
    assert exc.body == b"" and exc.message  # from the event, not an answer's body


async def test_the_server_ending_a_watch_ends_the_stream(sim: KubeSim, kube: Kube) -> None:
    rv = (await kube.request("GET", configmaps("quiet")))["metadata"]["resourceVersion"]
    async with asyncio.timeout(15):  # timeoutSeconds=1: the server closes it, the iteration returns
        events = [e async for e in kube.watch(configmaps("quiet"), [("resourceVersion", rv)], timeout=1)]
    assert [e for e in events if e["type"] != "BOOKMARK"] == []


async def test_a_refusal_carries_the_status_reason_and_message(kube: Kube) -> None:
    with pytest.raises(ApiError) as raised:
        await kube.request("GET", configmaps("listed") + "/missing")
    exc = raised.value
    assert (exc.status, exc.reason, exc.not_found, exc.phrase) == (404, "NotFound", True, "Not Found")
    assert '"missing" not found' in exc.message
    assert orjson.loads(exc.body)["kind"] == "Status"
    with pytest.raises(ApiError) as raised:
        await kube.request("POST", configmaps("listed"), body=configmap("listed", "a"))
    assert (raised.value.status, raised.value.reason, raised.value.conflict) == (409, "AlreadyExists", True)


async def test_discovery_failures_keep_their_one_line_message(kube: Kube) -> None:
    cache = LabelCache(kube)
    with pytest.raises(KubeRequestError) as raised:
        await cache.get_json(configmaps("listed") + "/missing")
    assert str(raised.value) == 'HTTP 404: configmaps "missing" not found'


async def test_a_failed_token_review_keeps_its_message(sim: KubeSim, kube: Kube) -> None:
    sim.fail_auth_reviews = True
    try:
        with pytest.raises(ApiError) as raised:
            await kube.request("POST", "/apis/authentication.k8s.io/v1/tokenreviews",
                               body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
                                     "spec": {"token": "t"}})
        assert (raised.value.status, raised.value.reason) == (503, "ServiceUnavailable")
        with pytest.raises(ReviewUnavailable, match=r"^TokenReview failed: HTTP 503 Service Unavailable$"):
            await TokenReviewer(kube).review("t")
    finally:
        sim.fail_auth_reviews = False


async def test_the_informers_watch_has_a_read_timeout_past_the_servers_end_and_no_total(
        sim: KubeSim, kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[tuple[dict[str, Any], Any]] = []
    send = kube._send

    async def recording(method: str, path: str, q: Any, body: Any, content_type: str, timeout: Any,
                        *accept: str) -> Any:
        sent.append((dict(q or ()), timeout))
        return await send(method, path, q, body, content_type, timeout, *accept)

    monkeypatch.setattr(kube, "_send", recording)
    cache = LabelCache(kube, watch_timeout=2)
    try:
        assert await cache.names(resource_by_api_name("pods"), "listed", parse_selector("")) == {"p"}
        watches = await eventually(lambda: [(q, t) for q, t in sent if q.get("watch")])
        q, timeout = watches[0]
        assert q["timeoutSeconds"] == 2 and (timeout.total, timeout.sock_read) == (None, 62)
        assert [t.total for q, t in sent if not q.get("watch")] == [300.0]  # the LIST: a total limit
    finally:
        await cache.aclose()


QUERIES = [
    [],
    [("labelSelector", "app in (web, batch),tier!=db"), ("fieldSelector", "metadata.name=a/b"), ("limit", 500)],
    [("resourceVersion", "42"), ("watch", "1"), ("allowWatchBookmarks", True), ("timeoutSeconds", 300),
     ("continue", "eyJ2IjoibWV0YTEuazhzLmlvL3YxIn0=+&"), ("dryRun", False), ("sendInitialEvents", "true")],
]


async def test_a_request_is_built_as_the_official_api_client_builds_it(sim: KubeSim) -> None:
    # The official client's own ApiClient.param_serialize is the reference: the same URL (query
    # encoding), headers and bearer token, with and without a token, with an async refresh hook.
    from kubernetes.aio.client.api_client import ApiClient

    current = ["first"]

    async def rotate(cfg: Any) -> None:  # as the in-cluster loader's hook: the token the file now holds
        cfg.api_key["BearerToken"] = current[0]

    with_token = sim.aio_client_configuration()
    hooked = sim.aio_client_configuration()
    hooked.refresh_api_key_hook = rotate
    no_token = sim.aio_client_configuration()
    no_token.api_key = {}
    for cfg in (with_token, hooked, no_token):
        kube, api = Kube(cfg, user_agent="promscaler-adapter"), ApiClient(cfg)
        api.user_agent = "promscaler-adapter"
        try:
            for n, q in enumerate(QUERIES):
                current[0] = f"token-{n}"
                for accept, content_type in (("application/json", "application/json"),
                                             ("application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                                              "application/merge-patch+json")):
                    ours = await kube.prepare(configmaps("listed"), q, accept, content_type)
                    _, url, headers, _, _ = await api.param_serialize(
                        "GET", configmaps("listed"), query_params=list(q),
                        header_params={"Accept": accept, "Content-Type": content_type},
                        auth_settings=["BearerToken"])
                    assert ours == (url, headers)
                    assert cfg is not hooked or headers["authorization"] == f"Bearer token-{n}"
        finally:
            await kube.close()
            await api.close()
    assert "authorization" not in (await Kube(no_token).prepare("/api"))[1]


def exec_kubeconfig(sim: KubeSim, path: Any, token: str) -> str:
    """The sandbox's kubeconfig whose user is an exec credential plugin printing `token`."""
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": {"token": token}}
    doc = yaml.safe_load(Path(sim.kubeconfig_path).read_text())
    doc["users"][0]["user"] = {"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
        "args": ["-c", f"print({json.dumps(json.dumps(plugin))})"], "interactiveMode": "Never"}}
    Path(path).write_text(yaml.safe_dump(doc))
    return str(path)


async def test_the_kubeconfigs_bearer_token_authenticates(tmp_path: Path) -> None:
    # KubeSim refusing unknown tokens (401): the kubeconfig's `token`, and an exec plugin's token.
    with KubeSim(token="the-users-token", authenticate=True) as strict:
        files = {"token": strict.kubeconfig_path,
                 "exec": exec_kubeconfig(strict, tmp_path / "exec", "the-users-token"),
                 "exec, unknown token": exec_kubeconfig(strict, tmp_path / "other", "someone-elses-token")}
        answers = {}
        for name, path in files.items():
            kube = Kube(await load_configuration(path))
            try:
                answers[name] = len((await kube.request("GET", "/api/v1/namespaces"))["items"]) > 0
            except ApiError as exc:
                answers[name] = exc.status
            finally:
                await kube.close()
    assert answers == {"token": True, "exec": True, "exec, unknown token": 401}
