"""A bounded map whose entries expire: review results (TokenReview, SubjectAccessReview), query
answers and the response bodies derived from them."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

__all__ = ["TTLCache"]


class TTLCache(Generic[V]):
    """Entries expire at the deadline given at `put` (monotonic seconds); beyond `max_size` the
    oldest go first."""

    def __init__(self, max_size: int = 4096, clock: Callable[[], float] = time.monotonic) -> None:
        self._data: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()
        self._max = max_size
        self._clock = clock

    def get(self, key: Hashable) -> V | None:
        item = self._data.get(key)
        if item is None:
            return None
        expires, value = item
        if expires <= self._clock():
            del self._data[key]
            return None
        return value

    def put(self, key: Hashable, value: V, ttl: float) -> None:
        """Keep `value` for `ttl` seconds from now (not at all when `ttl` <= 0)."""
        if ttl > 0:
            self.put_until(key, value, self._clock() + ttl)

    def put_until(self, key: Hashable, value: V, expires: float) -> None:
        """Keep `value` until the monotonic deadline `expires`. Expired entries at the old end go
        first (a cache of short-lived answers does not sit on memory until it is full)."""
        self._data[key] = (expires, value)
        self._data.move_to_end(key)
        data, now = self._data, self._clock()
        while data and (len(data) > self._max or next(iter(data.values()))[0] <= now):
            data.popitem(last=False)

    def clear(self) -> None:
        self._data.clear()

    def __len__(self) -> int:
        return len(self._data)
