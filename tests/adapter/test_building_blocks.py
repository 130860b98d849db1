"""The pure parts: Go-template subset, Go regexp expansion, PromQL quoting, flags, the query cache."""

from __future__ import annotations

import asyncio
import re

import httpx
import pytest

from adapter.gotemplate import Template, TemplateError
from adapter.naming import go_expand, normalize_resource, rate_window
from adapter.promql import quote, regex_alternation, selector_matchers
from adapter.querycache import QueryCache
from adapter.settings import parse_settings
from promscaler.selectors import parse_selector

FIELDS = ("Series", "LabelMatchers", "GroupBy", "GroupBySlice", "LabelValuesByName")


@pytest.mark.parametrize("source,args,expected", [
    ("sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)",
     {"Series": "s", "LabelMatchers": 'a="b"', "GroupBy": "pod"},
     'sum(s{a="b"}) by (pod)'),
    ("<<range $i, $v := .GroupBySlice>><<if $i>>,<<end>><<$v>><<end>>", {"GroupBySlice": ["pod", "container"]},
     "pod,container"),
    ("<<range .GroupBySlice>>[<<.>>]<<end>>", {"GroupBySlice": ["a", "b"]}, "[a][b]"),
    ("<<if .GroupBy>>by (<<.GroupBy>>)<<else>>total<<end>>", {"GroupBy": ""}, "total"),
    ("x  <<- .Series ->>  y", {"Series": "s"}, "xsy"),
    ("<<.LabelValuesByName.pod>>", {"LabelValuesByName": {"pod": "a|b"}}, "a|b"),
])
def test_go_template_subset(source, args, expected):
    assert Template(source, FIELDS).render(args) == expected


@pytest.mark.parametrize("source", ["<<.Nope>>", "<<if .Series>>", "<<end>>", "<<printf \"%s\" .Series>>", "<<.Series"])
def test_go_template_rejects_what_it_cannot_do(source):
    with pytest.raises(TemplateError):
        Template(source, FIELDS)


def test_go_regexp_expand():
    m = re.search("^(?P<base>.*)_(total)$", "http_requests_total")
    assert go_expand("${1}", m) == "http_requests"
    assert go_expand("$base/$2", m) == "http_requests/total"
    assert go_expand("$1_x", m) == ""  # Go reads the name `1_x`, which does not exist
    assert go_expand("$$1 $0 $9", m) == "$1 http_requests_total "


def test_resource_names_and_windows():
    assert normalize_resource("", "pod").plural == "pods"
    assert normalize_resource("", "Deployment").api_name == "deployments.apps"
    assert normalize_resource("apps", "statefulset").api_name == "statefulsets.apps"
    assert normalize_resource("", "job_name") is None
    assert rate_window("sum(rate(x{<<.LabelMatchers>>}[2m30s]))") == 150
    assert rate_window("max(x)") is None


def test_quoting_survives_a_real_prometheus(prometheus):
    """Hostile values become literals Prometheus parses and matches exactly, never syntax."""
    hostile = ['a"} or vector(1) or x{b="', "back\\slash", "new\nline", "ünï", ".*", "a|b", "(x)+"]
    for value in hostile:
        for expr in (f"absent(nothing{{x={quote(value)}}})", f"absent(nothing{{x=~{regex_alternation([value])}}})"):
            body = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": expr}).json()
            assert body["status"] == "success", (expr, body)
            assert body["data"]["result"][0]["metric"].get("x") == (value if "=~" not in expr else None)
    # a regex alternation of literal names matches exactly those, not what they look like as regexes
    expr = f'count(http_requests_total{{pod=~{regex_alternation(["web-.", "web-1"])}}})'
    result = httpx.get(f"{prometheus.url}/api/v1/query", params={"query": expr}).json()["data"]["result"]
    assert result[0]["value"][1] == "2"  # web-1 GET and POST only; "web-." matched nothing literally


def test_selector_matchers():
    got = [m[1] for m in selector_matchers(parse_selector("a in (x,y),b notin (z),c,!d,e=f,g!=h"))]
    assert got == ['a=~"x|y"', 'b!="z"', 'c!=""', 'd=""', 'e="f"', 'g!="h"']


def test_flags_parse_into_settings():
    s = parse_settings([
        "--prometheus-url", "https://thanos:9090/prefix", "--config", "r.yaml", "--metrics-relist-interval", "30s",
        "--prometheus-header", "X-Scope-OrgID=t1", "--prometheus-query-param", "dedup=true", "--query-cache-ttl", "0",
        "--secure-port", "7443", "--tls-cert-file", "c", "--tls-private-key-file", "k", "--tls-min-version",
        "VersionTLS12",
        "--tls-cipher-suites", "A,B", "--requestheader-allowed-names", "front-proxy-client",
        "--authorization-always-allow-paths", "/healthz,/readyz", "--anonymous-auth=false", "--v", "4",
        "--authentication-skip-lookup", "--authentication-token-webhook-cache-ttl", "1m",
    ])
    assert s.prometheus_url == "https://thanos:9090/prefix" and s.metrics_relist_interval == 30
    assert s.prometheus_headers == (("X-Scope-OrgID", "t1"),) and s.prometheus_query_params == (("dedup", "true"),)
    assert s.query_cache_ttl == 0 and s.secure_port == 7443 and s.listen_port == 7443 and s.listen_host == "0.0.0.0"
    assert s.tls_cipher_suites == ("A", "B") and s.requestheader_allowed_names == ("front-proxy-client",)
    assert s.anonymous_auth is False and s.authentication_skip_lookup is True and s.verbosity == 4
    assert s.authentication_token_webhook_cache_ttl == 60
    insecure = parse_settings(["--insecure", "--port", "8081"])
    assert insecure.listen_port == 8081 and insecure.listen_host == "127.0.0.1"


@pytest.mark.parametrize("argv,message", [
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--metrics-relist-interval", "soon"], "not a duration"),
    (["--prometheus-header", "novalue"], "expected key=value"),
    (["--prometheus-client-tls-cert-file", "c"], "go together"),
])
def test_bad_flags_are_one_line_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as exc:
        parse_settings(argv)
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


async def test_query_cache_coalesces_and_expires():
    now = [100.0]
    cache = QueryCache(clock=lambda: now[0])
    calls = 0

    async def fetch():
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.01)
        return calls

    assert await asyncio.gather(*(cache.get("q", 1.0, fetch) for _ in range(20))) == [1] * 20
    assert calls == 1 and cache.coalesced == 19
    now[0] += 0.9
    assert await cache.get("q", 1.0, fetch) == 1  # still fresh
    now[0] += 0.2
    assert await cache.get("q", 1.0, fetch) == 2  # older than ttl: asked again
    assert await cache.get("q", 0, fetch) == 3  # ttl 0: never reused

    async def failing():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        await cache.get("bad", 5.0, failing)
    assert await cache.get("bad", 5.0, fetch) == 4  # errors are not cached


async def test_query_cache_first_caller_cancelled_others_still_answered():
    cache = QueryCache()

    async def slow():
        await asyncio.sleep(0.05)
        return "v"

    first = asyncio.create_task(cache.get("k", 0, slow))
    await asyncio.sleep(0)
    second = asyncio.create_task(cache.get("k", 0, slow))
    await asyncio.sleep(0)
    first.cancel()
    assert await second == "v"
