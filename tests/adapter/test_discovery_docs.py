"""Discovery documents, OpenAPI, health and self-metrics, as the aggregator fetches them."""

from __future__ import annotations

import pytest

AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"


def test_apis_answers_plain_group_list_even_for_aggregated_accept(adapter):
    resp = adapter.get("/apis", headers={"Accept": AGGREGATED})
    assert resp.status_code == 200
    assert resp.headers["content-type"] == "application/json"  # not the aggregated type: clients fall back
    body = resp.json()
    assert body["kind"] == "APIGroupList"
    groups = {g["name"]: g for g in body["groups"]}
    assert groups["custom.metrics.k8s.io"]["preferredVersion"]["version"] == "v1beta2"
    assert [v["version"] for v in groups["custom.metrics.k8s.io"]["versions"]] == ["v1beta2", "v1beta1"]
    assert [v["version"] for v in groups["external.metrics.k8s.io"]["versions"]] == ["v1beta1"]


@pytest.mark.parametrize(
    "group,preferred", [("custom.metrics.k8s.io", "v1beta2"), ("external.metrics.k8s.io", "v1beta1")]
)
def test_group_documents(adapter, group, preferred):
    body = adapter.get(f"/apis/{group}").json()
    assert body["kind"] == "APIGroup" and body["name"] == group
    assert body["preferredVersion"] == {"groupVersion": f"{group}/{preferred}", "version": preferred}


EXPECTED_CUSTOM = {
    ("pods/http_requests", True),
    ("namespaces/http_requests", False),
    ("pods/jobs_processed_per_second", True),
    ("pods/jobs_failed_per_second", True),
    ("pods/busy_ratio", True),
    ("deployments.apps/deployment_queue_depth", True),
    ("nodes/node_load", False),
    ("namespaces/namespace_quota_used", False),
}


@pytest.mark.parametrize("version", ["v1beta1", "v1beta2"])
def test_custom_resource_list(adapter, version):
    body = adapter.get(f"/apis/custom.metrics.k8s.io/{version}").json()
    assert body["kind"] == "APIResourceList" and body["groupVersion"] == f"custom.metrics.k8s.io/{version}"
    got = {(r["name"], r["namespaced"]) for r in body["resources"]}
    assert got >= EXPECTED_CUSTOM
    assert not any("seconds" in name for name, _ in got)  # isNot filter
    for r in body["resources"]:
        assert r["kind"] == "MetricValueList" and r["verbs"] == ["get"]


def test_external_resource_list(adapter):
    body = adapter.get("/apis/external.metrics.k8s.io/v1beta1").json()
    assert {r["name"] for r in body["resources"]} == {"queue_messages_ready", "cluster_queue"}
    assert all(r["kind"] == "ExternalMetricValueList" and r["namespaced"] for r in body["resources"])


def test_openapi_documents_download(adapter):
    v2 = adapter.get(
        "/openapi/v2", headers={"Accept": "application/com.github.proto-openapi.spec.v2@v1.0+protobuf,application/json"}
    )
    assert v2.status_code == 200 and v2.json()["swagger"] == "2.0"
    assert any("custom.metrics.k8s.io/v1beta2" in p for p in v2.json()["paths"])
    index = adapter.get("/openapi/v3").json()["paths"]
    assert set(index) == {
        "apis/custom.metrics.k8s.io/v1beta1",
        "apis/custom.metrics.k8s.io/v1beta2",
        "apis/external.metrics.k8s.io/v1beta1",
    }
    for entry in index.values():
        doc = adapter.get(entry["serverRelativeURL"])
        assert doc.status_code == 200 and doc.json()["openapi"].startswith("3.")


def test_health_endpoints(adapter):
    for path in ("/healthz", "/livez", "/readyz"):
        resp = adapter.get(path)
        assert resp.status_code == 200 and resp.text == "ok"


def test_self_metrics(adapter):
    adapter.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/http_requests")
    adapter.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-1/no_such_metric")
    text = adapter.get("/metrics").text
    route = 'path="/apis/custom.metrics.k8s.io/{version}/{rest:path}"'
    assert f'promscaler_adapter_requests_total{{code="200",{route}}}' in text
    assert f'promscaler_adapter_requests_total{{code="404",{route}}}' in text
    assert 'promscaler_adapter_prometheus_query_duration_seconds_count{endpoint="query",outcome="success"}' in text
    assert "promscaler_adapter_relist_duration_seconds_count" in text
    series = [line for line in text.splitlines() if line.startswith("promscaler_adapter_discovered_series ")]
    assert series and float(series[0].split()[1]) > 0
    assert 'promscaler_adapter_discovered_metrics{api="external"} 2.0' in text
