"""Broken or hostile Prometheus answers (a stand-in HTTP server on loopback: a real Prometheus
cannot produce them) answer 503 naming Prometheus with one warning line each, never a 500 or a
traceback; answers are bounded in decompressed bytes and in series."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import pytest

from .conftest import AdapterProcess, serving
from .test_errors import status

NOW = 1_700_000_000.5
SERIES = [{"__name__": "q_depth", "namespace": "web", "pod": "p"}]


def vector(*items: object) -> bytes:
    return json.dumps({"status": "success", "data": {"resultType": "vector", "result": list(items)}}).encode()


def item(value: object, ts: object = NOW, metric: object = None) -> dict:
    return {"metric": metric if metric is not None else {"pod": "x"}, "value": [ts, value]}


BOMB = gzip.compress(b" " * (100 << 20), 9)  # ~100 KB on the wire, 100 MB decompressed
# pod name in the request -> (HTTP status, body, extra headers)
ANSWERS: dict[str, tuple[int, bytes, dict[str, str]]] = {
    "nonnumeric": (200, vector(item("abc")), {}),
    "novalue": (200, vector({"metric": {"pod": "novalue"}}), {}),
    "nullvalue": (200, vector({"metric": {"pod": "nullvalue"}, "value": None}), {}),
    "nants": (200, vector(item("1", ts="NaN")), {}),
    "rawnan": (200, vector(item("1")).replace(str(NOW).encode(), b"NaN"), {}),
    "hugets": (200, vector(item("1", ts=1e20)), {}),
    "notlist": (200, json.dumps({"status": "success", "data": {"resultType": "vector", "result": {}}}).encode(), {}),
    "itemnotobject": (200, vector("x"), {}),
    "labelsnotstrings": (200, vector(item("1", metric={"pod": 5})), {}),
    "datanotobject": (200, json.dumps({"status": "success", "data": [1]}).encode(), {}),
    "unknowntype": (200, json.dumps({"status": "success", "data": {"resultType": "x", "result": []}}).encode(), {}),
    "error200": (200, json.dumps({"status": "error", "errorType": "bad_data", "error": "boom"}).encode(), {}),
    "html": (200, b"<html>proxy error</html>", {"Content-Type": "text/html"}),
    "badgzip": (200, b"not gzip at all", {"Content-Encoding": "gzip"}),
    "brotli": (200, vector(), {"Content-Encoding": "br"}),
    "bomb": (200, BOMB, {"Content-Encoding": "gzip"}),
    "many": (200, vector(*(item("1", metric={"pod": f"p{i}"}) for i in range(5))), {}),
}


class _Broken(BaseHTTPRequestHandler):
    def do_GET(self):
        url = urlparse(self.path)
        params = parse_qs(url.query)
        code, body, headers = 200, vector(), {}
        if url.path == "/api/v1/series":
            body = json.dumps({"status": "success", "data": SERIES}).encode()
        elif url.path == "/api/v1/query":
            m = re.search(r'pod="(\w+)"', params.get("query", [""])[0])
            if m and m.group(1) in ANSWERS:
                code, body, headers = ANSWERS[m.group(1)][0], ANSWERS[m.group(1)][1], dict(ANSWERS[m.group(1)][2])
            elif m:
                body = vector(item("2.5", metric={"pod": m.group(1)}))
            else:
                scalar = {"resultType": "scalar", "result": [NOW, "1"]}
                body = json.dumps({"status": "success", "data": scalar}).encode()
        self.send_response(code)
        self.send_header("Content-Type", headers.pop("Content-Type", "application/json"))
        for k, v in headers.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


RULES = """
rules:
- seriesQuery: 'q_depth{namespace!="",pod!=""}'
  resources: {template: "<<.Resource>>"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


@pytest.fixture(scope="module")
def broken(tmp_path_factory) -> Iterator[AdapterProcess]:
    rules = tmp_path_factory.mktemp("rules") / "rules.yaml"
    rules.write_text(RULES)
    with serving(_Broken) as server:  # type: ignore[arg-type]
        a = AdapterProcess("--prometheus-url", f"http://127.0.0.1:{server.server_port}", "--config", str(rules),
                           "--metrics-discovery", "series", "--query-cache-ttl", "0",
                           "--prometheus-max-series", "3").wait_ready()
        yield a
        a.stop()


def _get(adapter: AdapterProcess, pod: str):
    return adapter.get(f"/apis/custom.metrics.k8s.io/v1beta2/namespaces/web/pods/{pod}/q_depth")


def test_a_good_answer_is_served(broken):
    resp = _get(broken, "fine")
    assert resp.status_code == 200 and resp.json()["items"][0]["value"] == "2500m"


@pytest.mark.parametrize("case", sorted(set(ANSWERS) - {"bomb", "many"}))
def test_malformed_answers_are_503_with_one_warning(broken, case):
    before = broken.stderr().count("WARNING")
    body = status(_get(broken, case), 503, "ServiceUnavailable")
    assert "Prometheus" in body["message"]
    log = broken.stderr()
    assert log.count("WARNING") == before + 1, log[-2000:]
    assert "Traceback" not in log


def test_a_decompression_bomb_stops_at_the_cap(broken):
    body = status(_get(broken, "bomb"), 503, "ServiceUnavailable")
    assert "larger than --prometheus-max-response-bytes=16777216" in body["message"]


def test_too_many_series_is_503(broken):
    body = status(_get(broken, "many"), 503, "ServiceUnavailable")
    assert "5 series, more than --prometheus-max-series=3" in body["message"]
