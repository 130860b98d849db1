"""Refresh-ahead: a query asked again and again (the HPA's pattern) is answered from memory, never
older than its freshness bound, with one Prometheus query per period; a query nobody asks any more
stops being refreshed after two periods."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

import httpx
import pytest

from adapter.naming import compile_rules
from adapter.provider import CachePolicy, freshness_bound
from adapter.querycache import QueryCache, refresh_lead
from adapter.rules import parse_rules
from tests.support import eventually, in_virtual_time, prometheus_requests

from .conftest import AdapterProcess, direct

TTL = 1.0  # the shortest period refresh-ahead keeps warm


class Backend:
    """A fetch that counts its calls and answers when it was sent (on `clock`)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.sent: list[float] = []

    async def fetch(self) -> float:
        self.sent.append(self.clock())
        return self.sent[-1]


# The next two run in virtual time (the loop's clock, injected into the cache, stands still while
# code runs and jumps from timer to timer): a stalled machine no longer puts time between a query's
# start and its fetch, or between a refresh's timer and its check, so the bounds are exact, no margins.

def test_asked_again_and_again_is_answered_from_memory_never_older_than_the_bound():
    async def main() -> None:
        clock = asyncio.get_running_loop().time
        cache, backend = QueryCache(clock=clock), Backend(clock)
        try:
            ages = []
            end = clock() + 4 * TTL
            while clock() < end:
                sent_at, _ = await cache.lookup("q", TTL, backend.fetch, refresh=True)
                ages.append(clock() - sent_at)
                await asyncio.sleep(0.1)
            assert cache.misses == 1  # only the first request waited on Prometheus
            assert cache.refreshes == 5  # the rest came from refreshes sent at 0.75, 1.5, 2.25, 3 and 3.75 s
            assert max(ages) < TTL  # never older than the freshness bound
            period = TTL - refresh_lead(TTL)
            gaps = [b - a for a, b in zip(backend.sent, backend.sent[1:], strict=False)]
            assert min(gaps) >= period  # at most one query per period
        finally:
            await cache.aclose()

    in_virtual_time(main())


def test_a_query_nobody_asks_for_stops_being_refreshed():
    async def main() -> None:
        clock = asyncio.get_running_loop().time
        cache, backend = QueryCache(clock=clock), Backend(clock)
        try:
            await cache.lookup("q", TTL, backend.fetch, refresh=True)
            last_ask = clock()
            assert cache.warm == 1
            await eventually(lambda: cache.warm == 0, timeout=15)
            period = TTL - refresh_lead(TTL)
            # refreshed while the last request is at most two periods old (0.75 and 1.5 s), then no more
            assert [t - last_ask for t in backend.sent] == pytest.approx([0.0, period, 2 * period])
        finally:
            await cache.aclose()

    in_virtual_time(main())


async def test_failures_are_not_refreshed_and_the_next_request_asks_again():
    cache, calls = QueryCache(), []

    async def failing() -> None:
        calls.append(1)
        raise RuntimeError("Prometheus said no")

    try:
        with pytest.raises(RuntimeError):
            await cache.lookup("q", TTL, failing, refresh=True)
        assert cache.warm == 0
        with pytest.raises(RuntimeError):
            await cache.lookup("q", TTL, failing, refresh=True)
        assert len(calls) == 2
    finally:
        await cache.aclose()


async def test_without_refresh_nothing_happens_in_the_background():
    cache, backend = QueryCache(), Backend()
    await cache.lookup("q", TTL, backend.fetch)
    assert cache.warm == 0  # not tracked: no refresh is scheduled
    await eventually(lambda: cache._fresh.get("q") is None, timeout=10)  # it expires instead of being refreshed
    assert len(backend.sent) == 1 and cache.refreshes == 0


@pytest.mark.parametrize("query,freshness,expected", [
    ("sum(rate(x[1m])) by (pod)", None, 15.0),   # a third of 60 s is 20 s: capped at 15 s
    ("sum(rate(x[30s])) by (pod)", None, 10.0),  # a third of the rate range
    ("sum(x) by (pod)", None, 5.0),              # no range
    ("sum(rate(x[1m])) by (pod)", 4.0, 4.0),     # the flag wins
])
def test_default_freshness_bound(query, freshness, expected):
    rules = compile_rules(parse_rules(
        "rules:\n- seriesQuery: x\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: '" + query + "'\n"))
    assert freshness_bound(freshness, rules.rules[0]) == expected
    assert CachePolicy(refresh_ahead=True, freshness=freshness).for_rule(rules.rules[0]) == (expected, True)
    assert CachePolicy(ttl=0, refresh_ahead=True).for_rule(rules.rules[0]) == (0.0, False)  # caching off


async def test_hpa_pattern_through_the_real_adapter(prometheus, rules_file):
    """Several autoscalers asking one metric every half second for a few periods: every answer is
    Prometheus' current value, and Prometheus receives about one query per refresh period."""
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                             "--query-freshness", "2s").wait_ready()
    path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/requests"
    try:
        expected = direct(prometheus.url, 'sum(rate(app_requests_total{namespace="web",pod!=""}[1m])) by (pod)')
        before = prometheus_requests(prometheus.url)
        started = time.monotonic()
        async with httpx.AsyncClient(base_url=adapter.url, timeout=15) as client:
            for _ in range(16):
                answers = await asyncio.gather(*(client.get(path) for _ in range(3)))
                for r in answers:
                    assert r.status_code == 200
                    assert {i["describedObject"]["name"] for i in r.json()["items"]} == set(expected)
                await asyncio.sleep(0.5)
        sent = prometheus_requests(prometheus.url) - before
        elapsed = time.monotonic() - started  # after the count: every query counted was sent within it
        period = 2.0 - refresh_lead(2.0)
        assert 1 <= sent <= elapsed / period + 2  # one per period (plus the first and one in flight)
    finally:
        adapter.stop()
