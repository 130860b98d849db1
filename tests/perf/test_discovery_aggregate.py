"""Aggregated discovery: the same catalogue as listing every series with /api/v1/series, from a
number of calls that depends on the rules and resource labels, not on the number of series."""

from __future__ import annotations

import pytest

from adapter.discovery import Discovery, required_labels, with_matcher
from adapter.naming import compile_rules
from adapter.prometheus import PrometheusClient, PrometheusQueryError
from adapter.rules import parse_rules
from adapter.settings import parse_settings

from .conftest import RULES, AdapterProcess


@pytest.mark.parametrize("query,expected", [
    ("up", 'up{pod!=""}'),
    ('up{job="x"}', 'up{job="x",pod!=""}'),
    ('up{job="x",}', 'up{job="x",pod!=""}'),
    ('{__name__=~"a_.*",namespace!=""}', '{__name__=~"a_.*",namespace!="",pod!=""}'),
    (' http_total { a = "}" } ', 'http_total{a = "}",pod!=""}'),
    ("up offset 5m", None),
    ("rate(up[1m])", None),
    ("up or down", None),
])
def test_with_matcher(query, expected):
    assert with_matcher(query, 'pod!=""') == expected


@pytest.mark.parametrize("query,expected", [
    ('{namespace!="",pod!=""}', {"namespace", "pod"}),
    ('http_total{job="api", pod!="" ,}', {"job", "pod"}),
    ("{a!='',b=`x`}", {"a", "b"}),
    ('m{a=""}', set()),  # selects series without a
    ('m{a=~".+",b!~"x",c!="y"}', set()),  # a regex or a negative value does not say
    ('m{a="x,pod!=\\"\\""}', {"a"}),  # a matcher's text inside a value is the value's
    ('m{a="1" garbage}', set()),  # not plain matchers: nothing is assumed
    ("up", set()),
    ("sum(up)", set()),
])
def test_required_labels(query, expected):
    assert required_labels(query) == expected


def _summary(discovery: Discovery) -> tuple[dict, dict]:
    cat = discovery.catalogue
    return ({k: (m.series, m.rule.index) for k, m in cat.custom.items()},
            {k: (m.series, m.rule.index) for k, m in cat.external.items()})


async def test_same_catalogue_as_the_series_listing(prometheus):
    rules = compile_rules(parse_rules(RULES))
    settings = parse_settings(["--prometheus-url", prometheus.url])
    client = PrometheusClient(settings)
    try:
        exact = Discovery(rules, client, relist_interval=60, max_age=3600)
        aggregated = Discovery(rules, client, relist_interval=60, max_age=3600, aggregate=True)
        assert await exact.relist() and await aggregated.relist()
        custom, external = _summary(aggregated)
        assert (custom, external) == _summary(exact)
        # the data set exercises templates, overrides, filters and names: check a few facts directly
        assert ("pods", "requests") in custom and ("namespaces", "requests") in custom
        assert ("jobs.batch", "jobs") in custom and ("pods", "jobs") not in custom  # app_jobs_total has no pod
        assert ("pods", "seconds") not in custom  # seriesFilters isNot
        assert ("nodes", "other_total") in custom and ("namespaces", "other_total") in custom
        assert ("deployments.apps", "kube_apps_deployment_replicas_wanted") in custom
        assert set(external) == {"queue_depth"}
    finally:
        await client.aclose()


class CountingClient:
    """Wraps the real client and counts calls per endpoint."""

    def __init__(self, inner: PrometheusClient, labels_fail: bool = False) -> None:
        self.inner, self.labels_fail = inner, labels_fail
        self.calls: list[str] = []

    async def series(self, match, start=None):
        self.calls.append("series")
        return await self.inner.series(match, start)

    async def labels(self, match, start=None):
        self.calls.append("labels")
        if self.labels_fail:
            raise PrometheusQueryError("Prometheus rejected the query: unknown endpoint")
        return await self.inner.labels(match, start)

    async def label_values(self, label, match, start=None):
        self.calls.append("label_values")
        return await self.inner.label_values(label, match, start)

    async def query(self, expr, ttl=0.0):
        self.calls.append("query")
        return await self.inner.query(expr, ttl)

    async def check_query(self, expr):  # the start-up check of metricsQuery, not discovery: not counted
        return await self.inner.check_query(expr)

    @property
    def query_check(self):
        return self.inner.query_check


def _one_rule(series_query: str):
    """One rule over `series_query`, its resources from the labels' names."""
    return compile_rules(parse_rules(
        f"rules:\n- seriesQuery: '{series_query}'\n  resources:\n    template: '<<.Resource>>'\n"
        "  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'\n"))


@pytest.fixture
async def inner(prometheus):
    """The real client, asked by `CountingClient`."""
    client = PrometheusClient(parse_settings(["--prometheus-url", prometheus.url]))
    yield client
    await client.aclose()


async def test_calls_per_query_and_fallback_to_the_exact_listing(inner):
    rules = _one_rule("app_requests_total")
    counting = CountingClient(inner)
    d = Discovery(rules, counting, relist_interval=60, max_age=3600, aggregate=True)
    assert await d.relist()
    # fresh names (one query) + label names + one per resource label (namespace, pod): no series listing
    assert sorted(counting.calls) == ["label_values"] * 2 + ["labels", "query"]
    assert set(d.catalogue.custom) == {("pods", "app_requests_total"), ("namespaces", "app_requests_total")}

    failing = CountingClient(inner, labels_fail=True)  # a backend without the label endpoints
    d2 = Discovery(rules, failing, relist_interval=60, max_age=3600, aggregate=True)
    assert await d2.relist()
    assert "series" in failing.calls
    assert set(d2.catalogue.custom) == set(d.catalogue.custom)


async def test_labels_the_series_query_requires_are_not_asked_about(inner):
    # prometheus-adapter's usual seriesQuery: every series has namespace and pod, so which names
    # carry them is not a question for Prometheus; the catalogue is still the exact listing's
    rules = _one_rule('app_requests_total{namespace!="",pod!=""}')
    counting = CountingClient(inner)
    aggregated = Discovery(rules, counting, relist_interval=60, max_age=3600, aggregate=True)
    exact = Discovery(rules, inner, relist_interval=60, max_age=3600)
    assert await aggregated.relist() and await exact.relist()
    assert sorted(counting.calls) == ["labels", "query"]
    assert _summary(aggregated) == _summary(exact)
    assert set(aggregated.catalogue.custom) == {("pods", "app_requests_total"), ("namespaces", "app_requests_total")}


def test_adapter_serves_the_same_documents_in_both_modes(prometheus, rules_file):
    docs = {}
    for mode in ("aggregate", "series"):
        a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(rules_file),
                           "--metrics-discovery", mode, "--metrics-max-age", "1h").wait_ready()
        try:
            docs[mode] = (a.get("/apis/custom.metrics.k8s.io/v1beta1").json(),
                          a.get("/apis/external.metrics.k8s.io/v1beta1").json())
        finally:
            a.stop()
    assert docs["aggregate"] == docs["series"]
    assert len(docs["aggregate"][0]["resources"]) >= 8
