"""A small TTL cache for review results (TokenReview, SubjectAccessReview)."""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Generic, Hashable, TypeVar

V = TypeVar("V")

__all__ = ["TTLCache"]


class TTLCache(Generic[V]):
    """Entries expire after the TTL given at `put`; the oldest go first beyond `max_size`."""

    def __init__(self, max_size: int = 4096, clock=time.monotonic) -> None:
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
        if ttl <= 0:
            return
        self._data[key] = (self._clock() + ttl, value)
        self._data.move_to_end(key)
        while len(self._data) > self._max:
            self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
