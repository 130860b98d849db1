"""The work queue: de-duplication, no concurrent processing of a key, backoff, delayed adds."""

import asyncio

import pytest

from autoscaler.controller.queue import ShutDown, WorkQueue
from tests.support import in_virtual_time


async def test_add_dedups_waiting_keys():
    q: WorkQueue[str] = WorkQueue()
    for key in ("a", "b", "a", "a"):
        q.add(key)
    assert len(q) == 2
    assert [await q.get(), await q.get()] == ["a", "b"]


async def test_key_added_while_processing_comes_back_after_done():
    q: WorkQueue[str] = WorkQueue()
    q.add("a")
    key = await q.get()
    q.add("a")  # an update while a worker holds it
    assert len(q) == 0  # not handed to a second worker
    q.done(key)
    assert len(q) == 1 and await q.get() == "a"


# The delayed adds run in virtual time (looptime, tests.support.in_virtual_time): their delays are exact and
# a stalled machine cannot fire a timeout before them.

def test_rate_limited_backoff_grows_and_forget_resets():
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue(base_delay=0.01, max_delay=0.04)
        delays = []
        loop = asyncio.get_running_loop()
        for _ in range(4):
            start = loop.time()
            q.add_rate_limited("a")
            key = await q.get()
            delays.append(loop.time() - start)
            q.done(key)
        assert q.failures("a") == 4
        assert delays == pytest.approx([0.01, 0.02, 0.04, 0.04])  # doubling, capped at max_delay
        q.forget("a")
        assert q.failures("a") == 0

    in_virtual_time(main())


def test_add_after_keeps_the_earlier_time():
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        loop = asyncio.get_running_loop()
        start = loop.time()
        q.add_after("a", 5.0)
        q.add_after("a", 0.01)
        assert await asyncio.wait_for(q.get(), 1.0) == "a"
        assert loop.time() - start == pytest.approx(0.01)

    in_virtual_time(main())


def test_cancel_drops_delayed_add():
    async def main() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add_after("a", 0.01)
        q.cancel("a")
        await asyncio.sleep(0.03)
        assert len(q) == 0

    in_virtual_time(main())


async def test_shutdown_wakes_waiting_workers():
    q: WorkQueue[str] = WorkQueue()
    waiter = asyncio.create_task(q.get())
    await asyncio.sleep(0)
    await q.shut_down()
    try:
        await asyncio.wait_for(waiter, 1.0)
        raise AssertionError("expected ShutDown")
    except ShutDown:
        pass
