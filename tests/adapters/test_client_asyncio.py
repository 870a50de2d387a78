"""What only the asyncio client has: a stream that cannot half-close, a read that fails, and
the race of a cancelled awaiting task with the call's last answer. (The shared scenarios are
in test_clients_async.py.)"""

from __future__ import annotations

import asyncio
import json
import socket

import pytest
from stream_harness import (
    AsyncioLib,
    FixtureServer,
    sealed_config,
)

import mrtr_sansio as m
from mrtr_sansio.adapters import ConnectionClosedError
from mrtr_sansio.adapters.asyncio import AsyncioStream, Client

LIB = AsyncioLib()
MODERN = m.ClientConfig(era="modern")


def test_stream_that_cannot_half_close() -> None:
    """Without ``write_eof`` the client ends its output by closing the writer; the server
    sees the end of its input all the same."""

    async def main() -> None:
        server = FixtureServer(LIB.event)
        async with LIB.pair(server.handle, sealed_config(), MODERN) as session:
            client = session.client
            assert isinstance(client, Client)
            stream = client._stream
            assert isinstance(stream, AsyncioStream)
            writer = stream._writer
            writer.can_write_eof = lambda: False  # type: ignore[method-assign]
            assert (await client.list_tools())["tools"]
        assert writer.is_closing()

    LIB.run(main)


def test_failed_read_ends_the_input() -> None:
    async def main() -> None:
        reader = asyncio.StreamReader()
        reader.set_exception(ConnectionResetError())
        ours, theirs = socket.socketpair()
        _, writer = await asyncio.open_connection(sock=ours)
        try:
            async with Client.connect(reader, writer, MODERN, shutdown_timeout=1) as client:
                with pytest.raises(ConnectionClosedError):
                    await client.call_tool("anything")
        finally:
            writer.close()
            theirs.close()

    LIB.run(main)


def test_answer_racing_a_cancelled_call() -> None:
    """The awaiting task is cancelled, and the call's answer is read before the task runs
    again: the answer is dropped and the task ends cancelled."""

    async def main() -> None:
        server = FixtureServer(LIB.event)
        async with LIB.pair(server.handle, sealed_config(), MODERN) as session:
            client = session.client
            assert isinstance(client, Client)
            call = session.spawn(lambda: client.call_tool("hang"))
            await LIB.wait(server.started)
            (leg,) = session.wire.legs("hang")
            call.cancel()
            answer = {"jsonrpc": "2.0", "id": leg["id"], "result": {"content": []}}
            client._driver.receive(json.dumps(answer).encode() + b"\n")
            await LIB.wait(call.done)
            assert call.cancelled
            assert not client._driver.outcomes
            assert not session.wire.sent("notifications/cancelled")  # it had ended

    LIB.run(main)
