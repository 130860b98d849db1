"""Answers kept while fresh: the query cache says until when an answer may be served (counted
from when its request was sent), the routes keep the serialized body exactly that long, and a
labelSelector answer is rebuilt as soon as the watched objects' labels change."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest

from adapter.kube import LabelCache, LabelIndex, client
from adapter.metricroutes import MetricRoutes
from adapter.naming import resource_by_api_name
from adapter.provider import CustomValue
from adapter.querycache import QueryCache
from adapter.ttlcache import TTLCache
from kubesim.apiserver import KubeSim
from promscaler.quantity import parse_quantity
from promscaler.selectors import parse_selector
from tests.support import eventually

from .conftest import AdapterProcess, Clock, direct

QUERIES = "promscaler_adapter_prometheus_query_duration_seconds_count"
PODS = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/"


# -- QueryCache.lookup deadlines -----------------------------------------------------------------

async def test_deadline_counts_from_when_the_request_was_sent():
    clock = Clock()
    cache, answers = QueryCache(clock=clock), iter(range(100))

    async def slow_fetch():
        clock.now += 0.75  # the answer arrives 0.75s after the request left
        return next(answers)

    assert await cache.lookup("k", 2.0, slow_fetch) == (0, 1002.0)  # sent at 1000, not received at 1000.75
    clock.now = 1001.5
    assert await cache.lookup("k", 2.0, slow_fetch) == (0, 1002.0)  # a hit keeps the original deadline
    clock.now = 1002.0
    assert await cache.lookup("k", 2.0, slow_fetch) == (1, 1004.0)  # expired: asked again, new deadline
    assert cache.hits == 1 and cache.misses == 2


async def test_ttl_zero_gives_deadline_zero_and_no_reuse():
    clock, calls = Clock(), []
    cache = QueryCache(clock=clock)

    async def fetch():
        calls.append(1)
        return len(calls)

    assert await cache.lookup("k", 0.0, fetch) == (1, 0.0)
    assert await cache.lookup("k", 0.0, fetch) == (2, 0.0)
    assert await cache.lookup("k", -1.0, fetch) == (3, 0.0)
    assert len(calls) == 3 and cache.hits == 0


async def test_coalesced_waiters_share_the_first_callers_deadline():
    clock, release, calls = Clock(), asyncio.Event(), []
    cache = QueryCache(clock=clock)

    async def fetch():
        calls.append(1)
        await release.wait()
        return ["answer"]

    first = asyncio.create_task(cache.lookup("q", 5.0, fetch))
    await asyncio.sleep(0)
    waiters = []
    for ttl in (5.0, 5.0, 9.0):  # joining later, even with another ttl: the first request's freshness
        clock.now += 0.5
        waiters.append(asyncio.create_task(cache.lookup("q", ttl, fetch)))
        await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(first, *waiters)
    assert len(calls) == 1 and cache.coalesced == 3
    assert results == [(["answer"], 1005.0)] * 4
    clock.now = 1004.9
    assert await cache.lookup("q", 5.0, fetch) == (["answer"], 1005.0) and len(calls) == 1


async def test_errors_give_no_entry_and_no_deadline():
    clock, release, calls = Clock(), asyncio.Event(), []
    cache = QueryCache(clock=clock)

    async def failing():
        calls.append(1)
        await release.wait()
        raise RuntimeError("prometheus failed")

    tasks = [asyncio.create_task(cache.lookup("k", 30.0, failing)) for _ in range(3)]
    await asyncio.sleep(0)
    release.set()
    outcomes = await asyncio.gather(*tasks, return_exceptions=True)
    assert len(calls) == 1 and all(isinstance(o, RuntimeError) for o in outcomes)

    async def ok():
        calls.append(1)
        return "fine"

    clock.now += 1  # well within the ttl the failure would have had
    assert await cache.lookup("k", 30.0, ok) == ("fine", 1031.0)  # fetched again: nothing was kept
    assert len(calls) == 2 and cache.hits == 0


# -- LabelIndex.version --------------------------------------------------------------------------

def test_label_index_version_changes_on_real_changes_only():
    idx = LabelIndex([(("web", "a"), {"app": "web"}), (("web", "b"), {"app": "web"})])
    sel = parse_selector("app=web")
    v = idx.version

    idx.put(("web", "a"), {"app": "web"})  # identical labels: a status-only update
    assert idx.version == v
    idx.delete(("web", "missing"))  # nothing to delete
    assert idx.version == v

    idx.put(("web", "a"), {"app": "other"})  # relabelled out of the selection
    assert idx.version > v and idx.select("web", sel) == {"b"}
    v = idx.version
    idx.put(("web", "c"), {"app": "web"})  # added
    assert idx.version > v and idx.select("web", sel) == {"b", "c"}
    v = idx.version
    idx.put(("web", "c"), {"app": "web", "tier": "x"})  # a label added, still selected
    assert idx.version > v
    v = idx.version
    idx.delete(("web", "b"))
    assert idx.version > v and idx.select("web", sel) == {"c"}


def test_a_rebuilt_index_has_a_higher_version_than_the_one_it_replaces():
    entries = [(("web", "a"), {"app": "web"})]
    old = LabelIndex(entries)
    old.put(("web", "b"), {"app": "web"})
    old.put(("web", "b"), {"app": "db"})
    relisted = LabelIndex(entries)  # same or even fewer objects: still a later state
    assert relisted.version > old.version
    assert LabelIndex().version > relisted.version


# -- LabelCache.version through a real watch ------------------------------------------------------

def pod(ns: str, name: str, **labels: str) -> dict:
    """A pod already running (status set), so the sandbox kubelet writes nothing on its own."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels},
            "spec": {"containers": [{"name": "app", "image": "app"}], "nodeName": "node-1"},
            "status": {"phase": "Running", "podIP": "10.0.0.9",
                       "conditions": [{"type": "Ready", "status": "True"}]}}


def status_update(sim: KubeSim, ns: str, name: str) -> int:
    """Change only the pod's status; returns the resourceVersion of the write."""
    obj = sim.get("v1", "Pod", ns, name)
    obj["status"]["podIP"] = f"10.0.0.{int(obj['status']['podIP'].rsplit('.', 1)[1]) % 250 + 1}"
    stored = sim.apply(obj)
    assert stored["metadata"]["labels"] == obj["metadata"]["labels"]
    return int(stored["metadata"]["resourceVersion"])


def relabel(sim: KubeSim, ns: str, name: str, **labels: str) -> int:
    obj = sim.get("v1", "Pod", ns, name)
    obj["metadata"]["labels"] = labels
    return int(sim.apply(obj)["metadata"]["resourceVersion"])


@pytest.fixture(scope="module")
def sim():
    with KubeSim() as s:
        for i in range(6):
            s.apply(pod("web", f"web-{i}", app="web" if i < 3 else "batch"))
        s.apply(pod("lab", "lab-1", app="lab"))
        s.apply(pod("lab", "lab-2", app="lab"))
        yield s


async def test_label_cache_version_ignores_status_updates_and_follows_label_changes(sim):
    cache = LabelCache(client(sim.aio_client_configuration()))
    pods, services = resource_by_api_name("pods"), resource_by_api_name("services")
    sel = parse_selector("app=lab")
    try:
        assert cache.version == 0  # no informer yet
        assert await cache.names(pods, "lab", sel) == {"lab-1", "lab-2"}
        informer = cache._informers["pods"]

        def delivered(rv: int):
            return lambda: int(informer.resource_version or 0) >= rv

        v = cache.version
        assert v > 0
        await eventually(delivered(status_update(sim, "lab", "lab-1")), timeout=10)
        assert cache.version == v  # the watch saw the update; nothing a selector sees changed
        assert await cache.names(pods, "lab", sel) == {"lab-1", "lab-2"}

        await eventually(delivered(relabel(sim, "lab", "lab-2", app="gone")), timeout=10)
        assert cache.version > v
        assert await cache.names(pods, "lab", sel) == {"lab-1"}
        v = cache.version
        await eventually(delivered(relabel(sim, "lab", "lab-2", app="lab")), timeout=10)
        assert cache.version > v and await cache.names(pods, "lab", sel) == {"lab-1", "lab-2"}

        # a second informer: the cache's version is the highest of them, so either changing raises it
        v = cache.version
        assert await cache.names(services, "lab", sel) == set()
        assert cache.version > v  # its freshly listed index is a later state
        v = cache.version
        svc = sim.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s", "namespace": "lab",
                                                                             "labels": {"app": "lab"}},
                         "spec": {"ports": [{"port": 80}]}})
        await eventually(lambda: cache._informers["services"].index.version > v, timeout=10)
        assert cache.version > v and await cache.names(services, "lab", sel) == {"s"}
        sim.delete("v1", "Service", "lab", svc["metadata"]["name"])
    finally:
        await cache.aclose()


# -- MetricRoutes.answers in process: provider work is what the memo saves -------------------------

class CountingProvider:
    """The custom provider seam, counting calls; each value is fresh until `fresh[name]`."""

    def __init__(self, clock: Clock) -> None:
        self.clock, self.calls, self.version = clock, 0, 7
        self.selected = ["a", "b"]
        self.fresh = {"a": 1030.0, "b": 1030.0}

    def objects_version(self) -> int:
        return self.version

    def list_all_metrics(self) -> list:
        return []

    def _value(self, name: str) -> CustomValue:
        return CustomValue(resource_by_api_name("pods"), "web", name, "hits", float(self.calls), 1.7e9, 60,
                           self.fresh[name])

    async def get_metric_by_selector(self, resource, namespace, selector, metric, metric_selector):
        self.calls += 1
        return [self._value(n) for n in self.selected]

    async def get_metric_by_name(self, resource, namespace, name, metric, metric_selector):
        self.calls += 1
        return self._value(name)


async def _not_found(scope, receive, send):
    await send({"type": "http.response.start", "status": 404, "headers": []})
    await send({"type": "http.response.body", "body": b""})


@pytest.fixture
def routes():
    clock = Clock()
    provider = CountingProvider(clock)
    r = MetricRoutes(_not_found, provider, None)
    r.answers = TTLCache(clock=clock)  # the same deadlines, on a clock the test moves
    return r, provider, clock


async def test_routes_keep_a_body_until_its_values_expire(routes):
    r, provider, clock = routes
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=r), base_url="http://t") as c:
        async def get(path: str) -> bytes:
            resp = await c.get(path)
            assert resp.status_code == 200, resp.text
            return resp.content

        star = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/hits"
        first = await get(star)
        assert [await get(star) for _ in range(5)] == [first] * 5 and provider.calls == 1
        assert await get(star + "?metricLabelSelector=x%3Dy") != first and provider.calls == 2  # another entry
        by_name = await get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/a/hits")
        assert await get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/a/hits") == by_name
        assert provider.calls == 3

        provider.version += 1  # objects changed: `*` answers depend on them (which exist), by-name ones do not
        assert await get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/a/hits") == by_name
        assert provider.calls == 3
        first = await get(star)
        assert provider.calls == 4  # rebuilt
        assert await get(star) == first and provider.calls == 4

        clock.now = 1029.9
        assert await get(star) == first and provider.calls == 4
        clock.now = 1030.0  # the values' deadline: rebuilt
        second = await get(star)
        assert second != first and provider.calls == 5

        # the body lives as long as its least fresh value
        provider.fresh = {"a": 1031.0, "b": 1050.0}
        clock.now = 1030.5
        third = await get(star + "?x=1")
        assert await get(star + "?x=1") == third and provider.calls == 6
        clock.now = 1031.0
        await get(star + "?x=1")
        assert provider.calls == 7

        # values not reusable (ttl 0) and empty answers are never kept
        provider.fresh = {"a": 0.0, "b": 1100.0}
        await get(star + "?x=2")
        await get(star + "?x=2")
        assert provider.calls == 9
        provider.fresh, provider.selected = {"a": 1100.0, "b": 1100.0}, []
        await get(star + "?x=3")
        await get(star + "?x=3")
        assert provider.calls == 11


async def test_routes_rebuild_label_selector_answers_when_objects_change(routes):
    r, provider, _clock = routes
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=r), base_url="http://t") as c:
        path = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/*/hits?labelSelector=app%3Dweb"
        first = (await c.get(path)).content
        assert (await c.get(path)).content == first and provider.calls == 1
        provider.selected = ["a"]  # the selection changed, and with it the objects' version
        provider.version += 1
        changed = (await c.get(path)).content
        assert provider.calls == 2 and _names(changed) == {"a"}
        assert (await c.get(path)).content == changed and provider.calls == 2


# -- through the real adapter with a real Prometheus ---------------------------------------------

def _names(body: bytes) -> set[str]:
    return {i["describedObject"]["name"] for i in orjson.loads(body)["items"]}


def _values(body: bytes) -> dict[str, float]:
    return {i["describedObject"]["name"]: float(parse_quantity(i["value"])) for i in orjson.loads(body)["items"]}


def _close(a: dict[str, float], b: dict[str, float]) -> bool:
    return a.keys() == b.keys() and all(abs(a[k] - b[k]) <= 0.01 * max(1.0, abs(b[k])) for k in a)


@pytest.fixture(scope="module")
def cached_adapter(prometheus, rules_file):
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                       "--query-cache-ttl", "30s").wait_ready()
    yield a
    a.stop()


def _body(adapter: AdapterProcess, path: str, **params: str) -> bytes:
    resp = adapter.get(path, params=params)
    assert resp.status_code == 200, resp.text
    return resp.content


def test_identical_requests_get_one_body_from_one_query(cached_adapter, prometheus):
    a = cached_adapter
    expected = direct(prometheus.url, 'sum(rate(app_requests_total{namespace="web",pod!=""}[1m])) by (pod)')
    before = a.metric(QUERIES, endpoint="query")
    bodies = [_body(a, PODS + "requests") for _ in range(8)]
    assert len(set(bodies)) == 1
    assert _close(_values(bodies[0]), expected)
    assert a.metric(QUERIES, endpoint="query") - before == 1

    # another query string is another answer: one more query each, then kept as well
    sel = {"metricLabelSelector": "code=200"}
    by_code = [_body(a, PODS + "requests", **sel) for _ in range(4)]
    assert len(set(by_code)) == 1 and by_code[0] != bodies[0]
    assert _close(_values(by_code[0]), direct(
        prometheus.url, 'sum(rate(app_requests_total{namespace="web",pod!="",code="200"}[1m])) by (pod)'))
    assert a.metric(QUERIES, endpoint="query") - before == 2

    errors = [_body(a, PODS + "errors") for _ in range(4)]
    assert len(set(errors)) == 1 and _names(errors[0]) == {"web-1"}
    assert a.metric(QUERIES, endpoint="query") - before == 3

    # the first answers are still served as they were, without asking Prometheus
    assert _body(a, PODS + "requests") == bodies[0]
    assert _body(a, PODS + "requests", **sel) == by_code[0]
    assert a.metric(QUERIES, endpoint="query") - before == 3


def test_external_answers_are_kept_too(cached_adapter, prometheus):
    a = cached_adapter
    path = "/apis/external.metrics.k8s.io/v1beta1/namespaces/web/queue_depth"
    before = a.metric(QUERIES, endpoint="query")
    bodies = [_body(a, path) for _ in range(5)]
    assert len(set(bodies)) == 1
    assert [float(i["value"]) for i in orjson.loads(bodies[0])["items"]] == list(
        direct(prometheus.url, 'sum(queue_depth{namespace="web",queue!=""}) by (queue)').values())
    assert a.metric(QUERIES, endpoint="query") - before == 1


def test_ttl_zero_asks_prometheus_every_time(prometheus, rules_file):
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                       "--query-cache-ttl", "0").wait_ready()
    try:
        before = a.metric(QUERIES, endpoint="query")
        bodies = [_body(a, PODS + "requests") for _ in range(4)]
        assert all(_names(b) == {f"web-{i}" for i in range(6)} for b in bodies)
        assert a.metric(QUERIES, endpoint="query") - before == 4
    finally:
        a.stop()


# -- labelSelector answers follow the pods within the freshness period ---------------------------

@pytest.fixture(scope="module")
def k8s_adapter(prometheus, rules_file, sim):
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file), "--kubeconfig",
                       sim.kubeconfig_path, "--query-cache-ttl", "30s").wait_ready()
    yield a
    a.stop()


async def test_label_selector_answers_follow_pod_changes(k8s_adapter, sim, prometheus):
    a = k8s_adapter
    rates = direct(prometheus.url, 'sum(rate(app_requests_total{namespace="web",pod!=""}[1m])) by (pod)')
    web = {"labelSelector": "app=web"}

    def answer(params: dict[str, str]) -> bytes:
        return _body(a, PODS + "requests", **params)

    def answer_for(expected: set[str]):
        """A check for `eventually`: the app=web answer once it names `expected`."""
        def check() -> bytes | None:
            body = answer(web)
            return body if _names(body) == expected else None
        return check

    first = answer(web)
    assert _names(first) == {"web-0", "web-1", "web-2"}
    assert _close(_values(first), {p: rates[p] for p in ("web-0", "web-1", "web-2")})
    unselected = answer({})  # no labelSelector: names come from Prometheus; kept regardless of pods
    assert _names(unselected) == set(rates)
    before = a.metric(QUERIES, endpoint="query")
    assert answer(web) == first and answer(web) == first
    assert a.metric(QUERIES, endpoint="query") == before  # served while fresh

    # a status-only update of a selected pod, then a marker the watch delivers after it
    status_update(sim, "web", "web-0")
    relabel(sim, "web", "web-5", app="batch", marker="1")
    await eventually(lambda: _names(answer({"labelSelector": "marker=1"})) == {"web-5"}, timeout=10)
    assert answer(web) == first
    assert a.metric(QUERIES, endpoint="query") - before == 1  # the marker's own query only
    before += 1

    # relabelled out of the selection: the next answer is rebuilt, though 30s have not passed
    relabel(sim, "web", "web-1", app="other")
    out = await eventually(answer_for({"web-0", "web-2"}), timeout=10)
    assert _close(_values(out), {p: rates[p] for p in ("web-0", "web-2")})
    assert a.metric(QUERIES, endpoint="query") - before == 1  # one query for the new set of pods
    assert answer(web) == out

    # and one added into it
    relabel(sim, "web", "web-3", app="web")
    added = await eventually(answer_for({"web-0", "web-2", "web-3"}), timeout=10)
    assert _close(_values(added), {p: rates[p] for p in ("web-0", "web-2", "web-3")})
    assert a.metric(QUERIES, endpoint="query") - before == 2
    assert answer(web) == added and a.metric(QUERIES, endpoint="query") - before == 2

    # the answer without a labelSelector, kept before all this, is still the one served: still fresh
    assert answer({}) == unselected and a.metric(QUERIES, endpoint="query") - before == 2
