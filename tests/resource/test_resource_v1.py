"""metrics.k8s.io v1 beside v1beta1 (issue 36; Kubernetes 1.37 promoted v1beta1 unchanged): the
same answers under either version, each object's `apiVersion` the version asked for; discovery,
aggregated discovery and OpenAPI list both with v1 preferred, as Kubernetes' own fake metrics
server (agnhost fake-metrics-server) lists them; `kubectl top` 1.37 reads v1. The official
`kubernetes` client and kubectl go through kubesim's aggregation to the real adapter."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client, config

from kubesim.apiserver import KubeSim
from kubesim.processes import AdapterProcess
from promscaler.apidiscovery import AGGREGATED_ACCEPT

from ..support import kubectl_ok, run_kubectl
from .conftest import PromQL
from .test_kubectl_top import cores, top
from .test_resource_values import CPU, ok

V1, V1BETA1 = "/apis/metrics.k8s.io/v1", "/apis/metrics.k8s.io/v1beta1"
PATHS = ("/pods", "/namespaces/web/pods", "/namespaces/web/pods/web-1", "/nodes", "/nodes/node-1")


@pytest.fixture(scope="module")
def objects(sim: KubeSim) -> client.CustomObjectsApi:
    conf = client.Configuration()
    config.load_kube_config(config_file=sim.kubeconfig_path, client_configuration=conf)
    return client.CustomObjectsApi(client.ApiClient(conf))


def _same(doc: dict[str, Any]) -> Any:
    """An answer without what differs between two requests (the answer's own time) or between
    versions (apiVersion)."""
    if isinstance(doc, dict):
        return {k: _same(v) for k, v in doc.items() if k not in ("apiVersion", "creationTimestamp", "timestamp")}
    if isinstance(doc, list):
        return [_same(v) for v in doc]
    return doc


def _versions(doc: dict[str, Any]) -> set[str]:
    """Every apiVersion in an answer: the list's and its items'."""
    return {doc["apiVersion"], *(i["apiVersion"] for i in doc.get("items", ()))}


def test_the_group_serves_v1_first_and_v1beta1(sim: KubeSim, adapter: AdapterProcess) -> None:
    expected = {"name": "metrics.k8s.io",
                "versions": [{"groupVersion": "metrics.k8s.io/v1", "version": "v1"},
                             {"groupVersion": "metrics.k8s.io/v1beta1", "version": "v1beta1"}],
                "preferredVersion": {"groupVersion": "metrics.k8s.io/v1", "version": "v1"}}
    for doc in (adapter.get("/apis/metrics.k8s.io").json(), ok(sim, "/apis/metrics.k8s.io"),
                next(g for g in adapter.get("/apis").json()["groups"] if g["name"] == "metrics.k8s.io"),
                next(g for g in ok(sim, "/apis")["groups"] if g["name"] == "metrics.k8s.io")):
        assert {k: doc[k] for k in expected} == expected
    for version in ("v1", "v1beta1"):
        listed = ok(sim, f"/apis/metrics.k8s.io/{version}")
        assert listed["groupVersion"] == f"metrics.k8s.io/{version}"
        assert {(r["name"], r["kind"], r["namespaced"]) for r in listed["resources"]} == {
            ("pods", "PodMetrics", True), ("nodes", "NodeMetrics", False)}


def test_aggregated_discovery_lists_both_versions(sim: KubeSim) -> None:
    doc = httpx.get(sim.url + "/apis", headers={"Accept": AGGREGATED_ACCEPT,
                                               "Authorization": f"Bearer {sim.token}"}, timeout=30).json()
    [item] = [i for i in doc["items"] if i["metadata"]["name"] == "metrics.k8s.io"]
    assert [v["version"] for v in item["versions"]] == ["v1", "v1beta1"]  # preferred first
    for v in item["versions"]:
        assert v["freshness"] == "Current"
        assert {(r["resource"], r["responseKind"]["kind"], r["scope"]) for r in v["resources"]} == {
            ("pods", "PodMetrics", "Namespaced"), ("nodes", "NodeMetrics", "Cluster")}


@pytest.mark.parametrize("path", PATHS)
def test_v1_answers_what_v1beta1_answers(sim: KubeSim, path: str) -> None:
    new, old = ok(sim, V1 + path), ok(sim, V1BETA1 + path)
    assert _versions(new) == {"metrics.k8s.io/v1"} and _versions(old) == {"metrics.k8s.io/v1beta1"}
    assert _same(new) == _same(old)
    assert new["kind"] == old["kind"]


def test_the_kubernetes_client_reads_v1(objects: client.CustomObjectsApi, promql: PromQL) -> None:
    pods = objects.list_namespaced_custom_object("metrics.k8s.io", "v1", "web", "pods")
    assert pods["kind"] == "PodMetricsList" and _versions(pods) == {"metrics.k8s.io/v1"}
    cpu = cores(promql.vector(CPU), "namespace", "pod", "container")
    got = {(i["metadata"]["name"], c["name"]): c["usage"]["cpu"] for i in pods["items"] for c in i["containers"]}
    assert got == {(pod, container): f"{m}m" for (ns, pod, container), m in cpu.items()
                   if ns == "web" and pod in ("web-1", "web-2", "web-partial")}
    node = objects.get_cluster_custom_object("metrics.k8s.io", "v1", "nodes", "node-1")
    assert (node["kind"], node["apiVersion"], node["metadata"]["name"]) == ("NodeMetrics", "metrics.k8s.io/v1",
                                                                             "node-1")


def test_kubectl_get_raw_v1(sim: KubeSim) -> None:
    doc = json.loads(kubectl_ok(sim.kubeconfig_path, "get", "--raw", f"{V1}/namespaces/shop/pods/shop-1"))
    assert (doc["kind"], doc["apiVersion"], doc["metadata"]["namespace"]) == ("PodMetrics", "metrics.k8s.io/v1",
                                                                              "shop")


def test_kubectl_top_reads_v1(sim: KubeSim, promql: PromQL) -> None:
    """kubectl 1.37 asks v1 when the group serves it (kubernetes PR #139726): the paths it
    requests, from its own request log (-v=6), and the numbers it prints from them."""
    done = run_kubectl(sim.kubeconfig_path, "top", "pods", "-n", "shop", "-v=6")
    assert done.returncode == 0, done.stderr
    asked = [u for u in re.findall(r'url="([^"]+)"', done.stderr) if "/apis/metrics.k8s.io/" in u]
    assert [u.split("/apis/metrics.k8s.io/")[1] for u in asked] == ["v1/namespaces/shop/pods"], asked
    rows = {r[0]: r[1] for r in top(sim, "pods", "-n", "shop")}
    cpu = cores(promql.vector(CPU), "namespace", "pod")
    assert rows == {pod: f"{cpu['shop', pod]}m" for pod in ("shop-1", "web-1")}


def test_openapi_describes_both_versions(sim: KubeSim, adapter: AdapterProcess) -> None:
    index = adapter.get("/openapi/v3").json()["paths"]
    assert {"apis/metrics.k8s.io/v1", "apis/metrics.k8s.io/v1beta1"} <= set(index)
    for version in ("v1", "v1beta1"):
        doc = adapter.get(index[f"apis/metrics.k8s.io/{version}"]["serverRelativeURL"]).json()
        assert {p for p in doc["paths"]} == {f"/apis/metrics.k8s.io/{version}{p.replace('web-1', '{name}')}"
                                             .replace("/web/", "/{namespace}/").replace("node-1", "{name}")
                                             for p in PATHS}
        for kind in ("PodMetrics", "PodMetricsList", "NodeMetrics", "NodeMetricsList"):
            assert doc["components"]["schemas"][kind]["x-kubernetes-group-version-kind"] == [
                {"group": "metrics.k8s.io", "version": version, "kind": kind}]
    v2 = adapter.get("/openapi/v2").json()
    assert {f"{V1}/nodes", f"{V1BETA1}/nodes"} <= set(v2["paths"])
    assert v2["definitions"]["PodMetrics"]["x-kubernetes-group-version-kind"] == [
        {"group": "metrics.k8s.io", "version": v, "kind": "PodMetrics"} for v in ("v1", "v1beta1")]


def test_kubectl_get_uses_the_preferred_version(sim: KubeSim, tmp_path: Path) -> None:
    """A client naming no version takes the group's preferred one: `kubectl get` of the
    metrics resources reads v1."""
    cache = ("--cache-dir", str(tmp_path))
    pods = json.loads(kubectl_ok(sim.kubeconfig_path, "get", "pods.metrics.k8s.io", "-n", "shop", "-o", "json",
                                 *cache))
    assert {i["apiVersion"] for i in pods["items"]} == {"metrics.k8s.io/v1"}
    assert sorted(i["metadata"]["name"] for i in pods["items"]) == ["shop-1", "web-1"]
    node = json.loads(kubectl_ok(sim.kubeconfig_path, "get", "nodes.metrics.k8s.io", "node-2", "-o", "json", *cache))
    assert (node["kind"], node["apiVersion"]) == ("NodeMetrics", "metrics.k8s.io/v1")
