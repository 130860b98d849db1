"""One view of whether the API server answers, shared by every worker, informer and the elector.

When the API server goes away, every autoscaler's sync and every watch fails at once. Instead of
each of them logging (and retrying) on its own, the first failure marks the API down: workers
stop taking keys, informers wait, and a single probe retries with exponential backoff, logging one
warning per retry. When the probe answers, everything resumes by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

import aiohttp

from promscaler.kubeapi import ApiError, Kube

log = logging.getLogger(__name__)

GATEWAY = frozenset({502, 504})  # a load balancer in front of an API server that is gone


def is_outage(exc: BaseException) -> bool:
    """A failure that says the API server itself is unreachable or unavailable (not a bad request)."""
    if isinstance(exc, ApiError):
        return exc.status in GATEWAY  # a 503 is usually an aggregated API's, not the API server's
    return isinstance(exc, aiohttp.ClientConnectionError | TimeoutError)  # refused, reset, disconnected, timed out


def describe(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class ApiHealth:
    """`up` is set while the API server answers; `failed()` reports an outage, once for everyone."""

    def __init__(self, kube: Kube, *, initial_backoff: float = 1.0, max_backoff: float = 30.0,
                 probe_path: str = "/version") -> None:
        self.kube = kube
        self.initial_backoff = initial_backoff
        self.max_backoff = max_backoff
        self.probe_path = probe_path
        self.up = asyncio.Event()
        self.up.set()
        self.outages = 0
        self.retries = 0
        self._probe: asyncio.Task[None] | None = None

    def failed(self, exc: BaseException) -> None:
        """Report an outage-like failure; the first one (while up) starts the shared retry loop."""
        if not self.up.is_set():
            return
        self.up.clear()
        self.outages += 1
        log.warning("API server unavailable (%s): syncs paused; retrying in %.0fs", describe(exc), self.initial_backoff,
                    extra={"error": describe(exc)})
        self._probe = asyncio.create_task(self._recover(time.monotonic()))

    async def wait_up(self) -> None:
        await self.up.wait()

    async def _recover(self, since: float) -> None:
        backoff = self.initial_backoff
        while True:
            await asyncio.sleep(backoff)
            self.retries += 1
            try:
                await self.kube.request("GET", self.probe_path, timeout=max(2.0, min(backoff, 10.0)))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                if isinstance(exc, ApiError) and not is_outage(exc):
                    break  # it answers (even 403/404): it is back
                backoff = min(backoff * 2, self.max_backoff)
                log.warning("API server still unavailable after %.0fs (%s); retrying in %.0fs",
                            time.monotonic() - since, describe(exc), backoff,
                            extra={"error": describe(exc), "retries": self.retries})
                continue
            break
        log.info("API server available again after %.1fs: syncs resumed", time.monotonic() - since)
        self.up.set()

    async def close(self) -> None:
        if self._probe is not None and not self._probe.done():
            self._probe.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._probe
