"""TokenReview / SubjectAccessReview policy, metrics.k8s.io PodMetrics, and the APIService-style
proxy to a real upstream server (a tiny FastAPI app on a free port)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from pathlib import Path

import httpx
import pytest
import uvicorn
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from kubesim.apiserver import KubeSim
from kubesim.net import free_port, wait_http

from ..support import kubectl_ok
from .conftest import upstream_app
from .kubesim_objects import pod

# --- auth reviews ----------------------------------------------------------------------------


def test_token_review(sim: KubeSim, api: client.ApiClient) -> None:
    sim.tokens["alice-token"] = {"username": "alice", "groups": ["team-a"]}
    authn = client.AuthenticationV1Api(api)
    ok = authn.create_token_review({"spec": {"token": "alice-token"}})
    assert ok.status.authenticated is True
    assert ok.status.user.username == "alice" and "team-a" in ok.status.user.groups
    bad = authn.create_token_review({"spec": {"token": "wrong"}})
    assert bad.status.authenticated is False and bad.status.error


def test_subject_access_review(sim: KubeSim, api: client.ApiClient) -> None:
    authz = client.AuthorizationV1Api(api)

    def review(user: str, groups: list[str], verb: str, group: str, resource: str) -> bool:
        spec = {"user": user, "groups": groups,
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource, "namespace": "default"}}
        return authz.create_subject_access_review({"spec": spec}).status.allowed

    assert review("bob", [], "get", "custom.metrics.k8s.io", "pods") is False
    sim.allow("bob", "get", "custom.metrics.k8s.io", "*")
    assert review("bob", [], "get", "custom.metrics.k8s.io", "pods") is True
    assert review("bob", [], "list", "custom.metrics.k8s.io", "pods") is False
    sim.allow("readers", "list", "*", "pods")
    assert review("carol", ["readers"], "list", "custom.metrics.k8s.io", "pods") is True
    assert review("carol", ["readers"], "list", "", "secrets") is False
    assert review("root", ["system:masters"], "delete", "", "secrets") is True
    non_resource = authz.create_subject_access_review({"spec": {"user": "dave", "nonResourceAttributes": {
        "verb": "get", "path": "/metrics"}}})
    assert non_resource.status.allowed is False and "dave" in non_resource.status.reason
    sim.allow("dave", "get", "", "/metrics")
    assert authz.create_subject_access_review({"spec": {"user": "dave", "nonResourceAttributes": {
        "verb": "get", "path": "/metrics"}}}).status.allowed is True


def test_review_apis_can_fail(sim: KubeSim, api: client.ApiClient) -> None:
    before = sim.review_counts
    sim.fail_auth_reviews = True
    try:
        for call, body in ((client.AuthenticationV1Api(api).create_token_review, {"spec": {"token": "x"}}),
                           (client.AuthorizationV1Api(api).create_subject_access_review,
                            {"spec": {"user": "x", "resourceAttributes": {"verb": "get"}}})):
            with pytest.raises(ApiException) as exc:
                call(body)
            assert exc.value.status == 503 and json.loads(exc.value.body)["reason"] == "ServiceUnavailable"
    finally:
        sim.fail_auth_reviews = False
    after = sim.review_counts
    assert after["tokenreviews"] == before["tokenreviews"] + 1
    assert after["subjectaccessreviews"] == before["subjectaccessreviews"] + 1


def test_authenticate_option_rejects_unknown_tokens() -> None:
    with KubeSim(authenticate=True) as strict:
        r = httpx.get(f"{strict.url}/api/v1/namespaces")
        assert r.status_code == 401 and r.json()["reason"] == "Unauthorized"
        r = httpx.get(f"{strict.url}/api/v1/namespaces", headers={"Authorization": f"Bearer {strict.token}"})
        assert r.status_code == 200


# --- metrics.k8s.io --------------------------------------------------------------------------


def test_pod_metrics(sim: KubeSim, ns: str, api: client.ApiClient) -> None:
    sim.apply(pod("web-1", {"app": "web"}, phase="Running", namespace=ns))
    sim.apply(pod("web-2", {"app": "web"}, phase="Running", namespace=ns))
    sim.apply(pod("db-1", {"app": "db"}, phase="Running", namespace=ns))
    sim.set_pod_usage(ns, "web-1", {"app": {"cpu": "250m", "memory": "200Mi"}})
    sim.set_pod_usage(ns, "db-1", {"app": {"cpu": "1", "memory": "1Gi"}})
    sim.set_pod_usage(ns, "gone", {"app": {"cpu": "1"}})  # no such pod: not reported
    custom = client.CustomObjectsApi(api)
    listed = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", ns, "pods", label_selector="app=web")
    assert listed["kind"] == "PodMetricsList"
    assert [(m["metadata"]["name"], m["containers"]) for m in listed["items"]] == [
        ("web-1", [{"name": "app", "usage": {"cpu": "250m", "memory": "200Mi"}}])]
    assert listed["items"][0]["metadata"]["labels"] == {"app": "web"} and listed["items"][0]["window"] == "30s"
    all_pods = custom.list_namespaced_custom_object("metrics.k8s.io", "v1beta1", ns, "pods")
    assert sorted(m["metadata"]["name"] for m in all_pods["items"]) == ["db-1", "web-1"]
    one = custom.get_namespaced_custom_object("metrics.k8s.io", "v1beta1", ns, "pods", "db-1")
    assert one["kind"] == "PodMetrics" and one["containers"][0]["usage"]["cpu"] == "1"
    with pytest.raises(ApiException) as exc:
        custom.get_namespaced_custom_object("metrics.k8s.io", "v1beta1", ns, "pods", "web-2")
    assert exc.value.status == 404
    resources = httpx.get(f"{sim.url}/apis/metrics.k8s.io/v1beta1").json()["resources"]
    assert {r["name"]: r["kind"] for r in resources} == {"pods": "PodMetrics", "nodes": "NodeMetrics"}
    top = kubectl_ok(sim.kubeconfig_path, "-n", ns, "top", "pods", "-l", "app=web")
    assert [line.split() for line in top.splitlines()[1:]] == [["web-1", "250m", "200Mi"]]


# --- aggregation -----------------------------------------------------------------------------


def test_aggregation_proxy(sim: KubeSim, upstream: str, api: client.ApiClient) -> None:
    sim.set_aggregated_api("custom.metrics.k8s.io", upstream)
    try:
        groups = {g["name"]: g for g in httpx.get(f"{sim.url}/apis").json()["groups"]}
        assert groups["custom.metrics.k8s.io"]["preferredVersion"]["version"] == "v1beta2"
        assert httpx.get(f"{sim.url}/apis/custom.metrics.k8s.io").json()["kind"] == "APIGroup"
        # through the aggregator to the upstream, query string and caller passed on
        r = httpx.get(f"{sim.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/http_requests",
                      params={"metricLabelSelector": "verb=GET"}, headers={"Authorization": f"Bearer {sim.token}"})
        body = r.json()
        assert r.status_code == 200 and body["kind"] == "MetricValueList"
        assert body["items"][0]["value"] == "500m" and body["query"] == "metricLabelSelector=verb%3DGET"
        assert body["user"] == "kubesim-admin"  # the caller, asserted as the aggregator does
        custom = client.CustomObjectsApi(api)
        got = custom.get_namespaced_custom_object(
            "custom.metrics.k8s.io", "v1beta2", "default", "pods", "web-1/http_requests"
        )
        assert got["items"][0]["describedObject"]["name"] == "web-1"
        # the upstream's status codes and Status bodies come back unchanged
        r = httpx.get(f"{sim.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/missing")
        assert r.status_code == 404 and r.json()["message"] == "the server could not find the metric missing for pods"
        assert (
            httpx.get(f"{sim.url}/apis/custom.metrics.k8s.io/v1beta2").json()["resources"][0]["name"]
            == "pods/http_requests"
        )
    finally:
        sim.set_aggregated_api("custom.metrics.k8s.io", None)
    assert httpx.get(f"{sim.url}/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/x").status_code == 404


def test_metrics_api_goes_to_a_registered_backend_and_back(sim: KubeSim, ns: str, upstream: str) -> None:
    """metrics.k8s.io is built in (what metrics-server would report) until an APIService takes
    the group, as an adapter serving resourceRules does; removing it restores the built-in one."""
    sim.apply(pod("local-1", {"app": "local"}, phase="Running", namespace=ns))
    sim.set_pod_usage(ns, "local-1", {"app": {"cpu": "5m", "memory": "5Mi"}})
    path = f"{sim.url}/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods"
    auth = {"Authorization": f"Bearer {sim.token}"}
    names = lambda: [i["metadata"]["name"] for i in httpx.get(path, headers=auth).json()["items"]]  # noqa: E731
    assert names() == ["local-1"]
    sim.set_aggregated_api("metrics.k8s.io", upstream)
    try:
        assert names() == ["from-upstream"]
    finally:
        sim.set_aggregated_api("metrics.k8s.io", None)
    assert names() == ["local-1"]


def test_only_the_registered_versions_go_to_the_backend(sim: KubeSim, ns: str, upstream: str) -> None:
    """An APIService is one group version: kube-aggregator proxies exactly the versions registered
    (a request for another is the local server's, a 404; Kubernetes' metrics API graduation guide).
    The adapter's manifests register metrics.k8s.io v1 and v1beta1 by default; an older cluster's
    only v1beta1."""
    auth = {"Authorization": f"Bearer {sim.token}"}

    def pods(version: str) -> httpx.Response:
        return httpx.get(f"{sim.url}/apis/metrics.k8s.io/{version}/namespaces/{ns}/pods", headers=auth)

    sim.set_aggregated_api("metrics.k8s.io", upstream)
    try:
        group = httpx.get(f"{sim.url}/apis/metrics.k8s.io", headers=auth).json()
        assert [v["version"] for v in group["versions"]] == ["v1", "v1beta1"]
        assert group["preferredVersion"]["version"] == "v1"
        for version in ("v1", "v1beta1"):
            body = pods(version).json()
            assert body["apiVersion"] == f"metrics.k8s.io/{version}" and body["items"][0]["metadata"]["name"] == (
                "from-upstream")
        sim.set_aggregated_api("metrics.k8s.io", upstream, versions=("v1beta1",))
        assert pods("v1").status_code == 404 and pods("v1").json()["reason"] == "NotFound"
        assert pods("v1beta1").json()["items"][0]["metadata"]["name"] == "from-upstream"
        group = httpx.get(f"{sim.url}/apis/metrics.k8s.io", headers=auth).json()
        assert [v["version"] for v in group["versions"]] == ["v1beta1"]
    finally:
        sim.set_aggregated_api("metrics.k8s.io", None)


def test_aggregation_backend_down_is_503(sim: KubeSim) -> None:
    sim.set_aggregated_api("external.metrics.k8s.io", f"http://127.0.0.1:{free_port()}")
    try:
        r = httpx.get(f"{sim.url}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/queue_messages_ready")
        assert r.status_code == 503
        body = r.json()
        assert (body["kind"], body["reason"], body["code"]) == ("Status", "ServiceUnavailable", 503)
        assert "external.metrics.k8s.io" in body["message"]
    finally:
        sim.set_aggregated_api("external.metrics.k8s.io", None)


# --- aggregation over TLS with a front-proxy client certificate --------------------------------


def _pki(tmp: Path) -> dict[str, str]:
    """A CA, a serving certificate for 127.0.0.1 and a client certificate, as PEM files."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(subject: str, key, issuer_name: x509.Name, issuer_key, ca: bool, ip: bool = False) -> x509.Certificate:
        b = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
             .issuer_name(issuer_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
             .not_valid_before(now - datetime.timedelta(minutes=1)).not_valid_after(now + datetime.timedelta(hours=1))
             .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
        if ip:
            b = b.add_extension(
                x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
            )
        return b.sign(issuer_key, hashes.SHA256())

    def write(name: str, data: bytes) -> str:
        (tmp / name).write_bytes(data)
        return str(tmp / name)

    def key_pem(k) -> bytes:
        return k.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca = cert("test-ca", ca_key, ca_name, ca_key, ca=True)
    out = {"ca": write("ca.crt", ca.public_bytes(serialization.Encoding.PEM))}
    for name, ip in (("server", True), ("front-proxy-client", False)):
        k = ec.generate_private_key(ec.SECP256R1())
        out[name] = write(
            f"{name}.crt", cert(name, k, ca_name, ca_key, ca=False, ip=ip).public_bytes(serialization.Encoding.PEM)
        )
        out[f"{name}-key"] = write(f"{name}.key", key_pem(k))
    return out


def test_aggregation_over_tls_with_client_certificate(sim: KubeSim, tmp_path: Path) -> None:
    pki = _pki(tmp_path)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            upstream_app(),
            host="127.0.0.1",
            port=port,
            log_level="critical",
            ssl_certfile=pki["server"],
            ssl_keyfile=pki["server-key"],
            ssl_ca_certs=pki["ca"],
            ssl_cert_reqs=ssl.CERT_REQUIRED,
            timeout_graceful_shutdown=1,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"https://127.0.0.1:{port}"
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/default/pods/web-1/http_requests"
    try:
        client_tls = ssl.create_default_context(cafile=pki["ca"])
        client_tls.load_cert_chain(pki["front-proxy-client"], pki["front-proxy-client-key"])
        wait_http(f"{url}/apis/custom.metrics.k8s.io/v1beta2", verify=client_tls)
        sim.set_aggregated_api("custom.metrics.k8s.io", url, verify=pki["ca"],
                               cert=(pki["front-proxy-client"], pki["front-proxy-client-key"]))
        r = httpx.get(sim.url + path)
        assert r.status_code == 200 and r.json()["items"][0]["value"] == "500m"
        sim.set_aggregated_api("custom.metrics.k8s.io", url, verify=pki["ca"], timeout=1)  # no client certificate
        r = httpx.get(sim.url + path)
        assert r.status_code == 503 and r.json()["reason"] == "ServiceUnavailable"
    finally:
        sim.set_aggregated_api("custom.metrics.k8s.io", None)
        server.should_exit = True
        thread.join(timeout=10)
