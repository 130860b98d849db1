"""A keep-alive HTTP/1.1 connection pool to one origin, for the Prometheus client.

Why not a general client: the adapter's whole overhead budget over a PromQL query is a few
hundred microseconds, and a general client's per-request machinery (URL objects, header
multidicts, timers, cookie jars, tracing hooks) took 0.4 ms of it, where writing the request
and feeding the answer to `httptools` (the parser uvicorn uses) takes 0.03 ms (issue 7). Only
what talking to the Prometheus HTTP API needs: GET/POST, fixed and per-request headers,
Content-Length and chunked bodies, gzip answers, TLS, a connect and a total timeout, and one
retry when a reused idle connection turns out to be closed by the server.
"""

from __future__ import annotations

import asyncio
import ssl
import zlib
from urllib.parse import urlsplit

import httptools

__all__ = ["HTTPPool", "Response", "ConnectionLost"]


class ConnectionLost(ConnectionError):
    """The server closed the connection before answering."""


class Response:
    __slots__ = ("status", "headers", "body")

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


class _Connection(asyncio.Protocol):
    """One connection; one exchange at a time."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = False
        self._waiter: asyncio.Future | None = None
        self._reset()

    def _reset(self) -> None:
        self._parser = httptools.HttpResponseParser(self)
        self._headers: dict[str, str] = {}
        self._body: list[bytes] = []
        self._started = False

    # asyncio.Protocol
    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._started = True
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionLost(f"malformed HTTP answer: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self._fail(ConnectionLost(str(exc) if exc else "connection closed by the server"))

    # httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers[name.decode("latin-1").lower()] = value.decode("latin-1")

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        waiter, self._waiter = self._waiter, None
        response = Response(self._parser.get_status_code(), self._headers, b"".join(self._body))
        if not self._parser.should_keep_alive():
            self.close()
        self._reset()
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    def _fail(self, exc: Exception) -> None:
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    async def exchange(self, request: bytes) -> Response:
        self.used = True
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return await self._waiter

    def answered_nothing(self) -> bool:
        return not self._started

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()


class HTTPPool:
    """`await pool.request("GET", "/api/v1/query?query=up", headers)` -> Response."""

    def __init__(self, base_url: str, ssl_context: ssl.SSLContext | None = None, limit: int = 64,
                 connect_timeout: float = 5.0, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(base_url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme in {base_url!r}: use http or https")
        self.https = parts.scheme == "https"
        self.host = parts.hostname or "127.0.0.1"
        self.port = parts.port or (443 if self.https else 80)
        self.prefix = parts.path.rstrip("/")
        self.ssl = (ssl_context or ssl.create_default_context()) if self.https else None
        self.connect_timeout = connect_timeout
        host_header = parts.netloc.rpartition("@")[2]
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in {"Host": host_header, **(headers or {})}.items())
        self._idle: list[_Connection] = []
        self._slots = asyncio.Semaphore(limit)

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(self.connect_timeout):
            _, conn = await loop.create_connection(_Connection, self.host, self.port, ssl=self.ssl,
                                                   server_hostname=self.host if self.ssl else None)
        return conn

    def _build(self, method: str, target: str, headers: dict[str, str] | None, body: bytes | None) -> bytes:
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        if body is not None:
            extra += f"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {len(body)}\r\n"
        head = f"{method} {self.prefix}{target} HTTP/1.1\r\n{self._fixed}{extra}\r\n".encode("latin-1")
        return head + body if body else head

    async def request(self, method: str, target: str, headers: dict[str, str] | None = None,
                      body: bytes | None = None) -> Response:
        """One exchange; raises OSError/ConnectionLost when the server cannot be talked to."""
        request = self._build(method, target, headers, body)
        async with self._slots:
            for attempt in (1, 2):
                conn = None
                while self._idle and conn is None:
                    candidate = self._idle.pop()
                    conn = None if candidate.closed else candidate
                fresh = conn is None
                if fresh:
                    conn = await self._connect()
                try:
                    response = await conn.exchange(request)
                except ConnectionLost:
                    conn.close()
                    if fresh or attempt == 2 or not conn.answered_nothing():
                        raise
                    continue  # a reused idle connection the server had closed: once more on a new one
                except BaseException:  # a timeout or cancellation mid-exchange: the connection is unusable
                    conn.close()
                    raise
                if not conn.closed:
                    self._idle.append(conn)
                if response.headers.get("content-encoding") == "gzip":
                    response.body = zlib.decompress(response.body, 16 + zlib.MAX_WBITS)
                return response
        raise AssertionError("unreachable")

    async def aclose(self) -> None:
        for conn in self._idle:
            conn.close()
        self._idle.clear()
