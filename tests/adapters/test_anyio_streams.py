"""The anyio adapter's own streams, on asyncio and on trio: ``StdioStream`` on pipes (a full
pipe, a gone reader, use after close), the client over a plain anyio stream, and the edges of
the asyncio and trio stream wrappers."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
from collections.abc import Awaitable, Callable

import anyio
import pytest
import trio
import trio.testing
from anyio.abc import SocketAttribute
from stream_harness import (
    TIMEOUT,
    FixtureServer,
    sealed_config,
)

import mrtr_sansio as m
from mrtr_sansio.adapters.anyio import Client, StdioStream, serve_tcp
from mrtr_sansio.adapters.asyncio import AsyncioStream
from mrtr_sansio.adapters.trio import TrioStream

BACKENDS = ["asyncio", "trio"]


def run(backend: str, main: Callable[[], Awaitable[None]]) -> None:
    async def bounded() -> None:
        with anyio.fail_after(TIMEOUT):
            await main()

    anyio.run(bounded, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdio_stream_waits_for_a_full_pipe_and_for_input(backend: str) -> None:
    """More than a pipe holds is written whole while a slow reader drains it; a read with
    nothing there yet waits for input; blocking mode is put back on close."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    payload = bytes(range(256)) * 4096  # 1 MiB: far more than a pipe buffer
    received = bytearray()

    def drain() -> None:
        while len(received) < len(payload):
            chunk = os.read(out_r, 65536)
            assert chunk
            received.extend(chunk)
        os.write(in_w, b"after")

    async def main() -> None:
        stream = StdioStream(in_r, out_w)
        assert not os.get_blocking(in_r)
        reader = threading.Thread(target=drain)
        reader.start()
        try:
            await stream.send(payload)
            assert await stream.receive() == b"after"  # waited: written once all was read
        finally:
            await stream.aclose()
            await anyio.to_thread.run_sync(reader.join, TIMEOUT)

    try:
        run(backend, main)
        assert bytes(received) == payload
        assert os.get_blocking(in_r)
        assert os.get_blocking(out_w)
    finally:
        for fd in (in_r, in_w, out_r, out_w):
            os.close(fd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_stdio_stream_errors(backend: str) -> None:
    """A gone reader and an unreadable descriptor break the stream; after ``send_eof`` nothing
    more is sent; after ``aclose`` nothing is read, and closing again is harmless."""
    in_r, in_w = os.pipe()
    out_r, out_w = os.pipe()
    os.close(out_r)  # nobody reads our output

    async def main() -> None:
        stream = StdioStream(in_r, out_w)
        with pytest.raises(anyio.BrokenResourceError):
            await stream.send(b"lost\n")
        await stream.send_eof()
        with pytest.raises(anyio.ClosedResourceError):
            await stream.send(b"late\n")
        await stream.aclose()
        await stream.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await stream.receive()
        backwards = StdioStream(out_w, in_r)  # reading a write end, writing a read end
        with pytest.raises(anyio.BrokenResourceError):
            await backwards.receive()
        with pytest.raises(anyio.BrokenResourceError):
            await backwards.send(b"x")
        await backwards.aclose()

    try:
        run(backend, main)
    finally:
        for fd in (in_r, in_w, out_w):
            os.close(fd)


@pytest.mark.parametrize("backend", BACKENDS)
def test_client_over_a_plain_anyio_stream(backend: str) -> None:
    async def main() -> None:
        server = FixtureServer(anyio.Event)
        async with anyio.create_task_group() as tasks:
            listener = await tasks.start(serve_tcp, server.handle, sealed_config(), "127.0.0.1", 0)
            port = listener.extra(SocketAttribute.local_port)
            async with (
                await anyio.connect_tcp("127.0.0.1", port) as stream,
                Client.connect(stream, m.ClientConfig(era="modern")) as client,
            ):
                assert (await client.list_tools())["tools"]
            tasks.cancel_scope.cancel()

    run(backend, main)


def test_asyncio_stream_edges() -> None:
    """A closing writer refuses sends, ``send_eof`` on it does nothing, ``aclose`` closes."""

    async def main() -> None:
        ours, theirs = socket.socketpair()
        reader, writer = await asyncio.open_connection(sock=ours)
        stream = AsyncioStream(reader, writer)
        await stream.aclose()
        assert writer.is_closing()
        with pytest.raises(anyio.BrokenResourceError):
            await stream.send(b"x")
        await stream.send_eof()
        theirs.close()

    asyncio.run(main())


def test_trio_stream_edges() -> None:
    """Sends on a closed trio stream fail as anyio's errors; ``aclose`` closes it."""

    async def main() -> None:
        ours, theirs = trio.testing.memory_stream_pair()
        stream = TrioStream(ours)
        await stream.aclose()
        with pytest.raises(anyio.ClosedResourceError):
            await stream.send(b"x")
        await theirs.aclose()
        other, gone = trio.testing.memory_stream_pair()
        await gone.aclose()
        with pytest.raises(anyio.BrokenResourceError):
            await TrioStream(other).send(b"x")
        await other.aclose()

    trio.run(main)
