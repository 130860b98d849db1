"""Serving TLS: versions, cipher names, self-signed pairs, and hot reload of certificates and CAs
seen through real handshakes."""

from __future__ import annotations

import asyncio
import ssl

import httpx
import pytest
from cryptography import x509

from adapter.security import pki, tls
from adapter.security.serve import SecurityConfigError, build_stack
from tests.support import eventually

from .conftest import PKI, REJECTED, front_proxy_cert, get, serve, settings


def test_min_version_and_cipher_names() -> None:
    assert tls.parse_min_version(None) is ssl.TLSVersion.TLSv1_2
    assert tls.parse_min_version("VersionTLS13") is ssl.TLSVersion.TLSv1_3
    with pytest.raises(ValueError, match="--tls-min-version: VersionTLS10 is not supported"):
        tls.parse_min_version("VersionTLS10")
    with pytest.raises(ValueError, match="unknown version"):
        tls.parse_min_version("1.2")
    assert tls.openssl_ciphers(["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256",
                                "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"]) == \
        "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305"
    with pytest.raises(ValueError, match="unknown cipher suite 'TLS_FOO'"):
        tls.openssl_ciphers(["TLS_FOO"])


def _peer(url: str, ctx: ssl.SSLContext) -> tuple[x509.Certificate, str, str]:
    """Handshake with the server; return its certificate, the TLS version and the cipher."""
    host, port = url.removeprefix("https://").split(":")
    import socket

    with socket.create_connection((host, int(port)), timeout=5) as raw, ctx.wrap_socket(raw, server_hostname=host) as s:
        der = s.getpeercert(binary_form=True)
        return x509.load_der_x509_certificate(der), s.version(), s.cipher()[0]


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
async def test_tls12_minimum_and_configured_suites(pkis: PKI) -> None:
    async with serve(settings(pkis, tls_cipher_suites=("TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",))) as (url, _):
        old = pkis.client_ctx()
        old.minimum_version = ssl.TLSVersion.TLSv1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
        old.set_ciphers("DEFAULT:@SECLEVEL=0")
        with pytest.raises(httpx.ConnectError):
            await get(f"{url}/healthz", old)
        only12 = pkis.client_ctx()
        only12.maximum_version = ssl.TLSVersion.TLSv1_2
        _, version, cipher = await asyncio.to_thread(_peer, url, only12)
        assert (version, cipher) == ("TLSv1.2", "ECDHE-ECDSA-AES256-GCM-SHA384")
        r = await get(f"{url}/healthz", pkis.client_ctx())
        assert r.status_code == 200


async def test_min_version_13_refuses_tls12(pkis: PKI) -> None:
    async with serve(settings(pkis, tls_min_version="VersionTLS13")) as (url, _):
        only12 = pkis.client_ctx()
        only12.maximum_version = ssl.TLSVersion.TLSv1_2
        with pytest.raises(httpx.ConnectError):
            await get(f"{url}/healthz", only12)
        _, version, _ = await asyncio.to_thread(_peer, url, pkis.client_ctx())
        assert version == "TLSv1.3"


async def test_self_signed_pair_in_cert_dir(pkis: PKI) -> None:
    s = settings(pkis, tls_cert_file=None, tls_private_key_file=None)
    async with serve(s) as (url, _):
        crt = pkis.path("certdir") / "apiserver.crt"
        assert (pkis.path("certdir") / "apiserver.key").stat().st_mode & 0o077 == 0
        chain = pki.load_pem_certs(crt.read_bytes())
        assert len(chain) == 2  # serving cert + the CA that signed it, like kube-apiserver
        ctx = ssl.create_default_context(cafile=str(crt))
        served, _, _ = await asyncio.to_thread(_peer, url, ctx)
        assert served == chain[0]
        san = served.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in san.get_values_for_type(x509.DNSName)
    # a second start reuses the pair instead of minting a new one
    async with serve(s) as (url, _):
        served2, _, _ = await asyncio.to_thread(_peer, url, ctx)
        assert served2 == chain[0]


async def test_bad_files_are_one_line_errors(pkis: PKI) -> None:
    with pytest.raises(SecurityConfigError, match=r"cannot load serving certificate .*nope\.crt"):
        await build_stack(settings(pkis, tls_cert_file=str(pkis.path("nope.crt"))), None)
    with pytest.raises(SecurityConfigError, match="--client-ca-file: cannot read"):
        await build_stack(settings(pkis, client_ca_file=str(pkis.path("missing-ca.crt"))), None)
    with pytest.raises(SecurityConfigError, match="go together"):
        await build_stack(settings(pkis, tls_private_key_file=None), None)


async def _wait_for(predicate, timeout: float = 5.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not await predicate():
        if loop.time() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


async def test_serving_cert_rotation_keeps_open_connections(pkis: PKI) -> None:
    async with serve(settings(pkis)) as (url, stack):
        first, _, _ = await asyncio.to_thread(_peer, url, pkis.client_ctx())
        async with httpx.AsyncClient(verify=pkis.client_ctx(), timeout=5) as kept:
            assert (await kept.get(f"{url}/healthz")).status_code == 200

            # cert-manager style rotation: a new key pair from a new CA, written in place
            new_ca = pki.new_ca("rotated-server-ca")
            (pkis.path("server-ca.crt")).write_bytes(pkis.server_ca.cert_pem + new_ca.cert_pem)
            rotated = pki.issue(new_ca, "promscaler-adapter", dns=["localhost"], ips=["127.0.0.1"], server=True)
            pkis.write("serving", rotated)

            async def sees_new() -> bool:
                cert, _, _ = await asyncio.to_thread(_peer, url, pkis.client_ctx())
                return cert == rotated.cert

            await _wait_for(sees_new)
            assert first != rotated.cert
            assert stack.tls.reloads >= 1
            # the connection opened before the rotation still works (same TCP/TLS session)
            assert (await kept.get(f"{url}/healthz")).status_code == 200


async def test_half_written_pair_keeps_previous_cert(pkis: PKI) -> None:
    async with serve(settings(pkis)) as (url, stack):
        before, _, _ = await asyncio.to_thread(_peer, url, pkis.client_ctx())
        other = pki.issue(pkis.server_ca, "x", dns=["localhost"], ips=["127.0.0.1"], server=True)
        pkis.path("serving.crt").write_bytes(other.cert_pem)  # key not rotated yet: a mismatched pair
        polls = stack.tls.checks
        await eventually(lambda: stack.tls.checks >= polls + 2)  # the poller has seen the half-written pair
        after, _, _ = await asyncio.to_thread(_peer, url, pkis.client_ctx())
        assert after == before
        assert stack.tls.reloads == 0


async def test_requestheader_ca_rotation(pkis: PKI) -> None:
    """Replacing the front-proxy CA file: certs of the old CA stop proving anything, the new CA's work."""
    async with serve(settings(pkis)) as (url, _stack):
        hdr = {"X-Remote-User": "admin", "X-Remote-Group": "system:masters"}
        old_proxy = front_proxy_cert(pkis)
        r = await get(f"{url}/apis", pkis.client_ctx(old_proxy), hdr)
        assert r.status_code == 200 and r.json()["user"]["name"] == "admin"

        new_ca = pki.new_ca("front-proxy-ca-2")
        pkis.path("front-proxy-ca.crt").write_bytes(new_ca.cert_pem)
        new_proxy = pki.issue(new_ca, "front-proxy-client", client=True)

        async def new_ca_works() -> bool:
            try:
                r = await get(f"{url}/apis", pkis.client_ctx(new_proxy), hdr)
            except REJECTED:
                return False
            return r.status_code == 200 and r.json()["user"]["name"] == "admin"

        await _wait_for(new_ca_works)
        with pytest.raises(REJECTED):  # the old CA is gone from the TLS trust store too
            await get(f"{url}/apis", pkis.client_ctx(old_proxy), hdr)
