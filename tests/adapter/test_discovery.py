"""Discovery against a programmable Prometheus HTTP API: one call per distinct seriesQuery, per-query
last-good fallback, atomic catalogue swap."""

from __future__ import annotations

import asyncio
from typing import ClassVar
from urllib.parse import parse_qs

import pytest
import yaml

from adapter.discovery import Discovery
from adapter.naming import compile_rules
from adapter.prometheus import PrometheusClient
from adapter.rules import load_rules, parse_rules
from adapter.settings import parse_settings
from tests.support import eventually

from .conftest import RULES, StubAPI, serving


class _SeriesAPI(StubAPI):
    """Answers /api/v1/series per match[]; `failing` queries get a 503."""

    series: ClassVar[dict[str, list[dict]]] = {}
    failing: ClassVar[set[str]] = set()
    calls: ClassVar[list[str]] = []

    def reply(self, url):
        if url.path != "/api/v1/series":  # a backend with the series listing alone
            return 404, {"status": "error", "error": "404 page not found"}
        match = parse_qs(url.query)["match[]"][0]
        type(self).calls.append(match)
        if match in self.failing:
            return 503, {"status": "error", "errorType": "unavailable", "error": "store gateway down"}
        return 200, {"status": "success", "data": self.series.get(match, [])}


@pytest.fixture
def series_api():
    _SeriesAPI.series, _SeriesAPI.failing, _SeriesAPI.calls = {}, set(), []
    with serving(_SeriesAPI) as server:
        yield server


HTTP_Q = 'http_requests_total{namespace!="",pod!=""}'
JOBS_Q = '{__name__=~"jobs_.*_total",namespace!="",pod!=""}'


async def test_shared_queries_fallback_and_swap(series_api):
    rules = compile_rules(load_rules(RULES))
    client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{series_api.server_port}"]))
    discovery = Discovery(rules, client, relist_interval=60)
    _SeriesAPI.series = {
        HTTP_Q: [{"__name__": "http_requests_total", "namespace": "web", "pod": "a"}],
        JOBS_Q: [{"__name__": "jobs_processed_total", "namespace": "b", "pod": "w"},
                 {"__name__": "jobs_processed_seconds_total", "namespace": "b", "pod": "w"}],
    }
    try:
        assert await discovery.relist() is True and discovery.synced
        distinct = {r.series_query for r in rules.all}
        assert sorted(_SeriesAPI.calls) == sorted(distinct) and len(distinct) < len(rules.all)  # rules 1 and 2 share
        before = discovery.catalogue
        assert ("pods", "jobs_processed_per_second") in before.custom and ("pods", "busy_ratio") in before.custom

        # the jobs query fails; http_requests gains a series: only the failed query's rules keep their old result
        _SeriesAPI.failing = {JOBS_Q}
        _SeriesAPI.series[HTTP_Q] = [{"__name__": "http_requests_total", "namespace": "web", "pod": "a"},
                                     {"__name__": "http_errors_total", "namespace": "web", "pod": "a"}]
        assert await discovery.relist() is False
        after = discovery.catalogue
        assert after is not before  # swapped whole
        assert ("pods", "jobs_processed_per_second") in after.custom and ("pods", "busy_ratio") in after.custom
        assert ("pods", "http_errors") in after.custom
        assert "store gateway down" in discovery.last_error

        # the query recovers with fewer series: the catalogue follows
        _SeriesAPI.failing = set()
        _SeriesAPI.series[JOBS_Q] = [{"__name__": "jobs_failed_total", "namespace": "b", "pod": "w"}]
        assert await discovery.relist() is True
        final = discovery.catalogue.custom
        assert ("pods", "jobs_failed_per_second") in final and ("pods", "jobs_processed_per_second") not in final
        assert ("pods", "busy_ratio") not in final
    finally:
        await client.aclose()


async def test_a_rules_file_caught_mid_write_is_never_applied(tmp_path, monkeypatch):
    """An editor truncates, then writes: the empty (or partial) content read in between must not
    replace the rules; the complete new content is taken once two checks in a row read it."""
    path = tmp_path / "rules.yaml"
    first = "rules:\n- seriesQuery: 'a_total{pod!=\"\"}'\n  resources: {template: '<<.Resource>>'}\n" \
            "  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[1m])) by (<<.GroupBy>>)'\n"
    second = first + first.removeprefix("rules:\n").replace("a_total", "b_total")
    path.write_text(first)
    discovery = Discovery(compile_rules(parse_rules(first)), None, relist_interval=60,  # type: ignore[arg-type]
                          rules_path=str(path), check_interval=0.01)
    reads = iter([b"", second.encode(), second.encode()])
    taken: list[int] = []
    monkeypatch.setattr(discovery, "_read", lambda: next(reads, second.encode()))
    original = discovery.apply_rules_text

    def apply(data: bytes | None) -> bool:
        taken.append(len(data or b""))
        return original(data)

    monkeypatch.setattr(discovery, "apply_rules_text", apply)
    task = asyncio.create_task(discovery._watch_rules_loop())
    try:
        await eventually(lambda: len(discovery.rules.rules) == 2)
    finally:
        task.cancel()
    assert 0 not in taken  # the truncated read was never offered as the new rules


async def test_a_discovery_pass_leaves_the_hot_query_forms_kept(prometheus):
    """The HPA's instant queries, asked every sync period, keep their encoded form (`_form`); a
    relist's listings carry a new `start` each time (the metrics max age), so keeping theirs would
    only push the hot ones out: after passes over more distinct seriesQueries than the cache holds,
    the hot form is still kept (its next use a hit), and a pass's second run encodes nothing anew
    that it keeps (its freshness queries repeat, and are kept)."""
    from adapter import prometheus as client_module

    client = PrometheusClient(parse_settings(["--prometheus-url", prometheus.url]))
    hot = 'sum(rate(http_requests_total{namespace="web"}[1m])) by (pod)'
    many = client_module._form.cache_info().maxsize + 100
    rules = [{"seriesQuery": f'absent_{i}_total{{namespace!="",pod!=""}}', "resources": {"template": "<<.Resource>>"},
              "metricsQuery": "sum(<<.Series>>) by (<<.GroupBy>>)"} for i in range(many)]
    rules.append({"seriesQuery": 'http_requests_total{namespace!="",pod!=""}',
                  "resources": {"template": "<<.Resource>>"}, "metricsQuery": "sum(<<.Series>>) by (<<.GroupBy>>)"})
    discovery = Discovery(compile_rules(parse_rules(yaml.safe_dump({"rules": rules}))), client, relist_interval=60)
    client_module._form.cache_clear()
    try:
        assert await client.query(hot)
        assert await discovery.relist() is True
        assert ("pods", "http_requests_total") in discovery.catalogue.custom  # the pass reached Prometheus
        first = client_module._form.cache_info()
        assert await discovery.relist() is True
        before = client_module._form.cache_info()
        assert before.misses == first.misses
        await client.query(hot)
        assert client_module._form.cache_info().hits == before.hits + 1  # the hot form was still kept
    finally:
        await client.aclose()
