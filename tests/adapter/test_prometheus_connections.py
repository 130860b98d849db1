"""The Prometheus client's keep-alive connections (aiohttp's pool): at most 64 at once and kept, a
server's idle close that crosses a request is not an outage, a connection broken mid-answer is."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from http.server import ThreadingHTTPServer
from typing import ClassVar
from urllib.parse import parse_qs

import pytest

from adapter.prometheus import PrometheusClient, PrometheusUnavailable
from adapter.settings import parse_settings

from .conftest import StubAPI, serving


class _CountsConnections(StubAPI):
    """HTTP/1.1 keep-alive answering `vector(n)` with n, a little slowly (so that queries overlap),
    counting the connections made and the most open at once."""

    protocol_version = "HTTP/1.1"
    lock = threading.Lock()
    opened: ClassVar[int] = 0
    open_now: ClassVar[int] = 0
    most_open: ClassVar[int] = 0

    def setup(self) -> None:
        super().setup()
        with self.lock:
            cls = type(self)
            cls.opened += 1
            cls.open_now += 1
            cls.most_open = max(cls.most_open, cls.open_now)

    def finish(self) -> None:
        super().finish()
        with self.lock:
            type(self).open_now -= 1

    def reply(self, url):
        time.sleep(0.005)
        n = float(parse_qs(url.query)["query"][0].removeprefix("vector(").removesuffix(")"))
        return 200, {"status": "success", "data": {"resultType": "vector", "result": [
            {"metric": {}, "value": [1700000000.5, str(n)]}]}}


class _Server(ThreadingHTTPServer):
    request_queue_size = 256  # 64 connections arrive at once: no SYN left to a retransmit
    daemon_threads = True


async def test_many_queries_at_once_each_get_their_own_answer():
    """More queries in flight than the pool's 64 connections: each answered with its own value,
    on at most 64 connections, which are kept for the next ones."""
    _CountsConnections.opened = _CountsConnections.open_now = _CountsConnections.most_open = 0
    server = _Server(("127.0.0.1", 0), _CountsConnections)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{server.server_port}"]))
    try:
        opened = []
        for _ in range(2):
            answers = await asyncio.gather(*(client.query(f"vector({n})") for n in range(150)))
            assert [[s.value for s in samples] for samples in answers] == [[float(n)] for n in range(150)]
            opened.append(_CountsConnections.opened)
        assert 0 < _CountsConnections.most_open <= 64
        assert opened[1] == opened[0] <= 64  # the second round on the first round's connections
    finally:
        await client.aclose()
        server.shutdown()
        server.server_close()


ANSWER = {"status": "success", "data": {"resultType": "vector", "result": [
    {"metric": {"pod": "a"}, "value": [1700000000.5, "2.5"]}]}}


class _ClosesIdleConnections(StubAPI):
    """HTTP/1.1 keep-alive that answers one request per connection, then closes the connection
    when the next request arrives on it, unanswered: as a server whose idle timeout fires just as
    a client reuses the connection."""

    protocol_version = "HTTP/1.1"
    connections: ClassVar[int] = 0
    answered: ClassVar[int] = 0

    def setup(self) -> None:
        super().setup()
        type(self).connections += 1
        self.served = 0

    def do_GET(self) -> None:
        if self.served:
            self.close_connection = True
            return
        self.served += 1
        type(self).answered += 1
        super().do_GET()

    def reply(self, url):
        return 200, ANSWER


@pytest.fixture
def closing():
    _ClosesIdleConnections.connections = _ClosesIdleConnections.answered = 0
    with serving(_ClosesIdleConnections) as server:
        yield server


async def test_a_connection_closed_idle_as_a_request_goes_out_is_asked_again_on_a_new_one(closing):
    client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{closing.server_port}"]))
    try:
        for _ in range(3):  # each query after the first meets a connection the server closes unanswered
            samples = await client.query("up")
            assert [(s.labels["pod"], s.value) for s in samples] == [("a", 2.5)]
    finally:
        await client.aclose()
    assert _ClosesIdleConnections.answered == 3
    assert _ClosesIdleConnections.connections == 3  # the first, and one new connection per closed one


class _BreaksMidAnswer(StubAPI):
    """Announces a body longer than it sends, then closes: an answer cut short."""

    protocol_version = "HTTP/1.1"
    requests: ClassVar[int] = 0

    def do_GET(self) -> None:
        type(self).requests += 1
        data = json.dumps(ANSWER).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data) + 100))
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True


async def test_an_answer_cut_short_is_unavailable_and_not_asked_again():
    _BreaksMidAnswer.requests = 0
    with serving(_BreaksMidAnswer) as server:
        client = PrometheusClient(parse_settings(["--prometheus-url", f"http://127.0.0.1:{server.server_port}"]))
        try:
            with pytest.raises(PrometheusUnavailable, match="unreachable"):
                await client.query("up")
        finally:
            await client.aclose()
    assert _BreaksMidAnswer.requests == 1
