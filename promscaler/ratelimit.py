"""The client's request rate limit: a token bucket, as client-go's `flowcontrol.NewTokenBucketRateLimiter`
behind kube-controller-manager's `--kube-api-qps` and `--kube-api-burst`.

`qps` tokens per second accrue up to `burst`; each request takes one, and when none is left it
waits its turn (a reservation: callers are served in arrival order, none starves).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


class TokenBucket:
    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        if qps <= 0 or burst < 1:
            raise ValueError("qps must be > 0 and burst >= 1")
        self.qps = qps
        self.burst = burst
        self.clock = clock
        self.tokens = float(burst)
        self.stamp = clock()
        self.waited = 0  # requests that had to wait (for benchmarks and tests)

    def reserve(self) -> float:
        """Take a token now; the seconds the caller must wait before using it."""
        now = self.clock()
        self.tokens = min(float(self.burst), self.tokens + (now - self.stamp) * self.qps)
        self.stamp = now
        self.tokens -= 1.0
        return 0.0 if self.tokens >= 0 else -self.tokens / self.qps

    async def acquire(self) -> None:
        delay = self.reserve()
        if delay > 0:
            self.waited += 1
            await asyncio.sleep(delay)
