"""Run one async test body under asyncio or trio against the anyio adapter, through the module
that takes that library's own streams (``asyncio.serve``, ``trio.serve``).

Each harness connects a test client to ``serve`` over an in-memory stream (a socketpair for
asyncio, ``trio.testing.memory_stream_pair`` for trio), gives the test a :class:`Peer`, and on
exit closes the client's side, waits for ``serve`` to return and checks that no task is left.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
import trio
import trio.testing
from stream_scenarios import (
    CONFIG,
    INITIALIZED,
    TIMEOUT,
    Transcript,
    answer_plain,
    initialize,
    initialize_result,
    text,
)

from mrtr_sansio import RequestReceived, ServerConfig
from mrtr_sansio.adapters import Handler, HandlerResult, RequestContext
from mrtr_sansio.adapters import anyio as anyio_adapter
from mrtr_sansio.adapters import asyncio as asyncio_adapter
from mrtr_sansio.adapters import trio as trio_adapter


class Gate(Protocol):
    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> Any: ...


class Peer:
    """A test client: ``send``/``recv`` whole messages (checked by its transcript)."""

    def __init__(self) -> None:
        self.transcript = Transcript()

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    async def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            data = await self._receive()
            assert data, "the server closed its output"
            self.transcript.feed(data)
        return msg

    async def send_raw(self, data: bytes) -> None:
        raise NotImplementedError

    async def _receive(self) -> bytes:
        """The next bytes from the server (b"" at its end), failing after TIMEOUT."""
        raise NotImplementedError

    async def close_input(self) -> None:
        raise NotImplementedError

    async def vanish(self) -> None:
        """Close the connection at once, unread input and all."""
        raise NotImplementedError

    async def wait_closed(self) -> None:
        raise NotImplementedError


async def open_legacy(peer: Peer) -> None:
    """Start a legacy session: ``initialize`` (id 0), answered, then ``initialized``."""
    await peer.send(initialize(0))
    assert await peer.recv() == initialize_result(0)
    await peer.send(INITIALIZED)


class Probe:
    """What the test handler saw, and the gates a test opens or watches."""

    def __init__(self, event: Callable[[], Gate]) -> None:
        self.gate = event()  # "slow" waits for it
        self.never = event()  # "hang" waits for it (nobody sets it)
        self.started = event()  # "hang" is running
        self.cancelled = event()  # "hang" was cancelled
        self.calls: list[RequestReceived] = []

    def handler(self) -> Handler:
        async def handler(request: RequestReceived, ctx: RequestContext) -> HandlerResult:
            self.calls.append(request)
            plain = answer_plain(request, ctx)
            if plain is not None:
                return plain
            if request.name == "slow":
                await self.gate.wait()
                return text("slow")
            if request.name == "hang":
                self.started.set()
                try:
                    await self.never.wait()
                finally:
                    self.cancelled.set()
            if request.name == "print":
                print("stray output")  # must not reach the protocol stream
                return text("printed")
            if request.name == "nap":
                assert request.request_id in ctx.connection.in_flight
                await ctx.sleep(0.01)
                return text("rested")
            return request.unknown()

        return handler


class Harness:
    """Runs test bodies under one async library against its adapter."""

    name: str

    def event(self) -> Gate:
        raise NotImplementedError

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        raise NotImplementedError

    async def wait(self, gate: Gate) -> None:
        raise NotImplementedError

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        """Run the adapter's ``serve_stdio`` on this process's stdin/stdout until stdin ends."""
        raise NotImplementedError

    def session(self, handler: Handler, config: ServerConfig | None = CONFIG) -> Any:
        """An async context manager: ``serve`` running, and a :class:`Peer` talking to it."""
        raise NotImplementedError

    def serve(
        self,
        probe: Probe,
        body: Callable[[Peer], Awaitable[None]],
        config: ServerConfig | None = CONFIG,
    ) -> None:
        """Run ``body`` with a peer of a server whose handler is ``probe``'s."""

        async def main() -> None:
            async with self.session(probe.handler(), config) as peer:
                await body(peer)

        self.run(main)


# --- asyncio --------------------------------------------------------------------------------


class AsyncioPeer(Peer):
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server: asyncio.Task[None]
    ) -> None:
        super().__init__()
        self._reader = reader
        self._writer = writer
        self.server = server

    async def send_raw(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def _receive(self) -> bytes:
        return await asyncio.wait_for(self._reader.read(65536), TIMEOUT)

    async def close_input(self) -> None:
        if self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    async def vanish(self) -> None:
        self._writer.transport.abort()

    async def wait_closed(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.server), TIMEOUT)


class AsyncioHarness(Harness):
    name = "asyncio"

    def event(self) -> Gate:
        return asyncio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        asyncio.run(main())

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        anyio.run(anyio_adapter.serve_stdio, handler, config, backend="asyncio")

    async def wait(self, gate: Gate) -> None:
        await asyncio.wait_for(gate.wait(), TIMEOUT)

    @asynccontextmanager
    async def session(
        self, handler: Handler, config: ServerConfig | None = CONFIG
    ) -> AsyncIterator[Peer]:
        server_sock, client_sock = socket.socketpair()
        s_reader, s_writer = await asyncio.open_connection(sock=server_sock)
        c_reader, c_writer = await asyncio.open_connection(sock=client_sock)
        server = asyncio.create_task(asyncio_adapter.serve(handler, config, s_reader, s_writer))
        peer = AsyncioPeer(c_reader, c_writer, server)
        try:
            yield peer
            if not server.done():
                await peer.close_input()
                await peer.wait_closed()
            assert not peer.transcript.leftover
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)
            s_writer.close()
            c_writer.close()
        if not server.cancelled():
            server.result()  # serve() itself must not fail
        assert asyncio.all_tasks() == {asyncio.current_task()}, "a task was left behind"


# --- trio -----------------------------------------------------------------------------------


class TrioPeer(Peer):
    def __init__(self, stream: trio.abc.Stream, done: trio.Event) -> None:
        super().__init__()
        self._stream = stream
        self._done = done
        self._closed = False

    async def send_raw(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def _receive(self) -> bytes:
        with trio.fail_after(TIMEOUT):
            return bytes(await self._stream.receive_some(65536))

    async def close_input(self) -> None:
        if not self._closed:
            self._closed = True
            assert isinstance(self._stream, trio.StapledStream)
            await self._stream.send_stream.aclose()

    async def vanish(self) -> None:
        self._closed = True
        await self._stream.aclose()

    async def wait_closed(self) -> None:
        with trio.fail_after(TIMEOUT):
            await self._done.wait()


class TrioHarness(Harness):
    name = "trio"

    def event(self) -> Gate:
        return trio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        trio.run(main)

    def run_stdio(self, handler: Handler, config: ServerConfig | None = CONFIG) -> None:
        anyio.run(anyio_adapter.serve_stdio, handler, config, backend="trio")

    async def wait(self, gate: Gate) -> None:
        with trio.fail_after(TIMEOUT):
            await gate.wait()

    @asynccontextmanager
    async def session(
        self, handler: Handler, config: ServerConfig | None = CONFIG
    ) -> AsyncIterator[Peer]:
        server_stream, client_stream = trio.testing.memory_stream_pair()
        done = trio.Event()

        async def run_server() -> None:
            await trio_adapter.serve(handler, config, server_stream)
            done.set()

        # The nursery exiting is the proof that serve() left no task behind.
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_server)
            peer = TrioPeer(client_stream, done)
            yield peer
            await peer.close_input()
            await peer.wait_closed()
            assert not peer.transcript.leftover


HARNESSES = [AsyncioHarness(), TrioHarness()]
