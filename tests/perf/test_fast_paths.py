"""The hot-path shortcuts give exactly what the plain code gives: timestamps, batch-built items,
and label-selector lookups through the index (quantities: tests/core/test_quantity.py)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from adapter.kube import LabelIndex
from adapter.metricroutes import timestamp
from adapter.naming import compile_rules
from adapter.promql import regex_alternation, resource_query
from adapter.provider import CustomMetricsProvider
from adapter.rules import parse_rules
from promscaler import wire
from promscaler.selectors import Operator, Requirement, Selector, parse_selector
from promscaler.times import format_time


def test_timestamp_matches_format_time():
    for ts in (0.0, 1700000000.0, 1700000000.999, 1795276801.5, 253402300799.0):
        assert timestamp(ts) == format_time(datetime.fromtimestamp(ts, UTC))


@settings(max_examples=500, deadline=None)
@given(st.floats(min_value=0, max_value=253402300799, allow_nan=False))
def test_timestamp_of_any_sample_time_matches_format_time(ts):
    assert timestamp(ts) == format_time(datetime.fromtimestamp(ts, UTC))


rows = st.lists(st.tuples(st.text(min_size=1, max_size=12), st.sampled_from([None, "web", "ns-\u00e9"]),
                          st.sampled_from(["1500m", "2", "-3k"]), st.just("2026-01-02T03:04:05Z")), max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["v1beta1", "v1beta2"]), rows, st.sampled_from([None, 60]),
       st.sampled_from([None, {"matchLabels": {"code": "200"}}]))
def test_batch_items_are_the_single_items(version, data, window, selector):
    batch = wire.custom_metric_values(version, "Pod", "/v1", "http_requests", data, window, selector)
    single = [wire.custom_metric_value(version, wire.object_reference("Pod", n, ns, "/v1"), "http_requests", v, ts,
                                       window, selector) for n, ns, v, ts in data]
    assert json.dumps(batch) == json.dumps(single)  # same keys, same order, same values


# -- label index --------------------------------------------------------------------------------
labels_st = st.dictionaries(st.sampled_from(["app", "tier", "track", "shard"]), st.sampled_from(["a", "b", "c"]),
                            max_size=4)
objects_st = st.lists(st.tuples(st.sampled_from(["web", "shop", ""]), st.integers(0, 30), labels_st), max_size=40)
requirement_st = st.one_of(
    st.builds(lambda k, v: Requirement(k, Operator.EQUALS, (v,)),
              st.sampled_from(["app", "tier"]), st.sampled_from("abcz")),
    st.builds(lambda k, vs: Requirement(k, Operator.IN, tuple(sorted(set(vs)))), st.sampled_from(["app", "shard"]),
              st.lists(st.sampled_from("abcz"), min_size=1, max_size=3)),
    st.builds(lambda k, vs: Requirement(k, Operator.NOT_IN, tuple(sorted(set(vs)))), st.sampled_from(["track", "app"]),
              st.lists(st.sampled_from("abc"), min_size=1, max_size=2)),
    st.builds(lambda k: Requirement(k, Operator.EXISTS), st.sampled_from(["track", "shard"])),
    st.builds(lambda k: Requirement(k, Operator.DOES_NOT_EXIST), st.sampled_from(["track", "tier"])),
)


@settings(max_examples=400, deadline=None)
@given(objects_st, st.lists(requirement_st, max_size=3), st.sampled_from([None, "web", "shop", "none"]),
       st.lists(st.tuples(st.sampled_from(["web", "shop"]), st.integers(0, 30)), max_size=8))
def test_index_select_is_a_scan(objects, requirements, namespace, deletions):
    index = LabelIndex()
    truth: dict[tuple[str, str], dict[str, str]] = {}
    for ns, i, labels in objects:  # later puts replace earlier ones, as MODIFIED events do
        key = (ns, f"obj-{i}")
        index.put(key, dict(labels))
        truth[key] = dict(labels)
    for ns, i in deletions:
        index.delete((ns, f"obj-{i}"))
        truth.pop((ns, f"obj-{i}"), None)
    selector = Selector(tuple(requirements))
    expected = {name for (ns, name), labels in truth.items()
                if (namespace is None or ns == namespace) and selector.matches(labels)}
    assert index.select(namespace, selector) == expected
    assert len(index) == len(truth)


def test_index_with_parsed_selectors():
    index = LabelIndex([(("web", f"p{i}"), {"app": f"a{i % 3}", "tier": "web"}) for i in range(30)])
    assert index.select("web", parse_selector("app=a1,tier=web")) == {f"p{i}" for i in range(1, 30, 3)}
    assert index.select("web", parse_selector("app in (a0,a2),tier!=db")) == {f"p{i}" for i in range(30) if i % 3 != 1}
    assert index.select("shop", parse_selector("tier=web")) == set()
    assert index.select(None, parse_selector("")) == {f"p{i}" for i in range(30)}


_RE2_META = re.compile(r"([\\.+*?()|\[\]{}^$])")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=6))
def test_regex_alternation_escapes_every_metacharacter(values):
    """The translate-based escaping gives what a per-character regex substitution gives."""
    expected = json.dumps("|".join(_RE2_META.sub(r"\\\1", v) for v in values), ensure_ascii=False)
    assert regex_alternation(values) == expected


_RULES_TEXT = """
rules:
- seriesQuery: 'http_requests_total{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^(.*)_total$", as: "${1}"}
  metricsQuery: 'sum(rate(<<.Series>>{<<.LabelMatchers>>}[2m])) by (<<.GroupBy>>)'
- seriesQuery: 'queue_depth{namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  metricsQuery: 'max(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""
_RULES = compile_rules(parse_rules(_RULES_TEXT)).rules


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1]), st.sampled_from([None, "web", "ns-\u00e9"]),
                          st.lists(st.text(min_size=1, max_size=8), max_size=3),
                          st.sampled_from(["", "code=200", "code!=500,path"])), min_size=1, max_size=8))
def test_kept_queries_are_the_queries_built(requests):
    provider = CustomMetricsProvider(None, None)  # type: ignore[arg-type]  # only its query building
    for rule_index, namespace, names, metric_labels in requests:
        rule = _RULES[rule_index]
        selector = parse_selector(metric_labels)
        built = resource_query(rule, rule.rule.series_query, "pod", "namespace", namespace, names, selector)
        assert provider._resource_query(rule, rule.rule.series_query, "pod", "namespace", namespace, names,
                                        selector) == built


def test_a_query_asked_again_is_not_rendered_again(monkeypatch):
    rule = _RULES[0]
    renders = []
    original = type(rule.query).render
    monkeypatch.setattr(type(rule.query), "render", lambda self, args: renders.append(1) or original(self, args))
    provider = CustomMetricsProvider(None, None)  # type: ignore[arg-type]
    ask = (rule, "http_requests_total", "pod", "namespace", "web", ["web-1"], parse_selector(""))
    first = provider._resource_query(*ask)
    assert provider._resource_query(*ask) == first
    assert len(renders) == 1
    # the same text from a rule compiled anew (a reload): built for that rule, not taken from the other
    again = compile_rules(parse_rules(_RULES_TEXT)).rules[0]
    assert provider._resource_query(again, *ask[1:]) == first
    assert len(renders) == 2
