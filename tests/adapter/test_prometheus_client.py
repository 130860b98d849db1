"""The Prometheus client: path prefixes (as behind Thanos/Mimir), credentials, headers and extra
query parameters on every call."""

from __future__ import annotations

import json
from typing import ClassVar
from urllib.parse import parse_qs, urlparse

import pytest

from adapter.prometheus import PrometheusClient, PrometheusQueryError, PrometheusUnavailable
from adapter.settings import parse_settings

from .conftest import RULES, AdapterProcess, StubAPI, approx, serving, start_prometheus


@pytest.fixture(scope="module")
def prefixed_prometheus():
    prom = start_prometheus(route_prefix="/prom/api-gw")
    yield prom
    prom.close()


def test_adapter_behind_a_path_prefix(prefixed_prometheus, promql):
    adapter = AdapterProcess("--prometheus-url", prefixed_prometheus.url, "--config", str(RULES),
                             "--prometheus-query-param", "dedup=true", "--prometheus-header", "X-Scope-OrgID=tenant-1",
                             "--prometheus-verb", "POST").wait_ready()
    try:
        resp = adapter.get("/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-2/http_requests")
        assert resp.status_code == 200, resp.text
        expected = promql.by('sum(rate(http_requests_total{namespace="web"}[1m])) by (pod)', "pod")["web-2"]
        assert approx(resp.json()["items"][0]["value"], expected)
    finally:
        adapter.stop()


class _Recorder(StubAPI):
    seen: ClassVar[list[dict]] = []
    reply_with: tuple[int, dict] = (200, {"status": "success", "data": {"resultType": "vector", "result": []}})

    def reply(self, url):
        type(self).seen.append({"path": url.path, "params": parse_qs(url.query), "headers": dict(self.headers)})
        return type(self).reply_with


@pytest.fixture
def recorder():
    _Recorder.seen = []
    with serving(_Recorder) as server:
        yield server


async def test_credentials_headers_and_params_are_sent(recorder, tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    settings = parse_settings([
        "--prometheus-url", f"http://127.0.0.1:{recorder.server_port}/select/0/prometheus/",
        "--prometheus-token-file", str(token), "--prometheus-header", "X-Scope-OrgID=t1",
        "--prometheus-query-param", "partial_response=false", "--prometheus-timeout", "3s",
    ])
    client = PrometheusClient(settings)
    try:
        _Recorder.reply_with = (200, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {"pod": "a"}, "value": [1700000000.5, "2.5"]},
            {"metric": {"pod": "b"}, "value": [1700000000.5, "NaN"]},
            {"metric": {"pod": "c"}, "value": [1700000000.5, "+Inf"]},
        ]}})
        samples = await client.query('up{job="x"}')
        assert [(s.labels["pod"], s.value, s.timestamp) for s in samples] == [
            ("a", 2.5, 1700000000.5)
        ]  # NaN/Inf skipped
        [req] = _Recorder.seen
        assert req["path"] == "/select/0/prometheus/api/v1/query"
        assert req["params"]["query"] == ['up{job="x"}'] and req["params"]["partial_response"] == ["false"]
        assert req["params"]["timeout"] == ["3s"]
        assert req["headers"]["Authorization"] == "Bearer s3cret" and req["headers"]["X-Scope-OrgID"] == "t1"

        _Recorder.reply_with = (400, {"status": "error", "errorType": "bad_data", "error": "parse error"})
        with pytest.raises(PrometheusQueryError, match="parse error"):
            await client.query("bad(")
        _Recorder.reply_with = (503, {"status": "error", "errorType": "unavailable", "error": "overloaded"})
        with pytest.raises(PrometheusUnavailable, match="overloaded"):
            await client.query("up")
    finally:
        await client.aclose()


async def test_auth_config_kubeconfig_style(recorder, tmp_path):
    """`--prometheus-auth-config`: prometheus-adapter's kubeconfig-style credentials file."""
    auth = tmp_path / "prometheus-auth.yaml"
    auth.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "prom", "cluster": {"server": f"http://127.0.0.1:{recorder.server_port}"}}],
                "users": [{"name": "adapter", "user": {"token": "from-kubeconfig"}}],
                "contexts": [{"name": "c", "context": {"cluster": "prom", "user": "adapter"}}],
                "current-context": "c",
            }
        )
    )
    settings = parse_settings(
        ["--prometheus-url", f"http://127.0.0.1:{recorder.server_port}", "--prometheus-auth-config", str(auth)]
    )
    client = PrometheusClient(settings)
    try:
        _Recorder.reply_with = (200, {"status": "success", "data": []})
        assert await client.series("up") == []
        [req] = _Recorder.seen
        assert req["path"] == "/api/v1/series" and req["params"]["match[]"] == ["up"]
        assert req["headers"]["Authorization"] == "Bearer from-kubeconfig"
    finally:
        await client.aclose()


class _HeaderRecorder(StubAPI):
    """Records each request's header lines as sent (a repeated name twice) and sets a cookie."""

    seen: ClassVar[list[tuple[str, list[tuple[str, str]]]]] = []

    def do_GET(self):
        type(self).seen.append((urlparse(self.path).path, [(k.lower(), v) for k, v in self.headers.items()]))
        data = json.dumps({"status": "success", "data": {"resultType": "vector", "result": []}}
                          if self.path.startswith("/api/v1/query") else {"status": "success", "data": []}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Set-Cookie", "session=abc; Path=/")
        self.end_headers()
        self.wfile.write(data)


async def test_each_header_once_the_clients_own_last_and_no_cookies(tmp_path):
    """The session's headers are built once: a --prometheus-header replaces a default whatever its
    case, the client's own (Accept-Encoding, the configured credentials) replace both; instant
    queries ask for no gzip, discovery does; a cookie Prometheus (or a proxy) sets is not sent back."""
    auth = tmp_path / "prometheus-auth.yaml"
    auth.write_text(json.dumps({"users": [{"name": "a", "user": {"token": "from-kubeconfig"}}]}))
    _HeaderRecorder.seen = []
    with serving(_HeaderRecorder) as server:
        client = PrometheusClient(parse_settings([
            "--prometheus-url", f"http://localhost:{server.server_port}", "--prometheus-auth-config", str(auth),
            "--prometheus-header", "accept=application/json;q=1", "--prometheus-header", "authorization=Basic eA==",
            "--prometheus-header", "ACCEPT-ENCODING=br"]))
        try:
            for _ in range(2):
                assert await client.query("up") == []
            assert await client.series("up") == []
        finally:
            await client.aclose()
    for path, headers in _HeaderRecorder.seen:
        names = [k for k, _ in headers]
        assert len(names) == len(set(names)), headers
        sent = dict(headers)
        assert sent["accept"] == "application/json;q=1" and sent["authorization"] == "Bearer from-kubeconfig"
        assert sent["user-agent"] == "promscaler-adapter" and "cookie" not in sent
        assert sent["accept-encoding"] == ("identity" if path == "/api/v1/query" else "gzip")
    assert [path for path, _ in _HeaderRecorder.seen] == ["/api/v1/query"] * 2 + ["/api/v1/series"]


class _NoFormatQuery(StubAPI):
    """Thanos Querier or Mimir as the check sees them: no `/api/v1/format_query` (404), a query
    that does not parse refused with 400 quoting it."""

    seen: ClassVar[list[str]] = []
    format_query: tuple[int, dict] = (404, {"status": "error", "error": "404 page not found"})

    def reply(self, url):
        type(self).seen.append(url.path)
        if url.path.endswith("/format_query"):
            return type(self).format_query
        query = parse_qs(url.query)["query"][0]
        if query.count("(") != query.count(")"):
            return 400, {"status": "error", "errorType": "bad_data", "error": f"cannot parse query={query!r}"}
        return 200, {"status": "success", "data": {"resultType": "vector", "result": []}}


async def test_without_format_query_queries_are_checked_by_evaluation():
    _NoFormatQuery.seen = []
    with serving(_NoFormatQuery) as server:
        client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{server.server_port}/q"]))
        try:
            assert client.query_check == "/api/v1/format_query"
            assert await client.check_query("sum(up)") == "/api/v1/query"  # an empty answer: it parses
            with pytest.raises(PrometheusQueryError) as refused:
                await client.check_query("sum(up")
            assert "cannot parse" in str(refused.value)  # for the log
            assert refused.value.brief == "Prometheus rejected the query (HTTP 400)"  # for clients: no query
            assert _NoFormatQuery.seen == ["/q/api/v1/format_query", "/q/api/v1/query", "/q/api/v1/query"]
            assert client.query_check == "/api/v1/query"  # learnt once
        finally:
            await client.aclose()

        _NoFormatQuery.format_query = (503, {"status": "error", "error": "overloaded"})  # there, but failing
        client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{server.server_port}"]))
        try:
            with pytest.raises(PrometheusUnavailable):
                await client.check_query("sum(up)")
            assert client.query_check == "/api/v1/format_query"  # not taken for a missing endpoint
        finally:
            await client.aclose()
            _NoFormatQuery.format_query = (404, {"status": "error", "error": "404 page not found"})
