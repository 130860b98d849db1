"""metrics.k8s.io served from prometheus-adapter's default `resourceRules`, through kubesim's
aggregation: values against the same PromQL asked of Prometheus directly, prometheus-adapter's
formatting (milli-cores truncated, BinarySI bytes), which pods and nodes are served, selectors,
errors, and the two-queries-per-request bound."""

from __future__ import annotations

import time
from datetime import datetime

import httpx
import pytest

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from promscaler.quantity import parse_quantity

from .. import support
from .conftest import PODS, PromQL, pod_object

CPU = 'sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{container!="",pod!=""}[3m]))'
MEMORY = 'sum by (namespace, pod, container) (container_memory_working_set_bytes{container!="",pod!=""})'
NODE_CPU = 'sum by (node) (rate(node_cpu_seconds_total{node!="",mode!="idle",mode!="iowait",mode!="steal"}[3m]))'
NODE_MEMORY = ('sum by (instance) (node_memory_MemTotal_bytes{job="node-exporter",instance!=""}'
               ' - node_memory_MemAvailable_bytes{job="node-exporter",instance!=""})')
SERVED_PODS = {("web", "web-1"), ("web", "web-2"), ("web", "web-partial"), ("shop", "shop-1"), ("shop", "web-1")}
GROUP = "/apis/metrics.k8s.io/v1beta1"


def get(sim: KubeSim, path: str, **params: str) -> httpx.Response:
    return httpx.get(sim.url + path, params=params, headers={"Authorization": f"Bearer {sim.token}"}, timeout=30)


def ok(sim: KubeSim, path: str, **params: str) -> dict:
    r = get(sim, path, **params)
    assert r.status_code == 200, r.text
    return r.json()


def milli(quantity: str) -> int:
    return int(parse_quantity(quantity) * 1000)


def expected_containers(promql: PromQL) -> dict[tuple[str, str], dict[str, tuple[int, int]]]:
    """(namespace, pod) -> container -> (CPU, memory) in milli-units, as prometheus-adapter
    computes them: int64(value * 1000), truncated; a container missing one of them has 0."""
    out: dict[tuple[str, str], dict[str, list[int]]] = {}
    for i, expr in enumerate((CPU, MEMORY)):
        for labels, _, value in promql.vector(expr):
            row = out.setdefault((labels["namespace"], labels["pod"]), {}).setdefault(labels["container"], [0, 0])
            row[i] = int(value * 1000)
    return {k: {c: (v[0], v[1]) for c, v in cs.items()} for k, cs in out.items()}


def check_time(stamp: str, before: float, after: float) -> None:
    """The samples' own time (an instant query's evaluation time), RFC 3339 seconds."""
    assert stamp.endswith("Z")
    assert before - 2 <= datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp() <= after + 1, stamp


def test_discovery(sim: KubeSim) -> None:
    groups = ok(sim, "/apis")["groups"]
    assert any(g["name"] == "metrics.k8s.io" for g in groups)
    resources = {r["name"]: r for r in ok(sim, GROUP)["resources"]}
    assert resources["pods"]["kind"] == "PodMetrics" and resources["pods"]["namespaced"] is True
    assert resources["nodes"]["kind"] == "NodeMetrics" and resources["nodes"]["namespaced"] is False
    assert set(resources["pods"]["verbs"]) == {"get", "list"}


def test_all_pods_match_prometheus(sim: KubeSim, promql: PromQL) -> None:
    before = time.time()
    body = ok(sim, f"{GROUP}/pods")
    after = time.time()
    assert body["kind"] == "PodMetricsList" and body["apiVersion"] == "metrics.k8s.io/v1beta1"
    items = {(i["metadata"]["namespace"], i["metadata"]["name"]): i for i in body["items"]}
    assert set(items) == SERVED_PODS
    expected = expected_containers(promql)
    for key, item in items.items():
        assert item["kind"] == "PodMetrics" and item["window"] == "3m0s"
        assert item["metadata"]["labels"]["pod"] == key[1]
        check_time(item["timestamp"], before, after)
        got = {c["name"]: (milli(c["usage"]["cpu"]), milli(c["usage"]["memory"])) for c in item["containers"]}
        assert got == expected[key], key
        assert set(item["containers"][0]["usage"]) == {"cpu", "memory"}


def test_quantities_as_prometheus_adapter_spells_them(sim: KubeSim) -> None:
    web1 = ok(sim, f"{GROUP}/namespaces/web/pods/web-1")
    usage = {c["name"]: c["usage"] for c in web1["containers"]}
    assert usage["sidecar"]["cpu"] == "50m"  # 50.5 milli-cores: truncated, never 51m
    assert usage["app"] == {"cpu": "250m", "memory": "200Mi"}
    assert ok(sim, f"{GROUP}/namespaces/web/pods/web-2")["containers"][0]["usage"] == {
        "cpu": "1500m", "memory": "100000000"}  # BinarySI, not a multiple of 1024: plain bytes
    assert ok(sim, f"{GROUP}/namespaces/shop/pods/shop-1")["containers"][0]["usage"] == {"cpu": "2", "memory": "1Gi"}


def test_containers_come_from_prometheus_not_the_spec(sim: KubeSim) -> None:
    # web-2's spec also lists `idle` (no samples); shop/web-1's lists `main`, Prometheus has `app`
    assert [c["name"] for c in ok(sim, f"{GROUP}/namespaces/web/pods/web-2")["containers"]] == ["app"]
    assert [c["name"] for c in ok(sim, f"{GROUP}/namespaces/shop/pods/web-1")["containers"]] == ["app"]


def test_partly_covered_pod_has_zero_for_the_missing_resource(sim: KubeSim) -> None:
    item = ok(sim, f"{GROUP}/namespaces/web/pods/web-partial")
    usage = {c["name"]: c["usage"] for c in item["containers"]}
    assert usage == {"app": {"cpu": "300m", "memory": "50Mi"}, "extra": {"cpu": "100m", "memory": "0"}}


@pytest.mark.parametrize("name", ["web-nodata", "web-done", "web-pending", "web-gone", "web-cpuonly", "nope"])
def test_pods_not_served_answer_404(sim: KubeSim, name: str) -> None:
    r = get(sim, f"{GROUP}/namespaces/web/pods/{name}")
    assert r.status_code == 404, r.text
    status = r.json()
    assert status["kind"] == "Status" and status["reason"] == "NotFound" and name in status["message"]
    assert name not in {i["metadata"]["name"] for i in ok(sim, f"{GROUP}/namespaces/web/pods")["items"]}


def test_namespace_and_selectors(sim: KubeSim) -> None:
    names = lambda body: sorted(i["metadata"]["name"] for i in body["items"])  # noqa: E731
    assert names(ok(sim, f"{GROUP}/namespaces/web/pods")) == ["web-1", "web-2", "web-partial"]
    assert names(ok(sim, f"{GROUP}/namespaces/shop/pods")) == ["shop-1", "web-1"]
    web = ok(sim, f"{GROUP}/namespaces/web/pods", labelSelector="app=web,pod!=web-2")
    assert names(web) == ["web-1", "web-partial"]
    assert names(ok(sim, f"{GROUP}/pods", labelSelector="pod in (web-1,shop-1)")) == ["shop-1", "web-1", "web-1"]
    assert names(ok(sim, f"{GROUP}/pods", fieldSelector="metadata.name=web-1")) == ["web-1", "web-1"]
    both = ok(sim, f"{GROUP}/pods", fieldSelector="metadata.name=web-1,metadata.namespace!=web")["items"]
    assert [(i["metadata"]["namespace"], i["metadata"]["name"]) for i in both] == [("shop", "web-1")]
    assert ok(sim, f"{GROUP}/namespaces/empty/pods")["items"] == []
    bad = get(sim, f"{GROUP}/pods", fieldSelector="spec.nodeName=node-1")
    assert bad.status_code == 400 and "spec.nodeName" in bad.json()["message"]
    bad = get(sim, f"{GROUP}/pods", labelSelector="app in (")
    assert bad.status_code == 400 and bad.json()["kind"] == "Status"


def test_nodes_match_prometheus(sim: KubeSim, promql: PromQL) -> None:
    before = time.time()
    body = ok(sim, f"{GROUP}/nodes")
    after = time.time()
    assert body["kind"] == "NodeMetricsList"
    items = {i["metadata"]["name"]: i for i in body["items"]}
    assert set(items) == {"node-1", "node-2"}  # node-3 has no samples, node-ghost is not a node
    cpu = {m["node"]: int(v * 1000) for m, _, v in promql.vector(NODE_CPU)}
    memory = {m["instance"]: int(v * 1000) for m, _, v in promql.vector(NODE_MEMORY)}
    for name, item in items.items():
        assert item["kind"] == "NodeMetrics" and item["window"] == "3m0s"
        assert item["metadata"]["labels"]["pool"] == name[-1]
        check_time(item["timestamp"], before, after)
        assert (milli(item["usage"]["cpu"]), milli(item["usage"]["memory"])) == (cpu[name], memory[name])
    assert items["node-1"]["usage"]["memory"] == "6Gi"
    assert items["node-2"]["usage"]["memory"] == "1589934592"
    assert ok(sim, f"{GROUP}/nodes", labelSelector="pool=2")["items"][0]["metadata"]["name"] == "node-2"
    assert ok(sim, f"{GROUP}/nodes/node-1")["usage"] == items["node-1"]["usage"]
    for missing in ("node-3", "node-ghost"):
        r = get(sim, f"{GROUP}/nodes/{missing}")
        assert r.status_code == 404 and r.json()["reason"] == "NotFound"


def query_count(adapter: AdapterProcess) -> float:
    for line in adapter.get("/metrics").text.splitlines():
        if line.startswith('promscaler_adapter_prometheus_query_duration_seconds_count{endpoint="query"'):
            return float(line.split()[-1])
    return 0.0


def test_at_most_two_queries_per_request(sim: KubeSim, adapter: AdapterProcess) -> None:
    for path, params in [(f"{GROUP}/pods", {"labelSelector": "app notin (zzz)"}),  # every namespace
                         (f"{GROUP}/namespaces/shop/pods", {"fieldSelector": "metadata.name!=zzz"}),
                         (f"{GROUP}/pods", {"fieldSelector": "metadata.namespace=shop"}),
                         (f"{GROUP}/nodes", {"labelSelector": "pool!=zzz"})]:
        before = query_count(adapter)
        ok(sim, path, **params)
        assert query_count(adapter) - before <= 2, path


def test_writes_are_refused(sim: KubeSim, adapter: AdapterProcess) -> None:
    r = httpx.post(adapter.url + f"{GROUP}/namespaces/web/pods", json={})
    assert r.status_code == 405 and r.json()["kind"] == "Status"
    assert adapter.get("/apis/metrics.k8s.io/v1alpha1").status_code == 404  # a version not served (any more)


async def test_pods_follow_the_watch(sim: KubeSim) -> None:
    """Phase changes and deletions reach the adapter's Running-pods watch: a pod that finishes
    leaves the answers, one that starts running joins them; no answer outlives the change."""
    def served(ns: str, name: str) -> bool:
        return get(sim, f"{GROUP}/namespaces/{ns}/pods/{name}").status_code == 200

    done = next(p for p in PODS if p[1] == "web-done")
    sim.apply(pod_object(done[0], done[1], "Running", done[3]))
    await support.eventually(lambda: served("web", "web-done"), timeout=15)
    sim.apply(pod_object(done[0], done[1], "Succeeded", done[3]))
    await support.eventually(lambda: not served("web", "web-done"), timeout=15)
    gone = next(p for p in PODS if p[1] == "web-gone")
    sim.apply(pod_object(gone[0], gone[1], "Running", gone[3]))
    await support.eventually(lambda: served("web", "web-gone"), timeout=15)
    sim.delete("v1", "Pod", "web", "web-gone")
    await support.eventually(lambda: "web-gone" not in {
        i["metadata"]["name"] for i in ok(sim, f"{GROUP}/namespaces/web/pods")["items"]}, timeout=15)
