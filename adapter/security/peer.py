"""The TLS peer certificate in the ASGI scope (the ASGI "tls" extension).

uvicorn does not expose the client certificate. `with_tls_extension(Protocol)` makes a subclass
of any uvicorn HTTP protocol (h11 or httptools: both keep the ASGI app in `self.app`) that, once
the handshake is done (`connection_made`), wraps the app for this connection so every request's
scope carries `scope["extensions"]["tls"]` with `client_cert_chain` (PEM strings, leaf first, as
the client sent them: nothing in it is trusted until `authn` verifies it).
"""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

from cryptography import x509

__all__ = ["client_chain", "tls_info", "with_tls_extension"]


def tls_info(transport: asyncio.BaseTransport) -> dict[str, Any] | None:
    """The ASGI TLS extension dict for a connection, or None on plain HTTP."""
    sslobj: ssl.SSLObject | None = transport.get_extra_info("ssl_object")
    if sslobj is None:
        return None
    chain_der: list[bytes] = []
    inner = getattr(sslobj, "_sslobj", None)
    unverified = getattr(sslobj, "get_unverified_chain", None) or getattr(inner, "get_unverified_chain", None)
    if unverified is not None:
        try:
            certs = [c for c in (unverified() or []) if c is not None]
            chain_der = [c if isinstance(c, bytes) else c.public_bytes(ssl._ssl.ENCODING_DER) for c in certs]  # type: ignore[attr-defined]
        except (AttributeError, TypeError, ValueError):
            chain_der = []
    if not chain_der:
        leaf = sslobj.getpeercert(binary_form=True)
        chain_der = [leaf] if leaf else []
    cipher = sslobj.cipher()
    return {
        "server_cert": None,
        "client_cert_chain": [ssl.DER_cert_to_PEM_cert(d) for d in chain_der],
        "client_cert_name": None,
        "client_cert_error": None,
        "tls_version": {"TLSv1.2": 0x0303, "TLSv1.3": 0x0304}.get(sslobj.version() or ""),
        "cipher_suite": None,
        "cipher_name": cipher[0] if cipher else None,
    }


def client_chain(scope: dict[str, Any]) -> list[x509.Certificate]:
    """The client's certificates from the scope (leaf first); empty without TLS or a cert."""
    info = scope.get("extensions", {}).get("tls") or {}
    pems = info.get("client_cert_chain") or []
    parsed = info.get("promscaler.parsed_chain")  # one dict per connection: parsed once per connection
    if parsed is None or parsed[0] is not pems:
        parsed = (pems, [x509.load_pem_x509_certificate(p.encode()) for p in pems])
        if info:
            info["promscaler.parsed_chain"] = parsed
    return list(parsed[1])


class _TLSScopeApp:
    def __init__(self, app: Any, info: dict[str, Any]) -> None:
        self.app, self.info = app, info

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            scope.setdefault("extensions", {})["tls"] = self.info
        return await self.app(scope, receive, send)


def with_tls_extension(protocol_cls: type) -> type:
    """A subclass of a uvicorn HTTP protocol class that adds the TLS extension to each scope."""

    class TLSExtensionProtocol(protocol_cls):
        app: Any  # the ASGI app uvicorn's protocol serves

        def connection_made(self, transport):
            super().connection_made(transport)
            info = tls_info(transport)
            if info is not None:
                self.app = _TLSScopeApp(self.app, info)

    TLSExtensionProtocol.__name__ = f"TLSExtension{protocol_cls.__name__}"
    TLSExtensionProtocol.__qualname__ = TLSExtensionProtocol.__name__
    return TLSExtensionProtocol
