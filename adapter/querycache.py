"""Single-flight coalescing, a short freshness cache and refresh-ahead for Prometheus reads.

Identical queries in flight share one request; an answer is reused for at most `ttl` seconds
counted from when its request was *sent*, so nothing older than `ttl` is ever served. Errors
are never cached. Callers learn until when an answer may be served (`lookup`), so whatever they
derive from it (a serialized response) can be kept exactly as long and no longer.

Refresh-ahead serves the HPA's pattern (the same query again every sync period): a query asked
with `refresh=True` is sent again in the background shortly before its answer stops being fresh,
as long as somebody asked for it within the last two periods, so the next request is answered
from memory. Prometheus then receives one query per distinct query per period (`ttl` less the
lead time), and none for a query nobody asks for any more.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Any

from adapter.ttlcache import TTLCache

__all__ = ["QueryCache", "refresh_lead"]


def refresh_lead(ttl: float) -> float:
    """How long before an answer stops being fresh its refresh is sent: room for the query to
    finish (a quarter of the period, between 0.2 s and 2 s)."""
    return min(2.0, max(0.2, ttl / 4))


@dataclass
class _Tracked:
    """A query kept warm: how to fetch it, its freshness, and when somebody last asked for it."""

    fetch: Callable[[], Awaitable[Any]]
    ttl: float
    asked: float
    timer: asyncio.TimerHandle | None = None


class QueryCache:
    def __init__(self, max_entries: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._fresh: TTLCache[Any] = TTLCache(max_entries, clock)
        self._inflight: dict[Hashable, tuple[asyncio.Future, float]] = {}
        self._tracked: dict[Hashable, _Tracked] = {}
        self._max_tracked = max_entries
        self.hits = self.coalesced = self.misses = self.refreshes = 0

    async def get(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]]) -> Any:
        """The answer for `key`: fresh from the cache, shared with an identical request in flight,
        or fetched now."""
        return (await self.lookup(key, ttl, fetch))[0]

    async def lookup(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]],
                     refresh: bool = False) -> tuple[Any, float]:
        """`get`, plus the monotonic deadline until which the answer may be served (0: not reusable).
        With `refresh`, the query is kept warm while it keeps being asked (see the module's doc)."""
        now = self._clock()
        if refresh and ttl >= 1.0:  # below a second a background refresh saves nothing
            self._track(key, ttl, fetch, now)
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
            task, expires = self._start(key, ttl, fetch, now)
        return await asyncio.shield(task), expires

    def _start(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]],
               now: float) -> tuple[asyncio.Future, float]:
        task = asyncio.ensure_future(fetch())  # not tied to the first caller: its cancellation spares the others
        expires = now + ttl if ttl > 0 else 0.0
        self._inflight[key] = (task, expires)
        task.add_done_callback(lambda t: self._done(key, expires, t))
        return task, expires

    def _done(self, key: Hashable, expires: float, task: asyncio.Future) -> None:
        if self._inflight.get(key, (None,))[0] is task:
            del self._inflight[key]
        ok = not task.cancelled() and task.exception() is None
        if ok and expires > 0:
            self._fresh.put_until(key, (task.result(), expires), expires)
        tracked = self._tracked.get(key)
        if tracked is not None:
            if ok:
                self._schedule(key, tracked, expires - refresh_lead(tracked.ttl))
            else:  # a failed query is not retried in the background: the next request asks again
                self._untrack(key)

    def _track(self, key: Hashable, ttl: float, fetch: Callable[[], Awaitable[Any]], now: float) -> None:
        tracked = self._tracked.get(key)
        if tracked is None:
            if len(self._tracked) >= self._max_tracked:
                return  # bounded: beyond it queries are served as without refresh-ahead
            self._tracked[key] = _Tracked(fetch, ttl, now)
        else:
            tracked.asked, tracked.fetch, tracked.ttl = now, fetch, ttl
            if tracked.timer is None and key not in self._inflight and self._fresh.get(key) is not None:
                # answered fresh before tracking started: keep it warm from its own deadline
                self._schedule(key, tracked, self._fresh_deadline(key) - refresh_lead(ttl))

    def _fresh_deadline(self, key: Hashable) -> float:
        entry = self._fresh.get(key)
        return entry[1] if entry is not None else self._clock()

    def _schedule(self, key: Hashable, tracked: _Tracked, at: float) -> None:
        if tracked.timer is not None:
            tracked.timer.cancel()
        delay = max(0.0, at - self._clock())
        tracked.timer = asyncio.get_running_loop().call_later(delay, self._refresh, key)

    def _refresh(self, key: Hashable) -> None:
        tracked = self._tracked.get(key)
        if tracked is None:
            return
        tracked.timer = None
        now = self._clock()
        period = tracked.ttl - refresh_lead(tracked.ttl)
        if now - tracked.asked > 2 * period:
            self._untrack(key)  # nobody asked during two periods: let it expire
            return
        if key not in self._inflight:
            self.refreshes += 1
            self._start(key, tracked.ttl, tracked.fetch, now)

    def _untrack(self, key: Hashable) -> None:
        tracked = self._tracked.pop(key, None)
        if tracked is not None and tracked.timer is not None:
            tracked.timer.cancel()

    @property
    def warm(self) -> int:
        """How many queries are kept warm."""
        return len(self._tracked)

    def clear(self) -> None:
        for key in list(self._tracked):
            self._untrack(key)
        self._fresh.clear()

    async def aclose(self) -> None:
        """Stop refreshing and wait for refreshes in flight (a clean shutdown leaves no task)."""
        self.clear()
        pending = [task for task, _ in self._inflight.values()]
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(BaseException):
                await task
