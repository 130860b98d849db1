"""Prometheus-compatible backends as Thanos Querier, Mimir and VictoriaMetrics are deployed: behind
a path prefix, basic auth (Prometheus' own --web.config.file, bcrypt) or a bearer-token checking
proxy, with a per-request timeout and extra query parameters on every call."""

from __future__ import annotations

import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import bcrypt
import httpx
import pytest

from adapter.security import pki
from promscaler.quantity import parse_quantity

from .conftest import AdapterProcess, direct, start_prometheus

PREFIX = "/tenant-a/prometheus"
USER, PASSWORD = "adapter", "s3cret-pw"
TOKEN = "bearer-token-123"
PATH = "/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/web-3/requests"
EXPR = 'sum(rate(app_requests_total{namespace="web",pod="web-3"}[1m])) by (pod)'


@pytest.fixture(scope="module")
def guarded_prometheus():
    """Prometheus under a path prefix that wants basic auth (bcrypt hash, as Prometheus requires)."""
    hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
    prom = start_prometheus(route_prefix=PREFIX, web_config={"basic_auth_users": {USER: hashed}})
    yield prom
    prom.close()


def _auth_config(tmp_path, server: str, user: dict) -> str:
    path = tmp_path / "prometheus-auth.yaml"
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "prom", "cluster": {"server": server}}],
        "users": [{"name": "adapter", "user": user}],
        "contexts": [{"name": "c", "context": {"cluster": "prom", "user": "adapter"}}],
    }))
    return str(path)


def answers_as_prometheus(adapter: AdapterProcess, url: str, **direct_kw: Any) -> None:
    """PATH through the adapter is EXPR asked of the Prometheus at `url` directly (to the quantity's milli):
    the one check every way of reaching a backend must pass."""
    resp = adapter.get(PATH)
    assert resp.status_code == 200, resp.text
    expected = direct(url, EXPR, **direct_kw)["web-3"]
    assert abs(float(parse_quantity(resp.json()["items"][0]["value"])) - expected) < 0.0011


def test_prefix_and_basic_auth(guarded_prometheus, rules_file, tmp_path):
    url = guarded_prometheus.url
    assert url.endswith(PREFIX)
    assert httpx.get(f"{url}/api/v1/query", params={"query": "1"}).status_code == 401  # really guarded
    auth = _auth_config(tmp_path, url, {"username": USER, "password": PASSWORD})
    adapter = AdapterProcess("--prometheus-url", url, "--prometheus-auth-config", auth, "--config", str(rules_file),
                             "--query-cache-ttl", "0").wait_ready()
    try:
        answers_as_prometheus(adapter, url, auth=(USER, PASSWORD))
        assert len(adapter.get("/apis/custom.metrics.k8s.io/v1beta1").json()["resources"]) >= 8  # discovery too
    finally:
        adapter.stop()


def test_wrong_password_is_not_ready_and_says_why(guarded_prometheus, rules_file, tmp_path):
    auth = _auth_config(tmp_path, guarded_prometheus.url, {"username": USER, "password": "wrong"})
    adapter = AdapterProcess("--prometheus-url", guarded_prometheus.url, "--prometheus-auth-config", auth,
                             "--config", str(rules_file)).wait_listening()  # serving, but not ready
    try:
        resp = adapter.get("/readyz?verbose")  # insecure serving: anyone may see the detail
        assert resp.status_code == 503 and "401" in resp.text
        assert adapter.get(PATH).status_code == 503  # "I could not ask", never an empty answer
    finally:
        adapter.stop()


class _TokenProxy(BaseHTTPRequestHandler):
    """A reverse proxy that wants `Authorization: Bearer TOKEN` (as a Thanos/Mimir gateway would)
    and records what it forwards."""

    upstream: ClassVar[str] = ""
    seen: ClassVar[list[dict]] = []

    def _forward(self, method: str) -> None:
        url = urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) if method == "POST" else b""
        params = parse_qs(url.query) | parse_qs(body.decode())
        type(self).seen.append({"path": url.path, "params": params, "auth": self.headers.get("Authorization")})
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            code, data, ctype = 401, b'{"status":"error","error":"unauthorized"}', "application/json"
        else:
            r = httpx.request(method, self.upstream + self.path, content=body or None,
                              headers={"Content-Type": self.headers.get("Content-Type", "")} if body else None)
            code, data, ctype = r.status_code, r.content, r.headers.get("content-type", "")
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self._forward("GET")

    def do_POST(self):
        self._forward("POST")

    def log_message(self, *args):
        pass


def _serve_proxy(upstream: str, tls: ssl.SSLContext | None = None):
    _TokenProxy.upstream, _TokenProxy.seen = upstream, []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _TokenProxy)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture(scope="module")
def token_proxy(prometheus):
    server = _serve_proxy(prometheus.url)
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("verb", ["GET", "POST"])
def test_bearer_token_timeout_and_extra_params(token_proxy, prometheus, rules_file, tmp_path, verb):
    assert httpx.get(f"{token_proxy}/api/v1/query", params={"query": "1"}).status_code == 401
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    _TokenProxy.seen = []
    adapter = AdapterProcess("--prometheus-url", token_proxy, "--prometheus-token-file", str(token),
                             "--prometheus-query-param", "dedup=true",
                             "--prometheus-query-param", "partial_response=false",
                             "--prometheus-timeout", "7s", "--prometheus-verb", verb, "--config", str(rules_file),
                             "--query-cache-ttl", "0").wait_ready()
    try:
        answers_as_prometheus(adapter, prometheus.url)
    finally:
        adapter.stop()
    seen = _TokenProxy.seen
    assert seen and all(s["auth"] == f"Bearer {TOKEN}" for s in seen)
    assert all(s["params"].get("dedup") == ["true"] and s["params"].get("partial_response") == ["false"] for s in seen)
    queries = [s for s in seen if s["path"] == "/api/v1/query" and s["params"].get("query") == [EXPR]]
    assert queries and all(s["params"].get("timeout") == ["7s"] for s in queries)
    assert any(s["path"].startswith("/api/v1/label") for s in seen)  # aggregated discovery went through it too


def test_tls_with_a_private_ca(prometheus, rules_file, tmp_path):
    """https with `--prometheus-ca-file` (a gateway's own CA), token and keep-alive over TLS."""
    _, ca_file, cert, key = pki.write_self_signed(tmp_path)
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    server = _serve_proxy(prometheus.url, tls)
    token = tmp_path / "token"
    token.write_text(TOKEN)
    url = f"https://127.0.0.1:{server.server_port}"
    try:
        adapter = AdapterProcess("--prometheus-url", url, "--prometheus-ca-file", str(ca_file),
                                 "--prometheus-token-file", str(token), "--config", str(rules_file),
                                 "--query-cache-ttl", "0").wait_ready()
        try:
            for _ in range(3):  # the same pooled TLS connection serves several queries
                answers_as_prometheus(adapter, prometheus.url)
        finally:
            adapter.stop()
        untrusted = AdapterProcess("--prometheus-url", url, "--prometheus-token-file", str(token),
                                   "--config", str(rules_file)).wait_listening()  # system CAs do not know it
        try:
            resp = untrusted.get("/readyz?verbose")
            assert resp.status_code == 503 and "certificate" in resp.text.lower()
        finally:
            untrusted.stop()
    finally:
        server.shutdown()
        server.server_close()
