"""Waits that end early when the controller stops: its loops pause between polls and retries
without delaying a graceful shutdown."""

from __future__ import annotations

import asyncio


async def sleep_or_stop(stop: asyncio.Event, seconds: float) -> bool:
    """Sleep, waking early when `stop` is set; True when stopping."""
    try:
        await asyncio.wait_for(stop.wait(), timeout=seconds)
        return True
    except TimeoutError:
        return False
