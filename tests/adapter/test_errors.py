"""Errors are metav1.Status with the right code; selectors and names can never inject PromQL."""

from __future__ import annotations

import httpx
import pytest

C = "/apis/custom.metrics.k8s.io/v1beta2"
E = "/apis/external.metrics.k8s.io/v1beta1"


def status(resp, code: int, reason: str) -> dict:
    assert resp.status_code == code, resp.text
    body = resp.json()
    assert body["kind"] == "Status" and body["apiVersion"] == "v1" and body["status"] == "Failure"
    assert body["code"] == code and body["reason"] == reason and body["message"]
    return body


def test_unknown_metric_is_404(adapter):
    body = status(adapter.get(f"{C}/namespaces/web/pods/web-1/no_such_metric"), 404, "NotFound")
    assert "no_such_metric" in body["message"]
    status(adapter.get(f"{E}/namespaces/web/no_such_metric"), 404, "NotFound")
    status(adapter.get(f"{C}/namespaces/web/widgets/w-1/http_requests"), 404, "NotFound")


def test_unknown_object_is_404_not_an_empty_list(adapter):
    body = status(adapter.get(f"{C}/namespaces/web/pods/not-a-pod/http_requests"), 404, "NotFound")
    assert "not-a-pod" in body["message"]


def test_unserved_version_and_unknown_path(adapter):
    status(adapter.get("/apis/custom.metrics.k8s.io/v2"), 404, "NotFound")
    status(adapter.get("/nothing/here"), 404, "NotFound")
    status(httpx.post(adapter.url + f"{C}/namespaces/web/pods/web-1/http_requests"), 405, "MethodNotAllowed")


@pytest.mark.parametrize("path", [f"{C}/namespaces/web/pods/http_requests", f"{C}/a/b/c/d/e/f", f"{E}/namespaces/web"])
def test_malformed_path_is_400(adapter, path):
    status(adapter.get(path), 400, "BadRequest")


@pytest.mark.parametrize("selector", ["app in (a", "a=b=c", "!", "app notin", "app=(v)", "=v"])
def test_bad_selector_is_400(adapter, selector):
    body = status(adapter.get(f"{E}/namespaces/web/queue_messages_ready", params={"labelSelector": selector}),
                  400, "BadRequest")
    assert "labelSelector" in body["message"]
    status(adapter.get(f"{C}/namespaces/web/pods/web-1/http_requests", params={"metricLabelSelector": selector}),
           400, "BadRequest")


def test_operators_prometheus_cannot_express_are_400(adapter):
    body = status(adapter.get(f"{E}/namespaces/web/queue_messages_ready", params={"labelSelector": "queue>3"}),
                  400, "BadRequest")
    assert "not supported" in body["message"]
    body = status(adapter.get(f"{E}/namespaces/web/queue_messages_ready",
                              params={"labelSelector": "example.com/tier=a"}), 400, "BadRequest")
    assert "Prometheus label name" in body["message"]


INJECTIONS = [
    'queue=orders"}) or vector(1) #',
    'queue=orders",queue=~".+',
    "queue in (orders|payments)",
    'queue=a\\"b',
    "queue=orders}",
]


@pytest.mark.parametrize("selector", INJECTIONS)
def test_selector_injection_is_rejected(adapter, selector):
    status(adapter.get(f"{E}/namespaces/web/queue_messages_ready", params={"labelSelector": selector}),
           400, "BadRequest")


@pytest.mark.parametrize("name", [
    'web-1"} or vector(1) or {__name__="x',
    "web-.*",
    "web-1|web-2",
    'web-1",pod=~".*',
    "web-1\\",
])
def test_object_names_are_quoted_never_interpreted(adapter, name):
    from urllib.parse import quote

    resp = adapter.get(f"{C}/namespaces/web/pods/{quote(name, safe='')}/http_requests")
    status(resp, 404, "NotFound")


def test_namespace_injection_returns_nothing(adapter):
    from urllib.parse import quote

    ns = quote('web",namespace=~".*', safe="")
    resp = adapter.get(f"{C}/namespaces/{ns}/pods/*/http_requests")
    assert resp.status_code == 200 and resp.json()["items"] == []
    resp = adapter.get(f"{E}/namespaces/{quote('web|shop', safe='')}/queue_messages_ready")
    assert resp.status_code == 200 and resp.json()["items"] == []


def test_wildcard_with_label_selector_without_cluster_is_400(adapter):
    body = status(adapter.get(f"{C}/namespaces/web/pods/%2A/http_requests", params={"labelSelector": "app=web"}),
                  400, "BadRequest")
    assert "--kubeconfig" in body["message"]


def test_root_scoped_resource_under_a_namespace_is_404(adapter):
    body = status(adapter.get(f"{C}/namespaces/web/nodes/node-1/node_load"), 404, "NotFound")
    assert "not namespaced" in body["message"]
