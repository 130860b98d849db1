"""Fixtures for the security tests: a PKI made with `cryptography`, a tiny FastAPI app that echoes
the user it sees, and a helper that serves it through the real security stack under uvicorn with
real TLS on a loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, generate_latest

from adapter.security import pki
from adapter.security.serve import SecurityStack, build_stack, uvicorn_config
from kubesim.net import free_port


@dataclass
class PKI:
    dir: Path
    server_ca: pki.KeyPair
    front_proxy_ca: pki.KeyPair
    client_ca: pki.KeyPair
    other_ca: pki.KeyPair

    def path(self, name: str) -> Path:
        return self.dir / name

    def write(self, name: str, pair: pki.KeyPair) -> tuple[Path, Path]:
        crt, key = self.dir / f"{name}.crt", self.dir / f"{name}.key"
        pki.write_pair(pair, crt, key)
        return crt, key

    def client_ctx(self, pair: pki.KeyPair | None = None, name: str = "client", **kw: Any) -> ssl.SSLContext:
        """A client SSLContext trusting the serving CA, presenting `pair` if given."""
        ctx = ssl.create_default_context(cafile=str(self.path("server-ca.crt")))
        for k, v in kw.items():
            setattr(ctx, k, v)
        if pair is not None:
            crt, key = self.write(f"{name}-{pair.cert.serial_number}", pair)
            ctx.load_cert_chain(crt, key)
        return ctx


@pytest.fixture
def pkis(tmp_path: Path) -> PKI:
    p = PKI(tmp_path, pki.new_ca("server-ca"), pki.new_ca("front-proxy-ca"), pki.new_ca("client-ca"),
            pki.new_ca("other-ca"))
    (tmp_path / "server-ca.crt").write_bytes(p.server_ca.cert_pem)
    (tmp_path / "front-proxy-ca.crt").write_bytes(p.front_proxy_ca.cert_pem)
    (tmp_path / "client-ca.crt").write_bytes(p.client_ca.cert_pem)
    serving = pki.issue(p.server_ca, "promscaler-adapter", dns=["localhost"], ips=["127.0.0.1"], server=True)
    p.write("serving", serving)
    return p


def front_proxy_cert(p: PKI, cn: str = "front-proxy-client", **kw: Any) -> pki.KeyPair:
    return pki.issue(p.front_proxy_ca, cn, client=True, **kw)


def expired(ca: pki.KeyPair, cn: str) -> pki.KeyPair:
    start = dt.datetime.now(dt.UTC) - dt.timedelta(days=10)
    return pki.issue(ca, cn, client=True, days=1, not_before=start)


def echo_app(registry: CollectorRegistry) -> FastAPI:
    """Answers every GET with the user and the headers the security layer let through."""
    app = FastAPI()

    @app.get("/metrics")
    async def metrics() -> Response:
        return Response(generate_latest(registry), media_type="text/plain")

    @app.get("/{path:path}")
    async def echo(request: Request, path: str) -> dict[str, Any]:
        user = request.scope.get("user")
        return {
            "path": "/" + path,
            "user": None if user is None else {
                "name": user.name, "uid": user.uid, "groups": list(user.groups),
                "extra": {k: list(v) for k, v in user.extra.items()},
            },
            "headers": sorted({k.lower() for k in request.headers}),
        }

    return app


def settings(p: PKI, **overrides: Any) -> SimpleNamespace:
    """Security settings as the adapter's Settings carries them (same attribute names)."""
    base = dict(
        tls_cert_file=str(p.path("serving.crt")), tls_private_key_file=str(p.path("serving.key")),
        cert_dir=str(p.path("certdir")), tls_min_version=None, tls_cipher_suites=(),
        client_ca_file=str(p.path("client-ca.crt")),
        requestheader_client_ca_file=str(p.path("front-proxy-ca.crt")),
        requestheader_allowed_names=("front-proxy-client",),
        requestheader_username_headers=("X-Remote-User",), requestheader_group_headers=("X-Remote-Group",),
        requestheader_extra_headers_prefix=("X-Remote-Extra-",),
        authentication_kubeconfig=None, authorization_kubeconfig=None, kubeconfig=None,
        authentication_skip_lookup=False, authentication_token_webhook_cache_ttl=10.0,
        authorization_webhook_cache_authorized_ttl=10.0, authorization_webhook_cache_unauthorized_ttl=10.0,
        authorization_always_allow_paths=("/healthz", "/readyz", "/livez"),
        authentication_tolerate_lookup_failure=False, anonymous_auth=False,
    )
    base.update(overrides)
    return SimpleNamespace(**base)


@contextlib.asynccontextmanager
async def serve(
    s: SimpleNamespace, tls_poll: float = 0.05, configmap_poll: float = 60.0
) -> AsyncIterator[tuple[str, SecurityStack]]:
    """Run the echo app behind the security stack on https://127.0.0.1:<port>."""
    registry = CollectorRegistry()
    stack = await build_stack(s, echo_app(registry), registry)
    port = free_port()
    server = uvicorn.Server(uvicorn_config(stack, "127.0.0.1", port, log_level="warning", lifespan="off"))
    stack.start_background(tls_poll=tls_poll, configmap_poll=configmap_poll)
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        yield f"https://127.0.0.1:{port}", stack
    finally:
        server.should_exit = True
        await task
        await stack.aclose()


async def get(url: str, ctx: ssl.SSLContext, headers: dict[str, Any] | list | None = None) -> httpx.Response:
    async with httpx.AsyncClient(verify=ctx, timeout=10) as c:
        return await c.get(url, headers=headers)


async def until_not(code: int, request: Callable[[], Awaitable[httpx.Response]],
                    timeout: float = 15.0) -> httpx.Response:
    """Repeat `request` until it answers something other than `code` (a cached answer expiring), with
    a deadline; the first other answer is returned for the test to check."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        r = await request()
        if r.status_code != code:
            return r
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"still HTTP {code} after {timeout}s")
        await asyncio.sleep(0.05)


# A refused client certificate surfaces on the client as a failed handshake (TLS 1.2) or, with
# TLS 1.3, as the connection closed on the first read after the handshake.
REJECTED = (httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)


@pytest.fixture
def sim():
    """The project's in-process Kubernetes API server (TokenReview / SubjectAccessReview over HTTP)."""
    from kubesim.apiserver import KubeSim

    with KubeSim(token="sandbox-token") as s:
        yield s
