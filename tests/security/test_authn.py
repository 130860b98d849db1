"""Authentication through real TLS handshakes: front-proxy headers only with the aggregator's
certificate, x509 client certificates, bearer tokens via TokenReview on KubeSim, anonymous."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from adapter.security import pki

from .conftest import PKI, REJECTED, expired, front_proxy_cert, get, serve, settings, until_not

# What kube-apiserver's aggregator sends for a service account (see the adapter spec).
AGGREGATOR_HEADERS = [
    ("X-Remote-User", "system:serviceaccount:kube-system:horizontal-pod-autoscaler"),
    ("X-Remote-Uid", "5e4f9c1a-0000-4000-8000-000000000001"),
    ("X-Remote-Group", "system:serviceaccounts"),
    ("X-Remote-Group", "system:serviceaccounts:kube-system"),
    ("X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id", "JTI=abc"),
    ("X-Remote-Extra-Authentication.kubernetes.io%2fpod-Name", "kube-controller-manager-0"),
    ("X-Forwarded-For", "10.0.0.1"),
]
SPOOF = {"X-Remote-User": "system:admin", "X-Remote-Group": "system:masters"}


def allow_authenticated(sim) -> None:
    sim.allow("system:authenticated", "*", "*", "*")


async def test_front_proxy_headers_with_aggregator_cert(pkis: PKI, sim) -> None:
    allow_authenticated(sim)
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis/custom.metrics.k8s.io/v1beta2", pkis.client_ctx(front_proxy_cert(pkis)),
                      AGGREGATOR_HEADERS)
    assert r.status_code == 200, r.text
    user = r.json()["user"]
    assert user == {
        "name": "system:serviceaccount:kube-system:horizontal-pod-autoscaler",
        "uid": "5e4f9c1a-0000-4000-8000-000000000001",
        "groups": ["system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"],
        "extra": {"authentication.kubernetes.io/credential-id": ["JTI=abc"],
                  "authentication.kubernetes.io/pod-name": ["kube-controller-manager-0"]},
    }
    seen = r.json()["headers"]
    assert not [h for h in seen if h.startswith("x-remote-")], seen  # identity headers never reach the app
    assert "x-forwarded-for" in seen


async def test_spoofed_headers_without_cert_are_ignored(pkis: PKI, sim) -> None:
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(), SPOOF)
        assert r.status_code == 401
        assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                            "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    # with anonymous access on, the same request is plain anonymous: the headers changed nothing
    async with serve(settings(pkis, anonymous_auth=True, authorization_kubeconfig=str(sim.kubeconfig_path),
                              authentication_skip_lookup=True)) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(), SPOOF)
        assert r.status_code == 403
        assert r.json()["message"].startswith('forbidden: User "system:anonymous" cannot get path "/apis": ')


async def test_spoofed_headers_with_a_client_ca_cert(pkis: PKI, sim) -> None:
    """A user certificate from --client-ca-file authenticates its own CN, not the headers' user."""
    allow_authenticated(sim)
    alice = pki.issue(pkis.client_ca, "alice", orgs=["dev", "ops"], client=True)
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(alice), SPOOF)
    assert r.status_code == 200
    assert r.json()["user"] == {"name": "alice", "uid": "", "groups": ["dev", "ops", "system:authenticated"],
                                "extra": {}}
    assert "x-remote-user" not in r.json()["headers"]


async def test_cert_from_another_ca_is_refused(pkis: PKI) -> None:
    intruder = pki.issue(pkis.other_ca, "front-proxy-client", client=True)
    async with serve(settings(pkis)) as (url, _):
        with pytest.raises(REJECTED):
            await get(f"{url}/apis", pkis.client_ctx(intruder), SPOOF)


async def test_expired_front_proxy_cert_is_refused(pkis: PKI) -> None:
    async with serve(settings(pkis)) as (url, _):
        with pytest.raises(REJECTED):
            await get(f"{url}/apis", pkis.client_ctx(expired(pkis.front_proxy_ca, "front-proxy-client")), SPOOF)


async def test_cn_not_in_allowed_names(pkis: PKI, sim) -> None:
    allow_authenticated(sim)
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    other_cn = front_proxy_cert(pkis, cn="not-the-aggregator")
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(other_cn), SPOOF)
        assert r.status_code == 401
        # the allowed CN from the same CA is believed
        r = await get(f"{url}/apis", pkis.client_ctx(front_proxy_cert(pkis)), {"X-Remote-User": "bob"})
        assert r.status_code == 200 and r.json()["user"]["name"] == "bob"
    # no allowed names configured: any CN signed by the request-header CA may proxy
    s.requestheader_allowed_names = ()
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(other_cn), {"X-Remote-User": "carol"})
        assert r.status_code == 200 and r.json()["user"]["name"] == "carol"


async def test_front_proxy_cert_is_not_a_user_cert(pkis: PKI) -> None:
    """The aggregator's certificate without a user header authenticates nobody (its CN is not a user)."""
    async with serve(settings(pkis)) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx(front_proxy_cert(pkis)))
        assert r.status_code == 401


async def test_bearer_tokens_via_tokenreview(pkis: PKI, sim) -> None:
    allow_authenticated(sim)
    sim.tokens["good-token"] = {"username": "dave", "groups": ["team-a"], "uid": "u-1"}
    s = settings(pkis, authentication_kubeconfig=str(sim.kubeconfig_path),
                 authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, stack):
        r = await get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer good-token"})
        assert r.status_code == 200, r.text
        assert r.json()["user"]["name"] == "dave"
        assert r.json()["user"]["uid"] == "u-1"
        assert set(r.json()["user"]["groups"]) == {"team-a", "system:authenticated"}
        assert "authorization" not in r.json()["headers"]

        r = await get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer wrong"})
        assert r.status_code == 401

        # cached: while the TTL runs, the answer does not depend on the API being up
        calls = stack.authenticator.token_reviewer.calls
        sim.fail_auth_reviews = True
        r = await get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer good-token"})
        assert r.status_code == 200
        assert stack.authenticator.token_reviewer.calls == calls
        # an unseen token while the API is down: 401, never anonymous or allowed
        r = await get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer fresh-token"})
        assert r.status_code == 401


async def test_token_cache_expires(pkis: PKI, sim) -> None:
    allow_authenticated(sim)
    sim.tokens["t"] = {"username": "erin", "groups": []}
    s = settings(pkis, authentication_kubeconfig=str(sim.kubeconfig_path), anonymous_auth=True,
                 authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True,
                 authentication_token_webhook_cache_ttl=0.3)
    async with serve(s) as (url, _):
        assert (await get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer t"})).status_code == 200
        sim.fail_auth_reviews = True
        r = await until_not(200, lambda: get(f"{url}/apis", pkis.client_ctx(), {"Authorization": "Bearer t"}))
        assert r.status_code == 401  # API down and cache expired: a presented token is never anonymous


async def test_anonymous_only_when_enabled(pkis: PKI, sim) -> None:
    sim.allow("system:unauthenticated", "get", "", "/apis")
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, _):
        assert (await get(f"{url}/apis", pkis.client_ctx())).status_code == 401
    s.anonymous_auth = True
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", pkis.client_ctx())
        assert r.status_code == 200
        assert r.json()["user"] == {"name": "system:anonymous", "uid": "", "groups": ["system:unauthenticated"],
                                    "extra": {}}


async def test_ca_and_headers_from_the_configmap(pkis: PKI, sim) -> None:
    """No request-header flags: CA, header names and allowed names come from
    kube-system/extension-apiserver-authentication, as kube-apiserver publishes them."""
    allow_authenticated(sim)
    sim.apply({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
        "data": {
            "client-ca-file": pkis.client_ca.cert_pem.decode(),
            "requestheader-client-ca-file": pkis.front_proxy_ca.cert_pem.decode(),
            "requestheader-allowed-names": '["aggregator"]',
            "requestheader-username-headers": '["X-Proxy-User"]',
            "requestheader-group-headers": '["X-Proxy-Group"]',
            "requestheader-extra-headers-prefix": '["X-Proxy-Extra-"]',
        },
    })
    s = settings(pkis, client_ca_file=None, requestheader_client_ca_file=None, requestheader_allowed_names=(),
                 authentication_kubeconfig=str(sim.kubeconfig_path),
                 authorization_kubeconfig=str(sim.kubeconfig_path))
    async with serve(s) as (url, _):
        agg = pkis.client_ctx(front_proxy_cert(pkis, cn="aggregator"))
        r = await get(f"{url}/apis", agg, {"X-Proxy-User": "frank", "X-Proxy-Group": "g1",
                                           "X-Proxy-Extra-Scopes": "a", "X-Remote-User": "mallory"})
        assert r.status_code == 200, r.text
        assert r.json()["user"]["name"] == "frank"
        assert r.json()["user"]["groups"] == ["g1", "system:authenticated"]
        assert r.json()["user"]["extra"] == {"scopes": ["a"]}
        assert not [h for h in r.json()["headers"] if h.startswith(("x-proxy-", "x-remote-"))]
        # the default CN is not in the ConfigMap's allowed names
        r = await get(f"{url}/apis", pkis.client_ctx(front_proxy_cert(pkis)), {"X-Proxy-User": "frank"})
        assert r.status_code == 401
        # client-ca-file from the ConfigMap authenticates user certificates
        r = await get(f"{url}/apis", pkis.client_ctx(pki.issue(pkis.client_ca, "grace", client=True)))
        assert r.status_code == 200 and r.json()["user"]["name"] == "grace"


async def test_configmap_lookup_failure_is_fatal_unless_tolerated(pkis: PKI, sim) -> None:
    from adapter.security.serve import SecurityConfigError, build_stack

    dead = pkis.path("dead.kubeconfig")
    dead.write_text(Path(sim.kubeconfig_path).read_text().replace(sim.url, "http://127.0.0.1:9"))
    s = settings(pkis, authentication_kubeconfig=str(dead))
    with pytest.raises(SecurityConfigError, match=r"extension-apiserver-authentication.*tolerate"):
        await build_stack(s, None)
    s.authentication_tolerate_lookup_failure = True
    stack = await build_stack(s, None)
    await stack.aclose()


async def test_front_proxy_cert_from_an_intermediate_ca(pkis: PKI, sim) -> None:
    """The proxy sends leaf + intermediate; only the root is configured (as with kubeadm sub-CAs)."""
    allow_authenticated(sim)
    inter = pki.new_ca("front-proxy-intermediate", parent=pkis.front_proxy_ca)
    leaf = pki.issue(inter, "front-proxy-client", client=True)
    crt, key = pkis.path("chained.crt"), pkis.path("chained.key")
    pki.write_pair(leaf, crt, key, chain=[inter.cert])
    ctx = pkis.client_ctx()
    ctx.load_cert_chain(crt, key)
    s = settings(pkis, authorization_kubeconfig=str(sim.kubeconfig_path), authentication_skip_lookup=True)
    async with serve(s) as (url, _):
        r = await get(f"{url}/apis", ctx, {"X-Remote-User": "henry"})
    assert r.status_code == 200 and r.json()["user"]["name"] == "henry"


async def test_configmap_ca_rotation_is_followed(pkis: PKI, sim) -> None:
    """kube-apiserver rotates its front-proxy CA in the ConfigMap; the adapter follows without a restart."""
    allow_authenticated(sim)
    cm = {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
          "data": {"requestheader-client-ca-file": pkis.front_proxy_ca.cert_pem.decode(),
                   "requestheader-allowed-names": '["front-proxy-client"]',
                   "requestheader-username-headers": '["X-Remote-User"]'}}
    sim.apply(cm)
    new_ca = pki.new_ca("front-proxy-ca-rotated")
    new_proxy = pkis.client_ctx(pki.issue(new_ca, "front-proxy-client", client=True))
    s = settings(pkis, requestheader_client_ca_file=None, requestheader_allowed_names=(),
                 authentication_kubeconfig=str(sim.kubeconfig_path), authorization_kubeconfig=str(sim.kubeconfig_path))
    async with serve(s, configmap_poll=0.1) as (url, _):
        with pytest.raises(REJECTED):
            await get(f"{url}/apis", new_proxy, {"X-Remote-User": "ida"})
        cm["data"]["requestheader-client-ca-file"] = new_ca.cert_pem.decode()
        sim.apply(cm)
        for _ in range(50):
            await asyncio.sleep(0.1)
            try:
                r = await get(f"{url}/apis", new_proxy, {"X-Remote-User": "ida"})
            except REJECTED:
                continue
            break
        else:
            raise AssertionError("the rotated ConfigMap CA was never picked up")
        assert r.status_code == 200 and r.json()["user"]["name"] == "ida"
        with pytest.raises(REJECTED):  # the old CA is no longer trusted
            await get(f"{url}/apis", pkis.client_ctx(front_proxy_cert(pkis)), {"X-Remote-User": "ida"})
