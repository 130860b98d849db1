"""Pure ASGI middleware: authenticate, authorize, then hand the request to the app.

The app sees `scope["user"]` (an `authn.UserInfo`) and never sees front-proxy identity headers or
the Authorization header. Failures are `metav1.Status` bodies: 401 Unauthorized, 403 Forbidden
(naming user, verb and resource), 503 ServiceUnavailable when a review could not be made.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import orjson

from adapter.security.authn import Authenticator, ReviewUnavailable
from adapter.security.authz import Authorizer, forbidden_status, path_always_allowed
from adapter.security.metrics import SecurityMetrics
from adapter.security.peer import client_chain
from adapter.security.requestinfo import request_info
from promscaler.status import ServiceUnavailable, Unauthorized

__all__ = ["SecurityMiddleware"]

log = logging.getLogger("adapter.security")


async def _send_status(send: Any, body: dict[str, Any], extra_headers: Sequence[tuple[bytes, bytes]] = (),
                       websocket: bool = False) -> None:
    if websocket:  # no HTTP response on a websocket handshake: refuse it (policy violation)
        await send({"type": "websocket.close", "code": 1008})
        return
    data = orjson.dumps(body)
    await send({
        "type": "http.response.start",
        "status": body["code"],
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                    *extra_headers],
    })
    await send({"type": "http.response.body", "body": data})


class SecurityMiddleware:
    def __init__(
        self,
        app: Any,
        authenticator: Authenticator,
        authorizer: Authorizer,
        *,
        always_allow_paths: tuple[str, ...] | list[str] = ("/healthz", "/readyz", "/livez"),
        metrics: SecurityMetrics | None = None,
    ) -> None:
        self.app = app
        self.authenticator = authenticator
        self.authorizer = authorizer
        self.always_allow_paths = tuple(always_allow_paths)
        self.metrics = metrics or SecurityMetrics()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        ws = scope["type"] == "websocket"
        headers = list(scope.get("headers") or [])
        path = scope.get("path", "")
        if path_always_allowed(path, self.always_allow_paths):
            # Probes carry no credentials (kubelet): no authentication needed for these paths. A
            # caller that asks for detail (`?verbose`) gets it only if it may GET the path itself.
            self.metrics.count("authz", "allowed", "always-allow-path")
            scope = {**scope, "headers": self.authenticator.strip_headers(headers, drop_authorization=True),
                     "user": await self._verbose_user(scope, headers, path)}
            return await self.app(scope, receive, send)

        result = await self._authenticate(scope, headers)
        if result.user is None:
            outcome = "error" if result.method == "token" else "failure"
            self.metrics.count("authn", outcome, result.method)
            log.info("authentication failed for %s %s: %s", scope.get("method"), path, result.error)
            return await _send_status(send, Unauthorized("Unauthorized").to_status(), websocket=ws)
        self.metrics.count("authn", "success", result.method)

        info = request_info(scope.get("method", "GET"), path, scope.get("query_string", b""))
        try:
            decision = await self.authorizer.authorize(result.user, info)
        except ReviewUnavailable as exc:
            self.metrics.count("authz", "error", "review")
            log.warning("authorization unavailable for %s %s: %s", scope.get("method"), path, exc)
            body = ServiceUnavailable(f"authorization could not be checked: {exc}").to_status()
            return await _send_status(send, body, [(b"retry-after", b"1")], websocket=ws)
        if not decision.allowed:
            self.metrics.count("authz", "denied", decision.source)
            return await _send_status(send, forbidden_status(result.user, info, decision.reason), websocket=ws)
        self.metrics.count("authz", "allowed", decision.source)

        scope = {
            **scope,
            "headers": self.authenticator.strip_headers(headers, drop_authorization=True),
            "user": result.user,
        }
        return await self.app(scope, receive, send)

    async def _authenticate(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]]) -> Any:
        """The request's identity from its headers and its TLS client chain (none when unreadable)."""
        try:
            chain = client_chain(scope)
        except ValueError:
            chain = []
        return await self.authenticator.authenticate(headers, chain)

    async def _verbose_user(self, scope: dict[str, Any], headers: list[tuple[bytes, bytes]], path: str) -> Any:
        """The user behind a `?verbose` request to an always-allowed path if authorized for it, else None
        (the probe is still answered, without detail)."""
        if b"verbose" not in (scope.get("query_string") or b""):
            return None
        result = await self._authenticate(scope, headers)
        if result.user is None:
            return None
        try:
            decision = await self.authorizer.authorize(result.user, request_info("GET", path, b""))
        except ReviewUnavailable:
            return None
        return result.user if decision.allowed else None
