"""Real parts for the adapter tests: a real Prometheus loaded with the series of `data.py`, and
the adapter as a real subprocess (`python -m adapter --insecure --port P ...`) queried over HTTP."""

from __future__ import annotations

import contextlib
import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import ParseResult, urlparse
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kubesim.processes import AdapterProcess  # noqa: F401  (re-exported to the tests)
from kubesim.prometheus import PrometheusServer, start_backfilled

from . import data

ROOT = Path(__file__).resolve().parents[2]
RULES = Path(__file__).parent / "rules.yaml"
PYTHON = sys.executable


def run_adapter(*args: str, timeout: float = 20.0) -> subprocess.CompletedProcess:
    """Run the adapter expecting it to exit (start-up failures)."""
    return subprocess.run([PYTHON, "-m", "adapter", *args], cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def start_prometheus(**kwargs) -> PrometheusServer:
    return start_backfilled(data.openmetrics(), **kwargs)


@pytest.fixture(scope="session")
def prometheus() -> Iterator[PrometheusServer]:
    prom = start_prometheus()
    yield prom
    prom.close()


@pytest.fixture(scope="session")
def adapter(prometheus: PrometheusServer) -> Iterator[AdapterProcess]:
    a = AdapterProcess("--prometheus-url", prometheus.url, "--config", str(RULES)).wait_ready()
    yield a
    a.stop()


class PromQL:
    """Asks Prometheus directly: the independent source of expected values."""

    def __init__(self, url: str) -> None:
        self.url = url

    def vector(self, expr: str) -> list[tuple[dict[str, str], float]]:
        body = httpx.get(f"{self.url}/api/v1/query", params={"query": expr}, timeout=10).json()
        assert body["status"] == "success", body
        return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]

    def by(self, expr: str, label: str) -> dict[str, float]:
        return {m.get(label, ""): v for m, v in self.vector(expr)}


def approx(quantity: str, expected: float) -> bool:
    """An adapter quantity equals a Prometheus value (quantities are truncated to milli-units)."""
    from promscaler.quantity import parse_quantity

    return abs(float(parse_quantity(quantity)) - expected) < 0.0011


@pytest.fixture(scope="session")
def promql(prometheus: PrometheusServer) -> PromQL:
    return PromQL(prometheus.url)


class StubAPI(BaseHTTPRequestHandler):
    """A programmable stand-in for Prometheus' HTTP API: subclasses answer `(code, body)` from
    `reply(url)`; bodies are sent as JSON."""

    def reply(self, url: ParseResult) -> tuple[int, dict]:
        raise NotImplementedError

    def do_GET(self):  # noqa: N802
        code, body = self.reply(urlparse(self.path))
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def serving(handler: type[StubAPI]) -> Iterator[ThreadingHTTPServer]:
    """`handler` on a free loopback port for the duration of the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
