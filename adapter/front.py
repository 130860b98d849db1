"""What uvicorn serves from the first moment: the metrics API groups' paths and the probes at
once, the rest through the FastAPI app once it is built.

Discovery's version documents, the metric values (adapter.metricroutes) and `/healthz`, `/livez`,
`/readyz` (adapter.health) are raw ASGI, so the adapter serves them, and is ready, as soon as
discovery has listed, and imports FastAPI (about half of what a start imports) and builds its app
while it already serves them; requests for other paths wait for the app. The lifespan
(discovery's loops) is run here, not by the app, so serving does not wait for it either.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from adapter.health import Health
from adapter.metricroutes import MetricRoutes

__all__ = ["Front"]


class Front:
    """ASGI: `hot` (the metrics API groups, adapter.metricroutes) and `health` (the probes,
    adapter.health) for the paths they claim, the app given to `attach` for everything else,
    waited for until then."""

    def __init__(self, on_startup: Callable[[], Awaitable[None]],
                 on_shutdown: Callable[[], Awaitable[None]]) -> None:
        self.hot: Any = None
        self.health: Any = None
        self.on_startup, self.on_shutdown = on_startup, on_shutdown
        self._app: asyncio.Future = asyncio.get_running_loop().create_future()

    def attach(self, app: Any) -> None:
        self._app.set_result(app)

    def fail(self, exc: BaseException) -> None:
        self._app.set_exception(exc)

    async def app(self) -> Any:
        """The app, once attached (then without a shield per request: metrics.k8s.io and the
        other app paths come through here)."""
        if self._app.done():
            return self._app.result()
        return await asyncio.shield(self._app)

    async def fallback(self, scope: Any, receive: Any, send: Any) -> None:
        """A claimed path that `hot` hands over (a group not served, no version): the app's own routing."""
        await (await self.app()).fallback(scope, receive, send)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            if self.hot is not None and MetricRoutes.claims(scope["path"]):
                return await self.hot(scope, receive, send)
            if self.health is not None and Health.claims(scope["path"]):
                return await self.health(scope, receive, send)
        if scope["type"] == "lifespan":
            return await self._lifespan(receive, send)
        await (await self.app())(scope, receive, send)

    async def _lifespan(self, receive: Any, send: Any) -> None:
        """The ASGI lifespan protocol: startup and shutdown, each answered complete or failed."""
        while True:
            message = await receive()
            phase = message["type"].removeprefix("lifespan.")
            try:
                await (self.on_startup() if phase == "startup" else self.on_shutdown())
            except Exception as exc:
                await send({"type": f"lifespan.{phase}.failed", "message": f"{type(exc).__name__}: {exc}"})
                return
            await send({"type": f"lifespan.{phase}.complete"})
            if phase == "shutdown":
                return
