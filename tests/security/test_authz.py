"""Authorization: the attributes sent in SubjectAccessReviews (as Kubernetes' RequestInfo makes
them), allow / deny / unavailable against KubeSim over HTTP, caching, 403 wording, always-allow paths,
and the outcome counters on /metrics."""

from __future__ import annotations

import pytest

from adapter.security.authn import UserInfo
from adapter.security.authz import forbidden_message
from adapter.security.requestinfo import RequestInfo, request_info

from .conftest import PKI, front_proxy_cert, get, serve, settings, until_not

HPA = "system:serviceaccount:kube-system:horizontal-pod-autoscaler"
CM = "custom.metrics.k8s.io"


@pytest.mark.parametrize("method,path,query,expected", [
    ("GET", f"/apis/{CM}/v1beta2/namespaces/web/pods/*/http_requests", "labelSelector=app%3Dweb",
     RequestInfo(True, f"/apis/{CM}/v1beta2/namespaces/web/pods/*/http_requests", "get", CM, "v1beta2", "web",
                 "pods", "http_requests", "*")),
    ("GET", f"/apis/{CM}/v1beta1/namespaces/web/metrics/queue_len", "",
     RequestInfo(True, f"/apis/{CM}/v1beta1/namespaces/web/metrics/queue_len", "get", CM, "v1beta1", "web",
                 "metrics", "", "queue_len")),
    ("GET", f"/apis/{CM}/v1beta1/nodes/n1/cpu_busy", "",
     RequestInfo(True, f"/apis/{CM}/v1beta1/nodes/n1/cpu_busy", "get", CM, "v1beta1", "", "nodes", "cpu_busy", "n1")),
    ("GET", "/apis/external.metrics.k8s.io/v1beta1/namespaces/q/queue_messages_ready", "",
     RequestInfo(True, "/apis/external.metrics.k8s.io/v1beta1/namespaces/q/queue_messages_ready", "list",
                 "external.metrics.k8s.io", "v1beta1", "q", "queue_messages_ready", "", "")),
    ("GET", f"/apis/{CM}/v1beta1/namespaces/web/pods", "",
     RequestInfo(True, f"/apis/{CM}/v1beta1/namespaces/web/pods", "list", CM, "v1beta1", "web", "pods")),
    ("GET", "/api/v1/namespaces/web", "",
     RequestInfo(True, "/api/v1/namespaces/web", "get", "", "v1", "web", "namespaces", "", "web")),
    ("GET", "/apis/apps/v1/watch/namespaces/web/deployments", "",
     RequestInfo(True, "/apis/apps/v1/watch/namespaces/web/deployments", "watch", "apps", "v1", "web", "deployments")),
    ("GET", "/api/v1/pods", "watch=true",
     RequestInfo(True, "/api/v1/pods", "watch", "", "v1", "", "pods")),
    ("DELETE", "/api/v1/namespaces/web/pods", "",
     RequestInfo(True, "/api/v1/namespaces/web/pods", "deletecollection", "", "v1", "web", "pods")),
    ("GET", f"/apis/{CM}/v1beta2", "", RequestInfo(False, f"/apis/{CM}/v1beta2", "get")),
    ("GET", f"/apis/{CM}", "", RequestInfo(False, f"/apis/{CM}", "get")),
    ("GET", "/apis", "", RequestInfo(False, "/apis", "get")),
    ("GET", "/openapi/v2", "", RequestInfo(False, "/openapi/v2", "get")),
    ("POST", "/metrics", "", RequestInfo(False, "/metrics", "post")),
])
def test_request_info_matches_kubernetes(method, path, query, expected) -> None:
    assert request_info(method, path, query) == expected


def test_forbidden_message_wording() -> None:
    u = UserInfo("bob")
    info = request_info("GET", f"/apis/{CM}/v1beta2/namespaces/web/pods/*/http_requests")
    assert forbidden_message(u, info) == (
        f'pods.{CM} "*" is forbidden: User "bob" cannot get resource "pods/http_requests" '
        f'in API group "{CM}" in the namespace "web"')
    info = request_info("GET", f"/apis/{CM}/v1beta1/namespaces/web/pods")
    assert forbidden_message(u, info, "no rule") == (
        f'pods.{CM} is forbidden: User "bob" cannot list resource "pods" in API group "{CM}" '
        f'in the namespace "web": no rule')
    info = request_info("GET", f"/apis/{CM}/v1beta1/nodes/n1/cpu")
    assert forbidden_message(u, info).endswith('in API group "custom.metrics.k8s.io" at the cluster scope')


def _s(pkis: PKI, sim, **kw):
    return settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True, **kw)


def _as(user: str, *groups: str) -> list[tuple[str, str]]:
    return [("X-Remote-User", user), *[("X-Remote-Group", g) for g in groups]]


async def test_allow_and_deny_on_exact_attributes(pkis: PKI, sim) -> None:
    sim.allow(HPA, "get", CM, "pods/http_requests")
    proxy = pkis.client_ctx(front_proxy_cert(pkis))
    metric = f"/apis/{CM}/v1beta2/namespaces/web/pods/%2A/http_requests?labelSelector=app%3Dweb"
    async with serve(_s(pkis, sim)) as (url, _):
        r = await get(url + metric, proxy, _as(HPA, "system:serviceaccounts"))
        assert r.status_code == 200, r.text
        assert r.json()["path"] == f"/apis/{CM}/v1beta2/namespaces/web/pods/*/http_requests"

        r = await get(f"{url}/apis/{CM}/v1beta2/namespaces/web/pods/%2A/other_metric", proxy, _as(HPA))
        assert r.status_code == 403
        body = r.json()
        assert body["kind"] == "Status" and body["reason"] == "Forbidden" and body["code"] == 403
        assert body["message"].startswith(
            f'pods.{CM} "*" is forbidden: User "{HPA}" cannot get resource "pods/other_metric" '
            f'in API group "{CM}" in the namespace "web"')
        assert body["details"] == {"name": "*", "group": CM, "kind": "pods"}

        r = await get(url + metric, proxy, _as("someone-else"))
        assert (
            r.status_code == 403
            and 'User "someone-else" cannot get resource "pods/http_requests"' in r.json()["message"]
        )


async def test_aggregator_discovery_allowed_through_system_authenticated(pkis: PKI, sim) -> None:
    """`system:kube-aggregator` comes with no groups; RBAC's system:discovery is bound to
    system:authenticated, which the adapter must add before asking."""
    for path in ("/apis", f"/apis/{CM}", f"/apis/{CM}/v1beta1", "/openapi/v2", "/openapi/v3"):
        sim.allow("system:authenticated", "get", "", path)
    proxy = pkis.client_ctx(front_proxy_cert(pkis))
    async with serve(_s(pkis, sim)) as (url, _):
        for path in ("/apis", f"/apis/{CM}", f"/apis/{CM}/v1beta1", "/openapi/v2", "/openapi/v3"):
            r = await get(url + path, proxy, _as("system:kube-aggregator"))
            assert r.status_code == 200, (path, r.text)
        r = await get(f"{url}/metrics", proxy, _as("system:kube-aggregator"))
        assert r.status_code == 403
        assert r.json()["message"].startswith('forbidden: User "system:kube-aggregator" cannot get path "/metrics"')


async def test_api_unavailable_is_503_never_allow(pkis: PKI, sim) -> None:
    proxy = pkis.client_ctx(front_proxy_cert(pkis))
    sim.fail_auth_reviews = True
    async with serve(_s(pkis, sim)) as (url, _):
        r = await get(f"{url}/apis", proxy, _as("bob"))
        assert r.status_code == 503
        assert r.json()["reason"] == "ServiceUnavailable"
        assert r.json()["message"].startswith("authorization could not be checked: SubjectAccessReview failed")
        # system:masters is allowed without asking, as in Kubernetes
        assert (await get(f"{url}/apis", proxy, _as("root", "system:masters"))).status_code == 200


async def test_no_authorization_kubeconfig_is_503(pkis: PKI) -> None:
    async with serve(settings(pkis, authentication_skip_lookup=True)) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(front_proxy_cert(pkis)), _as("bob"))
        assert r.status_code == 503


async def test_allowed_and_denied_cached_with_separate_ttls(pkis: PKI, sim) -> None:
    sim.allow("alice", "get", "", "/apis")
    proxy = pkis.client_ctx(front_proxy_cert(pkis))
    s = _s(pkis, sim, authorization_webhook_cache_authorized_ttl=30.0, authorization_webhook_cache_unauthorized_ttl=0.3)
    async with serve(s) as (url, stack):
        assert (await get(f"{url}/apis", proxy, _as("alice"))).status_code == 200
        assert (await get(f"{url}/apis", proxy, _as("bob"))).status_code == 403
        calls = stack.authorizer.calls
        sim.fail_auth_reviews = True
        # both answers come from the cache while the API is down
        assert (await get(f"{url}/apis", proxy, _as("alice"))).status_code == 200
        assert (await get(f"{url}/apis", proxy, _as("bob"))).status_code == 403
        assert stack.authorizer.calls == calls
        # once the denial expires (short TTL) with the API down: 503, not a stale 403 nor an allow
        assert (await until_not(403, lambda: get(f"{url}/apis", proxy, _as("bob")))).status_code == 503
        assert (await get(f"{url}/apis", proxy, _as("alice"))).status_code == 200  # still cached


async def test_always_allow_paths(pkis: PKI, sim) -> None:
    sim.fail_auth_reviews = True
    async with serve(_s(pkis, sim)) as (url, _):
        for path in ("/healthz", "/readyz", "/livez"):
            r = await get(url + path, pkis.client_ctx())  # no credentials at all (kubelet probes)
            assert r.status_code == 200 and r.json()["user"] is None
        # spoofed headers do not reach the app even on always-allowed paths
        r = await get(f"{url}/healthz", pkis.client_ctx(), {"X-Remote-User": "x"})
        assert "x-remote-user" not in r.json()["headers"]
        assert (await get(f"{url}/healthz/extra", pkis.client_ctx())).status_code == 401
    async with serve(_s(pkis, sim, authorization_always_allow_paths=("/healthz", "/debug/*"))) as (url, _):
        assert (await get(f"{url}/debug/pprof", pkis.client_ctx())).status_code == 200
        assert (await get(f"{url}/readyz", pkis.client_ctx())).status_code == 401


async def test_outcome_counters_on_metrics(pkis: PKI, sim) -> None:
    sim.allow("system:masters-less", "get", "", "/metrics")
    sim.allow("alice", "get", "", "/metrics")
    proxy = pkis.client_ctx(front_proxy_cert(pkis))
    async with serve(_s(pkis, sim)) as (url, _):
        await get(f"{url}/apis", pkis.client_ctx(), {"X-Remote-User": "spoof"})  # 401
        await get(f"{url}/apis", proxy, _as("bob"))  # 403
        await get(f"{url}/healthz", pkis.client_ctx())
        r = await get(f"{url}/metrics", proxy, _as("alice"))
    assert r.status_code == 200
    text = r.text
    assert 'promscaler_adapter_authentication_attempts_total{authenticator="none",result="failure"} 1.0' in text
    assert (
        'promscaler_adapter_authentication_attempts_total{authenticator="requestheader",result="success"} 2.0' in text
    )
    assert 'promscaler_adapter_authorization_decisions_total{decision="denied",source="review"} 1.0' in text
    assert (
        'promscaler_adapter_authorization_decisions_total{decision="always-allow-path",source="always-allow-path"}'
        not in text
    )
    assert 'promscaler_adapter_authorization_decisions_total{decision="allowed",source="always-allow-path"} 1.0' in text
