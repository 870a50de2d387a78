"""Run one async test body under asyncio or trio against the matching adapter's ``serve``.

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

import trio
import trio.testing

from mrtr_sansio import RequestReceived, ServerConfig
from mrtr_sansio.adapters import Handler, HandlerResult, RequestContext
from mrtr_sansio.adapters import asyncio as asyncio_adapter
from mrtr_sansio.adapters import trio as trio_adapter

from .scenarios import CONFIG, TIMEOUT, Transcript, answer_plain, chat, text


class Gate(Protocol):
    def set(self) -> None: ...
    def is_set(self) -> bool: ...
    async def wait(self) -> Any: ...


class Peer(Protocol):
    transcript: Transcript

    async def send(self, *messages: dict[str, Any]) -> None: ...
    async def send_raw(self, data: bytes) -> None: ...
    async def recv(self) -> dict[str, Any]: ...
    async def close_input(self) -> None: ...
    async def wait_closed(self) -> None: ...


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
            plain = answer_plain(request)
            if plain is not None:
                return plain
            if request.name == "chatty":
                return chat(ctx)
            if request.name == "slow":
                await self.gate.wait()
                return text("slow")
            if request.name == "hang":
                self.started.set()
                try:
                    await self.never.wait()
                finally:
                    self.cancelled.set()
            if request.name == "nap":
                await ctx.sleep(0)
                return text("rested")
            return request.unknown()

        return handler


class Harness(Protocol):
    name: str

    def event(self) -> Gate: ...
    def run(self, body: Callable[[], Awaitable[None]]) -> None: ...
    async def wait(self, gate: Gate) -> None: ...
    def session(
        self, handler: Handler, config: ServerConfig | None = CONFIG
    ) -> Any:  # an async context manager yielding a Peer
        ...


# --- asyncio --------------------------------------------------------------------------------


class AsyncioPeer:
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, server: asyncio.Task[None]
    ) -> None:
        self.transcript = Transcript()
        self._reader = reader
        self._writer = writer
        self.server = server

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    async def send_raw(self, data: bytes) -> None:
        self._writer.write(data)
        await self._writer.drain()

    async def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            data = await asyncio.wait_for(self._reader.read(65536), TIMEOUT)
            assert data, "the server closed its output"
            self.transcript.feed(data)
        return msg

    async def close_input(self) -> None:
        if self._writer.can_write_eof() and not self._writer.is_closing():
            self._writer.write_eof()

    async def wait_closed(self) -> None:
        await asyncio.wait_for(asyncio.shield(self.server), TIMEOUT)


class AsyncioHarness:
    name = "asyncio"

    def event(self) -> Gate:
        return asyncio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        asyncio.run(main())

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


class TrioPeer:
    def __init__(self, stream: trio.abc.Stream, done: trio.Event) -> None:
        self.transcript = Transcript()
        self._stream = stream
        self._done = done
        self._closed = False

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.send_raw(b"".join(self.transcript.encode(m) for m in messages))

    async def send_raw(self, data: bytes) -> None:
        await self._stream.send_all(data)

    async def recv(self) -> dict[str, Any]:
        while (msg := self.transcript.next_line()) is None:
            with trio.fail_after(TIMEOUT):
                data = await self._stream.receive_some(65536)
            assert data, "the server closed its output"
            self.transcript.feed(bytes(data))
        return msg

    async def close_input(self) -> None:
        if not self._closed:
            self._closed = True
            assert isinstance(self._stream, trio.StapledStream)
            await self._stream.send_stream.aclose()

    async def wait_closed(self) -> None:
        with trio.fail_after(TIMEOUT):
            await self._done.wait()


class TrioHarness:
    name = "trio"

    def event(self) -> Gate:
        return trio.Event()

    def run(self, body: Callable[[], Awaitable[None]]) -> None:
        async def main() -> None:
            await body()

        trio.run(main)

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
