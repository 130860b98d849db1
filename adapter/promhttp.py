"""The Prometheus client's HTTP/1.1: pooled keep-alive connections on the event loop, answers
parsed by httptools (uvicorn's parser, a dependency already).

The second hop of every uncached request is one small GET on a warm connection. aiohttp's client
spent 173 us of CPU on it (its request and response objects, header multidicts, timers, tracing
hooks), a third of the adapter's CPU on a one-pod request; this does the same exchange in 54 us
(bench/http_client_bench.py, 2026-12-07, at a load of ~10). What it does: one request at a time per
connection, at most `limit` connections, idle ones reused newest first and closed after
`keepalive` seconds; bodies by Content-Length, chunked or up to the close, read as they arrive
(the reader bounds and inflates them, adapter.prometheus) with reading paused while a slow reader
holds more than 256 KiB. A request on a reused connection that the server closed before answering
any of it (its idle close crossing the request) is sent again once on a new connection, as the
request is a read. Failures are `OSError`s (`ConnectionFailed`, refused connections, TLS errors).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections import deque
from collections.abc import AsyncIterator, Sequence
from urllib.parse import urlsplit

import httptools

__all__ = ["ConnectionFailed", "HTTPPool", "Response"]

_HIGH, _LOW = 256 * 1024, 64 * 1024  # buffered body bytes: pause reading above, resume below


class ConnectionFailed(ConnectionError):
    """The connection broke, or what came back is not an HTTP answer."""


class _Connection(asyncio.Protocol):
    """One keep-alive connection; one exchange at a time (`send`, the answer's callbacks, `chunks`)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = False
        self.idle_since = 0.0
        self.reused = False
        self._begin()

    def _begin(self) -> None:
        self.headers: dict[str, str] = {}
        self.body: deque[bytes] = deque()
        self.buffered = 0
        self.received = self.headers_done = self.complete = self.paused = self.keep_alive = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future | None = None

    # -- asyncio.Protocol ----------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport (uvloop's is no subclass)

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionFailed(f"malformed HTTP answer: {exc}"))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.headers_done and not self.complete and not self._framed():
            self.complete = True  # no length, not chunked: the body ends with the connection
            self._wake()
        elif not self.complete:
            self._fail(ConnectionFailed(f"connection closed by the server{f': {exc}' if exc else ''}"))

    # -- httptools callbacks -------------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:  # whole: httptools joins a header split across reads
        self.headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        self.headers_done = True
        self.keep_alive = self.parser.should_keep_alive()  # read now: the parser forgets it once the answer ends
        self._wake()

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.buffered += len(body)
        if self.buffered > _HIGH and not self.paused and self.transport is not None:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def on_message_complete(self) -> None:
        self.complete = True
        self._wake()

    # -- the exchange --------------------------------------------------------------------------
    def _framed(self) -> bool:
        return "content-length" in self.headers or "chunked" in self.headers.get("transfer-encoding", "").lower()

    def _fail(self, exc: BaseException) -> None:
        if self.error is None:
            self.error = exc
        self.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def _wait(self) -> None:
        if self.error is not None:
            raise self.error
        self.waiter = asyncio.get_running_loop().create_future()
        try:
            await self.waiter
        finally:
            self.waiter = None
        if self.error is not None:
            raise self.error

    async def send(self, head: bytes, body: bytes | None) -> None:
        """Write a request and wait for its answer's headers."""
        self._begin()
        if self.closed or self.transport is None:
            raise ConnectionFailed("connection closed by the server")
        self.transport.write(head + body if body else head)
        while not self.headers_done:
            await self._wait()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The answer's body as it arrives."""
        while True:
            if self.body:
                data = self.body.popleft()
                self.buffered -= len(data)
                if self.paused and self.buffered < _LOW and self.transport is not None:
                    self.paused = False
                    self.transport.resume_reading()
                yield data
            elif self.complete:
                return
            else:
                await self._wait()

    def reusable(self) -> bool:
        return self.complete and not self.closed and self.error is None and self.keep_alive

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class Response:
    """An answer being read: `status`, `headers` (lower-case names), `chunks()` (the body)."""

    def __init__(self, conn: _Connection) -> None:
        self._conn = conn
        self.status: int = conn.parser.get_status_code()
        self.headers = conn.headers

    def chunks(self) -> AsyncIterator[bytes]:
        return self._conn.chunks()


class _Exchange:
    """One request and its answer on a pooled connection (a class, not a generator-based context
    manager: this is the hot path)."""

    __slots__ = ("_body", "_conn", "_head", "_pool")

    def __init__(self, pool: HTTPPool, head: bytes, body: bytes | None) -> None:
        self._pool, self._head, self._body = pool, head, body
        self._conn: _Connection | None = None

    async def __aenter__(self) -> Response:
        pool = self._pool
        await pool._slots.acquire()
        try:
            self._conn = conn = await pool._checkout()
            try:
                await conn.send(self._head, self._body)
            except ConnectionFailed:
                if not conn.reused or conn.received:
                    raise
                conn.close()  # the server closed it idle as the request went out: once more, anew
                pool._all.discard(conn)
                self._conn = conn = await pool._connect()
                await conn.send(self._head, self._body)
        except BaseException:
            self._release()
            raise
        return Response(conn)

    async def __aexit__(self, *exc: object) -> None:
        self._release()

    def _release(self) -> None:
        if self._conn is not None:
            self._pool._checkin(self._conn)
            self._conn = None
        self._pool._slots.release()


class HTTPPool:
    """Keep-alive connections to the origin of `base_url` (its scheme, host and port)."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None, connect_timeout: float,
                 limit: int = 64, keepalive: float = 60.0) -> None:
        url = urlsplit(base_url)
        self.host = url.hostname or "localhost"
        self.port = url.port or (443 if url.scheme == "https" else 80)
        self.host_header = url.netloc.rpartition("@")[2]
        self.ssl = ssl_context if url.scheme == "https" else None
        self.connect_timeout, self.keepalive = connect_timeout, keepalive
        self._slots = asyncio.Semaphore(limit)
        self._idle: list[_Connection] = []
        self._all: set[_Connection] = set()

    def head(self, method: str, target: str, headers: Sequence[tuple[str, str]], length: int | None) -> bytes:
        """The request line and headers; a CR or LF in any of them is refused (no header injection)."""
        lines = [f"{method} {target} HTTP/1.1", f"Host: {self.host_header}",
                 *(f"{k}: {v}" for k, v in headers)]
        if length is not None:
            lines.append(f"Content-Length: {length}")
        text = "\r\n".join(lines)
        if text.count("\r") != len(lines) - 1 or text.count("\n") != len(lines) - 1:
            raise ValueError("a CR or LF in the request line or a header")
        return (text + "\r\n\r\n").encode("latin-1")

    def request(self, method: str, target: str, headers: Sequence[tuple[str, str]],
                body: bytes | None = None) -> _Exchange:
        """`async with pool.request(...) as response`: the request sent, its answer's headers in.
        The connection goes back to the pool only when the answer was read to its end."""
        return _Exchange(self, self.head(method, target, headers, None if body is None else len(body)), body)

    async def _checkout(self) -> _Connection:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed and now - conn.idle_since < self.keepalive:
                conn.reused = True
                return conn
            conn.close()
            self._all.discard(conn)
        return await self._connect()

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout):
            _, conn = await loop.create_connection(
                _Connection, self.host, self.port, ssl=self.ssl,
                server_hostname=self.host if self.ssl is not None else None)
        self._all.add(conn)
        return conn

    def _checkin(self, conn: _Connection) -> None:
        if conn.reusable():
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()
            self._all.discard(conn)

    def close(self) -> None:
        for conn in self._all:
            conn.close()
        self._all.clear()
        self._idle.clear()
