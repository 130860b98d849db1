"""Single-flight coalescing plus a short, bounded freshness cache for Prometheus reads.

Identical queries in flight share one request; an answer is reused for at most `ttl` seconds
counted from when its request was *sent*, so nothing older than `ttl` is ever served. Errors
are never cached. Kept apart so a benchmark can measure it alone (issue 7).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

__all__ = ["QueryCache"]


class QueryCache:
    def __init__(self, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_entries = max_entries
        self._clock = clock
        self._fresh: dict[Hashable, tuple[float, Any]] = {}
        self._inflight: dict[Hashable, asyncio.Future] = {}
        self.hits = self.coalesced = self.misses = 0

    async def get(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]]) -> Any:
        now = self._clock()
        if ttl > 0:
            entry = self._fresh.get(key)
            if entry is not None:
                if entry[0] > now:
                    self.hits += 1
                    return entry[1]
                del self._fresh[key]
        task = self._inflight.get(key)
        if task is not None:
            self.coalesced += 1
        else:
            self.misses += 1
            task = asyncio.ensure_future(fetch())  # not tied to the first caller: its cancellation spares the others
            self._inflight[key] = task
            task.add_done_callback(lambda t, sent=now: self._done(key, ttl, sent, t))
        return await asyncio.shield(task)

    def _done(self, key: Hashable, ttl: float, sent: float, task: asyncio.Future) -> None:
        if self._inflight.get(key) is task:
            del self._inflight[key]
        if task.cancelled():
            return
        if task.exception() is None and ttl > 0:
            self._store(key, sent + ttl, task.result())

    def _store(self, key: Hashable, expires: float, value: Any) -> None:
        if len(self._fresh) >= self.max_entries:
            now = self._clock()
            for k in [k for k, (exp, _) in self._fresh.items() if exp <= now]:
                del self._fresh[k]
            while len(self._fresh) >= self.max_entries:  # still full: drop the oldest inserted
                del self._fresh[next(iter(self._fresh))]
        self._fresh[key] = (expires, value)

    def clear(self) -> None:
        self._fresh.clear()
