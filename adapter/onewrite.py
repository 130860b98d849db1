"""One write per answer: a transport wrapper for uvicorn's HTTP protocols.

uvicorn writes a response's status line and headers as soon as the app sends
`http.response.start`, then its body: two writes, so over TLS two records, two `send` calls and two
wake-ups of the client for one small answer. `Corked` keeps the writes made in one turn of the event
loop and hands them to the transport together at the end of the turn (`call_soon`): the metrics
routes send the start and the body in the same turn, so they leave in one record and one `send`.
Nothing waits longer than that turn; closing sends what is kept first. A large or streamed answer
is not held back: once a turn has kept `LIMIT` bytes they go at once, so the transport's own
flow control (pause_writing past its high-water mark, which uvicorn's drain waits on) still holds.
"""

from __future__ import annotations

import asyncio
from typing import Any

__all__ = ["LIMIT", "Corked", "corked"]

LIMIT = 64 * 1024  # asyncio's default write high-water mark: more than this kept leaves at once


class Corked:
    """`transport` with the writes of one event-loop turn joined into one."""

    def __init__(self, transport: Any, loop: asyncio.AbstractEventLoop) -> None:
        self._transport, self._loop = transport, loop
        self._kept: list[bytes] = []
        self._size = 0

    def write(self, data: bytes) -> None:
        if not self._kept:
            self._loop.call_soon(self.flush)
        self._kept.append(data)
        self._size += len(data)
        if self._size >= LIMIT:
            self.flush()

    def writelines(self, lines: Any) -> None:
        for data in lines:
            self.write(data)

    def flush(self) -> None:
        if self._kept:
            data = self._kept[0] if len(self._kept) == 1 else b"".join(self._kept)
            self._kept.clear()
            self._size = 0
            if not self._transport.is_closing():
                self._transport.write(data)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._kept.clear()
        self._size = 0
        self._transport.abort()

    def get_write_buffer_size(self) -> int:
        return self._size + self._transport.get_write_buffer_size()

    def __getattr__(self, name: str) -> Any:  # everything else: the transport's own
        return getattr(self._transport, name)


def corked(protocol_cls: type) -> type:
    """A subclass of a uvicorn HTTP protocol class whose transport is `Corked`."""

    class CorkedProtocol(protocol_cls):
        def connection_made(self, transport: Any) -> None:
            super().connection_made(Corked(transport, asyncio.get_running_loop()))

    CorkedProtocol.__name__ = CorkedProtocol.__qualname__ = f"Corked{protocol_cls.__name__}"
    return CorkedProtocol
