"""The keep-alive connection pool under the Prometheus client: bodies in every framing, stale
keep-alive connections, refused connections and timeouts."""

from __future__ import annotations

import asyncio
import gzip

import pytest

from adapter.httpconn import HTTPPool
from kubesim.net import free_port


class Server:
    """An asyncio HTTP/1.1 server whose answers the test scripts; counts connections."""

    def __init__(self, answer, close_after_each: bool = False) -> None:
        self.answer, self.close_after_each = answer, close_after_each
        self.connections, self.requests = 0, []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode().split("\r\n")
                headers = {k.lower(): v for k, _, v in (line.partition(": ") for line in lines[1:] if line)}
                body = await reader.readexactly(int(headers.get("content-length", 0)))
                self.requests.append((lines[0], headers, body))
                reply = self.answer(lines[0])
                if reply is None:
                    await asyncio.sleep(3600)
                writer.write(reply)
                await writer.drain()
                if self.close_after_each:  # an idle timeout on the server side, without saying so
                    writer.close()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/prefix"

    async def __aexit__(self, *exc) -> None:
        self.server.close()


def fixed(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def chunked(body: bytes) -> bytes:
    chunks = b"".join(f"{len(body[i:i + 7]):x}\r\n".encode() + body[i:i + 7] + b"\r\n" for i in range(0, len(body), 7))
    return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks + b"0\r\n\r\n"


async def test_framings_headers_and_keep_alive():
    answers = iter([fixed(b'{"a":1}'), chunked(b'{"status":"success","data":[1,2,3]}'),
                    fixed(gzip.compress(b"zipped"), "Content-Encoding: gzip\r\n")])
    srv = Server(lambda _line: next(answers))
    async with srv as url:
        pool = HTTPPool(url, headers={"X-Scope-OrgID": "t1"})
        try:
            r1 = await pool.request("GET", "/api/v1/query?query=up", {"Authorization": "Bearer x"})
            r2 = await pool.request("POST", "/api/v1/series", None, b"match%5B%5D=up")
            r3 = await pool.request("GET", "/api/v1/labels")
        finally:
            await pool.aclose()
    assert (r1.status, r1.body) == (200, b'{"a":1}')
    assert r2.body == b'{"status":"success","data":[1,2,3]}'
    assert r3.body == b"zipped"
    assert srv.connections == 1  # one kept-alive connection for all three
    (l1, h1, _), (l2, h2, b2), _ = srv.requests
    assert l1 == "GET /prefix/api/v1/query?query=up HTTP/1.1"
    assert h1["authorization"] == "Bearer x" and h1["x-scope-orgid"] == "t1" and h1["host"].startswith("127.0.0.1:")
    assert l2.startswith("POST /prefix/api/v1/series") and b2 == b"match%5B%5D=up"
    assert h2["content-type"] == "application/x-www-form-urlencoded"


async def test_connections_the_server_closed_while_idle_are_not_errors():
    srv = Server(lambda _line: fixed(b"ok"), close_after_each=True)
    async with srv as url:
        pool = HTTPPool(url)
        try:
            results = []
            for _ in range(3):
                results.append((await pool.request("GET", "/x")).body)
                await asyncio.sleep(0.05)
        finally:
            await pool.aclose()
    assert results == [b"ok"] * 3
    assert srv.connections == 3


async def test_refused_and_timed_out():
    pool = HTTPPool(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(OSError):
        await pool.request("GET", "/x")
    srv = Server(lambda line: None if "slow" in line else fixed(b"fast"))
    async with srv as url:
        pool = HTTPPool(url)
        try:
            with pytest.raises(TimeoutError):
                async with asyncio.timeout(0.2):
                    await pool.request("GET", "/slow")
            assert (await pool.request("GET", "/fast")).body == b"fast"  # on a new connection
        finally:
            await pool.aclose()
    assert srv.connections == 2


def test_only_http_and_https():
    with pytest.raises(ValueError, match="scheme"):
        HTTPPool("ftp://example.org")
