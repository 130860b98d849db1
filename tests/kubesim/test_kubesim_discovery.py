"""Aggregated discovery (apidiscovery.k8s.io/v2) as kube-apiserver serves it: content negotiation
on `/api` and `/apis`, the real kubectl (client-go asks for it by default) reading CRDs and their
/scale from it, the same answers as the legacy documents, and an APIService's versions, Stale
while its backend does not answer."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kubesim.apiserver import KubeSim
from kubesim.net import free_port

from ..support import discovery_requests, kubectl_ok, run_kubectl

V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
CLIENT_GO = f"{V2},application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"
WIDGETS = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "widgets.example.com"},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "shortNames": ["wd"]},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "subresources": {"scale": {"specReplicasPath": ".spec.replicas",
                                                             "statusReplicasPath": ".status.replicas"}},
                                  "schema": {"openAPIV3Schema": {"type": "object",
                                                                 "x-kubernetes-preserve-unknown-fields": True}}}]}}


@pytest.fixture(scope="module")
def sim() -> Iterator[KubeSim]:
    with KubeSim(ready_delay=0, requests=True) as s:
        s.apply(WIDGETS)
        s.apply({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1", "namespace": "default"},
                 "spec": {"replicas": 1}})
        yield s


def get(sim: KubeSim, path: str, accept: str | None) -> httpx.Response:
    headers = {"Authorization": f"Bearer {sim.token}"} | ({"Accept": accept} if accept is not None else {})
    return httpx.get(sim.url + path, headers=headers)


@pytest.mark.parametrize("accept,aggregated", [
    (CLIENT_GO, True),
    (f"{V2},application/json", True),
    (f"application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,{V2}", True),
    ("application/json", False),
    (None, False),
    ("*/*", False),
    ("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json", False),
    (f"application/json,{V2}", False),  # the client prefers the legacy document
])
def test_content_negotiation(sim: KubeSim, accept: str | None, aggregated: bool) -> None:
    for path, legacy_kind in (("/api", "APIVersions"), ("/apis", "APIGroupList")):
        r = get(sim, path, accept)
        assert r.status_code == 200
        if aggregated:
            assert r.headers["content-type"] == V2
            assert (r.json()["kind"], r.json()["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
        else:
            assert r.headers["content-type"] == "application/json" and r.json()["kind"] == legacy_kind


def test_the_documents_hold_what_the_legacy_ones_do(sim: KubeSim) -> None:
    [core] = get(sim, "/api", CLIENT_GO).json()["items"]
    assert core["metadata"].get("name", "") == "" and [v["version"] for v in core["versions"]] == ["v1"]
    pods = next(r for r in core["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"} and pods["scope"] == "Namespaced"
    assert pods["singularResource"] == "pod" and pods["shortNames"] == ["po"] and core["versions"][0]["freshness"] \
        == "Current"
    groups = {i["metadata"]["name"]: i for i in get(sim, "/apis", CLIENT_GO).json()["items"]}
    legacy = get(sim, "/apis", None).json()["groups"]
    assert list(groups) == [g["name"] for g in legacy]  # same groups, same order
    for g in legacy:
        assert groups[g["name"]]["versions"][0]["version"] == g["preferredVersion"]["version"]
    deployments = next(r for r in groups["apps"]["versions"][0]["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert {s["subresource"]: s["responseKind"] for s in deployments["subresources"]} == {
        "status": {"group": "apps", "version": "v1", "kind": "Deployment"},
        "scale": {"group": "autoscaling", "version": "v1", "kind": "Scale"}}
    [widgets] = groups["example.com"]["versions"][0]["resources"]
    assert (widgets["resource"], widgets["singularResource"], widgets["shortNames"]) == ("widgets", "widget", ["wd"])
    assert [s["subresource"] for s in widgets["subresources"]] == ["scale"]


def test_kubectl_reads_crds_from_two_requests_and_lists_what_the_legacy_walk_lists(sim: KubeSim,
                                                                                   tmp_path: Path) -> None:
    assert sim.requests is not None
    seen = len(sim.requests)
    aggregated = kubectl_ok(sim.kubeconfig_path, "api-resources", "-o", "wide", "--cache-dir", str(tmp_path / "a"))
    assert discovery_requests(sim, seen) == ["/api", "/apis"]
    sim.aggregated_discovery = False  # a server without it
    try:
        seen = len(sim.requests)
        legacy = kubectl_ok(sim.kubeconfig_path, "api-resources", "-o", "wide", "--cache-dir", str(tmp_path / "l"))
        walked = discovery_requests(sim, seen)
    finally:
        sim.aggregated_discovery = True
    assert "/api/v1" in walked and "/apis/example.com/v1" in walked and "/apis/apps/v1" in walked
    assert aggregated == legacy
    row = next(line.split() for line in aggregated.splitlines() if line.startswith("widgets "))
    assert row[:5] == ["widgets", "wd", "example.com/v1", "true", "Widget"]


def test_kubectl_gets_and_scales_a_custom_resource(sim: KubeSim, tmp_path: Path) -> None:
    cache = ["--cache-dir", str(tmp_path)]
    got = kubectl_ok(sim.kubeconfig_path, "get", "wd", "-n", "default", "-o", "name", *cache)
    assert got == "widget.example.com/w1\n"
    # /scale found through the aggregated document's subresources
    kubectl_ok(sim.kubeconfig_path, "scale", "widget/w1", "-n", "default", "--replicas", "3", *cache)
    assert sim.get("example.com/v1", "Widget", "default", "w1")["spec"]["replicas"] == 3


def test_apiservice_versions_come_from_the_backend_and_are_stale_while_it_is_down(
        sim: KubeSim, upstream: str, tmp_path: Path) -> None:
    def version(group: str) -> dict:
        [item] = [i for i in get(sim, "/apis", CLIENT_GO).json()["items"] if i["metadata"]["name"] == group]
        [v] = item["versions"]
        return v

    sim.set_aggregated_api("custom.metrics.k8s.io", upstream, versions=("v1beta2",))
    sim.set_aggregated_api("external.metrics.k8s.io", f"http://127.0.0.1:{free_port()}")  # nothing listens
    try:
        custom = version("custom.metrics.k8s.io")
        assert custom["freshness"] == "Current" and custom["version"] == "v1beta2"
        # the backend's legacy `pods/http_requests`: a subresource of a placeholder `pods`, as
        # kube-aggregator converts it
        [pods] = custom["resources"]
        assert pods["resource"] == "pods" and pods["responseKind"]["kind"] == ""
        assert [(s["subresource"], s["responseKind"]["kind"]) for s in pods["subresources"]] == [
            ("http_requests", "MetricValueList")]
        external = version("external.metrics.k8s.io")
        assert (external["version"], external["freshness"], external.get("resources", [])) == (
            "v1beta1", "Stale", [])
        # kubectl still works with one aggregated API down
        done = run_kubectl(sim.kubeconfig_path, "get", "deployments", "-A", "--cache-dir", str(tmp_path))
        assert done.returncode == 0, done.stderr
    finally:
        sim.set_aggregated_api("custom.metrics.k8s.io", None)
        sim.set_aggregated_api("external.metrics.k8s.io", None)
