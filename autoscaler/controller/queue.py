"""A work queue with per-key de-duplication and rate-limited retries (client-go's workqueue).

A key is never handed to two workers at once: adding a key that is being processed marks it
dirty, and it is queued again when `done()` is called. Failed keys come back after an
exponential per-key backoff (`base * 2**failures`, capped), reset by `forget()`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Hashable
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


class ShutDown(Exception):
    """The queue was shut down; workers should exit."""


class QueueMetrics(Protocol):
    """client-go's workqueue metrics provider: what a queue reports as it is used."""

    def added(self) -> None: ...
    def depth(self, n: int) -> None: ...
    def queued(self, seconds: float) -> None: ...
    def worked(self, seconds: float) -> None: ...
    def retried(self) -> None: ...


class WorkQueue(Generic[K]):
    def __init__(self, base_delay: float = 0.005, max_delay: float = 1000.0,
                 metrics: QueueMetrics | None = None) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self.metrics = metrics
        self._added_at: dict[K, float] = {}
        self._started_at: dict[K, float] = {}
        self._queue: deque[K] = deque()
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._failures: dict[K, int] = {}
        self._timers: dict[K, tuple[float, asyncio.TimerHandle]] = {}
        self._cond = asyncio.Condition()
        self._shutdown = False

    def __len__(self) -> int:
        return len(self._queue)

    def add(self, key: K) -> None:
        """Queue `key` now, unless it is already waiting."""
        if self._shutdown or key in self._dirty:
            return
        self._dirty.add(key)
        if self.metrics is not None:
            self.metrics.added()
            self._added_at.setdefault(key, time.perf_counter())
        if key in self._processing:
            return  # re-queued by done()
        self._queue.append(key)
        self._depth()
        self._notify()

    def _depth(self) -> None:
        if self.metrics is not None:
            self.metrics.depth(len(self._queue))

    def _notify(self) -> None:
        async def wake() -> None:
            async with self._cond:
                self._cond.notify()

        asyncio.get_running_loop().create_task(wake())

    def add_after(self, key: K, delay: float) -> None:
        """Queue `key` after `delay` seconds; an earlier pending add wins."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        pending = self._timers.get(key)
        if pending is not None:
            if pending[0] <= when:
                return
            pending[1].cancel()
        self._timers[key] = (when, loop.call_at(when, self._fire, key))

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_rate_limited(self, key: K) -> None:
        """Retry `key` after its exponential backoff."""
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if self.metrics is not None:
            self.metrics.retried()
        self.add_after(key, min(self.base_delay * (2**failures), self.max_delay))

    def forget(self, key: K) -> None:
        """Reset `key`'s backoff after a success."""
        self._failures.pop(key, None)

    def failures(self, key: K) -> int:
        return self._failures.get(key, 0)

    def cancel(self, key: K) -> None:
        """Drop any pending delayed add (the object was deleted)."""
        pending = self._timers.pop(key, None)
        if pending is not None:
            pending[1].cancel()
        self._failures.pop(key, None)

    async def get(self) -> K:
        """The next key to process; raises ShutDown once the queue is shut down and drained."""
        async with self._cond:
            while not self._queue:
                if self._shutdown:
                    raise ShutDown
                await self._cond.wait()
            key = self._queue.popleft()
        self._dirty.discard(key)
        self._processing.add(key)
        if self.metrics is not None:
            now = time.perf_counter()
            self.metrics.queued(now - self._added_at.pop(key, now))
            self._started_at[key] = now
            self._depth()
        return key

    def done(self, key: K) -> None:
        self._processing.discard(key)
        if self.metrics is not None:
            started = self._started_at.pop(key, None)
            if started is not None:
                self.metrics.worked(time.perf_counter() - started)
        if key in self._dirty:
            self._queue.append(key)
            self._depth()
            self._notify()

    async def shut_down(self) -> None:
        """Stop handing out new work; pending timers are dropped, waiting workers wake up."""
        self._shutdown = True
        self._queue.clear()
        self._dirty.clear()
        for _, timer in self._timers.values():
            timer.cancel()
        self._timers.clear()
        async with self._cond:
            self._cond.notify_all()
