"""The request-header rules of k8s.io/apiserver's headerrequest authenticator, table by table
(in process: the handshake-level behaviour is covered by the TLS tests)."""

from __future__ import annotations

import pytest

from adapter.security import pki
from adapter.security.authn import Authenticator, RequestHeaderConfig
from adapter.security.tls import CABundle

FP_CA = pki.new_ca("front-proxy-ca")
CLIENT_CA = pki.new_ca("client-ca")
PROXY = [pki.issue(FP_CA, "front-proxy-client", client=True).cert]


def _auth(**rh) -> Authenticator:
    return Authenticator(
        requestheader=RequestHeaderConfig(allowed_names=["front-proxy-client"], **rh),
        requestheader_ca=CABundle("rh", pem=FP_CA.cert_pem), client_ca=CABundle("client", pem=CLIENT_CA.cert_pem),
    )


def _h(*pairs: tuple[str, str]) -> list[tuple[bytes, bytes]]:
    return [(k.lower().encode(), v.encode()) for k, v in pairs]


@pytest.mark.parametrize("headers,name", [
    (_h(("X-Remote-User", "a"), ("X-Remote-User", "b")), "a"),           # first value of the header
    (_h(("X-Remote-User", ""), ("X-Remote-User", "b")), None),           # Go's h.Get: first value only
    (_h(("X-Other-User", "c")), "c"),                                    # second configured header name
    (_h(("X-Remote-User", "a"), ("X-Other-User", "c")), "a"),            # header names in flag order
    (_h(("X-Remote-Group", "g")), None),                                 # groups alone name nobody
])
async def test_username_headers(headers, name) -> None:
    res = await _auth(username_headers=["X-Remote-User", "X-Other-User"]).authenticate(headers, PROXY)
    assert (res.user.name if res.user else None) == name


async def test_groups_and_extra() -> None:
    res = await _auth(group_headers=["X-Remote-Group", "X-Team"]).authenticate(_h(
        ("X-Team", "t1"), ("X-Remote-User", "u"), ("X-Remote-Group", "g1"), ("X-Remote-Group", ""),
        ("X-Remote-Group", "g2"),
        ("X-Remote-Extra-Authentication.kubernetes.io%2fcredential-Id", "JTI=1"),
        ("X-Remote-Extra-Scopes", "a"), ("X-Remote-Extra-scopes", "b"), ("X-Remote-Extra-Bad%zzKey", "x"),
    ), PROXY)
    assert res.method == "requestheader"
    assert res.user.groups == ("g1", "g2", "t1", "system:authenticated")
    assert res.user.extra == {"authentication.kubernetes.io/credential-id": ("JTI=1",), "scopes": ("a", "b"),
                              "bad%zzkey": ("x",)}


async def test_user_cert_without_cn_names_nobody() -> None:
    no_cn = pki.issue(CLIENT_CA, "", orgs=["only-an-org"], client=True)
    res = await _auth().authenticate([], [no_cn.cert])
    assert res.user is None
    res = await _auth().authenticate([], [pki.issue(CLIENT_CA, "ivy", orgs=["o1"], client=True).cert])
    assert (res.user.name, res.user.groups, res.method) == ("ivy", ("o1", "system:authenticated"), "x509")


async def test_server_only_cert_is_not_a_client_cert() -> None:
    """Extended key usage serverAuth only: not valid for client authentication (as Go's x509)."""
    srv = pki.issue(FP_CA, "front-proxy-client", server=True)
    res = await _auth().authenticate(_h(("X-Remote-User", "u")), [srv.cert])
    assert res.user is None and "not valid for client authentication" in res.error


def test_strip_headers_removes_configured_and_conventional_names() -> None:
    a = _auth(username_headers=["X-Proxy-User"], extra_prefixes=["X-Proxy-Extra-"])
    kept = a.strip_headers(_h(("X-Proxy-User", "u"), ("X-Remote-User", "v"), ("X-Proxy-Extra-A", "1"),
                              ("X-Remote-Extra-B", "2"), ("Authorization", "Bearer t"), ("Accept", "*/*")),
                           drop_authorization=True)
    assert kept == _h(("Accept", "*/*"))
