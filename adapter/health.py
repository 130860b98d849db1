"""The probes as raw ASGI: `/healthz`, `/livez` and `/readyz`, in Kubernetes' healthz format.

Raw ASGI so that the front (adapter.front) answers them as soon as the adapter serves, before
the FastAPI app is imported and built: ready then means discovery has listed, not that FastAPI
has loaded. The FastAPI app serves the same instance (one set of answers, one log of reasons).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar
from urllib.parse import parse_qsl

import orjson

from adapter.metricroutes import Route, send_json
from promscaler.status import MethodNotAllowed

__all__ = ["Health", "Readiness"]

log = logging.getLogger("adapter.app")
# The readiness checks, in order: (name, None when it passes, else why it fails).
Readiness = Callable[[], Awaitable[list[tuple[str, str | None]]]]


async def _send_text(send: Any, code: int, text: str) -> None:
    await send_json(send, code, text.encode(), b"text/plain; charset=utf-8")


class Health:
    """ASGI answering the probe paths (`claims`); `readiness` None: ready whenever serving.
    `insecure`: every caller may read why a check failed (secure serving: only a caller the
    security middleware found authorized for the path, `scope["user"]`)."""

    PATHS: ClassVar[dict[str, Route]] = {p: Route(p) for p in ("/healthz", "/livez", "/readyz")}

    def __init__(self, readiness: Readiness | None, insecure: bool) -> None:
        self.readiness, self.insecure = readiness, insecure
        self._withheld = ""  # the last failure logged: a new reason is logged once

    @classmethod
    def claims(cls, path: str) -> bool:
        return path in cls.PATHS

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        path: str = scope["path"]
        scope["route"] = self.PATHS[path]  # the request metrics' route label, as the app's routes gave
        if scope["method"] != "GET":
            status = MethodNotAllowed(f"method {scope['method']} is not supported on {path}").to_status()
            return await send_json(send, 405, orjson.dumps(status))
        verbose = any(k == "verbose" for k, _ in parse_qsl(scope["query_string"].decode("latin-1"),
                                                          keep_blank_values=True))
        if path == "/readyz":
            code, text = await self.ready(verbose, self.insecure or scope.get("user") is not None)
        else:
            code, text = 200, f"[+]ping ok\n{path.lstrip('/')} check passed\n" if verbose else "ok"
        await _send_text(send, code, text)

    async def ready(self, verbose: bool, authorized: bool) -> tuple[int, str]:
        checks = await self.readiness() if self.readiness else [("prometheus", None)]
        failed = [f"{name}: {why}" for name, why in checks if why is not None]
        if not failed:
            self._withheld = ""
            if not verbose:
                return 200, "ok"
            return 200, "[+]ping ok\n" + "".join(f"[+]{name} ok\n" for name, _ in checks) + "readyz check passed\n"
        why = "; ".join(failed)
        if why != self._withheld:  # the detail goes to the log (once per new reason)...
            self._withheld = why
            log.warning("readyz check failed: %s", why)
        # ...and to callers authorized for /readyz who ask for it (insecure serving: everyone), as
        # Kubernetes' healthz withholds a failed check's reason from the others
        lines = "".join(f"[+]{name} ok\n" if reason is None else
                        f"[-]{name} failed: {reason if verbose and authorized else 'reason withheld'}\n"
                        for name, reason in checks)
        return 503, f"[+]ping ok\n{lines}readyz check failed\n"
