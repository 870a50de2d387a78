"""What only the trio client has: a stream that cannot half-close (the client closes it, and
its own reader sees it closed). (The shared scenarios are in test_clients_async.py.)"""

from __future__ import annotations

import trio
import trio.testing
from stream_harness import (
    FixtureServer,
    TrioLib,
    sealed_config,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import trio as trio_adapter

LIB = TrioLib()


class WholeStream(trio.abc.Stream):
    """A stream with no ``send_eof``: ending the output means closing it."""

    def __init__(self, inner: trio.abc.Stream) -> None:
        self.inner = inner

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.inner.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.inner.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        return await self.inner.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_stream_that_cannot_half_close() -> None:
    async def main() -> None:
        server = FixtureServer(LIB.event)
        server_stream, client_stream = trio.testing.memory_stream_pair()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(trio_adapter.serve, server.handle, sealed_config(), server_stream)
            stream = WholeStream(client_stream)
            async with trio_adapter.Client.connect(
                stream, m.ClientConfig(era="auto"), shutdown_timeout=5
            ) as client:
                assert (await client.list_tools())["tools"]
            # The server saw the end of its input: serve() returned, the nursery can close.

    LIB.run(main)
