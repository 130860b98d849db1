"""`*` with labelSelector: object labels from a Kubernetes API (the in-process KubeSim) through
the official asyncio client's watch-based cache; pods that no longer exist are not answered."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest

from adapter.kube import LabelCache, client, retry_pause
from adapter.naming import Resource, resource_by_api_name
from kubesim.apiserver import KubeSim
from promscaler.selectors import parse_selector
from promscaler.status import ServiceUnavailable

from ..support import kubectl_ok
from .conftest import RULES, AdapterProcess, approx

PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/%2A/http_requests"
RATE = 'sum(rate(http_requests_total{namespace="web"}[1m])) by (pod)'


def pod(ns: str, name: str, **labels: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "app"}]}}


@pytest.fixture(scope="module")
def sim():
    with KubeSim() as s:
        s.apply(pod("web", "web-1", app="web"))
        s.apply(pod("web", "web-2", app="web"))
        s.apply(pod("web", "web-3", app="web", track="canary"))
        s.apply(pod("shop", "shop-1", app="web"))  # same labels, other namespace
        yield s


@pytest.fixture(scope="module")
def adapter_k8s(prometheus, sim):
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES), "--kubeconfig", sim.kubeconfig_path,
                       "--query-cache-ttl", "0").wait_ready()
    yield a
    a.stop()


def names(adapter, selector: str) -> dict[str, str]:
    resp = adapter.get(PATH, params={"labelSelector": selector})
    assert resp.status_code == 200, resp.text
    return {i["describedObject"]["name"]: i["value"] for i in resp.json()["items"]}


def test_only_existing_matching_pods_are_answered(adapter_k8s, promql):
    got = names(adapter_k8s, "app=web")
    expected = promql.by(RATE, "pod")
    assert "web-old" in expected  # Prometheus still has the deleted pod's rate series...
    assert set(got) == {"web-1", "web-2", "web-3"}  # ...but it does not exist now
    assert all(approx(got[p], expected[p]) for p in got)


@pytest.mark.parametrize("selector,expected", [
    ("app=web,track notin (canary)", {"web-1", "web-2"}),
    ("track", {"web-3"}),
    ("!track", {"web-1", "web-2"}),
    ("app in (web,api),track=canary", {"web-3"}),
    ("app!=web", set()),
])
def test_selector_operators_on_object_labels(adapter_k8s, selector, expected):
    assert set(names(adapter_k8s, selector)) == expected


def test_watch_keeps_the_cache_current(adapter_k8s, sim):
    def wait_until(expected: set[str]) -> set[str]:
        deadline = time.monotonic() + 10
        while (got := set(names(adapter_k8s, "app=web"))) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return got

    sim.delete("v1", "Pod", "web", "web-2")
    assert wait_until({"web-1", "web-3"}) == {"web-1", "web-3"}
    sim.apply(pod("web", "web-old", app="web"))  # the series exists in Prometheus: now it is answered
    assert wait_until({"web-1", "web-3", "web-old"}) == {"web-1", "web-3", "web-old"}
    sim.apply(pod("web", "web-2", app="web"))
    sim.delete("v1", "Pod", "web", "web-old")
    assert wait_until({"web-1", "web-2", "web-3"}) == {"web-1", "web-2", "web-3"}


def test_wildcard_without_selector_answers_only_existing_pods(adapter_k8s, sim, promql):
    # prometheus-adapter lists the objects first: a deleted pod's fresh series is not an answer
    def served() -> dict[str, str]:
        resp = adapter_k8s.get(PATH)
        assert resp.status_code == 200, resp.text
        return {i["describedObject"]["name"]: i["value"] for i in resp.json()["items"]}

    def wait_until(expected: set[str]) -> set[str]:
        deadline = time.monotonic() + 10
        while (got := set(served())) != expected and time.monotonic() < deadline:
            time.sleep(0.05)
        return got

    expected = promql.by(RATE, "pod")
    assert {"web-1", "web-2", "web-3", "web-old"} <= set(expected)
    got = served()
    assert set(got) == {"web-1", "web-2", "web-3"} and all(approx(got[p], expected[p]) for p in got)
    sim.delete("v1", "Pod", "web", "web-3")
    assert wait_until({"web-1", "web-2"}) == {"web-1", "web-2"}  # the watch, not a stale answer
    sim.apply(pod("web", "web-3", app="web", track="canary"))
    assert wait_until({"web-1", "web-2", "web-3"}) == {"web-1", "web-2", "web-3"}
    shop = adapter_k8s.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/shop/pods/*/http_requests").json()
    assert [i["describedObject"]["name"] for i in shop["items"]] == ["shop-1"]

async def test_label_cache_relists_after_410(sim, caplog):
    caplog.set_level(logging.INFO, logger="adapter.kube")
    cache = LabelCache(client(sim.aio_client_configuration()))
    pods = resource_by_api_name("pods")
    try:
        assert await cache.names(pods, "web", parse_selector("app=web")) == {"web-1", "web-2", "web-3"}
        informer = cache._informers["pods"]
        assert informer.relists == 1
        # the watch drops; meanwhile a pod appears and the server compacts its history
        informer.task.cancel()
        await asyncio.gather(informer.task, return_exceptions=True)
        stale = informer.resource_version
        sim.apply(pod("web", "web-9", app="web"))
        sim.compact()
        informer.task = asyncio.create_task(informer._run(stale))  # resume from the old resourceVersion
        deadline = time.monotonic() + 10
        while informer.relists < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert informer.relists == 2 and "410 Gone" in caplog.text
        assert await cache.names(pods, "web", parse_selector("app=web")) == {"web-1", "web-2", "web-3", "web-9"}
    finally:
        sim.delete("v1", "Pod", "web", "web-9")
        await cache.aclose()


def test_failing_lists_back_off_up_to_thirty_seconds():
    assert [retry_pause(n, 1.0) for n in range(1, 8)] == [1, 2, 4, 8, 16, 30, 30]
    assert retry_pause(3, 0.5) == 2.0


async def test_a_resource_the_server_does_not_serve_answers_503_and_warns_once(sim, caplog):
    """A CRD deleted (or never installed): the informer's list fails; requests say why, and the
    retries that follow do not repeat the warning."""
    caplog.set_level(logging.DEBUG, logger="adapter.kube")
    cache = LabelCache(client(sim.aio_client_configuration()), sync_timeout=0.5)
    widgets = Resource("example.com", "widgets", "widget", "Widget", True, "v1")
    try:
        with pytest.raises(ServiceUnavailable, match=r"widgets\.example\.com.*HTTP 404"):
            await cache.names(widgets, "web", parse_selector("app=web"))
        informer = cache._informers["widgets.example.com"]
        deadline = time.monotonic() + 10
        while "retrying in 2s" not in caplog.text and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the second failure comes 1s after the first
        failures = [r for r in caplog.records if "watch on widgets.example.com failed" in r.getMessage()]
        assert [r.levelno for r in failures[:2]] == [logging.WARNING, logging.DEBUG]
        # one line with the Status message, not the raw JSON answer
        assert informer.last_error.startswith("HTTP 404 Not Found: ") and "{" not in informer.last_error
    finally:
        await cache.aclose()


def test_through_the_aggregation_layer_with_kubectl(adapter_k8s, sim, promql):
    """kubectl -> KubeSim's aggregator (APIService-style proxy) -> adapter, as the HPA controller reaches it."""
    import json

    sim.set_aggregated_api("custom.metrics.k8s.io", adapter_k8s.url)
    try:
        out = kubectl_ok(sim.kubeconfig_path, "get", "--raw",
                         "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/http_requests?labelSelector=app%3Dweb")
        got = {i["describedObject"]["name"]: i["value"] for i in json.loads(out)["items"]}
        expected = promql.by(RATE, "pod")
        assert set(got) == {"web-1", "web-2", "web-3"} and all(approx(got[p], expected[p]) for p in got)
    finally:
        sim.set_aggregated_api("custom.metrics.k8s.io", None)
