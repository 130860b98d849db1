"""Single-flight coalescing plus a short, bounded freshness cache for Prometheus reads.

Identical queries in flight share one request; an answer is reused for at most `ttl` seconds
counted from when its request was *sent*, so nothing older than `ttl` is ever served. Errors
are never cached. Callers learn until when an answer may be served (`lookup`), so whatever they
derive from it (a serialized response) can be kept exactly as long and no longer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from adapter.ttlcache import TTLCache

__all__ = ["QueryCache"]


class QueryCache:
    def __init__(self, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._fresh: TTLCache[Any] = TTLCache(max_entries, clock)
        self._inflight: dict[Hashable, tuple[asyncio.Future, float]] = {}
        self.hits = self.coalesced = self.misses = 0

    async def get(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]]) -> Any:
        """The answer for `key`: fresh from the cache, shared with an identical request in flight,
        or fetched now."""
        return (await self.lookup(key, ttl, fetch))[0]

    async def lookup(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]]) -> tuple[Any, float]:
        """`get`, plus the monotonic deadline until which the answer may be served (0: not reusable)."""
        now = self._clock()
        if ttl > 0:
            entry = self._fresh.get(key)
            if entry is not None:
                self.hits += 1
                return entry
        flight = self._inflight.get(key)
        if flight is not None:
            self.coalesced += 1
            task, expires = flight
        else:
            self.misses += 1
            task = asyncio.ensure_future(fetch())  # not tied to the first caller: its cancellation spares the others
            expires = now + ttl if ttl > 0 else 0.0
            self._inflight[key] = (task, expires)
            task.add_done_callback(lambda t: self._done(key, expires, t))
        return await asyncio.shield(task), expires

    def _done(self, key: Hashable, expires: float, task: asyncio.Future) -> None:
        if self._inflight.get(key, (None,))[0] is task:
            del self._inflight[key]
        if not task.cancelled() and task.exception() is None and expires > 0:
            self._fresh.put_until(key, (task.result(), expires), expires)

    def clear(self) -> None:
        self._fresh.clear()
