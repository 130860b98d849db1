"""Waits that end early when the controller stops: its loops pause between polls and retries
without delaying a graceful shutdown."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep, waking early when `stop` is set; True when stopping."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
        return True
    except TimeoutError:
        return False


async def wait_or_stop(stop: asyncio.Event, wait: Awaitable[Any], timeout: float | None = None) -> bool:
    """Wait for `wait` (at most `timeout` seconds), waking early when `stop` is set; True when stopping."""
    waiter = asyncio.ensure_future(wait)
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({waiter, stopper}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
        stopper.cancel()
    return stop.is_set()
