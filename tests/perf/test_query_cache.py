"""Coalescing and the bounded freshness cache: Prometheus gets at most one query per distinct
(query, freshness period), and no answer older than the freshness is ever served."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from adapter.naming import compile_rules
from adapter.provider import cache_ttl
from adapter.querycache import QueryCache
from adapter.rules import parse_rules
from adapter.ttlcache import TTLCache
from tests.support import prometheus_requests, wait_for

from .conftest import AdapterProcess, Clock, direct


async def test_identical_in_flight_queries_share_one_fetch():
    cache, release, calls = QueryCache(), asyncio.Event(), []

    async def fetch():
        calls.append(1)
        await release.wait()
        return ["answer"]

    waiters = [asyncio.create_task(cache.get(("query", "q"), 0.0, fetch)) for _ in range(50)]
    await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*waiters)
    assert len(calls) == 1 and cache.misses == 1 and cache.coalesced == 49
    assert all(r == ["answer"] for r in results)


async def test_answers_expire_ttl_after_their_request_was_sent():
    clock = Clock()
    cache, answers = QueryCache(clock=clock), iter(range(100))

    async def slow_fetch():
        clock.now += 0.75  # Prometheus took 0.75s: the answer is already 0.75s old when it arrives
        return next(answers)

    assert await cache.get("k", 2.0, slow_fetch) == 0
    clock.now += 1.2  # 1.95s after the request was sent: still fresh
    assert await cache.get("k", 2.0, slow_fetch) == 0
    clock.now += 0.05  # 2.0s after it was sent: too old, asked again
    assert await cache.get("k", 2.0, slow_fetch) == 1
    assert cache.hits == 1 and cache.misses == 2


async def test_ttl_zero_never_reuses_and_errors_are_not_cached():
    clock = Clock()
    cache, n = QueryCache(clock=clock), {"calls": 0}

    async def fetch():
        n["calls"] += 1
        if n["calls"] == 2:
            raise RuntimeError("prometheus failed")
        return n["calls"]

    assert await cache.get("k", 0.0, fetch) == 1
    with pytest.raises(RuntimeError):
        await cache.get("k", 5.0, fetch)
    assert await cache.get("k", 5.0, fetch) == 3  # the failure was not remembered
    assert await cache.get("k", 5.0, fetch) == 3
    assert n["calls"] == 3


async def test_cache_stays_bounded():
    cache = QueryCache(max_entries=8, clock=Clock())

    async def fetch():
        return 1

    for i in range(50):
        await cache.get(("q", i), 60.0, fetch)
    assert len(cache._fresh) <= 8


@pytest.mark.parametrize("query,flag,expected", [
    ("sum(rate(x[1m])) by (pod)", None, 2.0),   # 1/30 of the rate range
    ("sum(rate(x[30s])) by (pod)", None, 1.0),
    ("sum(rate(x[10m])) by (pod)", None, 5.0),  # capped
    ("sum(x) by (pod)", None, 1.0),             # no range: 1s
    ("sum(rate(x[1m])) by (pod)", 0.0, 0.0),    # --query-cache-ttl 0 disables
    ("sum(x) by (pod)", 3.5, 3.5),              # the flag wins
])
def test_default_freshness(query, flag, expected):
    rules = compile_rules(parse_rules(
        "rules:\n- seriesQuery: x\n  resources: {template: '<<.Resource>>'}\n  metricsQuery: '" + query + "'\n"))
    assert cache_ttl(flag, rules.rules[0]) == expected


QUERIES = "promscaler_adapter_prometheus_query_duration_seconds_count"
REQUESTS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/requests"


async def test_fifty_clients_one_prometheus_query(prometheus, rules_file):
    """Through the real adapter: 50 concurrent clients on one metric -> one query reaches Prometheus.
    The freshness is a minute, so all 50 arrive within it however slowly a loaded machine serves them."""
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                             "--query-cache-ttl", "60s", "--query-refresh-ahead=false").wait_ready()
    try:
        expected = direct(prometheus.url, 'sum(rate(app_requests_total{namespace="web",pod!=""}[1m])) by (pod)')
        before_adapter = adapter.metric(QUERIES, endpoint="query")
        before_prom = prometheus_requests(prometheus.url)
        async with httpx.AsyncClient(base_url=adapter.url, timeout=15,
                                     limits=httpx.Limits(max_connections=50)) as client:
            answers = await asyncio.gather(*(client.get(REQUESTS) for _ in range(50)))
        assert all(r.status_code == 200 for r in answers)
        bodies = {r.content for r in answers}
        assert len(bodies) == 1  # everyone got the same answer...
        items = answers[0].json()["items"]
        assert {i["describedObject"]["name"] for i in items} == set(expected)
        assert adapter.metric(QUERIES, endpoint="query") - before_adapter == 1  # ...from one query
        assert prometheus_requests(prometheus.url) - before_prom == 1
    finally:
        adapter.stop()


def test_the_first_request_after_the_freshness_asks_again(prometheus, rules_file):
    """Through the real adapter: requests are answered from the cache until the freshness period
    (2 s from when the query was sent) has passed, then the next one asks Prometheus again."""
    adapter = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                             "--query-cache-ttl", "2s", "--query-refresh-ahead=false").wait_ready()
    try:
        before = adapter.metric(QUERIES, endpoint="query")
        sent_at = time.monotonic()  # no later than the query was sent: its answer is fresh until at least +2s
        answered: list[float] = []

        def asked_again() -> bool:
            assert adapter.get(REQUESTS).status_code == 200
            answered.append(time.monotonic())
            queries = adapter.metric(QUERIES, endpoint="query") - before
            assert queries in (1, 2)  # one query, answered from the cache, until it is asked again
            return queries == 2

        assert wait_for(asked_again, timeout=15), "not asked again within 15s"
        assert answered[-1] - sent_at >= 2.0  # never before the answer's freshness ran out
    finally:
        adapter.stop()


def test_expired_entries_leave_on_the_next_insert():
    """Short-lived answers do not sit in memory until the cache is full."""
    clock = Clock()
    cache: TTLCache[bytes] = TTLCache(max_size=100, clock=clock)
    for i in range(10):
        cache.put_until(("old", i), b"x" * 1000, clock.now + 1.0)
    cache.put_until(("long",), b"y", clock.now + 60.0)
    assert len(cache) == 11
    clock.now += 2.0  # the ten short ones have expired, the long one has not
    cache.put_until(("new",), b"z", clock.now + 1.0)
    assert len(cache) == 2 and cache.get(("long",)) == b"y" and cache.get(("new",)) == b"z"
