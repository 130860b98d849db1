"""metrics.k8s.io on the TLS port behind front-proxy authentication (issue 23): the real adapter
serving resourceRules, reached as kube-apiserver's aggregator reaches metrics-server (its
front-proxy client certificate and X-Remote-User headers), authorized through KubeSim's
SubjectAccessReviews; values against the same PromQL asked of Prometheus directly."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
import yaml

from adapter.security import pki
from kubesim.prometheus import start_backfilled
from kubesim.resourceseries import DEFAULT_RESOURCE_RULES, Container, NodeSeries, PodSeries, openmetrics
from promscaler.quantity import parse_quantity

from ..support import wait_for
from .test_adapter_secure import HPA, RULES, Env, _as

GROUP = "/apis/metrics.k8s.io/v1beta1"
MiB = 1024 * 1024
POD_CPU = 'sum by (namespace, pod, container) (rate(container_cpu_usage_seconds_total{container!="",pod!=""}[3m]))'
POD_MEMORY = 'sum by (namespace, pod, container) (container_memory_working_set_bytes{container!="",pod!=""})'


@pytest.fixture(scope="module")
def env(tmp_path_factory) -> Iterator[Env]:
    from kubesim.apiserver import KubeSim

    tmp = tmp_path_factory.mktemp("resource-secure")
    series = openmetrics([PodSeries("web", "web-1", (Container("app", 0.2505, 200 * MiB),)),
                          PodSeries("web", "web-2", (Container("app", 1.5005, 100_000_000),))],
                         [NodeSeries("node-1", {"user": 0.5, "system": 0.25}, 3.0, 16 * 1024**3, 10 * 1024**3)])
    with start_backfilled(series) as prom, KubeSim(ready_delay=0.0) as sim:
        for pod in ("web-1", "web-2"):
            sim.apply({"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"name": pod, "namespace": "web", "labels": {"app": "web"}},
                       "spec": {"nodeName": "node-1", "containers": [{"name": "app", "image": "web"}]},
                       "status": {"phase": "Running"}})
        sim.apply({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1"}})
        # what metrics-server's users hold: the HPA lists pods' metrics; kubectl top reads nodes too
        sim.allow(HPA, "list", "metrics.k8s.io", "pods")
        sim.allow("viewer", "get", "metrics.k8s.io", "nodes")
        for path in ("/apis", "/apis/metrics.k8s.io", "/apis/metrics.k8s.io/v1beta1", "/openapi/v2", "/openapi/v3",
                     "/openapi/v3/apis/metrics.k8s.io/v1beta1", "/readyz"):
            sim.allow("system:kube-aggregator", "get", "", path)
        rules = yaml.safe_load(RULES) | {"resourceRules": DEFAULT_RESOURCE_RULES}
        e = Env(tmp, sim, prom.url, rules=yaml.safe_dump(rules))
        try:
            e.wait_ready(60)
            yield e
        finally:
            e.stop()


def _expected(prom_url: str) -> dict[str, tuple[int, int]]:
    """pod -> (CPU, memory) milli-units of its one container, from Prometheus directly."""
    out: dict[str, list[int]] = {}
    for i, expr in enumerate((POD_CPU, POD_MEMORY)):
        body = httpx.get(f"{prom_url}/api/v1/query", params={"query": expr}, timeout=10).json()
        for r in body["data"]["result"]:
            out.setdefault(r["metric"]["pod"], [0, 0])[i] = int(float(r["value"][1]) * 1000)
    return {k: (v[0], v[1]) for k, v in out.items()}


def _served(body: dict) -> dict[str, tuple[int, int]]:
    return {i["metadata"]["name"]: (int(parse_quantity(i["containers"][0]["usage"]["cpu"]) * 1000),
                                    int(parse_quantity(i["containers"][0]["usage"]["memory"]) * 1000))
            for i in body["items"]}


def test_the_hpa_lists_pod_metrics_through_the_front_proxy(env: Env) -> None:
    # /readyz also waits for the pod and node caches
    assert wait_for(lambda: env.get("/readyz", env.ctx()).status_code == 200, 30), env.adapter.stderr()
    r = env.get(f"{GROUP}/namespaces/web/pods?labelSelector=app%3Dweb", env.aggregator(),
                _as(HPA, "system:serviceaccounts", "system:serviceaccounts:kube-system"))
    assert r.status_code == 200, r.text
    assert r.json()["kind"] == "PodMetricsList"
    prom_url = env.adapter.args[env.adapter.args.index("--prometheus-url") + 1]
    assert _served(r.json()) == _expected(prom_url)


def test_the_aggregator_discovers_the_group_and_its_openapi(env: Env) -> None:
    """What kube-apiserver reads from an APIService's backend, over TLS as the aggregator: the
    discovery documents and the OpenAPI describing metrics.k8s.io's kinds; and the probe that
    says the pod and node caches are synced."""
    def get(path: str) -> httpx.Response:
        r = env.get(path, env.aggregator(), _as("system:kube-aggregator"))
        assert r.status_code == 200, (path, r.text)
        return r

    assert "metrics.k8s.io" in [g["name"] for g in get("/apis").json()["groups"]]
    kinds = {r["name"]: r["kind"] for r in get(f"{GROUP}").json()["resources"]}
    assert kinds == {"pods": "PodMetrics", "nodes": "NodeMetrics"}
    v2 = get("/openapi/v2").json()
    assert v2["paths"][f"{GROUP}/namespaces/{{namespace}}/pods"]["get"]["responses"]["200"]["schema"] == {
        "$ref": "#/definitions/PodMetricsList"}
    url = get("/openapi/v3").json()["paths"]["apis/metrics.k8s.io/v1beta1"]["serverRelativeURL"]
    assert "NodeMetrics" in get(url).json()["components"]["schemas"]
    assert wait_for(lambda: "[+]resource-caches ok" in get("/readyz?verbose").text, 30), get("/readyz?verbose").text


def test_headers_without_the_front_proxy_certificate_are_not_trusted(env: Env) -> None:
    r = env.get(f"{GROUP}/nodes", env.ctx(), _as(HPA, "system:masters"))
    assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
    other = pki.issue(env.front_proxy_ca, "someone-else", client=True)  # the right CA, a name not allowed
    assert env.get(f"{GROUP}/nodes", env.ctx(other), _as(HPA, "system:masters")).status_code == 401


def test_authorization_names_the_verb_and_the_resource(env: Env) -> None:
    # the HPA may list pods' metrics, not read one node's
    r = env.get(f"{GROUP}/nodes/node-1", env.aggregator(), _as(HPA))
    assert r.status_code == 403
    assert r.json()["message"].startswith('nodes.metrics.k8s.io "node-1" is forbidden: User '
                                          f'"{HPA}" cannot get resource "nodes" in API group "metrics.k8s.io"')
    r = env.get(f"{GROUP}/nodes/node-1", env.aggregator(), _as("viewer"))
    assert r.status_code == 200 and r.json()["kind"] == "NodeMetrics"
    r = env.get(f"{GROUP}/pods", env.aggregator(), _as("viewer"))  # list pods: not granted to the viewer
    assert r.status_code == 403 and 'cannot list resource "pods" in API group "metrics.k8s.io"' in r.json()["message"]


def test_through_kubesims_aggregation_layer_over_tls(env: Env) -> None:
    """Client -> KubeSim (bearer token) -> adapter over TLS with the front-proxy certificate, as an
    APIService for metrics.k8s.io with caBundle = the serving CA routes `kubectl top` and the HPA."""
    env.aggregate_through_sim("metrics.k8s.io")
    env.sim.tokens["hpa-token"] = {"username": HPA, "groups": []}
    env.sim.tokens["eve-token"] = {"username": "eve", "groups": []}
    try:
        r = httpx.get(env.sim.url + f"{GROUP}/namespaces/web/pods", headers={"Authorization": "Bearer hpa-token"},
                      timeout=15)
        assert r.status_code == 200, r.text
        assert sorted(i["metadata"]["name"] for i in r.json()["items"]) == ["web-1", "web-2"]
        r = httpx.get(env.sim.url + f"{GROUP}/namespaces/web/pods", headers={"Authorization": "Bearer eve-token"},
                      timeout=15)
        assert r.status_code == 403 and 'User "eve" cannot list resource "pods"' in r.json()["message"]
    finally:
        env.sim.set_aggregated_api("metrics.k8s.io", None)
