"""adapter.onewrite: the writes of one event-loop turn leave together, and nothing kept is lost
when the connection closes in that turn (real loopback connections)."""

from __future__ import annotations

import asyncio

from adapter.onewrite import LIMIT, Corked


async def _pair() -> tuple[asyncio.Transport, asyncio.StreamReader, asyncio.Server]:
    """A client transport connected to a server whose reader the test reads."""
    accepted: asyncio.Future[asyncio.StreamReader] = asyncio.get_running_loop().create_future()

    async def on_client(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.set_result(reader)

    server = await asyncio.start_server(on_client, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport, _ = await asyncio.get_running_loop().create_connection(asyncio.Protocol, "127.0.0.1", port)
    return transport, await accepted, server


class _Counting:
    """A transport that counts the writes it is given (and passes them on)."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self.transport, self.writes = transport, []

    def write(self, data: bytes) -> None:
        self.writes.append(data)
        self.transport.write(data)

    def __getattr__(self, name: str):
        return getattr(self.transport, name)


async def test_writes_of_one_turn_reach_the_transport_as_one():
    transport, reader, server = await _pair()
    counting = _Counting(transport)
    corked = Corked(counting, asyncio.get_running_loop())
    try:
        corked.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n")
        corked.write(b"{}")
        assert counting.writes == []  # kept until the turn ends
        await asyncio.sleep(0)
        assert counting.writes == [b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}"]
        corked.write(b"next")
        await asyncio.sleep(0)
        assert counting.writes[1:] == [b"next"]
        sent = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\n{}next"
        assert await reader.readexactly(len(sent)) == sent
    finally:
        corked.close()
        server.close()


async def test_closing_in_the_same_turn_sends_what_is_kept_first():
    transport, reader, server = await _pair()
    corked = Corked(transport, asyncio.get_running_loop())
    corked.write(b"connection: close\r\n\r\n")
    corked.write(b"bye")
    corked.close()
    assert corked.is_closing()
    assert await reader.read() == b"connection: close\r\n\r\nbye"  # all of it, then EOF
    server.close()


async def test_a_large_answer_is_not_held_back_so_flow_control_still_holds():
    """Past LIMIT bytes in one turn the writes go at once: a streamed answer that never yields
    still reaches the transport (and its pause_writing) instead of piling up in the wrapper."""
    transport, reader, server = await _pair()
    counting = _Counting(transport)
    corked = Corked(counting, asyncio.get_running_loop())
    chunk = b"x" * (LIMIT // 4)
    try:
        for _ in range(4):
            corked.write(chunk)
        assert counting.writes == [chunk * 4]  # in this turn, as one write
        assert corked.get_write_buffer_size() == transport.get_write_buffer_size()
        corked.write(b"tail")
        await asyncio.sleep(0)
        assert counting.writes[1:] == [b"tail"]
        assert await reader.readexactly(LIMIT + 4) == chunk * 4 + b"tail"
    finally:
        corked.close()
        server.close()
