"""The Prometheus client's keep-alive connections (adapter.promhttp): a server's idle close that
crosses a request is not an outage, a connection broken mid-answer is."""

from __future__ import annotations

import asyncio
import json
from typing import ClassVar

import pytest

from adapter.prometheus import PrometheusClient, PrometheusUnavailable
from adapter.settings import parse_settings

from .conftest import StubAPI, serving


async def test_many_queries_at_once_each_get_their_own_answer(prometheus):
    """More queries in flight than the pool's 64 connections: each answered with its own value
    (PromQL's `vector(n)` is n), on at most 64 connections, which are kept for the next ones."""
    client = PrometheusClient(parse_settings(["--prometheus-url", prometheus.url]))
    try:
        for _ in range(2):
            answers = await asyncio.gather(*(client.query(f"vector({n})") for n in range(150)))
            assert [[s.value for s in samples] for samples in answers] == [[float(n)] for n in range(150)]
            pool = client._client()
            assert 0 < len(pool._all) <= 64 and len(pool._idle) == len(pool._all)
    finally:
        await client.aclose()

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
        assert len(client._client()._all) == 1  # the closed ones are let go
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
