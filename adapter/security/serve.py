"""Secure serving: what the adapter's server runs for `--secure-port`.

`build_stack(settings, app)` turns the security flags into a TLS context (with hot reload), an
authenticator, an authorizer and the wrapped ASGI app; `serve_secure(settings, app)` runs it under
uvicorn until cancelled or signalled. Kubernetes clients for the reviews come from
`--authentication-kubeconfig` / `--authorization-kubeconfig`, else `--kubeconfig`, else the pod's
service account.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from prometheus_client import CollectorRegistry
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from adapter.onewrite import corked
from adapter.security import kube
from adapter.security.authn import (
    Authenticator,
    RequestHeaderConfig,
    ReviewUnavailable,
    TokenReviewer,
    read_authentication_configmap,
)
from adapter.security.authz import Authorizer
from adapter.security.metrics import SecurityMetrics
from adapter.security.middleware import SecurityMiddleware
from adapter.security.peer import with_tls_extension
from adapter.security.tls import CABundle, CertError, ServingTLS, ensure_self_signed, openssl_ciphers, parse_min_version

__all__ = [
    "HTTP_PROTOCOL",
    "SecurityConfigError",
    "SecurityStack",
    "build_stack",
    "check_flags",
    "serve_secure",
    "uvicorn_config",
]

log = logging.getLogger("adapter.security")

# httptools, uvicorn's fast HTTP parser (a dependency), with the peer-certificate hook, each
# answer in one write (adapter.onewrite: one TLS record).
HTTP_PROTOCOL = with_tls_extension(corked(HttpToolsProtocol))


class SecurityConfigError(ValueError):
    """Security flags or files that cannot work; the message is the one line to print."""


@dataclass
class SecurityStack:
    app: SecurityMiddleware
    tls: ServingTLS
    authenticator: Authenticator
    authorizer: Authorizer
    metrics: SecurityMetrics
    clients: list[Any] = field(default_factory=list)
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _cm_source: Any = None
    _flags: dict[str, bool] = field(default_factory=dict)

    def start_background(self, tls_poll: float = 1.0, configmap_poll: float = 60.0) -> None:
        """Watch certificate files and the authentication ConfigMap (call inside the serving loop)."""
        self._tasks.append(asyncio.create_task(self.tls.watch(tls_poll), name="tls-reload"))
        if self._cm_source is not None:
            self._tasks.append(asyncio.create_task(self._configmap_loop(configmap_poll), name="authn-configmap"))

    async def _configmap_loop(self, interval: float) -> None:
        while True:
            await asyncio.sleep(interval)
            try:
                data = await read_authentication_configmap(self._cm_source)
            except ReviewUnavailable as exc:
                log.warning("%s", exc)
                continue
            if data and self.authenticator.apply_configmap(data, **self._flags):
                self.tls.rebuild()

    async def aclose(self) -> None:
        for t in self._tasks:
            t.cancel()
        for t in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        self._tasks.clear()
        for c in self.clients:
            with contextlib.suppress(Exception):
                await c.close()
        self.clients.clear()


def _get(settings: Any, name: str, default: Any = None) -> Any:
    return getattr(settings, name, default)


async def build_stack(settings: Any, app: Any, registry: CollectorRegistry | None = None) -> SecurityStack:
    """Everything `--secure-port` needs, from the adapter's Settings. Raises SecurityConfigError."""
    try:
        return await _build(settings, app, registry)
    except (CertError, ValueError) as exc:
        raise SecurityConfigError(str(exc)) from None


async def _build(settings: Any, app: Any, registry: CollectorRegistry | None) -> SecurityStack:
    # Files and flags first: nothing is connected when these fail.
    min_version = parse_min_version(_get(settings, "tls_min_version"))
    ciphers = openssl_ciphers(list(_get(settings, "tls_cipher_suites", ()) or ()))
    cert, key = _get(settings, "tls_cert_file"), _get(settings, "tls_private_key_file")
    if bool(cert) != bool(key):
        raise SecurityConfigError("--tls-cert-file and --tls-private-key-file go together")
    if not cert:
        cert, key = ensure_self_signed(_get(settings, "cert_dir") or "apiserver.local.config/certificates")
    rh_file, client_file = _get(settings, "requestheader_client_ca_file"), _get(settings, "client_ca_file")
    requestheader_ca = (
        CABundle("--requestheader-client-ca-file", rh_file) if rh_file else CABundle("requestheader-client-ca-file")
    )
    client_ca = CABundle("--client-ca-file", client_file) if client_file else CABundle("client-ca-file")
    rh = RequestHeaderConfig(
        username_headers=list(_get(settings, "requestheader_username_headers", ()) or ["X-Remote-User"]),
        group_headers=list(_get(settings, "requestheader_group_headers", ()) or ["X-Remote-Group"]),
        extra_prefixes=list(_get(settings, "requestheader_extra_headers_prefix", ()) or ["X-Remote-Extra-"]),
        uid_headers=list(_get(settings, "requestheader_uid_headers", ()) or ["X-Remote-Uid"]),
        allowed_names=list(_get(settings, "requestheader_allowed_names", ()) or ()),
    )
    # As k8s.io/apiserver: without --requestheader-client-ca-file the whole request-header
    # configuration (CA, allowed names, header names) comes from the ConfigMap.
    flags = {"flags_requestheader_ca": bool(rh_file), "flags_client_ca": bool(client_file),
             "flags_headers": bool(rh_file)}

    clients: list[Any] = []
    try:
        fallback = _get(settings, "kubeconfig")
        authn_path = _get(settings, "authentication_kubeconfig") or fallback
        authz_path = _get(settings, "authorization_kubeconfig") or fallback
        authn_client = await kube.api_client(authn_path)
        if authn_client is not None:
            clients.append(authn_client)
        # one connection pool when both reviews go to the same cluster as the same user
        authz_client = authn_client if authz_path == authn_path else await kube.api_client(authz_path)
        if authz_client is not None and authz_client is not authn_client:
            clients.append(authz_client)

        token_reviewer = None
        if authn_client is not None:
            token_reviewer = TokenReviewer(
                authn_client, ttl=float(_get(settings, "authentication_token_webhook_cache_ttl", 10.0)))
        authenticator = Authenticator(
            requestheader=rh, requestheader_ca=requestheader_ca, client_ca=client_ca,
            token_reviewer=token_reviewer, anonymous=bool(_get(settings, "anonymous_auth", False)),
        )
        cm_source = None
        if authn_client is not None and not _get(settings, "authentication_skip_lookup", False):
            cm_source = authn_client
            try:
                data = await read_authentication_configmap(authn_client)
            except ReviewUnavailable as exc:
                if not _get(settings, "authentication_tolerate_lookup_failure", False):
                    raise SecurityConfigError(
                        f"{exc} (set --authentication-tolerate-lookup-failure to start anyway)") from None
                log.warning("%s; continuing without it", exc)
                data = None
            if data:
                authenticator.apply_configmap(data, **flags)

        metrics = SecurityMetrics(registry)
        tls = ServingTLS(cert, key, [client_ca, requestheader_ca], min_version, ciphers,
                         on_reload=lambda _what: metrics.tls_reloads.inc())
    except BaseException:
        for c in clients:
            with contextlib.suppress(Exception):
                await c.close()
        raise
    authorizer = Authorizer(
        authz_client,
        allowed_ttl=float(_get(settings, "authorization_webhook_cache_authorized_ttl", 10.0)),
        denied_ttl=float(_get(settings, "authorization_webhook_cache_unauthorized_ttl", 10.0)),
    )
    wrapped = SecurityMiddleware(
        app, authenticator, authorizer,
        always_allow_paths=tuple(_get(settings, "authorization_always_allow_paths", ()) or ()),
        metrics=metrics,
    )
    return SecurityStack(wrapped, tls, authenticator, authorizer, metrics, clients,
                         _cm_source=cm_source, _flags=flags)


def uvicorn_config(stack: SecurityStack, host: str, port: int, **kwargs: Any) -> uvicorn.Config:
    """A uvicorn Config serving `stack.app` over `stack.tls` with the TLS scope extension."""
    return uvicorn.Config(
        stack.app, host=host, port=port, http=HTTP_PROTOCOL,
        ssl_context_factory=lambda _cfg, _default: stack.tls.context, **kwargs,
    )


def check_flags(settings: Any) -> None:
    """Fail fast, before anything connects, on security flags that cannot work (SecurityConfigError)."""
    try:
        parse_min_version(_get(settings, "tls_min_version"))
        openssl_ciphers(list(_get(settings, "tls_cipher_suites", ()) or ()))
    except ValueError as exc:
        raise SecurityConfigError(str(exc)) from None
    cert, key = _get(settings, "tls_cert_file"), _get(settings, "tls_private_key_file")
    if bool(cert) != bool(key):
        raise SecurityConfigError("--tls-cert-file and --tls-private-key-file go together")
    for flag, path in (("--tls-cert-file", cert), ("--tls-private-key-file", key),
                       ("--client-ca-file", _get(settings, "client_ca_file")),
                       ("--requestheader-client-ca-file", _get(settings, "requestheader_client_ca_file")),
                       ("--authentication-kubeconfig", _get(settings, "authentication_kubeconfig")),
                       ("--authorization-kubeconfig", _get(settings, "authorization_kubeconfig"))):
        if path and not os.access(path, os.R_OK):
            raise SecurityConfigError(f"{flag}: cannot read {path}")
    if not (_get(settings, "authorization_kubeconfig") or _get(settings, "kubeconfig")
            or _get(settings, "in_cluster", False) or kube.in_cluster()):
        # As the Kubernetes apiserver libraries: no delegated authorization, no secure serving.
        raise SecurityConfigError(
            "secure serving delegates authorization to the Kubernetes API: pass --authorization-kubeconfig or "
            "--kubeconfig, or run in-cluster; or use --insecure --port PORT for plain local HTTP")


async def serve_secure(
    settings: Any,
    app: Any,
    on_listening: Callable[[], Any] | None = None,
    *,
    registry: CollectorRegistry | None = None,
    **uvicorn_kwargs: Any,
) -> None:
    """Serve `app` on `--secure-port` with TLS, authentication and authorization until shutdown.

    `on_listening()` runs once connections are accepted. Raises SecurityConfigError for unusable
    flags or files and OSError when the port cannot be bound.
    """
    stack = await build_stack(settings, app, registry)
    host = _get(settings, "bind_address") or "0.0.0.0"
    port = int(_get(settings, "secure_port", 6443))
    uvicorn_kwargs.setdefault("log_level", "warning")
    server = uvicorn.Server(uvicorn_config(stack, host, port, **uvicorn_kwargs))

    async def watch_started() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        if on_listening is not None:
            on_listening()

    stack.start_background()
    watcher = asyncio.create_task(watch_started())
    try:
        with contextlib.suppress(SystemExit):  # uvicorn exits when it cannot bind
            await server.serve()
    finally:
        watcher.cancel()
        await stack.aclose()
    if not server.started:
        raise OSError(f"could not listen on {host}:{port}")
