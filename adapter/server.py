"""Serving: uvicorn on `--port` with `--insecure` (plain HTTP, no authentication: local use and
tests); `--secure-port` (TLS, authentication, authorization) comes from `adapter.security`.

The seam for secure serving is `_serve_secure` below: it receives the Settings, the ASGI app
and the `on_listening` callback, and must call `on_listening()` once it accepts connections.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from adapter.settings import Settings

__all__ = ["SERVING_MODULES", "SecurityUnavailable", "check_security", "serve"]

# What plain-HTTP serving imports: uvicorn (imported here only when serving starts: adapter.cli
# imports these on a worker thread while it waits for Prometheus), its httptools protocol and lifespan.
SERVING_MODULES = ("uvicorn", "uvicorn.protocols.http.httptools_impl", "uvicorn.lifespan.on")


class SecurityUnavailable(RuntimeError):
    """Secure serving cannot start (unusable security flags or files); the message says why."""


def check_security(settings: Settings) -> None:
    """Fail fast (before connecting to anything) on security flags or files that cannot work."""
    if not settings.insecure:
        from adapter.security.serve import SecurityConfigError, check_flags

        try:
            check_flags(settings)
        except SecurityConfigError as exc:
            raise SecurityUnavailable(str(exc)) from None


@functools.cache
def _server_class() -> Any:
    import uvicorn

    class _Server(uvicorn.Server):
        """uvicorn whose SIGTERM/SIGINT ends `serve()` after a graceful shutdown instead of re-raising
        the signal, so the process cleans up and exits 0."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            self._captured_signals.clear()

    return _Server


async def _serve_insecure(settings: Settings, app, on_listening: Callable[[], None]) -> None:
    import uvicorn
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from adapter.onewrite import corked

    server = _server_class()(uvicorn.Config(
        app, host=settings.listen_host, port=settings.listen_port, log_level="warning", access_log=False,
        server_header=False, lifespan="on", timeout_graceful_shutdown=5, timeout_keep_alive=60,
        http=corked(HttpToolsProtocol), ws="none",  # each answer in one write; no websocket routes
        proxy_headers=False,  # nothing reads the client address: skip the X-Forwarded-* pass per request
    ))

    async def watch_started() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        on_listening()

    watcher = asyncio.create_task(watch_started())
    try:
        await server.serve()
    finally:
        watcher.cancel()
    if not server.started:
        raise OSError(f"could not listen on {settings.listen_host}:{settings.listen_port}")


async def _serve_secure(settings: Settings, app, on_listening: Callable[[], None], registry: Any = None) -> None:
    from adapter.security.serve import SecurityConfigError, serve_secure

    try:
        await serve_secure(
            settings, app, on_listening, registry=registry, access_log=False,
            server_header=False, lifespan="on", timeout_graceful_shutdown=5, timeout_keep_alive=60, ws="none",
            proxy_headers=False,  # as plain HTTP: nothing reads the client address
        )
    except SecurityConfigError as exc:
        raise SecurityUnavailable(str(exc)) from None


async def serve(settings: Settings, app, on_listening: Callable[[], None], registry: Any = None) -> None:
    """Serve `app` until SIGINT/SIGTERM; `on_listening` runs once connections are accepted.
    `registry`: where secure serving's own metrics go (the adapter's `/metrics`)."""
    if settings.insecure:
        await _serve_insecure(settings, app, on_listening)
    else:
        await _serve_secure(settings, app, on_listening, registry)
