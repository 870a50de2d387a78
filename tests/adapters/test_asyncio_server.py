"""What only the asyncio server adapter has: TCP, pipe transports, a broken output, and being
cancelled from outside. (The shared scenarios are in test_async_servers.py.)"""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from anyio.abc import SocketAttribute
from stream_harness import (
    CONFIG,
    TIMEOUT,
    AsyncioHarness,
    AsyncioPeer,
    Probe,
    Transcript,
    initialize,
    initialize_result,
    modern_call,
    result,
    text,
)

from mrtr_sansio.adapters.asyncio import serve, serve_tcp


class TcpClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.transcript = Transcript()
        self.reader = reader
        self.writer = writer

    async def send(self, *messages: dict[str, Any]) -> None:
        self.writer.write(b"".join(self.transcript.encode(m) for m in messages))
        await self.writer.drain()

    async def recv(self) -> dict[str, Any]:
        line = await asyncio.wait_for(self.reader.readline(), TIMEOUT)
        self.transcript.feed(line)
        msg = self.transcript.next_line()
        assert msg is not None
        return msg


def test_serve_tcp_gives_each_connection_its_own_state() -> None:
    probe = Probe(asyncio.Event)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            listener = await tasks.start(serve_tcp, probe.handler(), CONFIG, "127.0.0.1", 0)
            port = listener.extra(SocketAttribute.local_port)
            one = TcpClient(*await asyncio.open_connection("127.0.0.1", port))
            two = TcpClient(*await asyncio.open_connection("127.0.0.1", port))
            # A legacy session on one connection, modern requests on the other.
            await one.send(initialize(0))
            assert await one.recv() == initialize_result(0)
            await two.send(modern_call(0, "slow"), modern_call(1, "fast"))
            assert await two.recv() == result(1, text("fast"))
            await one.send(initialize(1))  # this connection is initialized already
            assert (await one.recv())["error"]["code"] == -32600
            # Stopping the server cancels the hanging handler and closes both connections.
            tasks.cancel_scope.cancel()
        assert await asyncio.wait_for(one.reader.read(), TIMEOUT) == b""
        assert await asyncio.wait_for(two.reader.read(), TIMEOUT) == b""
        one.writer.close()
        two.writer.close()
        assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())
    assert not probe.gate.is_set()


class PipeClient:
    """The client's ends of the two pipes a pipe server uses."""

    def __init__(self, write_fd: int, read_fd: int) -> None:
        self.transcript = Transcript()
        self.open_fds = {write_fd, read_fd}
        self.write_fd = write_fd
        self.read_fd = read_fd

    def send(self, *messages: dict[str, Any]) -> None:
        os.write(self.write_fd, b"".join(self.transcript.encode(m) for m in messages))

    async def recv(self) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        while (msg := self.transcript.next_line()) is None:
            read = loop.run_in_executor(None, os.read, self.read_fd, 65536)
            self.transcript.feed(await asyncio.wait_for(read, TIMEOUT))
        return msg

    def close(self, fd: int) -> None:
        self.open_fds.remove(fd)
        os.close(fd)


@asynccontextmanager
async def pipe_server(probe: Probe) -> AsyncIterator[tuple[asyncio.Task[None], PipeClient]]:
    """``serve`` on two new pipes, through asyncio's own pipe transports (a reader/writer pair)."""
    loop = asyncio.get_running_loop()
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    reader = asyncio.StreamReader()
    read_transport, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_r, "rb", buffering=0)
    )
    write_transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(out_w, "wb", buffering=0)
    )
    writer = asyncio.StreamWriter(write_transport, protocol, None, loop)
    server = asyncio.create_task(serve(probe.handler(), CONFIG, reader, writer))
    client = PipeClient(in_w, out_r)
    try:
        yield server, client
    finally:
        server.cancel()
        await asyncio.gather(server, return_exceptions=True)
        read_transport.close()
        write_transport.close()
        for fd in list(client.open_fds):
            client.close(fd)


def test_broken_output_ends_serve_while_input_stays_open() -> None:
    """The client stops reading but keeps our input open: serve must notice and return."""
    probe = Probe(asyncio.Event)

    async def main() -> None:
        async with pipe_server(probe) as (server, client):
            client.close(client.read_fd)
            client.send(modern_call(1, "hang"))
            await AsyncioHarness().wait(probe.started)
            client.send(modern_call(2, "fast"))  # its answer cannot go out
            await asyncio.wait_for(server, TIMEOUT)
            assert probe.cancelled.is_set()
            assert asyncio.all_tasks() == {asyncio.current_task()}

    asyncio.run(main())


def test_pipes_carry_a_whole_exchange() -> None:
    probe = Probe(asyncio.Event)

    async def main() -> None:
        async with pipe_server(probe) as (server, client):
            client.send(modern_call(1, "fast"))
            assert await client.recv() == result(1, text("fast"))
            client.close(client.write_fd)
            await asyncio.wait_for(server, TIMEOUT)

    asyncio.run(main())


def test_cancelling_serve_cancels_its_handlers() -> None:
    probe = Probe(asyncio.Event)

    async def main() -> None:
        harness = AsyncioHarness()
        async with harness.session(probe.handler()) as peer:
            await peer.send(modern_call(1, "hang"))
            await harness.wait(probe.started)
            assert isinstance(peer, AsyncioPeer)
            server = peer.server
            server.cancel()
            with pytest.raises(asyncio.CancelledError):
                await server
            assert probe.cancelled.is_set()

    asyncio.run(main())


def test_connection_reset_mid_request_ends_that_connection() -> None:
    """A TCP reset (not a clean end of input) is taken as the end of input."""
    probe = Probe(asyncio.Event)

    async def main() -> None:
        async with anyio.create_task_group() as tasks:
            listener = await tasks.start(serve_tcp, probe.handler(), CONFIG, "127.0.0.1", 0)
            port = listener.extra(SocketAttribute.local_port)
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(Transcript().encode(modern_call(1, "hang")))
            await AsyncioHarness().wait(probe.started)
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # closes with linger 0: the server gets a reset
            await AsyncioHarness().wait(probe.cancelled)
            # The server goes on serving new connections.
            two = TcpClient(*await asyncio.open_connection("127.0.0.1", port))
            await two.send(modern_call(1, "fast"))
            assert await two.recv() == result(1, text("fast"))
            tasks.cancel_scope.cancel()
        two.writer.close()

    asyncio.run(main())
